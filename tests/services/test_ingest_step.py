"""The ingest step on a real SQLite store, without Kafka."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import coffre_ingest.step as step_module
import coffre_ingest.store as store_module
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from coffre_ingest.step import InputMessage, ingest_batch
from coffre_ingest.store import IngestStore, OutboxRow
from prometheus_client import REGISTRY

from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import (
    CORRELATION_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    ID_COFFRE,
    ID_EVT,
    Rejection,
    header,
    record_size,
)

from events import POINSCRIT, pojeu
from hostile import hostile_cases, poinscrit_json

TOPICS = Settings().topics
LIMITS = Limits()


def message(offset: int, value: bytes, partition: int = 0, correlation: str | None = None) -> InputMessage:
    headers = [(CORRELATION_ID, correlation.encode())] if correlation else []
    return InputMessage(partition, offset, value, headers)


def other_coffre(raw: bytes, coffre: int) -> bytes:
    return raw.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())


def test_idevt_is_gapless_per_coffre_and_ignores_the_inputs(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
    batch = [message(i, other_coffre(POINSCRIT, 7 + i % 2)) for i in range(6)] + [message(6, pojeu())]
    counts = ingest_batch(batch, store, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (7, 0)
    rows = store.unpublished()
    ids = [(r.key, int(header(r.headers, ID_EVT))) for r in rows]
    assert ids == [(b"7", 1), (b"8", 1), (b"7", 2), (b"8", 2), (b"7", 3), (b"8", 3), (b"7", 4)]
    assert all(f"<IDEvt>{n}</IDEvt>".encode() in r.value for r, (_, n) in zip(rows, ids, strict=True))


def test_rejections_go_to_the_outbox_with_their_original_bytes(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
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


def test_a_redelivered_input_gets_no_second_idevt(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
    batch = [message(i, POINSCRIT) for i in range(3)]
    ingest_batch(batch, store, TOPICS, LIMITS)
    first = store.unpublished()
    store.mark_published(first[-1].seq)
    counts = ingest_batch([*batch[1:], message(3, POINSCRIT)], store, TOPICS, LIMITS)
    assert (counts.redelivered, counts.accepted) == (2, 1)
    (new,) = store.unpublished()
    assert b"<IDEvt>4</IDEvt>" in new.value


def test_state_survives_a_restart_and_unpublished_rows_come_back_in_order(tmp_path):
    path = tmp_path / "s.sqlite"
    store = IngestStore(path)
    ingest_batch([message(i, POINSCRIT) for i in range(5)], store, TOPICS, LIMITS)
    store.mark_published(store.unpublished()[1].seq)  # the crash came after two deliveries
    store.close()
    again = IngestStore(path)
    assert [int(header(r.headers, ID_EVT)) for r in again.unpublished()] == [3, 4, 5]
    ingest_batch([message(5, POINSCRIT)], again, TOPICS, LIMITS)
    assert b"<IDEvt>6</IDEvt>" in again.unpublished()[-1].value


def test_a_failed_transaction_assigns_nothing(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.next_id_evt("0099", 7)
        tx.add(b"id", 0, 0, "t", None, b"x", [])
        raise RuntimeError("disk on fire")
    assert store.last_id_evt("0099", 7) == 0 and store.unpublished() == []
    ingest_batch([message(0, POINSCRIT)], store, TOPICS, LIMITS)
    assert b"<IDEvt>1</IDEvt>" in store.unpublished()[0].value


def test_a_reused_offset_with_other_content_is_a_new_input(tmp_path):
    """An in-memory broker that restarted (or a recreated topic) hands out offset 0 again: the
    new record is not a redelivery of the old one and must not be dropped."""
    store = IngestStore(tmp_path / "s.sqlite")
    first = InputMessage(0, 0, POINSCRIT, [(CORRELATION_ID, b"req-1")], timestamp=1_000, key=b"a")
    ingest_batch([first], store, TOPICS, LIMITS)
    for again in (
        InputMessage(0, 0, POINSCRIT, [(CORRELATION_ID, b"req-2")], timestamp=1_000, key=b"a"),
        InputMessage(0, 0, POINSCRIT, [(CORRELATION_ID, b"req-1")], timestamp=2_000, key=b"a"),
        InputMessage(0, 0, POINSCRIT, [(CORRELATION_ID, b"req-1")], timestamp=1_000, key=b"b"),
        InputMessage(
            0, 0, other_coffre(POINSCRIT, 8), [(CORRELATION_ID, b"req-1")], timestamp=1_000, key=b"a"
        ),
    ):
        assert ingest_batch([again], store, TOPICS, LIMITS).accepted == 1
    assert ingest_batch([first], store, TOPICS, LIMITS).redelivered == 1  # the very same record
    assert [int(header(r.headers, ID_EVT)) for r in store.unpublished()] == [1, 2, 3, 4, 1]


# --------------------------------------------------------------------------- nothing jams it


def assert_publishable(row: OutboxRow, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
    """The row is a record the producer takes: coffre's bound, and aiokafka's own estimate under
    the request size ingest's producer is given (COFFRE_MAX_MESSAGE_BYTES)."""
    assert record_size(row.key, row.value, row.headers) <= max_bytes
    assert DefaultRecordBatchBuilder.estimate_size_in_bytes(row.key, row.value, row.headers) <= max_bytes


def test_every_hostile_input_ends_as_one_bounded_rejection_and_the_events_after_it_go_on(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
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
    store = IngestStore(tmp_path / "s.sqlite")
    small, large = b"x" * 600_000, b"x" * 800_000  # base64 makes 800 KB over the 1 MB record
    ingest_batch([message(0, small), message(1, large)], store, TOPICS, LIMITS)
    first, second = (Rejection.decode(r.value) for r in store.unpublished())
    assert first.original == small and not first.truncated
    assert second.truncated and 700_000 < len(second.original) < 800_000
    assert second.original_size == 800_000 and json.loads(store.unpublished()[1].value)["original_truncated"]


def test_an_event_whose_record_would_be_over_the_bound_is_refused_before_it_takes_an_idevt(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
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

    def failing(event):
        if event.id_coffre == 666:
            raise RuntimeError("a defect of coffre's")
        return real(event)

    monkeypatch.setattr(step_module, "canonical_bytes", failing)
    before = REGISTRY.get_sample_value("coffre_internal_errors_total", {"service": "ingest"}) or 0
    store = IngestStore(tmp_path / "s.sqlite")
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


def test_a_value_the_store_refuses_costs_only_its_own_input(tmp_path, monkeypatch):
    real = store_module._encode_headers

    def refusing(headers):  # as SQLite did for a 21-digit IDCoffre: the event's own values
        if (ID_COFFRE, b"666") in headers:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return real(headers)

    monkeypatch.setattr(store_module, "_encode_headers", refusing)
    store = IngestStore(tmp_path / "s.sqlite")
    batch = [message(0, POINSCRIT), message(1, other_coffre(POINSCRIT, 666)), message(2, POINSCRIT)]
    counts = ingest_batch(batch, store, TOPICS, LIMITS)
    assert (counts.accepted, counts.rejected) == (2, 1)
    rows = store.unpublished()
    assert [r.in_offset for r in rows] == [0, 1, 2]
    assert Rejection.decode(rows[1].value).codes == ["INTERNAL_ERROR"]
    assert [header(r.headers, ID_EVT) for r in (rows[0], rows[2])] == ["1", "2"]  # gapless


def test_a_failure_of_the_store_itself_stops_ingest_and_commits_nothing(tmp_path, monkeypatch):
    def broken_disk(headers):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_module, "_encode_headers", broken_disk)
    store = IngestStore(tmp_path / "s.sqlite")
    with pytest.raises(sqlite3.OperationalError):
        ingest_batch([message(0, POINSCRIT), message(1, b"junk")], store, TOPICS, LIMITS)
    assert store.unpublished() == [] and store.last_id_evt("0099", 7) == 0


def test_the_same_record_twice_in_one_batch_is_handled_once(tmp_path):
    store = IngestStore(tmp_path / "s.sqlite")
    twice = InputMessage(0, 5, POINSCRIT, [(CORRELATION_ID, b"req-1")], timestamp=1_000)
    counts = ingest_batch([twice, message(6, POINSCRIT), twice], store, TOPICS, LIMITS)
    assert (counts.accepted, counts.redelivered) == (2, 1)
    assert [header(r.headers, ID_EVT) for r in store.unpublished()] == ["1", "2"]
