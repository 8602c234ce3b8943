"""The auditor's join without Kafka: each recorded event audited once, its findings published
once with its receipt's chain hash whichever comes first, nothing kept once joined, a replay
after a crash finding what the first audit found."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from coffre_auditor.join import AuditJoin, bounded

from coffre.config import Settings
from coffre.domain.audit.findings import CODES, Finding
from coffre.domain.messages import Receipt

from audit_hands import duplicated_card_hand
from ingest_fold import IngestFold
from pipeline.kafka_io import normalized_rows

ANNEX = Path(__file__).resolve().parents[2] / "coffre" / "demo" / "events" / "annex"
TOPICS = Settings(topic_prefix="t.").topics


def annex(name: str) -> bytes:
    return next(ANNEX.glob(f"*-{name}.xml")).read_bytes()


def card_dealt_twice() -> bytes:
    """The annex POJEU with seat 3's card 33 dealt (and shown) as 32, which seat 2 holds: one
    finding, CARD_DEALT_TWICE (tests/audit_hands.py)."""
    return duplicated_card_hand()


def normalized(*events: bytes) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    """(value, headers) as ingest publishes them, IDEvt 1, 2, … in coffre 0099/1."""
    rows = normalized_rows(IngestFold(), TOPICS, list(events))
    return [(r.value, r.headers) for r in rows if r.topic == TOPICS.normalized]


def receipt(id_evt: int, chain_hash: str | None = None, event_type: str = "POJEU") -> bytes:
    return Receipt("0099", 1, id_evt, event_type, chain_hash or f"{id_evt:064x}", None, False, None).encode()


class Published(list[dict[str, Any]]):
    async def __call__(self, key: bytes, value: bytes) -> None:
        assert key == b"1"
        self.append(json.loads(value))


def join(table: dict[str, Any] | None = None, **kwargs: Any) -> tuple[AuditJoin, Published, dict[str, Any]]:
    published = Published()
    table = {} if table is None else table
    return AuditJoin(table, published, max_message_bytes=1_000_000, **kwargs), published, table


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_findings_wait_for_their_receipt_then_nothing_is_kept():
    (ok, bad) = normalized(annex("POINSCRIT"), card_dealt_twice())
    j, published, table = join()
    assert run(j.on_event(*ok)) is None
    assert run(j.on_event(*bad)) is None
    assert published == [] and "0099/1/waiting/2" in table
    run(j.on_receipt(receipt(1, event_type="POINSCRIT")))  # audited without findings: dropped
    record = run(j.on_receipt(receipt(2, "ab" * 32)))
    assert published == [record]
    assert record["id_evt"] == 2 and record["chain_hash"] == "ab" * 32 and record["event_type"] == "POJEU"
    assert record["tech"] == "WW-94703142" and record["pool"] == "1" and record["findings_omitted"] == 0
    assert [f["code"] for f in record["findings"]] == ["CARD_DEALT_TWICE"]
    assert record["findings"][0]["round"] == "preflop" and record["findings"][0]["seat"] == 3
    assert not [k for k in table if "/waiting/" in k or "/receipt/" in k]
    assert table["0099/1/audited"] == 2
    assert j.counts.dropped_receipts == 1


def test_a_receipt_before_its_event_is_kept_until_the_event_is_audited():
    (ok, bad) = normalized(annex("POINSCRIT"), card_dealt_twice())
    j, published, table = join()
    run(j.on_receipt(receipt(1, event_type="POINSCRIT")))
    run(j.on_receipt(receipt(2, "cd" * 32)))
    assert table["0099/1/receipt/2"] == "cd" * 32
    assert run(j.on_event(*ok)) is None  # no findings: its receipt is forgotten
    record = run(j.on_event(*bad))
    assert published == [record] and record["chain_hash"] == "cd" * 32
    assert not [k for k in table if "/waiting/" in k or "/receipt/" in k]


def test_copies_are_audited_once_and_a_receipt_again_is_dropped():
    (bad,) = normalized(card_dealt_twice())
    j, published, _ = join()
    run(j.on_event(*bad))
    run(j.on_receipt(receipt(1)))
    run(j.on_event(*bad))  # ingest published it again
    run(j.on_receipt(receipt(1)))  # the vault's receipt again
    assert len(published) == 1
    assert j.counts.audited == 1 and j.counts.duplicates == 1 and j.counts.dropped_receipts == 1


def test_an_event_ahead_of_its_coffre_is_audited_all_the_same():
    """A gap can only be the auditor's own table having lost marks in a crash: the event is
    audited (never left unaudited for good), and counted; the event in between, if it comes
    afterwards, is an older one by then and is not audited twice over the newer state."""
    first, second, third = normalized(card_dealt_twice(), card_dealt_twice(), card_dealt_twice())
    j, published, table = join()
    run(j.on_event(*first))
    run(j.on_event(*third))  # IDEvt 3 after 1: the mark of 2 was lost
    assert j.counts.ahead == 1 and table["0099/1/audited"] == 3
    run(j.on_event(*second))
    assert j.counts.duplicates == 1
    for id_evt in (1, 2, 3):
        run(j.on_receipt(receipt(id_evt)))
    assert [r["id_evt"] for r in published] == [1, 3]


def test_an_audit_that_raises_is_a_finding_and_the_next_event_is_audited():
    first, second = normalized(annex("POINSCRIT"), card_dealt_twice())

    def audit(event: Any, trail: Any) -> list[Finding]:
        if event.xml_tag == "POINSCRIT":
            raise ZeroDivisionError("a defect")
        from coffre.domain.audit.events import audit_event

        return audit_event(event, trail)

    j, published, _ = join(audit=audit)
    run(j.on_event(*first))
    run(j.on_event(*second))
    run(j.on_receipt(receipt(1, event_type="POINSCRIT")))
    run(j.on_receipt(receipt(2)))
    assert [(r["id_evt"], [f["code"] for f in r["findings"]]) for r in published] == [
        (1, ["AUDIT_FAILED"]),
        (2, ["CARD_DEALT_TWICE"]),
    ]
    assert "ZeroDivisionError: a defect" in published[0]["findings"][0]["message"]
    assert CODES["AUDIT_FAILED"][0] == "audit"


def test_events_missing_before_one_ahead_are_read_again_and_audited_first():
    """A restarted auditor whose consumer skipped a record (seen with faust on the embedded broker)
    reads the missing events again from the partition, before the one ahead: none is left out."""
    events = normalized(card_dealt_twice(), card_dealt_twice(), card_dealt_twice(), card_dealt_twice())
    asked: list[tuple[int, int, str, int, set[int]]] = []

    async def fetch_missing(partition, before, id_oper, id_coffre, wanted):
        asked.append((partition, before, id_oper, id_coffre, wanted))
        return [events[i - 1] for i in sorted(wanted)]

    j, published, table = join(fetch_missing=fetch_missing)
    run(j.on_event(*events[0], 0, 10))
    run(j.on_event(*events[3], 0, 13))  # IDEvt 4 after 1: 2 and 3 were skipped
    assert asked == [(0, 13, "0099", 1, {2, 3})]
    assert j.counts.ahead == 1 and j.counts.refetched == 2 and table["0099/1/audited"] == 4
    for id_evt in (1, 2, 3, 4):
        run(j.on_receipt(receipt(id_evt)))
    assert [r["id_evt"] for r in published] == [1, 2, 3, 4]


def test_findings_whose_receipt_was_skipped_get_it_read_again():
    """After a restart the consumer skipped receipt 1: receipt 2 shows the gap (the vault publishes
    a coffre's receipts in order), and receipt 1 is read again from the partition."""
    events = normalized(card_dealt_twice(), card_dealt_twice())
    asked: list[tuple[int, int, str, int, set[int]]] = []

    async def fetch_receipts(partition, before, id_oper, id_coffre, wanted):
        asked.append((partition, before, id_oper, id_coffre, wanted))
        return {1: "11" * 32}

    j, published, table = join(fetch_receipts=fetch_receipts)
    for event in events:
        run(j.on_event(*event))
    run(j.on_receipt(receipt(2, "22" * 32), 1, 7))
    assert asked == [(1, 7, "0099", 1, {1})]
    assert [(r["id_evt"], r["chain_hash"]) for r in published] == [(1, "11" * 32), (2, "22" * 32)]
    assert not [k for k in table if "/waiting/" in k]


def test_an_event_audited_after_its_receipt_was_skipped_gets_it_read_again():
    """Receipt 1 was skipped and receipt 2 came before event 1 was audited (read back late): once
    audited with findings, event 1's receipt, behind the receipts read since the start, is read again."""
    first, second = normalized(card_dealt_twice(), card_dealt_twice())
    asked: list[tuple[int, int, str, int, set[int]]] = []

    async def fetch_receipts(partition, before, id_oper, id_coffre, wanted):
        asked.append((partition, before, id_oper, id_coffre, wanted))
        return {1: "11" * 32} if 1 in wanted else {}

    j, published, _ = join(fetch_receipts=fetch_receipts)
    run(j.on_receipt(receipt(2, "22" * 32), 0, 5))
    run(j.on_event(*first))
    run(j.on_event(*second))
    assert asked == [(0, 6, "0099", 1, {1})]
    assert [(r["id_evt"], r["chain_hash"]) for r in published] == [(1, "11" * 32), (2, "22" * 32)]


def test_recorded_bytes_that_do_not_read_as_their_event_are_a_finding():
    (value, headers) = normalized(annex("POINSCRIT"))[0]
    broken = value.replace(b"<SoldeAvant>", b"<SoldeAvant>x", 1)  # the vault records bytes as they come
    j, published, _ = join()
    run(j.on_event(broken, headers))
    run(j.on_receipt(receipt(1, event_type="POINSCRIT")))
    assert [f["code"] for f in published[0]["findings"]] == ["AUDIT_FAILED"]
    assert "do not read as a POINSCRIT" in published[0]["findings"][0]["message"]


def test_a_message_ingest_did_not_write_is_passed_over():
    j, published, table = join()
    assert run(j.on_event(b"<POINSCRIT/>", [])) is None
    assert j.counts.foreign == 1 and table == {} and published == []


def test_a_replay_after_a_crash_finds_what_the_first_audit_found():
    """An event's trail writes recovered, not its ``audited`` mark: audited again, the event reads
    the trail as it was before it. A plain store would give it its own SoldeApres as the previous
    one, and report a broken chain that is not there."""
    registered = annex("POINSCRIT").replace(b"<Format>T</Format>", b"<Format>T/A</Format>")  # 1000 -> 900
    first = annex("POACHAT")  # 900.00 -> 880.00, a buy-in the Format T/A allows

    def then(before: str, after: str) -> bytes:
        return first.replace(b"<SoldeAvant>900.00", f"<SoldeAvant>{before}".encode()).replace(
            b"<SoldeApres>880.00", f"<SoldeApres>{after}".encode()
        )

    events = normalized(
        registered, first, then("880.00", "860.00"), then("870.00", "850.00"), then("850.00", "830.00")
    )
    j, _, table = join()
    after: list[dict[str, Any]] = []  # the table after each event
    for event in events:
        run(j.on_event(*event))
        after.append(copy.deepcopy(table))
    broken = table["0099/1/waiting/4"]
    assert [f["code"] for f in broken["findings"]] == ["BALANCE_CHAIN_BROKEN"]
    assert [k for k in table if "/waiting/" in k] == ["0099/1/waiting/4"]

    for id_evt in (4, 5):  # the crash lost this event's mark and waiting findings, not its trail writes
        replayed = {k: v for k, v in after[id_evt - 1].items() if k != f"0099/1/waiting/{id_evt}"}
        replayed["0099/1/audited"] = id_evt - 1
        again, _, replayed = join(replayed)
        run(again.on_event(*events[id_evt - 1]))
        waiting = replayed.get(f"0099/1/waiting/{id_evt}")
        if id_evt == 4:
            assert waiting is not None and waiting["findings"] == broken["findings"]
        else:
            assert waiting is None, waiting


def test_a_record_too_large_loses_findings_and_counts_them():
    findings = [Finding("CARD_DEALT_TWICE", "x" * 200, "preflop", 1).as_dict() for _ in range(1000)]
    record = {"id_oper": "0099", "id_coffre": 1, "findings": findings, "findings_omitted": 0}
    kept, value = bounded(record, b"1", 64 * 1024)
    assert len(value) + 128 + 1 <= 64 * 1024
    assert 0 < len(kept["findings"]) < 1000
    assert len(kept["findings"]) + kept["findings_omitted"] == 1000
    assert json.loads(value) == kept


@pytest.mark.parametrize("name", ["POINSCRIT", "POJEU"])
def test_the_annex_examples_leave_no_record(name: str):
    """The annex's registration and its hand are consistent on their own: audited, nothing is
    published, nothing waits. (Its buy-in, gain, bilan and cancellation alone refer to a
    registration the coffre has not seen: the money trail flags them, as it should.)"""
    (event,) = normalized(annex(name))
    j, published, table = join()
    run(j.on_event(*event))
    run(j.on_receipt(receipt(1, event_type=name)))
    assert published == [] and j.counts.audited == 1
    assert not [k for k in table if re.search(r"/(waiting|receipt)/", k)]


def test_a_rule_whose_context_the_auditor_never_saw_is_counted_not_checked():
    """Issue 20 item 4: an auditor whose first event of a coffre is IDEvt 2 (its table lost) has not
    seen the registration the buy-in refers to: no OPERATION_OUTSIDE_PARTICIPATION, the rule counted
    in coffre_audit_not_checked_total{code} instead (as coffre_findings_total counts findings)."""
    from coffre import metrics

    _, buy_in = normalized(annex("POINSCRIT"), annex("POACHAT"))
    counter = metrics.AUDIT_NOT_CHECKED.labels("OPERATION_OUTSIDE_PARTICIPATION")
    before = counter._value.get()
    j, published, table = join()
    run(j.on_event(*buy_in))
    run(j.on_receipt(receipt(2, event_type="POACHAT")))
    assert published == [] and not [k for k in table if "/waiting/" in k]
    assert counter._value.get() == before + 1
    assert j.trail.not_checked["OPERATION_OUTSIDE_PARTICIPATION"] == 1
