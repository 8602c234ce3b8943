"""``coffre signals --jobs N``: each lot read, its events normalized, their facts and the equities
of their decisions computed (what costs most: :func:`~coffre.domain.signals.state.decision_equities`)
in worker processes; the main process feeds the counters in the serial order, so the result is the
serial run's.

The start method is :func:`coffre.adapters.audit_workers.start_method`'s choice (``fork`` without
other threads). Each worker keeps its own equity cache: a year of hands warms each one.
"""

from __future__ import annotations

import gc
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from coffre.domain.errors import Rejected
from coffre.domain.lot import LotFormatError, parse_document, read_lot
from coffre.domain.normalize import normalize
from coffre.domain.signals.facts import facts_of
from coffre.domain.signals.state import Scope, facts_with_equities

from .audit_workers import start_method

# One event's outcome, in order: ("facts", label, ref, facts | None) | ("skip", label, ref) (out of
# scope, or fed already) | ("rejected", label, message, codes) | ("error", label, message);
# a lot that cannot be read: [("unreadable", file, message)]
Outcome = tuple[Any, ...]


def pool(jobs: int) -> Executor:
    context = multiprocessing.get_context(start_method())
    gc.freeze()  # what lives now lives as long as the run (audit_workers.pool)
    return ProcessPoolExecutor(jobs, mp_context=context)


def event_outcome(label: str, raw: bytes, scope: Scope, cursor: int, *, equities: bool) -> Outcome:
    """One event's bytes to what the counters need (``equities``: computed here, as a worker does)."""
    try:
        event = normalize(raw)
    except Rejected as exc:
        return ("rejected", label, "; ".join(p.message for p in exc.problems), tuple(exc.codes))
    ref = (event.id_oper, event.id_coffre, event.id_evt)
    if ref[2] <= cursor or not scope.admits(event.id_oper, str(event.DateEvt)):  # type: ignore[attr-defined]
        return ("skip", label, ref)
    try:
        facts = facts_with_equities(event) if equities else facts_of(event)
    except Exception as exc:  # a defect of coffre's reading: reported, the run goes on
        return ("error", label, f"the signals failed: {type(exc).__name__}: {exc}")
    return ("facts", label, ref, facts)


def lot_task(file: str, source: str, cursor: int, scope: Scope) -> list[Outcome]:
    """The outcomes of a lot's events past ``cursor`` (``source``: the labels' prefix)."""
    try:
        lot = read_lot(parse_document(Path(file).read_bytes()))
    except (OSError, LotFormatError) as exc:  # changed since it verified
        return [("unreadable", file, str(exc))]
    return [
        event_outcome(f"{source}#{item.id_evt}", item.canonical, scope, cursor, equities=True)
        for item in lot.events
        if item.id_evt > cursor
    ]
