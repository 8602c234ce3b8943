"""coffre's own hand evaluators (coffre.domain.audit.ranking): hands written by hand from the rules, then
the same order as pokerkit's hand types (coffre's ``DecreeDeuceToSevenLowHand`` for 2-7) on every
five-card hand's ranks and on random deals (a fixed seed)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations, combinations_with_replacement, pairwise

import pytest
from pokerkit import Hand, OmahaHoldemHand, StandardHighHand

from coffre.domain.audit import ranking
from coffre.domain.audit.ranking import high, omaha_high
from coffre.domain.audit.variants import CARDS, _evaluate

RANKS = "23456789TJQKA"
SUITS = "cdhs"


def cards(text: str) -> list[int]:
    """``"As Kd 2c"`` -> annex codes."""
    return [RANKS.index(c[0]) * 4 + SUITS.index(c[1]) for c in text.split()]


def ranked(evaluate: Callable[[list[int]], int | None], *hands: str) -> list[int | None]:
    return [evaluate(cards(h)) for h in hands]


def strictly_better(values: Sequence[int | None]) -> bool:
    """Each value better than the next (None: no hand, the worst)."""
    keys = [-1 if v is None else v for v in values]
    return all(a > b for a, b in pairwise(keys))


# --------------------------------------------------------------------------- high, by hand


def test_high_categories_in_order():
    values = ranked(
        high,
        "9h Th Jh Qh Kh",  # straight flush
        "5c 5d 5h 5s 2c",  # four of a kind
        "3c 3d 3h 2s 2c",  # full house
        "2h 4h 6h 8h Th",  # flush
        "Ac 2d 3h 4s 5c",  # straight (the wheel)
        "Ac Ad Ah 3s 2c",  # three of a kind
        "Ac Ad Kh Ks Qc",  # two pair
        "Ac Ad Kh Qs Jc",  # one pair
        "Ac Kd Qh Js 9c",  # high card
    )
    assert strictly_better(values)
    assert [v >> 20 for v in values] == list(range(8, -1, -1))


def test_high_wheel_is_the_lowest_straight_and_the_ace_high_the_highest():
    assert strictly_better(
        ranked(high, "Ac Kd Qh Js Tc", "9c Kd Qh Js Tc", "2c 3d 4h 5s 6c", "Ac 2d 3h 4s 5c", "Ac Kd Qh Js 9c")
    )
    assert strictly_better(ranked(high, "2h 3h 4h 5h 6h", "Ah 2h 3h 4h 5h", "Kc Kd Kh Ks 2c"))
    assert high(cards("Ac 2d 3h 4s 5c Kd Qh")) == high(cards("Ac 2d 3h 4s 5c"))  # A-K-Q do not wrap


def test_high_kickers_and_ties():
    assert strictly_better(
        ranked(high, "Ac Ad Kh Qs Jc", "Ac Ad Kh Qs Tc", "Ac Ad Kh Js Tc", "Kc Kd Ah Qs Jc")
    )
    assert strictly_better(ranked(high, "Ac Ad Kh Ks 3c", "Ac Ad Kh Ks 2c", "Ac Ad Qh Qs Kc"))
    assert strictly_better(ranked(high, "3c 3d 3h As Ac", "2c 2d 2h As Ac"))  # full house: the three first
    assert strictly_better(ranked(high, "Ah Kh Qh Jh 9h", "Ah Kh Qh Jh 8h", "Kd Qd Jd Td 8d"))
    assert high(cards("Ac Kd Qh Js 9c")) == high(cards("As Kh Qd Jc 9s"))  # suits never break a tie
    assert high(cards("2c 2d 7h 8s 9c Ac Kd")) == high(cards("2h 2s Ah Kd 9d 3c 4c"))  # the best five


def test_high_six_and_seven_cards_take_the_best_five():
    assert high(cards("2h 5h 8h Jh Ah Ac Ad")) == high(cards("2h 5h 8h Jh Ah"))  # the flush, not trips
    assert high(cards("2h 3h 4h 5h 6h 7h Ad")) == high(cards("3h 4h 5h 6h 7h"))  # the higher straight flush
    # a wheel straight flush over the A-K flush
    assert high(cards("Ah 2h 3h 4h 5h Kh Qd")) == high(cards("Ah 2h 3h 4h 5h"))
    assert high(cards("Kc Kd Kh 2s 2c 2d Qh")) == high(cards("Kc Kd Kh 2s 2c"))  # two trips: a full house
    assert high(cards("Kc Kd 7h 7s 2c 2d Ah")) == high(cards("Kc Kd 7h 7s Ah"))  # three pairs: two pair, ace
    assert high(cards("Kc Kd Kh Ks 2c 2d 2h")) == high(cards("Kc Kd Kh Ks 2c"))
    assert high(cards("9c Td Jh Qs Kc Ad 2c")) == high(cards("Td Jh Qs Kc Ad"))
    assert high(cards("Ac Kd Qh Js 9c 8d")) == high(cards("Ac Kd Qh Js 9c"))


def test_high_refuses_what_is_not_a_hand():
    with pytest.raises(ValueError):
        high(cards("Ac Kd Qh Js"))
    with pytest.raises(ValueError):
        high([0, 0, 0, 0, 0])


def test_omaha_two_hole_cards_and_three_of_the_board():
    board = cards("Ah Kh 7h 2h 9c")  # four hearts
    assert high(cards("Qh 3s") + board) >> 20 == 5  # hold'em: a flush
    assert omaha_high(cards("Qh 3s 4d 8c"), board) == high(cards("Ah Kh 9c Qh 8c"))  # no flush
    assert omaha_high(cards("Qh 3s 4d 8c"), board) >> 20 == 0  # ace high, nothing more
    assert omaha_high(cards("Qh 3h 4d 8c"), board) >> 20 == 5  # two hearts: a flush
    assert omaha_high(cards("Ac Ad Ks 8c"), board) >> 20 == 3  # three aces (two from the hole)
    assert omaha_high(cards("As 5c 6d Jc"), cards("Kd Kc Ks Kh 2d")) >> 20 == 3  # no quads: three kings
    assert omaha_high(cards("Tc Jc Qc Kc"), cards("9d 8s 2h 3c 4d")) >> 20 == 0  # one board card short
    quads = cards("9c 9d 9h 9s 2c")
    assert omaha_high(cards("Ac Ad 2d 3d"), quads) == high(cards("Ac Ad 9c 9d 9h"))  # a full house
    assert omaha_high(cards("Th Jh 2c 3c 4c"), cards("Qh Kh Ah 5c 6d")) >> 20 == 8  # five hole cards
    assert omaha_high(cards("Ah Kh 2c 3c"), cards("Qh Jh Th")) >> 20 == 8  # a three-card board


def test_omaha_straight_flush_needs_two_suited_hole_cards():
    board = cards("9s Ts Js 2d 3c")
    assert omaha_high(cards("Qs 8d 4d 5c"), board) == high(cards("Qs Js Ts 9s 8d"))  # a straight
    assert omaha_high(cards("Qs 8s 4d 5c"), board) >> 20 == 8
    assert omaha_high(cards("Qs Ks Ad 5c"), cards("9s Ts Js Qd 2s")) == high(cards("Ks Qs Js Ts 9s"))
    assert omaha_high(cards("Ks 3d 4d 5c"), cards("9s Ts Js Qs 2d")) >> 20 == 0  # K and four board cards


# --------------------------------------------------------------------------- against pokerkit


def order_agrees(pairs: Iterable[tuple[int | None, int | None]]) -> None:
    """``pairs`` of (ours, pokerkit's key, bigger better): None in the same places, and the same order
    (sorted by pokerkit's key, ours rises with it strictly, and equal exactly where it is equal)."""
    pairs = list(pairs)
    for ours, theirs in pairs:
        assert (ours is None) == (theirs is None), (ours, theirs)
    both = sorted({(t, o) for o, t in pairs if t is not None})
    for (t1, o1), (t2, o2) in pairwise(both):
        assert (t1 == t2) == (o1 == o2) and o1 <= o2, ((t1, o1), (t2, o2))


def pokerkit_key(hand_type: type[Hand], hole: Sequence[int], board: Sequence[int] = ()) -> int | None:
    """pokerkit's best hand of ``hand_type`` (through coffre's ``_evaluate``, pokerkit's own table), as a
    key that is bigger for a better hand."""
    hand = _evaluate.__wrapped__(hand_type, tuple(CARDS[c] for c in hole), tuple(CARDS[c] for c in board))
    if hand is None:
        return None
    return -hand.entry.index if hand_type.low else hand.entry.index


def five_card_hands() -> Iterable[list[int]]:
    """One hand per five-card rank multiset (no flush: suits in turn), and one per flush (clubs)."""
    for ranks in combinations_with_replacement(range(13), 5):
        if max(ranks.count(r) for r in ranks) <= 4:
            yield [r * 4 + i % 4 for i, r in enumerate(ranks)]
    for ranks in combinations(range(13), 5):
        yield [r * 4 for r in ranks]


def deals(seed: int, count: int, size: int) -> list[list[int]]:
    """``count`` deals of ``size`` cards: a quarter from the whole deck, a quarter from two suits
    (flushes), a quarter from five ranks (fours, full houses), a quarter from seven running ranks
    (straights, wheels)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 4 == 0:
            deck = range(52)
        elif i % 4 == 1:
            suits = rng.sample(range(4), 2)
            deck = [c for c in range(52) if c % 4 in suits]
        elif i % 4 == 2:
            ranks = rng.sample(range(13), 5)
            deck = [c for c in range(52) if c // 4 in ranks]
        else:
            start = rng.randrange(-1, 7)
            deck = [c for c in range(52) if (c // 4 - start) % 13 < 7]
        out.append(rng.sample(deck, size))
    return out


def test_high_every_five_card_hand_in_pokerkits_order():
    order_agrees((high(h), pokerkit_key(StandardHighHand, h)) for h in five_card_hands())


@pytest.mark.parametrize("size", [5, 6, 7])
def test_high_random_deals_in_pokerkits_order(size):
    order_agrees((high(h), pokerkit_key(StandardHighHand, h)) for h in deals(size, 1500, size))


@pytest.mark.parametrize(("hole", "board"), [(4, 5), (4, 3), (4, 4), (5, 5)])
def test_omaha_high_random_deals_in_pokerkits_order(hole, board):
    hands = [(d[:hole], d[hole:]) for d in deals(10 * hole + board, 600, hole + board)]
    order_agrees((omaha_high(h, b), pokerkit_key(OmahaHoldemHand, h, b)) for h, b in hands)


def test_the_kinds_of_each_regle_are_its_engine_variants_hand_types():
    from coffre.domain.audit.variants import ENGINE_VARIANTS

    assert set(ranking.HAND_KINDS) == set(ENGINE_VARIANTS)
    for regle, kinds in ranking.HAND_KINDS.items():
        assert len(kinds) == len(ENGINE_VARIANTS[regle].hand_types), regle
