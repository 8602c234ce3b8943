"""The table a hand is played at (coffre/domain/audit/table.py): seats per variant, one participant a
seat and one seat a player, rounds in time, actions in the rounds that carry them. Every hand here is
written by hand from the texts (decree 2016-1326 art. 2; annex 1.3.6.c.2, 1.3.6.d.1, 1.3.6.d.5)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from coffre.domain.audit.play import MAX_PLAYERS, play_hand
from coffre.domain.audit.table import MAX_SEATS
from coffre.domain.catalogue.poker import VARIANTS

from hands import _player, audit, bet, check, codes, draw, fixture, fold, reveal, small_hand, tours

# --------------------------------------------------------------------------- hands written for the table

HOLE = {"THL": 2, "THPL": 2, "THNL": 2, "O4HPL": 4, "O4JL": 4, "O4JPL": 4, "O5HPL": 5, "2T7TD": 5}


def _event(regle: str, players: list[dict[str, Any]], rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "POJEU": {
            "IDOper": "0099",
            "IDCoffre": 1,
            "DateEvt": "2026-01-01T12:05:00Z",
            "IDEvt": 1,
            "Tech": "T-1",
            "Pool": "1",
            "Participants": {"Joueur": players},
            "Regle": regle,
            "Description": f"{VARIANTS[regle].name} (0.01-0.02)",
            "Jeu": {"Tour": rounds},
        }
    }


def _stamped(
    name: str, second: int, actions: list[dict[str, Any]], total: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "Timestamp": f"2601011200{second:02d}", "Action": actions}
    if total is not None:
        out["Total"] = total
    return out


def folded_to_the_big_blind(regle: str, n: int) -> dict[str, Any]:
    """Hold'em, Omaha or triple draw at ``n`` seats (1 … n): seat 1 posts the small blind 0.01, seat 2
    the big blind 0.02, each seat is dealt its hole cards (cards 0, 1, 2, … in seat order), seats 3 …
    n fold and so does seat 1. The big blind wins the small blind; its own 0.01 beyond it comes back
    uncalled. Decree art. 3 (blinds), annex 1.3.6.d.5 (rounds)."""
    hole = HOLE[regle]
    cards = iter(range(52))
    players = [_player(1, "1.00", "0.01", "0.99", "-0.01"), _player(2, "1.00", "0.01", "1.01", "0.01")]
    players += [_player(s, "1.00", "0", "1.00", "0") for s in range(3, n + 1)]
    dealt = [draw(s, next(cards)) for s in range(1, n + 1) for _ in range(hole)]
    first = VARIANTS[regle].rounds[1]
    return _event(
        regle,
        players,
        [
            _stamped("bet", 0, [bet("small blind", 1, "0.01"), bet("big blind", 2, "0.02")], "0.02"),
            _stamped(first, 1, [*dealt, *(fold(s) for s in range(3, n + 1)), fold(1)]),
        ],
    )


def folded_to_the_bring_in(regle: str, n: int) -> dict[str, Any]:
    """Seven-card stud at ``n`` seats: each posts an ante of 0.01; each is dealt two cards face down and
    one face up (seat k's up card is of rank k + 1, clubs, ranks 2 to 9: seat 1's is the lowest, and
    at razz, where the highest card brings in, seat 1's is the highest); seat 1 brings in for 0.02 and
    everyone else folds. Seat 1 wins the antes; its bring-in comes back uncalled. Decree art. 7 III."""
    ups = [4 * (k - 1) for k in range(1, n + 1)]  # 2♣, 3♣, 4♣, …
    if regle == "7SLL":
        ups.reverse()
    downs = iter(c for c in range(52) if c not in ups)
    antes = [bet("ante", s, "0.01") for s in range(1, n + 1)]
    dealt: list[dict[str, Any]] = []
    for s in range(1, n + 1):
        dealt += [
            draw(s, next(downs)),
            draw(s, next(downs)),
            {"Draw": {"ouverte": True, "Siege": s, "Valeur": ups[s - 1]}},
        ]
    won = f"{(n - 1) / 100:.2f}"
    players = [_player(1, "1.00", "0.01", f"{1 + (n - 1) / 100:.2f}", won)]
    players += [_player(s, "1.00", "0.01", "0.99", "-0.01") for s in range(2, n + 1)]
    return _event(
        regle,
        players,
        [
            _stamped("bet", 0, antes, f"{n / 100:.2f}"),
            _stamped(
                "bring-in", 1, [*dealt, bet("bring-in", 1, "0.02"), *(fold(s) for s in range(2, n + 1))], "0"
            ),
        ],
    )


def seated(regle: str, n: int) -> dict[str, Any]:
    if regle.startswith("7S"):
        return folded_to_the_bring_in(regle, n)
    return folded_to_the_big_blind(regle, n)


def _joueur(event: dict[str, Any], seat: int) -> dict[str, Any]:
    return next(j for j in event["POJEU"]["Participants"]["Joueur"] if j["Siege"] == seat)


def too_many_seats() -> dict[str, Any]:
    """Eleven players at a Texas Hold'em No Limit table: decree art. 2 allows ten."""
    return folded_to_the_big_blind("THNL", 11)


def seat_shared() -> dict[str, Any]:
    """The small hand with a fourth participant, j4, also at seat 3 (annex 1.3.6.d.1)."""
    event = small_hand()
    event["POJEU"]["Participants"]["Joueur"].append(
        {**_player(3, "1.00", "0", "1.00", "0"), "IDJoueur": "j4", "Inscription": "i4"}
    )
    return event


def seat_not_integer() -> dict[str, Any]:
    """The small hand with seat 3's participant at Siege 3.5: its actions still name seat 3, the only
    kind of number an action's Siege can be (annex 1.3.6.d.2, xs:nonNegativeInteger)."""
    event = small_hand()
    _joueur(event, 3)["Siege"] = "3.5"
    return event


def player_on_two_seats() -> dict[str, Any]:
    """The small hand with seat 3 played by j1, who already sits at seat 1 (decree art. 2)."""
    event = small_hand()
    _joueur(event, 3)["IDJoueur"] = "j1"
    return event


def timestamp_out_of_order() -> dict[str, Any]:
    """The small hand with the turn stamped five seconds before the flop (annex 1.3.6.c.2)."""
    event = small_hand()
    tours(event)["flop"]["Timestamp"] = "260101115910"
    tours(event)["turn"]["Timestamp"] = "260101115905"
    tours(event)["river"]["Timestamp"] = "260101115930"
    tours(event)["reveal"]["Timestamp"] = "260101115940"
    for name in ("bet", "pre-flop"):
        tours(event)[name]["Timestamp"] = "260101115900"
    return event


def action_not_in_round() -> dict[str, Any]:
    """The small hand where seat 1, out of the hand, discards one of its hole cards on the turn: there
    is no discard at hold'em (annex 1.3.6.d.5; decree art. 7 I)."""
    event = small_hand()
    tours(event)["turn"]["Action"].append({"Discard": {"Siege": 1, "Valeur": 4}})
    return event


def card_face_wrong() -> dict[str, Any]:
    """The small hand with the flop's first card dealt face down (decree art. 7 I: "cinq cartes
    communes ouvertes")."""
    event = small_hand()
    tours(event)["flop"]["Action"][0]["Draw"]["ouverte"] = False
    return event


TABLE_TRIGGERS: dict[str, Callable[[], dict[str, Any]]] = {
    "TOO_MANY_SEATS": too_many_seats,
    "SEAT_SHARED": seat_shared,
    "SEAT_NOT_INTEGER": seat_not_integer,
    "PLAYER_ON_TWO_SEATS": player_on_two_seats,
    "TIMESTAMP_OUT_OF_ORDER": timestamp_out_of_order,
    "ACTION_NOT_IN_ROUND": action_not_in_round,
    "CARD_FACE_WRONG": card_face_wrong,
}
"""One known-answer hand per code of the table (also in test_hand_known_answers.py's registry)."""


# --------------------------------------------------------------------------- seats per variant


def test_every_regle_has_its_limit():
    """Decree art. 2, per the four types of art. 7: every code of annex 1.3.6.d.5 is mapped."""
    assert set(MAX_SEATS) == set(VARIANTS)
    assert {MAX_SEATS[r] for r in ("THL", "THPL", "THNL")} == {10}
    assert {MAX_SEATS[r] for r in ("O4HPL", "O4JL", "O4JPL", "O5HPL")} == {9}
    assert {MAX_SEATS[r] for r in ("7SHL", "7SJL", "7SLL")} == {7}
    assert MAX_SEATS["2T7TD"] == 6


@pytest.mark.parametrize("regle", sorted(VARIANTS))
def test_a_full_table_is_legal_and_one_more_seat_is_not(regle):
    """Decree art. 2: at the limit the hand audits clean; with one more participant, TOO_MANY_SEATS
    and nothing else."""
    limit = MAX_SEATS[regle]
    assert audit(seated(regle, limit)) == []
    found = audit(seated(regle, limit + 1))
    assert [f.code for f in found] == ["TOO_MANY_SEATS"], [f.as_dict() for f in found]
    assert f"allows {limit}" in found[0].message


def test_coffres_generator_deals_no_more_than_the_decree():
    """coffre's own hands (play.py) stop at the decree's limit: Omaha was dealt to ten."""
    assert MAX_PLAYERS["O4HPL"] == 9
    stacks = {s: "2.00" for s in range(1, 11)}
    with pytest.raises(ValueError, match="2 to 9 players"):
        play_hand("O4HPL", stacks, random.Random(1))
    del stacks[10]
    assert audit(play_hand("O5HPL", stacks, random.Random(1)).event) == []


# --------------------------------------------------------------------------- one participant a seat


def test_two_participants_on_one_seat_are_a_finding_not_a_crash():
    """Annex 1.3.6.d.1: seat 3 given to a fourth player (main: PLAYER_TOTAL_WRONG, NOT_ZERO_SUM…), and
    seat 3's player moved to seat 2 (main: REPLAY_FAILED, a KeyError): SEAT_SHARED alone."""
    found = audit(seat_shared())
    assert [(f.code, f.seat, f.player) for f in found] == [("SEAT_SHARED", 3, "j4")]
    event = small_hand()
    _joueur(event, 3)["Siege"] = 2
    assert codes(event) == ["SEAT_SHARED"]
    event = small_hand()
    event["POJEU"]["Participants"]["Joueur"].append(_joueur(event, 3))  # one participant written twice
    assert codes(event) == ["SEAT_SHARED"]


def test_a_seat_that_is_not_a_whole_number():
    """The participant's Siege is a decimal (annex, schema), an action's an integer: 3.5 is no seat an
    action can name (main: the audit read it as 3 and found nothing); 3.0 is seat 3."""
    assert codes(seat_not_integer()) == ["SEAT_NOT_INTEGER"]
    event = small_hand()
    _joueur(event, 3)["Siege"] = "3.0"
    assert codes(event) == []


# --------------------------------------------------------------------------- one seat a player


def test_one_player_or_one_inscription_on_two_seats():
    """Decree art. 2 "Chaque joueur ne dispose que d'une seule « main »": j1 at seats 1 and 3; then
    seat 3's Inscription that of seat 1."""
    found = audit(player_on_two_seats())
    assert [(f.code, f.seat, f.player) for f in found] == [("PLAYER_ON_TWO_SEATS", 3, "j1")]
    event = small_hand()
    _joueur(event, 3)["Inscription"] = "i1"
    assert codes(event) == ["PLAYER_ON_TWO_SEATS"]


def test_two_operators_may_use_one_player_id():
    """Annex 1.3.6.d.1: a foreign operator's player is known by Oper and Pays with IDJoueur; j1 of
    another operator is another player."""
    event = small_hand()
    seat3 = _joueur(event, 3)
    del seat3["IDOper"]
    seat3.update(Oper="Hyper Poker (IT)", Pays="IT", IDJoueur="j1", Inscription="i1")
    assert codes(event) == []
    _joueur(event, 1)["IDOper"] = "0100"
    _joueur(event, 2)["IDOper"] = "0100"
    seat3.pop("Oper"), seat3.pop("Pays")
    seat3["IDOper"] = "0099"
    assert codes(event) == []  # j1 of 0100 and j1 of 0099


# --------------------------------------------------------------------------- time


def test_rounds_run_forward_and_before_the_event():
    """Annex 1.3.6.c.2 (Timestamp: the start of the round; DateEvt: the event's date): the turn
    stamped before the flop; a reveal after DateEvt."""
    found = audit(timestamp_out_of_order())
    assert [(f.code, f.round) for f in found] == [("TIMESTAMP_OUT_OF_ORDER", "turn")]
    event = small_hand()
    tours(event)["reveal"]["Timestamp"] = "260101120001"
    found = audit(event)
    assert [(f.code, f.round) for f in found] == [("TIMESTAMP_OUT_OF_ORDER", "reveal")]
    assert "DateEvt 260101120000" in found[0].message


def test_equal_stamps_and_a_later_event_are_fine():
    """The regulator's sample stamps every round and the event alike; the annex's example (1.4.3.f)
    dates its rounds a year before its DateEvt (test_hand_known_answers.py audits both clean). A
    DateEvt with a zone is compared in UTC."""
    event = small_hand()
    event["POJEU"]["DateEvt"] = "2026-01-01T13:00:00+01:00"
    assert codes(event) == []
    event["POJEU"]["DateEvt"] = "2026-01-01T12:59:59+01:00"
    assert set(codes(event)) == {"TIMESTAMP_OUT_OF_ORDER"}


# --------------------------------------------------------------------------- actions per round


def _with(round_name: str, action: dict[str, Any], at: int | None = None) -> dict[str, Any]:
    event = small_hand()
    actions = tours(event)[round_name]["Action"]
    actions.insert(len(actions) if at is None else at, action)
    return event


@pytest.mark.parametrize(
    ("round_name", "action", "main"),
    [
        ("turn", {"Discard": {"Siege": 1, "Valeur": 4}}, "nothing"),
        ("flop", {"Discard": {"Siege": 3, "Valeur": 50}}, "REVEAL_NOT_HELD"),
        ("bet", fold(3), "CARD_COUNT_WRONG"),
        ("bet", check(3), "FORCED_BETS_WRONG"),
        ("bet", draw(3, 40), "CARD_COUNT_WRONG"),
        ("reveal", check(3), "OUT_OF_TURN"),
        ("reveal", fold(1), "ACTION_AFTER_FOLD"),
        ("reveal", bet("bet", 2, "0.10"), "ACTION_AFTER_FOLD"),
        ("reveal", draw(None, 40), "CARD_COUNT_WRONG"),
    ],
)
def test_an_action_its_round_does_not_carry(round_name, action, main):
    """Annex 1.3.6.d.5: Bets only in ``bet``, Reveals only in ``reveal``, a Discard only in a draw. On
    main each gave ``main`` (or nothing); now ACTION_NOT_IN_ROUND, once, and nothing else."""
    found = audit(_with(round_name, action))
    assert [(f.code, f.round) for f in found] == [("ACTION_NOT_IN_ROUND", round_name)], [
        f.as_dict() for f in found
    ]


def test_a_discard_is_a_triple_draws_in_its_draws_only():
    """2T7TD: a Discard in 'pre-draw' is out of place (its column says "non"); the fixture's discards in
    the draws are not."""
    event = fixture("2T7TD")
    assert codes(event) == []
    pre = tours(event)["pre-draw"]["Action"]
    seat = next(a["Draw"]["Siege"] for a in pre if "Draw" in a)
    card = next(a["Draw"]["Valeur"] for a in pre if "Draw" in a)
    pre.append({"Discard": {"Siege": seat, "Valeur": card}})
    assert codes(event) == ["ACTION_NOT_IN_ROUND"]


def test_a_reveal_in_a_betting_round_is_allowed():
    """Annex 1.3.6.d.5 says "oui" to Reveal in every betting round: seat 3 shows an ace on the river."""
    event = _with("river", reveal(3, 50))
    assert "ACTION_NOT_IN_ROUND" not in codes(event)


@pytest.mark.parametrize("code", sorted(TABLE_TRIGGERS))
def test_each_table_hand_gives_exactly_its_code(code):
    found = audit(TABLE_TRIGGERS[code]())
    assert {f.code for f in found} == {code}, [f.as_dict() for f in found]


# --------------------------------------------------------------------------- face up, face down


def test_the_board_is_face_up_and_the_hole_cards_face_down():
    """Decree art. 1 IV and art. 7 I: a flop card not ouverte; then a hole card dealt ouverte. One
    finding per round and direction, however many cards."""
    found = audit(card_face_wrong())
    assert [(f.code, f.round) for f in found] == [("CARD_FACE_WRONG", "flop")]
    event = small_hand()
    for a in tours(event)["flop"]["Action"][:3]:
        a["Draw"].pop("ouverte")  # the attribute's default is false
    assert [f.round for f in audit(event)] == ["flop"]
    event = small_hand()
    tours(event)["pre-flop"]["Action"][4]["Draw"]["ouverte"] = True
    found = audit(event)
    assert [(f.code, f.round, f.seat) for f in found] == [("CARD_FACE_WRONG", "pre-flop", 3)]


@pytest.mark.parametrize("regle", ["O4HPL", "2T7TD"])
def test_omaha_and_triple_draw_hole_cards_are_face_down(regle):
    """Decree art. 7 II ("cartes privées fermées") and IV ("cinq cartes privées fermées")."""
    event = fixture(regle)
    assert codes(event) == []
    first = VARIANTS[regle].rounds[1]
    next(a for a in tours(event)[first]["Action"] if "Draw" in a)["Draw"]["ouverte"] = True
    assert codes(event) == ["CARD_FACE_WRONG"]


@pytest.mark.parametrize("kind", ["Draw", "Reveal"])
def test_a_card_of_a_seat_not_at_the_table_is_seat_unknown_not_a_failed_audit(kind):
    """Annex 1.3.6.d.2: a Draw or Reveal names the seat that holds the card. One naming a seat no
    participant sits on is SEAT_UNKNOWN; on de91a12 the card pass then failed with a KeyError
    (REPLAY_FAILED), found by mutating real hands at random."""
    event = small_hand()
    where = "pre-flop" if kind == "Draw" else "reveal"
    action = next(a for a in tours(event)[where]["Action"] if kind in a)
    action[kind]["Siege"] = 7
    found = audit(event)
    assert "REPLAY_FAILED" not in {f.code for f in found}, [f.as_dict() for f in found]
    assert "SEAT_UNKNOWN" in {f.code for f in found}
