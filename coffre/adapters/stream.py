"""The stream runner: the one consume → step → produce → commit loop of ingest, the vault and the
acquittal service, and what they share around it (topics created, a signal to drain at).

A service is a :data:`Step` (a fetched batch in, the records to publish out) and a few lines of
wiring. Per batch the runner awaits the step, sends its records and waits until the broker
acknowledged every one, then hands the batch's next offsets to the :class:`OffsetCommitter`: a
crash never commits an input whose outputs are not on Kafka. At SIGTERM it finishes the batch in
hand, ticks a last time, flushes the commits and leaves the group."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import re
import signal
import socket
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, KafkaTimeoutError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import ConsumerRecord

from coffre.config import Settings, configuration_error
from coffre.domain.messages import Headers

from .kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    CommitOffsets,
    LagMeter,
    OffsetCommitter,
    TopicMismatchError,
    ensure_topics,
    on_embedded_broker,
    stop_consumer,
    topic_partitions,
    track_leadership,
)
from .kafka_security import client_options, principal_of

log = logging.getLogger("coffre.service")

Record = tuple[str, bytes | None, bytes, Headers, int | None]
"""(topic, key, value, headers, partition) of a record to publish; partition None: by its key
(the producer's partitioner), or any partition without a key."""
Batch = dict[TopicPartition, list[ConsumerRecord]]
Step = Callable[[Batch], Awaitable[list[Record]]]
"""What a service does with a fetched batch: the records to publish for it. A partition the step
deletes from the batch (it did not handle it, and sought back) is not committed."""
Tick = Callable[[bool], Awaitable[None]]
"""Called after every turn of the loop, and once more with ``True`` when draining."""


SEND_RETRY_SECONDS = 60.0
"""How long a batch's records are sent again while the cluster mends a failure (a broker paused or
lost: its partitions' new leaders are elected within seconds) before the service stops."""
_PARTITION_CACHE = 4096
"""Keys whose partition is remembered per topic and partition count (the vault's keys are its
IDCoffre, few and repeated; murmur2 in Python costs more than the rest of a record's sending)."""


@dataclass(slots=True)
class Publisher:
    """A producer that sends records in one record batch per partition."""

    producer: AIOKafkaProducer
    _partitions: dict[tuple[str, int], dict[bytes, int]] = field(default_factory=dict)

    async def send_records(self, records: Iterable[Record], *, ordered: bool = False) -> None:
        """Publish ``records`` and wait until the broker acknowledged every one.

        Each goes to its own partition, or the one the producer's partitioner gives its key, in
        order within a partition, in one record batch per partition (as many as its size needs):
        far less work per record than one ``producer.send`` each. ``ordered``: a partition's next
        batch is sent only once the one before is acknowledged, so that a partition never holds a
        later record without the earlier ones (ingest's forwarded copies: the fold skips a copy
        not above the highest it folded, and a hole would lose an event)."""
        now = int(time.time() * 1000)
        batches: dict[tuple[str, int], list[Any]] = defaultdict(list)  # BatchBuilders, in order
        routes: dict[str, Callable[[bytes | None], int]] = {}
        for topic, key, value, headers, partition in records:
            if partition is None:
                route = routes.get(topic) or routes.setdefault(topic, await self._route(topic))
                partition = route(key)
            builders = batches[(topic, partition)]
            # full (or none yet): begin the next one (a first record always fits)
            if (
                not builders
                or builders[-1].append(timestamp=now, key=key, value=value, headers=headers) is None
            ):
                builders.append(self.producer.create_batch())
                builders[-1].append(timestamp=now, key=key, value=value, headers=headers)

        async def send(topic: str, partition: int, builders: list[Any]) -> None:
            deliveries = []
            for builder in builders:
                deliveries.append(await self.producer.send_batch(builder, topic, partition=partition))
                if ordered:
                    await deliveries[-1]
            await asyncio.gather(*deliveries)

        await asyncio.gather(*(send(t, p, builders) for (t, p), builders in batches.items()))

    async def deliver(
        self, records: list[Record], *, ordered: bool = False, stop: asyncio.Event | None = None
    ) -> None:
        """:meth:`send_records`, again as a whole while the failure is one the cluster mends (a leader
        that stopped answering, an election): for at most SEND_RETRY_SECONDS (or until ``stop`` is
        set), then the failure is raised. Sending a record twice is a redelivery every reader of
        coffre's topics handles: ingest drops a copy already folded or a snapshot it already has, the
        vault records an IDEvt once and sends its receipt again, an acquittal may come twice."""
        deadline = time.monotonic() + SEND_RETRY_SECONDS
        while True:
            try:
                await self.send_records(records, ordered=ordered)
                return
            except KafkaError as exc:
                mended = exc.retriable or isinstance(exc, KafkaTimeoutError)
                if not mended or (stop is not None and stop.is_set()) or time.monotonic() > deadline:
                    raise
                log.warning("sending %d record(s) failed (%r): sending them again", len(records), exc)
                await asyncio.sleep(0.5)

    async def _route(self, topic: str) -> Callable[[bytes | None], int]:
        """The partition of a key on ``topic``: the partitioner's (remembered), any without a key."""
        partitions = sorted(await self.producer.partitions_for(topic))
        if not partitions:
            raise KafkaError(f"no partitions known for {topic!r}")
        known = self._partitions.get((topic, len(partitions)))
        if known is None or len(known) > _PARTITION_CACHE:
            known = self._partitions[(topic, len(partitions))] = {}
        partitioner = getattr(self.producer, "_partitioner", None) or DefaultPartitioner()

        def route(key: bytes | None) -> int:
            if key is None:
                return random.choice(partitions)
            partition = known.get(key)
            if partition is None:
                partition = known[key] = partitioner(key, partitions, partitions)
            return partition

        return route


class _Watched(ConsumerRebalanceListener):
    """A rebalance listener whose failure the loop raises (aiokafka logs and swallows it)."""

    def __init__(self, inner: ConsumerRebalanceListener) -> None:
        self.inner = inner
        self.failure: BaseException | None = None

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._call(self.inner.on_partitions_revoked, revoked)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self._call(self.inner.on_partitions_assigned, assigned)

    async def _call(self, callback: Callable[[list[TopicPartition]], Any], partitions: list) -> None:
        try:
            await callback(partitions)
        except Exception as exc:
            self.failure = exc
            raise


@dataclass(slots=True)
class Stream:
    """A service's clients: the consumer of its group, its publisher and its offset committer.

    ``lock`` is held from a step to the acknowledgement of its records: a rebalance listener
    that must see no output in flight (ingest's snapshot at a revocation) takes it."""

    settings: Settings
    topics: tuple[str, ...]
    consumer: AIOKafkaConsumer
    publisher: Publisher
    committer: OffsetCommitter
    owns: Callable[[int], bool] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def run(
        self,
        step: Step,
        stop: asyncio.Event,
        *,
        listener: ConsumerRebalanceListener | None = None,
        tick: Tick | None = None,
        acknowledged: Callable[[], object] | None = None,
        ordered: bool = False,
        drain_timeout: float | None = None,
        commit_filter: Callable[[dict[TopicPartition, int]], CommitOffsets] | None = None,
    ) -> None:
        """Consume, step, publish and commit until ``stop`` is set, then drain: a last ``tick(True)``
        and the commits flushed (within ``drain_timeout``: a commit waits out a rebalance in progress).
        ``acknowledged`` is called once a batch's records are acknowledged (what counts them).
        ``commit_filter`` maps the offsets a batch was read up to, its records' outputs acknowledged,
        onto those that may be committed, with their metadata (the vault's: never past an unsealed
        event, and the acknowledged position beside)."""
        consumer = self.consumer
        watched = _Watched(listener) if listener is not None else None
        if self.owns is not None:
            assigned = [
                TopicPartition(topic, p)
                for topic in self.topics
                for p in sorted(await topic_partitions(consumer, topic))
                if self.owns(p)
            ]
            consumer.assign(assigned)
            log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in assigned) or "nothing")
        else:
            consumer.subscribe(list(self.topics), listener=watched)
        lag = LagMeter(consumer)
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100, max_records=self.settings.batch_max)
            if watched is not None and watched.failure is not None:
                raise watched.failure
            if batch:
                async with self.lock:
                    records = await step(batch)
                    # the records sent again while the cluster mends a failure (Publisher.deliver);
                    # past that the failure stops the service, nothing of the batch committed
                    await self.publisher.deliver(records, ordered=ordered, stop=stop)
                    offsets = {tp: rs[-1].offset + 1 for tp, rs in batch.items() if rs}
                    self.committer.commit(commit_filter(offsets) if commit_filter is not None else offsets)
                if acknowledged is not None:
                    acknowledged()
            if tick is not None:
                await tick(False)
            await lag.update()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_timeout):
                if tick is not None:
                    await tick(True)
                await self.committer.flush()


async def ensure_coffre_topics(settings: Settings) -> None:
    """coffre's topics, created with their partitions if missing (or only checked, with
    ``COFFRE_KAFKA_CREATE_TOPICS=false``) and checked to take the largest record coffre publishes; a
    topic that does not fit is a configuration error (exit 2). events.in is created to take the
    largest input with its headers (an older or an operator's smaller one only refuses the largest
    inputs to the platform, which hears so at once: nothing jams)."""
    try:
        await ensure_topics(
            settings.bootstrap_servers,
            settings.topic_partitions,
            replication=settings.replication_factor,
            max_message_bytes=settings.max_message_bytes,
            security=client_options(settings),
            create=settings.kafka_create_topics,
            # the largest input with its headers: what an operator's own events.in should take too
            topic_configs={
                settings.topics.events_in: {"max.message.bytes": str(settings.events_in_record_bytes)}
            },
            principal=principal_of(settings),
        )
    except TopicMismatchError as exc:  # TopicsNotCreatable among them: no Create right
        configuration_error(str(exc))


@asynccontextmanager
async def publisher(settings: Settings, **options: Any) -> AsyncIterator[Publisher]:
    """A started producer (``PRODUCER_TUNING``, then ``options``), flushed and stopped on exit."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        **{**PRODUCER_TUNING, **options},
        **client_options(settings),
    )
    await producer.start()
    try:
        yield Publisher(producer)
    finally:
        await producer.stop()


def group_options(
    settings: Settings, session_seconds: float | None = None, *, joins: bool = True
) -> dict[str, Any]:
    """A service's consumer options (:data:`CONSUMER_TUNING`) with its group membership: a session of
    ``session_seconds`` (default ``COFFRE_KAFKA_SESSION_SECONDS``, or ``COFFRE_INGEST_SESSION_SECONDS``
    when unset), heartbeats every sixth of it, and ``COFFRE_KAFKA_GROUP_INSTANCE_ID`` as the static
    member's name when set and the consumer ``joins`` its group (not one assigned its partitions by
    hand, which is no member: docs/operations.md, "Timeouts after a hit")."""
    seconds = session_seconds or settings.kafka_session_seconds or settings.ingest_session_seconds
    session_ms = round(seconds * 1000)
    options = {
        **CONSUMER_TUNING,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": max(100, round(session_ms / 6)),
    }
    if settings.kafka_group_instance_id and joins:
        options["group_instance_id"] = settings.kafka_group_instance_id
    if settings.consumer_fetch_bytes:
        options["max_partition_fetch_bytes"] = settings.consumer_fetch_bytes
    if settings.consumer_fetch_wait_ms is not None:
        options["fetch_max_wait_ms"] = settings.consumer_fetch_wait_ms
    return options


@asynccontextmanager
async def stream(
    settings: Settings,
    group: str,
    *topics: str,
    owns: Callable[[int], bool] | None = None,
    commit_interval: float = 0.0,
    consumer_options: dict[str, Any] | None = None,
    producer_options: dict[str, Any] | None = None,
    leave_as_leader: bool = True,
    stop_timeout: float | None = None,
    session_seconds: float | None = None,
) -> AsyncIterator[Stream]:
    """coffre's topics ensured, then a started consumer in the group ``<prefix><group>`` (offsets
    committed by the runner, nothing subscribed until :meth:`Stream.run`) and a producer; on exit,
    the group left (within ``stop_timeout``) and the producer flushed.

    ``leave_as_leader=False``: on the embedded broker only (:func:`on_embedded_broker`), the group's
    leader does not leave but lets its session expire (see ``leave_as_leader`` in
    :func:`stop_consumer`: Tansu's defect); on Apache Kafka every member leaves.

    With ``owns``, the consumer is assigned the partitions it owns instead of joining the
    group's rebalancing (the group still keeps its committed offsets). ``commit_interval``: the
    least time between two offset commits (see :class:`~coffre.adapters.kafka.OffsetCommitter`).
    ``session_seconds``: the group session (default: :func:`group_options`')."""
    await ensure_coffre_topics(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}{group}",
        **{
            **group_options(settings, session_seconds, joins=owns is None),
            "max_poll_records": settings.batch_max,
            **(consumer_options or {}),
        },
        **client_options(settings),
    )
    async with publisher(settings, **(producer_options or {})) as out:
        await consumer.start()
        if not leave_as_leader and not await on_embedded_broker(consumer):
            leave_as_leader = True  # Apache Kafka: a leader that leaves is a rebalance like any other
        if not leave_as_leader:
            track_leadership(consumer)
        committer = OffsetCommitter(consumer, commit_interval)
        try:
            yield Stream(settings, topics, consumer, out, committer, owns)
        finally:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(stop_timeout):
                    await stop_consumer(consumer, leave_as_leader=leave_as_leader)


async def run_stream(
    settings: Settings,
    group: str,
    topics: Iterable[str],
    step: Step,
    stop: asyncio.Event,
    *,
    owns: Callable[[int], bool] | None = None,
    tick: Tick | None = None,
    acknowledged: Callable[[], object] | None = None,
    commit_interval: float = 0.0,
) -> None:
    """:func:`stream` and :meth:`Stream.run` in one, for a service without a rebalance listener."""
    async with stream(settings, group, *topics, owns=owns, commit_interval=commit_interval) as s:
        await s.run(step, stop, tick=tick, acknowledged=acknowledged)


def owned_partitions(replicas: int, ordinal: int) -> Callable[[int], bool]:
    """Static assignment: replica ``ordinal`` of ``replicas`` owns the partitions p with
    p % replicas == ordinal, whatever the other replicas do (no rebalance can move a coffre's
    partition, hence its journal, to another volume)."""
    return lambda partition: partition % replicas == ordinal


def host_ordinal(hostname: str | None = None) -> int | None:
    """The number ending a StatefulSet pod's host name (``coffre-vault-2`` → 2)."""
    match = re.search(r"-(\d+)$", hostname or socket.gethostname())
    return int(match.group(1)) if match else None


SHUTDOWN_OVERRUN_EXIT = 75
"""A drain that overran ``COFFRE_SHUTDOWN_TIMEOUT_SECONDS``: what was fsynced stays, the rest is read again."""
UNAVAILABLE_EXIT = 69
"""The broker failed past what the clients ride out (sysexits' EX_UNAVAILABLE): restart the service."""
INVARIANT_EXIT = 70
"""An invariant would break (two writers, tampering, lost counters): page, do not restart blindly."""


GC_YOUNG_THRESHOLD = 20_000
"""Allocations between two collections of the youngest generation (CPython's default, 700, ran one
every two or three events of a batch; each scans what is young, and every tenth or hundredth the
older generations too)."""


def settle_heap() -> None:
    """What the process loaded before its first event (modules, pydantic's schemas, lxml, the
    clients) moved out of the cyclic collector's sight (``gc.freeze``: it lives as long as the
    process), and the young generation collected less often. A service allocates a few hundred
    objects an event and frees nearly all by reference counting; the collector's passes over the
    long-lived heap were pure cost. Memory is bounded as before: cycles are still collected."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def run_until_signalled(
    serve: Callable[[Settings, asyncio.Event], Awaitable[object]], settings: Settings
) -> None:
    """Run ``serve(settings, stop)`` until SIGTERM or SIGINT sets ``stop``.

    ``serve`` then drains: it finishes the batch in hand (durable, published, committed) and
    returns. Should that take longer than ``COFFRE_SHUTDOWN_TIMEOUT_SECONDS`` (a broker gone,
    a disk hung), the process exits anyway with 75: what was fsynced stays, the rest is read
    again from Kafka after the restart, since its offsets were not committed. A failure of the
    cluster that the clients and :meth:`Publisher.deliver` do not ride out ends it with
    :data:`UNAVAILABLE_EXIT` (69) and one critical line: no invariant is at stake."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping() -> None:
            if not stop.is_set():
                log.info("signal received: draining (at most %gs)", settings.shutdown_timeout_seconds)
                loop.call_later(settings.shutdown_timeout_seconds, overrun)
            stop.set()

        def overrun() -> None:
            log.error("shutdown took longer than %gs: exiting now", settings.shutdown_timeout_seconds)
            logging.shutdown()
            os._exit(SHUTDOWN_OVERRUN_EXIT)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping)
        settle_heap()
        await serve(settings, stop)

    try:
        asyncio.run(main())
    except KafkaError as exc:
        log.critical(
            "stopped: the Kafka cluster failed past what this service rides out (%r); nothing after the "
            "last acknowledged batch was committed: a restart goes on from there",
            exc,
            exc_info=True,
        )
        raise SystemExit(UNAVAILABLE_EXIT) from None
