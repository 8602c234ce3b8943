"""The ingest step on a real SQLite store, without Kafka."""

from __future__ import annotations

import pytest
from coffre_ingest.step import InputMessage, ingest_batch
from coffre_ingest.store import IngestStore

from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import CORRELATION_ID, ID_EVT, Rejection, header

from events import POINSCRIT, pojeu

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
