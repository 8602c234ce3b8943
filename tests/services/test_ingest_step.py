"""The ingest step: IDEvt as a fold over one partition, without Kafka."""

from __future__ import annotations

import hashlib
import json

import coffre_ingest.step as step_module
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from coffre_ingest.step import InputMessage, Output, PartitionState, SnapshotError
from prometheus_client import REGISTRY

from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import (
    CORRELATION_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    ID_EVT,
    Rejection,
    header,
    record_size,
)
from coffre.domain.routing import FORWARDED_FROM, coffre_partition

from events import POINSCRIT, pojeu
from hostile import hostile_cases, poinscrit_json
from ingest_fold import IngestFold, ingest_batch

TOPICS = Settings().topics
LIMITS = Limits()


def message(offset: int, value: bytes, partition: int = 0, correlation: str | None = None) -> InputMessage:
    headers = [(CORRELATION_ID, correlation.encode())] if correlation else []
    return InputMessage(partition, offset, value, headers)


def other_coffre(raw: bytes, coffre: int) -> bytes:
    return raw.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())


def test_idevt_is_gapless_per_coffre_and_ignores_the_inputs(tmp_path):
    store = IngestFold()
    batch = [message(i, other_coffre(POINSCRIT, 7 + i % 2)) for i in range(6)] + [message(6, pojeu())]
    counts = ingest_batch(batch, store, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (7, 0)
    rows = store.unpublished()
    ids = [(r.key, int(header(r.headers, ID_EVT))) for r in rows]
    assert ids == [(b"7", 1), (b"8", 1), (b"7", 2), (b"8", 2), (b"7", 3), (b"8", 3), (b"7", 4)]
    assert all(f"<IDEvt>{n}</IDEvt>".encode() in r.value for r, (_, n) in zip(rows, ids, strict=True))


def test_rejections_go_to_the_outbox_with_their_original_bytes(tmp_path):
    store = IngestFold()
    bad = POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099")
    ingest_batch([message(0, bad, correlation="req-1"), message(1, POINSCRIT)], store, TOPICS, LIMITS)
    rejected, accepted = store.unpublished()
    assert rejected.topic == TOPICS.rejected and rejected.key == b"req-1"
    rejection = Rejection.decode(rejected.value)
    assert rejection.codes == ["INVALID_OPERATOR_ID"] and rejection.original == bad
    assert (rejection.correlation_id, rejection.input_offset) == ("req-1", 0)
    assert (
        accepted.topic == TOPICS.normalized and b"<IDEvt>1</IDEvt>" in accepted.value
    )  # a refusal burns no IDEvt


def test_folding_the_same_inputs_again_gives_the_same_outputs():
    """What makes a take-over, a restart and a zombie safe: from the same snapshot, the same
    inputs give the same IDEvt and the same bytes, whoever folds them."""
    inputs = [message(i, other_coffre(POINSCRIT, 7 + i % 3)) for i in range(9)]
    inputs.insert(4, message(99, b"junk", correlation="bad"))
    inputs = [InputMessage(0, i, m.value, m.headers) for i, m in enumerate(inputs)]
    first = IngestFold()
    ingest_batch(inputs[:5], first, TOPICS, LIMITS)
    snapshot = first.state.encode()
    ingest_batch(inputs[5:], first, TOPICS, LIMITS)
    again = IngestFold()
    again.state = PartitionState.decode(snapshot, 0, 1)
    assert again.state.position == 5
    ingest_batch(inputs, again, TOPICS, LIMITS)  # a new owner re-reads from before its snapshot
    assert [(o.topic, o.key, o.value) for o in again.outputs] == [
        (o.topic, o.key, o.value) for o in first.outputs[5:]
    ]
    assert again.state.counters == first.state.counters and again.state.encode() == first.state.encode()


def test_outputs_already_on_kafka_are_folded_but_not_published_again():
    inputs = [message(i, POINSCRIT) for i in range(5)]
    fold = IngestFold()
    counts = ingest_batch(inputs, fold, TOPICS, LIMITS, published_below=3)
    assert (counts.redelivered, counts.accepted) == (3, 2)
    assert [header(o.headers, ID_EVT) for o in fold.outputs] == ["4", "5"]
    assert [o.offset for o in fold.outputs] == [3, 4]


def test_inputs_before_the_position_are_skipped():
    fold = IngestFold()
    ingest_batch([message(i, POINSCRIT) for i in range(3)], fold, TOPICS, LIMITS)
    counts = ingest_batch([message(i, POINSCRIT) for i in range(1, 5)], fold, TOPICS, LIMITS)
    assert counts.accepted == 2 and fold.state.position == 5
    assert [header(o.headers, ID_EVT) for o in fold.outputs] == ["1", "2", "3", "4", "5"]


def _misrouted(partitions: int) -> tuple[int, int, int]:
    """A coffre and two partitions: the one that owns it, and another one."""
    for coffre in range(1, 1000):
        owner = coffre_partition(coffre, partitions)
        return coffre, owner, (owner + 1) % partitions
    raise AssertionError


def test_an_event_on_another_partition_is_forwarded_once_and_numbered_by_the_owner():
    coffre, owner, elsewhere = _misrouted(4)
    raw = other_coffre(POINSCRIT, coffre)
    origin = IngestFold(elsewhere, 4)
    origin.state.position = 10  # folded up to offset 10
    counts = ingest_batch(
        [InputMessage(elsewhere, 10, raw, [(CORRELATION_ID, b"c-1")])], origin, TOPICS, LIMITS
    )
    assert (counts.forwarded, counts.accepted) == (1, 0) and origin.state.counters == {}
    (copy,) = origin.outputs
    assert copy.forward and copy.topic == TOPICS.events_in and copy.partition == owner
    assert copy.value == raw and copy.key == str(coffre).encode()
    assert (FORWARDED_FROM, f"{elsewhere}:10".encode()) in copy.headers
    assert (CORRELATION_ID, b"c-1") in copy.headers

    target = IngestFold(owner, 4)
    direct = InputMessage(owner, 0, raw, [])
    copies = [InputMessage(owner, 1 + i, copy.value, copy.headers) for i in range(3)]  # re-sent twice
    counts = ingest_batch([direct, *copies], target, TOPICS, LIMITS)
    assert (counts.accepted, counts.duplicate_copies) == (2, 2)
    assert [header(o.headers, ID_EVT) for o in target.outputs] == ["1", "2"]
    assert target.state.forwarded == {elsewhere: 10}
    assert header(target.outputs[1].headers, CORRELATION_ID) == "c-1"  # carried to the acquittal


def test_a_copy_claiming_to_come_from_its_own_partition_is_refused_and_moves_no_mark():
    coffre, owner, _ = _misrouted(4)
    raw = other_coffre(POINSCRIT, coffre)
    fold = IngestFold(owner, 4)
    forged = [(FORWARDED_FROM, f"{owner}:0".encode())]
    counts = ingest_batch(
        [InputMessage(owner, 0, raw, forged), InputMessage(owner, 1, raw, forged)], fold, TOPICS, LIMITS
    )
    assert (counts.accepted, counts.rejected, counts.duplicate_copies) == (0, 2, 0)
    assert [Rejection.decode(o.value).codes for o in fold.outputs] == [["RESERVED_HEADER"]] * 2
    assert fold.state.forwarded == {} and fold.state.counters == {}


def test_a_snapshot_of_another_partitioning_is_refused():
    state = PartitionState(2, 6, 40, {("0099", 7): 12}, {1: 30})
    assert PartitionState.decode(state.encode(), 2, 6) == PartitionState(
        2, 6, 40, {("0099", 7): 12}, {1: 30}, size=state.counter_bytes("0099", 7)
    )
    with pytest.raises(SnapshotError, match="must never change"):
        PartitionState.decode(state.encode(), 2, 8)
    with pytest.raises(SnapshotError):
        PartitionState.decode(state.encode(), 3, 6)
    with pytest.raises(SnapshotError):
        PartitionState.decode(b"{not json", 2, 6)


def test_a_partition_holds_no_more_coffres_than_its_snapshot_can_carry():
    """The snapshot is one record, bounded as every other: the coffre that would overflow it is
    refused (LIMIT_EXCEEDED), the coffres already there go on."""
    fold = IngestFold()
    max_message_bytes = 4096
    room = PartitionState(0, 1).budget(max_message_bytes) // PartitionState.counter_bytes("0099", 1000)
    batch = [message(i, other_coffre(POINSCRIT, 1000 + i)) for i in range(room + 1)]
    batch.append(message(room + 1, other_coffre(POINSCRIT, 1000)))
    counts = ingest_batch(batch, fold, TOPICS, LIMITS, max_message_bytes=max_message_bytes)
    assert (counts.accepted, counts.rejected) == (room + 1, 1)
    refused = Rejection.decode(fold.outputs[room].value)
    assert refused.codes == ["LIMIT_EXCEEDED"] and "coffres" in refused.problems[0]["message"]
    assert record_size(b"0", fold.state.encode(), []) <= max_message_bytes
    assert header(fold.outputs[-1].headers, ID_EVT) == "2"


# --------------------------------------------------------------------------- nothing jams it


def assert_publishable(row: Output, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """The row is a record the producer takes: coffre's bound, and aiokafka's own estimate under
    the request size ingest's producer is given (COFFRE_MAX_MESSAGE_BYTES)."""
    assert record_size(row.key, row.value, row.headers) <= max_bytes
    assert DefaultRecordBatchBuilder.estimate_size_in_bytes(row.key, row.value, row.headers) <= max_bytes


def test_every_hostile_input_ends_as_one_bounded_rejection_and_the_events_after_it_go_on(tmp_path):
    store = IngestFold()
    cases = hostile_cases()
    batch = [InputMessage(0, i, c.value, c.headers) for i, c in enumerate(cases)]
    batch += [message(len(cases) + i, POINSCRIT) for i in range(3)]
    counts = ingest_batch(batch, store, TOPICS, LIMITS)
    assert (counts.rejected, counts.accepted) == (len(cases), 3)
    rows = store.unpublished()
    assert len(rows) == len(batch)  # one output per input, in order
    for case, row in zip(cases, rows, strict=False):
        assert row.topic == TOPICS.rejected, case.name
        assert_publishable(row)
        rejection = Rejection.decode(row.value)
        assert case.code is None or case.code in rejection.codes, (case.name, rejection.codes)
        assert "INTERNAL_ERROR" not in rejection.codes
        assert rejection.original_size == len(case.value)
        assert rejection.original_sha256 == hashlib.sha256(case.value).hexdigest()
        assert case.value.startswith(rejection.original)  # whole, or its first bytes
    assert [int(header(r.headers, ID_EVT)) for r in rows[len(cases) :]] == [1, 2, 3]


def test_a_large_rejection_keeps_the_original_whole_when_it_fits_and_cut_when_not(tmp_path):
    store = IngestFold()
    small, large = b"x" * 600_000, b"x" * 800_000  # base64 makes 800 KB over the 1 MB record
    ingest_batch([message(0, small), message(1, large)], store, TOPICS, LIMITS)
    first, second = (Rejection.decode(r.value) for r in store.unpublished())
    assert first.original == small and not first.truncated
    assert second.truncated and 700_000 < len(second.original) < 800_000
    assert second.original_size == 800_000 and json.loads(store.unpublished()[1].value)["original_truncated"]


def test_an_event_whose_record_would_be_over_the_bound_is_refused_before_it_takes_an_idevt(tmp_path):
    store = IngestFold()
    long_text = "x" * 4096
    big = json.dumps(poinscrit_json(IDSession=long_text, Inscription=long_text, Tech=long_text)).encode()
    counts = ingest_batch(
        [message(0, big), message(1, POINSCRIT)], store, TOPICS, LIMITS, max_message_bytes=8192
    )
    assert (counts.rejected, counts.accepted) == (1, 1)
    refused, accepted = store.unpublished()
    assert Rejection.decode(refused.value).codes == ["LIMIT_EXCEEDED"]
    assert_publishable(refused, 8192)
    assert header(accepted.headers, ID_EVT) == "1"  # the refused event burnt no IDEvt


def test_a_defect_met_on_one_input_refuses_it_with_internal_error_and_the_batch_goes_on(
    tmp_path, monkeypatch
):
    real = step_module.canonical_bytes

    def failing(event, **options):
        if event.id_coffre == 666:
            raise RuntimeError("a defect of coffre's")
        return real(event, **options)

    monkeypatch.setattr(step_module, "canonical_bytes", failing)
    before = REGISTRY.get_sample_value("coffre_internal_errors_total", {"service": "ingest"}) or 0
    store = IngestFold()
    batch = [message(0, POINSCRIT), message(1, other_coffre(POINSCRIT, 666), correlation="c-666")]
    batch += [message(2, POINSCRIT), message(3, other_coffre(POINSCRIT, 666))]
    counts = ingest_batch(batch, store, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (2, 2)
    rows = store.unpublished()
    assert [Rejection.decode(r.value).codes for r in rows if r.topic == TOPICS.rejected] == [
        ["INTERNAL_ERROR"]
    ] * 2
    assert Rejection.decode(rows[1].value).correlation_id == "c-666"
    assert [header(r.headers, ID_EVT) for r in rows if r.topic == TOPICS.normalized] == ["1", "2"]
    assert store.last_id_evt("0099", 666) == 0  # nothing taken for the coffre that failed
    after = REGISTRY.get_sample_value("coffre_internal_errors_total", {"service": "ingest"})
    assert after == before + 2
