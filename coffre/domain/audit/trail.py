"""The money trail across events: each player's balances chain from one event to the next.

The state lives in a :class:`TrailStore` (key -> JSON-able value): a dict for ``coffre audit``,
the auditor's faust tables in the service. Keys begin with the coffre (``IDOper/IDCoffre``),
so that one coffre's state lives where its events are (one partition).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Protocol

from ..catalogue.base import Event
from .findings import Finding, register

register(
    "trail",
    BALANCE_CHAIN_BROKEN="a player's SoldeAvant is not the SoldeApres of that player's previous event",
)


class TrailStore(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...

    def __setitem__(self, key: str, value: Any) -> None: ...


class MoneyTrail:
    """Feed it a coffre's events in IDEvt order; each :meth:`observe` returns that event's findings."""

    def __init__(self, store: TrailStore | None = None) -> None:
        self.store: TrailStore = store if store is not None else {}

    def observe(self, event: Event) -> list[Finding]:
        findings: list[Finding] = []
        player = getattr(event, "IDJoueur", None)
        before = getattr(event, "SoldeAvant", None)
        after = getattr(event, "SoldeApres", None)
        if player is not None and isinstance(before, Decimal) and isinstance(after, Decimal):
            key = f"{event.id_oper}/{event.id_coffre}/balance/{player}"
            previous = self.store.get(key)
            if previous is not None and Decimal(previous["after"]) != before:
                findings.append(
                    Finding(
                        "BALANCE_CHAIN_BROKEN",
                        f"SoldeAvant {before} of {type(event).xml_tag} (IDEvt {event.id_evt}) is not "  # type: ignore[attr-defined]
                        f"the SoldeApres {previous['after']} of IDEvt {previous['id_evt']}",
                        player=player,
                    )
                )
            self.store[key] = {"after": str(after), "id_evt": event.id_evt}
        return findings
