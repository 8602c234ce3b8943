"""coffre's own replay engine: a hand of poker as the texts play it, one recorded action at a time.

A :class:`Table` keeps the state of one hand between actions (stacks, bets, who is live, who is to
act, the cards, the pots) and moves through the phases the texts describe: the forced bets (decree
2016-1326 art. 3: antes, blinds; art. 7 III: the stud bring-in), then for each street its dealing
(hole cards, board, the triple draw's discards and replacements) and its betting round, then the
showdown, the pots and side pots (TDA 21) and the odd chip (TDA 20). It judges a recorded hand
rather than simulating one: it is told the cards and the actions, and says what the rules allow at
each point (who is to act, :attr:`Table.actors`; what calling costs, :meth:`Table.owed`; the smallest
and largest bet or raise, :meth:`Table.limits`); an action the rules forbid raises :class:`Illegal`,
with the reason. :mod:`.hand`'s pass 3 (its ``_Replay``) turns a ``POJEU``'s actions into these
steps and the refusals into findings.

Where the variants differ the engine reads a table (:data:`RULES`, one :class:`VariantRules` per
``Regle``: its streets, who opens each, its betting structure, its hands at the showdown, how its
odd chip goes) and tables of handlers (:data:`OPENERS`, :data:`HAND_VALUES`), as cosmicpython's
``EVENT_HANDLERS`` maps an event to its handlers. The readings of docs/rules.md (R1–R7) and the
choices of docs/hand-audit.md ("The rules of poker") are the ones the engine plays by; pokerkit,
which coffre replayed hands with before (issue 31), stays in the tests as a second engine
(tests/audit/pokerkit_engine.py) that this one must agree with (tests/audit/test_engine_differential.py).

Amounts are integers (the hand's amounts scaled by :func:`~.house.scale_of`); cards are the annex's
codes, 0 (2 de trèfle) … 51 (as de pique): rank ``code // 4`` (2 … as), suit ``code % 4`` (trèfle,
carreau, cœur, pique: the annex's order, which breaks stud's ties, R4).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import Literal

from ..catalogue.poker import VARIANTS
from . import ranking

Kind = Literal["holdem", "stud", "draw"]
Structure = Literal["fixed", "pot", "no"]
Opening = Literal["position", "low_card", "high_card", "low_hand", "high_hand"]
HandKind = Literal["high", "omaha_high", "low8", "omaha_low8", "razz", "deuce_seven"]


class Illegal(ValueError):
    """An action (or a table) the rules forbid: the reason is the message."""


# --------------------------------------------------------------------------- the table of variants


@dataclass(frozen=True, slots=True)
class Street:
    """One street: what it deals, whether it draws, who opens its betting, its bet and cap."""

    hole: tuple[bool, ...]
    """The hole cards it deals each live player, each face up (True) or down."""
    board: int
    """The board cards it deals."""
    draw: bool
    """The triple draw's discards and replacements before its betting."""
    opening: Opening
    big_bet: bool
    """Fixed limit: the big bet (turn, river; stud's 5th to 7th street; the 2nd and 3rd draw)."""
    blind_round: bool
    """The first round of a button game: its big blind is the opening bet, counted in the cap."""


@dataclass(frozen=True, slots=True)
class VariantRules:
    """How one ``Regle`` is played: one row of :data:`RULES`."""

    regle: str
    kind: Kind
    structure: Structure
    hands: tuple[HandKind, ...]
    """The hands at the showdown: one (high, or a low game's), or two (high, then low eight or better)."""
    hole_cards: int
    """Hold'em: hole cards per player; stud: cards per player at the end (7); draw: the hand (5)."""
    streets: tuple[Street, ...]

    @property
    def rounds(self) -> tuple[str, ...]:
        """The annex's names of the betting rounds, one per street."""
        return VARIANTS[self.regle].rounds[1:-1]

    @property
    def fixed_limit(self) -> bool:
        return self.structure == "fixed"

    @property
    def split(self) -> bool:
        """High/low split (eight or better)."""
        return len(self.hands) > 1

    @property
    def odd_chip_by_suit(self) -> bool:
        """TDA 20B: at stud (no button) the odd chip goes by suit; elsewhere left of the button (20A)."""
        return self.kind == "stud"


def _holdem_streets(hole: int) -> tuple[Street, ...]:
    """Decree art. 7 I, II: the hole cards, then the flop (3), the turn (1), the river (1)."""
    return (
        Street((False,) * hole, 0, False, "position", False, True),
        Street((), 3, False, "position", False, False),
        Street((), 1, False, "position", True, False),
        Street((), 1, False, "position", True, False),
    )


def _stud_streets(razz: bool) -> tuple[Street, ...]:
    """Decree art. 7 III: two down and one up, three up, one down; the bring-in by the lowest up card
    (the highest in razz), then the best showing hand opens (the lowest in razz)."""
    first: Opening = "high_card" if razz else "low_card"
    later: Opening = "low_hand" if razz else "high_hand"
    return (
        Street((False, False, True), 0, False, first, False, False),
        Street((True,), 0, False, later, False, False),
        Street((True,), 0, False, later, True, False),
        Street((True,), 0, False, later, True, False),
        Street((False,), 0, False, later, True, False),
    )


_DRAW_STREETS = (
    Street((False,) * 5, 0, False, "position", False, True),
    Street((), 0, True, "position", False, False),
    Street((), 0, True, "position", True, False),
    Street((), 0, True, "position", True, False),
)
"""Decree art. 7 IV: five cards, then three draws, four betting rounds."""

RULES: dict[str, VariantRules] = {
    v.regle: v
    for v in (
        VariantRules("THL", "holdem", "fixed", ("high",), 2, _holdem_streets(2)),
        VariantRules("THPL", "holdem", "pot", ("high",), 2, _holdem_streets(2)),
        VariantRules("THNL", "holdem", "no", ("high",), 2, _holdem_streets(2)),
        VariantRules("O4HPL", "holdem", "pot", ("omaha_high",), 4, _holdem_streets(4)),
        VariantRules("O4JL", "holdem", "fixed", ("omaha_high", "omaha_low8"), 4, _holdem_streets(4)),
        VariantRules("O4JPL", "holdem", "pot", ("omaha_high", "omaha_low8"), 4, _holdem_streets(4)),
        VariantRules("O5HPL", "holdem", "pot", ("omaha_high",), 5, _holdem_streets(5)),
        VariantRules("7SHL", "stud", "fixed", ("high",), 7, _stud_streets(False)),
        VariantRules("7SJL", "stud", "fixed", ("high", "low8"), 7, _stud_streets(False)),
        VariantRules("7SLL", "stud", "fixed", ("razz",), 7, _stud_streets(True)),
        VariantRules("2T7TD", "draw", "fixed", ("deuce_seven",), 5, _DRAW_STREETS),
    )
}
"""Every ``Regle`` of annex 1.3.6.d.5 (the keys of :data:`~coffre.domain.catalogue.poker.VARIANTS`)."""

assert set(RULES) == set(VARIANTS)


_DRAW_LATER = {
    r.regle: tuple(any(s.draw for s in r.streets[k + 1 :]) for k in range(len(r.streets)))
    for r in RULES.values()
}
"""Per variant and street: whether a later street draws (the hand goes on even with nobody left to bet)."""


def rules_of(regle: str) -> VariantRules:
    return RULES[regle]


# --------------------------------------------------------------------------- hands at the showdown


def _standard(code: int) -> int:
    """A card's rank, the ace high (0 = deux … 12 = as)."""
    return code >> 2


def _regular(code: int) -> int:
    """A card's rank, the ace low (0 = as, 1 = deux … 12 = roi): razz, the low half."""
    return ((code >> 2) + 1) % 13


HAND_VALUES: dict[HandKind, Callable[[tuple[int, ...], tuple[int, ...]], int | None]] = {
    "high": lambda hole, board: ranking.high(hole + board),
    "omaha_high": ranking.omaha_high,
    "low8": lambda hole, board: ranking.low8(hole + board),
    "omaha_low8": ranking.omaha_low8,
    "razz": lambda hole, board: ranking.razz(hole + board),
    "deuce_seven": lambda hole, board: ranking.deuce_seven(hole + board),
}
"""Per kind of hand, (hole, board) -> its value, :mod:`.ranking`'s (bigger is better for that half;
None: no qualifying low): decree art. 5, 6 and 7, R1 (2-7 without straights nor flushes, the ace
high; razz ace-to-five)."""


def _suit_key(kind: HandKind, cards: tuple[int, ...], value: int | None) -> tuple[int, int]:
    """TDA 20B: the highest card of the winning five (in the half's own order of ranks), then its
    suit. The five are the first combination of the cards that makes the hand's value."""
    if value is None:
        return (-1, -1)
    of = HAND_VALUES[kind]
    rank = _standard if kind == "high" else _regular
    for five in combinations(cards, 5):
        if of(five, ()) == value:
            return max((rank(c), c & 3) for c in five)
    return max((rank(c), c & 3) for c in cards)


# --------------------------------------------------------------------------- who opens a street


_STANDARD_RANKS = tuple(_standard(c) for c in range(52))
_REGULAR_RANKS = tuple(_regular(c) for c in range(52))


def _showing_key(cards: Sequence[int], rank: Callable[[int], int]) -> tuple[int, ...]:
    """The up cards of a stud hand as a showing hand (decree art. 7 III "cartes découvertes les plus
    fortes"): quads > trips > two pairs > a pair > high cards, then the ranks by group and value."""
    ranks = _STANDARD_RANKS if rank is _standard else _REGULAR_RANKS
    return _shape_key(tuple(sorted(map(ranks.__getitem__, cards))))


@cache
def _shape_key(ranks: tuple[int, ...]) -> tuple[int, ...]:
    counts = Counter(ranks)
    groups = sorted(counts.items(), key=lambda rc: (rc[1], rc[0]), reverse=True)
    shape = sorted(counts.values(), reverse=True)
    if shape[0] == 4:
        category = 5
    elif shape[0] == 3:
        category = 4
    elif shape[0] == 2:
        category = 3 if len(shape) > 1 and shape[1] == 2 else 2
    else:
        category = 1
    return (category, *(r for r, _ in groups))


def _open_position(table: Table) -> int:
    """Left of the biggest blind before the flop (TDA 34B heads-up: the button, who posted the small
    blind); after it, the first player left of the button (player 0)."""
    bets, blinds = table.bets, table.blinds
    best = top = 0
    for i in range(table.n):
        bet = bets[i] if blinds[i] > 0 else 0
        if bet >= top:
            best, top = i, bet
    return (best + 1) % table.n


def _open_low_card(table: Table) -> int:
    """Third street: the lowest up card brings in, suits breaking ties (decree art. 7 III)."""
    best = min(
        ((_standard(c), c & 3, i) for i in range(table.n) for c in table.up_cards(i)),
        default=(0, 0, 0),
    )
    return best[2]


def _open_high_card(table: Table) -> int:
    """Razz's third street: the highest up card brings in (the ace low), suits breaking ties."""
    best = max(
        ((_regular(c), c & 3, -i) for i in range(table.n) for c in table.up_cards(i)),
        default=(0, 0, 0),
    )
    return -best[2]


def _open_showing(table: Table, high: bool) -> int:
    """4th to 7th street: the best showing hand (the lowest in razz) opens; a tie goes to the hand
    whose highest card has the highest suit (decree art. 7 III, TDA RP-10D)."""
    rank = _standard if high else _regular
    shown = {i: table.up_cards(i) for i in range(table.n) if table.live[i]}
    keys = {i: _showing_key(cards, rank) for i, cards in shown.items() if 0 < len(cards) <= 4}
    if not keys:
        return 0
    best = max(keys.values()) if high else min(keys.values())
    tied = [i for i, k in keys.items() if k == best]
    if len(tied) < 2:
        return tied[0]
    return max(tied, key=lambda i: max((rank(c), c & 3) for c in table.up_cards(i)))


OPENERS: dict[Opening, Callable[[Table], int]] = {
    "position": _open_position,
    "low_card": _open_low_card,
    "high_card": _open_high_card,
    "high_hand": lambda table: _open_showing(table, True),
    "low_hand": lambda table: _open_showing(table, False),
}


# --------------------------------------------------------------------------- the state of a hand

DEALING, BETTING, SHOWDOWN, OVER = 0, 1, 2, 3
"""The phases of a hand: its cards being dealt, a betting round, the showdown, the hand over."""


class Table:
    """One hand's state, players in the engine's order (a button game: the small blind first and
    the button last; heads-up the big blind first and the button second; stud: by seat)."""

    __slots__ = (
        "actors",
        "all_in",
        "ante_paid",
        "ante_trimming",
        "antes",
        "bets",
        "big_bet",
        "blinds",
        "board",
        "bring_in",
        "bring_in_status",
        "cap",
        "completion_status",
        "full_big_blind",
        "hole",
        "live",
        "missing_blinds",
        "n",
        "n_live",
        "opener",
        "owed_board",
        "owed_cards",
        "owed_draw",
        "owed_hole",
        "payoffs",
        "phase",
        "pushes",
        "raise_size",
        "raises",
        "round_players",
        "rules",
        "shared",
        "showdown_queue",
        "small_bet",
        "stacks",
        "starting",
        "street_index",
        "uncapped_two_player_rounds",
        "up",
    )

    def __init__(
        self,
        rules: VariantRules,
        stacks: Sequence[int],
        *,
        antes: Sequence[int],
        ante_trimming: bool,
        blinds: Sequence[int],
        bring_in: int,
        small_bet: int,
        big_bet: int | None = None,
        cap: int | None,
        uncapped_two_player_rounds: bool = False,
        missing_blinds: int = 0,
        full_big_blind: int = 0,
    ) -> None:
        """``antes`` and ``blinds`` per player (each its own: heads-up too), the blinds as the table
        plays them (a player short of one posts what it has). ``cap``: fixed limit's bets a round
        (:class:`~.house.HouseRules`). ``missing_blinds``, ``full_big_blind``: pot limit before the
        flop counts full blinds (TDA 54B)."""
        n = self.n = len(stacks)
        self.rules = rules
        self.starting = list(stacks)
        self.antes = list(antes)
        self.blinds = list(blinds) + [0] * (n - len(blinds))
        self.bring_in = bring_in
        self.small_bet = small_bet
        self.big_bet = big_bet if big_bet is not None else (2 * small_bet if rules.fixed_limit else small_bet)
        self.cap = cap if rules.fixed_limit else None
        self.uncapped_two_player_rounds = uncapped_two_player_rounds
        self.missing_blinds = missing_blinds
        self.full_big_blind = full_big_blind
        self.ante_trimming = ante_trimming
        self.ante_paid = [min(a, s) for a, s in zip(self.antes, stacks, strict=True)]
        if min(self.antes, default=0) < 0 or bring_in < 0:
            raise Illegal("a negative ante or bring-in")
        if not any(self.antes) and not any(self.blinds) and not bring_in:
            raise Illegal("no ante, blind nor bring-in")
        if min(stacks) <= 0:
            raise Illegal("a participant has no chips (CaveAvant 0): not dealt in")
        if bring_in >= small_bet:
            raise Illegal("the bring-in is not below the first bet")
        if n < 2:
            raise Illegal("fewer than two players")
        self.stacks = list(stacks)
        self.bets = [0] * n
        self.payoffs = [0] * n
        self.live = [True] * n
        self.n_live = n
        self.phase = DEALING
        self.hole: list[list[int]] = [[] for _ in range(n)]
        self.up: list[list[bool]] = [[] for _ in range(n)]
        self.board: list[int] = []
        self.street_index: int | None = None
        self.owed_hole: list[deque[bool]] = [deque() for _ in range(n)]
        self.owed_cards = 0
        self.owed_board = 0
        self.owed_draw = [False] * n
        self.actors: deque[int] = deque()
        self.opener: int | None = None
        self.bring_in_status = self.completion_status = False
        self.raise_size = self.raises = self.round_players = 0
        self.all_in = False
        self.showdown_queue: deque[int] = deque()
        self.pushes: list[tuple[list[int], int, HandKind | None]] = []
        """Each share of a pot pushed: (the amount per player, the pot's index, the kind of hand that
        won it: a half's, the high one's when a showdown leaves one hand; None when everybody else
        folded)."""
        self.shared: list[tuple[int, tuple[int, ...]]] = []
        """The pots as they were shared at the end (:meth:`pots`, less the hands that could win none)."""
        # the forced bets: antes (collected at once, trimmed when all post them), then the blinds
        paid = self.ante_paid
        if any(paid):
            for i in range(n):
                if paid[i]:
                    self._put(i, paid[i])
            self._collect(self.ante_trimming)
        for i, blind in enumerate(self.blinds):
            if blind > 0:
                blind = min(blind, self.starting[i] - paid[i])
                if blind > 0:
                    self._put(i, blind)
        self._begin_dealing()

    # -- reading the state

    @property
    def street(self) -> Street | None:
        return None if self.street_index is None else self.rules.streets[self.street_index]

    def effective_ante(self, i: int) -> int:
        return self.ante_paid[i]

    def up_cards(self, i: int) -> list[int]:
        return [c for c, up in zip(self.hole[i], self.up[i], strict=True) if up]

    def owed(self) -> int | None:
        """What the player to act must put in to call (None: nobody to act, or the bring-in is due)."""
        if not self.actors or self.bring_in_status:
            return None
        i = self.actors[0]
        return min(self.stacks[i], max(self.bets) - self.bets[i])

    def limits(self) -> tuple[str | None, int, int]:
        """(why the player to act may not bet or raise now, or None; the smallest and the largest
        total its bet, raise or completion may reach). The smallest: the round's bet, or the last
        full raise over the bet to call (TDA 43, R2); an all-in may fall short. The largest: the
        smallest in fixed limit, the pot in pot limit (TDA 54B before the flop: with full blinds),
        the stack in no limit. TDA 47 (reopening) is judged by the replay, not here."""
        actors = self.actors
        if not actors:
            return "nobody is to act", 0, 0
        street = self.rules.streets[self.street_index]  # type: ignore[index]
        cap = self.cap
        if cap is not None:
            if street.blind_round:
                cap = max(cap - 1, 0)
            if self.raises >= cap and not (self.uncapped_two_player_rounds and self.round_players <= 2):
                return "the round's bets are capped", 0, 0
        i = actors[0]
        bets, stacks, live = self.bets, self.stacks, self.live
        top = max(bets)
        if stacks[i] <= top - bets[i]:
            return "the player can only call (all in)", 0, 0
        for j in range(self.n):
            if j != i and live[j] and stacks[j] + bets[j] > top:
                break
        else:
            return "every other player has folded or is all in", 0, 0
        reach = stacks[i] + bets[i]
        low = max(self.raise_size, self.big_bet if street.big_bet else self.small_bet)
        if not self.completion_status:
            low += top
        low = min(reach, low)
        structure = self.rules.structure
        if structure == "fixed":
            return None, low, low
        if structure == "no":
            return None, low, reach
        pot = -sum(self.payoffs)
        high = min(reach, max(low, 2 * top - bets[i] + pot))
        if self.street_index == 0 and (self.missing_blinds or self.full_big_blind > top):
            top = max(top, self.full_big_blind)
            high = min(reach, max(high, 2 * top - bets[i] + pot + self.missing_blinds))
        return None, low, high

    # -- the betting actions

    def fold(self) -> None:
        if not self.actors:
            raise Illegal("nobody is to act")
        if self.bring_in_status:
            raise Illegal("the bring-in is due")
        i = self.actors.popleft()
        self._muck(i)
        self._after_action()

    def check_or_call(self) -> int:
        actors = self.actors
        if not actors or self.bring_in_status:
            raise Illegal("nobody is to act" if not actors else "the bring-in is due")
        i = actors.popleft()
        bets, stack = self.bets, self.stacks[i]
        owed = max(bets) - bets[i]
        if owed > stack:
            owed = stack
        if owed:
            bets[i] += owed
            self.stacks[i] = stack - owed
            self.payoffs[i] -= owed
        if not actors or self.n_live <= 1:
            self._end_betting()
        return owed

    def post_bring_in(self) -> int:
        if not self.actors:
            raise Illegal("nobody is to act")
        if not self.bring_in_status:
            raise Illegal("no bring-in is due")
        i = self.actors.popleft()
        amount = min(self.stacks[i], self.bring_in)
        self._put(i, amount)
        self.bring_in_status = False
        self._after_action()
        return amount

    def verify_raise_to(self, amount: int) -> None:
        refusal, low, high = self.limits()
        if refusal is not None:
            raise Illegal(refusal)
        if amount < low:
            raise Illegal(f"{amount} is below the minimum {low}")
        if amount > high:
            raise Illegal(f"{amount} is above the maximum {high}")

    def raise_to(self, amount: int, verified: bool = False) -> None:
        """A bet, raise or completion to ``amount`` in all."""
        if not verified:
            self.verify_raise_to(amount)
        i = self.actors.popleft()
        size = amount - max(self.bets)
        self._put(i, amount - self.bets[i])
        self.bring_in_status = self.completion_status = False
        n = self.n
        self.actors = deque(j % n for j in range(i + 1, i + n) if self.live[j % n] and self.stacks[j % n])
        self.opener = i
        self.raise_size = max(self.raise_size, size)
        self.raises += 1
        self._after_action()

    # -- the phases

    def _put(self, i: int, amount: int) -> None:
        self.bets[i] += amount
        self.stacks[i] -= amount
        self.payoffs[i] -= amount

    def _muck(self, i: int) -> None:
        self.live[i] = False
        self.n_live -= 1
        self.hole[i].clear()
        self.up[i].clear()

    def _collect(self, trim: bool) -> None:
        """The bets go to the pot; what the biggest bettor put in beyond anyone else comes back
        (decree art. 9; for the antes only when every seat posts one). A lone live player's bet stays
        in front of them."""
        bets = self.bets
        alone = self.live.index(True) if self.n_live == 1 else None
        if trim:
            cutoff = sorted(bets)[-2]
            for i in range(self.n):
                if i != alone and bets[i] > cutoff:
                    over = bets[i] - cutoff
                    self.stacks[i] += over
                    self.payoffs[i] += over
        for i in range(self.n):
            if i != alone:
                bets[i] = 0

    def _begin_dealing(self) -> None:
        self.phase = DEALING
        self.street_index = 0 if self.street_index is None else self.street_index + 1
        street = self.rules.streets[self.street_index]
        self.owed_board = street.board
        for i in range(self.n):
            if self.live[i]:
                self.owed_hole[i].extend(street.hole)
                self.owed_cards += len(street.hole)
                self.owed_draw[i] = street.draw
        self._after_deal()

    def deal(
        self, hole: list[list[int]], board: list[int], discards: list[dict[int, list[int]]]
    ) -> tuple[str, int] | None:
        """Deal what the street owes from the cards the hand recorded, in the order of the deal: the
        triple draw's discards first (each player in turn throws its ``discards`` of this street), then the hole
        cards (the player owed the most first; in a draw the first owed a replacement), then the
        board. ``hole`` per player, ``board`` and ``discards`` per player and street: the cards recorded and not yet dealt,
        taken from the front. None: the dealing is over (the phase moved on); otherwise what it
        waits for and the hand does not deal: ("hole", player) or ("board", count)."""
        owed_hole, n = self.owed_hole, self.n
        while self.phase == DEALING:
            owed_draw = self.owed_draw
            if True in owed_draw:
                i = owed_draw.index(True)
                thrown = discards[i].pop(self.street_index, [])  # type: ignore[arg-type]
                self.discard(i, thrown)
            elif self.owed_cards:
                # the player owed the most cards first, the lowest index first among equals (in a
                # draw the first owed any): in index order through those owed the most, then again
                most = 1 if self.rules.streets[self.street_index].draw else max(map(len, owed_hole))  # type: ignore[index]
                for i in range(n):
                    statuses = owed_hole[i]
                    owed = len(statuses)
                    if owed < most:
                        continue
                    cards = hole[i]
                    if not cards:
                        return "hole", i
                    k = min(len(cards), owed)
                    self.hole[i] += cards[:k]
                    del cards[:k]
                    up = self.up[i]
                    for _ in range(k):
                        up.append(statuses.popleft())
                    self.owed_cards -= k
                    if k < owed:
                        break
                self._after_deal()
            elif self.owed_board:
                count = self.owed_board
                if len(board) < count:
                    return "board", count
                dealt = board[:count]
                del board[:count]
                self.deal_board(dealt)
            else:  # nothing owed (a street that deals nothing)
                self._begin_betting()
        return None

    def discard(self, i: int, cards: Sequence[int]) -> None:
        if self.phase != DEALING or not self.owed_draw[i]:
            raise Illegal(f"player {i} is not to draw")
        if not set(cards) <= set(self.hole[i]):
            raise Illegal(f"the discarded cards {list(cards)} are not all in the hand {self.hole[i]}")
        self.owed_draw[i] = False
        for card in cards:
            at = self.hole[i].index(card)
            self.owed_hole[i].append(self.up[i][at])
            self.owed_cards += 1
            del self.hole[i][at]
            del self.up[i][at]
        self._after_deal()

    def deal_board(self, cards: Sequence[int]) -> None:
        if not 0 < len(cards) <= self.owed_board:
            raise Illegal(f"the board is owed {self.owed_board} cards, not {len(cards)}")
        self.board.extend(cards)
        self.owed_board -= len(cards)
        self._after_deal()

    def _after_deal(self) -> None:
        if not self.owed_board and not self.owed_cards and True not in self.owed_draw:
            self._begin_betting()

    def _begin_betting(self) -> None:
        self.phase = BETTING
        street = self.street
        assert street is not None
        n, live = self.n, self.live
        self.round_players = self.n_live
        opener = self.opener = OPENERS[street.opening](self)
        self.bring_in_status = self.completion_status = self.street_index == 0 and self.bring_in > 0
        stacks, bets = self.stacks, self.bets
        first = second = -1  # the two biggest totals (bet and stack) of the live players
        for j in range(n):
            if live[j]:
                total = bets[j] + stacks[j]
                if total > first:
                    first, second = total, first
                elif total > second:
                    second = total
        actors = self.actors = deque()
        for k in range(opener, opener + n):
            j = k % n
            if live[j] and stacks[j] and second > bets[j]:  # its effective stack is not 0
                actors.append(j)
        self.raise_size = self.raises = 0
        if not actors or self.n_live <= 1 or (len(actors) == 1 and bets[actors[0]] >= max(bets)):
            self._end_betting()

    def _after_action(self) -> None:
        if not self.actors or self.n_live <= 1:
            self._end_betting()

    def _end_betting(self) -> None:
        self.actors.clear()
        index = self.street_index
        assert index is not None
        streets = self.rules.streets
        if (
            self.n_live > 1
            and not _DRAW_LATER[self.rules.regle][index]
            and sum(1 for i in range(self.n) if self.live[i] and self.stacks[i]) <= 1
        ):
            self.all_in = True  # nobody left to bet: the cards are dealt out to the showdown
        if not all(self.stacks) and index == len(streets) - 1:
            self.all_in = True
        if any(self.bets):
            self._collect(True)
        if self.n_live == 1:
            self._push_to_the_last()
        elif index == len(streets) - 1 or self.all_in:
            self._begin_showdown()
        else:
            self._begin_dealing()

    # -- the showdown

    def _begin_showdown(self) -> None:
        self.phase = SHOWDOWN
        n, opener = self.n, self.opener or 0
        self.showdown_queue = deque(
            j % n for j in range(opener, opener + n) if self.live[j % n] and not all(self.up[j % n])
        )
        if not self.showdown_queue:
            self._end_showdown()

    @property
    def shower(self) -> int | None:
        """The player whose hand is to be shown or mucked."""
        return self.showdown_queue[0] if self.phase == SHOWDOWN and self.showdown_queue else None

    def show_or_muck(self, show: bool) -> None:
        i = self.showdown_queue.popleft()
        if show:
            self.up[i] = [True] * len(self.hole[i])
        else:
            self._muck(i)
        if not self.showdown_queue:
            self._end_showdown()

    def _end_showdown(self) -> None:
        if self.all_in and self.street_index != len(self.rules.streets) - 1:
            self._begin_dealing()
            return
        values = self._values()
        pots = self.pots()
        if dead := self._kill_hands(values, pots):
            pots = _without(pots, dead)
        if self.n_live == 1:  # the others' hands could win nothing: the best hand takes every pot
            self._push_to_the_last(self.rules.hands[0])
        else:
            self._push(values, pots)

    def _values(self) -> list[list[int | None]]:
        """Per kind of hand of the variant, per player, the value of its hand (None: folded, or no
        qualifying low)."""
        board = tuple(self.board)
        evaluators = HAND_VALUES
        return [
            [evaluators[kind](tuple(self.hole[i]), board) if self.live[i] else None for i in range(self.n)]
            for kind in self.rules.hands
        ]

    def pots(self) -> list[tuple[int, tuple[int, ...]]]:
        """The main pot and the side pots (TDA 21): (amount, the live players who can win it)."""
        n = self.n
        put = [-self.payoffs[i] - self.bets[i] for i in range(n)]
        pending = [-self.payoffs[i] for i in range(n)]
        amount = 0
        if not self.ante_trimming:  # dead antes (some seats only): in the first pot, whoever wins
            for i in range(n):
                ante = self.ante_paid[i]
                amount += ante
                put[i] -= ante
                pending[i] -= ante
        pots: list[tuple[int, tuple[int, ...]]] = []
        previous = 0
        live = self.live
        for level in sorted(set(put)):
            step = level - previous
            for i in range(n):
                if put[i] >= level:
                    amount += step
            players = tuple([i for i in range(n) if pending[i] >= level and live[i]])
            while pots and pots[-1][1] == players:
                amount += pots.pop()[0]
            if amount:
                pots.append((amount, players))
            amount = 0
            previous = level
        return pots

    def _kill_hands(
        self, values: list[list[int | None]], pots: list[tuple[int, tuple[int, ...]]]
    ) -> set[int]:
        """A hand that can win no part of any pot is out before the pots are shared (those that were)."""
        dead = {i for i in range(self.n) if self.live[i] and not _can_win(i, values, pots)}
        for i in dead:
            self._muck(i)
            for half in values:
                half[i] = None
        return dead

    def _push(self, values: list[list[int | None]], pots: list[tuple[int, tuple[int, ...]]]) -> None:
        halves = [k for k, half in enumerate(values) if any(v is not None for v in half)]
        self.shared = pots
        for index, (amount, players) in enumerate(pots):
            share, rest = divmod(amount, len(halves)) if halves else (0, 0)
            for k in halves:
                part = share + (rest if k == halves[0] else 0)
                if part:
                    self._push_share(part, index, players, values[k], self.rules.hands[k])
        self._pull()

    def _push_share(
        self, amount: int, index: int, players: tuple[int, ...], half: list[int | None], kind: HandKind
    ) -> None:
        best = _best(half, players)
        winners = [i for i in players if half[i] == best]  # as pokerkit: None ties None
        amounts = [0] * self.n
        if winners:
            share, rest = divmod(amount, len(winners))
            first = winners[0]
            if rest and len(winners) > 1 and self.rules.odd_chip_by_suit:
                first = max(winners, key=lambda i: _suit_key(kind, tuple(self.hole[i]), half[i]))
            for i in winners:
                amounts[i] = share + (rest if i == first else 0)
                self.bets[i] += amounts[i]
        self.pushes.append((amounts, index, kind))

    def _push_to_the_last(self, kind: HandKind | None = None) -> None:
        """Everybody else folded: every pot to the last live player, who shows nothing (TDA 17B). ``kind``:
        a showdown left one live hand (the others could win nothing), which wins with that kind."""
        self.street_index = None
        self.shared = self.pots()
        for index, (amount, players) in enumerate(self.shared):
            if len(players) != 1:
                raise Illegal("a pot nobody live can win")
            amounts = [0] * self.n
            amounts[players[0]] = amount
            self.bets[players[0]] += amount
            self.pushes.append((amounts, index, kind))
        self._pull()

    def _pull(self) -> None:
        for i in range(self.n):
            self.stacks[i] += self.bets[i]
            self.payoffs[i] += self.bets[i]
            self.bets[i] = 0
        self.street_index = None
        self.phase = OVER


def _without(pots: list[tuple[int, tuple[int, ...]]], dead: set[int]) -> list[tuple[int, tuple[int, ...]]]:
    """:meth:`Table.pots` once the ``dead`` players' hands are out, from the pots before: the same
    levels, the dead removed from who may win each, pots left with the same players merged (as
    :meth:`Table.pots` merges them: the players of a level only shrink as the level rises)."""
    out: list[tuple[int, tuple[int, ...]]] = []
    for amount, players in pots:
        players = tuple([i for i in players if i not in dead])
        if out and out[-1][1] == players:
            amount += out.pop()[0]
        out.append((amount, players))
    return out


def _best(half: list[int | None], players: tuple[int, ...]) -> int | None:
    best = None
    for i in players:
        value = half[i]
        if value is not None and (best is None or value > best):
            best = value
    return best


def _can_win(i: int, values: list[list[int | None]], pots: list[tuple[int, tuple[int, ...]]]) -> bool:
    for half in values:
        mine = half[i]
        if mine is None:
            continue
        for _, players in pots:
            if i in players:
                best = _best(half, players)
                if best is None or best <= mine:
                    return True
    return False
