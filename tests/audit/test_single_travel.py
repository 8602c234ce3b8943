"""Single-event findings travel with the event: ingest's bounded ``coffre-findings`` header, the
vault's Receipt, the Acquittal; old receipts and acquittals (without the field) still decode."""

from __future__ import annotations

import json
import time

from coffre_ingest.step import IngestStep, InputMessage, PartitionState
from coffre_vault.recorder import NormalizedMessage

from coffre.config import Settings
from coffre.domain.codec import Limits
from coffre.domain.messages import (
    FINDINGS,
    MAX_FINDINGS_HEADER_BYTES,
    Acquittal,
    Receipt,
    decode_findings,
    encode_findings,
    header,
    record_size,
)

from events import POINSCRIT
from ingest_fold import TEST_KEYS

TOPICS = Settings().topics
WRONG = POINSCRIT.replace("<SoldeAprès>90.05<".encode(), "<SoldeAprès>90.50<".encode())


def fold(value: bytes, max_message_bytes: int = 1_000_000):
    step = IngestStep(TOPICS, Limits(), max_message_bytes, keys=TEST_KEYS)
    result = step.run(PartitionState(0, 1), [InputMessage(0, 0, value, [])])
    (output,) = result.outputs
    return output, result.counts


def test_ingest_sends_the_findings_of_a_wrong_event_and_none_for_a_right_one():
    output, counts = fold(WRONG)
    assert output.topic == TOPICS.normalized and output.findings == ("BALANCE_ARITHMETIC",)
    findings, omitted = decode_findings(header(output.headers, FINDINGS))
    assert omitted is None and [f["code"] for f in findings] == ["BALANCE_ARITHMETIC"]
    assert "SoldeApres 90.50" in findings[0]["message"] and findings[0]["player"] == "p-1"
    assert counts.findings == {"BALANCE_ARITHMETIC": 1}
    right, counts = fold(POINSCRIT)
    assert header(right.headers, FINDINGS) is None and right.findings == () and not counts.findings


def test_the_header_is_bounded_and_says_how_many_were_left_out():
    many = [{"code": f"CODE_{i}", "message": "x" * 2000} for i in range(50)]
    data = encode_findings(many)
    assert data is not None and len(data) <= MAX_FINDINGS_HEADER_BYTES
    findings, omitted = decode_findings(data)
    assert findings and omitted and len(findings) + omitted == 50
    assert all(len(f["message"]) <= 512 for f in findings)
    assert encode_findings(many, 10) is None  # not even the count fits: no header
    assert encode_findings([]) is None
    assert decode_findings(b"not json") == (None, None)


def test_a_record_near_the_bound_keeps_the_event_and_cuts_the_findings(monkeypatch):
    """The findings never make a record exceed COFFRE_MAX_MESSAGE_BYTES, nor get an event refused."""
    # the coffre-ingested-at header is repr(time.time()), whose length varies from call to call:
    # one clock for both records, or a room of 0 bytes is a coin toss
    monkeypatch.setattr(time, "time", lambda: 1763926283.123456)
    alone, _ = fold(POINSCRIT)
    size = record_size(alone.key, alone.value, alone.headers)
    for room in (0, 40, 120, 400):
        output, _ = fold(WRONG, max_message_bytes=size + room)
        assert output.topic == TOPICS.normalized and output.findings == ("BALANCE_ARITHMETIC",)
        assert record_size(output.key, output.value, output.headers) <= size + room


def test_the_vault_and_the_acquittal_carry_them():
    output, _ = fold(WRONG)
    message = NormalizedMessage.parse(output.value, output.headers)
    receipt = Receipt(
        message.id_oper,
        message.id_coffre,
        message.id_evt,
        message.event_type,
        "00",
        "req-1",
        message.supervised,
        message.ingested_at,
        findings=message.findings,
        findings_omitted=message.findings_omitted,
    )
    again = Receipt.decode(receipt.encode())
    assert again == receipt and [f["code"] for f in again.findings] == ["BALANCE_ARITHMETIC"]
    acquittal = Acquittal.decode(Acquittal.recorded(again).encode())
    assert acquittal.status == "recorded" and acquittal.findings == again.findings
    assert "findings_omitted" not in json.loads(Acquittal.recorded(again).encode())


def test_old_receipts_and_acquittals_still_decode_and_a_clean_one_has_no_field():
    old_receipt = {
        "id_oper": "0099",
        "id_coffre": 7,
        "id_evt": 1,
        "event_type": "POINSCRIT",
        "chain_hash": "00",
        "correlation_id": "r",
        "supervised": False,
        "ingested_at": None,
        "recorded_at": "2026-03-01T10:00:00.000+00:00",
    }
    receipt = Receipt.decode(json.dumps(old_receipt).encode())
    assert receipt.findings is None and json.loads(receipt.encode()) == old_receipt
    acquittal = Acquittal.decode(
        b'{"status":"recorded","correlation_id":"r","event_type":"POINSCRIT","id_evt":1}'
    )
    assert acquittal.findings is None and "findings" not in json.loads(Acquittal.recorded(receipt).encode())
