"""The table a hand is played at: the checks of one ``POJEU`` that need no engine.

Who sits where (decree 2016-1326 art. 2, annex 1.3.6.d.1), when the rounds start (annex
1.3.6.c.2) and which actions each round carries (annex 1.3.6.d.5). :func:`audit_table` runs
first in :func:`coffre.domain.audit.hand.audit_hand`; see docs/hand-audit.md, "The table:
seats and time", for the readings chosen.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache, lru_cache

from ..catalogue.poker import POJEU, VARIANTS, Bet, Discard, Draw, Player, Reveal
from .findings import Finding, register

register(
    "order",
    TOO_MANY_SEATS="more participants than decree 2016-1326 art. 2 allows at the variant's table (10, 9, 7 or 6)",
    SEAT_SHARED="two participants on one Siege (annex 1.3.6.d.1): the hand's actions cannot be told apart",
    SEAT_NOT_INTEGER="a participant's Siege is not a whole number, which no action can name (annex 1.3.6.d.2)",
    PLAYER_ON_TWO_SEATS="one player (IDJoueur of one operator) or one Inscription on two seats (decree art. 2)",
    TIMESTAMP_OUT_OF_ORDER="a Tour starts before the Tour recorded before it, or after the hand's DateEvt (annex 1.3.6.c.2)",
    ACTION_NOT_IN_ROUND="an action of a kind its round does not carry (annex 1.3.6.d.5: Bets only in 'bet', Reveals only in 'reveal', Discards only in a draw)",
)
register(
    "cards",
    CARD_FACE_WRONG="hold'em, Omaha, triple draw: a board card dealt face down or a private card face up (decree art. 1 IV, art. 7)",
)

MAX_SEATS: dict[str, int] = {
    **dict.fromkeys(("THL", "THPL", "THNL"), 10),
    **dict.fromkeys(("O4HPL", "O4JL", "O4JPL", "O5HPL"), 9),
    **dict.fromkeys(("7SHL", "7SJL", "7SLL"), 7),
    "2T7TD": 6,
}
"""Decree 2016-1326 art. 2: "Le nombre de joueurs susceptibles d'avoir une main correspond au nombre
d'emplacements figurant sur la représentation du tapis de jeu, qui ne peut être supérieur à dix pour le
« Texas Hold'em Poker », à neuf pour le « Omaha Poker » ; à sept pour le « Seven Card Stud Poker » et à
six pour le « Triple draw deuce to seven »". Each ``Regle`` of annex 1.3.6.d.5 is one of the versions
art. 7 lists under those four types (I: the three hold'em, II: the four Omaha, III: the three stud,
razz included, IV: the triple draw)."""

DRAW_ROUNDS = {"2T7TD": frozenset({"1st draw", "2nd draw", "3rd draw"})}
"""Annex 1.3.6.d.5: the rounds whose Discard column says "oui" (only the triple draw's three draws)."""

_ALIASES = {"blinds": "bet", "showdown": "reveal"}
"""Round names the annex's own example uses, as the hand audit reads them (hand.py ``ALIASES``)."""


@lru_cache(maxsize=1024)
def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


@cache
def _round_names(regle: str) -> dict[str, str]:
    """The variant's round names by their spelling-free key, aliases included."""
    names = {_key(r): r for r in VARIANTS[regle].rounds}
    for alias, target in _ALIASES.items():
        names[alias] = target
    return names


@dataclass
class TableAudit:
    """What :func:`audit_table` found, and what it means for the rest of the hand audit."""

    findings: list[Finding] = field(default_factory=list)
    unreadable: bool = False
    """The hand's actions cannot be given to one participant each (a shared or fractional seat),
    or an action sits in a round that does not carry it: the hand audit's other passes would
    judge it against a table it does not have, so only these findings are reported."""

    def add(
        self,
        code: str,
        message: str,
        round: str | None = None,
        seat: int | None = None,
        player: str | None = None,
    ) -> None:
        self.findings.append(Finding(code, message, round, seat, player))


def audit_table(event: POJEU) -> TableAudit:
    """The table's findings of one hand. Never raises on a hand's content."""
    table = TableAudit()
    try:
        _seats(event, table)
        _players(event, table)
        _time(event, table)
        _actions(event, table)
        _faces(event, table)
    except Exception as exc:  # a defect of coffre's: evidence, not a crash
        table.add("REPLAY_FAILED", f"the table audit failed: {type(exc).__name__}: {exc}")
        table.unreadable = True
    return table


# --------------------------------------------------------------------------- seats


def _seats(event: POJEU, table: TableAudit) -> None:
    """Decree art. 2 (seats per variant) and annex 1.3.6.d.1 (one participant a seat)."""
    players = event.Participants.Joueur
    limit = MAX_SEATS.get(event.Regle)
    if limit is not None and len(players) > limit:
        table.add(
            "TOO_MANY_SEATS",
            f"{len(players)} participants at a {event.Regle} table: decree 2016-1326 art. 2 allows {limit}",
        )
    taken: dict[Decimal, Player] = {}
    for player in players:
        seat = player.Siege
        if seat != seat.to_integral_value():
            table.add(
                "SEAT_NOT_INTEGER",
                f"participant {player.IDJoueur} sits at Siege {seat}: an action names a seat by a whole number",
                player=player.IDJoueur,
            )
            table.unreadable = True
            continue
        other = taken.get(seat)
        if other is not None:
            table.add(
                "SEAT_SHARED",
                f"participants {other.IDJoueur} and {player.IDJoueur} both sit at Siege {int(seat)}",
                seat=int(seat),
                player=player.IDJoueur,
            )
            table.unreadable = True
        else:
            taken[seat] = player


def _operator(player: Player) -> tuple[str, ...]:
    """Who answers for a player's IDJoueur: an ARJEL operator by IDOper, another by Oper and Pays
    (annex 1.3.6.d.1)."""
    if player.IDOper is not None:
        return ("IDOper", str(player.IDOper))
    return ("Oper", str(player.Oper), str(player.Pays))


def _players(event: POJEU, table: TableAudit) -> None:
    """Decree art. 2: "Chaque joueur ne dispose que d'une seule « main » et ne peut miser que sur
    l'emplacement qui lui a été attribué." One IDJoueur of one operator, or one Inscription (of one
    operator: its identifier is the operator's), sits at one seat only."""
    seen: dict[tuple[str, ...], Player] = {}
    for player in event.Participants.Joueur:
        operator = _operator(player)
        for what, value in (("IDJoueur", player.IDJoueur), ("Inscription", player.Inscription)):
            key = (what, str(value), *operator)
            other = seen.get(key)
            if other is None:
                seen[key] = player
                continue
            if other.Siege == player.Siege:
                break  # the same seat twice is SEAT_SHARED's
            table.add(
                "PLAYER_ON_TWO_SEATS",
                f"{what} {value} sits at Siege {other.Siege} and at Siege {player.Siege}",
                seat=_whole(player.Siege),
                player=player.IDJoueur,
            )
            break  # one finding per participant: the same player usually repeats both


def _whole(seat: Decimal) -> int | None:
    return int(seat) if seat == seat.to_integral_value() else None


# --------------------------------------------------------------------------- time


def _time(event: POJEU, table: TableAudit) -> None:
    """Annex 1.3.6.c.2: a Tour's Timestamp is "Date et heure du début du tour", DateEvt the "Date et
    heure de l'évènement de jeu": the rounds start one after the other, and none after the event
    that records the hand. Both are ``aammjjhhmmss`` UTC once normalized (years 2000–2099), so the
    text order is the time order. The annex's own example (1.4.3.f) dates its rounds a year before
    its DateEvt: earlier is allowed, equal too (the regulator's sample stamps everything alike)."""
    previous = None
    late = None
    for tour in event.Jeu.Tour:
        stamp = tour.Timestamp
        if previous is not None and stamp < previous.Timestamp:
            table.add(
                "TIMESTAMP_OUT_OF_ORDER",
                f"'{tour.name}' starts at {stamp}, before '{previous.name}' ({previous.Timestamp})",
                tour.name,
            )
        if late is None and stamp > event.DateEvt:
            late = tour
        previous = tour
    if late is not None:
        table.add(
            "TIMESTAMP_OUT_OF_ORDER",
            f"'{late.name}' starts at {late.Timestamp}, after the hand's DateEvt {event.DateEvt}",
            late.name,
        )


# --------------------------------------------------------------------------- actions per round


def _actions(event: POJEU, table: TableAudit) -> None:
    """Annex 1.3.6.d.5: "Les tours bet et reveal sont des tours spéciaux, respectivement pour les
    mises obligatoires (blindes, antes) et la révélation des cartes en fin de partie": only Bets
    in ``bet``, only Reveals in ``reveal``; a Discard only where the table says "oui" (the triple
    draw's three draws). A round whose name the variant does not know is ROUND_UNKNOWN's (hand.py)."""
    names = _round_names(event.Regle)
    draws = DRAW_ROUNDS.get(event.Regle, frozenset())
    for tour in event.Jeu.Tour:
        name = names.get(_key(tour.name))
        if name is None:
            continue
        kinds = {action.__class__ for action in tour.Action}  # the action classes have no subclasses
        if name == "bet":
            if kinds <= _BETS_ONLY:
                continue
        elif name == "reveal":
            if kinds <= _REVEALS_ONLY:
                continue
        elif Discard not in kinds or name in draws:
            continue  # nothing misplaced: _misplaced would yield nothing
        for action, why in _misplaced(name, tour.Action, draws):
            seat = getattr(action, "Siege", None)
            table.add(
                "ACTION_NOT_IN_ROUND",
                f"a {type(action).__name__}{f' by seat {seat}' if seat is not None else ''} in '{tour.name}', {why}",
                tour.name,
                seat,
            )
            table.unreadable = True


_BETS_ONLY = frozenset((Bet,))
_REVEALS_ONLY = frozenset((Reveal,))


def _misplaced(name: str, actions: list[object], draws: frozenset[str]) -> Iterator[tuple[object, str]]:
    for action in actions:
        if name == "bet" and not isinstance(action, Bet):
            yield action, "the round of the forced bets, which carries Bets only"
        elif name == "reveal" and not isinstance(action, Reveal):
            yield action, "the round of the showdown, which carries Reveals only"
        elif isinstance(action, Discard) and name not in draws:
            yield action, "which is not a draw round"


# --------------------------------------------------------------------------- cards face up, face down


def _faces(event: POJEU, table: TableAudit) -> None:
    """Decree art. 1 IV: cards are "« fermées » lorsque leur face n'est pas visible des autres joueurs
    ou « ouvertes » dans le cas contraire"; art. 7 I and II: hold'em and Omaha players hold "cartes
    privées fermées" beside "cinq cartes communes ouvertes"; art. 7 IV: triple draw "cinq cartes
    privées fermées". A Draw says it by ``ouverte`` (annex 1.3.6.d.2, default false), as the annex's
    example and the regulator's sample write it (their board ``ouverte="true" commune="true"``, their
    hole cards without the attribute). Stud's up cards are counted by CARD_COUNT_WRONG (hand.py).
    One finding per round and direction: a writer that never sets the flag is one fault a round."""
    if event.Regle.startswith("7S"):
        return
    for tour in event.Jeu.Tour:
        down_board = up_hole = 0
        up_seats: set[int] = set()
        for action in tour.Action:
            if action.__class__ is not Draw:  # Draw has no subclass
                continue
            if action.commune:
                if not action.ouverte:
                    down_board += 1
            elif action.ouverte:
                up_hole += 1
                if action.Siege is not None:
                    up_seats.add(int(action.Siege))
        if down_board:
            table.add(
                "CARD_FACE_WRONG",
                f"'{tour.name}' deals {down_board} board card(s) face down (not ouverte)",
                tour.name,
            )
        if up_hole:
            seat = next(iter(up_seats)) if len(up_seats) == 1 else None
            table.add(
                "CARD_FACE_WRONG",
                f"'{tour.name}' deals {up_hole} private card(s) face up (ouverte) at seat(s) {sorted(up_seats)}",
                tour.name,
                seat,
            )
