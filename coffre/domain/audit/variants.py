"""The variants of annex 1.3.6.d.5 as pokerkit games: how to build the engine's ``State`` of a hand.

pokerkit has presets for eight of the eleven ``Regle`` codes; the other three (pot-limit hold'em,
pot-limit Omaha hi/lo, five-card Omaha pot limit) are built from pokerkit's generic ``State`` with the
streets of the nearest preset. One exception: pokerkit 0.7's ``FixedLimitOmahaHoldemHighLowSplitEightOrBetter``
lists ``PotLimitPokerMixin`` first, so it is in fact *pot-limit* without a raise cap: coffre uses it for
O4JPL (pot limit, which it is) and builds O4JL (fixed limit, four bets a round) generically.
tests/audit/test_hand_variants.py holds every preset's streets against the generic ones.

The engine counts in integers: a hand's amounts are scaled by 10^(its largest number of decimals)
(:func:`scale_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache, lru_cache, partial
from itertools import combinations
from operator import getitem
from typing import Any, Literal

from pokerkit import (
    Automation,
    BettingStructure,
    Card,
    Deck,
    FixedLimitDeuceToSevenLowballTripleDraw,
    FixedLimitOmahaHoldemHighLowSplitEightOrBetter,
    FixedLimitRazz,
    FixedLimitSevenCardStud,
    FixedLimitSevenCardStudHighLowSplitEightOrBetter,
    FixedLimitTexasHoldem,
    Hand,
    HoleBoardCombinationHand,
    Lookup,
    Mode,
    NoLimitTexasHoldem,
    OmahaEightOrBetterLowHand,
    OmahaHoldemHand,
    Opening,
    PotLimitOmahaHoldem,
    RegularLowHand,
    StandardHighHand,
    StandardLowHand,
    State,
    Street,
)
from pokerkit.utilities import max_or_none
from pokerkit.utilities import rake as no_rake

from ..catalogue.poker import RANKS, VARIANTS

Kind = Literal["holdem", "stud", "draw"]

FIXED_LIMIT_CAP = 4
"""Fixed limit: a bet and three raises a round (pokerkit's presets; the usual house rule)."""

AUDIT_AUTOMATIONS: tuple[Automation, ...] = (
    Automation.ANTE_POSTING,
    Automation.BET_COLLECTION,
    Automation.BLIND_OR_STRADDLE_POSTING,
    Automation.RUNOUT_COUNT_SELECTION,
    Automation.CHIPS_PUSHING,
    Automation.CHIPS_PULLING,
)
"""What the engine does on its own during a replay: forced bets are posted from the amounts the hand
declares, bets are collected (an uncalled bet is returned), pots are pushed and pulled. The cards
(dealt, burnt, discarded, shown or mucked) and every player's action come from the event."""

# --------------------------------------------------------------------------- cards

_POKERKIT_RANKS = "23456789TJQKA"
_POKERKIT_SUITS = "cdhs"  # trèfle, carreau, cœur, pique: the annex's suit order
assert len(_POKERKIT_RANKS) == len(RANKS)

_STANDARD_DECK: dict[Card, Card] = {card: card for card in Deck.STANDARD}
CARDS: tuple[Card, ...] = tuple(
    _STANDARD_DECK[next(iter(Card.parse(_POKERKIT_RANKS[code // 4] + _POKERKIT_SUITS[code % 4])))]
    for code in range(52)
)
"""pokerkit's card for each annex card code (0 = 2 de Trèfle = 2c … 51 = As de Pique = As): the very
objects of pokerkit's standard deck, so that a dealt card leaves the deck by identity
(:meth:`CachedState._consume_cards`)."""
CODES: dict[Card, int] = {card: code for code, card in enumerate(CARDS)}
"""The annex code of each pokerkit card."""
UNKNOWN_CARD: Card = next(iter(Card.parse("??")))
"""A face-down card of unknown value: what the replay burns (burnt cards are not recorded)."""


def to_cards(codes: Iterable[int]) -> tuple[Card, ...]:
    return tuple(CARDS[c] for c in codes)


# --------------------------------------------------------------------------- amounts


def scale_of(amounts: Iterable[Decimal]) -> int:
    """10^(the largest number of decimal places among ``amounts``): what makes them all integers."""
    places = 0
    for amount in amounts:
        exponent = amount.as_tuple().exponent
        if isinstance(exponent, int) and -exponent > places:
            places = -exponent
    return 10**places


def to_int(amount: Decimal, scale: int) -> int:
    """``amount`` in the engine's units (exact: ``scale`` comes from :func:`scale_of`)."""
    return int(amount * scale)


# --------------------------------------------------------------------------- hand evaluation, once


_PRIMES: dict[Any, int] = Lookup._Lookup__multipliers  # type: ignore[attr-defined]
"""pokerkit's prime per rank: a hand's lookup key is the product of its ranks' primes (and suitedness)."""


@cache
def _table(hand_type: type[Hand]) -> dict[tuple[int, bool], Any]:
    return hand_type.lookup._Lookup__entries  # type: ignore[attr-defined]


def _combinations(hand_type: type[Hand], cards: tuple[Card, ...], board: tuple[Card, ...]):
    if issubclass(hand_type, HoleBoardCombinationHand):
        for hole in combinations(cards, hand_type.hole_card_count):
            for common in combinations(board, hand_type.board_card_count):
                yield hole + common
    else:
        yield from combinations(cards + board, hand_type.card_count)  # type: ignore[attr-defined]


@cache
def _index_combinations(hand_type: type[Hand], cards: int, board: int) -> tuple[tuple[int, ...], ...]:
    """:func:`_combinations` as positions in ``cards + board``, in the same order."""
    every = tuple(range(cards + board))
    return tuple(_combinations(hand_type, every[:cards], every[cards:]))


def _key_of(combo: tuple[int, ...], primes: list[int], suits: list[Any]) -> tuple[int, bool]:
    key = 1
    for at in combo:
        key *= primes[at]
    return key, all(suits[at] == suits[combo[0]] for at in combo)


@lru_cache(maxsize=4096)
def _evaluate(hand_type: type[Hand], cards: tuple[Card, ...], board: tuple[Card, ...]) -> Hand | None:
    """The best hand ``hand_type`` makes of ``cards`` and ``board``: pokerkit's ``from_game``, the
    five-card combinations looked up in pokerkit's own table by their key (rank primes' product,
    suitedness) instead of through a ``Hand`` object each; one ``Hand`` is built, of the best.
    Each card's prime and suit are read once, the combinations walked as positions."""
    table = _table(hand_type)
    low = hand_type.low
    every = cards + board
    primes = [_PRIMES[card.rank] for card in every]
    suits = [card.suit for card in every]
    best: tuple[int, ...] | None = None
    best_index = 0
    best_entry: Any = None
    combos = _index_combinations(hand_type, len(cards), len(board))
    if combos and len(combos[0]) == 5:  # every variant's hands: five cards
        keys = (
            (
                (
                    primes[a] * primes[b] * primes[c] * primes[d] * primes[e],
                    suits[a] == suits[b] == suits[c] == suits[d] == suits[e],
                ),
                (a, b, c, d, e),
            )
            for a, b, c, d, e in combos
        )
    else:
        keys = ((_key_of(combo, primes, suits), combo) for combo in combos)
    for key, combo in keys:
        entry = table.get(key)
        if entry is None:
            continue
        if best is None or (entry.index < best_index if low else entry.index > best_index):
            best, best_index, best_entry = combo, entry.index, entry
    if best is None:
        return None
    hand = _evaluated_type(hand_type).__new__(_evaluated_type(hand_type))
    hand._Hand__cards = tuple(every[at] for at in best)  # type: ignore[attr-defined]  # as Hand.__init__ stores them
    hand.entry = best_entry  # type: ignore[misc]
    return hand


@cache
def _evaluated_type(hand_type: type[Hand]) -> type[Hand]:
    """``hand_type`` with its lookup entry kept on each hand: pokerkit's ``Hand.entry`` looks the
    cards up again at every comparison (a showdown compares each hand with every other, several
    times), which was a fifth of a hold'em replay's time. Same ordering, equality and hash (all
    by the entry); every hand of a replay comes from :func:`_evaluate`, so of this one type."""
    return type(hand_type.__name__, (hand_type,), {"entry": None, "__module__": hand_type.__module__})


def clear_evaluations() -> None:
    _evaluate.cache_clear()


class CachedState(State):
    """pokerkit's ``State``, each player's hand evaluated once per set of cards.

    At a showdown, pokerkit asks every player's hand again for every other player (``can_win_now``
    before killing the hands that cannot win: n² evaluations, and an Omaha or seven-card hand is
    dozens of five-card lookups): 70 % of a replay's time before this cache (bench/audit.py). The
    result depends only on the hand type and the cards, which are hashable: the same answer, once.
    """

    def _verify_cards_consumption(self, cards: Any) -> tuple[Card, ...]:
        """Named cards are taken as they are: pokerkit would only *warn* when one is not in its
        deck (a card dealt twice), which the audit reports itself before any replay."""
        if isinstance(cards, Card):
            return (cards,)
        if isinstance(cards, tuple) and all(isinstance(c, Card) for c in cards):
            return cards
        return super()._verify_cards_consumption(cards)

    def _consume_cards(self, cards: tuple[Card, ...]) -> None:
        """The named cards leave the deck (pokerkit also compares the whole deck as a set, per card).

        A card dealt from :data:`CARDS` is one of the deck's own objects: found by identity (C
        code) rather than by ``Card.__eq__`` (Python code) element by element as ``deque.remove``
        does; any other card by its rank and suit (enum members, compared by identity). An unknown
        card (a burn) is never in the deck."""
        deck = self.deck_cards
        ids = list(map(id, deck))
        for card in cards:
            if not card:
                continue
            try:
                at = ids.index(id(card))
            except ValueError:
                same = (id(card.rank), id(card.suit))
                at = next((k for k, c in enumerate(deck) if (id(c.rank), id(c.suit)) == same), -1)
                if at < 0:
                    continue
            del deck[at]
            del ids[at]

    def _produce_cards(self, cards: Iterable[Card]) -> None:
        """Cards back into the deck (a mucked or shown hand), each unless it is there already: by
        rank and suit (enum members, compared by identity) in a set, rather than pokerkit's
        ``Card.__eq__`` (Python code) against each card of the deck."""
        deck = self.deck_cards
        there = {(id(c.rank), id(c.suit)) for c in deck}
        for card in cards:
            if not card:
                continue
            key = (id(card.rank), id(card.suit))
            if key not in there:
                deck.append(card)
                there.add(key)

    _verified: tuple[int, int] | None = None

    def verify_completion_betting_or_raising_to(self, amount: int | None = None) -> int:
        """pokerkit's, unless :meth:`complete_verified_bet_or_raise_to` has just verified this amount."""
        verified, self._verified = self._verified, None
        if verified is not None and verified[0] == amount:
            return verified[1]
        return super().verify_completion_betting_or_raising_to(amount)

    def complete_verified_bet_or_raise_to(self, amount: int, verified: int) -> Any:
        """``complete_bet_or_raise_to(amount)`` right after ``verify_completion_betting_or_raising_to
        (amount)`` returned ``verified``, nothing done in between: pokerkit verifies again first
        thing (a dozen recomputations of the pots and limits, a tenth of a replay); that second
        verification is given the first one's answer, once."""
        self._verified = (amount, verified)
        try:
            return self.complete_bet_or_raise_to(amount)
        finally:
            self._verified = None

    def _begin_hand_killing(self) -> None:
        """pokerkit's, with what ``can_win_now`` asks for every live player (the pots, every
        player's showing hand per board and hand type) computed once for all of them: nothing
        changes between those questions. The same answers (each player is tested as pokerkit's
        ``can_win_now`` tests it); a fifth of a hold'em replay's time before."""
        assert not any(self.hand_killing_statuses)
        pots = tuple(self.pots)
        views = [
            (i, j, tuple(self.get_up_hands(i, j))) for i in self.board_indices for j in self.hand_type_indices
        ]
        for player in self.player_indices:
            if self.statuses[player]:
                self.hand_killing_statuses[player] = not self._can_win(player, pots, views)
        self._update_hand_killing()

    def _can_win(
        self, player: int, pots: tuple[Any, ...], views: list[tuple[int, int, tuple[Any, ...]]]
    ) -> bool:
        """pokerkit's ``can_win_now(player)`` over pots and showing hands already computed."""
        for i, j, hands in views:
            hand = self.get_hand(player, i, j)
            for pot in pots:
                if player not in pot.player_indices:
                    continue
                max_hand = max_or_none(map(partial(getitem, hands), pot.player_indices))
                if hand is not None and (max_hand is None or max_hand <= hand):
                    return True
        return False

    def get_hand(self, player_index: int, board_index: int, hand_type_index: int) -> Hand | None:
        if not self.statuses[player_index]:
            return None
        return _evaluate(
            self.hand_types[hand_type_index],
            tuple(filter(None, self.hole_cards[player_index])),
            tuple(self.get_board_cards(board_index)),
        )

    def get_up_hand(self, player_index: int, board_index: int, hand_type_index: int) -> Hand | None:
        if not self.statuses[player_index]:
            return None
        return _evaluate(
            self.hand_types[hand_type_index],
            tuple(self.get_up_cards(player_index)),
            tuple(self.get_board_cards(board_index)),
        )


# --------------------------------------------------------------------------- streets


def _holdem_streets(hole: int, small_bet: int, big_bet: int, cap: int | None) -> tuple[Street, ...]:
    """Hole cards then flop (3), turn (1), river (1), a burn before each board dealing."""
    return (
        Street(False, (False,) * hole, 0, False, Opening.POSITION, small_bet, cap),
        Street(True, (), 3, False, Opening.POSITION, small_bet, cap),
        Street(True, (), 1, False, Opening.POSITION, big_bet, cap),
        Street(True, (), 1, False, Opening.POSITION, big_bet, cap),
    )


def _stud_streets(low: bool, small_bet: int, big_bet: int, cap: int | None) -> tuple[Street, ...]:
    """Two down and one up, then three up and one down; the bring-in by the lowest (highest in razz)
    up card, then the best showing hand (the lowest in razz) opens."""
    first = Opening.HIGH_CARD if low else Opening.LOW_CARD
    later = Opening.LOW_HAND if low else Opening.HIGH_HAND
    return (
        Street(False, (False, False, True), 0, False, first, small_bet, cap),
        Street(True, (True,), 0, False, later, small_bet, cap),
        Street(True, (True,), 0, False, later, big_bet, cap),
        Street(True, (True,), 0, False, later, big_bet, cap),
        Street(True, (False,), 0, False, later, big_bet, cap),
    )


def _triple_draw_streets(small_bet: int, big_bet: int, cap: int | None) -> tuple[Street, ...]:
    return (
        Street(False, (False,) * 5, 0, False, Opening.POSITION, small_bet, cap),
        Street(True, (), 0, True, Opening.POSITION, small_bet, cap),
        Street(True, (), 0, True, Opening.POSITION, big_bet, cap),
        Street(True, (), 0, True, Opening.POSITION, big_bet, cap),
    )


# --------------------------------------------------------------------------- the variants


@dataclass(frozen=True, slots=True)
class EngineVariant:
    """How one ``Regle`` is played by pokerkit."""

    regle: str
    kind: Kind
    structure: BettingStructure
    hand_types: tuple[type[Hand], ...]
    hole_cards: int
    """Hold'em: hole cards per player; stud: cards per player at the end (7); draw: the hand (5)."""
    streets_of: Callable[[int, int], tuple[Street, ...]]
    """(small bet, big bet) -> the streets (no-limit and pot-limit: both are the minimum bet)."""
    preset: type | None = None
    """pokerkit's preset for this variant, when it has a faithful one."""
    deck: Deck = Deck.STANDARD

    @property
    def rounds(self) -> tuple[str, ...]:
        """The annex's names of the betting rounds, one per engine street."""
        return VARIANTS[self.regle].rounds[1:-1]

    @property
    def fixed_limit(self) -> bool:
        return self.structure is BettingStructure.FIXED_LIMIT

    @property
    def low(self) -> bool:
        """Only a low hand wins (razz, 2-7)."""
        return all(t.low for t in self.hand_types)

    @property
    def split(self) -> bool:
        """High/low split (eight or better)."""
        return len(self.hand_types) > 1

    def state(
        self,
        stacks: tuple[int, ...],
        *,
        antes: tuple[int, ...] | int = 0,
        blinds: tuple[int, ...] | int = 0,
        bring_in: int = 0,
        small_bet: int,
        big_bet: int | None = None,
        automations: tuple[Automation, ...] = AUDIT_AUTOMATIONS,
        mode: Mode = Mode.CASH_GAME,
        rake: Callable[..., tuple[int, int]] = no_rake,
    ) -> State:
        """A fresh engine state: players in pokerkit's order (for a button game, the small blind first
        and the button last; heads-up, the big blind first and the button, who posts the small blind,
        second), ``stacks`` in engine units."""
        big = big_bet if big_bet is not None else (2 * small_bet if self.fixed_limit else small_bet)
        return CachedState(
            automations,
            self.deck,
            self.hand_types,
            self.streets_of(small_bet, big),
            self.structure,
            True,
            antes,
            blinds,
            bring_in,
            stacks,
            len(stacks),
            mode=mode,
            rake=rake,
        )


def _holdem(regle: str, structure: BettingStructure, hands: tuple[type[Hand], ...], hole: int, preset=None):
    cap = FIXED_LIMIT_CAP if structure is BettingStructure.FIXED_LIMIT else None
    return EngineVariant(
        regle, "holdem", structure, hands, hole, lambda s, b: _holdem_streets(hole, s, b, cap), preset
    )


def _stud(regle: str, hands: tuple[type[Hand], ...], low: bool, preset: type, deck: Deck = Deck.STANDARD):
    return EngineVariant(
        regle,
        "stud",
        BettingStructure.FIXED_LIMIT,
        hands,
        7,
        lambda s, b: _stud_streets(low, s, b, FIXED_LIMIT_CAP),
        preset,
        deck,
    )


_FL, _PL, _NL = BettingStructure.FIXED_LIMIT, BettingStructure.POT_LIMIT, BettingStructure.NO_LIMIT
_OMAHA_HILO = (OmahaHoldemHand, OmahaEightOrBetterLowHand)

ENGINE_VARIANTS: dict[str, EngineVariant] = {
    v.regle: v
    for v in (
        _holdem("THL", _FL, (StandardHighHand,), 2, FixedLimitTexasHoldem),
        _holdem("THPL", _PL, (StandardHighHand,), 2),
        _holdem("THNL", _NL, (StandardHighHand,), 2, NoLimitTexasHoldem),
        _holdem("O4HPL", _PL, (OmahaHoldemHand,), 4, PotLimitOmahaHoldem),
        _holdem("O4JL", _FL, _OMAHA_HILO, 4),
        _holdem("O4JPL", _PL, _OMAHA_HILO, 4, FixedLimitOmahaHoldemHighLowSplitEightOrBetter),
        _holdem("O5HPL", _PL, (OmahaHoldemHand,), 5),
        _stud("7SHL", (StandardHighHand,), False, FixedLimitSevenCardStud),
        _stud(
            "7SJL",
            (StandardHighHand, FixedLimitSevenCardStudHighLowSplitEightOrBetter.hand_types[1]),
            False,
            FixedLimitSevenCardStudHighLowSplitEightOrBetter,
        ),
        # Razz: aces low, so pokerkit's "regular" deck (the same 52 cards) and its regular low hand.
        _stud("7SLL", (RegularLowHand,), True, FixedLimitRazz, Deck.REGULAR),
        EngineVariant(
            "2T7TD",
            "draw",
            _FL,
            (StandardLowHand,),
            5,
            lambda s, b: _triple_draw_streets(s, b, FIXED_LIMIT_CAP),
            FixedLimitDeuceToSevenLowballTripleDraw,
        ),
    )
}
"""Every ``Regle`` of annex 1.3.6.d.5 (the keys of :data:`~coffre.domain.catalogue.poker.VARIANTS`)."""

assert set(ENGINE_VARIANTS) == set(VARIANTS)


def preset_state(
    variant: EngineVariant,
    stacks: tuple[int, ...],
    *,
    antes=0,
    blinds=0,
    bring_in=0,
    small_bet: int,
    big_bet: int,
    automations=AUDIT_AUTOMATIONS,
) -> State:
    """The same state built by pokerkit's preset (for the tests that hold the two against each other)."""
    preset = variant.preset
    if preset is None:
        raise ValueError(f"{variant.regle} has no faithful pokerkit preset")
    if variant.kind == "stud":
        return preset.create_state(
            automations, True, antes, bring_in, small_bet, big_bet, stacks, len(stacks)
        )
    if (
        variant.structure is BettingStructure.FIXED_LIMIT
        or preset is FixedLimitOmahaHoldemHighLowSplitEightOrBetter
    ):
        return preset.create_state(automations, True, antes, blinds, small_bet, big_bet, stacks, len(stacks))
    return preset.create_state(automations, True, antes, blinds, small_bet, stacks, len(stacks))


@cache
def engine_variant(regle: str) -> EngineVariant:
    return ENGINE_VARIANTS[regle]
