"""A player's equity against one opponent at a decision, from the cards both held and the board so far.

The chip-dumping signal asks, at a player's decision, how much of the pot that player could expect
against its partner: "equity computed from the cards every seat held at that point, exactly where it
can be, with a documented sampling where it cannot". :func:`heads_up_equity` answers it.

**What equity means here.** A's expected share of a pot contested by A and B alone, over the boards
that can still come: the cards not in A's hole, B's hole, the board dealt so far, nor ``dead`` (cards
known out of the deck: a folded hand shown, for instance) are equally likely to complete the board,
and each completed board gives A the whole pot (1), half of it (0.5, a tie) or nothing. At high/low
split Omaha (O4JL, O4JPL: eight or better) each half of the pot is shared that way, the high half by
the high hands, the low half by the qualifying lows; when no low qualifies the high hand takes the
whole pot. The odd chip of a split pot is ignored (shares, not chips). Only A's and B's cards are
taken out of the deck: equity against one opponent ignores every other live hand of a multi-way
pot, on purpose, as the partner's point of view is what chip dumping is about (does A put chips in
where, against B alone, it can expect little of them back?).

**Exact or sampled.** When the boards that can still come number at most :data:`EXACT_RUNOUTS`, every
one is dealt and the equity is exact: always at the turn and the river, and at hold'em's flop
(C(45, 2) = 990 runouts). Omaha's flop (820 runouts with four hole cards each, 741 with five) is
sampled, :data:`OMAHA_SAMPLES` runouts, each costing 25 times hold'em's (:data:`OMAHA_EXACT_RUNOUTS`).
Before the flop (hold'em: C(48, 5) = 1,712,304 runouts; Omaha 1,086,008 or 850,668) the equity is
the mean over :data:`SAMPLES` (Omaha: :data:`OMAHA_SAMPLES`) different runouts, each of the cards left drawn without replacement: the cards
left, in order, at :data:`SAMPLES` sets of positions drawn once per deck size from a
``random.Random`` seeded by the deck's size (:func:`_positions`), so the same cards give the same
value in every process and on every machine, and a sample costs no random draw.
The two holes are taken in a canonical order first, so A's sampled equity against B and B's against
A use the same runouts and add up to 1. The sampled value's standard error is ``sqrt(p (1 - p) /
SAMPLES)`` at most (a tie or a split pot narrows a runout's spread): at most ``0.5 / sqrt(SAMPLES)``
≈ 0.029 for 300 samples, 0.022 for AA against KK (p ≈ 0.82); the runouts being drawn different
from one another, out of a finite set, the true error is a little smaller still.

**Variants.** Board games only: hold'em (THL, THPL, THNL) and Omaha (O4HPL, O5HPL, O4JL, O4JPL), the
``Regle`` whose :func:`~coffre.domain.audit.engine.rules_of` kind is ``"holdem"``. Stud and draw
return ``None``: their later cards are dealt to each player rather than to a shared board, partly
face down (stud's down cards, every draw's replacements), and a draw game's hand changes by each
player's own choice of discards, so "the boards that can still come" is not a well-defined set from
two holes and a board. ``None`` as well when either hole is incomplete (fewer cards than the
variant deals: a hand mucked unseen).

Hands are valued by coffre's own evaluators (:mod:`coffre.domain.audit.ranking`, its
:data:`~coffre.domain.audit.ranking.HAND_KINDS` and :data:`~coffre.domain.audit.ranking.EVALUATORS`),
not pokerkit's (which the tests use as a second engine). Results are cached (:data:`CACHE_SIZE`
entries) by the canonical key of sorted holes, board and dead cards, the variants of one evaluator
(THL, THPL, THNL) sharing their entries. Times per call (uncached) are in tests/signals/test_equity.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import combinations, permutations
from math import comb
from operator import itemgetter

from ..audit import ranking
from ..audit.engine import rules_of

EXACT_RUNOUTS = 990
"""The most runouts dealt one by one (exact equity): the flop of hold'em (C(45, 2)) and of Omaha.
More (before the flop), and :data:`SAMPLES` of them are drawn."""

SAMPLES = 300
"""The runouts drawn when there are more than :data:`EXACT_RUNOUTS`: standard error ≤ 0.5 / sqrt(SAMPLES)."""

OMAHA_EXACT_RUNOUTS = 50
"""Omaha's exact limit: the turn (44 to 46 rivers). Each Omaha runout values 60 five-card hands a
player (two of four hole cards, three of five board cards), 25 times hold'em's cost: its flop
(741 to 820 runouts) exact took 12 to 17 ms a call, which made the console's index 15 times slower
on hands of every variant."""
OMAHA_SAMPLES = 60
"""Omaha's runouts drawn at the flop and before it: standard error ≤ 0.5 / sqrt(60) ≈ 0.065, enough
to tell a weak call (equity ≤ 0.25) or the best hand folded (≥ 0.6) from the rest, the only use
the signals make of it."""

CACHE_SIZE = 1 << 14
"""The equities with a board kept, the least recently used dropped (a hand asks the same two holes
again at each decision of a street, and from either side)."""
PRE_FLOP_CACHE_SIZE = 1 << 16
"""The equities before the flop kept: about 350 bytes each, 23 MB full; every shape of two hold'em
holes fits (:func:`_canonical`), so a year of hands computes each one once."""

assert SAMPLES <= EXACT_RUNOUTS  # so a sample of different runouts can always be drawn

_BOARD = 5

Evaluator = Callable[[Sequence[int], Sequence[int]], int | None]


def heads_up_equity(
    regle: str,
    hole_a: Sequence[int],
    hole_b: Sequence[int],
    board: Sequence[int],
    dead: Sequence[int] = (),
) -> float | None:
    """A's expected share (0 to 1) of a pot contested by A and B alone, from their hole cards, the
    board dealt so far (0 to 5 cards) and cards known out of the deck (``dead``); ``None`` for stud and
    draw (see the module's docstring) and when either hole has fewer cards than ``regle`` deals.
    Exact when at most :data:`EXACT_RUNOUTS` runouts are left, else sampled (:data:`SAMPLES`).

    Raises ``ValueError`` for an unknown ``regle``, a hole with more cards than ``regle`` deals, a
    board of more than five cards, a card code outside 0..51, a card given twice, or so many dead
    cards that the board cannot be completed."""
    try:
        rules = rules_of(regle)
    except KeyError:
        raise ValueError(f"no such Regle: {regle!r}") from None
    if rules.kind != "holdem":
        return None
    dealt = rules.hole_cards
    if len(hole_a) < dealt or len(hole_b) < dealt:
        return None
    if len(hole_a) > dealt or len(hole_b) > dealt:
        raise ValueError(f"{regle} deals {dealt} hole cards: {list(hole_a)}, {list(hole_b)}")
    if len(board) > _BOARD:
        raise ValueError(f"a board of {len(board)} cards: {list(board)}")
    dead_cards = tuple(sorted(set(dead)))
    cards = [*hole_a, *hole_b, *board, *dead_cards]
    if len(set(cards)) != len(cards) or not all(0 <= card < 52 for card in cards):
        raise ValueError(f"cards given twice or not cards: {cards}")
    if 52 - len(cards) < _BOARD - len(board):
        raise ValueError(f"too many dead cards to deal the board: {len(dead_cards)}")
    kinds = ranking.HAND_KINDS[regle]
    if not board and not dead_cards:  # before the flop: shapes repeat across hands (a flop's rarely)
        a, b, shared = _canonical(hole_a, hole_b, board)
    else:
        a, b, shared = tuple(sorted(hole_a)), tuple(sorted(hole_b)), tuple(sorted(board))
    cached = _equity_before_the_flop if not shared and not dead_cards else _equity
    if b < a:
        return 1.0 - cached(kinds, b, a, shared, dead_cards)
    return cached(kinds, a, b, shared, dead_cards)


_SUIT_ORDERS = tuple(permutations(range(4)))


def _canonical(
    hole_a: Sequence[int], hole_b: Sequence[int], board: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The cards with their suits renamed to the smallest of the 24 namings: suits are symmetric
    (no variant of these ranks them), so every deal of one shape has one equity and one cache entry.
    Before the turn this is what makes the cache pay: some 47,000 shapes of two hold'em holes
    against each other instead of 812,000 deals, so a year of hands computes each one once. The
    sample drawn for a sampled equity is the canonical deal's."""
    best: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None
    a_first = True
    for order in _SUIT_ORDERS:
        a = tuple(sorted((c & ~3) | order[c & 3] for c in hole_a))
        b = tuple(sorted((c & ~3) | order[c & 3] for c in hole_b))
        shared = tuple(sorted((c & ~3) | order[c & 3] for c in board))
        named = (a, b, shared) if a < b else (b, a, shared)  # either side: one naming
        if best is None or named < best:
            best, a_first = named, a < b
    assert best is not None
    return best if a_first else (best[1], best[0], best[2])


@lru_cache(maxsize=PRE_FLOP_CACHE_SIZE)
def _equity_before_the_flop(
    kinds: tuple[str, ...],
    a: tuple[int, ...],
    b: tuple[int, ...],
    board: tuple[int, ...],
    dead: tuple[int, ...],
) -> float:
    """:func:`_equity` with no board: a cache of its own, which the boards' (rarely asked twice)
    cannot evict, big enough for every hold'em shape (:func:`_canonical`)."""
    return _equity.__wrapped__(kinds, a, b, board, dead)


@lru_cache(maxsize=CACHE_SIZE)
def _equity(
    kinds: tuple[str, ...],
    a: tuple[int, ...],
    b: tuple[int, ...],
    board: tuple[int, ...],
    dead: tuple[int, ...],
) -> float:
    """:func:`heads_up_equity` of canonical arguments (sorted holes, ``a`` < ``b``, sorted board and dead)."""
    used = {*a, *b, *board, *dead}
    deck = [card for card in range(52) if card not in used]
    missing = _BOARD - len(board)
    holdem = kinds == (ranking.HIGH,)
    if comb(len(deck), missing) <= (EXACT_RUNOUTS if holdem else OMAHA_EXACT_RUNOUTS):
        runouts: Sequence[tuple[int, ...]] = list(combinations(deck, missing))
    else:
        runouts = _sample(deck, missing, SAMPLES if holdem else OMAHA_SAMPLES)
    if holdem:
        points = _high_points(a, b, board, runouts)
    elif len(kinds) == 1:
        points = _one_half_points(ranking.EVALUATORS[kinds[0]], a, b, board, runouts)
    else:
        high, low = (ranking.EVALUATORS[kind] for kind in kinds)
        points = _split_points(high, low, a, b, board, runouts)
    return points / (4 * len(runouts))


@lru_cache(maxsize=64)
def _positions(left: int, missing: int, count: int) -> tuple[tuple[int, ...], ...]:
    """``count`` different sets of ``missing`` positions among ``left`` cards, drawn once per
    (``left``, ``missing``) from a ``random.Random`` seeded by those two numbers: the same in every
    process. A deal's sample is its cards left, in order, at these positions: each set of positions
    was drawn uniformly, so each deal's runouts are a uniform sample of different runouts (the
    deals share the positions, not the cards), and drawing them costs nothing per deal."""
    rng = random.Random(left * 64 + missing)
    seen: set[tuple[int, ...]] = set()
    drawn: list[tuple[int, ...]] = []
    while len(drawn) < count:
        positions = tuple(sorted(rng.sample(range(left), missing)))
        if positions not in seen:
            seen.add(positions)
            drawn.append(positions)
    return tuple(drawn)


def _sample(deck: list[int], missing: int, count: int) -> list[tuple[int, ...]]:
    """:data:`SAMPLES` different runouts of ``missing`` cards of ``deck`` (:func:`_positions`)."""
    return [pick(deck) for pick in _pickers(len(deck), missing, count)]


@lru_cache(maxsize=64)
def _pickers(left: int, missing: int, count: int) -> tuple[Callable[[list[int]], tuple[int, ...]], ...]:
    """:func:`_positions` as ``itemgetter``s (a tuple of the cards at once, in C)."""
    return tuple(_getter(positions) for positions in _positions(left, missing, count))


def _getter(positions: tuple[int, ...]) -> Callable[[list[int]], tuple[int, ...]]:
    if len(positions) == 1:
        (only,) = positions
        return lambda deck: (deck[only],)
    return itemgetter(*positions)


# Each runout scores A's share in quarters of the pot (4 the whole pot, 2 half of it, 1 a quarter): the
# sums are integers, the same whatever the order of the runouts.


def _high_points(
    a: tuple[int, ...], b: tuple[int, ...], board: tuple[int, ...], runouts: Sequence[tuple[int, ...]]
) -> int:
    """Hold'em: seven cards each, valued as :func:`ranking.high` values them (its batch form)."""
    wins, ties = ranking.high_showdowns((*a, *board), (*b, *board), runouts)
    return 4 * wins + 2 * ties


def _one_half_points(
    evaluate: Evaluator,
    a: tuple[int, ...],
    b: tuple[int, ...],
    board: tuple[int, ...],
    runouts: Sequence[tuple[int, ...]],
) -> int:
    """One hand for the whole pot (Omaha high)."""
    points = 0
    for runout in runouts:
        full = board + runout
        va, vb = evaluate(a, full), evaluate(b, full)
        if va > vb:  # type: ignore[operator]  # a high hand is never None
            points += 4
        elif va == vb:
            points += 2
    return points


def _split_points(
    high: Evaluator,
    low: Evaluator,
    a: tuple[int, ...],
    b: tuple[int, ...],
    board: tuple[int, ...],
    runouts: Sequence[tuple[int, ...]],
) -> int:
    """High/low eight or better: half the pot to each half's best hand (a tie sharing that half), the
    whole pot to the high hand when no low qualifies."""
    points = 0
    for runout in runouts:
        full = board + runout
        ha, hb = high(a, full), high(b, full)
        la, lb = low(a, full), low(b, full)
        share = 4 if la is None and lb is None else 2
        if ha > hb:  # type: ignore[operator]
            points += share
        elif ha == hb:
            points += share // 2
        if share == 2:
            if lb is None or (la is not None and la > lb):
                points += 2
            elif la == lb:
                points += 1
    return points
