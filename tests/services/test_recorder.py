"""The vault's recording step on real journals, without Kafka."""

from __future__ import annotations

import pytest
from coffre_ingest.step import InputMessage
from coffre_vault.recorder import Recorder, VaultHalt

from coffre.adapters.journal import JournalSet
from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import ID_EVT

from events import POINSCRIT
from ingest_fold import IngestFold, ingest_batch

TOPICS = Settings().topics


def normalized(tmp_path, count: int) -> list[tuple[bytes, list]]:
    store = IngestFold()
    events = [POINSCRIT.replace(b"<IDJoueur>p-1<", f"<IDJoueur>r-{n}<".encode()) for n in range(count)]
    ingest_batch([InputMessage(0, n, raw, []) for n, raw in enumerate(events)], store, TOPICS, Limits())
    return [(row.value, row.headers) for row in store.unpublished()]


def test_records_in_order_and_a_redelivery_gets_its_first_receipt_again(tmp_path):
    messages = normalized(tmp_path, 4)
    with JournalSet(tmp_path / "j") as journals:
        recorder = Recorder(journals)
        first = recorder.append(messages[:3])
        recorder.sync()
        again = recorder.append([messages[1], messages[3]])
        assert [r.id_evt for r in first] == [1, 2, 3] and [r.id_evt for r in again] == [2, 4]
        assert again[0].chain_hash == first[1].chain_hash
        assert (recorder.counts.recorded, recorder.counts.redelivered) == (4, 1)
        assert journals.journal("0099", 7).last_id_evt == 4


def test_an_event_ahead_of_the_chain_waits_for_its_second_copy(tmp_path):
    messages = normalized(tmp_path, 4)
    with JournalSet(tmp_path / "j") as journals:
        recorder = Recorder(journals)
        receipts = recorder.append([messages[0], messages[2]])  # 2 lost in a failed delivery
        assert [r.id_evt for r in receipts] == [1] and recorder.counts.ahead == 1
        receipts = recorder.append(messages[1:])  # ingest publishes again from the first unconfirmed
        assert [r.id_evt for r in receipts] == [2, 3, 4]
        assert [r.id_evt for r in journals.journal("0099", 7).records()] == [1, 2, 3, 4]


def test_the_same_idevt_with_other_bytes_halts(tmp_path):
    messages = normalized(tmp_path, 2)
    with JournalSet(tmp_path / "j") as journals:
        recorder = Recorder(journals)
        recorder.append(messages)
        value, headers = messages[1]
        with pytest.raises(VaultHalt, match="IDEvt 2 is already recorded with other bytes"):
            recorder.append([(value.replace(b"r-1", b"r-X"), headers)])
        assert journals.journal("0099", 7).last_id_evt == 2


@pytest.mark.parametrize(
    "change",
    [
        lambda v, h: (v, []),  # no coffre headers
        lambda v, h: (v, [(k, b"9" if k == ID_EVT else x) for k, x in h]),  # headers and bytes disagree
        lambda v, h: (b"<not-an-event/>", h),
    ],
)
def test_a_message_ingest_did_not_write_is_passed_over(tmp_path, change):
    (message,) = normalized(tmp_path, 1)
    with JournalSet(tmp_path / "j") as journals:
        recorder = Recorder(journals)
        assert recorder.append([change(*message)]) == []
        assert recorder.counts.foreign == 1
        assert [r.id_evt for r in recorder.append([message])] == [1]
