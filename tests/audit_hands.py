"""Inputs of the ``coffre audit`` tests, built from coffre's own demo events."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

import coffre.demo

DEMO = Path(coffre.demo.__file__).parent / "events"
ANNEX_POJEU = DEMO / "annex" / "1.4.3.f-POJEU.xml"
TOURNAMENT = DEMO / "tournament"


def duplicated_card_hand(player_of_seat_7: str | None = None) -> bytes:
    """The annex's POJEU with seat 3's hole card 33 (V de Cœur) replaced, dealt and revealed, by
    card 32 (10 de Trèfle), which seat 2 already holds: CARD_DEALT_TWICE in 'preflop', seat 3.
    ``player_of_seat_7``, when given, replaces that player's IDJoueur (escaping tests)."""
    root = etree.fromstring(ANNEX_POJEU.read_bytes())
    changed = 0
    for action in root.iter("Draw", "Reveal"):
        if action.findtext("Siege") == "3" and action.findtext("Valeur") == "33":
            action.find("Valeur").text = "32"
            changed += 1
    assert changed == 2, "the annex's POJEU no longer deals card 33 to seat 3"
    if player_of_seat_7 is not None:
        for player in root.iter("Joueur"):
            if player.findtext("Siege") == "7":
                player.find("IDJoueur").text = player_of_seat_7
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")
