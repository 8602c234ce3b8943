"""What the signals read of an event, in one pass: a ``POJEU``'s seats, cards, decisions and rounds'
times (:class:`HandFacts`), a player event's identity (:class:`AccountFacts`).

A *decision* is a betting action a player chose (a check, a fold, a call, a bet or a raise; the
forced bets are not decisions), kept with what the player faced when taking it: who made the last
bet or raise of the street (the *aggressor*, None when only forced bets were made), which other
hands were still live, and the board as dealt so far. Hole cards are every card the hand dealt to a
seat (``Draw`` with a ``Siege``): a POJEU records them all, folded hands included (annex
1.3.6.c.2), which is what lets the equity of a decision be computed from the cards every seat held.
"""

from __future__ import annotations

import calendar
import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from ..catalogue.base import Event
from ..catalogue.poker import POJEU, Bet, Check, Draw, Fold

Ref = tuple[str, int, int]
"""An event's place: (IDOper, IDCoffre, IDEvt)."""

FORCED = frozenset({"ante", "small blind", "big blind", "bring-in"})
_FORCED_ROUNDS = frozenset({"bet", "blinds"})
_NOT_BETTING = frozenset({"reveal", "showdown"})


@lru_cache(maxsize=4096)
def _day_start(yymmdd: str) -> int:
    return calendar.timegm((2000 + int(yymmdd[:2]), int(yymmdd[2:4]), int(yymmdd[4:6]), 0, 0, 0, 0, 0, 0))


def epoch(stamp: str) -> int:
    """``aammjjhhmmss`` (UTC once normalized, docs/hand-audit.md "Time") as POSIX seconds."""
    return _day_start(stamp[:6]) + int(stamp[6:8]) * 3600 + int(stamp[8:10]) * 60 + int(stamp[10:12])


@lru_cache(maxsize=65536)
def address(text: str) -> str:
    """An IP as one spelling (Common.xsd's IPv6 is written with all eight groups, a POJEU's may be
    compressed): the ``ipaddress`` module's; the text itself if it is not an address."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return text


def player_key(id_oper: str | None, id_joueur: str) -> str:
    """A player as the signals name it: ``IDOper/IDJoueur`` (an IDJoueur is an operator's own)."""
    return f"{id_oper or '?'}/{id_joueur}"


@dataclass(frozen=True, slots=True)
class Seat:
    seat: int
    player: str
    """:func:`player_key`."""
    ip: str
    inscription: str
    net: float
    hole: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    seat: int
    kind: str
    """``check``, ``fold``, ``call`` or ``raise`` (a bet, a raise, or an all-in above what was owed)."""
    amount: float
    """What the action added (0 for a check or a fold)."""
    aggressor: int | None
    """The seat that made the street's last bet or raise before this decision (None: none yet)."""
    opponents: tuple[int, ...]
    """The other seats still live (not folded) when the player decided."""
    board: tuple[int, ...]
    street: int


@dataclass(frozen=True, slots=True)
class RoundTime:
    start: int
    seconds: int | None
    """Until the next round began (the last: until ``DateEvt``); None when the clock went backwards."""
    actors: tuple[int, ...]
    """The seats that made a decision in it, once per decision."""
    actions: int
    """Its decisions (dealing and forced bets left out)."""


@dataclass(frozen=True, slots=True)
class HandFacts:
    ref: Ref
    regle: str
    tech: str
    pool: str
    start: int
    end: int
    seats: dict[int, Seat]
    decisions: tuple[Decision, ...]
    rounds: tuple[RoundTime, ...]
    equities: tuple[float | None, ...] | None = None
    """Per decision, the decider's equity against the aggressor, when a worker computed them
    (:func:`~.state.decision_equities`); None: computed when the hand is fed."""


@dataclass(frozen=True, slots=True)
class AccountFacts:
    """A player event's identity: who (IDOper/IDJoueur), the HashJoueur, the session and the IP."""

    ref: Ref
    player: str
    hash: str
    session: str
    ip: str | None
    when: int
    event_type: str
    tech: str | None = None
    """A cercle event's Tech (a POINSCRIT's tournament or table)."""


def hand_facts(event: POJEU) -> HandFacts:
    """One pass over the hand's rounds: the seats, their hole cards and every decision."""
    ref: Ref = (event.IDOper, int(event.IDCoffre), int(event.IDEvt))
    joueurs = event.Participants.Joueur
    holes: dict[int, list[int]] = {int(j.Siege): [] for j in joueurs}
    live = set(holes)
    board: list[int] = []
    decisions: list[Decision] = []
    rounds: list[tuple[int, list[int], int]] = []
    street = -1
    put: dict[int, float] = {}
    aggressor: int | None = None
    previous_name = ""
    for tour in event.Jeu.Tour:
        name = tour.name.strip().lower()
        betting = name not in _NOT_BETTING
        if betting and not (previous_name in _FORCED_ROUNDS and street >= 0):
            street += 1
            put = {}
            aggressor = None
        previous_name = name
        acted: list[int] = []
        for action in tour.Action:
            kind = type(action)
            if kind is Draw:
                if action.Siege is not None and not action.commune:
                    holes.setdefault(action.Siege, []).append(action.Valeur)
                elif action.commune:
                    board.append(action.Valeur)
                continue
            if kind is Bet:
                seat = action.Siege
                amount = float(action.Valeur)
                before = put.get(seat, 0.0)
                owed = max(put.values(), default=0.0) - before
                put[seat] = before + amount
                if action.name in FORCED:
                    continue
                raised = amount > owed + 1e-9 and action.name != "call"
                decisions.append(
                    Decision(
                        seat,
                        "raise" if raised else "call",
                        amount,
                        aggressor,
                        tuple(sorted(live - {seat})),
                        tuple(board),
                        street,
                    )
                )
                if raised:
                    aggressor = seat
            elif kind is Check or kind is Fold:
                seat = action.Siege
                decisions.append(
                    Decision(
                        seat,
                        "check" if kind is Check else "fold",
                        0.0,
                        aggressor,
                        tuple(sorted(live - {seat})),
                        tuple(board),
                        street,
                    )
                )
                if kind is Fold:
                    live.discard(seat)
            else:  # Discard, Reveal: not a decision of the betting
                continue
            acted.append(seat)
        rounds.append((epoch(tour.Timestamp), acted, len(acted)))
    end = epoch(event.DateEvt)
    times: list[RoundTime] = []
    for i, (start, acted, count) in enumerate(rounds):
        until = rounds[i + 1][0] if i + 1 < len(rounds) else end
        times.append(RoundTime(start, until - start if until >= start else None, tuple(acted), count))
    seats = {
        int(j.Siege): Seat(
            int(j.Siege),
            player_key(j.IDOper or event.IDOper, j.IDJoueur),
            address(j.IPJoueur),
            j.Inscription,
            float(j.Finance.Net),
            tuple(holes.get(int(j.Siege), ())),
        )
        for j in joueurs
    }
    start = rounds[0][0] if rounds else end
    return HandFacts(
        ref,
        event.Regle,
        event.Tech,
        event.Pool,
        start,
        max(end, start),
        seats,
        tuple(decisions),
        tuple(times),
    )


_IDENTITY = ("IDJoueur", "HashJoueur", "IDSession")


def account_facts(event: Event) -> AccountFacts | None:
    """The identity a player event carries (None for an event without IDJoueur, HashJoueur and
    IDSession: a POJEU, an anonymous event)."""
    fields = event.__dict__
    player, hashed, session = (fields.get(name) for name in _IDENTITY)
    if not (isinstance(player, str) and isinstance(hashed, str) and isinstance(session, str)):
        return None
    oper = fields.get("IDOper")
    ip = fields.get("IPJoueur")
    tech = fields.get("Tech")
    return AccountFacts(
        (str(oper), int(fields["IDCoffre"]), int(fields["IDEvt"])),
        player_key(oper, player),
        hashed.upper(),
        session,
        address(str(ip)) if ip else None,
        epoch(str(fields["DateEvt"])),
        type(event).__name__,
        str(tech) if isinstance(tech, str) else None,
    )


def facts_of(event: Event) -> HandFacts | AccountFacts | None:
    if isinstance(event, POJEU):
        return hand_facts(event)
    return account_facts(event)
