"""The checks of one event alone: its balance groups' arithmetic and its ``HashJoueur``.

Ingest runs them on every accepted event, so that the event's receipt and acquittal carry
the findings and the platform learns at once; the auditor reports them on ``coffre.audit``.
They must stay cheap (a few attribute reads per event; the hashes only for the two events that
carry an identity): ingest's micro-benchmark is in tests/audit/test_single_balance.py.

Every balance group of the catalogue is named in :data:`MOVEMENTS`, per event type, with the
direction of its movement: the schema set writes movements as absolute values
(``types:nonNegativeDecimal``), the direction follows the event type. docs/money-trail.md gives
the table and the texts each line rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from ..catalogue.base import Event
from .findings import Finding, register
from .identity import check_identity

register(
    "trail",
    BALANCE_ARITHMETIC="an event's own balance does not add up: SoldeApres ≠ SoldeAvant ± SoldeMouvement "
    "(or the family's names for them: SoldeAvantMise − Mise, SoldeAvantGain + Gain…)",
    BONUS_ARITHMETIC="an event's own bonus compartment does not add up: BonusApres ≠ BonusAvant ± BonusMouvement",
    CURRENCY_ARITHMETIC="an ACHATMONNAIE's virtual currency does not add up: "
    "MonnaieApres ≠ MonnaieAvant + MontantMonnaie",
    ACCOUNT_IN_DEBIT="a poker stake (POINSCRIT, POACHAT) leaves the player's balance below zero: "
    "SoldeApres < 0 after a debit (decree 2016-1326 art. 8 II 1°)",
)


class Direction(Enum):
    DEBIT = "−"
    """The movement leaves the compartment: after = before − movement."""
    CREDIT = "+"
    """The movement enters it: after = before + movement."""
    SIGNED = "±"
    """The movement carries its sign (CPTEAJUSTOPE's ``Ajustement``): after = before + movement."""


@dataclass(frozen=True, slots=True)
class Movement:
    """One balance group of an event type: three element names, the direction, and the compartment."""

    compartment: str
    """``solde`` (the player's money), ``bonus``, or ``monnaie`` (ACHATMONNAIE's virtual currency)."""
    before: str
    movement: str
    after: str
    direction: Direction
    also: str | None = None
    """A second amount the texts may or may not count in the same movement (``GainAbond``): both
    readings are accepted, see docs/money-trail.md."""

    def expected(self, before: Decimal, movement: Decimal) -> Decimal:
        return before - movement if self.direction is Direction.DEBIT else before + movement


_S, _B = "solde", "bonus"
_D, _C = Direction.DEBIT, Direction.CREDIT


def _old(direction: Direction) -> tuple[Movement, ...]:
    """finance:old (cercle families PO and FA, and LOTI/LOJI): SoldeAvant/SoldeMouvement/SoldeApres and
    BonusAvant/BonusMouvement/BonusApres, both in the event's direction."""
    return (
        Movement(_S, "SoldeAvant", "SoldeMouvement", "SoldeApres", direction),
        Movement(_B, "BonusAvant", "BonusMouvement", "BonusApres", direction),
    )


_GAIN = (
    Movement(_S, "SoldeAvantGain", "Gain", "SoldeApresGain", _C, also="GainAbond"),
    Movement(_B, "BonusAvantGain", "BonusMouvement", "BonusApresGain", _C),
)


_REFUND = (
    Movement(_S, "SoldeAvantRembours", "MontantRembours", "SoldeApresRembours", _C),
    Movement(_B, "BonusAvant", "BonusMouvement", "BonusApres", _C),
)

MOVEMENTS: dict[str, tuple[Movement, ...]] = {
    # poker and fantasy (annex 1.3.6.c; samples PO/*, FA/*)
    "POINSCRIT": _old(_D),
    "POACHAT": _old(_D),
    "POGAIN": _old(_C),
    "POBILAN": _old(_C),
    "POANNUL": _old(_C),
    "FAINSCRIT": _old(_D),
    "FAACHAT": _old(_D),
    "FAGAIN": _old(_C),
    "FABILAN": _old(_C),
    "FAANNUL": _old(_C),
    # the player's account (CJ)
    "CPTEALIM": (Movement(_S, "SoldeAvant", "SoldeMouvement", "SoldeApres", _C),),
    "CPTERETRAIT": (Movement(_S, "SoldeAvant", "SoldeMouvement", "SoldeApres", _D),),
    "CPTEABOND": (Movement(_S, "SoldeAvant", "MontAbond", "SoldeApres", _C),),
    "CPTEAJUSTOPE": (
        Movement(_S, "SoldeAvant", "Ajustement", "SoldeApres", Direction.SIGNED),
        Movement(_B, "BonusAvant", "BonusAjust", "BonusApres", Direction.SIGNED),
    ),
    "CPTEALIMOPE": (Movement(_B, "BonusAvant", "BonusMouvement", "BonusApres", _C),),
    "ACHATMONNAIE": (
        Movement(_S, "SoldeAvant", "MontantAchat", "SoldeApres", _D),
        Movement("monnaie", "MonnaieAvant", "MontantMonnaie", "MonnaieApres", _C),
    ),
    # sports and horse bets (PASP, PAHI)
    "PASPMISE": (
        Movement(_S, "SoldeAvantMise", "Mise", "SoldeApresMise", _D),
        Movement(_B, "BonusAvantMise", "BonusMise", "BonusApresMise", _D),
    ),
    "PAHIMISE": (
        Movement(_S, "SoldeAvantMise", "Mise", "SoldeApresMise", _D),
        Movement(_B, "BonusAvantMise", "BonusMouvement", "BonusApresMise", _D),
    ),
    "PASPGAIN": _GAIN,
    "PAHIGAIN": _GAIN,
    "PASPANNUL": _REFUND,
    "PAHIANNUL": _REFUND,
    # lotteries (LOTI, LOJI)
    "LOTIMISE": _old(_D),
    "LOJIMISE": _old(_D),
    "LOTIANNUL": _old(_C),
    "LOJIANNUL": _old(_C),
    "LOTIGAIN": (
        Movement(_S, "SoldeAvant", "SoldeMouvement", "SoldeApres", _C, also="GainAbond"),
        Movement(_B, "BonusAvant", "BonusMouvement", "BonusApres", _C),
    ),
    "LOJIGAIN": (
        Movement(_S, "SoldeAvant", "SoldeMouvement", "SoldeApres", _C, also="GainAbond"),
        Movement(_B, "BonusAvant", "BonusMouvement", "BonusApres", _C),
    ),
}
"""Every balance group of the catalogue, per event type (docs/money-trail.md, "Directions")."""

DEBIT_FORBIDDEN = frozenset({"POINSCRIT", "POACHAT"})
"""The stakes decree 2016-1326 art. 8 II 1° forbids to take the account below zero ("n'acceptent
aucune mise rendant le compte joueur débiteur"). The decree is the jeux de cercle's (poker, art. 1):
its stakes are the registration and the buy-in. The bets' and lotteries' texts are not in the
seeds, so their stakes are not judged (docs/money-trail.md)."""

_CODES = {_S: "BALANCE_ARITHMETIC", _B: "BONUS_ARITHMETIC", "monnaie": "CURRENCY_ARITHMETIC"}


def balances(event: Event) -> list[tuple[Movement, Decimal, Decimal, Decimal]]:
    """The complete balance groups ``event`` carries: (group, before, movement, after) each."""
    out = []
    for group in MOVEMENTS.get(event.xml_tag, ()):  # type: ignore[attr-defined]
        before = getattr(event, group.before, None)
        movement = getattr(event, group.movement, None)
        after = getattr(event, group.after, None)
        if before is not None and movement is not None and after is not None:
            out.append((group, before, movement, after))
    return out


def check_event(event: Event) -> list[Finding]:
    """The findings of ``event`` on its own (empty: consistent)."""
    findings: list[Finding] = []
    tag: str = event.xml_tag  # type: ignore[attr-defined]
    for group, before, movement, after in balances(event):
        if (
            after < 0
            and movement > 0
            and group.compartment == _S
            and group.direction is Direction.DEBIT
            and tag in DEBIT_FORBIDDEN
        ):
            findings.append(
                Finding(
                    "ACCOUNT_IN_DEBIT",
                    f"{tag}: a stake of {movement} leaves {group.after} {after} below zero "
                    f"({group.before} {before}); decree 2016-1326 art. 8 II 1°",
                    player=getattr(event, "IDJoueur", None),
                )
            )
        expected = group.expected(before, movement)
        if after == expected:
            continue
        also = getattr(event, group.also, None) if group.also else None
        if also is not None and after == group.expected(before, movement + also):
            continue  # the second reading: GainAbond credited with the gain
        sign = "+" if group.direction is Direction.SIGNED else group.direction.value
        extra = f" (or + {group.also} {also} = {group.expected(before, movement + also)})" if also else ""
        findings.append(
            Finding(
                _CODES[group.compartment],
                f"{tag}: {group.after} {after} ≠ {group.before} {before} {sign} {group.movement} "
                f"{movement} = {expected}{extra}",
                player=getattr(event, "IDJoueur", None),
            )
        )
    findings += check_identity(event)
    return findings
