"""A world of no-limit hold'em players, honest ones and a few planted cheats: the signals' ground truth.

:func:`play_world` schedules a population of players over some days (their sessions, their tables,
their breaks), seats them at cash tables of 2 to 6 seats and in tournaments, and plays every hand on
coffre's own engine (:class:`~coffre.domain.audit.engine.Table`, driven action by action as the hand
audit's replay drives it), each decision drawn from the player's cards and style. The hands are
written as :mod:`coffre.domain.audit.play` writes its own (its ``_Recorder``): every one audits clean.
The events around them make one consistent coffre: a deposit (CPTEALIM) opens each session, each
seat taken at a cash table is a registration (POINSCRIT, Format CG) bought again when busted
(POACHAT) and paid out when left (POBILAN), each tournament entry a registration (Format T) and a
result; balances chain, and the money trail (:class:`~coffre.domain.audit.trail.MoneyTrail`) finds
nothing.

Planted among the honest players (:class:`Planted`), each otherwise playing as they do:

- chip dumping (D → R): when R bets or raises, D calls with weak cards (all in now and then, when R
  is committed) and folds strong ones; D never bets into R with a strong hand, and mucks at a
  showdown R is in (unless someone is all in: every hand is tabled then). D follows R's sessions and
  sits at about 60 % of R's tables; R's style is drawn from the aggressive end of the honest ones,
  D's from the loose end;
- soft play (S1, S2): they sit together, and neither bets nor raises while the other is in the hand;
- the same person behind two accounts: one ``HashJoueur``; both at once from one address, or one of
  them (the second from its own address, or from the first's); sometimes at one table;
- the same IP: two persons of one household (two ``HashJoueur``, one ``IPJoueur``) who play honestly,
  often at one table, together in the first tournament;
- a robot: sessions of 16.5 to 20 hours every day, night included, on 4 to 6 tables at once, 1.5 ±
  0.2 s (at most ± 0.4) to act, whatever the decision.

The planted pairs are regulars of the evening (3 to 4 hours a day on 2 or 3 tables, within the
honest players' ranges), so that they have hands enough to be seen in a short world.

Time: the honest players play in their own hours, mostly in the afternoon and the evening, 1 to 4
hours on 1 to 3 tables, a break in half the long sessions; a few night owls (2 to 6 hours from about
midnight); a few grinders (4 tables, 6 to 9 hours, a break every 2 hours, the first of them at
night). A round's ``Timestamp`` is when it began, its length the dealing (2 s) and the think times
of its actions (humans: log-normal, a median of 2.5 to 8 s by player, 2 to 4 s for the grinders;
the robot's above); ``DateEvt`` is the hand's end. The number of hands asked for sets how often a
cash table deals (:attr:`World.cash_hand_interval`): 40 players for 4 days in 2,500 hands deal a
hand every ten minutes or so at a table; 40 players for 14 days in 100,000 hands, every 50 s, as
online tables do. A table never deals faster than its hands last: past that, fewer hands come than
asked (:attr:`World.hands` counts them). Tournaments deal one hand after another.

IPv6 addresses are written compressed (``2001:db8::5``); ``normalize`` keeps that form in POJEU
and POINSCRIT but writes all eight groups in CPTEALIM (Common.xsd's IP type): compare addresses
through :mod:`ipaddress`. Everything follows from ``seed`` (string seeds: no hash randomisation).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..audit import ranking
from ..audit.engine import BETTING, DEALING, SHOWDOWN, Table, rules_of
from ..audit.house import Reopening
from ..audit.play import _Recorder
from ..catalogue.poker import VARIANTS

OPER = "0099"
COFFRE = 1
EPOCH = 1772409600.0
"""2026-03-02 00:00:00 UTC, a Monday: the first day of the world."""
DAY = 86_400.0
HOUR = 3_600.0
MINUTE = 60.0

THNL = rules_of("THNL")
ROUNDS = VARIANTS["THNL"].rounds  # bet, pre-flop, flop, turn, river, reveal

CASH_BLINDS = (5, 10)
"""Cents: 0.05/0.10."""
CASH_BUY_IN = 1_000
"""Cents: 10.00, a hundred big blinds."""
CASH_SIZES = (2, 3, 4, 5, 6, 6, 6, 6, 6, 6)
"""The seats of a new cash table, drawn from these."""

TOURNAMENT_BUY_IN = 1_000
TOURNAMENT_STACK = 1_500
TOURNAMENT_LEVELS = (
    (10, 20),
    (15, 30),
    (25, 50),
    (50, 100),
    (75, 150),
    (100, 200),
    (150, 300),
    (200, 400),
    (300, 600),
    (400, 800),
    (600, 1_200),
    (800, 1_600),
    (1_000, 2_000),
    (1_500, 3_000),
    (2_000, 4_000),
    (3_000, 6_000),
    (5_000, 10_000),
)
LEVEL_SECONDS = 6 * MINUTE
TOURNAMENT_TABLE = 6

FOLD, CALL, RAISE = 0, 1, 2

STRONG = (0.85, 0.6)
"""The strength (before the flop, after it) from which the chip dumper folds to the receiver's bets and
does not bet into them: before the flop a share of starting hands beaten (the top 15 %), after it a
made hand (top pair and better)."""


# --------------------------------------------------------------------------- what the world holds


@dataclass(frozen=True)
class Planted:
    """Who cheats, and how (IDJoueur)."""

    chip_dumping: tuple[str, str]
    """(dumper, receiver)."""
    soft_play: tuple[str, str]
    same_person: tuple[str, str]
    """Two accounts (IDJoueur) of one person: one HashJoueur."""
    same_ip: tuple[str, str]
    """Two persons who play from one IPJoueur, at the same tables."""
    robot: str
    honest: tuple[str, ...]

    def subjects(self, oper: str = "0099") -> dict[str, tuple[str, ...]]:
        """Each planted cheat as the signals name its subject (``IDOper/IDJoueur``, a pair sorted)."""
        named = {
            "chip_dumping": self.chip_dumping,
            "soft_play": self.soft_play,
            "same_person": self.same_person,
            "same_ip": self.same_ip,
            "robot": (self.robot,),
        }
        return {kind: tuple(sorted(f"{oper}/{p}" for p in players)) for kind, players in named.items()}

    def cheaters(self, oper: str = "0099") -> set[str]:
        return {p for players in self.subjects(oper).values() for p in players}


@dataclass
class World:
    events: list[bytes]
    """coffre's JSON form, one event each, in time order, IDOper 0099, IDCoffre 1, IDEvt 1..n."""
    planted: Planted
    hands: int
    """How many POJEU."""
    cash_hand_interval: float = 0.0
    """The mean time between two hands' starts at a cash table with two players or more (seconds)."""


# --------------------------------------------------------------------------- cards' strength


def _chen(a: int, b: int) -> float:
    """Bill Chen's score of two hole cards (bigger is better)."""
    ra, rb = a >> 2, b >> 2
    hi, lo = max(ra, rb), min(ra, rb)
    points = {12: 10.0, 11: 8.0, 10: 7.0, 9: 6.0}.get(hi, (hi + 2) / 2)
    if ra == rb:
        return max(5.0, 2 * points)
    if a & 3 == b & 3:
        points += 2
    gap = hi - lo - 1
    points -= (0, 1, 2, 4)[gap] if gap < 4 else 5
    if gap <= 1 and hi < 10:
        points += 1
    return points


def _preflop_table() -> list[float]:
    """Per pair of cards (``a * 52 + b``), the share of the 1,326 starting hands it beats (ties half)."""
    scores = {(a, b): _chen(a, b) for a in range(52) for b in range(a + 1, 52)}
    ordered = sorted(scores.values())
    table = [0.0] * (52 * 52)
    below: dict[float, float] = {}
    for score in set(ordered):
        lo = next(k for k, s in enumerate(ordered) if s == score)
        hi = len(ordered) - next(k for k, s in enumerate(reversed(ordered)) if s == score)
        below[score] = (lo + (hi - lo) / 2) / len(ordered)
    for (a, b), score in scores.items():
        table[a * 52 + b] = table[b * 52 + a] = below[score]
    return table


PREFLOP = _preflop_table()
_MADE = (0.0, 0.0, 0.78, 0.85, 0.88, 0.9, 0.95, 0.98, 1.0)
"""Strength of a made hand by category (two pair and up), when the hole cards make it."""


def strength(hole: list[int], board: list[int]) -> float:
    """0 (hopeless) … 1 (the nuts), roughly: before the flop the share of starting hands beaten,
    after it the made hand (what the hole cards add to the board) and a flush draw."""
    if not board:
        return PREFLOP[hole[0] * 52 + hole[1]]
    value = ranking.high(hole + board)
    category = value >> 20
    top = (value >> 16) & 15  # the first rank compared, 2..14
    counts: dict[int, int] = {}
    for c in board:
        counts[c >> 2] = counts.get(c >> 2, 0) + 1
    most = max(counts.values())
    pairs = sum(1 for k in counts.values() if k >= 2)
    if most >= 4:
        on_board = 7
    elif most == 3:
        on_board = 6 if pairs >= 2 else 3
    else:
        on_board = 2 if pairs >= 2 else pairs
    if len(board) == 5:
        on_board = max(on_board, ranking.high(board) >> 20)
    board_top = max(counts) + 2
    if category > on_board:
        if category == 1:
            if top > board_top:
                made = 0.72
            elif top == board_top:
                made = 0.64
            else:
                made = 0.35 + 0.2 * (top - 2) / 12
        elif category == 2 and on_board:
            made = 0.58
        else:
            made = _MADE[category]
    else:  # the board plays: the hole cards' high card only
        made = 0.08 + 0.12 * max(hole[0] >> 2, hole[1] >> 2) / 12
    if len(board) < 5 and made < 0.45:
        suits = [c & 3 for c in board]
        for suit in {hole[0] & 3, hole[1] & 3}:
            if suits.count(suit) + (hole[0] & 3 == suit) + (hole[1] & 3 == suit) >= 4:
                return 0.45
    return made


# --------------------------------------------------------------------------- the players


@dataclass
class Profile:
    """One account and the style of its player."""

    pid: str
    hash: str
    ip: str
    kind: str
    """casual, night (a night owl), grinder, robot."""
    vpip: float
    """Share of starting hands played."""
    pfr: float
    """Share of starting hands raised."""
    aggression: float
    bluff: float
    loose: float
    """How much more than the pot odds it calls."""
    think_median: float
    think_sigma: float
    hour: float
    """The hour (UTC) its sessions usually begin."""
    play: float
    """The chance it plays on a given day."""
    hours: tuple[float, float]
    """A session's length, in hours."""
    tables: int
    """The most tables it plays at once."""
    fewest_tables: int = 1
    partner: str | None = None
    partner_pref: float = 0.0
    """The chance it sits where ``partner`` sits (a table with a free seat)."""
    sessions: int = 0

    def think(self, rng: random.Random, weight: float = 1.0) -> float:
        """Seconds to act."""
        if self.kind == "robot":
            return min(1.9, max(1.1, rng.gauss(1.5, 0.2)))
        return min(90.0, max(0.5, weight * self.think_median * math.exp(self.think_sigma * rng.gauss(0, 1))))

    def session_id(self) -> str:
        self.sessions += 1
        return f"{self.pid}-s{self.sessions}"


@dataclass
class Session:
    player: Profile
    start: float
    end: float
    tables: int
    ip: str
    sid: str = ""
    breaks: list[tuple[float, float]] = field(default_factory=list)

    def segments(self) -> list[tuple[float, float]]:
        """The stretches played between the breaks."""
        out, at = [], self.start
        for begin, end in self.breaks:
            out.append((at, begin))
            at = end
        out.append((at, self.end))
        return out


@dataclass
class Sitting:
    """A player at a cash table's seat from ``start`` to ``end``."""

    player: Profile
    session: Session
    table: CashTable
    seat: int
    start: float
    end: float = math.inf
    stack: int = CASH_BUY_IN
    inscription: str = ""
    last_hand: float = -math.inf
    """When the last hand it played ended."""


@dataclass
class CashTable:
    number: int
    size: int
    seated: dict[int, Sitting] = field(default_factory=dict)
    sittings: list[Sitting] = field(default_factory=list)

    @property
    def tech(self) -> str:
        return f"table-{self.number}"


def _address(kind: int, n: int) -> str:
    if kind == 0:
        return f"192.0.2.{n}"
    if kind == 1:
        return f"198.51.100.{n}"
    if kind == 2:
        return f"203.0.113.{n}"
    return f"2001:db8::{n:x}"


def _addresses(count: int, rng: random.Random) -> list[str]:
    """``count`` different documentation addresses (RFC 5737, RFC 3849), some IPv6."""
    used = [0, 0, 0, 0]
    out = []
    for _ in range(count):
        kind = rng.choices((0, 1, 2, 3), weights=(4, 4, 1, 2))[0]
        if kind < 3 and used[kind] >= 254:
            kind = 3
        used[kind] += 1
        out.append(_address(kind, used[kind]))
    return out


def _profile(pid: str, ip: str, kind: str, rng: random.Random, grinder_hour: float = 0.0) -> Profile:
    vpip = rng.uniform(0.15, 0.45)
    common = {
        "pid": pid,
        "hash": hashlib.sha1(f"JOUEUR{pid}".encode()).hexdigest().upper(),
        "ip": ip,
        "kind": kind,
        "vpip": vpip,
        "pfr": vpip * rng.uniform(0.3, 0.8),
        "aggression": rng.uniform(0.2, 0.8),
        "bluff": rng.uniform(0.01, 0.1),
        "loose": rng.uniform(0.0, 0.15),
        "think_sigma": rng.uniform(0.5, 1.0),
    }
    if kind == "robot":
        return Profile(
            **{**common, "vpip": 0.24, "pfr": 0.18, "aggression": 0.6, "bluff": 0.05, "loose": 0.05},
            think_median=1.5,
            hour=rng.uniform(9, 11),
            play=1.0,
            hours=(16.5, 20.0),
            tables=6,
        )
    if kind == "grinder":
        return Profile(
            **common,
            think_median=rng.uniform(2.0, 4.0),
            hour=grinder_hour + rng.uniform(-0.5, 0.5),
            play=rng.uniform(0.8, 0.95),
            hours=(6.0, 9.0),
            tables=4,
            fewest_tables=4,
        )
    if kind == "night":
        hour = rng.uniform(22, 25) % 24
        hours = (2.0, 6.0)
    else:
        r = rng.random()
        hour = (
            rng.uniform(17, 21)
            if r < 0.55
            else rng.uniform(11.5, 16)
            if r < 0.8
            else rng.uniform(7, 10)
            if r < 0.9
            else rng.uniform(21, 23)
        )
        shortest = rng.uniform(1.0, 2.0)
        hours = (shortest, rng.uniform(max(shortest, 2.5), 4.0))
    return Profile(
        **common,
        think_median=rng.uniform(2.5, 8.0),
        hour=hour,
        play=rng.uniform(0.45, 0.9),
        hours=hours,
        tables=rng.choices((1, 2, 3), weights=(45, 35, 20))[0],
    )


GRINDER_HOURS = (21.5, 8.0, 13.0, 17.5)
"""UTC: the first grinder plays the night."""


# --------------------------------------------------------------------------- the schedule


def _own_sessions(p: Profile, days: int, rng: random.Random) -> list[Session]:
    sessions = []
    playing = [day for day in range(days) if rng.random() < p.play] or [rng.randrange(days)]
    for day in playing:
        jitter = 0.3 if p.kind in ("grinder", "robot") else 1.0
        start = max(EPOCH, EPOCH + day * DAY + (p.hour + rng.gauss(0, jitter)) * HOUR)
        sessions.append(_session(p, start, rng))
        if p.kind in ("casual", "night") and rng.random() < 0.2:
            later = sessions[-1].end + rng.uniform(1.5, 4.0) * HOUR
            sessions.append(_session(p, later, rng))
    return sessions


def _session(p: Profile, start: float, rng: random.Random, end: float | None = None) -> Session:
    if end is None:
        end = start + rng.uniform(*p.hours) * HOUR
    tables = rng.randint(4, 6) if p.kind == "robot" else rng.randint(p.fewest_tables, p.tables)
    session = Session(p, start, end, tables, p.ip)
    if p.kind == "grinder":  # a break of 10 to 20 minutes every 1.5 to 2.5 hours
        at = start + rng.uniform(1.5, 2.5) * HOUR
        while at < end - HOUR:
            pause = rng.uniform(10, 20) * MINUTE
            session.breaks.append((at, at + pause))
            at += pause + rng.uniform(1.5, 2.5) * HOUR
    elif p.kind != "robot" and end - start > 2 * HOUR and rng.random() < 0.5:
        at = start + rng.uniform(0.35, 0.65) * (end - start)
        session.breaks.append((at, at + rng.uniform(5, 15) * MINUTE))
    return session


def _follow(follower: Profile, leader: list[Session], share: float, rng: random.Random) -> list[Session]:
    """Sessions of ``follower`` that begin and end about when ``leader``'s do (``share`` of them, at
    random, rounded)."""
    out = []
    chosen = set(rng.sample(range(len(leader)), round(share * len(leader))))
    for k, s in enumerate(leader):
        if k in chosen:
            start = s.start + rng.uniform(-10, 15) * MINUTE
            end = s.end + rng.uniform(-20, 10) * MINUTE
            if end - start >= 30 * MINUTE:
                out.append(_session(follower, start, rng, end))
    return out


def _apart(sessions: list[Session]) -> list[Session]:
    """A player's sessions, in order, none overlapping another (or less than 15 minutes after it)."""
    out: list[Session] = []
    for s in sorted(sessions, key=lambda s: s.start):
        if not out or s.start >= out[-1].end + 15 * MINUTE:
            out.append(s)
    return out


# --------------------------------------------------------------------------- seating at cash tables


class _Seating:
    """Players sit down at the start of each stretch of a session and stand up at its end; a player
    left alone at a table for five minutes moves to a table where others play; a player with a
    partner goes where the partner is, when it can."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.tables: list[CashTable] = []
        self.at: dict[str, list[Sitting]] = {}
        self.count = 0

    def run(self, sessions: list[Session]) -> None:
        events: list[tuple[float, int, int, Any]] = []
        n = 0
        for s in sessions:
            for begin, end in s.segments():
                events.append((begin, 1, n, s))
                events.append((end, 0, n, s))
                n += 1
        if not events:
            return
        heapq.heapify(events)
        first = min(e[0] for e in events)
        last = max(e[0] for e in events)
        tidy = first + 10 * MINUTE
        while events:
            t, kind, _, s = heapq.heappop(events)
            while tidy <= t and tidy <= last:
                self._tidy(tidy)
                tidy += 10 * MINUTE
            if kind == 1:
                for _ in range(s.tables):
                    self._sit(s, t)
            else:
                for sitting in list(self.at.get(s.player.pid, [])):
                    if sitting.session is s:
                        self._leave(sitting, t)

    def _sit(self, s: Session, t: float, avoid: CashTable | None = None) -> None:
        p, rng = s.player, self.rng
        mine = {x.table.number for x in self.at.get(p.pid, [])}
        if avoid is not None:
            mine.add(avoid.number)
        table = None
        if p.partner and rng.random() < p.partner_pref:
            theirs = [
                x.table
                for x in self.at.get(p.partner, [])
                if x.table.number not in mine and len(x.table.seated) < x.table.size
            ]
            if theirs:
                table = rng.choice(theirs)
        if table is None:
            open_ = [tb for tb in self.tables if 0 < len(tb.seated) < tb.size and tb.number not in mine]
            if open_ and rng.random() > (0.05 if p.kind == "robot" else 0.12):
                table = rng.choices(open_, weights=[len(tb.seated) for tb in open_])[0]
            else:
                empty = [tb for tb in self.tables if not tb.seated and tb.number not in mine]
                if empty and rng.random() < 0.8:
                    table = rng.choice(empty)
                else:
                    table = CashTable(len(self.tables) + 1, rng.choice(CASH_SIZES))
                    self.tables.append(table)
        self._seat(s, table, t)

    def _seat(self, s: Session, table: CashTable, t: float) -> None:
        """``s``'s player sits down at a free seat of ``table``: a new Inscription."""
        seat = self.rng.choice([k for k in range(1, table.size + 1) if k not in table.seated])
        self.count += 1
        pid = s.player.pid
        sitting = Sitting(s.player, s, table, seat, t, inscription=f"{table.tech}-{pid}-{self.count}")
        table.seated[seat] = sitting
        table.sittings.append(sitting)
        self.at.setdefault(pid, []).append(sitting)

    def _leave(self, sitting: Sitting, t: float) -> None:
        sitting.end = t
        del sitting.table.seated[sitting.seat]
        self.at[sitting.player.pid].remove(sitting)

    def _tidy(self, t: float) -> None:
        for table in list(self.tables):
            if len(table.seated) != 1:
                continue
            (alone,) = table.seated.values()
            if t - alone.start < 5 * MINUTE:
                continue
            mine = {x.table.number for x in self.at[alone.player.pid]}
            if any(0 < len(tb.seated) < tb.size and tb.number not in mine for tb in self.tables):
                self._leave(alone, t)
                self._sit(alone.session, t, avoid=table)
        for sittings in list(self.at.values()):  # partners drift together
            if not sittings:
                continue
            p = sittings[0].player
            if not p.partner or self.rng.random() >= p.partner_pref / 2:
                continue
            theirs = {x.table.number for x in self.at.get(p.partner, [])}
            mine = {x.table.number for x in sittings}
            away = [x for x in sittings if x.table.number not in theirs]
            goal = [
                x.table
                for x in self.at.get(p.partner, [])
                if x.table.number not in mine and len(x.table.seated) < x.table.size
            ]
            if away and goal:
                leaving = self.rng.choice(away)
                table = self.rng.choice(goal)
                self._leave(leaving, t)
                self._seat(leaving.session, table, t)


def _playable(table: CashTable) -> list[tuple[float, float]]:
    """The stretches of time in which two players or more sit at ``table``."""
    marks = sorted([(s.start, 1) for s in table.sittings] + [(s.end, -1) for s in table.sittings])
    out, seated, since = [], 0, 0.0
    for t, step in marks:
        if seated >= 2 and seated + step < 2 and t > since:
            out.append((since, t))
        if seated < 2 <= seated + step:
            since = t
        seated += step
    return out


# --------------------------------------------------------------------------- one hand


def _cents(x: int) -> str:
    sign = "-" if x < 0 else ""
    x = abs(x)
    return f"{sign}{x // 100}.{x % 100:02d}"


def _stamp(t: float) -> str:
    return time.strftime("%y%m%d%H%M%S", time.gmtime(int(t)))


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


@dataclass
class Seat:
    """A player dealt into a hand."""

    seat: int
    player: Profile
    stack: int
    inscription: str
    ip: str


@dataclass
class Cheats:
    """Who deviates from honest play at the table (the others' cheating is where and when they play)."""

    dumper: str
    receiver: str
    soft: tuple[str, str]


class _Hand:
    """One hand on coffre's engine: the cards, every decision, the POJEU."""

    def __init__(
        self, seats: list[Seat], button: int, blinds: tuple[int, int], cheats: Cheats, rng: random.Random
    ) -> None:
        self.rng = rng
        self.cheats = cheats
        ordered = sorted(s.seat for s in seats)
        at = ordered.index(button)
        self.order = ordered[at + 1 :] + ordered[: at + 1]  # the small blind first (heads-up: the big)
        by_seat = {s.seat: s for s in seats}
        self.seats = [by_seat[s] for s in self.order]
        self.blinds = blinds

    def play(
        self, out: Callable[[int], str], t0: float
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
        """(the Joueurs, the Tours, the hand's length in seconds) of the hand begun at ``t0``; each
        Seat's stack becomes its stack after the hand."""
        rng, seats, order = self.rng, self.seats, self.order
        n = len(seats)
        sb, bb = self.blinds
        stacks = [s.stack for s in seats]
        if n == 2:
            blinds, sb_i, bb_i = [bb, sb], 1, 0
        else:
            blinds, sb_i, bb_i = [sb, bb] + [0] * (n - 2), 0, 1
        posted_sb, posted_bb = min(sb, stacks[sb_i]), min(bb, stacks[bb_i])
        table = Table(
            THNL,
            stacks,
            antes=[0] * n,
            ante_trimming=True,
            blinds=blinds,
            bring_in=0,
            small_bet=bb,
            cap=None,
            missing_blinds=sb + bb - posted_sb - posted_bb,
            full_big_blind=bb,
        )
        rec = _Recorder()
        rec.bet("bet", "small blind", order[sb_i], posted_sb, 0)
        rec.bet("bet", "big blind", order[bb_i], posted_bb, 0)
        deck = rng.sample(range(52), 2 * n + 5)
        hole = [deck[2 * i : 2 * i + 2] for i in range(n)]
        board = deck[2 * n :]
        lengths = {"bet": 1.0}
        pids = [s.player.pid for s in seats]
        index = {pid: i for i, pid in enumerate(pids)}
        cheats = self.cheats
        dumper, receiver = index.get(cheats.dumper), index.get(cheats.receiver)
        soft_a, soft_b = index.get(cheats.soft[0]), index.get(cheats.soft[1])
        reopening = Reopening(False)
        street_seen = -1
        aggressor: int | None = None
        known: dict[tuple[int, int], float] = {}
        reveals: list[dict[str, Any]] = []
        best_shown: int | None = None
        all_in_showdown = False
        while True:
            phase = table.phase
            if phase == BETTING:
                street = table.street_index
                assert street is not None
                name = ROUNDS[street + 1]
                if street != street_seen:
                    street_seen, aggressor = street, None
                    reopening.new_round(bb)
                i = table.actors[0]
                seat, player = order[i], seats[i].player
                value = known.get((i, street))
                if value is None:
                    value = known[i, street] = strength(hole[i], table.board)
                owed = table.owed() or 0
                refusal, low, high = table.limits()
                can_raise = refusal is None and reopening.may_raise(seat)
                pot = -sum(table.payoffs)
                reach = table.stacks[i] + table.bets[i]
                choice, to = self._decide(
                    player,
                    value,
                    street,
                    owed,
                    pot,
                    low,
                    high if can_raise else reach,
                    reach,
                    can_raise,
                    table.raises,
                )
                partner = soft_b if i == soft_a else soft_a if i == soft_b else None
                if partner is not None and table.live[partner] and choice == RAISE:
                    choice = CALL  # soft play: no bet, no raise while the partner is in the hand
                if i == dumper and receiver is not None and table.live[receiver]:
                    strong = value >= STRONG[street > 0]
                    if owed and aggressor == receiver:
                        if strong:
                            choice = FOLD if rng.random() < 0.9 else CALL
                        else:  # all in now and then, when the receiver is committed enough to call
                            committed = table.stacks[receiver] <= pot
                            choice = RAISE if can_raise and committed and rng.random() < 0.3 else CALL
                            to = high
                    elif choice == RAISE and strong:
                        choice = CALL
                if choice == FOLD and not owed:
                    choice = CALL
                stack = table.stacks[i]
                weight = 0.7 if choice != RAISE and (not owed or choice == FOLD) else 1.0
                if owed > stack // 3:
                    weight = 1.5
                lengths[name] = lengths.get(name, 2.0) + player.think(rng, weight)
                if choice == FOLD:
                    table.fold()
                    rec.add(name, {"Fold": {"Siege": seat}})
                elif choice == CALL:
                    amount = table.check_or_call()
                    reopening.calls(seat, chips=bool(amount))
                    if amount:
                        rec.bet(name, "allin" if amount == stack else "call", seat, amount, street)
                    else:
                        rec.add(name, {"Check": {"Siege": seat}})
                else:
                    before, top = table.bets[i], max(table.bets)
                    to = min(high, max(low, to))
                    added = to - before
                    reopening.raises(seat, to - top)
                    table.raise_to(to)
                    aggressor = i
                    label = "allin" if added == stack else ("raise" if top > before or before else "bet")
                    rec.bet(name, label, seat, added, street)
            elif phase == DEALING:
                street = table.street_index
                assert street is not None
                name = ROUNDS[street + 1]
                lengths[name] = lengths.get(name, 0.0) + 2.0
                if street == 0:
                    for i in range(n):
                        for card in hole[i]:
                            rec.add(name, {"Draw": {"Siege": order[i], "Valeur": card}})
                    table.deal([list(h) for h in hole], [], [])
                else:
                    dealt = len(table.board)
                    cards = board[dealt : dealt + table.owed_board]
                    for card in cards:
                        rec.add(name, {"Draw": {"ouverte": True, "commune": True, "Valeur": card}})
                    table.deal_board(cards)
            elif phase == SHOWDOWN:
                i = table.shower
                assert i is not None
                live = [j for j in range(n) if table.live[j]]
                if not all_in_showdown and len(live) > 1 and any(not table.stacks[j] for j in live):
                    all_in_showdown = True  # every live hand is tabled (as the replay holds it)
                value = None if all_in_showdown else ranking.high(table.hole[i] + table.board)
                if all_in_showdown:
                    show = True
                elif i == dumper and receiver is not None and table.live[receiver]:
                    show = False  # the dumper mucks, the receiver (still to show, or shown) takes the pot
                elif best_shown is None:
                    show = True
                else:
                    show = value is not None and (value >= best_shown or rng.random() < 0.15)
                if show:
                    for card in table.hole[i]:
                        reveals.append({"Reveal": {"Siege": order[i], "Valeur": card}})
                    lengths["reveal"] = lengths.get("reveal", 2.0) + 0.5
                    if value is not None and (best_shown is None or value > best_shown):
                        best_shown = value
                table.show_or_muck(show)
            else:
                break
        start = [s.stack for s in seats]
        put_in, round_total = rec.settle(order)
        at = 0.0
        stamps: dict[str, str] = {}
        for name in ROUNDS:  # a round begins when the one before it ends
            if rec.rounds.get(name) or (name == "reveal" and reveals):
                stamps[name] = _stamp(t0 + at)
                at += lengths.get(name, 2.0)
        tours = rec.tours("THNL", reveals, round_total, out, stamps.__getitem__)
        joueurs = []
        for i in sorted(range(n), key=order.__getitem__):
            s = seats[i]
            end = table.stacks[i]
            if end - start[i] + put_in[order[i]] < 0:
                raise AssertionError(f"seat {s.seat} lost more than it bet")
            joueurs.append(
                {
                    "IDOper": OPER,
                    "IDJoueur": s.player.pid,
                    "IPJoueur": s.ip,
                    "Siege": s.seat,
                    "Inscription": s.inscription,
                    "Finance": {
                        "Net": out(end - start[i]),
                        "Total": out(put_in[order[i]]),
                        "CaveAvant": out(start[i]),
                        "CaveApres": out(end),
                    },
                }
            )
            s.stack = end
        return joueurs, tours, at

    def _decide(
        self,
        p: Profile,
        value: float,
        street: int,
        owed: int,
        pot: int,
        low: int,
        high: int,
        reach: int,
        can_raise: bool,
        raises: int,
    ) -> tuple[int, int]:
        """An honest player's choice and, for a raise, its total: the cards' strength against the
        player's style, some noise, some bluffs."""
        rng = self.rng
        bb = self.blinds[1]
        v = value + rng.gauss(0, 0.06)
        can_raise = can_raise and raises < 4
        if street == 0:
            if reach <= 12 * bb:  # short: all in or out
                if v > 1 - p.vpip * 0.8:
                    return (RAISE, high) if can_raise else (CALL, 0)
                return (CALL, 0) if not owed else (FOLD, 0)
            if not owed:
                if can_raise and v > 1 - p.pfr * 0.8 and rng.random() < 0.5 + p.aggression / 2:
                    return RAISE, self._size(low, high, 3 * bb + pot // 2)
                return CALL, 0
            if raises == 0:
                if can_raise and (v > 1 - p.pfr or rng.random() < p.bluff / 3):
                    return RAISE, self._size(low, high, int(bb * rng.uniform(2.2, 3.5)) + pot // 3)
                if v > 1 - p.vpip:
                    return CALL, 0
                return FOLD, 0
            if can_raise and v > 1 - p.pfr * 0.3:
                return RAISE, self._size(low, high, 3 * (pot + owed) // 2 + owed)
            pressure = owed / reach
            if v > 0.92 or (v > 1 - p.vpip * 0.6 - p.loose and pressure < 0.3):
                return CALL, 0
            return FOLD, 0
        if not owed:
            if can_raise and (
                (v > 0.6 - 0.15 * p.aggression and rng.random() < 0.4 + 0.6 * p.aggression)
                or rng.random() < p.bluff
            ):
                return RAISE, self._size(low, high, int(pot * rng.uniform(0.4, 0.9)))
            return CALL, 0
        odds = owed / (pot + owed)
        if can_raise and v > 0.8 and rng.random() < p.aggression * 0.6:
            return RAISE, self._size(low, high, owed + int((pot + owed) * rng.uniform(0.6, 1.0)))
        if v > odds + 0.2 - p.loose:
            return CALL, 0
        if can_raise and raises < 2 and rng.random() < p.bluff / 3:
            return RAISE, self._size(low, high, owed + int((pot + owed) * rng.uniform(0.6, 1.0)))
        return FOLD, 0

    def _size(self, low: int, high: int, want: int) -> int:
        """A bet or raise to about ``want`` (the whole stack past two thirds of it), in half blinds."""
        unit = max(1, self.blinds[0])
        to = want // unit * unit
        if to >= high * 2 // 3:
            return high
        return min(high, max(low, to))


# --------------------------------------------------------------------------- the world


class _Writer:
    """The events, stamped with their time; numbered, and their balances filled in, once all are in
    time order. A debit the balance cannot pay is preceded by a deposit (CPTEALIM) in its session."""

    def __init__(self) -> None:
        self.records: list[tuple[float, int, dict[str, Any], Session | None, int | None]] = []

    def add(
        self, t: float, event: dict[str, Any], session: Session | None = None, delta: int | None = None
    ) -> None:
        """``delta``: the balance of ``session``'s player moves by it (cents): the event's Solde group."""
        self.records.append((t, len(self.records), event, session, delta))

    def finish(self) -> list[bytes]:
        balances: dict[str, int] = {}
        topped: dict[str, int] = {}
        out: list[bytes] = []

        def write(event: dict[str, Any], pid: str | None, delta: int | None) -> None:
            body = next(iter(event.values()))
            body["IDEvt"] = len(out) + 1
            if pid is not None and delta is not None:
                before = balances.get(pid, 0)
                after = balances[pid] = before + delta
                body["SoldeAvant"] = _cents(before)
                body["SoldeMouvement"] = _cents(abs(delta))
                body["SoldeApres"] = _cents(after)
            out.append(json.dumps(event, ensure_ascii=False).encode())

        for t, _, event, session, delta in sorted(self.records, key=lambda r: (r[0], r[1])):
            pid = None if session is None else session.player.pid
            if pid is not None and delta is not None and balances.get(pid, 0) + delta < 0:
                assert session is not None
                need = -(balances.get(pid, 0) + delta)
                topped[session.sid] = topped.get(session.sid, 0) + 1
                deposit = _deposit(session, t, f"dep-{session.sid}-{topped[session.sid]}")
                write(deposit, pid, (need // 1_000 + 2) * 1_000)
            write(event, pid, delta)
        return out


def _header(p: Profile, s: Session, t: float) -> dict[str, Any]:
    return {
        "IDOper": OPER,
        "DateEvt": _date(t),
        "IDEvt": 0,
        "IDJoueur": p.pid,
        "HashJoueur": p.hash,
        "IDSession": s.sid,
        "IPJoueur": s.ip,
        "IDCoffre": COFFRE,
    }


_SOLDE = {"SoldeAvant": "", "SoldeMouvement": "", "SoldeApres": ""}
"""Filled in by :meth:`_Writer.finish`."""


def _deposit(s: Session, t: float, ref: str) -> dict[str, Any]:
    """A CPTEALIM: the first event of each session."""
    body = {
        **_header(s.player, s, t),
        "IDRef": ref,
        **_SOLDE,
        "MoyenPaiement": "CB VISA",
        "TypeMoyenPaiement": "CarteBancaire",
    }
    return {"CPTEALIM": body}


def _registration(
    s: Session, t: float, tech: str, inscription: str, description: str, fmt: str
) -> dict[str, Any]:
    body = {
        **_header(s.player, s, t),
        "Inscription": inscription,
        "Tech": tech,
        "Description": description,
        "Format": fmt,
        **_SOLDE,
    }
    return {"POINSCRIT": body}


def _rebuy(s: Session, t: float, tech: str, inscription: str) -> dict[str, Any]:
    body = {
        **_header(s.player, s, t),
        "Inscription": inscription,
        "Tech": tech,
        "Description": f"Recave : {_cents(CASH_BUY_IN)}",
        **_SOLDE,
    }
    return {"POACHAT": body}


def _settlement(s: Session, t: float, tech: str, inscription: str, place: int | None) -> dict[str, Any]:
    body = {
        **_header(s.player, s, t),
        "Inscription": inscription,
        "Tech": tech,
        **({"Classement": place} if place is not None else {}),
        **_SOLDE,
    }
    return {"POBILAN": body}


def _pojeu(
    t_end: float,
    tech: str,
    pool: str,
    joueurs: list[dict[str, Any]],
    description: str,
    info: str,
    tours: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "POJEU": {
            "IDOper": OPER,
            "IDCoffre": COFFRE,
            "DateEvt": _date(t_end),
            "IDEvt": 0,
            "Tech": tech,
            "Pool": pool,
            "Participants": {"Joueur": joueurs},
            "Regle": "THNL",
            "Description": description,
            "Info": info,
            "Jeu": {"Tour": tours},
        }
    }


def _cash_hands(
    tables: list[CashTable], target: int, cheats: Cheats, writer: _Writer, seed: int
) -> tuple[int, float]:
    """Deal ``target`` hands over the cash tables' playable time, in proportion to it; each sitting
    registered (POINSCRIT, Format CG), bought in again when busted (POACHAT), paid out what it left
    with (POBILAN). (The hands dealt, the mean interval between two hands' starts.)"""
    stretches = [(table, a, b) for table in tables for a, b in _playable(table)]
    total = sum(b - a for _, a, b in stretches)
    interval = total / target if target > 0 else math.inf
    quota: dict[int, list[tuple[float, float, int]]] = {}
    share = 0.0
    given = 0
    for table, a, b in stretches:
        share += (b - a) / interval
        k = int(share + 1e-9) - given
        given += k
        if k:
            quota.setdefault(table.number, []).append((a, b, k))
    description = f"Texas Hold'em No Limit ({_cents(CASH_BLINDS[0])}-{_cents(CASH_BLINDS[1])})"
    dealt = 0
    for table in tables:
        plan = quota.get(table.number, [])
        rng = random.Random(f"{seed}/{table.tech}")
        sittings = sorted(table.sittings, key=lambda s: s.start)
        following = 0
        seated: list[Sitting] = []
        button = 0
        free_at = -math.inf
        number = 0
        for a, b, k in plan:
            step = (b - a) / k
            for j in range(k):
                t0 = max(a + (j + rng.uniform(0.15, 0.85)) * step, free_at + rng.uniform(3, 8))
                while following < len(sittings) and sittings[following].start <= t0:
                    seated.append(sittings[following])
                    following += 1
                seated = [s for s in seated if s.end > t0]
                if len(seated) < 2:
                    continue
                for s in seated:
                    if s.stack <= 0:  # busted: buys in again
                        s.stack = CASH_BUY_IN
                        writer.add(
                            t0 - 1,
                            _rebuy(s.session, t0 - 1, table.tech, s.inscription),
                            s.session,
                            -CASH_BUY_IN,
                        )
                seats = [Seat(s.seat, s.player, s.stack, s.inscription, s.session.ip) for s in seated]
                numbers = sorted(s.seat for s in seated)
                button = next((x for x in numbers if x > button), numbers[0])
                hand = _Hand(seats, button, CASH_BLINDS, cheats, rng)
                joueurs, tours, length = hand.play(_cents, t0)
                by_seat = {s.seat: s for s in seats}
                number += 1
                free_at = t0 + length
                for s in seated:
                    s.stack = by_seat[s.seat].stack
                    s.last_hand = free_at
                info = f"{table.tech}, main {number}"
                writer.add(
                    free_at, _pojeu(free_at, table.tech, str(number), joueurs, description, info, tours)
                )
                dealt += 1
        sit_down = f"Table {table.tech}, {description}"
        for s in table.sittings:
            writer.add(
                s.start,
                _registration(s.session, s.start, table.tech, s.inscription, sit_down, "CG"),
                s.session,
                -CASH_BUY_IN,
            )
            end = max(s.end, s.last_hand) + 1
            writer.add(end, _settlement(s.session, end, table.tech, s.inscription, None), s.session, s.stack)
    return dealt, interval if stretches and target > 0 else 0.0


@dataclass
class _Entrant:
    player: Profile
    session: Session
    inscription: str
    stack: int = TOURNAMENT_STACK
    seat: int = 0
    table: int = 0


def _tournament(
    k: int,
    start: float,
    entrants: list[Profile],
    cheats: Cheats,
    writer: _Writer,
    rng: random.Random,
) -> int:
    """One sit-and-go: registrations, tables of six at most, rising blinds, the busted players'
    places, one table at the end. The number of hands dealt."""
    tech = f"T-{k + 1}"
    description = f"Tournoi {tech} ({_cents(TOURNAMENT_BUY_IN)} EUR, {TOURNAMENT_STACK} jetons)"
    players: list[_Entrant] = []
    for p in entrants:
        at = start - rng.uniform(5, 40) * MINUTE
        session = Session(p, at, at, 1, p.ip, p.session_id())
        writer.add(
            at, _deposit(session, at, f"dep-{session.sid}"), session, TOURNAMENT_BUY_IN * rng.randint(1, 5)
        )
        entrant = _Entrant(p, session, f"{tech}-{p.pid}")
        registration = _registration(session, at + 30, tech, entrant.inscription, description, "T")
        writer.add(at + 30, registration, session, -TOURNAMENT_BUY_IN)
        players.append(entrant)
    rng.shuffle(players)
    count = -(-len(players) // TOURNAMENT_TABLE)
    tables: dict[int, list[_Entrant]] = {t: [] for t in range(1, count + 1)}
    for n, e in enumerate(players):
        e.table = n % count + 1
        tables[e.table].append(e)
    for members in tables.values():
        for e, seat in zip(members, rng.sample(range(1, TOURNAMENT_TABLE + 1), len(members)), strict=False):
            e.seat = seat
    next_hand = dict.fromkeys(tables, start)
    big_blinds: dict[int, int | None] = dict.fromkeys(tables, None)
    pool_total = TOURNAMENT_BUY_IN * len(players)
    prizes = (
        [pool_total // 2, pool_total * 3 // 10, pool_total // 5]
        if len(players) >= 6
        else [
            pool_total * 65 // 100,
            pool_total * 35 // 100,
        ]
    )
    left = len(players)
    hands = 0
    while left > 1:
        number = min((t for t in tables if len(tables[t]) >= 2), key=lambda t: (next_hand[t], t))
        members = sorted(tables[number], key=lambda e: e.seat)
        t0 = next_hand[number]
        level = min(int((t0 - start) // LEVEL_SECONDS), len(TOURNAMENT_LEVELS) - 1)
        sb, bb = TOURNAMENT_LEVELS[level]
        ordered = [e.seat for e in members]
        previous = big_blinds[number]
        # dead button (TDA r.32-34): the big blind moves on to the next seat still playing
        big = ordered[0] if previous is None else next((s for s in ordered if s > previous), ordered[0])
        button = ordered[(ordered.index(big) - (2 if len(ordered) > 2 else 1)) % len(ordered)]
        big_blinds[number] = big
        seats = [Seat(e.seat, e.player, e.stack, e.inscription, e.session.ip) for e in members]
        hand = _Hand(seats, button, (sb, bb), cheats, rng)
        before = {e.seat: e.stack for e in members}
        joueurs, tours, length = hand.play(str, t0)
        for joueur in joueurs:
            joueur["Finance"]["Unite"] = "jetons"
        hands += 1
        end = t0 + length
        info = f"{tech}, table {number}, main {hands}, blindes {sb}/{bb}"
        writer.add(
            end, _pojeu(end, tech, str(hands), joueurs, f"Texas Hold'em No Limit ({sb}-{bb})", info, tours)
        )
        by_seat = {s.seat: s.stack for s in seats}
        busted = []
        for e in members:
            e.stack = by_seat[e.seat]
            if not e.stack:
                busted.append(e)
        for e in sorted(busted, key=lambda e: (before[e.seat], e.seat)):  # the shorter stack busts first
            tables[number].remove(e)
            place = left
            left -= 1
            _result(writer, e, place, prizes, end + 1, tech)
        next_hand[number] = end + rng.uniform(8, 20)
        _balance(tables, next_hand, big_blinds, end, rng)
    (winner,) = [e for members in tables.values() for e in members]
    _result(writer, winner, 1, prizes, max(next_hand.values()), tech)
    return hands


def _result(writer: _Writer, e: _Entrant, place: int, prizes: list[int], t: float, tech: str) -> None:
    prize = prizes[place - 1] if place <= len(prizes) else 0
    writer.add(t, _settlement(e.session, t, tech, e.inscription, place), e.session, prize)


def _balance(
    tables: dict[int, list[_Entrant]],
    next_hand: dict[int, float],
    big_blinds: dict[int, int | None],
    t: float,
    rng: random.Random,
) -> None:
    """Break a table when the others have room for its players; else move one player from the
    fullest table to the emptiest when they differ by two or more."""
    alive = [n for n in tables if tables[n]]
    if len(alive) < 2:
        return
    smallest = min(alive, key=lambda n: (len(tables[n]), n))
    room = sum(TOURNAMENT_TABLE - len(tables[n]) for n in alive if n != smallest)
    moving: list[tuple[_Entrant, int]] = []
    if len(tables[smallest]) <= room:
        for e in list(tables[smallest]):
            goal = min((n for n in alive if n != smallest), key=lambda n: (len(tables[n]), n))
            moving.append((e, goal))
            tables[smallest].remove(e)
            tables[goal].append(e)
    else:
        largest = max(alive, key=lambda n: (len(tables[n]), -n))
        if len(tables[largest]) - len(tables[smallest]) >= 2:
            e = rng.choice(tables[largest])
            tables[largest].remove(e)
            tables[smallest].append(e)
            moving.append((e, smallest))
    for e, _ in moving:
        e.seat = 0
    for e, goal in moving:
        taken = {x.seat for x in tables[goal] if x is not e}
        e.seat = rng.choice([s for s in range(1, TOURNAMENT_TABLE + 1) if s not in taken])
        e.table = goal
        next_hand[goal] = max(next_hand[goal], t + rng.uniform(8, 20))
    for n in list(tables):
        if not tables[n]:
            del tables[n]
            next_hand.pop(n, None)
            big_blinds.pop(n, None)


def play_world(
    players: int = 40, hands: int = 2500, *, days: int = 4, tournaments: int = 2, seed: int = 33
) -> World:
    """Play the world: ``players`` accounts (9 of them the planted cheats, at least 12 in all) over
    ``days`` days from 2026-03-02, ``tournaments`` sit-and-gos, about ``hands`` hands in all (fewer
    when the tables cannot deal that many: :attr:`World.hands` counts them)."""
    if players < 12:
        raise ValueError(f"a world needs 12 players or more, not {players}")
    rng = random.Random(f"{seed}/world")
    width = max(3, len(str(players)))
    pids = [f"p{k:0{width}d}" for k in range(1, players + 1)]
    addresses = _addresses(players, rng)
    roles = rng.sample(pids, 9)
    dumper, receiver, soft_a, soft_b, person_a, person_b, home_a, home_b, robot = roles
    honest = [pid for pid in pids if pid not in roles]
    grinding = min(len(honest), max(2, players // 8))
    styles = rng.sample(honest, min(len(honest), grinding + max(2, players // 10)))
    grinders, nights = set(styles[:grinding]), set(styles[grinding:])
    profiles: dict[str, Profile] = {}
    for k, (pid, ip) in enumerate(zip(pids, addresses, strict=True)):
        if pid == robot:
            kind = "robot"
        elif pid in grinders:
            kind = "grinder"
        elif pid in nights:
            kind = "night"
        else:
            kind = "casual"
        hour = GRINDER_HOURS[sorted(grinders).index(pid) % len(GRINDER_HOURS)] if pid in grinders else 0.0
        profiles[pid] = _profile(pid, ip, kind, random.Random(f"{seed}/{pid}/{k}"), hour)
    for pid in roles[:8]:  # regulars of the evening (less than the grinders): enough hands to be seen
        p = profiles[pid]
        p.play = rng.uniform(0.9, 1.0)
        p.hour = rng.uniform(16.5, 19.5)
        p.hours = (3.0, 4.0)
        p.tables, p.fewest_tables = 3, 2
    # the receiver bets (the aggressive end of the honest styles), the dumper sees flops (the loose end)
    r, d = profiles[receiver], profiles[dumper]
    r.vpip, r.aggression = rng.uniform(0.3, 0.45), rng.uniform(0.6, 0.8)
    r.pfr = r.vpip * rng.uniform(0.6, 0.8)
    d.vpip, d.loose = rng.uniform(0.35, 0.45), rng.uniform(0.1, 0.15)
    profiles[person_b].hash = profiles[person_a].hash
    profiles[home_b].ip = profiles[home_a].ip
    for a, b, pref_a, pref_b in (
        (dumper, receiver, 0.6, 0.3),
        (soft_a, soft_b, 0.75, 0.75),
        (home_a, home_b, 0.85, 0.85),
        (person_a, person_b, 0.3, 0.3),
    ):
        profiles[a].partner, profiles[a].partner_pref = b, pref_a
        profiles[b].partner, profiles[b].partner_pref = a, pref_b
    cheats = Cheats(dumper, receiver, (soft_a, soft_b))

    # the schedule
    schedule_rng = random.Random(f"{seed}/schedule")
    sessions: dict[str, list[Session]] = {}
    for pid in pids:
        if pid in (dumper, soft_b, home_b, person_a, person_b):
            continue
        sessions[pid] = _own_sessions(profiles[pid], days, schedule_rng)
    sessions[dumper] = _follow(profiles[dumper], sessions[receiver], 0.9, schedule_rng)
    sessions[soft_b] = _follow(profiles[soft_b], sessions[soft_a], 0.75, schedule_rng)
    sessions[home_b] = _follow(profiles[home_b], sessions[home_a], 0.8, schedule_rng)
    for follower in (dumper, soft_b, home_b):
        sessions[follower] += _own_sessions(profiles[follower], days, schedule_rng)[::3]
    # one person, two accounts: both at once from one address, or one of them (the second from its
    # own address, or from the first's), in turn
    sessions[person_a], sessions[person_b] = [], []
    a, b = profiles[person_a], profiles[person_b]
    modes = ("both", "first", "second", "both", "second from the first's address")
    turn = schedule_rng.randrange(len(modes))
    for k, s in enumerate(_own_sessions(a, days, schedule_rng)):
        mode = modes[(turn + k) % len(modes)]
        if mode in ("both", "first"):
            sessions[person_a].append(s)
        if mode.startswith("second"):
            ip = a.ip if mode.endswith("address") else b.ip
            sessions[person_b].append(Session(b, s.start, s.end, s.tables, ip, breaks=s.breaks))
        elif mode == "both":
            later = s.start + schedule_rng.uniform(0.5, 5) * MINUTE
            tables = schedule_rng.randint(1, b.tables)
            end = s.end - schedule_rng.uniform(0, 15) * MINUTE
            sessions[person_b].append(Session(b, later, end, tables, a.ip))
    everyone: list[Session] = []
    for pid in pids:
        kept = _apart(sessions[pid])
        for s in kept:
            s.sid = profiles[pid].session_id()
        everyone += kept
    everyone.sort(key=lambda s: (s.start, s.player.pid))

    writer = _Writer()
    deposit_rng = random.Random(f"{seed}/deposits")
    for s in everyone:
        amount = deposit_rng.choice((2_000, 2_000, 5_000, 5_000, 10_000))
        writer.add(s.start, _deposit(s, s.start, f"dep-{s.sid}"), s, amount)

    # the tournaments, then the cash tables with the hands left
    tournament_rng = random.Random(f"{seed}/tournaments")
    dealt = 0
    for k in range(tournaments):
        day = min(days - 1, int((k + 0.5) * days / tournaments))
        start = EPOCH + day * DAY + (19 + (k % 2)) * HOUR
        pool = [pid for pid in pids if pid != robot]
        size = min(len(pool), tournament_rng.randint(8, 12))
        chosen = tournament_rng.sample(pool, size)
        if k == 0:
            for pid in (home_a, home_b):
                if pid not in chosen:
                    chosen[chosen.index(next(x for x in chosen if x not in (home_a, home_b)))] = pid
        dealt += _tournament(k, start, [profiles[pid] for pid in chosen], cheats, writer, tournament_rng)

    seating = _Seating(random.Random(f"{seed}/seating"))
    seating.run(everyone)
    cash, interval = _cash_hands(seating.tables, hands - dealt, cheats, writer, seed)
    planted = Planted(
        chip_dumping=(dumper, receiver),
        soft_play=(soft_a, soft_b),
        same_person=(person_a, person_b),
        same_ip=(home_a, home_b),
        robot=robot,
        honest=tuple(sorted(honest)),
    )
    return World(writer.finish(), planted, dealt + cash, interval)
