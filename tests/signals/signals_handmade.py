"""Histories written by hand for the signals' known answers: each hand's cards and actions chosen
here, with the amounts of a legal no-limit hold'em hand (blinds 0.05/0.10), and player events of
one's choosing. Cards are written as text (``As``, ``7h``) and turned into the annex's codes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from coffre.domain.catalogue.base import Event
from coffre.domain.normalize import normalize

RANKS = "23456789TJQKA"
SUITS = "cdhs"
T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def card(text: str) -> int:
    return RANKS.index(text[0]) * 4 + SUITS.index(text[1])


def cards(text: str) -> list[int]:
    return [card(c) for c in text.split()]


def stamp(when: datetime) -> str:
    return when.strftime("%y%m%d%H%M%S")


class Hand:
    """One THNL hand: ``seats`` seat -> (IDJoueur, IPJoueur); the actions added round by round;
    the finance from what each put in and who won what (:meth:`event`)."""

    def __init__(self, seats: dict[int, tuple[str, str]], holes: dict[int, str], board: str = "") -> None:
        self.seats = seats
        self.holes = {s: cards(h) for s, h in holes.items()}
        self.board = cards(board)
        self.rounds: list[tuple[str, list[dict[str, Any]]]] = []
        self.put: dict[int, Decimal] = dict.fromkeys(seats, Decimal(0))
        self.durations: list[int] = []

    def round(self, name: str, *actions: tuple[Any, ...], seconds: int = 10) -> Hand:
        written: list[dict[str, Any]] = []
        if name == "pre-flop":
            for seat, hole in self.holes.items():
                written += [{"Draw": {"Siege": seat, "Valeur": c}} for c in hole]
        board = {"flop": self.board[:3], "turn": self.board[3:4], "river": self.board[4:5]}.get(name, [])
        written += [{"Draw": {"ouverte": True, "commune": True, "Valeur": c}} for c in board]
        for action in actions:
            kind, seat, *amount = action
            if kind in ("check", "fold"):
                written.append({kind.capitalize(): {"Siege": seat}})
            else:
                value = Decimal(amount[0])
                self.put[seat] += value
                written.append({"Bet": {"name": kind, "Siege": seat, "Valeur": str(value)}})
        self.rounds.append((name, written))
        self.durations.append(seconds)
        return self

    def event(
        self, id_evt: int, when: datetime, tech: str, winner: int, stack: str = "10.00"
    ) -> dict[str, Any]:
        """The POJEU, ``winner`` taking the others' chips (an uncalled excess of its own comes back;
        the rounds' Totals are left as written: the signals do not read them)."""
        pot = sum(self.put.values())
        tours = []
        at = when
        for (name, actions), seconds in zip(self.rounds, self.durations, strict=True):
            tour: dict[str, Any] = {"name": name, "Timestamp": stamp(at), "Action": actions}
            total = sum((Decimal(a["Bet"]["Valeur"]) for a in actions if "Bet" in a), Decimal(0))
            if total:
                tour["Total"] = str(total)
            tours.append(tour)
            at += timedelta(seconds=seconds)
        others = pot - self.put[winner]
        joueurs = []
        for seat, (player, ip) in sorted(self.seats.items()):
            net = others if seat == winner else -self.put[seat]
            total = min(self.put[seat], max(p for s, p in self.put.items() if s != seat))
            before = Decimal(stack)
            joueurs.append(
                {
                    "IDOper": "0099",
                    "IDJoueur": player,
                    "IPJoueur": ip,
                    "Siege": seat,
                    "Inscription": f"{tech}-{player}",
                    "Finance": {
                        "Net": str(net),
                        "Total": str(total),
                        "CaveAvant": str(before),
                        "CaveApres": str(before + net),
                    },
                }
            )
        return {
            "POJEU": {
                "IDOper": "0099",
                "IDCoffre": 1,
                "DateEvt": (at - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "IDEvt": id_evt,
                "Tech": tech,
                "Pool": "1",
                "Participants": {"Joueur": joueurs},
                "Regle": "THNL",
                "Description": "Texas Hold'em No Limit (0.05-0.10)",
                "Jeu": {"Tour": tours},
            }
        }


def account(
    id_evt: int,
    when: datetime,
    player: str,
    hashed: str,
    session: str,
    ip: str = "198.51.100.1",
    oper: str = "0099",
) -> dict[str, Any]:
    """A deposit (CPTEALIM): the simplest event carrying IDJoueur, HashJoueur, IDSession and IPJoueur."""
    return {
        "CPTEALIM": {
            "IDOper": oper,
            "DateEvt": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "IDEvt": id_evt,
            "IDJoueur": player,
            "HashJoueur": hashed,
            "IDSession": session,
            "IPJoueur": ip,
            "IDCoffre": 1,
            "IDRef": f"dep-{id_evt}",
            "DateDemande": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "DateEffective": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "SoldeAvant": "0.00",
            "SoldeMouvement": "50.00",
            "SoldeApres": "50.00",
            "MoyenPaiement": "CB VISA",
            "TypeMoyenPaiement": "CarteBancaire",
        }
    }


def events(documents: list[dict[str, Any]]) -> list[Event]:
    return [normalize(json.dumps(d).encode()) for d in documents]
