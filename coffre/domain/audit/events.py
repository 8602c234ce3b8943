"""Every check of one event, in one call: what the auditor and ``coffre audit`` run."""

from __future__ import annotations

from ..catalogue.base import Event
from ..catalogue.poker import POJEU
from .findings import Finding
from .hand import audit_hand
from .house import DEFAULT_RULES, HouseRules
from .single import check_event
from .trail import MoneyTrail


def audit_event(
    event: Event, trail: MoneyTrail | None = None, rules: HouseRules = DEFAULT_RULES
) -> list[Finding]:
    """The event's own checks, its hand's (a ``POJEU``, judged by the operator's ``rules``), and,
    with a ``trail`` fed the coffre's previous events in order, the checks across events."""
    findings = check_event(event)
    if isinstance(event, POJEU):
        findings += audit_hand(event, rules)
    if trail is not None:
        findings += trail.observe(event)
    return findings
