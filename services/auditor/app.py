"""The auditor service (``coffre auditor``): a faust-streaming app beside the vault.

One agent reads ``<prefix>events.normalized`` and ``<prefix>receipts`` (co-partitioned: both
keyed by ``str(IDCoffre)``, with the same partition count), audits each recorded event once,
joins its findings with the receipt's chain hash, and publishes them to ``<prefix>audit``.
Its state (the money trail, the findings waiting for their receipt, the receipts that came
first) is one faust table, in memory, with its changelog topic: a restart recovers it from
there. It is its own process and consumer group: it never holds an acquittal back. The design
is in services/auditor/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import faust
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka

from coffre import metrics
from coffre.adapters.kafka import (
    Security,
    TopicMismatchError,
    ensure_topics,
    read_end_offsets,
    read_span,
    span_reader,
)
from coffre.adapters.kafka_security import check_kafka_access, client_options, faust_credentials, principal_of
from coffre.adapters.keys import record_keys
from coffre.adapters.stream import ensure_coffre_topics
from coffre.config import Settings, configuration_error
from coffre.domain.audit.events import audit_event
from coffre.domain.audit.house import HouseRules
from coffre.domain.authenticity import RecordKeys
from coffre.domain.messages import (
    AuditRecord,
    ForeignRecord,
    InvalidMessage,
    NormalizedEvent,
    Receipt,
    foreign_reason,
)
from coffre.ops import BrokerCheck, Ops

from .join import AuditJoin

log = logging.getLogger("coffre.auditor")
T = TypeVar("T")
STATE_TABLE = "state"
FETCH_WAIT_MS = 500
"""The auditor's fetch wait. Not the recording path's 5 ms: on the embedded broker every fetch
waits its whole wait when there is nothing new, and a consumer polling every 5 ms costs the broker
CPU the recording path needs (bench/fetch_wait.py; bench/pipeline.py --auditor measured the broker
at 102 % of a core with the auditor at 5 ms). A finding may come half a second later; nothing
waits for it."""


def _headers(raw: object) -> list[tuple[str, bytes]]:
    """faust gives a message's headers as a list of pairs or a dict."""
    if not raw:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), v if isinstance(v, bytes) else str(v).encode()) for k, v in items]  # type: ignore[union-attr]


class _LowLatencyConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """faust's consumer thread, with :data:`FETCH_WAIT_MS` instead of faust's fixed 1,500 ms.

    faust-streaming 0.15 hard-codes ``fetch_max_wait_ms=1500`` for its worker consumer, and Tansu
    does not answer a waiting fetch as soon as data arrives: every record would wait up to 1.5 s
    (ingest met it when it ran on faust, before issue 11)."""

    def _create_worker_consumer(
        self, transport: faust_aiokafka.Transport
    ) -> faust_aiokafka.aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_WAIT_MS  # read by start(), for its fetcher
        return consumer

    async def _highwaters(self, partitions: list[faust.types.TP]) -> Mapping[faust.types.TP, int]:
        reported = await super()._highwaters(partitions)
        app: AuditorApp = self.app  # type: ignore[assignment]
        return await true_end_offsets(app.bootstrap, reported, app.security)


async def true_end_offsets(
    bootstrap: str, reported: Mapping[faust.types.TP, int], security: Security | None = None
) -> dict[faust.types.TP, int]:
    """:func:`~coffre.adapters.kafka.read_end_offsets`: faust's table recovery reads a changelog
    partition up to its end offset, and Tansu's can be short of the newest writes (the auditor,
    restarted, lost coffres' newest ``audited`` marks and passed every later event of them over)."""
    if not any(reported.values()):
        return dict(reported)
    async with span_reader(bootstrap, security) as consumer:
        return await read_end_offsets(consumer, reported)  # type: ignore[arg-type]


async def read_back(
    bootstrap: str,
    topic: str,
    partition: int,
    before: int,
    pick: Callable[[ConsumerRecord], tuple[int, T] | None],
    wanted: set[int],
    timeout: float = 30.0,
    security: Security | None = None,
) -> dict[int, T]:
    """What ``pick`` makes of the records of ``topic``'s ``partition`` before offset ``before``, for the
    IDEvt ``wanted``: read backwards by spans growing fourfold (64, 256, … records before
    ``before``) until all are found or the partition's start is reached. What the topic no longer
    holds is not found. ``pick`` gives (IDEvt, value) of a record of the coffre, else None."""
    tp = TopicPartition(topic, partition)
    found: dict[int, T] = {}
    deadline = time.monotonic() + timeout

    async def read(consumer: AIOKafkaConsumer, start: int) -> None:
        spans = {tp: (start, before)}
        async for _, records in read_span(consumer, spans, timeout=max(0.0, deadline - time.monotonic())):
            for r in records:
                if r.offset >= before:
                    return
                picked = pick(r)
                if picked is not None and picked[0] in wanted:
                    found.setdefault(*picked)

    async with span_reader(bootstrap, security) as consumer:
        span = 64
        while True:
            start = max(0, before - span)
            with contextlib.suppress(TimeoutError):
                await read(consumer, start)
            if set(found) >= wanted or start == 0 or time.monotonic() >= deadline:
                return found
            span *= 4


def _event_of(
    id_oper: str, id_coffre: int, keys: RecordKeys
) -> Callable[[ConsumerRecord], tuple[int, Any] | None]:
    def pick(r: ConsumerRecord) -> tuple[int, Any] | None:
        headers = [(k, v) for k, v in r.headers or ()]
        try:
            m = NormalizedEvent.from_record(r.key, r.value or b"", headers, keys)
        except InvalidMessage:
            return None
        return (
            (m.id_evt, (r.value or b"", headers))
            if (m.id_oper, m.id_coffre) == (id_oper, id_coffre)
            else None
        )

    return pick


def _receipt_of(
    id_oper: str, id_coffre: int, keys: RecordKeys
) -> Callable[[ConsumerRecord], tuple[int, Any] | None]:
    def pick(r: ConsumerRecord) -> tuple[int, Any] | None:
        try:
            receipt = Receipt.from_record(r.key, r.value or b"", list(r.headers or ()), keys)
        except InvalidMessage:
            return None
        same = (receipt.id_oper, receipt.id_coffre) == (id_oper, id_coffre)
        return (receipt.id_evt, receipt.chain_hash) if same else None

    return pick


class _LowLatencyConsumer(faust_aiokafka.Consumer):
    """faust's consumer, with :class:`_LowLatencyConsumerThread`, and no record handed to the streams
    while it seeks back to the committed offsets.

    faust 0.15's recovery ends (``Recovery.on_recovery_completed``) by resuming the stream partitions,
    seeking them to their committed offsets (:meth:`perform_seek`: aiokafka asks each partition's
    committed offset in turn, one round trip each, and seeks it), then ``app.flow_control.resume()``,
    which empties every stream's queue, then ``resume_flow()``. After a restart with a changelog to
    read, its fetcher runs already (started to read the changelog): records it fetched past a
    partition's seek while the next partitions' offsets were asked went to a stream's queue that the
    resume emptied, and the position had moved past them. They were never handed out again, and the
    next record's offset jump was taken for a gap of the log and committed past (issue 30: an auditor
    SIGKILLed and started again never audited a coffre's last events; tests/services/test_auditor_seek.py).
    With the flow stopped first, nothing is handed out until ``resume_flow()``, after the queues were
    emptied, and then from the offsets just seeked to."""

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _LowLatencyConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def perform_seek(self) -> None:
        # every caller resumes the flow after it: the recovery (after emptying the streams' queues),
        # and faust's getmany, which seeks when it finds the flow stopped by a rebalance
        self.stop_flow()
        await super().perform_seek()


class _FlushingProducer(faust_aiokafka.Producer):
    """faust's producer, whose flush empties its buffer before it returns.

    faust flushes its producer before it commits offsets, but its buffer's flush returns after
    0.1 s without a message sent, whatever it still holds: under load, offsets were committed
    while the table's newest changelog writes were still in the buffer, and a SIGKILL then lost
    them for good (the restart test: coffres whose ``audited`` mark went back, their later events
    passed over as ahead of the chain)."""

    async def flush(self) -> None:
        while self.buffer.size:
            await self.buffer.flush()
        if self._producer is not None:
            await self._producer.flush()


class _LowLatencyTransport(faust_aiokafka.Transport):
    Consumer = _LowLatencyConsumer
    Producer = _FlushingProducer


class AuditorApp(faust.App):
    ops: Ops | None = None
    bootstrap: str = ""
    """coffre's bootstrap servers and security options, for :func:`true_end_offsets`' own consumer."""
    security: Security | None = None

    def _new_transport(self) -> faust_aiokafka.Transport:
        return _LowLatencyTransport(self.conf.broker_consumer, self)

    async def on_stop(self) -> None:
        await super().on_stop()
        if self.ops is not None:
            await self.ops.stop()


def app_id(settings: Settings) -> str:
    """faust's application id: the consumer group, and the prefix of the table's changelog topic."""
    return f"{settings.topic_prefix}auditor"


def changelog_topic(settings: Settings) -> str:
    return f"{app_id(settings)}-{STATE_TABLE}-changelog"


async def ensure_auditor_topics(settings: Settings) -> None:
    """coffre's topics (``<prefix>audit`` among them), and the state table's changelog: compacted,
    with the partitions of the topics it is co-partitioned with (created, or only checked with
    ``COFFRE_KAFKA_CREATE_TOPICS=false``). faust is not let declare topics (it would give them its
    own partition count)."""
    await ensure_coffre_topics(settings)
    try:
        await ensure_topics(
            settings.bootstrap_servers,
            {changelog_topic(settings): settings.partitions},
            replication=settings.replication_factor,
            max_message_bytes=settings.max_message_bytes,
            configs={"cleanup.policy": "compact"},
            security=client_options(settings),
            create=settings.kafka_create_topics,
            principal=principal_of(settings),
        )
    except TopicMismatchError as exc:
        configuration_error(str(exc))


def data_folder(settings: Settings) -> Path:
    """``<data dir>/auditor``, faust's ``datadir``, created with its parents as the other services create
    theirs (faust itself makes only the last folder: ``coffre auditor`` in a folder without ``var`` failed
    with FileNotFoundError); a folder that cannot be made is a configuration error (exit 2)."""
    folder = Path(settings.data_dir) / "auditor"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        configuration_error(f"COFFRE_DATA_DIR: cannot create {folder}: {exc.strerror or exc}")
    return folder


def build_app(settings: Settings) -> AuditorApp:
    topics = settings.topics
    app = AuditorApp(
        app_id(settings),
        broker=";".join(f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(",")),
        store="memory://",
        value_serializer="raw",
        key_serializer="raw",
        datadir=str(Path(settings.data_dir) / "auditor"),
        web_enabled=False,
        topic_allow_declare=False,  # see ensure_auditor_topics
        topic_disable_leader=True,
        topic_partitions=settings.partitions,
        table_standby_replicas=0,
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        broker_commit_interval=0.5,
        broker_max_poll_records=settings.batch_max,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_linger_ms=0,  # faust waits on its changelog sends: a linger slows every table write (20 ms: 303 -> 140 events/s)
        producer_max_request_size=settings.max_message_bytes,
        stream_wait_empty=False,
        broker_credentials=faust_credentials(settings),
    )
    app.bootstrap = settings.bootstrap_servers
    app.security = client_options(settings)
    source = app.topic(
        topics.normalized, topics.receipts, value_serializer="raw", key_serializer="raw", allow_empty=True
    )
    state = app.Table(
        STATE_TABLE,
        default=None,
        partitions=settings.partitions,
        key_type=str,  # keys and values in JSON (faust's default for types that are not records)
    )
    keys = record_keys(settings)
    ops = app.ops = Ops("auditor", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, app.security))

    async def publish(key: bytes, value: bytes) -> None:
        headers = AuditRecord.seal(keys, key, value)
        await app.producer.send_and_wait(topics.audit, key, value, None, None, headers)

    async def fetch_missing(
        partition: int, before: int, id_oper: str, id_coffre: int, wanted: set[int]
    ) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
        pick = _event_of(id_oper, id_coffre, keys)
        found = await read_back(
            settings.bootstrap_servers,
            topics.normalized,
            partition,
            before,
            pick,
            wanted,
            security=app.security,
        )
        return [found[i] for i in sorted(found)]

    async def fetch_receipts(
        partition: int, before: int, id_oper: str, id_coffre: int, wanted: set[int]
    ) -> dict[int, str]:
        pick = _receipt_of(id_oper, id_coffre, keys)
        return await read_back(
            settings.bootstrap_servers,
            topics.receipts,
            partition,
            before,
            pick,
            wanted,
            security=app.security,
        )

    join = AuditJoin(
        state,  # type: ignore[arg-type]
        publish,
        max_message_bytes=settings.max_message_bytes - keys.header_bytes,  # the tag publish adds
        fetch_missing=fetch_missing,
        fetch_receipts=fetch_receipts,
        # the operator's fixed-limit cap (COFFRE_AUDIT_FIXED_LIMIT_BETS; 0: none)
        audit=partial(
            audit_event, rules=HouseRules(fixed_limit_bets=settings.audit_fixed_limit_bets or None)
        ),
    )
    positions: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset to handle

    @app.task
    async def start_ops() -> None:
        await ops.start()
        log.info(
            "auditor ready: auditing %s with %s, findings to %s",
            topics.normalized,
            topics.receipts,
            topics.audit,
        )

    @app.timer(interval=1.0)
    async def measure_lag() -> None:
        for (topic, partition), position in list(positions.items()):
            highwater = app.consumer.highwater(faust.types.TP(topic, partition))
            if highwater is not None:
                metrics.CONSUMER_LAG.labels(topic, str(partition)).set(max(0, highwater - position))

    @app.agent(source)
    async def audit(stream: faust.StreamT[Any]) -> None:
        async for event in stream.events():
            message = event.message
            value, headers = message.value or b"", _headers(message.headers)
            try:
                if message.topic == topics.receipts:
                    Receipt.from_record(message.key, value, headers, keys)
                    await join.on_receipt(value, message.partition, message.offset)
                else:
                    NormalizedEvent.from_record(message.key, value, headers, keys)
                    await join.on_event(value, headers, message.partition, message.offset)
            except ForeignRecord as exc:  # a stranger's: never audited, never joined
                join.counts.foreign += 1
                metrics.FOREIGN_RECORDS.labels("auditor", foreign_reason(exc, message.topic)).inc()
                log.error("passed over %s[%d]@%d: %s", message.topic, message.partition, message.offset, exc)
            except (ValueError, TypeError, KeyError):  # unreadable: never crash
                metrics.UNREADABLE.inc()
                log.error(
                    "passed over an unreadable record at %s[%d] offset %d",
                    message.topic,
                    message.partition,
                    message.offset,
                    exc_info=True,
                )
            positions[(message.topic, message.partition)] = message.offset + 1

    return app


def run(settings: Settings) -> None:
    """``coffre auditor``: its data folder and the topics created, then the faust worker until SIGTERM."""
    data_folder(settings)
    asyncio.run(check_kafka_access(settings))  # a wrong credential or TLS setting: exit 2
    asyncio.run(ensure_auditor_topics(settings))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    app = build_app(settings)
    worker = faust.Worker(
        app,
        loop=loop,
        loglevel=settings.log_level.lower(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,  # coffre.logs set up the JSON logs already
    )
    worker.execute_from_commandline()
