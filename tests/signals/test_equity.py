"""coffre.domain.signals.equity: heads-up equity at a decision. Known answers each from a source of its
own (river hands read by hand, turn outs counted by hand, published preflop odds, an Omaha hi-lo pot
split by hand), then the exact enumeration against pokerkit's hand types (a second engine, brute force
over the same runouts) on random turn and flop deals (a fixed seed).

Times per call, uncached (``nice -n 19 .venv/bin/python tests/signals/test_equity.py``: CPU time, best
of 3 rounds over random deals, on the project's 2-core machine, shared), with EXACT_RUNOUTS = 990,
SAMPLES = 300, OMAHA_EXACT_RUNOUTS = 50 and OMAHA_SAMPLES = 60:

    ============  ==================  ================  ============  =========
    Regle         preflop (sampled)   flop              turn (exact)  river
    ============  ==================  ================  ============  =========
    THNL          0.40 ms (300)       0.68 ms (990 exact)  0.04 ms (44)  0.011 ms
    O4HPL         1.08 ms (60)        1.14 ms (60)      0.65 ms (40)  0.028 ms
    O4JPL         1.40 ms (60)        1.26 ms (60)      1.02 ms (40)  0.040 ms
    O5HPL         1.73 ms (60)        1.63 ms (60)      1.28 ms (38)  0.073 ms
    ============  ==================  ================  ============  =========

(The runouts dealt in brackets.) Before issue 33's tuning the hold'em flop took 1.2 ms (``high``
called twice a runout, now ``ranking.high_showdowns``), the pre-flop 0.9 ms (a shuffle per deal, now
positions drawn once), and Omaha's exact flop 12 to 17 ms. A cached call (the same cards again, the
same two holes the other way round, or before the flop the same shape of suits): 3 to 6 µs.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import cache
from itertools import combinations
from math import comb

import pytest
from pokerkit import Card, Entry, OmahaEightOrBetterLowHand, OmahaHoldemHand, StandardHighHand

from coffre.domain.signals import equity
from coffre.domain.signals.equity import EXACT_RUNOUTS, SAMPLES, heads_up_equity

RANKS = "23456789TJQKA"
SUITS = "cdhs"


def cards(text: str) -> list[int]:
    """``"As Kd 2c"`` -> annex codes (rank * 4 + suit)."""
    return [RANKS.index(c[0]) * 4 + SUITS.index(c[1]) for c in text.split()]


# --------------------------------------------------------------------------- the river: one board left


def test_the_river_is_the_showdown():
    board = cards("Kh Qs Jd 2c 7h")
    assert heads_up_equity("THNL", cards("Ac Tc"), cards("Kc Kd"), board) == 1.0  # straight vs set
    assert heads_up_equity("THNL", cards("Kc Kd"), cards("Ac Tc"), board) == 0.0
    assert heads_up_equity("THNL", cards("Ac Tc"), cards("Ad Th"), board) == 0.5  # the same straight


# --------------------------------------------------------------------------- the turn: outs counted by hand


def test_a_flush_draw_against_a_set_has_seven_outs_of_44():
    """Board 7d 2h 9h Qc; AhKh against 7s7c. 44 rivers unseen. The hearts left are 3h 4h 5h 6h 7h 8h
    Th Jh Qh (9), but 7h gives the sevens four of a kind and Qh a full house (sevens full of queens):
    7 outs; no straight (A-K needs both T and J), no pair beats a set. 7/44."""
    a, b, board = cards("Ah Kh"), cards("7s 7c"), cards("7d 2h 9h Qc")
    assert heads_up_equity("THNL", a, b, board) == pytest.approx(7 / 44)
    assert heads_up_equity("THNL", b, a, board) == pytest.approx(37 / 44)


def test_an_open_ended_straight_draw_against_aces_has_eight_outs_of_44():
    """Board 6s 7h Kc 2d; 8c9d against AhAd. Any five or ten makes the straight (4 + 4 = 8 outs); no
    flush can come (no suit three times among the board and either hole), a pair of nines or eights
    loses to the aces. 8/44."""
    assert heads_up_equity("THL", cards("8c 9d"), cards("Ah Ad"), cards("6s 7h Kc 2d")) == pytest.approx(
        8 / 44
    )


def test_a_made_straight_shares_the_pot_when_a_ten_comes():
    """Board Kh Qs Jd 2c; AcTc holds the ace-high straight, Ad9d the draw to the same straight. The
    three tens left (Td Th Ts) tie it; the 41 other rivers leave the aces' straight alone (no flush,
    no full house can come). (41 + 3/2) / 44 = 85/88."""
    assert heads_up_equity("THPL", cards("Ac Tc"), cards("Ad 9d"), cards("Kh Qs Jd 2c")) == pytest.approx(
        85 / 88
    )


# --------------------------------------------------------------------------- before the flop: published odds


@pytest.mark.parametrize(
    ("a", "b", "published"),
    [
        ("As Ah", "Ks Kd", 0.819),  # aces against kings, one suit shared: 81.9 %
        ("As Kd", "2c 2h", 0.47),  # ace-king offsuit against deuces: a coin flip the pair slightly leads
    ],
)
def test_preflop_equity_is_the_published_one_within_the_sampling(a, b, published):
    """Sampled (C(48, 5) runouts): SAMPLES runouts, standard error ≤ 0.5 / sqrt(300) ≈ 0.029."""
    assert comb(48, 5) > EXACT_RUNOUTS
    assert heads_up_equity("THNL", cards(a), cards(b), []) == pytest.approx(published, abs=0.05)


def test_a_sample_is_deterministic_and_the_same_from_either_side():
    a, b = cards("As Kd"), cards("2c 2h")
    first = heads_up_equity("THNL", a, b, [])
    equity._equity.cache_clear()
    equity._equity_before_the_flop.cache_clear()
    assert heads_up_equity("THNL", list(reversed(a)), b, []) == first  # the order of a hole's cards
    assert heads_up_equity("THNL", b, a, []) == pytest.approx(1 - first)  # the same runouts
    quarters = first * 4 * SAMPLES  # a runout scores quarters of the pot
    assert quarters == pytest.approx(round(quarters))


def test_a_sample_is_the_same_in_another_process():
    """Another interpreter, another hash seed: the seed is the cards, never ``hash()``."""
    a, b = cards("As Kd"), cards("2c 2h")
    code = f"from coffre.domain.signals.equity import heads_up_equity; print(repr(heads_up_equity('THNL', {a}, {b}, [])))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout
    assert float(out) == heads_up_equity("THNL", a, b, [])


# --------------------------------------------------------------------------- Omaha eight or better


def test_omaha_hi_lo_the_low_half_decides():
    """Board Kc Kd 7h 4s 3c. High: both play two hole cards A-Q with K-K-7 (a pair of kings, A-Q-7):
    a tie, a quarter of the pot each. Low: A's Ah 2d make 7-4-3-2-A with 7-4-3; B's As 9s Qd Jd hold
    one low card, no low: A takes the whole low half. 1/4 + 1/2 = 3/4."""
    a, b, board = cards("Ah 2d Qh Jc"), cards("As 9s Qd Jd"), cards("Kc Kd 7h 4s 3c")
    assert heads_up_equity("O4JPL", a, b, board) == 0.75
    assert heads_up_equity("O4JL", b, a, board) == 0.25
    assert heads_up_equity("O4HPL", a, b, board) == 0.5  # high only: the tie


def test_omaha_hi_lo_without_a_low_the_high_takes_the_pot():
    """Board Kc Kd Qs Jh 9c: no card of the board is eight or lower, no low can qualify. QdQh makes
    queens full of kings with Qs-Kc-Kd, AsAd only two pair (aces and kings): the whole pot to the full
    house."""
    a, b, board = cards("As Ad 2c 3c"), cards("Qd Qh 4d 5d"), cards("Kc Kd Qs Jh 9c")
    assert heads_up_equity("O4JPL", a, b, board) == 0.0
    assert heads_up_equity("O4JPL", b, a, board) == 1.0


# --------------------------------------------------------------------------- what it does not answer


def test_stud_and_draw_have_no_board_to_enumerate():
    assert heads_up_equity("7SHL", cards("As Ad Kc"), cards("2c 3d 4h"), []) is None
    assert heads_up_equity("7SJL", cards("As Ad Kc"), cards("2c 3d 4h"), []) is None
    assert heads_up_equity("7SLL", cards("As Ad Kc"), cards("2c 3d 4h"), []) is None
    assert heads_up_equity("2T7TD", cards("As Ad Kc Qs Jh"), cards("2c 3d 4h 5s 7c"), []) is None


def test_an_unknown_hole_has_no_equity():
    assert heads_up_equity("THNL", cards("As"), cards("Kc Kd"), []) is None
    assert heads_up_equity("O4HPL", cards("As Ad"), cards("Kc Kd Qs Jh"), cards("2c 3d 4h")) is None
    assert heads_up_equity("O5HPL", cards("As Ad Kh Ks"), cards("Kc Kd Qs Jh Tc"), []) is None


@pytest.mark.parametrize(
    ("regle", "a", "b", "board"),
    [
        ("XX", "As Ad", "Kc Kd", ""),  # no such Regle
        ("THNL", "As Ad Ah", "Kc Kd", ""),  # three hole cards at hold'em
        ("THNL", "As Ad", "As Kd", ""),  # a card twice
        ("THNL", "As Ad", "Kc Kd", "2c 3c 4c 5c 6c 7c"),  # six board cards
    ],
)
def test_impossible_cards_are_refused(regle, a, b, board):
    with pytest.raises(ValueError):
        heads_up_equity(regle, cards(a), cards(b), cards(board))


def test_a_board_that_cannot_be_dealt_is_refused():
    dead = [c for c in range(52) if c not in cards("As Ad Kc Kd 2c 3c 4c 5c")]
    assert heads_up_equity("THNL", cards("As Ad"), cards("Kc Kd"), cards("2c 3c 4c"), dead[:-1]) is not None
    with pytest.raises(ValueError):
        heads_up_equity("THNL", cards("As Ad"), cards("Kc Kd"), cards("2c 3c 4c"), dead)


def test_dead_cards_leave_the_deck():
    """The flush draw of the turn above with four of its seven outs known dead: 3/40."""
    a, b, board, dead = cards("Ah Kh"), cards("7s 7c"), cards("7d 2h 9h Qc"), cards("3h 4h 5h 6h")
    assert heads_up_equity("THNL", a, b, board, dead) == pytest.approx(3 / 40)


# --------------------------------------------------------------------------- against pokerkit, brute force


_POKERKIT = [next(iter(Card.parse(RANKS[code // 4] + SUITS[code % 4]))) for code in range(52)]


@cache
def _five(codes: tuple[int, ...]) -> Entry:
    """pokerkit's lookup entry of a five-card high hand (a bigger entry, a better hand), looked up once:
    a ``Hand`` looks its entry up again at each comparison."""
    return StandardHighHand([_POKERKIT[c] for c in codes]).entry


def _pokerkit_high(seven: Sequence[int]) -> Entry:
    """pokerkit's best five of seven (``StandardHighHand.from_game``'s 21 hands)."""
    return max(_five(five) for five in combinations(sorted(seven), 5))


def _omaha(hand_type: type, hole: Sequence[int], board: Sequence[int]) -> object | None:
    try:
        return hand_type.from_game([_POKERKIT[c] for c in hole], [_POKERKIT[c] for c in board])
    except ValueError:  # no low qualifies
        return None


def _share(mine: object | None, theirs: object | None) -> float:
    if theirs is None or (mine is not None and mine > theirs):
        return 1.0
    return 0.5 if mine == theirs else 0.0


def _pokerkit_equity(regle: str, a: list[int], b: list[int], board: list[int]) -> float:
    """Every runout, valued by pokerkit's hand types: hold'em (THNL), Omaha high, Omaha eight or better
    (O4JPL)."""
    deck = [c for c in range(52) if c not in {*a, *b, *board}]
    total = 0.0
    runouts = list(combinations(deck, 5 - len(board)))
    for runout in runouts:
        full = [*board, *runout]
        if regle == "THNL":
            total += _share(_pokerkit_high([*a, *full]), _pokerkit_high([*b, *full]))
            continue
        high = _share(_omaha(OmahaHoldemHand, a, full), _omaha(OmahaHoldemHand, b, full))
        if regle != "O4JPL":
            total += high
            continue
        la, lb = _omaha(OmahaEightOrBetterLowHand, a, full), _omaha(OmahaEightOrBetterLowHand, b, full)
        total += high if la is None and lb is None else (high + _share(la, lb)) / 2
    return total / len(runouts)


def _deals(seed: int, count: int, hole: int, board: int) -> list[tuple[list[int], list[int], list[int]]]:
    rng = random.Random(seed)
    deals = []
    for _ in range(count):
        dealt = rng.sample(range(52), 2 * hole + board)
        deals.append((dealt[:hole], dealt[hole : 2 * hole], dealt[2 * hole :]))
    return deals


@pytest.mark.parametrize(
    ("regle", "hole", "board", "count"),
    [("THNL", 2, 4, 20), ("THNL", 2, 3, 5), ("O4JPL", 4, 4, 3), ("O5HPL", 5, 4, 2)],
)
def test_exact_enumeration_is_pokerkits(regle, hole, board, count):
    """Random deals (a fixed seed): 30 hold'em turns and flops, Omaha eight-or-better and Omaha high
    turns."""
    for a, b, dealt in _deals(33 + board, count, hole, board):
        expected = _pokerkit_equity(regle, a, b, dealt)
        assert heads_up_equity(regle, a, b, dealt) == pytest.approx(expected, abs=1e-12), (a, b, dealt)


# --------------------------------------------------------------------------- timing (not a test)


def bench() -> None:
    """Times per uncached call, as the module's docstring gives them."""
    from coffre.domain.audit import ranking

    ranking.build_tables()
    for regle, hole in (("THNL", 2), ("O4HPL", 4), ("O4JPL", 4), ("O5HPL", 5)):
        for board, count in ((0, 5), (3, 10), (4, 50), (5, 200)):
            deals = _deals(1, count, hole, board)
            best = float("inf")
            for _ in range(3):
                equity._equity.cache_clear()
                equity._equity_before_the_flop.cache_clear()
                start = time.process_time()
                for a, b, dealt in deals:
                    heads_up_equity(regle, a, b, dealt)
                best = min(best, (time.process_time() - start) / count)
            print(f"{regle:6} board of {board}: {best * 1e3:.3f} ms")
    heads_up_equity("THNL", [0, 1], [2, 3], [4, 5, 6])
    start = time.perf_counter()
    for _ in range(10_000):
        heads_up_equity("THNL", [0, 1], [2, 3], [4, 5, 6])
    print(f"cached: {(time.perf_counter() - start) / 10_000 * 1e6:.1f} µs")


if __name__ == "__main__":
    bench()
