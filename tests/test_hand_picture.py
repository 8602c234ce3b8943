"""The hand as the console steps through it (coffre/hand_picture.py): at the end of round k, each
seat's stack as it stands then, no Net before the end; a finding on the hand's result outlined
only once the whole hand is drawn (issue 32: the final stacks and Net showed from round 1, and a
PAYOFF_WRONG outlined its seats from the blinds on)."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

from coffre.domain.audit.findings import Finding
from coffre.domain.normalize import normalize
from coffre.hand_picture import hand_view

sys.path.insert(0, str(Path(__file__).parent / "audit"))

from hands import small_hand


def test_the_stacks_at_each_round_are_those_the_hand_records():
    """small_hand (its docstring): blinds 0.01/0.02; seat 3 raises to 0.06, both call; on the flop
    seat 3 bets 0.10, seat 1 folds, seat 2 calls; the turn is checked; on the river seat 2 bets 0.20,
    seat 3 calls; seat 3 wins. Every seat starts with 1.00."""
    event = normalize(json.dumps(small_hand()).encode())
    names = [t.name for t in event.Jeu.Tour]
    expected = {
        "bet": {1: "0.99", 2: "0.98", 3: "1.00"},
        "pre-flop": {1: "0.94", 2: "0.94", 3: "0.94"},
        "flop": {1: "0.94", 2: "0.84", 3: "0.84"},
        "turn": {1: "0.94", 2: "0.84", 3: "0.84"},
    }
    assert set(expected) <= set(names[:-1])
    for k, name in enumerate(names[:-1]):
        if name not in expected:
            continue
        view = hand_view(event, (), until_round=k)
        got = {int(s): v.after for s, v in view.seats.items()}
        assert got == {s: Decimal(v) for s, v in expected[name].items()}, name
        assert all(v.net is None for v in view.seats.values()), name
    whole = hand_view(event, ())
    for player in event.Participants.Joueur:
        seat = whole.seats[player.Siege]
        assert (seat.after, seat.net) == (player.Finance.CaveApres, player.Finance.Net)


def test_a_finding_on_the_result_is_outlined_at_the_end_only():
    event = normalize(json.dumps(small_hand()).encode())
    payoff = Finding("PAYOFF_WRONG", "seat 3: the cards give more", None, 3)
    early = hand_view(event, (payoff,), until_round=1)
    assert not any(v.flagged for v in early.seats.values())
    assert hand_view(event, (payoff,)).seats[Decimal(3)].flagged
    seated = Finding("SEAT_SHARED", "two at seat 2", None, 2)  # about the table: from the start
    assert hand_view(event, (seated,), until_round=0).seats[Decimal(2)].flagged
