"""What the hand audit needs beyond a hand's own record, and no engine: the operator's rules
(:class:`HouseRules`, the fixed-limit cap), the engine's integer units (:func:`scale_of`), and who
may still raise after a short all-in (:class:`Reopening`, TDA 47). Shared by coffre's replay engine
(:mod:`.engine`) and the tests' second engine (pokerkit); :mod:`.variants` re-exports them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

FIXED_LIMIT_CAP = 4
"""Fixed limit: four bets a round, the opening bet counting as one (a bet and three raises; before
the flop the big blind is the opening bet; at stud the completion of the bring-in): see
:class:`HouseRules`."""


@dataclass(frozen=True, slots=True)
class HouseRules:
    """What decree 2016-1326 leaves to the operator and the hand does not record.

    ``fixed_limit_bets``: decree art. 3 5° ("les opérateurs … peuvent définir le montant ou le nombre
    maximum de relance nommé « cap » avant le début de la partie"); TDA 48 ("En limit, le nombre de
    relances maximum doit être fixé par le règlement du tournoi"). The number of bets a fixed-limit
    betting round allows, the opening bet counting as one: 4 is a bet and three raises; before the
    flop (and before the first draw) the big blind is the opening bet, so the big blind and three
    raises; at stud the bring-in is not a bet and the completion is the opening bet. ``None``: no cap.

    ``heads_up``: when the cap is lifted for two players. TDA 48: "il s'applique même quand il n'y a
    que 2 joueurs dans le coup. Dans le heads-up final, le maximum ne s'applique plus".

    - ``"hand"`` (the default, TDA 48 as written): a hand dealt to two players is heads-up play and
      has no cap; a hand dealt to more keeps it even when two players remain;
    - ``"round"`` (the card rooms' rule, for an operator whose rules say so): also no cap in a
      betting round that begins with two players left in the hand;
    - ``"never"``: the cap applies heads-up too.
    """

    fixed_limit_bets: int | None = FIXED_LIMIT_CAP
    heads_up: Literal["hand", "round", "never"] = "hand"

    def cap(self, players: int) -> int | None:
        """The cap of a hand dealt to ``players`` players."""
        if players <= 2 and self.heads_up != "never":
            return None
        return self.fixed_limit_bets


DEFAULT_RULES = HouseRules()


# --------------------------------------------------------------------------- amounts


def scale_of(amounts: Iterable[Decimal]) -> int:
    """10^(the largest number of decimal places among ``amounts``): what makes them all integers."""
    amounts = list(amounts)
    try:
        # an exact sum of decimals has the smallest exponent of its terms (General Decimal Arithmetic:
        # the ideal exponent), trailing zeros kept: one addition each, in C, instead of one tuple each
        total = sum(amounts, Decimal(0)).as_tuple()
        if isinstance(total.exponent, int) and len(total.digits) < 20:
            return 10 ** max(0, -total.exponent)
    except ArithmeticError:
        pass
    places = 0  # NaN, infinities, more digits than the context keeps: amount by amount
    for amount in amounts:
        exponent = amount.as_tuple().exponent
        if isinstance(exponent, int) and -exponent > places:
            places = -exponent
    return 10**places


def to_int(amount: Decimal, scale: int) -> int:
    """``amount`` in the engine's units (exact: ``scale`` comes from :func:`scale_of`)."""
    return int(amount * scale)


# --------------------------------------------------------------------------- reopening (TDA 47)


@dataclass(slots=True)
class Reopening:
    """Who may still raise in a betting round after an all-in that is not a full raise (club 9.15
    "Relance bloquée"; TDA 47A: "lorsque le montant d'une mise ou relance à tapis est inférieur à
    la mise ou relance minimum (ou plusieurs consécutives), quand la parole reviendra aux joueurs
    ayant déjà agi, s'ils ne font pas face à une relance valide, ils ne pourront pas relancer";
    TDA 47B: "En limit, un minimum de 50% d'une mise ou relance complète est nécessaire pour que les
    joueurs qui ont déjà misé puissent relancer"). Players are any hashable key (seat, index).
    pokerkit's own rule is replaced (see ``CachedState._verify_completion_betting_or_raising``):
    its full raise starts at 0, so it reopens after a limp and an all-in for a chip more."""

    limit: bool
    full: int = 0
    """The largest full bet or raise of the round (TDA 43): the big blind or the minimum bet to begin
    with (TDA 43 example 2), the round's bet in limit."""
    short: int = 0
    """What all-ins short of a full raise added since the last full one."""
    acted: set[int] = field(default_factory=set)
    """Who acted since the last full bet or raise (posting a blind is not acting; in limit, where
    TDA 47B says "misé", a check is not either)."""

    def new_round(self, full: int) -> None:
        self.full, self.short = full, 0
        self.acted = set()

    def calls(self, who: int, chips: bool) -> None:
        """``who`` checks (``chips`` False) or calls."""
        if chips or not self.limit:
            self.acted.add(who)

    def may_raise(self, who: int) -> bool:
        return who not in self.acted

    def raises(self, who: int, increment: int) -> None:
        """``who`` bets or raises by ``increment`` over the largest bet (a completion: its whole size)."""
        self.short += increment
        if (2 * self.short >= self.full) if self.limit else (self.short >= self.full):
            self.acted = {who}
            if not self.limit:
                self.full = max(self.full, self.short)
            self.short = 0
        else:
            self.acted.add(who)
