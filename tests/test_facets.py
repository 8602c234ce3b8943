"""The facets the console's index keeps of an event (coffre/domain/facets.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from coffre.domain.facets import event_facets
from coffre.domain.normalize import normalize

sys.path.insert(0, str(Path(__file__).parent / "audit"))

from hands import small_hand


def _forced(event: dict) -> str | None:
    return event_facets(normalize(json.dumps(event).encode())).forced_bets


def test_the_blinds_read_as_a_level_whichever_the_hand_records_first():
    """issue 32: a heads-up hand recording the big blind first read "0.02/0.01" beside "0.01/0.02"."""
    hand = small_hand()
    assert _forced(hand) == "0.01/0.02"
    bets = hand["POJEU"]["Jeu"]["Tour"][0]["Action"]
    bets.reverse()  # the big blind recorded before the small one
    assert bets[0]["Bet"]["name"] == "big blind"
    assert _forced(hand) == "0.01/0.02"


DEMO = Path(__file__).parents[1] / "coffre" / "demo" / "events"


def _facets(name: str):
    return event_facets(normalize((DEMO / name).read_bytes()))


def test_a_player_events_address_session_and_place():
    """issue 32: the player page lists the IPs and sessions a player used; the Tech page the places."""
    (chloe,) = _facets("tournament/16-POBILAN-chloe.xml").parties
    assert (chloe.player, chloe.ip, chloe.session, chloe.place) == (
        "chloe",
        "203.0.113.45",
        "sess-chloe-0301",
        3,
    )
    (maya,) = _facets("cash/02-POINSCRIT-maya.xml").parties
    assert (maya.ip, maya.session, maya.place) == ("2001:db8:9::9", "sess-maya-0303", None)


def test_a_hands_game_and_each_participants_address():
    """issue 32: a table may change game between hands (T-77 every two hands): the hand says its Regle."""
    hand = _facets("cash/03-POJEU-hand-1-falsified.json")
    assert hand.game == "THNL"
    assert [(p.player, p.ip, p.session) for p in hand.parties] == [
        ("lucas", "198.51.100.91", None),
        ("maya", "2001:db8:9::9", None),
    ]
    assert _facets("cash/02-POINSCRIT-maya.xml").game is None
