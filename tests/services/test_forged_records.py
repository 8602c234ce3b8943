"""Nothing a platform writes can make coffre lose, forge or misnumber an event (issue 19).

Platforms share the cluster with coffre and write ``events.in``, the topic ingest forwards its
copies to. Each case here is a record a platform (or any stranger) can write: it must be answered
once (recorded, or refused with a reason code), never folded as coffre's own, and the genuine
events after it must be numbered as if it had not been there. Without Kafka: the ingest fold, the
vault's recorder on real journals, the records' own checks.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from coffre_ingest.step import InputMessage, PartitionState
from coffre_vault.recorder import Recorder, VaultHalt

from coffre.adapters.journal import JournalSet
from coffre.config import Settings
from coffre.domain.authenticity import AUTH, Purpose, RecordKeyError, RecordKeys
from coffre.domain.codec import Limits
from coffre.domain.messages import (
    CORRELATION_ID,
    ID_EVT,
    ForeignRecord,
    InvalidMessage,
    NormalizedEvent,
    Receipt,
    Rejection,
    UnknownRecordKey,
    header,
)
from coffre.domain.routing import FORWARDED_FROM, coffre_partition

from events import POINSCRIT
from ingest_fold import TEST_KEYS, TEST_KEYS_TEXT, IngestFold, ingest_batch

TOPICS = Settings().topics
LIMITS = Limits()
STRANGER = RecordKeys.parse(RecordKeys.new_key_line("stranger"))
"""A key that is not coffre's: what a platform that guessed the header's format would sign with."""


def coffre_on(partition: int, partitions: int, *, skip: int = 0) -> int:
    """An IDCoffre whose events belong to ``partition``."""
    found = [c for c in range(1, 10_000) if coffre_partition(c, partitions) == partition]
    return found[skip]


def event(coffre: int, player: str = "p-1") -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())
    return raw.replace(b"<IDJoueur>p-1<", f"<IDJoueur>{player}<".encode())


def genuine_copies(coffre: int, source: int, partitions: int, offsets: list[int]) -> list:
    """What ingest folding partition ``source`` forwards for events of ``coffre`` at ``offsets``."""
    origin = IngestFold(source, partitions)
    for o in offsets:
        origin.state.position = o  # the fold of ``source`` stands there (what came before is not the point)
        ingest_batch(
            [InputMessage(source, o, event(coffre, f"p-{o}"), [(CORRELATION_ID, f"c-{o}".encode())])],
            origin,
            TOPICS,
            LIMITS,
        )
    assert all(out.forward for out in origin.outputs)
    return origin.outputs


def refused_codes(fold: IngestFold) -> list[list[str]]:
    return [Rejection.decode(o.value).codes for o in fold.outputs if o.topic == TOPICS.rejected]


def numbered(fold: IngestFold) -> list[int]:
    return [int(header(o.headers, ID_EVT)) for o in fold.outputs if o.topic == TOPICS.normalized]


def test_a_forged_forwarded_from_header_loses_no_genuine_copy():
    """The issue's case: partition 2 of 6, a record claiming to be partition 0's copy at offset 10^12,
    then two genuine copies from partition 0, then a plain record. On a519769: 2 accepted, the 2
    genuine copies dropped as duplicates, nothing rejected."""
    partitions, here = 6, 2
    coffre = coffre_on(here, partitions)
    copies = genuine_copies(coffre, 0, partitions, [5, 6])
    fold = IngestFold(here, partitions)
    batch = [
        InputMessage(here, 0, event(coffre, "forger"), [(FORWARDED_FROM, b"0:1000000000000")], key=b"x"),
        *(InputMessage(here, 1 + i, c.value, c.headers, key=c.key) for i, c in enumerate(copies)),
        InputMessage(here, 3, event(coffre, "plain"), [], key=str(coffre).encode()),
    ]
    counts = ingest_batch(batch, fold, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected, counts.duplicate_copies) == (3, 1, 0)
    assert refused_codes(fold) == [["RESERVED_HEADER"]]
    assert numbered(fold) == [1, 2, 3]
    assert fold.state.forwarded == {0: 6}
    # every input answered once: the forged one by its rejection, the others by their IDEvt
    assert len(fold.outputs) == len(batch)


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param([(FORWARDED_FROM, b"0:1000000000000")], id="huge-offset"),
        pytest.param([(FORWARDED_FROM, b"3:7")], id="another-partition"),
        pytest.param([(FORWARDED_FROM, b"not-a-position")], id="malformed"),
        pytest.param([(FORWARDED_FROM, b"9999:1")], id="partition-out-of-range"),
        pytest.param(
            [(FORWARDED_FROM, b"0:99"), (AUTH, b"dev:" + base64.b64encode(b"x" * 32))], id="made-up-tag"
        ),
        pytest.param([(ID_EVT, b"1")], id="an-idevt-header"),
        pytest.param([("coffre-anything", b"")], id="any-coffre-header"),
    ],
)
def test_a_platform_record_with_coffre_headers_is_refused_and_moves_nothing(headers):
    partitions, here = 6, 2
    coffre = coffre_on(here, partitions)
    copies = genuine_copies(coffre, 0, partitions, [99])
    fold = IngestFold(here, partitions)
    batch = [
        InputMessage(here, 0, event(coffre, "forger"), [(CORRELATION_ID, b"c-forger"), *headers]),
        InputMessage(here, 1, copies[0].value, copies[0].headers),
    ]
    counts = ingest_batch(batch, fold, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected, counts.duplicate_copies) == (1, 1, 0)
    (rejected,) = [o for o in fold.outputs if o.topic == TOPICS.rejected]
    rejection = Rejection.decode(rejected.value)
    assert rejection.codes == ["RESERVED_HEADER"] and rejection.correlation_id == "c-forger"
    assert rejection.problems[0]["path"].startswith("headers/coffre-")
    assert numbered(fold) == [1] and fold.state.forwarded == {0: 99}


def test_a_copy_signed_with_another_key_is_refused():
    partitions, here = 4, 1
    coffre = coffre_on(here, partitions)
    (copy,) = genuine_copies(coffre, 0, partitions, [3])
    resealed = STRANGER.seal(Purpose.forward(here), None, copy.value, copy.headers)
    fold = IngestFold(here, partitions)
    counts = ingest_batch([InputMessage(here, 0, copy.value, resealed)], fold, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (0, 1) and fold.state.forwarded == {}


def test_a_genuine_copy_altered_or_replayed_onto_another_partition_is_refused():
    partitions = 4
    coffre = coffre_on(1, partitions)
    (copy,) = genuine_copies(coffre, 0, partitions, [3])
    altered = IngestFold(1, partitions)
    changed = [*copy.headers[:-1], (CORRELATION_ID, b"c-other"), copy.headers[-1]]
    ingest_batch([InputMessage(1, 0, copy.value, changed)], altered, TOPICS, LIMITS)
    assert refused_codes(altered) == [["RESERVED_HEADER"]]
    elsewhere = IngestFold(2, partitions)  # the tag names the partition the copy was forwarded to
    ingest_batch([InputMessage(2, 0, copy.value, copy.headers)], elsewhere, TOPICS, LIMITS)
    assert refused_codes(elsewhere) == [["RESERVED_HEADER"]] and elsewhere.state.forwarded == {}


def test_a_genuine_copy_replayed_onto_its_partition_is_the_duplicate_it_is():
    """Byte for byte what a zombie ingest publishes again: its input was answered once (numbered), so
    the replay is dropped as a duplicate copy, as a zombie's is."""
    partitions, here = 4, 1
    coffre = coffre_on(here, partitions)
    (copy,) = genuine_copies(coffre, 0, partitions, [3])
    fold = IngestFold(here, partitions)
    replay = [InputMessage(here, o, copy.value, copy.headers) for o in (0, 1, 2)]
    counts = ingest_batch(replay, fold, TOPICS, LIMITS)
    assert (counts.accepted, counts.duplicate_copies, counts.rejected) == (1, 2, 0)


def test_during_a_rotation_copies_signed_with_either_key_are_coffres():
    old_line, new_line = RecordKeys.new_key_line("k1"), RecordKeys.new_key_line("k2")
    old, both = RecordKeys.parse(old_line), RecordKeys.parse(f"{new_line}\n{old_line}")
    tagged = old.seal(Purpose.forward(1), None, b"v", [(FORWARDED_FROM, b"0:1")])
    assert both.authentic(Purpose.forward(1), None, b"v", tagged)
    assert not RecordKeys.parse(new_line).authentic(Purpose.forward(1), None, b"v", tagged)
    assert both.seal(Purpose.forward(1), None, b"v", [])[-1][1].startswith(b"k2:")  # the first one signs


def test_record_keys_that_cannot_protect_anything_are_refused():
    with pytest.raises(RecordKeyError, match="at least 32"):
        RecordKeys.parse("k:" + base64.b64encode(b"short").decode())
    with pytest.raises(RecordKeyError, match="twice"):
        line = RecordKeys.new_key_line("k")
        RecordKeys.parse(f"{line},{line}")
    with pytest.raises(RecordKeyError, match="no record key"):
        RecordKeys.parse("# only a comment\n")


# the vault -------------------------------------------------------------------------------


@dataclass
class Delivered:
    """A record as the vault's consumer hands it over."""

    key: bytes | None
    value: bytes
    headers: list
    partition: int
    offset: int = 0


def normalized_records(coffre: int, partitions: int, count: int) -> list[Delivered]:
    here = coffre_partition(coffre, partitions)
    fold = IngestFold(here, partitions)
    ingest_batch(
        [InputMessage(here, n, event(coffre, f"p-{n}"), []) for n in range(count)], fold, TOPICS, LIMITS
    )
    return [Delivered(o.key, o.value, o.headers, here) for o in fold.outputs]


def test_the_vault_passes_over_a_strangers_normalized_record_without_halting(tmp_path):
    """A stranger's record claiming an IDEvt already recorded, with other bytes, halted the vault on
    a519769 (the same IDEvt with other bytes is a breach). Now: refused, counted, and the next genuine
    events are recorded."""
    partitions = 3
    coffre = coffre_on(0, partitions)
    genuine = normalized_records(coffre, partitions, 3)
    first = genuine[0]
    forged_value = first.value.replace(b"p-0", b"p-X")
    forged_headers = [(n, v) for n, v in first.headers if n != AUTH]
    forged = [
        Delivered(first.key, forged_value, forged_headers, 0),  # no tag
        Delivered(
            first.key,
            forged_value,
            STRANGER.seal(Purpose.NORMALIZED, first.key, forged_value, forged_headers),
            0,
        ),
        Delivered(first.key, first.value, first.headers, 1),  # genuine, replayed onto another partition
    ]
    ahead = genuine[2]
    ahead_value = ahead.value.replace(b"<IDEvt>3</IDEvt>", b"<IDEvt>9</IDEvt>")
    ahead_headers = [(n, b"9" if n == ID_EVT else v) for n, v in ahead.headers]
    forged.append(Delivered(ahead.key, ahead_value, ahead_headers, 0))  # an IDEvt ahead, tag not recomputed
    with JournalSet(tmp_path / "j") as journals:
        recorder = Recorder(journals, keys=TEST_KEYS, partitions=partitions)
        recorder.record_records(genuine[:1])
        recorded = recorder.record_records([*forged, *genuine[1:]])
        assert [m.id_evt for m, _ in recorded] == [2, 3]
        assert recorder.counts.foreign == 4 and recorder.counts.ahead == 0
        assert [r.event for r in journals.journal("0099", coffre).records()] == [g.value for g in genuine]
        # the check that remains for coffre's own records: two writers of one coffre halt the vault
        sealed = NormalizedEvent.seal(TEST_KEYS, first.key, forged_value, forged_headers)
        with pytest.raises(VaultHalt):
            recorder.record_records([Delivered(first.key, forged_value, sealed, 0)])


def test_records_of_other_topics_are_authenticated_too():
    receipt = Receipt(
        "0099", 7, 1, "POINSCRIT", "ab" * 32, "c-1", False, 1.0, "2026-11-25T00:00:00.000+00:00"
    )
    key, value, headers = receipt.record(TEST_KEYS)
    assert Receipt.from_record(key, value, headers, TEST_KEYS) == receipt
    with pytest.raises(ForeignRecord):
        Receipt.from_record(key, value, headers[:-1], TEST_KEYS)
    with pytest.raises(ForeignRecord):  # a receipt's tag does not make a rejection
        Rejection.from_record(key, value, headers, TEST_KEYS)
    forged = value.replace(b'"id_evt":1', b'"id_evt":2')
    with pytest.raises(ForeignRecord):
        Receipt.from_record(key, forged, headers, TEST_KEYS)
    with pytest.raises(ForeignRecord):
        Receipt.from_record(key, value, headers, STRANGER)
    record = genuine_copies(coffre_on(0, 2), 1, 2, [0])[0]
    assert isinstance(ForeignRecord("x"), InvalidMessage)
    with pytest.raises(ForeignRecord):  # a forwarded copy is no normalized event
        NormalizedEvent.from_record(record.key, record.value, record.headers, TEST_KEYS)


def test_a_strangers_snapshot_is_not_one():
    state = PartitionState(1, 4, 10, {("0099", 7): 3}, {0: 8})
    key, value, headers = state.record(TEST_KEYS)
    assert PartitionState.from_record(key, value, headers, 1, 4, TEST_KEYS).position == 10
    far = PartitionState(1, 4, 10**12, {("0099", 7): 10**9}, {0: 10**12})
    for forged in (far.encode(), value):
        with pytest.raises(ForeignRecord):
            PartitionState.from_record(
                key, forged, STRANGER.seal(Purpose.snapshot(1), key, forged, []), 1, 4, TEST_KEYS
            )
    with pytest.raises(ForeignRecord):  # partition 1's snapshot is not partition 2's
        PartitionState.from_record(key, value, headers, 2, 4, TEST_KEYS)


# a key id the service lacks ---------------------------------------------------------------

SIGNER_LINE = RecordKeys.new_key_line("k2026b")
ROTATED = RecordKeys.parse(f"{SIGNER_LINE}\n{TEST_KEYS_TEXT}")
"""What a service given a newer keys file than the others signs with: ``k2026b`` first, the install's
``test`` key second (a rotation's step 2 that reached one service before step 1 reached the others)."""
LACKS = (
    "signed with key id 'k2026b', which this service does not have: every service of one install needs "
    "the same COFFRE_RECORD_KEYS_FILE"
)


def test_a_record_signed_with_a_key_id_the_service_lacks_is_reported_naming_it():
    receipt = Receipt(
        "0099", 7, 1, "POINSCRIT", "ab" * 32, "c-1", False, 1.0, "2026-11-25T00:00:00.000+00:00"
    )
    key, value, headers = receipt.record(ROTATED)
    assert headers[-1][1].startswith(b"k2026b:")
    with pytest.raises(UnknownRecordKey) as lacking:
        Receipt.from_record(key, value, headers, TEST_KEYS)
    assert lacking.value.key_id == "k2026b" and LACKS in str(lacking.value)
    assert isinstance(lacking.value, ForeignRecord)  # passed over as any record that does not verify
    assert Receipt.from_record(key, value, headers, ROTATED) == receipt

    # a tag naming a key id the service has, that does not verify: not coffre's, and said so
    key, value, headers = receipt.record(TEST_KEYS)
    forged = value.replace(b'"id_evt":1', b'"id_evt":2')
    with pytest.raises(ForeignRecord) as failed:
        Receipt.from_record(key, forged, headers, TEST_KEYS)
    assert not isinstance(failed.value, UnknownRecordKey)
    assert "no valid coffre-auth tag" in str(failed.value) and "k2026b" not in str(failed.value)
    # no tag, or a malformed one: no key id to name
    assert TEST_KEYS.unknown_key_id(headers[:-1]) is None
    assert TEST_KEYS.unknown_key_id([(AUTH, b"no colon")]) is None
    assert TEST_KEYS.unknown_key_id([(AUTH, b"test:abc")]) is None  # a key it has


def test_the_vault_names_the_key_id_it_lacks_and_counts_it_apart(tmp_path, caplog):
    from coffre import metrics

    partitions = 3
    coffre = coffre_on(0, partitions)
    genuine = normalized_records(coffre, partitions, 2)
    first = genuine[0]
    plain = [(n, v) for n, v in first.headers if n != AUTH]
    resealed = Delivered(
        first.key, first.value, ROTATED.seal(Purpose.NORMALIZED, first.key, first.value, plain), 0
    )
    counted = metrics.FOREIGN_RECORDS.labels("vault", "unknown_key_id")
    before = counted._value.get()
    with JournalSet(tmp_path / "j") as journals, caplog.at_level("ERROR", logger="coffre"):
        recorder = Recorder(journals, keys=TEST_KEYS, partitions=partitions)
        assert recorder.record_records([resealed]) == []
        assert recorder.counts.foreign == 1
        assert [m.id_evt for m, _ in recorder.record_records(genuine)] == [1, 2]
    assert counted._value.get() == before + 1
    (line,) = [r.getMessage() for r in caplog.records if "passed over" in r.getMessage()]
    assert LACKS in line and "that ingest did not write" not in line


def test_ingest_names_the_key_id_of_a_snapshot_or_a_copy_it_cannot_verify(caplog):
    state = PartitionState(1, 4, 10, {("0099", 7): 3}, {0: 8})
    key, value, headers = state.record(ROTATED)
    with pytest.raises(UnknownRecordKey, match="k2026b"):
        PartitionState.from_record(key, value, headers, 1, 4, TEST_KEYS)

    partitions, here = 4, 1
    coffre = coffre_on(here, partitions)
    (copy,) = genuine_copies(coffre, 0, partitions, [3])
    resealed = ROTATED.seal(Purpose.forward(here), None, copy.value, copy.headers)
    fold = IngestFold(here, partitions)
    with caplog.at_level("ERROR", logger="coffre.ingest"):
        counts = ingest_batch([InputMessage(here, 0, copy.value, resealed)], fold, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (0, 1) and fold.state.forwarded == {}
    (rejected,) = [o for o in fold.outputs if o.topic == TOPICS.rejected]
    rejection = Rejection.decode(rejected.value)
    assert rejection.codes == ["RESERVED_HEADER"] and LACKS in rejection.problems[0]["message"]
    assert any(LACKS in r.getMessage() for r in caplog.records)
    # a stranger's tag under a key id the fold has: refused, without a key id to blame
    made_up = [*copy.headers[:-1], (AUTH, b"test:" + base64.b64encode(b"x" * 32))]
    other = IngestFold(here, partitions)
    ingest_batch([InputMessage(here, 0, copy.value, made_up)], other, TOPICS, LIMITS)
    (rejected,) = [o for o in other.outputs if o.topic == TOPICS.rejected]
    assert "key id" not in Rejection.decode(rejected.value).problems[0]["message"]


def test_the_tag_is_the_documented_hmac_known_answer():
    """The tag's bytes are fixed across versions (records written before an upgrade verify after):
    HMAC-SHA256 over purpose, key, value, then each header's name and value but ``coffre-auth``, each
    preceded by its length on 8 big-endian bytes (all ones for a missing value). Known answer computed
    with one ``hmac.update`` per part, as coffre did before it joined them (issue 34)."""
    keys = RecordKeys((("k", bytes(range(32))),))
    headers = [(AUTH, b"ignored"), ("coffre-idevt", b"7"), ("correlation-id", None), ("e", b"")]
    tag = keys._tag("k", b"receipt", b"21", b"<v/>", headers)
    assert tag.hex() == "7953f61b55279d8158b20a7f0251be752cd16596e15352b123671242ec149d8e"
    sealed = keys.seal(b"receipt", b"21", b"<v/>", headers)
    assert sealed[-1] == (AUTH, b"k:" + base64.b64encode(tag))
    assert keys.authentic(b"receipt", b"21", b"<v/>", sealed)
    assert not keys.authentic(b"receipt", b"21", b"<v />", sealed)
    assert not keys.authentic(b"receipt", b"22", b"<v/>", sealed)
    assert not keys.authentic(b"normalized", b"21", b"<v/>", sealed)
