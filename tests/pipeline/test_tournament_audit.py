"""End to end (issue 20, "Tests"): a tournament of the demo, doctored with a dodged big blind and a
stack created between hands, published to the stack on a real broker: the auditor flags those two
hands on ``<prefix>audit`` (BLIND_DODGED, CAVE_CHAIN_BROKEN) and nothing else of the tournament.

The doctored tournament is the demo's T-42 played by its own generator (coffre/demo/generate.py):
before hand 3 bruno's stack grows by 500 chips with no re-buy, and hand 4 is dealt as the demo
dealt it before the dead button rule was followed (bruno skipped, chloe on the big blind)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiokafka import ConsumerRecord

from coffre.client import CoffreClient
from coffre.commands.stack import Stack
from coffre.demo import generate
from coffre.domain.audit.events import audit_event
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.normalize import normalize

from pipeline.kafka_io import read_topic
from pipeline.stack_settings import stack_settings

DODGING_HAND_4 = generate.Hand(
    # the demo's hand 4 as it was: the big blind jumps from alice (seat 1) to chloe (seat 3), over bruno
    4,
    "20:10:00",
    (100, 200),
    ("bruno", "chloe", "alice"),
    {"bruno": "6s6d", "chloe": "Th9h", "alice": "Qc3s"},
    "9c6h2d4cKh",
    [
        ("alice", "call"),
        ("bruno", "call"),
        ("chloe", "check"),
        ("bruno", "check"),
        ("chloe", "raise", 1300),
        ("alice", "fold"),
        ("bruno", "call"),
    ],
    {"bruno": 1700, "chloe": -1500, "alice": -200},
)
CREATED = 500
"""Chips bruno's stack gains between hands 2 and 3, with no POACHAT."""


def doctored() -> list[tuple[str, bytes]]:
    def create_chips() -> None:
        generate.PLAYERS["bruno"].chips += CREATED

    hands = (*generate.HANDS[:3], DODGING_HAND_4, generate.HANDS[4])
    try:
        return list(generate.tournament(hands, before={3: create_chips}))
    finally:
        list(generate.tournament())  # leave the module's players as the demo has them


def expected() -> dict[str, list[str]]:
    """File name -> the codes its audit gives: hand 3 (bruno's stack) and hand 4 (the dodge)."""
    return {"11-POJEU-hand-3.xml": ["CAVE_CHAIN_BROKEN"], "14-POJEU-hand-4.xml": ["BLIND_DODGED"]}


def test_the_doctored_tournament_audited_in_process():
    """The same story through ``audit_event`` (as ``coffre audit`` runs it), in order from IDEvt 1."""
    files = doctored()
    assert [name for name, _ in files][:8] == [name for name, _ in generate.tournament()][:8]
    trail = MoneyTrail()
    found = {}
    for name, raw in files:
        codes = [f.code for f in audit_event(normalize(raw), trail)]
        if codes:
            found[name] = codes
    assert found == expected()


@pytest.fixture
def stack(kafka_bootstrap, topic_prefix, tmp_path):
    running = Stack(
        stack_settings(kafka_bootstrap, topic_prefix, tmp_path), bootstrap=kafka_bootstrap, auditor=True
    )
    running.start()
    yield running
    codes = running.stop()
    assert all(code == 0 for code in codes.values()), f"services did not stop cleanly: {codes}"


def audit_record(r: ConsumerRecord) -> dict[str, Any]:
    return json.loads(r.value)


def test_the_auditor_flags_the_dodged_blind_and_the_created_stack(stack):
    files = doctored()

    async def submit() -> list[Any]:
        settings = stack.settings
        async with CoffreClient(stack.bootstrap, settings.topics, settings.synthesis_events) as client:
            return [await client.submit(raw, timeout=60.0) for _, raw in files]

    outcomes = asyncio.run(submit())
    assert all(o.status in ("recorded", "recorded-without-acquittal") for o in outcomes), outcomes
    id_evt = {name: (o.receipt or o.acquittal).id_evt for (name, _), o in zip(files, outcomes, strict=True)}
    assert sorted(id_evt.values()) == list(range(1, len(files) + 1))  # the coffre's first events: complete

    want = {id_evt[name]: codes for name, codes in expected().items()}
    records = asyncio.run(
        read_topic(stack.bootstrap, stack.settings.topics.audit, len(want), 90.0, audit_record, settle=3.0)
    )
    found: dict[int, list[str]] = {}
    for r in records:  # at least once: a copy says the same
        assert (r["id_oper"], r["id_coffre"], r["tech"]) == (generate.OPER, generate.COFFRE, generate.TECH)
        found[r["id_evt"]] = [f["code"] for f in r["findings"]]
    assert found == want
    dodged = next(r for r in records if r["id_evt"] == id_evt["14-POJEU-hand-4.xml"])
    assert "seat 2" in dodged["findings"][0]["message"]  # bruno's seat, passed over
