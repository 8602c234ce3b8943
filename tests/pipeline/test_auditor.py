"""The auditor on a real broker, as ``coffre up`` runs it (its own process beside the stack): an
inconsistent hand is recorded as any other, and its finding comes on ``<prefix>audit`` with its
IDEvt and its receipt's chain hash; a consistent event has no audit record; an auditor killed
mid-stream and started again loses no finding."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord

from coffre.adapters.broker import free_port_block
from coffre.adapters.journal import JournalSet
from coffre.client import CoffreClient
from coffre.commands.stack import AUDITOR, Stack

from audit_hands import duplicated_card_hand
from pipeline.kafka_io import read_topic
from pipeline.ops_http import get, metric, wait_ready
from pipeline.stack_settings import stack_settings

ANNEX = Path(__file__).resolve().parents[2] / "coffre" / "demo" / "events" / "annex"


def annex(name: str) -> bytes:
    return next(ANNEX.glob(f"*-{name}.xml")).read_bytes()


def card_dealt_twice() -> bytes:
    """The annex POJEU with seat 3's card 33 dealt (and shown) as 32, which seat 2 holds: one
    finding, CARD_DEALT_TWICE (tests/audit_hands.py)."""
    return duplicated_card_hand()


@pytest.fixture
def stack(kafka_bootstrap, topic_prefix, tmp_path):
    """The stack as ``coffre up`` runs it, the auditor included, on the session broker."""
    running = Stack(
        stack_settings(kafka_bootstrap, topic_prefix, tmp_path), bootstrap=kafka_bootstrap, auditor=True
    )
    running.start()
    yield running
    codes = running.stop()
    assert all(code == 0 for code in codes.values()), (
        f"services did not stop cleanly: {codes} (logs in {tmp_path}/logs)"
    )


async def submit_all(stack: Stack, events: list[bytes], timeout: float = 60.0) -> list[Any]:
    settings = stack.settings
    async with CoffreClient(stack.bootstrap, settings.topics, settings.synthesis_events) as client:
        return [await client.submit(raw, timeout=timeout) for raw in events]


def audit_record(r: ConsumerRecord) -> dict[str, Any]:
    """An audit record, keyed by its IDCoffre."""
    record = json.loads(r.value)
    assert r.key == str(record["id_coffre"]).encode()
    return record


async def read_audit(bootstrap: str, topic: str, expected: int, timeout: float) -> list[dict[str, Any]]:
    """The audit records from the topic's beginning, once ``expected`` came or ``timeout`` passed,
    and a second more to catch any surplus."""
    return await read_topic(bootstrap, topic, expected, timeout, audit_record, settle=1.0)


def test_an_inconsistent_hand_is_recorded_and_its_finding_joins_its_receipt(stack):
    consistent, inconsistent = annex("POINSCRIT"), card_dealt_twice()
    outcomes = asyncio.run(submit_all(stack, [consistent, inconsistent]))
    assert [o.status for o in outcomes] == ["recorded", "recorded-without-acquittal"]
    receipt = outcomes[1].receipt
    assert (receipt.event_type, receipt.id_evt) == ("POJEU", 2)

    records = asyncio.run(read_audit(stack.bootstrap, stack.settings.topics.audit, 1, timeout=60))
    assert len(records) == 1, records  # the consistent POINSCRIT has none
    record = records[0]
    assert (record["id_oper"], record["id_coffre"], record["id_evt"]) == ("0099", 1, 2)
    assert record["event_type"] == "POJEU" and record["chain_hash"] == receipt.chain_hash
    assert record["tech"] == "WW-94703142" and record["pool"] == "1" and record["audited_at"]
    assert [f["code"] for f in record["findings"]] == ["CARD_DEALT_TWICE"]
    assert "card 32" in record["findings"][0]["message"]

    stack.stop()
    journals = JournalSet(stack.settings.journal_root)
    try:  # recorded as declared: the journal holds the hand, with the chain hash of the finding
        entry = journals.journal("0099", 1).get(2)
        assert entry is not None and entry.chain_hash.hex() == record["chain_hash"]
        assert entry.event.count(b"<Valeur>32</Valeur></Draw>") == 2  # dealt to seats 2 and 3
    finally:
        journals.close()


def test_an_auditor_killed_mid_stream_loses_no_finding(stack):
    """Hands of several coffres, every third one inconsistent; the auditor is killed (SIGKILL)
    once some findings are out, and started again while the platform goes on publishing."""
    hands: list[bytes] = []
    for i in range(36):
        raw = card_dealt_twice() if i % 3 == 0 else annex("POJEU")
        hands.append(raw.replace(b"<IDCoffre>1</IDCoffre>", f"<IDCoffre>{1 + i % 4}</IDCoffre>".encode(), 1))
    expected = {(1 + i % 4, i // 4 + 1) for i in range(36) if i % 3 == 0}  # (IDCoffre, IDEvt)

    outcomes = asyncio.run(submit_all(stack, hands[:18]))
    topic = stack.settings.topics.audit
    first = asyncio.run(read_audit(stack.bootstrap, topic, 3, timeout=60))
    assert first, "no finding before the kill"
    stack.kill(AUDITOR, signal.SIGKILL)
    outcomes += asyncio.run(submit_all(stack, hands[18:27]))
    stack.spawn(AUDITOR)
    outcomes += asyncio.run(submit_all(stack, hands[27:]))
    assert all(o.status == "recorded-without-acquittal" for o in outcomes)
    chain = {(o.receipt.id_coffre, o.receipt.id_evt): o.receipt.chain_hash for o in outcomes}

    records = asyncio.run(read_audit(stack.bootstrap, topic, len(expected), timeout=90))
    found = {(r["id_coffre"], r["id_evt"]) for r in records}
    assert found == expected, (sorted(expected - found), sorted(found - expected))
    for r in records:  # at least once: a copy after the restart says the same
        assert r["chain_hash"] == chain[(r["id_coffre"], r["id_evt"])]
        assert [f["code"] for f in r["findings"]] == ["CARD_DEALT_TWICE"]


def test_its_health_readiness_and_metrics(kafka_bootstrap, topic_prefix, tmp_path):
    """The auditor's ops endpoints, as the other services': ready once the broker answers; its
    metrics count the events audited, their findings by code, the audit's duration, its lag."""
    settings = stack_settings(kafka_bootstrap, topic_prefix, tmp_path, ops_port=free_port_block(5))
    stack = Stack(settings, bootstrap=kafka_bootstrap, auditor=True)
    stack.start()
    try:
        assert stack.ops_port(AUDITOR) == settings.ops_port + 4
        ready = wait_ready(stack, AUDITOR)
        assert ready["service"] == AUDITOR and set(ready["checks"]) == {"broker"}
        status, body = get(f"http://127.0.0.1:{stack.ops_port(AUDITOR)}/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        asyncio.run(submit_all(stack, [annex("POINSCRIT"), card_dealt_twice()]))
        asyncio.run(read_audit(stack.bootstrap, settings.topics.audit, 1, timeout=60))
        deadline = time.monotonic() + 10
        while metric(stack, AUDITOR, "coffre_audit_events_total") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metric(stack, AUDITOR, "coffre_audit_events_total", 'event_type="POJEU"') == 1
        assert metric(stack, AUDITOR, "coffre_audit_events_total", 'event_type="POINSCRIT"') == 1
        found = metric(stack, AUDITOR, "coffre_findings_total", 'code="CARD_DEALT_TWICE",source="auditor"')
        assert found == 1
        assert metric(stack, AUDITOR, "coffre_audit_records_total") == 1
        assert metric(stack, AUDITOR, "coffre_audit_seconds_count") == 2
        deadline = time.monotonic() + 5
        while "coffre_consumer_lag{" not in get(f"http://127.0.0.1:{stack.ops_port(AUDITOR)}/metrics")[1]:
            assert time.monotonic() < deadline, "no consumer lag exported"
            time.sleep(0.2)
    finally:
        codes = stack.stop()
    assert codes[AUDITOR] == 0, codes


def test_the_auditor_makes_its_data_folder_where_there_is_none(kafka_bootstrap, topic_prefix, tmp_path):
    """``coffre auditor`` run from an empty folder with the default data folder (``var``, absent) makes
    ``var/auditor`` as the other services make theirs, instead of failing with FileNotFoundError."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = Stack(stack_settings(kafka_bootstrap, topic_prefix, tmp_path), bootstrap=kafka_bootstrap).env(
        AUDITOR
    )
    env.pop("COFFRE_DATA_DIR")
    env["COFFRE_OPS_PORT"] = "0"
    log = tmp_path / "auditor.log"
    with open(log, "wb") as out:
        auditor = subprocess.Popen(
            [sys.executable, "-m", "coffre.cli", "auditor"], cwd=fresh, env=env, stdout=out, stderr=out
        )
        try:
            deadline = time.monotonic() + 90
            while "auditor ready" not in log.read_text() and auditor.poll() is None:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
            assert auditor.poll() is None, log.read_text()[-3000:]
            assert (fresh / "var" / "auditor").is_dir()
        finally:
            if auditor.poll() is None:
                os.kill(auditor.pid, signal.SIGTERM)
            code = auditor.wait(timeout=60)
    assert code == 0, log.read_text()[-3000:]
    assert "FileNotFoundError" not in log.read_text()
