"""variants.py: each Regle's engine game is pokerkit's preset where pokerkit has a faithful one, and
the card codes of annex 1.3.6.d.3 map to pokerkit's cards."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from pokerkit import BettingStructure, FixedLimitOmahaHoldemHighLowSplitEightOrBetter, StandardLowHand

from coffre.domain.audit.variants import (
    CARDS,
    CODES,
    ENGINE_VARIANTS,
    DecreeDeuceToSevenLowHand,
    preset_state,
    scale_of,
)
from coffre.domain.catalogue.poker import VARIANTS, decode_card


def test_every_regle_has_an_engine_game():
    assert set(ENGINE_VARIANTS) == set(VARIANTS)


@pytest.mark.parametrize("regle", sorted(r for r, v in ENGINE_VARIANTS.items() if v.preset))
def test_a_preset_variant_is_pokerkits_preset(regle):
    v = ENGINE_VARIANTS[regle]
    stud = v.kind == "stud"
    big = 4 if v.fixed_limit or v.preset is FixedLimitOmahaHoldemHighLowSplitEightOrBetter else 2
    kw = {
        "antes": 1 if stud else 0,
        "blinds": 0 if stud else (1, 2),
        "bring_in": 1 if stud else 0,
        "small_bet": 2,
    }
    ours, theirs = v.state((100,) * 4, big_bet=big, **kw), preset_state(v, (100,) * 4, big_bet=big, **kw)
    caps = [s.max_completion_betting_or_raising_count for s in theirs.streets]
    if v.fixed_limit and v.kind != "stud":
        caps[0] -= 1  # coffre counts the big blind as the first round's opening bet (HouseRules)
    assert [s.max_completion_betting_or_raising_count for s in ours.streets] == caps
    uncapped = [replace(s, max_completion_betting_or_raising_count=None) for s in ours.streets]
    assert uncapped == [replace(s, max_completion_betting_or_raising_count=None) for s in theirs.streets]
    hand_types = theirs.hand_types
    if regle == "2T7TD":  # decree art. 6 II: no straights nor flushes (docs/hand-audit.md)
        assert hand_types == (StandardLowHand,)
        hand_types = (DecreeDeuceToSevenLowHand,)
    assert (ours.betting_structure, ours.hand_types, ours.deck) == (
        theirs.betting_structure,
        hand_types,
        theirs.deck,
    )


def test_pokerkits_fixed_limit_omaha_hi_lo_is_pot_limit_so_o4jl_is_built_generically():
    assert FixedLimitOmahaHoldemHighLowSplitEightOrBetter.betting_structure is BettingStructure.POT_LIMIT
    assert ENGINE_VARIANTS["O4JL"].structure is BettingStructure.FIXED_LIMIT
    assert ENGINE_VARIANTS["O4JL"].preset is None
    state = ENGINE_VARIANTS["O4JL"].state((100,) * 3, blinds=(1, 2), small_bet=2)
    assert [s.max_completion_betting_or_raising_count for s in state.streets] == [3, 4, 4, 4]


@pytest.mark.parametrize(
    ("regle", "structure", "hole"),
    [("THPL", BettingStructure.POT_LIMIT, 2), ("O5HPL", BettingStructure.POT_LIMIT, 5)],
)
def test_the_generic_variants(regle, structure, hole):
    state = ENGINE_VARIANTS[regle].state((100,) * 3, blinds=(1, 2), small_bet=2)
    assert state.betting_structure is structure
    assert len(state.streets[0].hole_dealing_statuses) == hole


def test_card_codes():
    assert [repr(CARDS[c]) for c in (0, 1, 2, 3, 38, 51)] == ["2c", "2d", "2h", "2s", "Jh", "As"]
    assert str(decode_card(38)) == "V de Cœur"
    assert all(CODES[CARDS[c]] == c for c in range(52))


def test_scale():
    assert scale_of([Decimal("1.52"), Decimal("0.5"), Decimal("3")]) == 100
    assert scale_of([Decimal("10"), Decimal("2")]) == 1
    assert scale_of([Decimal("0.125")]) == 1000


def test_the_fast_evaluation_is_pokerkits():
    """variants._evaluate looks five-card combinations up in pokerkit's own table: the same hand
    (entry) as pokerkit's from_game, for every hand type of the eleven variants."""
    import random

    from coffre.domain.audit.variants import _evaluate

    types = {t for v in ENGINE_VARIANTS.values() for t in v.hand_types}
    rng = random.Random(0)
    for hand_type in types:
        for _ in range(150):
            c = rng.sample(CARDS, 12)
            for hole, board in (
                (c[:2], c[2:7]),
                (c[:4], c[4:9]),
                (c[:5], c[5:10]),
                (c[:7], ()),
                (c[:3], c[3:6]),
            ):
                ours = _evaluate(hand_type, tuple(hole), tuple(board))
                try:
                    theirs = hand_type.from_game(hole, board)
                except ValueError:
                    theirs = None
                assert (ours is None) == (theirs is None)
                assert ours is None or ours.entry == theirs.entry
