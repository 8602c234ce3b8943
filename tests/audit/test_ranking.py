"""coffre's own hand evaluators (coffre.domain.audit.ranking): hands written by hand from the rules, then
the same order as pokerkit's hand types (coffre's ``DecreeDeuceToSevenLowHand`` for 2-7) on every
five-card hand's ranks and on random deals (a fixed seed)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations, combinations_with_replacement, pairwise

import pytest
from pokerkit import (
    FixedLimitSevenCardStudHighLowSplitEightOrBetter,
    Hand,
    OmahaEightOrBetterLowHand,
    OmahaHoldemHand,
    RegularLowHand,
    StandardHighHand,
)

from coffre.domain.audit.ranking import (
    DEUCE_SEVEN,
    EVALUATORS,
    HAND_KINDS,
    HIGH,
    LOW8,
    OMAHA_HIGH,
    OMAHA_LOW8,
    RAZZ,
    describe,
    deuce_seven,
    high,
    high_showdowns,
    low8,
    omaha_high,
    omaha_low8,
    razz,
)
from coffre.domain.audit.variants import CARDS, ENGINE_VARIANTS, DecreeDeuceToSevenLowHand, _evaluate

EightOrBetterLowHand = FixedLimitSevenCardStudHighLowSplitEightOrBetter.hand_types[1]

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
    with pytest.raises(ValueError):
        high(cards("2h 5h 8h Jh Ah Ac Ad As"))
    with pytest.raises(ValueError):
        razz(cards("Ac Kd Qh Js"))
    with pytest.raises(ValueError):
        omaha_high(cards("Ac Kd Qh Js"), cards("2c 3d"))


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


# --------------------------------------------------------------------------- eight or better, by hand


def test_low8_qualifies_five_different_ranks_up_to_the_eight():
    values = ranked(
        low8,
        "Ah 2h 3h 4h 5h",  # the wheel, suited: the best low (no straight, no flush)
        "Ac 2d 3h 4s 6c",
        "2c 3d 4h 5s 6c",  # 6-5: worse than 6-4
        "Ac 2d 3h 4s 7c",
        "Ac 2d 3h 5s 8c",
        "Ac 2d 3h 6s 8c",
        "4c 5d 6h 7s 8c",  # the worst low
        "4c 5d 6h 7s 9c",  # no low: a nine
    )
    assert strictly_better(values)
    assert values[-1] is None


def test_low8_pairs_do_not_make_a_low_and_seven_cards_take_the_best_five():
    assert low8(cards("Ac Ad 2c 2d 3h 4s Ks")) is None  # four low ranks only
    assert low8(cards("Ac Ad 2c 3h 4s 9s 8d")) == low8(cards("Ac 2c 3h 4s 8d"))
    assert low8(cards("8c 7d 6h 5s 4c 3d 2h")) == low8(cards("6h 5s 4c 3d 2h"))
    assert low8(cards("Kc Ac 2c 3c 4c 5c Qc")) == low8(cards("Ac 2d 3h 4s 5c"))  # a flush, still the wheel
    assert low8(cards("Ac 2d 3h 4s 8c 8d")) == low8(cards("Ac 2d 3h 4s 8c"))


def test_omaha_low8_two_hole_cards_three_of_the_board_and_counterfeits():
    board = cards("2c 4d 8h Jc Jd")
    assert omaha_low8(cards("Ac 3d Kh Qs"), board) == low8(cards("Ac 3d 2c 4d 8h"))
    assert omaha_low8(cards("Ac 2d Kh Qs"), board) is None  # the board's 2 counterfeits the hole's
    assert omaha_low8(cards("Ac 2d 3h Qs"), board) == low8(cards("Ac 3h 2c 4d 8h"))  # A-3, not A-2
    assert omaha_low8(cards("Ac Kd Qh Js"), cards("2c 3d 4h 5s 6c")) is None  # one low hole card
    assert low8(cards("Ac Kd 2c 3d 4h 5s 6c")) is not None  # where hold'em would have one
    assert omaha_low8(cards("Ac 2d 3h 4s"), cards("5c 6d 7h Kc Kd")) == low8(cards("Ac 2d 5c 6d 7h"))
    assert omaha_low8(cards("Ac 2d 3h 4s"), cards("5c 6d Kh Kc Kd")) is None  # two low board cards
    assert omaha_low8(cards("Ac 2d 3h 4s 5h"), cards("6c 7d 8h")) == low8(cards("Ac 2d 6c 7d 8h"))


# --------------------------------------------------------------------------- razz, by hand


def test_razz_the_ace_low_no_straights_nor_flushes_and_pairs_count():
    values = ranked(
        razz,
        "Ah 2h 3h 4h 5h",  # the best hand, suited and running
        "Ac 2d 3h 4s 6c",
        "2c 3d 4h 5s 6c",
        "9c Td Jh Qs Kc",  # the worst hand of five different ranks
        "Ac Ad 2h 3s 4c",  # any pair is worse: aces are the best pair
        "2c 2d Ah 3s 4c",
        "2c 2d Jh Qs Kc",
        "Kc Kd Ah 2s 3c",
        "Ac Ad 2h 2s 3c",  # two pair
        "Kc Kd Qh Qs Jc",
        "Ac Ad Ah 2s 3c",  # three of a kind
        "Ac Ad Ah 2s 2c",  # full house
        "Ac Ad Ah As 2c",  # four of a kind
        "Kc Kd Kh Ks Qc",
    )
    assert strictly_better(values)


def test_razz_seven_cards_take_the_best_five():
    assert razz(cards("Kc Kd 8h 6s 4c 4d Ah")) == razz(cards("Kc 8h 6s 4c Ah"))
    assert razz(cards("Ac Ad 2c 2d 3h 3s 4c")) == razz(cards("Ac Ad 2c 3h 4c"))  # a pair of aces
    assert razz(cards("Kc Kd Kh Qs Qc Qd 2h")) == razz(cards("Kc Kd Qs Qc 2h"))  # two pair
    assert razz(cards("7c 7d 7h 7s 2c 2d 2h")) == razz(cards("7c 7d 2c 2d 2h"))  # full house, twos full
    assert describe(RAZZ, razz(cards("Kc Kd 8h 6s 4c 4d Ah"))) == "K-8-6-4-A low"
    assert describe(RAZZ, razz(cards("Ac Ad 2c 2d 3h 3s 4c"))) == "pair, aces (4-3-2)"


# --------------------------------------------------------------------------- 2-7 as the decree reads


def test_deuce_seven_as_decree_2016_1326_reads_it():
    """Art. 6 II: "il n'est pas tenu compte des combinaisons constituées d'une couleur ou d'une
    quinte"; art. 7 IV: "l'As y compte toujours comme carte haute" (docs/hand-audit.md, *2-7*; the
    audit's tests/audit/test_hand_rules.py::test_two_seven_counts_no_flush_nor_straight)."""
    values = ranked(
        deuce_seven,
        "6c 5d 4s 3c 2d",  # a six high, not a straight: the best hand
        "7h 5h 4h 3h 2h",  # a seven high, not a flush
        "7c 6d 4s 3c 2d",
        "8c 6d 4s 3c 2d",
        "Kc Qd Js Tc 8d",
        "Ac 5d 4s 3c 2d",  # an ace high, not a wheel
        "Ac Kd Qs Jc Td",  # an ace high, not a straight
        "2c 2d 4s 3c 5d",  # any pair is worse
        "Ac Ad Ks Qc Jd",
        "2c 2d 3s 3c 4d",  # two pair
        "2c 2d 2s 3c 4d",  # three of a kind
        "2c 2d 2s 3c 3d",  # full house
        "2c 2d 2s 2h 3d",  # four of a kind
    )
    assert strictly_better(values)
    assert deuce_seven(cards("7h 5h 4h 3h 2h")) == deuce_seven(cards("7c 5d 4h 3s 2h"))
    assert describe(DEUCE_SEVEN, values[0]) == "6-5-4-3-2 low"
    assert describe(DEUCE_SEVEN, values[5]) == "A-5-4-3-2 low"
    with pytest.raises(ValueError):
        deuce_seven(cards("7h 5h 4h 3h 2h Kc"))


# --------------------------------------------------------------------------- words and the table


def test_ranking_imports_no_pokerkit():
    code = "import sys, coffre.domain.audit.ranking as r; r.build_tables(); print('pokerkit' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_describe():
    said = {
        "Ah Qh 9h 5h 2h Kc Kd": "flush, ace high (A-Q-9-5-2)",
        "Ac 2d 3h 4s 5c": "straight, five high",
        "9h Th Jh Qh Kh": "straight flush, king high",
        "Kc Kd Kh 2c 2d": "full house, kings full of twos",
        "Kc Kd 7h 7c 2d": "two pair, kings and sevens (2)",
        "9c 9d Ah Kc 4d": "pair, nines (A-K-4)",
        "9c Jd Ah Kc 4d": "high card, ace high (A-K-J-9-4)",
        "9c 9d 9h 9s 4d": "four of a kind, nines, 4 kicker",
        "9c 9d 9h As 4d": "three of a kind, nines (A-4)",
    }
    assert {h: describe(HIGH, high(cards(h))) for h in said} == said
    assert (
        describe(OMAHA_HIGH, omaha_high(cards("Ac Ad 2c 3c"), cards("Ah Ks Qd")))
        == "three of a kind, aces (K-Q)"
    )
    assert describe(LOW8, low8(cards("8c 6d 4h 3s Ac Kd Kh"))) == "8-6-4-3-A low"
    assert describe(OMAHA_LOW8, None) == "no low"
    with pytest.raises(ValueError):
        describe("badugi", 0)


def test_each_regle_has_its_kinds_and_each_kind_one_signature():
    assert set(HAND_KINDS) == set(ENGINE_VARIANTS)
    types = {
        StandardHighHand: HIGH,
        OmahaHoldemHand: OMAHA_HIGH,
        EightOrBetterLowHand: LOW8,
        OmahaEightOrBetterLowHand: OMAHA_LOW8,
        RegularLowHand: RAZZ,
        DecreeDeuceToSevenLowHand: DEUCE_SEVEN,
    }
    for regle, variant in ENGINE_VARIANTS.items():
        assert HAND_KINDS[regle] == tuple(types[t] for t in variant.hand_types), regle
    hole, board = cards("Ac 2d 3h 4s"), cards("5c 6d 7h Kc Kd")
    assert EVALUATORS[HIGH](hole[:2], board) == high(hole[:2] + board)
    assert EVALUATORS[OMAHA_HIGH](hole, board) == omaha_high(hole, board)
    assert EVALUATORS[LOW8](hole + board[:3], ()) == low8(hole + board[:3])
    assert EVALUATORS[OMAHA_LOW8](hole, board) == omaha_low8(hole, board)
    assert EVALUATORS[RAZZ](hole + board[:3], ()) == razz(hole + board[:3])
    assert EVALUATORS[DEUCE_SEVEN](board, ()) == deuce_seven(board)


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
    key that is bigger for a better hand. tests/audit/test_hand_variants.py holds ``_evaluate`` against
    pokerkit's ``from_game`` for every hand type of the eleven variants."""
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


def low_deals(seed: int, count: int, size: int) -> list[list[int]]:
    """Half :func:`deals`, half from the ace to the nine and one more rank (lows, counterfeits, pairs)."""
    rng = random.Random(seed)
    out = deals(seed, count // 2, size)
    for _ in range(count - len(out)):
        ranks = [12, *range(8), rng.randrange(8, 12)]
        out.append(rng.sample([c for c in range(52) if c // 4 in ranks], size))
    return out


@pytest.mark.parametrize(
    ("evaluate", "hand_type"),
    [(low8, EightOrBetterLowHand), (razz, RegularLowHand), (deuce_seven, DecreeDeuceToSevenLowHand)],
)
def test_lows_every_five_card_hand_in_pokerkits_order(evaluate, hand_type):
    order_agrees((evaluate(h), pokerkit_key(hand_type, h)) for h in five_card_hands())


@pytest.mark.parametrize("size", [5, 6, 7])
@pytest.mark.parametrize(("evaluate", "hand_type"), [(low8, EightOrBetterLowHand), (razz, RegularLowHand)])
def test_lows_random_deals_in_pokerkits_order(evaluate, hand_type, size):
    order_agrees((evaluate(h), pokerkit_key(hand_type, h)) for h in low_deals(100 + size, 1500, size))


def test_deuce_seven_random_deals_in_pokerkits_order():
    hands = low_deals(25, 1500, 5)
    order_agrees((deuce_seven(h), pokerkit_key(DecreeDeuceToSevenLowHand, h)) for h in hands)


@pytest.mark.parametrize(("hole", "board"), [(4, 5), (4, 3), (4, 4), (5, 5)])
def test_omaha_low8_random_deals_in_pokerkits_order(hole, board):
    hands = [(d[:hole], d[hole:]) for d in low_deals(20 * hole + board, 1000, hole + board)]
    found = [(omaha_low8(h, b), pokerkit_key(OmahaEightOrBetterLowHand, h, b)) for h, b in hands]
    assert sum(ours is not None for ours, _ in found) > 100  # lows, and no lows
    order_agrees(found)


def test_high_showdowns_counts_as_high_does() -> None:
    """The batch form the signals' equity uses agrees with :func:`ranking.high` deal by deal."""
    rng = random.Random(33)
    for _ in range(300):
        deck = rng.sample(range(52), 9)
        missing = rng.choice((1, 2, 5))
        board = deck[4 : 4 + 5 - missing]
        hand_a, hand_b = [*deck[:2], *board], [*deck[2:4], *board]
        rest = [c for c in range(52) if c not in deck[:4] + board]
        runouts = [tuple(rng.sample(rest, missing)) for _ in range(5)]
        wins = sum(high(hand_a + list(r)) > high(hand_b + list(r)) for r in runouts)
        ties = sum(high(hand_a + list(r)) == high(hand_b + list(r)) for r in runouts)
        assert high_showdowns(hand_a, hand_b, runouts) == (wins, ties)
