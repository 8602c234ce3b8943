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

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache, lru_cache, partial
from itertools import combinations
from operator import getitem
from typing import Any, Literal

from pokerkit import (
    Automation,
    BettingStructure,
    Card,
    ChipsPushing,
    CombinationHand,
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
    RankOrder,
    RegularLookup,
    RegularLowHand,
    StandardHighHand,
    State,
    Street,
)
from pokerkit.utilities import max_or_none
from pokerkit.utilities import rake as no_rake

from ..catalogue.poker import RANKS, VARIANTS
from .house import (  # noqa: F401  (re-exported: where they used to live)
    DEFAULT_RULES,
    FIXED_LIMIT_CAP,
    HouseRules,
    Reopening,
    scale_of,
    to_int,
)

Kind = Literal["holdem", "stud", "draw"]


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


def _suit_key(hand: Hand | None) -> tuple[int, str]:
    """The highest card of a five-card hand, by rank in its own order, then by suit (c < d < h < s)."""
    if hand is None:
        return (-1, "")
    order = hand.lookup.rank_order
    return max((order.index(c.rank), c.suit) for c in hand.cards)


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

    missing_blinds = 0
    """Pot limit before the flop: the blind money not posted (TDA 54B, see :meth:`EngineVariant.state`)."""
    full_big_blind = 0

    def _begin_betting(self) -> None:
        """pokerkit opens a stud street with the best showing hand (the lowest in razz) and breaks a
        tie by player index; decree 2016-1326 art. 7 III breaks it "en considération de la couleur
        des cartes les plus fortes", TDA RP-10D by "la carte haute … la première dans l'ordre des
        couleurs" (annex 1.3.6.d.3: trèfle < carreau < cœur < pique): the tied hand whose highest
        card has the highest suit opens."""
        street = self.street
        self.round_players = sum(self.statuses)
        super()._begin_betting()
        if street is None or street.opening not in (Opening.HIGH_HAND, Opening.LOW_HAND):
            return
        if self.street is not street or not self.actor_indices:
            return
        high = street.opening is Opening.HIGH_HAND
        lookup = self._State__high_hand_opening_lookup if high else self._State__low_hand_opening_lookup  # type: ignore[attr-defined]
        order = RankOrder.STANDARD if high else RankOrder.REGULAR
        entries = [
            lookup.get_entry_or_none(self.get_up_cards(i)) if self.statuses[i] else None
            for i in self.player_indices
        ]
        present = [e for e in entries if e is not None]
        if not present:
            return
        best = max(present) if high else min(present)
        tied = [i for i, e in enumerate(entries) if e is not None and e == best]
        if len(tied) < 2:
            return
        opener = max(tied, key=lambda i: max((order.index(c.rank), c.suit) for c in self.get_up_cards(i)))
        if opener == self.opener_index:
            return
        self.opener_index = opener
        actors = deque(self.player_indices)
        actors.rotate(-opener)
        self.actor_indices = deque(
            i for i in actors if self.statuses[i] and self.stacks[i] and self.get_effective_stack(i)
        )

    def _verify_completion_betting_or_raising(self) -> None:
        """pokerkit's checks, less its two on an all-in that is not a full raise: pokerkit refuses a
        raise by a player who owes less than the last full raise even when that player has not yet
        acted (the big blind after a limp and a short all-in may raise, TDA 47A), and holds limit
        to a full raise where TDA 47B reopens at 50 %. coffre's replay judges reopening itself
        (``BETTING_NOT_REOPENED``). With ``strict_reopening`` (the hand generator), pokerkit's own."""
        if self.strict_reopening:
            return super()._verify_completion_betting_or_raising()  # type: ignore[misc]
        if not self.actor_indices:
            raise ValueError("There is no player to act.")
        assert self.street is not None
        if (
            self.completion_betting_or_raising_count == self.street.max_completion_betting_or_raising_count
            and not (self.uncapped_two_player_rounds and self.round_players <= 2)
        ):
            raise ValueError("No more completion, betting, or raising is permitted.")
        player_index = self.actor_index
        assert player_index is not None
        if self.stacks[player_index] <= max(self.bets) - self.bets[player_index]:
            raise ValueError("The player is already covered by a previous bet/raise.")
        for i in self.player_indices:
            if i != player_index and self.statuses[i] and self.stacks[i] + self.bets[i] > max(self.bets):
                break
        else:
            raise ValueError(
                "There is no reason to complete, bet, or raise since every other player has either"
                " folded or gone all-in."
            )

    @property
    def max_completion_betting_or_raising_to_amount(self) -> int | None:
        """pokerkit's maximum, and pot limit before the flop as if the blinds were complete (TDA 54B:
        "Toutes les mises « pot » ou « re-pot » pré-flop supposent que les blinds sont complètes")."""
        amount = super().max_completion_betting_or_raising_to_amount
        if (
            amount is None
            or self.betting_structure is not BettingStructure.POT_LIMIT
            or self.street_index != 0
            or not (self.missing_blinds or self.full_big_blind > max(self.bets))
        ):
            return amount
        i = self.actor_index
        assert i is not None
        top = max(max(self.bets), self.full_big_blind)
        pot = 2 * top - self.bets[i] + self.total_pot_amount + self.missing_blinds
        return min(self.stacks[i] + self.bets[i], max(amount, pot))

    def push_chips(self, *, commentary: str | None = None) -> ChipsPushing:
        """pokerkit's, the odd chip of a split given by TDA 20: pokerkit gives it to the first tied
        winner in player order, which for a button game is the first left of the button (TDA 20A,
        club 10.4) and, split high/low, to the high half (TDA 20C); at stud (no button: seat order)
        TDA 20B gives it to the hand whose highest card of its five is first in suit order."""
        if not self.odd_chip_by_suit:
            return super().push_chips(commentary=commentary)
        self.verify_chips_pushing()
        assert self._pots is not None and self._sub_pots  # type: ignore[attr-defined]
        bets = self.bets.copy()
        amount, pot_index, board_index, hand_type_index = self._sub_pots.pop(0)  # type: ignore[attr-defined]
        pot = self._pots[pot_index]  # type: ignore[attr-defined]
        pot.unraked_amount -= amount
        if sum(self.statuses) == 1:
            self.bets[pot.player_indices[0]] += amount
        else:
            hands = tuple(self.get_up_hands(board_index, hand_type_index))
            best = max_or_none(hands[i] for i in pot.player_indices)
            winners = [i for i in pot.player_indices if hands[i] == best]  # as pokerkit: None ties None
            if winners:
                quotient, remainder = divmod(amount, len(winners))
                first = max(winners, key=lambda i: _suit_key(hands[i]))
                for i in winners:
                    self.bets[i] += quotient + (remainder if i == first else 0)
        amounts = tuple(a - b for a, b in zip(self.bets, bets, strict=True))
        self.total_pushed_amount += sum(amounts)
        operation = ChipsPushing(amounts, pot_index, board_index, hand_type_index, commentary=commentary)
        self._update_chips_pushing(operation)  # type: ignore[attr-defined]
        return operation

    odd_chip_by_suit = False
    uncapped_two_player_rounds = False
    round_players = 0
    """The players in the hand when the betting round began."""
    strict_reopening = False
    """pokerkit's reopening checks (stricter than TDA 47): what coffre's generator plays by."""

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


# --------------------------------------------------------------------------- 2-7, as the decree reads


class _DeuceToSevenLookup(RegularLookup):
    """Five cards, no straight nor flush (pokerkit's regular lookup), the ace high."""

    rank_order = RankOrder.STANDARD


class DecreeDeuceToSevenLowHand(CombinationHand):
    """Triple draw 2-7 as decree 2016-1326 art. 6 II reads: "il n'est pas tenu compte des
    combinaisons constituées d'une couleur ou d'une quinte", and art. 7 IV: "l'As y compte toujours
    comme carte haute". pokerkit's ``StandardLowHand`` (deuce-to-seven as card rooms play it)
    counts straights and flushes against the hand; this one does not: 6-5-4-3-2 (a six high) is the
    best hand, then 7-5-4-3-2 whether suited or not; A-K-… is an ace high."""

    lookup = _DeuceToSevenLookup()
    low = True
    card_count = 5


# --------------------------------------------------------------------------- streets


def _blind_round(cap: int | None) -> int | None:
    """pokerkit does not count the big blind among a round's bets: the first round allows one fewer."""
    return None if cap is None else max(cap - 1, 0)


def _holdem_streets(hole: int, small_bet: int, big_bet: int, cap: int | None) -> tuple[Street, ...]:
    """Hole cards then flop (3), turn (1), river (1), a burn before each board dealing."""
    return (
        Street(False, (False,) * hole, 0, False, Opening.POSITION, small_bet, _blind_round(cap)),
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
        Street(False, (False,) * 5, 0, False, Opening.POSITION, small_bet, _blind_round(cap)),
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
    streets_of: Callable[[int, int, int | None], tuple[Street, ...]]
    """(small bet, big bet, fixed-limit cap) -> the streets (no-limit and pot-limit: both bets are the
    minimum bet and the cap is ignored)."""
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
        cap: int | None = FIXED_LIMIT_CAP,
        ante_trimming: bool = True,
        missing_blinds: int = 0,
        full_big_blind: int = 0,
        uncapped_two_player_rounds: bool = False,
    ) -> State:
        """A fresh engine state: players in pokerkit's order (for a button game, the small blind first
        and the button last; heads-up, the big blind first and the button, who posts the small blind,
        second), ``stacks`` in engine units.

        ``antes`` per player are in that order (heads-up pokerkit charges player i the ante of the
        other: the caller swaps them). ``ante_trimming``: pokerkit returns the part of an ante above
        the second largest (right for equal antes, one of them short); off when only some seats post
        an ante (a big-blind ante, TDA RP-11: all dead money). ``cap``: fixed limit's bets a round
        (:class:`HouseRules`). ``missing_blinds``, ``full_big_blind``: pot limit before the flop counts
        full blinds (TDA 54B): the blind money not posted (a dead small blind, a short blind) and the
        big blind in full. ``uncapped_two_player_rounds``: a betting round that begins with two
        players in the hand has no cap (``HouseRules.heads_up == "round"``)."""
        big = big_bet if big_bet is not None else (2 * small_bet if self.fixed_limit else small_bet)
        state = CachedState(
            automations,
            self.deck,
            self.hand_types,
            self.streets_of(small_bet, big, cap),
            self.structure,
            ante_trimming,
            antes,
            blinds,
            bring_in,
            stacks,
            len(stacks),
            mode=mode,
            rake=rake,
        )
        state.missing_blinds = missing_blinds
        state.full_big_blind = full_big_blind
        state.odd_chip_by_suit = self.kind == "stud"
        state.uncapped_two_player_rounds = uncapped_two_player_rounds
        return state


def _holdem(regle: str, structure: BettingStructure, hands: tuple[type[Hand], ...], hole: int, preset=None):
    limit = structure is BettingStructure.FIXED_LIMIT
    return EngineVariant(
        regle,
        "holdem",
        structure,
        hands,
        hole,
        lambda s, b, cap: _holdem_streets(hole, s, b, cap if limit else None),
        preset,
    )


def _stud(regle: str, hands: tuple[type[Hand], ...], low: bool, preset: type, deck: Deck = Deck.STANDARD):
    return EngineVariant(
        regle,
        "stud",
        BettingStructure.FIXED_LIMIT,
        hands,
        7,
        lambda s, b, cap: _stud_streets(low, s, b, cap),
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
            (DecreeDeuceToSevenLowHand,),
            5,
            lambda s, b, cap: _triple_draw_streets(s, b, cap),
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
