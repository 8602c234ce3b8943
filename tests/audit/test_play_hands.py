"""play.py: the hands pokerkit plays for coffre (property test, bench, demo tournament)."""

from __future__ import annotations

import json
import random
from decimal import Decimal

import pytest

from coffre.domain.audit.play import play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.catalogue.poker import POJEU, VARIANTS
from coffre.domain.normalize import normalize


@pytest.mark.parametrize("regle", sorted(ENGINE_VARIANTS))
def test_a_played_hand_is_a_valid_pojeu_in_json_and_xml(regle):
    seats = {2: "5.00", 5: "3.20", 7: "8.00"}
    hand = play_hand(regle, seats, random.Random(11), ante="0.01", rake="0.05")
    event = normalize(hand.json())
    assert isinstance(event, POJEU) and event.Regle == regle
    assert normalize(hand.xml()) == event
    names = [t.name for t in event.Jeu.Tour]
    rounds = VARIANTS[regle].rounds
    assert names == sorted(names, key=rounds.index)  # the variant's names, in its order
    # money is conserved: stacks after the hand plus the rake are the stacks before it
    assert sum(hand.final_stacks.values()) + hand.rake == Decimal("16.20")
    assert {int(p.Siege): p.Finance.CaveApres for p in event.Participants.Joueur} == hand.final_stacks


def test_the_same_seed_plays_the_same_hand():
    a = play_hand("THNL", {1: 2, 3: 2, 4: 2}, random.Random(5), blinds=(1, 2), button=1)
    b = play_hand("THNL", {1: 2, 3: 2, 4: 2}, random.Random(5), blinds=(1, 2), button=1)
    assert a.event == b.event
    assert "Decimal" not in json.dumps(a.event)


def test_heads_up_the_button_posts_the_small_blind():
    hand = play_hand("THNL", {3: "1.00", 8: "1.00"}, random.Random(2), blinds=("0.01", "0.02"), button=8)
    blinds = hand.event["POJEU"]["Jeu"]["Tour"][0]["Action"]
    assert [(b["Bet"]["name"], b["Bet"]["Siege"]) for b in blinds] == [("big blind", 3), ("small blind", 8)]


def test_stud_brings_in_and_antes():
    hand = play_hand(
        "7SHL", {1: 10, 2: 10, 3: 10}, random.Random(4), ante="0.10", bring_in="0.25", small_bet="0.50"
    )
    tours = {t["name"]: t for t in hand.event["POJEU"]["Jeu"]["Tour"]}
    assert [a["Bet"]["name"] for a in tours["bet"]["Action"]] == ["ante"] * 3
    first = next(a for a in tours["bring-in"]["Action"] if "Bet" in a)["Bet"]
    assert first["name"] in ("bring-in", "bet")


def test_too_many_players_for_the_deck_is_refused():
    with pytest.raises(ValueError, match="2 to 7 players"):
        play_hand("7SHL", dict.fromkeys(range(1, 9), 10), random.Random(1))
