"""The signals' running statistics: counters per player and per pair of players, fed one event at a
time, kept between runs (a JSON file), so that a new lot adds to them instead of recomputing a
year (issue 33). :mod:`.scores` turns them into signals.

Everything here is a count, a sum, or a bounded list of evidence, so that two states fed disjoint
events can be merged (:meth:`SignalState.merge`) and the order the coffres are read in does not
matter: the activity of a player is kept as the set of five-minute *slots* it played in (with the
tables of each), from which the sessions, the tables at once and the hours of the day are computed
when the signals are.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..catalogue.base import Event
from .equity import heads_up_equity
from .facts import AccountFacts, HandFacts, Ref, epoch, facts_of

SLOT = 300
"""Seconds per slot of activity (five minutes)."""
EVIDENCE = 12
"""Events kept per pair and kind of evidence: the heaviest (the most chips, the latest)."""
SESSION_MEMORY = 7 * 86400
"""An IDSession not seen for this long (behind the latest event read) is forgotten: a session's
identifier is reused by nobody in practice, and keeping every one of a year would cost gigabytes."""
STATE_VERSION = 2


@dataclass(frozen=True, slots=True)
class Judging:
    """How a decision is judged when the counters are fed (part of the state: changing it needs a
    new state, ``--rebuild``)."""

    weak: float = 0.25
    """A call or raise with at most this share of the pot against the aggressor is *weak*."""
    strong: float = 0.60
    """A fold with at least this share against the aggressor is a fold of the *best hand*."""


def _evidence(kept: list[list[Any]], weight: float, ref: Ref) -> None:
    kept.append([round(weight, 4), *ref])
    if len(kept) > 2 * EVIDENCE:
        kept.sort(key=lambda e: (-e[0], e[1], e[2], e[3]))
        del kept[EVIDENCE:]


def top_evidence(kept: list[list[Any]]) -> list[tuple[float, Ref]]:
    """The heaviest events kept, each once (a hand may be kept for several of its decisions)."""
    out: list[tuple[float, Ref]] = []
    seen: set[Ref] = set()
    for e in sorted(kept, key=lambda e: (-e[0], e[1], e[2], e[3])):
        ref = (e[1], e[2], e[3])
        if ref not in seen:
            seen.add(ref)
            out.append((e[0], ref))
            if len(out) == EVIDENCE:
                break
    return out


@dataclass
class Player:
    hands: int = 0
    facing: list[int] = field(default_factory=lambda: [0, 0, 0])
    """Decisions facing a bet or raise with the equity known: [decisions, weak calls, best-hand folds]."""
    aggression: list[list[int]] = field(default_factory=lambda: [[0, 0], [0, 0], [0, 0]])
    """Decisions other than folds, by the opponents still live (1, 2, 3 or more): [decisions, bets or
    raises]."""
    slots: dict[int, list[int]] = field(default_factory=dict)
    """Slot -> the tables (:attr:`SignalState.tables` numbers) played in it."""
    timing: list[float] = field(default_factory=lambda: [0, 0.0, 0.0])
    """Welford's [count, mean, M2] of the seconds per action of the rounds it acted in."""
    hashes: dict[str, list[Any]] = field(default_factory=dict)
    """HashJoueur -> the first event carrying it (a Ref as a list)."""
    longest_session: list[Any] = field(default_factory=lambda: [0, None])
    """[seconds, the IDSession's first event]: the longest IDSession its events span."""

    def as_json(self) -> list[Any]:
        return [
            self.hands,
            self.facing,
            self.aggression,
            {str(k): v for k, v in self.slots.items()},
            self.timing,
            self.hashes,
            self.longest_session,
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> Player:
        hands, facing, aggression, slots, timing, hashes, longest = data
        return cls(hands, facing, aggression, {int(k): v for k, v in slots.items()}, timing, hashes, longest)


@dataclass
class Pair:
    """Two players, ``a`` < ``b`` in the key ``a|b``; the directed counters are [a's, b's]."""

    meetings: int = 0
    facing: list[list[int]] = field(default_factory=lambda: [[0, 0, 0], [0, 0, 0]])
    """[a facing b's bets, b facing a's bets], each [decisions, weak calls, best-hand folds]."""
    aggression: list[list[list[int]]] = field(
        default_factory=lambda: [[[0, 0], [0, 0], [0, 0]], [[0, 0], [0, 0], [0, 0]]]
    )
    """[a's decisions with b live, b's with a live], each as :attr:`Player.aggression`."""
    flow: float = 0.0
    """Chips from a to b, net (negative: from b to a), each hand's losses shared among its winners."""
    shared_ip: int = 0
    shared_session: int = 0
    evidence: dict[str, list[list[Any]]] = field(default_factory=dict)
    """Kind (``dump_ab``, ``dump_ba``, ``passive``, ``ip``, ``session``, ``hash``) -> [weight, IDOper,
    IDCoffre, IDEvt]."""

    def as_json(self) -> list[Any]:
        return [
            self.meetings,
            self.facing,
            self.aggression,
            round(self.flow, 6),
            self.shared_ip,
            self.shared_session,
            self.evidence,
        ]

    @classmethod
    def from_json(cls, data: list[Any]) -> Pair:
        return cls(*data)

    def keep(self, kind: str, weight: float, ref: Ref) -> None:
        _evidence(self.evidence.setdefault(kind, []), weight, ref)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which events a run feeds (a state keeps the scope it was fed with)."""

    opers: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None

    def admits(self, id_oper: str, date_evt: str) -> bool:
        if self.opers and id_oper not in self.opers:
            return False
        if self.since is None and self.until is None:
            return True
        when = epoch(date_evt)
        return (self.since is None or when >= self.since) and (self.until is None or when < self.until)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"opers": list(self.opers)}


def pair_key(a: str, b: str) -> tuple[str, int]:
    """The pair's key and the side ``a`` is on (0: first)."""
    return (f"{a}|{b}", 0) if a < b else (f"{b}|{a}", 1)


@dataclass
class SignalState:
    judging: Judging = field(default_factory=Judging)
    players: dict[str, Player] = field(default_factory=dict)
    pairs: dict[str, Pair] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)
    """Tech -> a small number (the slots keep numbers, not names)."""
    hashes: dict[str, list[str]] = field(default_factory=dict)
    """IDOper/HashJoueur -> the operator's players (IDOper/IDJoueur) it was seen with: one person
    may hold an account at each operator, never two at one."""
    sessions: dict[str, list[Any]] = field(default_factory=dict)
    """IDOper/IDSession -> [first time, last time, first event (a Ref), players]."""
    tournaments: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """IDOper/Tech of a registration (POINSCRIT) -> "ip:…" or "session:…" -> its players."""
    cursor: dict[str, int] = field(default_factory=dict)
    """IDOper/IDCoffre -> the last IDEvt fed: a run goes on from there."""
    events: int = 0
    hands: int = 0
    latest: int = 0
    scope: dict[str, Any] = field(default_factory=dict)
    """Which events the state was fed (``coffre signals``' --oper, --since, --until)."""

    # -- feeding

    def player(self, key: str) -> Player:
        found = self.players.get(key)
        if found is None:
            found = self.players[key] = Player()
        return found

    def pair(self, a: str, b: str) -> tuple[Pair, int]:
        key, side = pair_key(a, b)
        found = self.pairs.get(key)
        if found is None:
            found = self.pairs[key] = Pair()
        return found, side

    def seen(self, ref: Ref) -> bool:
        """Whether ``ref`` was fed already (a run over an archive goes on from the cursor)."""
        return ref[2] <= self.cursor.get(f"{ref[0]}/{ref[1]}", 0)

    def _advance(self, ref: Ref) -> None:
        key = f"{ref[0]}/{ref[1]}"
        if ref[2] > self.cursor.get(key, 0):
            self.cursor[key] = ref[2]
        self.events += 1

    def add_event(self, facts: HandFacts | AccountFacts | None, ref: Ref) -> None:
        """One event's facts (None: an event the signals do not read), in IDEvt order per coffre."""
        if isinstance(facts, HandFacts):
            self.add_hand(facts)
        elif isinstance(facts, AccountFacts):
            self.add_account(facts)
        self._advance(ref)

    def add_hand(self, hand: HandFacts) -> None:
        self.hands += 1
        self.latest = max(self.latest, hand.end)
        seats = hand.seats
        table = self.tables.setdefault(hand.tech, len(self.tables))
        first, last = hand.start // SLOT, hand.end // SLOT
        for seat in seats.values():
            player = self.player(seat.player)
            player.hands += 1
            for slot in range(first, min(last, first + 24) + 1):  # a hand of over 2 hours counts 2 hours
                tables = player.slots.setdefault(slot, [])
                if table not in tables and len(tables) < 32:
                    tables.append(table)
        keys = [seats[s].player for s in sorted(seats)]
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if a != b:
                    self.pair(a, b)[0].meetings += 1
        self._shared_ips(hand)
        self._flow(hand)
        self._decisions(hand)
        self._timing(hand)

    def _shared_ips(self, hand: HandFacts) -> None:
        by_ip: dict[str, list[str]] = {}
        for seat in hand.seats.values():
            by_ip.setdefault(seat.ip, []).append(seat.player)
        for players in by_ip.values():
            for i, a in enumerate(players):
                for b in players[i + 1 :]:
                    if a != b:
                        pair, _ = self.pair(a, b)
                        pair.shared_ip += 1
                        pair.keep("ip", hand.end, hand.ref)

    def _flow(self, hand: HandFacts) -> None:
        """Each loser's loss shared among the winners in proportion to what each won."""
        winners = [(s.player, s.net) for s in hand.seats.values() if s.net > 0]
        won = sum(net for _, net in winners)
        if won <= 0:
            return
        for loser in hand.seats.values():
            if loser.net >= 0:
                continue
            for winner, net in winners:
                if winner == loser.player:
                    continue
                moved = -loser.net * net / won
                pair, side = self.pair(loser.player, winner)
                pair.flow += moved if side == 0 else -moved

    def _decisions(self, hand: HandFacts) -> None:
        seats, judging = hand.seats, self.judging
        equities = hand.equities if hand.equities is not None else decision_equities(hand)
        passive: set[str] = set()  # the pairs whose passive play this hand is kept as evidence
        for d, equity in zip(hand.decisions, equities, strict=True):
            me = seats.get(d.seat)
            if me is None:
                continue
            player = self.players[me.player]
            if d.kind != "fold" and d.opponents:  # could it bet or raise, with whom live?
                aggressive = d.kind == "raise"
                bucket = min(len(d.opponents), 3) - 1
                counts = player.aggression[bucket]
                counts[0] += 1
                counts[1] += aggressive
                for seat in d.opponents:
                    other = seats.get(seat)
                    if other is None or other.player == me.player:
                        continue
                    pair, side = self.pair(me.player, other.player)
                    counts = pair.aggression[side][bucket]
                    counts[0] += 1
                    counts[1] += aggressive
                    if not aggressive and (pair_key(me.player, other.player)[0]) not in passive:
                        passive.add(pair_key(me.player, other.player)[0])
                        pair.keep("passive", hand.end, hand.ref)
            if equity is None:
                continue
            bettor = seats[d.aggressor]  # type: ignore[index]  # an equity is against the aggressor
            weak = d.kind != "fold" and equity <= judging.weak
            folded_best = d.kind == "fold" and equity >= judging.strong
            player.facing[0] += 1
            player.facing[1] += weak
            player.facing[2] += folded_best
            pair, side = self.pair(me.player, bettor.player)
            counts = pair.facing[side]
            counts[0] += 1
            counts[1] += weak
            counts[2] += folded_best
            if weak or folded_best:
                weight = d.amount if weak else max(0.0, -me.net) + 1e-3
                pair.keep("dump_ab" if side == 0 else "dump_ba", weight, hand.ref)

    def _timing(self, hand: HandFacts) -> None:
        for round_time in hand.rounds:
            if round_time.seconds is None or not round_time.actors or not round_time.actions:
                continue
            per_action = round_time.seconds / round_time.actions
            for seat in set(round_time.actors):
                me = hand.seats.get(seat)
                if me is None:
                    continue
                t = self.players[me.player].timing
                t[0] += 1
                delta = per_action - t[1]
                t[1] += delta / t[0]
                t[2] += delta * (per_action - t[1])

    def add_account(self, account: AccountFacts) -> None:
        self.latest = max(self.latest, account.when)
        player = self.player(account.player)
        ref = list(account.ref)
        player.hashes.setdefault(account.hash, ref)
        holders = self.hashes.setdefault(f"{account.ref[0]}/{account.hash}", [])  # one operator's
        if account.player not in holders:
            holders.append(account.player)
            for other in holders[:-1]:
                pair, _ = self.pair(account.player, other)
                pair.keep("hash", 1.0, account.ref)
        oper = account.ref[0]
        key = f"{oper}/{account.session}"
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = [account.when, account.when, ref, [account.player]]
        else:
            session[0] = min(session[0], account.when)
            session[1] = max(session[1], account.when)
            if account.player not in session[3]:
                for other in session[3]:
                    pair, _ = self.pair(account.player, other)
                    pair.shared_session += 1
                    pair.keep("session", account.when, account.ref)
                session[3].append(account.player)
        span = session[1] - session[0]
        if span > player.longest_session[0]:
            player.longest_session = [span, session[2]]
        if account.tech is not None:
            groups = self.tournaments.setdefault(f"{oper}/{account.tech}", {})
            for label in (f"ip:{account.ip}" if account.ip else None, f"session:{account.session}"):
                if label is None:
                    continue
                together = groups.setdefault(label, [])
                if account.player in together:
                    continue
                for other in together:
                    pair, _ = self.pair(account.player, other)
                    if label.startswith("ip:"):
                        pair.shared_ip += 1
                        pair.keep("ip", account.when, account.ref)
                together.append(account.player)
        if len(self.sessions) > 4096 and self.events % 4096 == 0:
            self.forget_sessions()

    def forget_sessions(self) -> None:
        horizon = self.latest - SESSION_MEMORY
        for key in [k for k, s in self.sessions.items() if s[1] < horizon]:
            del self.sessions[key]

    # -- merging and keeping

    def merge(self, other: SignalState) -> None:
        """Add ``other``'s counts (fed other events) to these."""
        if other.judging != self.judging:
            raise ValueError("states judged with different thresholds cannot be merged")
        renumber = {
            number: self.tables.setdefault(tech, len(self.tables)) for tech, number in other.tables.items()
        }
        for key, theirs in other.players.items():
            mine = self.player(key)
            mine.hands += theirs.hands
            mine.facing = [x + y for x, y in zip(mine.facing, theirs.facing, strict=True)]
            mine.aggression = _added(mine.aggression, theirs.aggression)
            for slot, tables in theirs.slots.items():
                here = mine.slots.setdefault(slot, [])
                for t in tables:
                    if renumber[t] not in here:
                        here.append(renumber[t])
            mine.timing = _welford_merge(mine.timing, theirs.timing)
            for h, ref in theirs.hashes.items():
                mine.hashes.setdefault(h, ref)
            if theirs.longest_session[0] > mine.longest_session[0]:
                mine.longest_session = theirs.longest_session
        for key, theirs_pair in other.pairs.items():
            mine_pair = self.pairs.setdefault(key, Pair())
            mine_pair.meetings += theirs_pair.meetings
            for side in (0, 1):
                mine_pair.facing[side] = [
                    x + y for x, y in zip(mine_pair.facing[side], theirs_pair.facing[side], strict=True)
                ]
                mine_pair.aggression[side] = _added(mine_pair.aggression[side], theirs_pair.aggression[side])
            mine_pair.flow += theirs_pair.flow
            mine_pair.shared_ip += theirs_pair.shared_ip
            mine_pair.shared_session += theirs_pair.shared_session
            for kind, kept in theirs_pair.evidence.items():
                for weight, *ref in kept:
                    mine_pair.keep(kind, weight, tuple(ref))  # type: ignore[arg-type]
        for h, holders in other.hashes.items():
            for p in holders:
                if p not in self.hashes.setdefault(h, []):
                    self.hashes[h].append(p)
        for key, theirs_session in other.sessions.items():
            self.sessions.setdefault(key, theirs_session)
        for key, groups in other.tournaments.items():
            mine_groups = self.tournaments.setdefault(key, {})
            for label, players in groups.items():
                here = mine_groups.setdefault(label, [])
                here.extend(p for p in players if p not in here)
        for key, last in other.cursor.items():
            self.cursor[key] = max(self.cursor.get(key, 0), last)
        self.events += other.events
        self.hands += other.hands
        self.latest = max(self.latest, other.latest)

    def as_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "judging": {"weak": self.judging.weak, "strong": self.judging.strong},
            "events": self.events,
            "hands": self.hands,
            "latest": self.latest,
            "scope": self.scope,
            "cursor": self.cursor,
            "tables": self.tables,
            "hashes": self.hashes,
            "sessions": self.sessions,
            "tournaments": self.tournaments,
            "players": {k: p.as_json() for k, p in self.players.items()},
            "pairs": {k: p.as_json() for k, p in self.pairs.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SignalState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(
                f"a signals state of version {data.get('version')}, not {STATE_VERSION}: rebuild it"
            )
        return cls(
            Judging(**data["judging"]),
            {k: Player.from_json(v) for k, v in data["players"].items()},
            {k: Pair.from_json(v) for k, v in data["pairs"].items()},
            data["tables"],
            data["hashes"],
            data["sessions"],
            data["tournaments"],
            data["cursor"],
            data["events"],
            data["hands"],
            data["latest"],
            data.get("scope", {}),
        )

    def save(self, path: Path) -> None:
        """Written to a temporary file then renamed: a run killed while saving keeps the old state."""
        temporary = path.with_name(path.name + ".tmp")
        with gzip.open(temporary, "wt", encoding="utf-8", compresslevel=3) as out:
            json.dump(self.as_json(), out, separators=(",", ":"))
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path) -> SignalState:
        with gzip.open(path, "rt", encoding="utf-8") as data:
            return cls.from_json(json.load(data))


def decision_equities(hand: HandFacts) -> tuple[float | None, ...]:
    """Per decision of ``hand``, the decider's share of the pot against the player whose bet or raise
    it faces (:func:`~.equity.heads_up_equity`, from both holes and the board then); None for a
    check, a decision facing no bet (or only forced bets), one facing its own, or another seat of
    the same player, a variant without a board, a hole not fully recorded, or cards the hand deals
    twice (``CARD_DEALT_TWICE``: the audit's finding; the signals pass the decision over). What costs most in the
    signals, so ``coffre signals --jobs`` computes it in worker processes."""
    seats, regle = hand.seats, hand.regle
    out: list[float | None] = []
    for d in hand.decisions:
        me, bettor = seats.get(d.seat), seats.get(d.aggressor) if d.aggressor is not None else None
        if (
            d.kind == "check"
            or me is None
            or bettor is None
            or d.aggressor == d.seat
            or bettor.player == me.player
        ):
            out.append(None)
        else:
            try:
                out.append(heads_up_equity(regle, me.hole, bettor.hole, d.board))
            except ValueError:  # a card dealt twice, a hole too long: the audit's finding, no equity
                out.append(None)
    return tuple(out)


def facts_with_equities(event: Event) -> HandFacts | AccountFacts | None:
    """:func:`~.facts.facts_of` with a hand's :func:`decision_equities` computed now: what a worker
    process sends, so that the equities (what costs most) are computed in parallel."""
    facts = facts_of(event)
    if isinstance(facts, HandFacts):
        return dataclasses.replace(facts, equities=decision_equities(facts))
    return facts


def _added(mine: list[list[int]], theirs: list[list[int]]) -> list[list[int]]:
    return [[x + y for x, y in zip(a, b, strict=True)] for a, b in zip(mine, theirs, strict=True)]


def _welford_merge(a: list[float], b: list[float]) -> list[float]:
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if not n:
        return [0, 0.0, 0.0]
    delta = mean_b - mean_a
    return [n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n]


def sessions_of(slots: Iterable[int], gap: int) -> list[tuple[int, int]]:
    """Runs of active slots (first, last) where no pause is longer than ``gap`` slots."""
    runs: list[tuple[int, int]] = []
    for slot in sorted(slots):
        if runs and slot - runs[-1][1] <= gap + 1:
            runs[-1] = (runs[-1][0], slot)
        else:
            runs.append((slot, slot))
    return runs


def stdev(timing: list[float]) -> float:
    n, _, m2 = timing
    return math.sqrt(m2 / (n - 1)) if n > 1 else 0.0
