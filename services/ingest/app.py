"""The ingest service: a faust stream over ``coffre.events.in``."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from coffre import metrics
from coffre.adapters.kafka import CONSUMER_TUNING
from coffre.adapters.service import ensure_coffre_topics
from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.ops import BrokerCheck, Ops, writable_dir

from .step import IngestStep, InputMessage
from .store import IngestStore

log = logging.getLogger("coffre.ingest")
FATAL_EXIT = 70
PRUNE_AFTER_SECONDS = 24 * 3600


def _headers(raw: object) -> list[tuple[str, bytes]]:
    if not raw:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), v if isinstance(v, bytes) else str(v).encode()) for k, v in items]  # type: ignore[union-attr]


class _LowLatencyConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """faust's consumer thread, with coffre's fetch wait instead of faust's fixed 1,500 ms.

    faust-streaming 0.15 hard-codes ``fetch_max_wait_ms=1500`` for its worker consumer and has
    no setting for it. A broker that does not answer a waiting fetch as soon as data arrives
    (Tansu does not) then holds every input up to 1.5 s: measured, ingest's p50 was 437 ms
    at 500 events/s."""

    def _create_worker_consumer(
        self, transport: faust_aiokafka.Transport
    ) -> faust_aiokafka.aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = CONSUMER_TUNING["fetch_max_wait_ms"]  # read by start(), for its fetcher
        return consumer


class _LowLatencyConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _LowLatencyConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _LowLatencyTransport(faust_aiokafka.Transport):
    Consumer = _LowLatencyConsumer


class IngestApp(faust.App):
    def _new_transport(self) -> faust_aiokafka.Transport:
        return _LowLatencyTransport(self.conf.broker_consumer, self)


def build_app(settings: Settings) -> faust.App:
    topics = settings.topics
    data = Path(settings.data_dir) / "ingest"
    app = IngestApp(
        f"{settings.topic_prefix}ingest",
        broker=";".join(f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(",")),
        value_serializer="raw",
        key_serializer="raw",
        datadir=str(data / "faust"),
        web_enabled=False,
        topic_allow_declare=False,  # topics are created with explicit partitions at start-up
        topic_disable_leader=True,
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        broker_commit_interval=0.2,
        broker_max_poll_records=settings.batch_max,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_linger_ms=0,
        producer_max_request_size=settings.max_message_bytes,
        stream_wait_empty=False,
    )
    source = app.topic(topics.events_in, value_serializer="raw", key_serializer="raw", allow_empty=True)
    store = IngestStore(data / "store.sqlite")
    step = IngestStep(store, topics, Limits(max_bytes=settings.max_event_bytes), settings.max_message_bytes)
    ops = Ops("ingest", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers))
    ops.add_check("store", writable_dir(data))
    positions: dict[int, int] = {}  # partition of events.in -> next offset to handle

    @app.task
    async def start_ops() -> None:
        await ops.start()

    @app.timer(interval=1.0)
    async def measure_lag() -> None:
        for partition, position in list(positions.items()):
            highwater = app.consumer.highwater(faust.types.TP(topics.events_in, partition))
            if highwater is not None:
                metrics.CONSUMER_LAG.labels(topics.events_in, str(partition)).set(
                    max(0, highwater - position)
                )

    async def publish_outbox() -> None:
        rows = store.unpublished()
        if not rows:
            return
        deliveries = [
            await app.producer.send(row.topic, row.key, row.value, None, None, row.headers) for row in rows
        ]
        await asyncio.gather(*deliveries)
        store.mark_published(rows[-1].seq)

    @app.agent(source)
    async def ingest(stream: faust.StreamT) -> None:
        try:
            await publish_outbox()  # what a crash left committed but unpublished goes first, in order
        except Exception:
            log.critical("cannot publish the outbox at start-up", exc_info=True)
            os._exit(FATAL_EXIT)
        batches = 0
        try:
            async for events in stream.take_events(settings.batch_max, within=settings.batch_wait_ms / 1000):
                batch = [
                    InputMessage(
                        e.message.partition,
                        e.message.offset,
                        e.message.value or b"",
                        _headers(e.message.headers),
                        timestamp=round((e.message.timestamp or 0) * 1000),  # faust gives seconds
                        key=e.message.key,
                    )
                    for e in events
                ]
                try:
                    # synchronous on purpose: faust acks a batch's events when the agent leaves it,
                    # cancelled (SIGTERM) or not, so no await may stand between taking the batch and
                    # its durable write; a worker thread only added GIL hand-offs to the latency
                    counts = step.run(batch)
                    await publish_outbox()
                except Exception:
                    # faust acks a batch even when its body fails: die before it can, so the
                    # batch is read again after the restart (the outbox keeps what was durable)
                    log.critical(
                        "ingest batch failed; stopping before its offsets are committed", exc_info=True
                    )
                    os._exit(FATAL_EXIT)
                for m in batch:
                    positions[m.partition] = max(positions.get(m.partition, 0), m.offset + 1)
                log.debug("batch: %s", counts)
                batches += 1
                if batches % 1000 == 0:
                    store.prune(PRUNE_AFTER_SECONDS)
        finally:
            # SIGTERM cancels the agent: make the published mark durable, or the restart would
            # publish the last batch again (harmless for the chain, but duplicate receipts)
            store.flush()

    return app


def run(settings: Settings) -> None:
    """``coffre ingest``: create the topics, then run the faust worker until SIGTERM."""
    asyncio.run(ensure_coffre_topics(settings))
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
