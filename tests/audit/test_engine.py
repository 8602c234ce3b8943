"""coffre's replay engine on its own (coffre.domain.audit.engine.Table): a few hands stepped by hand,
each against the text it plays. The engine is tested whole through the audit (test_hand_rules,
test_hand_known_answers) and against pokerkit (test_engine_differential); these say what its steps
answer."""

from __future__ import annotations

import random

import pytest

from coffre.domain.audit.engine import BETTING, OVER, RULES, Illegal, Table, _without


def holdem(regle: str, stacks: list[int], *, blinds=(1, 2), cap: int | None = 4, **kw) -> Table:
    """Players in the engine's order (small blind, big blind, …, button), the blinds of the first two."""
    table = Table(
        RULES[regle],
        stacks,
        antes=[0] * len(stacks),
        ante_trimming=True,
        blinds=list(blinds),
        bring_in=0,
        small_bet=blinds[1],
        cap=cap,
        **kw,
    )
    cards = [[4 * k + s for k in range(2)] for s in range(len(stacks))]  # never dealt twice: enough here
    table.deal(cards, [], [{} for _ in stacks])
    return table


def test_the_first_to_act_before_the_flop_is_left_of_the_big_blind():
    table = holdem("THNL", [100, 100, 100, 100])
    assert table.phase == BETTING
    assert list(table.actors) == [2, 3, 0, 1]
    assert table.owed() == 2


def test_no_limit_raises_at_least_the_last_full_raise_and_at_most_the_stack():
    """Decree art. 7 I 3°, read as TDA 43A (R2): 2 → 6 → at least 10."""
    table = holdem("THNL", [100, 100, 100])
    assert table.limits() == (None, 4, 100)
    table.raise_to(6)
    assert table.limits() == (None, 10, 100)
    with pytest.raises(Illegal):
        table.verify_raise_to(8)


def test_pot_limit_is_the_pot_after_the_call():
    """Decree art. 7 II: « au plus égal à la valeur du pot »: blinds 1-2, the button may raise to 7
    (call 2, pot 5, raise 5)."""
    table = holdem("THPL", [100, 100, 100])
    assert table.limits() == (None, 4, 7)


def test_fixed_limit_counts_the_big_blind_as_the_opening_bet():
    """R5: four bets a round, the big blind the first: three raises before the flop."""
    table = holdem("THL", [100, 100, 100])
    for to in (4, 6, 8):
        table.raise_to(to)
    refusal, _, _ = table.limits()
    assert refusal == "the round's bets are capped"


def test_side_pots_and_an_all_in_for_less():
    """TDA 21: the short stack's pot, then the side pot of the two who covered it."""
    table = holdem("THNL", [10, 50, 50])
    table.raise_to(50)  # the button (player 2) all in: 0 and 1 owe
    table.check_or_call()  # the small blind calls all in for 10
    table.check_or_call()  # the big blind calls 48
    assert table.pots() == [(30, (0, 1, 2)), (80, (1, 2))]


def test_everybody_folds_to_the_big_blind_who_gets_the_small_blind():
    table = holdem("THNL", [100, 100, 100])
    table.fold()
    table.fold()
    assert table.phase == OVER
    assert table.payoffs == [-1, 1, 0]


def test_the_pots_once_hands_are_killed_are_those_computed_again():
    """The showdown kills the hands that can win nothing and derives the pots from those before
    (``_without``) instead of computing them again: the same pots, for random contributions, dead
    antes or not, and any set of hands killed."""
    rng = random.Random(31)
    for _ in range(3_000):
        n = rng.randint(2, 9)
        table = Table.__new__(Table)
        table.n = n
        table.bets = [0] * n
        table.ante_trimming = rng.random() < 0.7
        table.ante_paid = [rng.choice((0, 0, 1, 2)) for _ in range(n)]
        # payoffs: what each put in (negative); a few equal amounts, as all-ins for the same stack make
        table.payoffs = [-(table.ante_paid[i] + rng.choice((0, 5, 10, 10, 25, 40, 40, 80))) for i in range(n)]
        table.live = [rng.random() < 0.8 for _ in range(n)]
        before = table.pots()
        dead = {i for i in range(n) if table.live[i] and rng.random() < 0.4}
        for i in dead:
            table.live[i] = False
        assert _without(before, dead) == table.pots(), (before, dead)
