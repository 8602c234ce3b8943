"""The ingest service: a plain aiokafka batch loop over ``events.in`` (the consumer pattern of
the vault and the acquittal), folding each partition it owns with :class:`IngestStep`.

Any number of replicas join one consumer group. A replica that is given a partition reads the
partition's latest snapshot from ``<prefix>ingest.state``, seeks to the offset it stands at and
folds from there; the outputs of inputs before the group's committed offset were published by
the previous owner and are not published again. Per batch: fold, publish every output and wait
for the broker's acknowledgements, then commit the input offsets; every
``COFFRE_INGEST_SNAPSHOT_SECONDS`` (and when a partition is revoked, and at SIGTERM) each moved
partition's state is snapshotted. Nothing is kept on local disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from coffre import metrics
from coffre.adapters.kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    OffsetCommitter,
    partitions_for,
    stop_consumer,
    track_leadership,
)
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.service import ensure_coffre_topics, run_until_signalled
from coffre.config import Settings
from coffre.domain.authenticity import RecordKeys
from coffre.domain.codec import Limits
from coffre.domain.messages import ForeignRecord
from coffre.ops import BrokerCheck, LagMeter, Ops

from .step import IngestStep, InputMessage, Output, PartitionState, SnapshotError

log = logging.getLogger("coffre.ingest")
FATAL_EXIT = 70
STOP_STEP_SECONDS = 3.0
"""At SIGTERM, the most the final snapshot and commit, then leaving the group, may each take."""
READ_SECONDS = 15.0
"""The most a take-over waits to read a partition's snapshots, or to probe a hole in events.in."""
SNAPSHOTS_READ_BACK = 8
"""How many of a partition's newest snapshots are read at a take-over: the one standing furthest
is used (a zombie may have written an older one last; any snapshot is a correct fold)."""


class StateLost(RuntimeError):
    """A partition has no snapshot although its first inputs are gone: its counters cannot be rebuilt."""


class SnapshotsUnread(RuntimeError):
    """A partition's snapshots could not be read in time: nothing is folded without them."""


class StateTopic:
    """The partitions' snapshots on ``<prefix>ingest.state``: partition p's on partition p."""

    def __init__(self, settings: Settings, producer: AIOKafkaProducer):
        self.topic = settings.topics.ingest_state
        self.keys = record_keys(settings)
        self.producer = producer
        self.reader = AIOKafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=5,
            max_partition_fetch_bytes=settings.max_message_bytes + 1024 * 1024,
            **client_options(settings),
        )

    async def start(self) -> None:
        await self.reader.start()

    async def stop(self) -> None:
        await self.reader.stop()

    async def latest(self, partition: int, partitions: int) -> PartitionState | None:
        """The snapshot of ``partition`` standing furthest among its newest ones, or None if it has none.

        Read to the end offset, however slow the fetches (an empty fetch on a busy machine is not
        the end: taking it for one once started a partition's fold from zero where its snapshots
        were), then on until a fetch brings nothing (``end_offsets()`` may under-report on Tansu).
        Raises SnapshotsUnread when they cannot be read within READ_SECONDS (the replica stops; a
        restart, or another replica, tries again).
        """
        tp = TopicPartition(self.topic, partition)
        self.reader.assign([tp])
        end = (await self.reader.end_offsets([tp]))[tp]
        self.reader.seek(tp, max(0, end - SNAPSHOTS_READ_BACK))
        best: PartitionState | None = None
        deadline = time.monotonic() + READ_SECONDS
        while True:
            batch = await self.reader.getmany(tp, timeout_ms=200)
            for record in batch.get(tp, ()):
                try:
                    state = PartitionState.from_record(
                        record.key,
                        record.value or b"",
                        list(record.headers or ()),
                        partition,
                        partitions,
                        self.keys,
                    )
                except ForeignRecord as exc:  # a stranger's: neither the fold's start nor a reason to stop
                    metrics.FOREIGN_RECORDS.labels("ingest", self.topic).inc()
                    log.error("%s[%d]@%d passed over: %s", self.topic, partition, record.offset, exc)
                    continue
                if best is None or state.position >= best.position:
                    best = state
            if not batch and await self.reader.position(tp) >= end:
                return best
            if time.monotonic() > deadline:
                raise SnapshotsUnread(
                    f"{self.topic}[{partition}]: its snapshots up to offset {end} could not be read "
                    f"within {READ_SECONDS:.0f} s"
                )

    async def first_offset(self, tp: TopicPartition, start: int) -> int | None:
        """The offset of the first record of ``tp`` at or after ``start``, as a fresh fetch sees it,
        or None when none arrived within READ_SECONDS."""
        self.reader.assign([tp])
        self.reader.seek(tp, start)
        deadline = time.monotonic() + READ_SECONDS
        while time.monotonic() < deadline:
            records = (await self.reader.getmany(tp, timeout_ms=200, max_records=1)).get(tp, ())
            if records:
                return records[0].offset
        return None

    async def write(self, states: list[PartitionState]) -> None:
        deliveries = []
        for state in states:
            key, value, headers = state.record(self.keys)
            deliveries.append(
                await self.producer.send(
                    self.topic, value, key=key, headers=headers, partition=state.partition
                )
            )
        await asyncio.gather(*deliveries)
        metrics.SNAPSHOTS.inc(len(states))


class Ingest(ConsumerRebalanceListener):
    """The partitions this replica folds, their states, and what it publishes for them."""

    def __init__(
        self,
        settings: Settings,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        state_topic: StateTopic,
        keys: RecordKeys | None = None,
    ):
        self.settings = settings
        self.topics = settings.topics
        self.consumer = consumer
        self.producer = producer
        self.state_topic = state_topic
        self.committer = OffsetCommitter(consumer)
        self.step = IngestStep(
            self.topics,
            Limits(max_bytes=settings.max_event_bytes),
            settings.max_message_bytes,
            keys=keys or record_keys(settings),
        )
        self.partitions = 0
        self.owned: dict[int, PartitionState] = {}
        self.published_below: dict[int, int] = {}
        self.snapshotted: dict[int, int] = {}
        self.lock = asyncio.Lock()
        self.last_snapshot = time.monotonic()
        self.failure: BaseException | None = None
        """What a rebalance callback met: aiokafka logs and swallows it, the loop raises it."""

    # rebalancing -----------------------------------------------------------------------------

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        try:
            await self._revoked(revoked)
        except Exception as exc:
            self.failure = exc
            raise

    async def _revoked(self, revoked: list[TopicPartition]) -> None:
        async with self.lock:
            mine = [tp.partition for tp in revoked if tp.partition in self.owned]
            await self._snapshot(mine)
            await self.committer.flush()
            for partition in mine:
                del self.owned[partition]
                self.published_below.pop(partition, None)
                self.snapshotted.pop(partition, None)
            metrics.PARTITIONS_OWNED.set(len(self.owned))
            if mine:
                log.info("partitions %s of %s handed over", mine, self.topics.events_in)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        try:
            await self._assigned(assigned)
        except Exception as exc:
            self.failure = exc
            raise

    async def _assigned(self, assigned: list[TopicPartition]) -> None:
        async with self.lock:
            for tp in sorted(assigned, key=lambda tp: tp.partition):
                if tp.partition in self.owned:
                    continue
                state = await self._load(tp)
                committed = await self.consumer.committed(tp) or 0
                self.owned[tp.partition] = state
                self.published_below[tp.partition] = max(committed, state.position)
                self.snapshotted[tp.partition] = state.position
                self.consumer.seek(tp, state.position)
                log.info(
                    "partition %s[%d]: folding from offset %d (%d coffres), publishing from %d",
                    tp.topic,
                    tp.partition,
                    state.position,
                    len(state.counters),
                    self.published_below[tp.partition],
                )
            metrics.PARTITIONS_OWNED.set(len(self.owned))

    async def _load(self, tp: TopicPartition) -> PartitionState:
        state = await self.state_topic.latest(tp.partition, self.partitions)
        if state is not None:
            return state
        start = (await self.consumer.beginning_offsets([tp]))[tp]
        if start > 0:
            raise StateLost(
                f"{tp.topic}[{tp.partition}] starts at offset {start} and {self.topics.ingest_state} holds "
                "no snapshot of it: its IDEvt counters cannot be rebuilt (see docs/operations.md)"
            )
        return PartitionState(tp.partition, self.partitions)

    # the batch loop --------------------------------------------------------------------------

    async def handle(self, batches: dict[TopicPartition, list]) -> None:
        """Fold a fetch, publish every output (acknowledged), then commit the input offsets."""
        async with self.lock:
            outputs: list[Output] = []
            results = []
            offsets: dict[TopicPartition, int] = {}
            for tp, records in batches.items():
                state = self.owned.get(tp.partition)
                if state is None:  # revoked while the fetch was in hand
                    continue
                if records[0].offset > state.position and not await self._hole(tp, state, records[0].offset):
                    # fetched from another position than the fold's (the committed offset, before
                    # the take-over's seek, or a fetch still in flight at the seek): folding it
                    # would skip inputs and number the next ones again. Read again from the fold's.
                    self.consumer.seek(tp, state.position)
                    continue
                # A gap inside one fetch is a hole in the log itself (one fetch answer is contiguous):
                # folded over. Splitting the fetch there and seeking to the hole's first offset left
                # a partition's fold stuck at that offset for minutes on Tansu (bench/failover.py).
                batch = [
                    InputMessage(
                        r.partition,
                        r.offset,
                        r.value or b"",
                        list(r.headers or ()),
                        timestamp=r.timestamp,
                        key=r.key,
                    )
                    for r in records
                ]
                result = self.step.run(state, batch, self.published_below.get(tp.partition, 0))
                outputs += result.outputs
                results.append(result)
                offsets[tp] = state.position
            await self.publish(outputs)
            for result in results:
                result.counts.publish_metrics()
            self.committer.commit(offsets)

    async def _hole(self, tp: TopicPartition, state: PartitionState, first: int) -> bool:
        """Whether ``tp`` holds no record from the fold's position up to ``first`` (transaction
        markers, say): asked of a fetch of its own, since the consumer's fetch may be stale."""
        found = await self.state_topic.first_offset(tp, state.position)
        if found != first:
            log.info(
                "partition %s[%d]: a fetch began at offset %d, the fold stands at %d: reading again from %d",
                tp.topic,
                tp.partition,
                first,
                state.position,
                state.position,
            )
            return False
        log.info(
            "partition %s[%d]: no record from offset %d to %d", tp.topic, tp.partition, state.position, first
        )
        return True

    async def publish(self, outputs: list[Output]) -> None:
        """Every output, in order per partition, acknowledged by the broker before this returns.

        Forwarded copies go in whole record batches, one after the other per partition, so that
        a partition never holds a later copy without the earlier ones (the fold skips a copy
        whose offset is not above the highest it folded: a hole would lose an event)."""
        deliveries = []
        forwards: dict[int, list[Output]] = defaultdict(list)
        for output in outputs:
            if output.forward:
                forwards[output.partition or 0].append(output)
            else:
                deliveries.append(
                    await self.producer.send(
                        output.topic,
                        output.value,
                        key=output.key,
                        headers=output.headers,
                        partition=output.partition,
                    )
                )
        await asyncio.gather(*deliveries, *(self._forward(p, copies) for p, copies in forwards.items()))

    async def _forward(self, partition: int, copies: list[Output]) -> None:
        batch = self.producer.create_batch()
        for copy in copies:
            if batch.append(key=copy.key, value=copy.value, timestamp=None, headers=copy.headers) is None:
                await (await self.producer.send_batch(batch, self.topics.events_in, partition=partition))
                batch = self.producer.create_batch()
                if batch.append(key=copy.key, value=copy.value, timestamp=None, headers=copy.headers) is None:
                    raise RuntimeError("a forwarded copy larger than a record batch")  # bounded before
        if batch.record_count():
            await (await self.producer.send_batch(batch, self.topics.events_in, partition=partition))

    async def snapshot_due(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.last_snapshot < self.settings.ingest_snapshot_seconds:
            return
        async with self.lock:
            await self._snapshot(list(self.owned))
        self.last_snapshot = time.monotonic()

    async def _snapshot(self, partitions: list[int]) -> None:
        """Snapshot the partitions that moved. Under the lock: every output of the inputs before a
        state's position is acknowledged, which is what a snapshot promises."""
        moved = [self.owned[p] for p in partitions if self.owned[p].position != self.snapshotted.get(p, -1)]
        if not moved:
            return
        await self.state_topic.write(moved)
        for state in moved:
            self.snapshotted[state.partition] = state.position
        self.committer.commit({TopicPartition(self.topics.events_in, s.partition): s.position for s in moved})


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await check_kafka_access(settings)  # a wrong credential or TLS setting: exit 2, not a retry loop
    topics = settings.topics
    stop = stop or asyncio.Event()
    await ensure_coffre_topics(settings)
    ops = Ops("ingest", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, client_options(settings)))
    await ops.start()
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        **{**PRODUCER_TUNING, "max_request_size": settings.max_message_bytes + 1024 * 1024},
        **client_options(settings),
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}ingest",
        **{
            **CONSUMER_TUNING,
            "max_poll_records": settings.batch_max,
            "max_partition_fetch_bytes": settings.max_message_bytes + 1024 * 1024,
            # a dead replica's partitions move after its session (plus the broker's hand-over)
            "session_timeout_ms": round(settings.ingest_session_seconds * 1000),
            "heartbeat_interval_ms": round(settings.ingest_session_seconds * 1000 / 6),
        },
        **client_options(settings),
    )
    state_topic = StateTopic(settings, producer)
    await producer.start()
    try:
        await state_topic.start()
        await consumer.start()
        track_leadership(consumer)
        ingest = Ingest(settings, consumer, producer, state_topic, state_topic.keys)
        # not consumer.topics(): the consumer's own metadata holds only its subscriptions on Apache
        # Kafka (an empty topic list asks for none), where Tansu answered with every topic
        ingest.partitions = await partitions_for(
            settings.bootstrap_servers, topics.events_in, client_options(settings)
        )
        consumer.subscribe([topics.events_in], listener=ingest)
        lag = LagMeter(consumer)
        log.info("ingest ready: folding %s (%d partitions)", topics.events_in, ingest.partitions)
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=100, max_records=settings.batch_max)
                if ingest.failure is not None:
                    raise ingest.failure
                if batches:
                    await ingest.handle(batches)
                await ingest.snapshot_due()
                await lag.update()
            # a restart then folds nothing twice; bounded, since a commit waits out a rebalance in
            # progress and a drain that overruns its deadline leaves a member the group waits for
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_STEP_SECONDS):
                    await ingest.snapshot_due(force=True)
                    await ingest.committer.flush()
        finally:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_STEP_SECONDS):
                    await stop_consumer(consumer, leave_as_leader=False)
            await state_topic.stop()
    except (StateLost, SnapshotError) as exc:
        ops.halt(str(exc))
        raise
    finally:
        await producer.stop()
        await ops.stop()


def run(settings: Settings) -> None:
    """``coffre ingest``: until SIGTERM or SIGINT. Any failure to publish (the broker) stops the
    process without committing: a restart, or another replica, folds again from the snapshot."""
    try:
        run_until_signalled(serve, settings)
    except (StateLost, SnapshotError):
        log.critical("ingest cannot rebuild a partition's IDEvt counters", exc_info=True)
        raise SystemExit(FATAL_EXIT) from None
    except Exception:
        log.critical("ingest stopped: nothing after the last acknowledged batch was committed", exc_info=True)
        raise SystemExit(FATAL_EXIT) from None


__all__ = ["run", "serve"]
