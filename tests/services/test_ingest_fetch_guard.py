"""ingest folds a partition only from the fold's own position: a fetch that starts elsewhere (a
stale fetch from before a take-over's seek) is read again, never folded past a gap.

Found by the failover test: a replica that took partition 0 over folded a fetch that began at
the committed offset 621 as if it began at 0, and numbered coffre 21 from IDEvt 1 again. And by the
chaos run (d20c187): a gap inside one fetch was folded over, but on Tansu a gap may be a batch whose
offsets were handed out and which was not stored yet; its two events were never numbered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiokafka import TopicPartition
from coffre_ingest.app import Ingest
from coffre_ingest.step import PartitionState

from coffre.config import Settings
from coffre.domain.messages import ID_EVT, header
from coffre.domain.routing import coffre_partition

from events import POINSCRIT
from ingest_fold import TEST_KEYS, TEST_KEYS_TEXT

SETTINGS = Settings(record_keys=TEST_KEYS_TEXT)
TOPIC = SETTINGS.topics.events_in
PARTITIONS = 3
COFFRE = next(c for c in range(1, 100) if coffre_partition(c, PARTITIONS) == 0)
TP = TopicPartition(TOPIC, 0)


@dataclass
class Record:
    offset: int
    value: bytes
    partition: int = 0
    headers: tuple = ()
    timestamp: int = 0
    key: bytes | None = None


def records(*offsets: int) -> list[Record]:
    event = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{COFFRE}</IDCoffre>".encode())
    return [Record(o, event.replace(b"p-1", f"p-{o}".encode())) for o in offsets]


@dataclass
class FakeConsumer:
    seeks: list[tuple[TopicPartition, int]] = field(default_factory=list)
    commits: list[dict] = field(default_factory=list)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def commit(self, offsets: dict) -> None:
        self.commits.append(offsets)


@dataclass
class FakeProducer:
    sent: list[tuple[str, bytes, list]] = field(default_factory=list)

    async def send(self, topic, value, key=None, headers=None, partition=None):
        self.sent.append((topic, value, headers or []))
        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


@dataclass
class FakeStateTopic:
    """What a fresh fetch of the partition finds first at or after an offset: ``first``'s answer,
    or the next of ``answers`` while there are some (a log that changes between two probes)."""

    first: dict[int, int | None] = field(default_factory=dict)
    probes: list[int] = field(default_factory=list)
    answers: list[int | None] = field(default_factory=list)

    async def first_offset(self, tp: TopicPartition, start: int) -> int | None:
        self.probes.append(start)
        if self.answers:
            return self.answers.pop(0)
        return self.first.get(start, start)


def ingest_at(position: int, state_topic: FakeStateTopic) -> tuple[Ingest, FakeConsumer, FakeProducer]:
    consumer, producer = FakeConsumer(), FakeProducer()
    ingest = Ingest(SETTINGS, consumer, producer, state_topic, keys=TEST_KEYS)  # type: ignore[arg-type]
    ingest.partitions = PARTITIONS
    ingest.hole_settle_seconds = 0.0
    ingest.owned[0] = PartitionState(0, PARTITIONS, position, {("0099", COFFRE): 4})
    ingest.published_below[0] = position
    return ingest, consumer, producer


async def handle(ingest: Ingest, producer: FakeProducer, batch: dict) -> None:
    """The ingest step, its outputs as the runner would send them."""
    producer.sent += [(topic, value, headers) for topic, _, value, headers, _ in await ingest.handle(batch)]


def id_evts(producer: FakeProducer) -> list[int]:
    return [int(header(h, ID_EVT)) for topic, _, h in producer.sent if topic == SETTINGS.topics.normalized]


def test_a_fetch_that_begins_past_the_fold_is_read_again_not_folded():
    async def scenario():
        probe = FakeStateTopic()  # a fresh fetch from 5 finds offset 5: the fetch in hand is stale
        ingest, consumer, producer = ingest_at(5, probe)
        await handle(ingest, producer, {TP: records(621, 622)})
        await handle(ingest, producer, {TP: records(621, 622)})  # still in flight at the seek: refused again
        assert consumer.seeks == [(TP, 5), (TP, 5)] and producer.sent == []
        assert ingest.owned[0].position == 5 and ingest.owned[0].counters[("0099", COFFRE)] == 4
        await handle(ingest, producer, {TP: records(5, 6, 7)})
        assert id_evts(producer) == [5, 6, 7]

    asyncio.run(scenario())


def test_a_hole_that_two_fresh_fetches_confirm_is_folded_over():
    async def scenario():
        probe = FakeStateTopic(first={5: 9})  # offsets 5..8 hold no record (transaction markers)
        ingest, consumer, producer = ingest_at(5, probe)
        await handle(ingest, producer, {TP: records(9, 10)})
        assert probe.probes == [5, 5]  # HOLE_SETTLE_SECONDS apart
        assert consumer.seeks == [] and id_evts(producer) == [5, 6]
        assert ingest.owned[0].position == 11

    asyncio.run(scenario())


def test_a_hole_that_fills_before_the_second_fetch_is_read_again_not_folded_over():
    """Tansu: the batch at 5..8 had its offsets but was not stored yet at the first probe."""

    async def scenario():
        probe = FakeStateTopic(answers=[9, 5])
        ingest, consumer, producer = ingest_at(5, probe)
        batch = {TP: records(9, 10)}
        await handle(ingest, producer, batch)
        assert probe.probes == [5, 5] and consumer.seeks == [(TP, 5)] and producer.sent == []
        assert batch == {} and ingest.owned[0].position == 5  # nothing committed
        await handle(ingest, producer, {TP: records(5, 6, 7, 8, 9, 10)})
        assert id_evts(producer) == [5, 6, 7, 8, 9, 10]

    asyncio.run(scenario())


def test_a_probe_that_finds_nothing_reads_again():
    async def scenario():
        probe = FakeStateTopic(first={5: None})
        ingest, consumer, producer = ingest_at(5, probe)
        await handle(ingest, producer, {TP: records(9)})
        assert consumer.seeks == [(TP, 5)] and producer.sent == []

    asyncio.run(scenario())


def test_a_gap_inside_one_fetch_is_folded_up_to_and_read_again_from():
    """The chaos run's loss: a fetch answered 5, 6, 40, 41 while 7..39 were handed out to another
    producer's batch not stored yet. Folded over, 7..39 were never numbered."""

    async def scenario():
        probe = FakeStateTopic()
        ingest, consumer, producer = ingest_at(5, probe)
        batch = {TP: records(5, 6, 40, 41)}
        await handle(ingest, producer, batch)
        assert id_evts(producer) == [5, 6] and ingest.owned[0].position == 7
        assert consumer.seeks == [(TP, 7)] and probe.probes == []
        assert [r.offset for r in batch[TP]] == [5, 6]  # what the runner commits: up to 7
        await handle(ingest, producer, {TP: records(*range(7, 42))})  # the batch is stored now
        assert id_evts(producer) == list(range(5, 5 + 37))
        assert ingest.owned[0].position == 42

    asyncio.run(scenario())
