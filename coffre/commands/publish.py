"""``coffre publish``: publish events as a platform would, and print each acquittal or rejection."""

from __future__ import annotations

import argparse

from coffre.config import Settings

from .inputs import inputs


def run(args: argparse.Namespace) -> int:
    """Publish events and print each acquittal or rejection; exit 0 only if all were recorded."""
    import asyncio

    from coffre.config import load_settings

    settings = load_settings(**({"bootstrap_servers": args.bootstrap} if args.bootstrap else {}))
    items = list(inputs(args.files))
    failures = asyncio.run(submit_all(settings.bootstrap_servers, settings, items, args.timeout))
    return 0 if failures == 0 and items else 1


def describe(label: str, outcome: object, chain_digits: int = 64) -> str:
    """One line per outcome; the demo shortens the chain hash (its verification follows)."""
    from coffre.client import Outcome

    assert isinstance(outcome, Outcome)

    def chain(digest: str | None) -> str:
        text = digest or ""
        return text if len(text) <= chain_digits else f"{text[:chain_digits]}…"

    if outcome.acquittal and outcome.status == "recorded":
        a = outcome.acquittal
        return f"{label}: {a.event_type} recorded, acquitted: IDOper {a.id_oper} IDCoffre {a.id_coffre} IDEvt {a.id_evt} chain {chain(a.chain_hash)}"
    if outcome.acquittal:
        reasons = "; ".join(f"{r['code']} {r['path']}" for r in outcome.acquittal.reasons or [])
        return f"{label}: rejected: {reasons}"
    r = outcome.receipt
    assert r is not None
    why = "synthesis event" if not r.supervised else "Supervision"
    return f"{label}: {r.event_type} recorded without acquittal ({why}): IDOper {r.id_oper} IDCoffre {r.id_coffre} IDEvt {r.id_evt} chain {chain(r.chain_hash)}"


async def submit_all(
    bootstrap: str,
    settings: Settings,
    items: list[tuple[str, bytes]],
    timeout: float,
    chain_digits: int = 64,
) -> int:
    from coffre.client import CoffreClient

    failures = 0
    from coffre.adapters.kafka_security import client_options

    client = CoffreClient(bootstrap, settings.topics, settings.synthesis_events, client_options(settings))
    async with client:
        for label, raw in items:
            try:
                outcome = await client.submit(raw, timeout=timeout)
            except TimeoutError:
                print(f"{label}: no outcome within {timeout:.0f}s", flush=True)
                failures += 1
                continue
            print(describe(label, outcome, chain_digits), flush=True)
            failures += outcome.status == "rejected"
    return failures
