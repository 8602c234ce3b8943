"""The fold never passes over an offset a fetch skipped: the two events the chaos run lost (d20c187).

Tansu 0.6.0 hands out a record batch's offsets (it moves the partition's high watermark) before it
stores the batch. With two producers on one partition of events.in (a platform, and ingest
forwarding copies there), the batch of one may get offsets 1..2 and the other's offset 3, the
second stored first: a fetch made in between answers 0 and 3, and the next fetch has 1..2 as well.
Measured on the embedded broker: a few such gaps per 10,000 records with 3 or 4 producers on one
partition, each filled within tens of milliseconds. The fold took a gap inside one fetch for a hole
of the log and went on from 4: the events at 1..2 were never numbered, never acknowledged, never in
the vault, and a copy of them forwarded again later fell below the mark of their source partition.
Pure: the fold and a log that stores a batch late, no Kafka.
"""

from __future__ import annotations

from coffre_ingest.step import InputMessage, Output

from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import CORRELATION_ID, ID_EVT, header
from coffre.domain.routing import coffre_partition

from events import POINSCRIT
from ingest_fold import IngestFold, ingest_batch

TOPICS = Settings().topics
LIMITS = Limits()
PARTITIONS = 4
HERE, SOURCE = 1, 3
COFFRE = next(c for c in range(1, 1000) if coffre_partition(c, PARTITIONS) == HERE)


def event(correlation: str) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{COFFRE}</IDCoffre>".encode())
    return raw.replace(b"<IDJoueur>p-1<", f"<IDJoueur>{correlation}<".encode())


def platform(offset: int, correlation: str) -> InputMessage:
    """An event the platform published on HERE, the partition of its coffre."""
    return InputMessage(HERE, offset, event(correlation), [(CORRELATION_ID, correlation.encode())])


def copies(source_offsets: list[int]) -> list[Output]:
    """The copies ingest folding SOURCE forwards to HERE for the events at ``source_offsets`` of SOURCE
    (published there under a key of another partition)."""
    origin = IngestFold(SOURCE, PARTITIONS)
    origin.state.position = source_offsets[0]
    batch = [
        InputMessage(SOURCE, o, event(f"f-{o}"), [(CORRELATION_ID, f"f-{o}".encode())])
        for o in source_offsets
    ]
    ingest_batch(batch, origin, TOPICS, LIMITS)
    assert all(o.forward and o.partition == HERE for o in origin.outputs)
    return origin.outputs


def landed(offset: int, copy: Output) -> InputMessage:
    return InputMessage(HERE, offset, copy.value, copy.headers, key=copy.key)


def fold_fetches(fold: IngestFold, log: list[InputMessage], fetches: list[set[int]]) -> None:
    """Fold HERE as ingest reads it: each fetch from the fold's position answers the records of ``log``
    at or after it that are stored by then (``fetches``, in turn), as Tansu does."""
    for stored in fetches:
        ingest_batch(
            [m for m in log if m.offset >= fold.state.position and m.offset in stored], fold, TOPICS, LIMITS
        )


def numbered(fold: IngestFold) -> list[tuple[str, int]]:
    return [
        (header(o.headers, CORRELATION_ID), int(header(o.headers, ID_EVT)))
        for o in fold.outputs
        if o.topic == TOPICS.normalized
    ]


def test_a_batch_of_copies_stored_after_a_later_batch_is_numbered_not_folded_over():
    """The chaos run: ingest's copies of SOURCE's 10 and 11 got offsets 1..2, the platform's next event
    offset 3, stored first. The fetch in between answered 0 and 3."""
    first, second = copies([10, 11])
    log = [platform(0, "a"), landed(1, first), landed(2, second), platform(3, "b")]
    fold = IngestFold(HERE, PARTITIONS)
    fold_fetches(fold, log, [{0, 3}, {0, 1, 2, 3}])
    assert numbered(fold) == [("a", 1), ("f-10", 2), ("f-11", 3), ("b", 4)]
    assert fold.state.position == 4 and fold.state.forwarded == {SOURCE: 11}


def test_a_copy_skipped_by_a_fetch_is_not_lost_to_the_mark_when_it_is_forwarded_again():
    """The copy of 10 got offset 1, the platform's event offset 2, stored first; the copy of 11 came
    after (sent once 10's was acknowledged), then a take-over of SOURCE forwarded both again. Folded
    over, 10 was never numbered, and its second copy fell below SOURCE's mark (11): a duplicate."""
    first, second = copies([10, 11])
    again = copies([10, 11])
    log = [platform(0, "a"), landed(1, first), platform(2, "b"), landed(3, second)]
    log += [landed(4, again[0]), landed(5, again[1])]
    fold = IngestFold(HERE, PARTITIONS)
    fold_fetches(fold, log, [{0, 2}, {0, 1, 2, 3, 4, 5}])
    assert numbered(fold) == [("a", 1), ("f-10", 2), ("b", 3), ("f-11", 4)]
    assert fold.state.position == 6 and fold.state.forwarded == {SOURCE: 11}


def test_the_fold_stops_at_a_gap_and_moves_past_offsets_only_as_told():
    fold = IngestFold(HERE, PARTITIONS)
    counts = ingest_batch([platform(0, "a"), platform(1, "b"), platform(5, "c")], fold, TOPICS, LIMITS)
    assert counts.accepted == 2 and fold.state.position == 2  # 2..4 not read: 5 is not folded
    fold.state.pass_over(5)  # the log is known to hold no record at 2..4 (transaction markers, say)
    ingest_batch([platform(5, "c")], fold, TOPICS, LIMITS)
    assert numbered(fold) == [("a", 1), ("b", 2), ("c", 3)] and fold.state.position == 6
