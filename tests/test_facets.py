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
