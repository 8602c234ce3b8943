"""The checks of one event alone: its own balance arithmetic (and its ``HashJoueur``).

Ingest runs them on every accepted event, so that the event's receipt and acquittal carry
the findings and the platform learns at once; the auditor reports them on ``coffre.audit``.
"""

from __future__ import annotations

from decimal import Decimal

from ..catalogue.base import Event
from .findings import Finding, register

register(
    "trail",
    BALANCE_ARITHMETIC="an event's own balance does not add up: SoldeApres ≠ SoldeAvant ± SoldeMouvement",
)

DEBITS = frozenset({"POINSCRIT", "POACHAT"})
"""Cercle events whose movement leaves the player's account; the others of the family credit it."""


def check_event(event: Event) -> list[Finding]:
    """The findings of ``event`` on its own (empty: consistent)."""
    findings: list[Finding] = []
    before = getattr(event, "SoldeAvant", None)
    movement = getattr(event, "SoldeMouvement", None)
    after = getattr(event, "SoldeApres", None)
    tag = type(event).xml_tag  # type: ignore[attr-defined]
    amounts = (before, movement, after)
    if all(isinstance(a, Decimal) for a in amounts) and tag.startswith("PO") and tag != "POJEU":
        expected = before - movement if tag in DEBITS else before + movement
        if after != expected:
            findings.append(
                Finding(
                    "BALANCE_ARITHMETIC",
                    f"{tag}: SoldeApres {after} ≠ SoldeAvant {before} "
                    f"{'−' if tag in DEBITS else '+'} SoldeMouvement {movement} = {expected}",
                    player=getattr(event, "IDJoueur", None),
                )
            )
    return findings
