"""The hand as the console steps through it (coffre/hand_picture.py): at the end of round k, each
seat's stack as it stands then, no Net before the end; a finding on the hand's result outlined
only once the whole hand is drawn (issue 32: the final stacks and Net showed from round 1, and a
PAYOFF_WRONG outlined its seats from the blinds on)."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from coffre.domain.audit.findings import Finding
from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.ranking import (
    DEUCE_SEVEN,
    EVALUATORS,
    HIGH,
    LOW8,
    OMAHA_HIGH,
    OMAHA_LOW8,
    RAZZ,
    HandName,
    deuce_seven,
    hand_name,
    low8,
    omaha_high,
    razz,
)
from coffre.domain.normalize import normalize
from coffre.hand_picture import button_of, hand_view

sys.path.insert(0, str(Path(__file__).parent / "audit"))

from audit_hands import duplicated_card_hand
from hands import _player, bet, draw, fixture, fold, reveal, small_hand, tour


def evaluate(kind: str, cards: list[int]) -> int | None:
    return EVALUATORS[kind](cards, [])


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


# -- pots, folds, all-ins, the button, the winners and their hands (issue 32, item 3) --------------


def side_pot_hand() -> dict:
    """THNL, blinds 0.50/1, seat 3 the button with 5 only (seats 1 and 2 start with 100).

    Pre-flop: seat 3 (A♥ A♠) goes all in for 5, seat 1 (K♣ K♦, small blind) calls 4.50, seat 2
    (2♣ 7♦, big blind) calls 4: one pot of 15, seat 3 all in. Flop 9♦ 5♥ J♣: seat 1 bets 10, seat 2
    calls: the main pot stays 15 (seats 1, 2, 3), a side pot of 20 opens (seats 1, 2). Turn 3♠: seat 1
    bets 20, seat 2 folds; the 20 come back uncalled: main pot 15 (seats 1, 3), side pot 20 (seat 1).
    River 8♠, no betting (one seat has chips). Seat 3's aces beat seat 1's kings: seat 3 wins the main
    pot (15), seat 1 the side pot (20). Stacks after: 105, 85, 15."""
    return {
        "POJEU": {
            "IDOper": "0099",
            "IDCoffre": 1,
            "DateEvt": "2026-01-01T12:00:00Z",
            "IDEvt": 1,
            "Tech": "T-1",
            "Pool": "1",
            "Participants": {
                "Joueur": [
                    _player(1, "100.00", "15.00", "105.00", "5.00"),
                    _player(2, "100.00", "15.00", "85.00", "-15.00"),
                    _player(3, "5.00", "5.00", "15.00", "10.00"),
                ]
            },
            "Regle": "THNL",
            "Description": "Texas Hold'em No Limit (0.50-1)",
            "Jeu": {
                "Tour": [
                    tour("bet", [bet("small blind", 1, "0.50"), bet("big blind", 2, "1.00")], "1.50"),
                    tour(
                        "pre-flop",
                        [
                            *(draw(s, c) for s, c in ((1, 44), (1, 45), (2, 0), (2, 21), (3, 50), (3, 51))),
                            bet("allin", 3, "5.00"),
                            bet("call", 1, "4.50"),
                            bet("call", 2, "4.00"),
                        ],
                        "13.50",
                    ),
                    tour(
                        "flop",
                        [
                            draw(None, 29),
                            draw(None, 14),
                            draw(None, 36),
                            bet("bet", 1, "10.00"),
                            bet("call", 2, "10.00"),
                        ],
                        "20.00",
                    ),
                    tour("turn", [draw(None, 7), bet("bet", 1, "20.00"), fold(2)], "0.00"),
                    tour("river", [draw(None, 27)]),
                    tour("reveal", [reveal(1, 44), reveal(1, 45), reveal(3, 50), reveal(3, 51)]),
                ]
            },
        }
    }


def _pots(view) -> list[tuple[str, set[int]]]:
    return [(str(p.amount), {int(s) for s in p.players}) for p in view.pots]


def test_the_pots_and_side_pots_at_each_round_and_who_won_them():
    event = normalize(json.dumps(side_pot_hand()).encode())
    assert audit_hand(event) == []  # a legal hand, its finance right
    expected = [  # (pots, stacks, all in) at the end of each round, worked out by hand above
        ([("1.50", {1, 2, 3})], ("99.50", "99.00", "5.00"), set()),
        ([("15.00", {1, 2, 3})], ("95.00", "95.00", "0.00"), {3}),
        ([("15.00", {1, 2, 3}), ("20.00", {1, 2})], ("85.00", "85.00", "0.00"), {3}),
        ([("15.00", {1, 3}), ("20.00", {1})], ("85.00", "85.00", "0.00"), {3}),
        ([("15.00", {1, 3}), ("20.00", {1})], ("85.00", "85.00", "0.00"), {3}),
    ]
    for k, (pots, stacks, all_in) in enumerate(expected):
        view = hand_view(event, (), until_round=k)
        assert _pots(view) == pots, k
        assert tuple(str(view.seats[Decimal(s)].stack) for s in (1, 2, 3)) == stacks, k
        assert {int(s.seat) for s in view.seats.values() if s.all_in} == all_in, k
        assert view.awards is None and not view.whole, k  # no winner before the end
    whole = hand_view(event, ())
    assert _pots(whole) == [("15.00", {1, 3}), ("20.00", {1})]
    assert [(s.after, s.net) for s in whole.seats.values()] == [
        (Decimal("105.00"), Decimal("5.00")),
        (Decimal("85.00"), Decimal("-15.00")),
        (Decimal("15.00"), Decimal("10.00")),
    ]
    awards = [
        (
            a.pot,
            a.amount,
            {int(s) for s in a.players},
            a.half,
            a.contested,
            [(int(s), w, [str(n) for n in names]) for s, w, names in a.winners],
        )
        for a in whole.awards or []
    ]
    assert awards == [
        (0, Decimal(15), {1, 3}, None, True, [(3, Decimal(15), ["Pair of aces"])]),
        (1, Decimal(20), {1}, None, True, [(1, Decimal(20), ["Pair of kings"])]),
    ]
    # the hands as the engine's evaluators name them, in parts: a page puts them in its language
    assert whole.seats[Decimal(3)].hands == [HandName("pair", (14, 14, 11, 9, 8), False)]
    assert whole.seats[Decimal(1)].hands == [HandName("pair", (13, 13, 11, 9, 8), False)]
    assert whole.seats[Decimal(2)].hands == []  # folded


def test_a_folded_seat_is_marked_from_its_folds_round_on():
    event = normalize(json.dumps(side_pot_hand()).encode())
    names = [t.name for t in event.Jeu.Tour]
    for k in range(len(names)):
        view = hand_view(event, (), until_round=k)
        assert view.seats[Decimal(2)].folded == ("turn" if k >= names.index("turn") else None), k
        assert view.seats[Decimal(1)].folded is None and view.seats[Decimal(3)].folded is None
    small = normalize(json.dumps(small_hand()).encode())  # seat 1 folds on the flop
    assert [hand_view(small, (), until_round=k).seats[Decimal(1)].folded for k in range(6)] == [
        None,
        None,
        "flop",
        "flop",
        "flop",
        "flop",
    ]


def test_the_button_is_the_seat_before_the_small_blind():
    for event, button in ((side_pot_hand(), 3), (small_hand(), 3)):
        view = hand_view(normalize(json.dumps(event).encode()), (), until_round=0)
        assert view.has_button and view.button == button
        assert [int(s.seat) for s in view.seats.values() if s.button] == [button]
    # round the table: the small blind at seat 1 of seats 1, 4, 6 puts the button at seat 6
    hand = small_hand()
    for player, seat in zip(hand["POJEU"]["Participants"]["Joueur"], (1, 4, 6), strict=True):
        player["Siege"] = seat
    blinds = hand["POJEU"]["Jeu"]["Tour"][0]["Action"]
    blinds[1]["Bet"]["Siege"] = 4
    assert button_of(normalize(json.dumps(hand).encode())) == 6
    # heads-up, the small blind is the button (TDA 34B)
    heads_up = small_hand()
    heads_up["POJEU"]["Participants"]["Joueur"].pop()
    heads_up["POJEU"]["Jeu"]["Tour"][0]["Action"] = [
        bet("small blind", 2, "0.01"),
        bet("big blind", 1, "0.02"),
    ]
    assert button_of(normalize(json.dumps(heads_up).encode())) == 2


def test_stud_has_no_button():
    view = hand_view(normalize(json.dumps(fixture("7SHL")).encode()), ())
    assert not view.has_button and view.button is None
    assert not any(s.button for s in view.seats.values())


def _cards(text: str) -> list[int]:
    """ "Ah Kd …" as the annex's codes (rank * 4 + suit, suits c d h s)."""
    return ["23456789TJQKA".index(c[0]) * 4 + "cdhs".index(c[1]) for c in text.split()]


def test_a_hand_name_per_category():
    """Each category, written by hand from the rules, named from coffre's evaluators' values."""
    high = {
        "Ah Qd 9c 5s 2h": ("high card", (14, 12, 9, 5, 2), "Ace high (A-Q-9-5-2)"),
        "Jc Jd Ah 8s 3c": ("pair", (11, 11, 14, 8, 3), "Pair of jacks"),
        "Kc Kd 7h 7c 2d": ("two pair", (13, 13, 7, 7, 2), "Two pair, kings and sevens"),
        "9c 9d 9h As 4d": ("three of a kind", (9, 9, 9, 14, 4), "Three of a kind, nines"),
        "Ac 2d 3h 4s 5c": ("straight", (5, 4, 3, 2, 1), "Straight, five high"),
        "Ah Qh 9h 5h 2h": ("flush", (14, 12, 9, 5, 2), "Flush, ace high"),
        "Kc Kd Kh Tc Td": ("full house", (13, 13, 13, 10, 10), "Full house, kings over tens"),
        "9c 9d 9h 9s 4d": ("four of a kind", (9, 9, 9, 9, 4), "Four of a kind, nines"),
        "9h Th Jh Qh Kh": ("straight flush", (13, 12, 11, 10, 9), "Straight flush, king high"),
    }
    for cards, (category, ranks, words) in high.items():
        name = hand_name(HIGH, evaluate(HIGH, _cards(cards)))
        assert (name.category, name.ranks, name.low, str(name)) == (category, ranks, False, words), cards
    # Omaha: two of the hole cards and three of the board
    name = hand_name(OMAHA_HIGH, omaha_high(_cards("Ac Ad 2c 3c"), _cards("Ah Ks Qd")))
    assert (name.category, str(name)) == ("three of a kind", "Three of a kind, aces")
    # lows: eight or better (the ace low), razz (pairs count), 2-7 (the ace high)
    assert str(hand_name(LOW8, low8(_cards("8c 6d 4h 3s Ac Kd Kh")))) == "Eight low (8-6-4-3-A)"
    assert hand_name(LOW8, low8(_cards("8c 6d 4h 3s Ac"))).ranks == (8, 6, 4, 3, 1)
    assert hand_name(OMAHA_LOW8, None) == HandName("no low", (), True)
    assert str(hand_name(RAZZ, razz(_cards("Kc Kd 8h 6s 4c 4d Ah")))) == "King low (K-8-6-4-A)"
    assert str(hand_name(RAZZ, razz(_cards("Ac Ad 2c 2d 3h 3s 4c")))) == "Pair of aces"
    assert str(hand_name(DEUCE_SEVEN, deuce_seven(_cards("7c 5d 4h 3s 2c")))) == "Seven low (7-5-4-3-2)"
    assert hand_name(DEUCE_SEVEN, deuce_seven(_cards("Ac 5d 4h 3s 2c"))).ranks == (14, 5, 4, 3, 2)
    with pytest.raises(ValueError):
        hand_name("no such kind", 0)


def test_a_split_pot_names_the_high_and_the_low_hand():
    """O4JL's fixture: the pot of 2 halved, the high half to seat 6's flush, the low half to seat 4's
    eight low (the cards and the amounts are the fixture's, as tests/audit holds them)."""
    view = hand_view(normalize(json.dumps(fixture("O4JL")).encode()), ())
    assert view.split
    halves = [
        (a.half, [(int(s), w, [str(n) for n in names]) for s, w, names in a.winners])
        for a in view.awards or []
    ]
    assert halves == [
        ("high", [(6, Decimal(1), ["Flush, ace high"])]),
        ("low", [(4, Decimal(1), ["Eight low (8-6-3-2-A)"])]),
    ]
    assert [str(n) for n in view.seats[Decimal(4)].hands] == ["Pair of jacks", "Eight low (8-6-3-2-A)"]


def test_a_hand_the_engine_cannot_replay_has_no_awards():
    event = normalize(duplicated_card_hand())  # a card dealt twice: no replay
    view = hand_view(event, ())
    assert view.engine_failed and view.awards is None
