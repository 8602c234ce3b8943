"""Known answers of the hand audit: consistent hands give no finding (the annex's long example,
coffre's own hand of every variant); for every finding code of the hand audit, a hand that triggers
exactly that code (and a test that fails when a code has no such hand)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import test_hand_rules as rules
from test_hand_table import TABLE_TRIGGERS

from coffre.domain.audit import hand as hand_module
from coffre.domain.audit.findings import CODES
from coffre.domain.audit.play import play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.normalize import normalize

from conftest import reference_or_skip
from hands import ANNEX, audit, bet, check, codes, draw, finance, fixture, small_hand, tours


def test_the_annex_long_example_is_consistent():
    """1.4.3.f: consistent once the uncalled 0.85 of the river returns to seat 3 and each half of the
    split pot is raked 0.12."""
    assert hand_module.audit_hand(normalize(ANNEX.read_bytes())) == []


@pytest.mark.reference
def test_the_regulators_pojeu_sample_is_consistent():
    sample = reference_or_skip() / "samples" / "PO" / "POJEU.xml"
    assert hand_module.audit_hand(normalize(sample.read_bytes())) == []


@pytest.mark.parametrize("regle", ["THL", "O4JL"])
def test_a_blind_posted_all_in_for_less_takes_the_stakes_from_the_description(regle):
    """The big blind has 45 of a 60 blind: the hand says 45; the table's blinds (30-60), and with
    them the fixed-limit bet, come from the Description. Without them, a raise to 90 + 60 looks
    too big for a 45 "big blind"."""
    for seed in range(200):
        played = play_hand(regle, {1: 1000, 2: 45, 3: 1000}, random.Random(seed), blinds=(30, 60), button=3)
        pojeu = played.event["POJEU"]
        posted = [a["Bet"] for a in pojeu["Jeu"]["Tour"][0]["Action"] if a["Bet"]["name"] == "big blind"]
        raised = any(
            "Bet" in a and a["Bet"]["name"] in ("raise", "allin") and a["Bet"]["Siege"] != 2
            for t in pojeu["Jeu"]["Tour"][1:2]
            for a in t["Action"]
        )
        if posted[0]["Valeur"] == "45" and raised:
            break
    else:
        pytest.fail("no hand with a raise over the short big blind in 200 seeds")
    assert pojeu["Description"].endswith("(30-60)")
    assert audit(played.event) == []
    pojeu["Description"] = pojeu["Description"].replace(" (30-60)", "")
    assert "BET_ILLEGAL" in codes(played.event)


@pytest.mark.parametrize("regle", sorted(ENGINE_VARIANTS))
def test_coffres_own_hand_of_each_variant_is_consistent(regle):
    event = fixture(regle)
    assert event["POJEU"]["Regle"] == regle
    assert "reveal" in tours(event)  # each fixture goes to a showdown
    assert audit(event) == []


def test_the_small_hand_is_consistent():
    assert audit(small_hand()) == []


# --------------------------------------------------------------------------- one hand per code

Mutation = Callable[[], dict[str, Any]]


def _small(change: Callable[[dict[str, Any]], None]) -> Mutation:
    def make() -> dict[str, Any]:
        event = small_hand()
        change(event)
        return event

    return make


def _set(event: dict[str, Any], seat: int, **values: str) -> None:
    finance(event, seat).update(values)


def _actions(event: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return tours(event)[name]["Action"]


def _dealt_twice(e):
    _actions(e, "river")[0] = draw(None, 44)  # the river repeats the flop's first card


def _count(e):
    del _actions(e, "flop")[2]  # a flop of two cards


def _reveal_not_held(e):
    _actions(e, "reveal")[0]["Reveal"]["Valeur"] = 40  # never dealt


def _discard_not_held() -> dict[str, Any]:
    event = fixture("2T7TD")
    used = {a["Draw"]["Valeur"] for t in event["POJEU"]["Jeu"]["Tour"] for a in t["Action"] if "Draw" in a}
    for t in event["POJEU"]["Jeu"]["Tour"]:
        for a in t["Action"]:
            if "Discard" in a:
                a["Discard"]["Valeur"] = min(set(range(52)) - used)
                return event
    raise AssertionError("the 2T7TD fixture has no discard")


def _round_unknown(e):
    tours(e)["reveal"]["name"] = "montrer"


def _round_order(e):
    t = e["POJEU"]["Jeu"]["Tour"]
    t[3], t[4] = t[4], t[3]  # the river before the turn


def _seat_unknown(e):
    _actions(e, "turn")[1] = check(9)


def _forced(e):
    _actions(e, "bet")[1]["Bet"]["name"] = "small blind"  # two small blinds


def _out_of_turn(e):
    a = _actions(e, "turn")
    a[1], a[2] = a[2], a[1]  # the button checks first on the turn


def _after_fold(e):
    _actions(e, "turn").append(check(1))


def _bet_illegal(e):
    # on the flop, a bet of 0.01 (below the big blind, the no-limit minimum) called: the money adds up
    a = _actions(e, "flop")
    a[5]["Bet"]["Valeur"] = a[7]["Bet"]["Valeur"] = "0.01"
    tours(e)["flop"]["Total"] = "0.02"
    _set(e, 2, Total="0.27", CaveApres="0.73", Net="-0.27")
    _set(e, 3, Total="0.27", CaveApres="1.30", Net="0.30")


def _name(e):
    _actions(e, "river")[2]["Bet"]["name"] = "raise"  # it calls


def _check_facing(e):
    _actions(e, "flop")[6] = check(1)  # seat 1 checks facing seat 3's bet


def _incomplete(e):
    del _actions(e, "turn")[2]  # seat 3 never acts on the turn


def _replay_failed(e):
    # a fourth player with an empty stack: pokerkit refuses to seat them
    players = e["POJEU"]["Participants"]["Joueur"]
    players.append(
        {
            **players[0],
            "IDJoueur": "j4",
            "Inscription": "i4",
            "Siege": 4,
            "Finance": {"Net": "0", "Total": "0", "CaveAvant": "0", "CaveApres": "0"},
        }
    )
    _actions(e, "pre-flop")[6:6] = [draw(4, 7), draw(4, 12)]


def _round_total(e):
    tours(e)["flop"]["Total"] = "0.21"


def _player_total(e):
    _set(e, 1, Total="0.07")


def _net(e):
    _set(e, 1, Net="-0.05")
    _set(e, 2, Net="-0.37")  # the sum still balances


def _zero_sum(e):
    _set(e, 3, Rake="0.04")


def _exceeds(e):
    _set(e, 1, CaveAvant="0.05", CaveApres="0.00", Net="-0.05")
    _set(e, 3, Rake="0.02")  # the sum still balances


def _negative(e):
    _set(e, 1, CaveApres="0.93", Net="-0.07")  # seat 1 loses 0.07 having bet 0.06…
    _set(e, 3, CaveApres="1.40", Net="0.40")  # …which seat 3 wins: the sum still balances


def _payoff(e):
    # seats 2 and 3 swap their hole cards (and what they show): the aces are now seat 2's
    for name in ("pre-flop", "reveal"):
        for a in _actions(e, name):
            card = a.get("Draw") or a.get("Reveal")
            if card and card.get("Siege") in (2, 3):
                card["Siege"] = 5 - card["Siege"]
    _actions(e, "reveal").sort(key=lambda a: a["Reveal"]["Siege"])  # seat 2, the river's bettor, first


def _showdown_order(e):
    a = _actions(e, "reveal")
    a[:] = a[2:] + a[:2]  # seat 3, who called the river, shows before seat 2, who bet it


def _reveal_incomplete(e):
    del _actions(e, "reveal")[0]


TRIGGERS: dict[str, Mutation] = {
    "CARD_DEALT_TWICE": _small(_dealt_twice),
    "CARD_COUNT_WRONG": _small(_count),
    "REVEAL_NOT_HELD": _small(_reveal_not_held),
    "DISCARD_NOT_HELD": _discard_not_held,
    "ROUND_UNKNOWN": _small(_round_unknown),
    "ROUND_OUT_OF_ORDER": _small(_round_order),
    "SEAT_UNKNOWN": _small(_seat_unknown),
    "FORCED_BETS_WRONG": _small(_forced),
    "OUT_OF_TURN": _small(_out_of_turn),
    "ACTION_AFTER_FOLD": _small(_after_fold),
    "BET_ILLEGAL": _small(_bet_illegal),
    "BET_NAME_MISMATCH": _small(_name),
    "CHECK_FACING_BET": _small(_check_facing),
    "ROUND_INCOMPLETE": _small(_incomplete),
    "REPLAY_FAILED": _small(_replay_failed),
    "ROUND_TOTAL_WRONG": _small(_round_total),
    "PLAYER_TOTAL_WRONG": _small(_player_total),
    "NET_WRONG": _small(_net),
    "NOT_ZERO_SUM": _small(_zero_sum),
    "BET_EXCEEDS_STACK": _small(_exceeds),
    "WINNINGS_NEGATIVE": _small(_negative),
    "PAYOFF_WRONG": _small(_payoff),
    "REVEAL_INCOMPLETE": _small(_reveal_incomplete),
    # the rules of poker, hands written by hand in test_hand_rules.py
    "BETTING_NOT_REOPENED": lambda: rules._short_all_in(bet("raise", 3, "30")),
    "ANTE_MISSING": lambda: rules._stud_tie(3, 2, antes=(2, 3)),
    "ALLIN_NOT_SHOWN": rules.all_in_not_shown,
    "SHOWDOWN_ORDER_WRONG": _small(_showdown_order),
    "ODD_CHIP_WRONG": lambda: rules._split("1.00", "1.01"),
}
TRIGGERS.update(TABLE_TRIGGERS)  # the table's codes (test_hand_table.py)

HAND_FAMILIES = ("cards", "order", "money", "showdown")


def test_every_code_of_the_hand_audit_has_a_hand_that_triggers_it():
    hand_codes = {code for code, (family, _) in CODES.items() if family in HAND_FAMILIES}
    assert hand_codes == set(TRIGGERS)


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_a_hand_triggers_exactly_its_code(code):
    event = TRIGGERS[code]()
    found = audit(event)
    assert {f.code for f in found} == {code}, [f.as_dict() for f in found]
    assert all(f.message for f in found)


def test_findings_name_the_round_and_seat():
    (finding,) = audit(_small(_check_facing)())
    assert (finding.round, finding.seat) == ("flop", 1)
    assert "0.1" in finding.message


def test_the_annex_spellings_of_rounds_are_accepted():
    event = small_hand()
    tours(event)["bet"]["name"] = "Blinds"
    tours(event)["pre-flop"]["name"] = "PreFlop"
    assert codes(event) == []


def test_an_uncalled_excess_is_returned_in_the_totals():
    """As the annex's river (0.56 + 2.78 + 1.37 − 0.85): seat 2 (0.70 in all) bets 0.20 on the river,
    seat 3 raises by 0.60, seat 2 calls all in with its last 0.34; seat 3's 0.06 excess comes back."""
    event = small_hand()
    river = tours(event)["river"]
    river["Action"][2] = bet("raise", 3, "0.60")
    river["Action"].append(bet("allin", 2, "0.34"))
    river["Total"] = "1.08"
    _set(event, 2, CaveAvant="0.70", Total="0.70", CaveApres="0.00", Net="-0.70")
    _set(event, 3, Total="0.70", CaveApres="1.73", Net="0.73", Rake="0.03")
    assert codes(event) == []
    river["Total"] = "1.14"  # nothing returned
    assert codes(event) == ["ROUND_TOTAL_WRONG"]
