"""A finding: one inconsistency in what an operator declared, with a stable code.

Findings never refuse an event: the vault holds what the operator declared, and its findings
travel beside it (on ``coffre.audit``, in acquittals, in ``coffre audit``'s report). A code
never changes meaning once published; the catalogue is in docs/hand-audit.md (cards, order,
money, showdown) and docs/money-trail.md (trail, identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    """Stable and machine-readable, such as ``CARD_DEALT_TWICE`` (see :data:`CODES`)."""
    message: str
    """For a human, in English, naming the amounts or cards involved."""
    round: str | None = None
    """The ``Tour`` name as the event spells it, when the finding belongs to one round."""
    seat: int | None = None
    """The ``Siege`` concerned, when there is one."""
    player: str | None = None
    """The ``IDJoueur`` concerned, when there is one (money trail, identity)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.round is not None:
            out["round"] = self.round
        if self.seat is not None:
            out["seat"] = self.seat
        if self.player is not None:
            out["player"] = self.player
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(data["code"], data["message"], data.get("round"), data.get("seat"), data.get("player"))


CODES: dict[str, tuple[str, str]] = {}
"""Every finding code: code -> (family, one-line meaning). Families: ``cards``, ``order``,
``money``, ``showdown``, ``trail``, ``identity``, ``tournament`` (across the hands of a tournament),
and ``audit`` (the audit itself could not be made: the auditor's ``AUDIT_FAILED``). Each checking
module registers its own."""


def register(family: str, **codes: str) -> None:
    """Add ``codes`` (code=meaning) of ``family`` to :data:`CODES`; a code is registered once."""
    for code, meaning in codes.items():
        if code in CODES and CODES[code] != (family, meaning):
            raise ValueError(f"finding code {code} registered twice")
        CODES[code] = (family, meaning)
