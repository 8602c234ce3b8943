"""The three services on a real broker, as separate processes: the annex examples' facts (the
demo's own annex events) get their acquittals (POJEU excepted), a bad event gets its rejection,
and no acquittal exists for an event the vault did not record."""

from __future__ import annotations

import asyncio

from coffre_vault.history import recorded_events

from coffre.adapters.kafka import drain
from coffre.adapters.storage import LocalStorage
from coffre.client import CoffreClient
from coffre.commands.stack import Stack
from coffre.demo import load_demo
from coffre.domain.messages import Acquittal, Rejection

from events import POINSCRIT, pojeu


async def submit_all(stack: Stack, events: list[bytes], timeout: float = 60.0) -> list:
    settings = stack.settings
    async with CoffreClient(stack.bootstrap, settings.topics, settings.synthesis_events) as client:
        return [await client.submit(raw, timeout=timeout) for raw in events]


def test_annex_examples_and_a_bad_event(stack):
    examples = [e.raw for e in load_demo() if e.story == "annex"]
    bad = POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099")
    outcomes = asyncio.run(submit_all(stack, [*examples, bad]))
    statuses = [o.status for o in outcomes]
    assert statuses == ["recorded"] * 5 + ["recorded-without-acquittal", "rejected"]
    assert [o.acquittal.event_type for o in outcomes[:5]] == [
        "POINSCRIT",
        "POACHAT",
        "POGAIN",
        "POBILAN",
        "POANNUL",
    ]
    assert [o.acquittal.id_evt for o in outcomes[:5]] == [1, 2, 3, 4, 5]
    assert outcomes[5].receipt.event_type == "POJEU" and outcomes[5].receipt.id_evt == 6
    assert outcomes[6].acquittal.reasons[0]["code"] == "INVALID_OPERATOR_ID"

    settings = stack.settings
    acquittals = [
        Acquittal.decode(r.value) for r in asyncio.run(drain(stack.bootstrap, settings.topics.acquittals))
    ]
    assert all(a.event_type != "POJEU" for a in acquittals)
    stack.stop()
    records = {
        r.id_evt: r
        for r in recorded_events(LocalStorage(settings.archive_root), settings.journal_root, "0099", 1)
    }
    assert sorted(records) == list(range(1, 7))
    for a in acquittals:
        if a.status == "recorded":  # every recorded acquittal names a record, with its chain hash
            assert records[a.id_evt].chain_hash.hex() == a.chain_hash


def test_supervised_events_get_no_acquittal(stack):
    supervised = POINSCRIT.replace(b"<POINSCRIT>", b'<POINSCRIT supervision="true">')
    outcomes = asyncio.run(submit_all(stack, [supervised, pojeu(), POINSCRIT]))
    assert [o.status for o in outcomes] == [
        "recorded-without-acquittal",
        "recorded-without-acquittal",
        "recorded",
    ]
    assert outcomes[0].receipt.supervised


HOSTILE = {
    "binary": (b"\x00\xff\xfe not xml", "UNSUPPORTED_FORMAT"),
    "entity expansion": (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aa"><!ENTITY b "&a;&a;&a;">]>'
        b"<POINSCRIT><IDOper>&b;</IDOper></POINSCRIT>",
        "DTD_FORBIDDEN",
    ),
    "external entity": (
        b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><POINSCRIT>&e;</POINSCRIT>',
        "DTD_FORBIDDEN",
    ),
    "empty": (b"", "EMPTY_INPUT"),
    "broken json": (b'{"POJEU": [}', "MALFORMED_JSON"),
    "too large": (POINSCRIT.replace(b"Tournoi du dimanche", b"x" * 100_000), "DOCUMENT_TOO_LARGE"),
}


def test_hostile_inputs_are_rejected_with_their_codes_and_break_nothing(stack):
    outcomes = asyncio.run(submit_all(stack, [raw for raw, _ in HOSTILE.values()] + [POINSCRIT]))
    for (name, (_, code)), outcome in zip(HOSTILE.items(), outcomes, strict=False):
        assert outcome.status == "rejected", name
        assert [r["code"] for r in outcome.acquittal.reasons] == [code], name
    assert outcomes[-1].status == "recorded" and outcomes[-1].acquittal.id_evt == 1  # refusals burn no IDEvt
    assert all(child.poll() is None for child in stack.children.values()), "a service died on input"

    rejections = asyncio.run(drain(stack.bootstrap, stack.settings.topics.rejected))
    originals = {Rejection.decode(r.value).original for r in rejections}
    assert originals == {raw for raw, _ in HOSTILE.values()}  # every refused input kept, byte for byte
