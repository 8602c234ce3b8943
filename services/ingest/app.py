"""The ingest service: a step of the stream runner (:mod:`coffre.adapters.stream`, as the vault
and the acquittal) over ``events.in``, folding each partition it owns with :class:`IngestStep`.

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
import logging
import time

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import InvalidSessionTimeoutError, KafkaError

from coffre import metrics
from coffre.adapters.kafka import OffsetCommitter, read_span, retried, span_reader, topic_partitions
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.stream import (
    INVARIANT_EXIT,
    UNAVAILABLE_EXIT,
    Batch,
    Publisher,
    Record,
    run_until_signalled,
    stream,
)
from coffre.config import Settings, configuration_error
from coffre.domain.authenticity import RecordKeys
from coffre.domain.codec import Limits
from coffre.domain.messages import ForeignRecord, foreign_reason
from coffre.ops import BrokerCheck, Ops

from .step import IngestStep, InputMessage, PartitionState, SnapshotError, StepCounts

log = logging.getLogger("coffre.ingest")
STOP_STEP_SECONDS = 3.0
"""At SIGTERM, the most the final snapshot and commit, then leaving the group, may each take."""
READ_SECONDS = 15.0
"""The most a take-over waits to read a partition's snapshots, or to probe a hole in events.in."""
SNAPSHOT_IDLE_MS = 200
"""At a take-over, how long the snapshots' read goes on past their end offset for a fetch that brings
nothing (the end offset is only a floor on Tansu)."""
HOLE_SETTLE_SECONDS = 1.0
"""How long after a fresh fetch first shows a hole in events.in (offsets without a record before the
fetch's first one) a second fresh fetch must still show it before the fold passes over it. Tansu
hands out a record batch's offsets before it stores the batch: a fetch made in between skips a
batch of another producer that a later fetch returns (tens of milliseconds later on these
machines). On Apache Kafka every offset below the high watermark is readable at once, and a hole is
real (transaction markers): it costs this wait, once per hole."""
SNAPSHOTS_READ_BACK = 8
"""How many of a partition's newest snapshots are read at a take-over: the one standing furthest
is used (a zombie may have written an older one last; any snapshot is a correct fold)."""


class StateLost(RuntimeError):
    """A partition has no snapshot although its first inputs are gone: its counters cannot be rebuilt."""


class SnapshotsUnread(RuntimeError):
    """A partition's snapshots could not be read in time: nothing is folded without them."""


class StateTopic:
    """The partitions' snapshots on ``<prefix>ingest.state``: partition p's on partition p."""

    def __init__(self, settings: Settings, publisher: Publisher, reader: AIOKafkaConsumer):
        self.topic = settings.topics.ingest_state
        self.keys = record_keys(settings)
        self.publisher = publisher
        self.reader = reader

    async def latest(self, partition: int, partitions: int) -> PartitionState | None:
        """The snapshot of ``partition`` standing furthest among its newest ones (:meth:`latest_many`)."""
        return (await self.latest_many([partition], partitions))[partition]

    async def latest_many(self, wanted: list[int], partitions: int) -> dict[int, PartitionState | None]:
        """For each partition of ``wanted``, the snapshot standing furthest among its newest ones, or
        None if it has none: read in one pass over all of them (a take-over of several partitions
        waits for one read, not one after the other).

        Read to the end offset, however slow the fetches (an empty fetch on a busy machine is not
        the end: taking it for one once started a partition's fold from zero where its snapshots
        were), then on until a fetch brings nothing (:func:`read_span`). Raises SnapshotsUnread
        when they cannot be read within READ_SECONDS (the replica stops; a restart, or another
        replica, tries again).
        """
        best: dict[int, PartitionState | None] = {p: None for p in wanted}
        if not wanted:
            return best
        tps = [TopicPartition(self.topic, p) for p in wanted]
        try:
            # asked again while the cluster mends a failure (a paused broker's partitions moving)
            ends = await retried(lambda: self.reader.end_offsets(tps), READ_SECONDS)
        except KafkaError as exc:
            raise SnapshotsUnread(
                f"{self.topic}{wanted}: their end offsets could not be read: {exc!r}"
            ) from None
        try:
            spans = {tp: (max(0, ends[tp] - SNAPSHOTS_READ_BACK), ends[tp]) for tp in tps}
            async for tp, records in read_span(
                self.reader, spans, idle_ms=SNAPSHOT_IDLE_MS, timeout=READ_SECONDS
            ):
                partition = tp.partition
                for record in records:
                    try:
                        state = PartitionState.from_record(
                            record.key,
                            record.value or b"",
                            list(record.headers or ()),
                            partition,
                            partitions,
                            self.keys,
                        )
                    except ForeignRecord as exc:
                        # a stranger's: neither the fold's start nor a reason to stop
                        metrics.FOREIGN_RECORDS.labels("ingest", foreign_reason(exc, self.topic)).inc()
                        log.error("%s[%d]@%d passed over: %s", self.topic, partition, record.offset, exc)
                        continue
                    known = best[partition]
                    if known is None or state.position >= known.position:
                        best[partition] = state
        except TimeoutError:
            raise SnapshotsUnread(
                f"{self.topic}{wanted}: their snapshots up to offsets "
                f"{[ends[tp] for tp in tps]} could not be read within {READ_SECONDS:.0f} s"
            ) from None
        return best

    async def first_offset(self, tp: TopicPartition, start: int) -> int | None:
        """The offset of the first record of ``tp`` at or after ``start``, as a fresh fetch sees it,
        or None when none arrived within READ_SECONDS."""
        spans = {tp: (start, None)}
        async for _, records in read_span(self.reader, spans, idle_ms=round(READ_SECONDS * 1000)):
            return records[0].offset
        return None

    async def write(self, states: list[PartitionState]) -> None:
        # sent again while the cluster mends a failure, as the outputs are (a broker paused for seconds
        # stopped ingest here, exit 70, in a three-broker test)
        await self.publisher.deliver([(self.topic, *s.record(self.keys), s.partition) for s in states])
        metrics.SNAPSHOTS.inc(len(states))


class Ingest(ConsumerRebalanceListener):
    """The partitions this replica folds, their states, and what it publishes for them."""

    def __init__(
        self,
        settings: Settings,
        consumer: AIOKafkaConsumer,
        committer: OffsetCommitter,
        state_topic: StateTopic,
        lock: asyncio.Lock | None = None,
        keys: RecordKeys | None = None,
    ):
        self.settings = settings
        self.topics = settings.topics
        self.consumer = consumer
        self.committer = committer
        self.state_topic = state_topic
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
        self.lock = lock or asyncio.Lock()
        """The runner's: held from a fold to the acknowledgement of its outputs."""
        self.last_snapshot = time.monotonic()
        self.hole_settle_seconds = HOLE_SETTLE_SECONDS
        self.counts: list[StepCounts] = []
        """The last batch's, published as metrics once its outputs are acknowledged."""

    # rebalancing -----------------------------------------------------------------------------

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
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
        async with self.lock:
            new = sorted(
                (tp for tp in assigned if tp.partition not in self.owned), key=lambda tp: tp.partition
            )
            snapshots = await self.state_topic.latest_many([tp.partition for tp in new], self.partitions)
            for tp in new:
                state = await self._load(tp, snapshots[tp.partition])
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

    async def _load(self, tp: TopicPartition, state: PartitionState | None) -> PartitionState:
        """The fold's start: its newest snapshot ``state``, or the start of a partition never cut."""
        if state is not None:
            return state
        start = (await self.consumer.beginning_offsets([tp]))[tp]
        if start > 0:
            raise StateLost(
                f"{tp.topic}[{tp.partition}] starts at offset {start} and {self.topics.ingest_state} holds "
                "no snapshot of it: its IDEvt counters cannot be rebuilt (see docs/operations.md)"
            )
        return PartitionState(tp.partition, self.partitions)

    # the step ------------------------------------------------------------------------------

    async def handle(self, batch: Batch) -> list[Record]:
        """Fold a fetch: its outputs, in order. A partition not folded (revoked meanwhile, or
        fetched from elsewhere than the fold's position) leaves the batch: it is not committed;
        one folded up to a gap stays in it up to the gap only, which is what is committed.
        Run by :class:`~coffre.adapters.stream.Stream` under the lock, with the outputs'
        acknowledgement: a snapshot never stands past an output not on Kafka."""
        outputs: list[Record] = []
        self.counts = []
        for tp, records in list(batch.items()):
            state = self.owned.get(tp.partition)
            if state is None:  # revoked while the fetch was in hand
                del batch[tp]
                continue
            first = records[0].offset
            if first > state.position:
                if not await self._hole(tp, state, first):
                    # fetched from another position than the fold's (the committed offset, before
                    # the take-over's seek, or a fetch still in flight at the seek), or a hole that
                    # is filling: folding it would skip inputs. Read again from the fold's.
                    self.consumer.seek(tp, state.position)
                    del batch[tp]
                    continue
                state.pass_over(first)
            inputs = [
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
            before = state.position
            result = self.step.run(state, inputs, self.published_below.get(tp.partition, 0))
            outputs += [(o.topic, o.key, o.value, o.headers, o.partition) for o in result.outputs]
            self.counts.append(result.counts)
            if records[-1].offset >= state.position:
                # A gap inside the fetch: the fold stopped before it (a fetch that skipped offsets is no
                # proof the log holds nothing there: on Tansu the batch of a concurrent producer may
                # not be stored yet). Read again from it; the next fetch goes through the check above.
                gap_end = next(r.offset for r in records if r.offset > state.position)
                log.info(
                    "partition %s[%d]: a fetch holds no record from offset %d to %d: reading again from %d",
                    tp.topic,
                    tp.partition,
                    state.position,
                    gap_end - 1,
                    state.position,
                )
                self.consumer.seek(tp, state.position)
            if state.position == before:  # nothing new folded
                del batch[tp]
            elif records[-1].offset >= state.position:
                batch[tp] = [r for r in records if r.offset < state.position]
        return outputs

    def acknowledged(self) -> None:
        for counts in self.counts:
            counts.publish_metrics()

    async def _hole(self, tp: TopicPartition, state: PartitionState, first: int) -> bool:
        """Whether ``tp`` holds no record from the fold's position up to ``first`` (transaction
        markers, say): asked of fetches of their own, since the consumer's fetch may be stale, and
        twice, HOLE_SETTLE_SECONDS apart, since on Tansu a fetch skips a batch whose offsets were
        handed out and which is not stored yet."""
        found = await self.state_topic.first_offset(tp, state.position)
        if found == first:
            await asyncio.sleep(self.hole_settle_seconds)
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
        # on coffre's topics (neither compacted nor written in transactions by coffre) a hole is unexpected
        log.warning(
            "partition %s[%d]: no record from offset %d to %d, %gs apart: passed over",
            tp.topic,
            tp.partition,
            state.position,
            first - 1,
            self.hole_settle_seconds,
        )
        return True

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
    ops = Ops("ingest", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, client_options(settings)))
    await ops.start()
    fetch_bytes = settings.max_message_bytes + 1024 * 1024
    # a smaller fetch (COFFRE_CONSUMER_FETCH_BYTES) still returns a larger first record whole (KIP-74)
    read_bytes = settings.consumer_fetch_bytes or fetch_bytes
    try:
        async with (
            stream(
                settings,
                "ingest",
                topics.events_in,
                # a dead replica's partitions move after its session (plus the broker's hand-over)
                consumer_options={"max_partition_fetch_bytes": read_bytes},
                session_seconds=settings.ingest_session_seconds,
                producer_options={"max_request_size": fetch_bytes},
                leave_as_leader=False,
                stop_timeout=STOP_STEP_SECONDS,
            ) as kafka,
            span_reader(
                settings.bootstrap_servers, client_options(settings), max_partition_fetch_bytes=read_bytes
            ) as reader,
        ):
            state_topic = StateTopic(settings, kafka.publisher, reader)
            ingest = Ingest(
                settings, kafka.consumer, kafka.committer, state_topic, kafka.lock, state_topic.keys
            )
            ingest.partitions = len(await topic_partitions(kafka.consumer, topics.events_in))
            log.info("ingest ready: folding %s (%d partitions)", topics.events_in, ingest.partitions)
            # at SIGTERM, the last snapshot and commit are bounded: a commit waits out a rebalance in
            # progress, and a drain that overruns its deadline leaves a member the group waits for
            await kafka.run(
                ingest.handle,
                stop,
                listener=ingest,
                tick=ingest.snapshot_due,
                acknowledged=ingest.acknowledged,
                ordered=True,
                drain_timeout=STOP_STEP_SECONDS,
            )
    except (StateLost, SnapshotError) as exc:
        ops.halt(str(exc))
        raise
    finally:
        await ops.stop()


def run(settings: Settings) -> None:
    """``coffre ingest``: until SIGTERM or SIGINT. A failure to publish that the cluster does not mend
    within a minute stops the process without committing (exit 69, :func:`run_until_signalled`): a
    restart, or another replica, folds again from the snapshot. Counters that cannot be rebuilt stop
    it with exit 70 (page: an invariant is at stake)."""
    try:
        run_until_signalled(serve, settings)
    except InvalidSessionTimeoutError:
        configuration_error(
            f"COFFRE_INGEST_SESSION_SECONDS={settings.ingest_session_seconds:g}: the brokers refuse this "
            "group session (below their group.min.session.timeout.ms, 6 s on Apache Kafka by default): "
            "raise it, or lower the brokers' minimum"
        )
    except (StateLost, SnapshotError):
        log.critical("ingest cannot rebuild a partition's IDEvt counters", exc_info=True)
        raise SystemExit(INVARIANT_EXIT) from None
    except SnapshotsUnread as exc:  # the cluster, not an invariant: a restart (or another replica) reads them
        log.critical("ingest stopped: %s", exc)
        raise SystemExit(UNAVAILABLE_EXIT) from None


__all__ = ["run", "serve"]
