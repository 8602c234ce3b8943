"""The vault's acknowledged position (issue 34 item 5), without Kafka: the committed offset's metadata
round trip, what is ignored (forged, altered, another install's, malformed), and the recorder passing
over the receipts of redelivered events read below the position, only those, still checking each
one against the journal."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError
from aiokafka.structs import OffsetAndMetadata
from coffre_vault.acknowledged import UnverifiedMetadata, decode, encode, positions, read_positions
from coffre_vault.recorder import Recorder, VaultHalt
from coffre_vault.sealer import SealerThread
from coffre_vault.service import GroupLease, Handover

from coffre import metrics
from coffre.adapters.journal import JournalSet
from coffre.adapters.stream import Publisher, Stream
from coffre.config import Settings
from coffre.domain.authenticity import RecordKeys
from coffre.domain.messages import NormalizedEvent
from services.test_forged_records import STRANGER, TOPICS, Delivered, coffre_on, normalized_records

from ingest_fold import TEST_KEYS, TEST_KEYS_TEXT

TOPIC = TOPICS.normalized
PARTITIONS = 3
ROTATED = RecordKeys((("new", b"n" * 32), *TEST_KEYS.keys))
"""The tests' keys after a rotation step: a new key signs, the old one still verifies."""


def refused(reason: str) -> float:
    return metrics.OFFSET_METADATA_REFUSED.labels(reason)._value.get()


def test_the_metadata_round_trip_and_its_size():
    metadata = encode(TEST_KEYS, TOPIC, 2, 1_000, 1_250)
    assert metadata.startswith("ack:1250:test:")
    assert decode(TEST_KEYS, TOPIC, 2, 1_000, metadata) == 1_250
    largest = encode(TEST_KEYS, "t" * 249, 2**31 - 1, 2**63 - 1, 2**63 - 1)
    assert decode(TEST_KEYS, "t" * 249, 2**31 - 1, 2**63 - 1, largest) == 2**63 - 1
    assert len(largest.encode()) < 128 < 4096  # Kafka's offset.metadata.max.bytes, by default
    assert decode(ROTATED, TOPIC, 2, 1_000, metadata) == 1_250  # a key rotation keeps it readable
    # a position below the committed offset is the vault's too, and passes nothing over
    assert decode(TEST_KEYS, TOPIC, 2, 1_000, encode(TEST_KEYS, TOPIC, 2, 1_000, 900)) == 900


def test_no_metadata_is_no_position():
    """A commit of a vault from before, or of aiokafka's own: nothing passed over, nothing refused."""
    assert decode(TEST_KEYS, TOPIC, 0, 10, "") is None
    before = refused("malformed") + refused("not_authentic")
    assert positions(TEST_KEYS, {TopicPartition(TOPIC, 0): OffsetAndMetadata(10, "")}) == {}
    assert refused("malformed") + refused("not_authentic") == before


GENUINE = encode(TEST_KEYS, TOPIC, 1, 500, 700)


@pytest.mark.parametrize(
    ("topic", "partition", "offset", "metadata"),
    [
        (TOPIC, 1, 500, GENUINE.replace("ack:700:", "ack:7000:")),  # the position moved on
        (TOPIC, 1, 400, GENUINE),  # committed with another offset
        (TOPIC, 2, 500, GENUINE),  # another partition's
        ("t1.coffre.events.normalized", 1, 500, GENUINE),  # another install's topic
        (TOPIC, 1, 500, encode(STRANGER, TOPIC, 1, 500, 700)),  # a key that is not coffre's
        (TOPIC, 1, 500, GENUINE[:-6] + "AAAAA="),  # the tag altered
        (TOPIC, 1, 500, encode(TEST_KEYS, TOPIC, 1, 500, 700).replace(":test:", ":new:")),  # key id swapped
    ],
    ids=["position", "offset", "partition", "topic", "stranger", "tag", "key-id"],
)
def test_a_metadata_that_does_not_verify_is_refused(topic, partition, offset, metadata):
    with pytest.raises(UnverifiedMetadata, match="does not verify") as raised:
        decode(ROTATED, topic, partition, offset, metadata)
    assert raised.value.reason == "not_authentic"


@pytest.mark.parametrize(
    "metadata",
    [
        "x",
        "ack",
        "ack:",
        "ack:700",
        "ack:-1:" + GENUINE[8:],
        "ack: 700:" + GENUINE[8:],
        "ack:0700:" + GENUINE[8:],  # the same number, written another way
        "ack:1e3:x",
        "ack:٧٠٠:x",
    ],
)
def test_a_malformed_metadata_is_refused(metadata):
    with pytest.raises(UnverifiedMetadata) as raised:
        decode(TEST_KEYS, TOPIC, 1, 500, metadata)
    assert raised.value.reason == "malformed"


def test_positions_keep_what_verifies_and_count_the_rest(caplog):
    committed = {
        TopicPartition(TOPIC, 0): OffsetAndMetadata(10, encode(TEST_KEYS, TOPIC, 0, 10, 25)),
        TopicPartition(TOPIC, 1): OffsetAndMetadata(500, GENUINE.replace("ack:700:", "ack:9999:")),
        TopicPartition(TOPIC, 2): OffsetAndMetadata(7, "junk"),
    }
    forged, malformed = refused("not_authentic"), refused("malformed")
    with caplog.at_level(logging.WARNING, logger="coffre.vault"):
        assert positions(TEST_KEYS, committed) == {0: 25}
    assert (refused("not_authentic"), refused("malformed")) == (forged + 1, malformed + 1)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("is not this vault's" in w for w in warned)
    assert f"{TOPIC}[1]" in warned[0] and f"{TOPIC}[2]" in warned[1]


class Consumer:
    """What read_positions uses of aiokafka's consumer: its coordinator's OffsetFetch."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.asked: list[list[TopicPartition]] = []
        self._coordinator = self

    async def fetch_committed_offsets(self, partitions: list[TopicPartition]):
        self.asked.append(partitions)
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer is None:
            await asyncio.sleep(3600)  # a coordinator that never answers
        return self.answer


def test_read_positions_asks_the_group_and_gives_up_on_a_failure(caplog):
    assigned = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2)]
    genuine = {assigned[0]: OffsetAndMetadata(10, encode(TEST_KEYS, TOPIC, 0, 10, 25))}
    consumer = Consumer(genuine)
    assert asyncio.run(read_positions(consumer, TEST_KEYS, assigned)) == {0: 25}  # type: ignore[arg-type]
    assert consumer.asked == [assigned]
    with caplog.at_level(logging.WARNING, logger="coffre.vault"):
        failing = Consumer(KafkaError("GroupAuthorizationFailed"))
        assert asyncio.run(read_positions(failing, TEST_KEYS, assigned)) == {}  # type: ignore[arg-type]
        silent = Consumer(None)
        assert asyncio.run(read_positions(silent, TEST_KEYS, assigned, timeout=0.2)) == {}  # type: ignore[arg-type]
    assert (
        sum("could not read the committed offsets' metadata" in r.getMessage() for r in caplog.records) == 2
    )
    assert asyncio.run(read_positions(consumer, TEST_KEYS, [])) == {}  # type: ignore[arg-type]
    assert len(consumer.asked) == 1


def delivered(coffre: int, count: int, first_offset: int) -> list[Delivered]:
    """Events 1..count of ``coffre`` as the vault's consumer hands them over, at consecutive offsets."""
    records = normalized_records(coffre, PARTITIONS, count)
    for offset, record in enumerate(records, start=first_offset):
        record.offset = offset
    return records


def test_receipts_are_passed_over_below_the_position_only(tmp_path):
    """Events 1..6 at offsets 100..105, recorded and their receipts acknowledged before a restart;
    the restarted vault reads them again from offset 100 with the position at 103: the receipts of
    100..102 are not sent again, those of 103..105 are (the batch in flight), and a new event after
    them gets its receipt."""
    coffre = coffre_on(1, PARTITIONS)
    records = delivered(coffre, 7, 100)
    journal_root = tmp_path / "journal"
    with JournalSet(journal_root) as journals:
        first = Recorder(journals, keys=TEST_KEYS, partitions=PARTITIONS)
        assert [m.id_evt for m, _ in first.record_records(records[:6])] == [1, 2, 3, 4, 5, 6]
        first.sync()
        chained = {m.id_evt: chain for m, chain in first.record_records(records[:6])}  # redelivered
        assert sorted(chained) == [1, 2, 3, 4, 5, 6]

    passed_before = metrics.RECEIPTS_ACKNOWLEDGED._value.get()
    with JournalSet(journal_root) as journals:
        restarted = Recorder(journals, keys=TEST_KEYS, partitions=PARTITIONS)
        restarted.acknowledged = {1: 103, 0: 10_000}  # another partition's position changes nothing here
        again = restarted.record_records(records)
        assert [m.id_evt for m, _ in again] == [4, 5, 6, 7]
        assert [chain for m, chain in again[:3]] == [chained[4], chained[5], chained[6]]
        assert [r.id_evt for r in journals.journal("0099", coffre).records()] == [1, 2, 3, 4, 5, 6, 7]
        counts = restarted.counts
        assert (counts.recorded, counts.redelivered, counts.acknowledged) == (1, 6, 3)
        assert metrics.RECEIPTS_ACKNOWLEDGED._value.get() == passed_before + 3
        # a copy at an offset past the position (ingest published it again) gets its receipt
        copy = Delivered(records[0].key, records[0].value, records[0].headers, 1, 106)
        assert [m.id_evt for m, _ in restarted.record_records([copy])] == [1]
        # without offsets (record(), not a consumer's records) nothing is passed over
        assert [m.id_evt for m, _ in restarted.record([(r.value, r.headers) for r in records[:2]])] == [1, 2]


def test_below_the_position_a_redelivery_is_still_checked_byte_for_byte(tmp_path):
    coffre = coffre_on(1, PARTITIONS)
    records = delivered(coffre, 3, 0)
    with JournalSet(tmp_path / "journal") as journals:
        recorder = Recorder(journals, keys=TEST_KEYS, partitions=PARTITIONS)
        recorder.record_records(records)
        recorder.sync()
        recorder.acknowledged = {1: 1_000}
        original = records[1]
        other = original.value.replace(b"p-1", b"p-X")
        resealed = NormalizedEvent.seal(TEST_KEYS, original.key, other, original.headers)
        with pytest.raises(VaultHalt, match="IDEvt 2 is already recorded with other bytes"):
            recorder.record_records([Delivered(original.key, other, resealed, 1, 1)])
        assert recorder.counts.acknowledged == 0


def test_the_handover_reads_the_positions_of_what_it_is_given_and_drops_what_it_loses(tmp_path):
    with JournalSet(tmp_path / "journal") as journals:
        recorder = Recorder(journals, keys=TEST_KEYS, partitions=PARTITIONS)
        asked: list[list[TopicPartition]] = []

        async def read(assigned: list[TopicPartition]) -> dict[int, int]:
            asked.append(assigned)
            return {tp.partition: 100 + tp.partition for tp in assigned}

        sealing = SealerThread(None)  # type: ignore[arg-type]  # nothing opened: never asked to forget
        handover = Handover(
            asyncio.Lock(), recorder, journals, sealing, GroupLease(3000), PARTITIONS, acknowledged=read
        )
        given = [TopicPartition(TOPIC, 2), TopicPartition(TOPIC, 0)]
        asyncio.run(handover.on_partitions_assigned(given))
        assert asked == [sorted(given)] and recorder.acknowledged == {0: 100, 2: 102}
        asyncio.run(handover.on_partitions_revoked([TopicPartition(TOPIC, 0)]))
        assert recorder.acknowledged == {2: 102}
        asyncio.run(handover.on_partitions_assigned([TopicPartition(TOPIC, 1)]))
        assert recorder.acknowledged == {1: 101}  # the new assignment's, read again


class OneBatch:
    """A consumer that hands over one batch of partition 1, then nothing."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.batches = [
            {TopicPartition(TOPIC, 1): [Delivered(None, b"", [], 1, offset) for offset in (7, 8)]}
        ]

    def subscribe(self, topics, listener=None) -> None:
        pass

    def assignment(self) -> set:
        return set()

    async def getmany(self, timeout_ms: int, max_records: int):
        if not self.batches:
            self.stop.set()
            return {}
        return self.batches.pop()


class SlowPublisher(Publisher):
    """Acknowledges a batch's records after a while, or fails."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__(producer=None)  # type: ignore[arg-type]
        self.failure = failure
        self.acknowledged = False

    async def send_records(self, records, *, ordered: bool = False) -> None:  # type: ignore[override]
        await asyncio.sleep(0.2)
        if self.failure is not None:
            raise self.failure
        self.acknowledged = True


class Committed:
    def __init__(self) -> None:
        self.offsets: list[dict] = []

    def commit(self, offsets) -> None:
        self.offsets.append(dict(offsets))

    async def flush(self) -> None:
        pass


@pytest.mark.parametrize("fails", [False, True], ids=["acknowledged", "not-acknowledged"])
def test_the_position_moves_only_once_the_batch_receipts_are_acknowledged(fails, tmp_path):
    """Stream.run hands a batch's offsets to the vault's commit filter (whence the acknowledged
    position) only after the broker acknowledged the batch's receipts, and never when it did not."""
    settings = Settings(data_dir=tmp_path, record_keys=TEST_KEYS_TEXT)
    stop = asyncio.Event()
    publisher = SlowPublisher(TopicAuthorizationFailedError() if fails else None)
    committer = Committed()
    filtered: list[tuple[dict, bool]] = []

    def commit_filter(offsets):
        filtered.append((dict(offsets), publisher.acknowledged))
        return {tp: OffsetAndMetadata(5, encode(TEST_KEYS, TOPIC, 1, 5, o)) for tp, o in offsets.items()}

    async def step(batch):
        return [(TOPICS.receipts, b"k", b"receipt", [], 0)]

    s = Stream(settings, (TOPIC,), OneBatch(stop), publisher, committer)  # type: ignore[arg-type]
    if fails:
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(s.run(step, stop, commit_filter=commit_filter))
        assert filtered == [] and committer.offsets == []
        return
    asyncio.run(s.run(step, stop, commit_filter=commit_filter))
    assert filtered == [({TopicPartition(TOPIC, 1): 9}, True)]
    ((committed,),) = [list(c.values()) for c in committer.offsets]
    assert decode(TEST_KEYS, TOPIC, 1, committed.offset, committed.metadata) == 9
