"""A small hand written by hand (THNL, three seats, blinds 0.01/0.02, a rake of 0.03), and the
helpers the hand-audit tests share."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from coffre.domain.audit.findings import Finding
from coffre.domain.audit.hand import audit_hand
from coffre.domain.normalize import normalize

HANDS = Path(__file__).parent.parent / "fixtures" / "hands"
ANNEX = Path(__file__).parents[2] / "coffre" / "demo" / "events" / "annex" / "1.4.3.f-POJEU.xml"


def _player(
    seat: int, before: str, total: str, after: str, net: str, rake: str | None = None
) -> dict[str, Any]:
    finance = {"Net": net, "Total": total, "CaveAvant": before, "CaveApres": after}
    if rake:
        finance["Rake"] = rake
    return {
        "IDOper": "0099",
        "IDJoueur": f"j{seat}",
        "IPJoueur": f"2001:db8::{seat}",
        "Siege": seat,
        "Inscription": f"i{seat}",
        "Finance": finance,
    }


def bet(name: str, seat: int, value: str) -> dict[str, Any]:
    return {"Bet": {"name": name, "Siege": seat, "Valeur": value}}


def draw(seat: int | None, card: int) -> dict[str, Any]:
    if seat is None:
        return {"Draw": {"ouverte": True, "commune": True, "Valeur": card}}
    return {"Draw": {"Siege": seat, "Valeur": card}}


def check(seat: int) -> dict[str, Any]:
    return {"Check": {"Siege": seat}}


def fold(seat: int) -> dict[str, Any]:
    return {"Fold": {"Siege": seat}}


def reveal(seat: int, card: int) -> dict[str, Any]:
    return {"Reveal": {"Siege": seat, "Valeur": card}}


def tour(name: str, actions: list[dict[str, Any]], total: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "Timestamp": "260101120000", "Action": actions}
    if total is not None:
        out["Total"] = total
    return out


def small_hand() -> dict[str, Any]:
    """Seat 1 small blind, seat 2 big blind, seat 3 the button. Seat 3 (A♥ A♠) raises to 0.06, both
    call; on the flop (R♣ 9♦ 5♥) seat 3 bets 0.10, seat 1 folds, seat 2 calls; the turn (V♣) is
    checked; on the river (8♠) seat 2 bets 0.20, seat 3 calls; aces win the pot of 0.78, 0.03 raked."""
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
                    _player(1, "1.00", "0.06", "0.94", "-0.06"),
                    _player(2, "1.00", "0.36", "0.64", "-0.36"),
                    _player(3, "1.00", "0.36", "1.39", "0.39", "0.03"),
                ]
            },
            "Regle": "THNL",
            "Description": "Texas Hold'em No Limit (0.01-0.02)",
            "Jeu": {
                "Tour": [
                    tour("bet", [bet("small blind", 1, "0.01"), bet("big blind", 2, "0.02")], "0.03"),
                    tour(
                        "pre-flop",
                        [
                            draw(1, 4),
                            draw(1, 9),
                            draw(2, 0),
                            draw(2, 21),
                            draw(3, 50),
                            draw(3, 51),
                            bet("raise", 3, "0.06"),
                            bet("call", 1, "0.05"),
                            bet("call", 2, "0.04"),
                        ],
                        "0.15",
                    ),
                    tour(
                        "flop",
                        [
                            draw(None, 44),
                            draw(None, 29),
                            draw(None, 14),
                            check(1),
                            check(2),
                            bet("bet", 3, "0.10"),
                            fold(1),
                            bet("call", 2, "0.10"),
                        ],
                        "0.20",
                    ),
                    tour("turn", [draw(None, 36), check(2), check(3)]),
                    tour("river", [draw(None, 27), bet("bet", 2, "0.20"), bet("call", 3, "0.20")], "0.40"),
                    tour("reveal", [reveal(2, 0), reveal(2, 21), reveal(3, 50), reveal(3, 51)]),
                ]
            },
        }
    }


def audit(event: dict[str, Any]) -> list[Finding]:
    """``event`` through normalize() (as ingest reads it), then audited."""
    return audit_hand(normalize(json.dumps(event).encode()))


def codes(event: dict[str, Any]) -> list[str]:
    return [f.code for f in audit(event)]


def fixture(regle: str) -> dict[str, Any]:
    return json.loads((HANDS / f"{regle}.json").read_text(encoding="utf-8"))


def tours(event: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in event["POJEU"]["Jeu"]["Tour"]}


def finance(event: dict[str, Any], seat: int) -> dict[str, Any]:
    return next(j for j in event["POJEU"]["Participants"]["Joueur"] if j["Siege"] == seat)["Finance"]


def copied(event: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(event)


def swap_winner(event: dict[str, Any], pick: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> bool:
    """Give the biggest winner's Net, CaveApres and Rake to another player (``pick`` chooses among
    those with another Net) and his to the winner: a payoff the cards do not give. False when every
    player has the same Net (nothing to swap)."""
    players = event["POJEU"]["Participants"]["Joueur"]
    winner = max(players, key=lambda j: Decimal(j["Finance"]["Net"]))
    others = [j for j in players if j["Finance"]["Net"] != winner["Finance"]["Net"]]
    if not others:
        return False
    other = pick(others)
    for key in ("Net", "CaveApres", "Rake"):
        a, b = winner["Finance"].get(key), other["Finance"].get(key)
        for j, v in ((winner, b), (other, a)):
            if v is None:
                j["Finance"].pop(key, None)
            else:
                j["Finance"][key] = v
    return True
