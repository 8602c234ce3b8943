"""The signals, computed from :class:`~.state.SignalState`'s counters: each with its score, the
threshold it is compared with, whether it crossed it, and the events behind it. A signal is a
reason to look, never a finding of the rules (docs/signals.md).

Each statistic is named after the work it follows (:data:`SOURCES`); the thresholds are
:class:`Thresholds` (``coffre signals --threshold NAME=VALUE``). A pair's or a player's
*strength* is its highest score as a multiple of its threshold; subjects are ranked by the number of
signals they cross, then by strength.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from .facts import Ref
from .state import SLOT, Pair, Player, SignalState, sessions_of, stdev, top_evidence

SOURCES: dict[str, str] = {
    "same_hash": (
        "Annex 1.3 of the DET: HashJoueur is the SHA-1 of one person's name, birth date and town, so two "
        "IDJoueur of one operator under one HashJoueur are one person with two accounts; décret 2016-1326 "
        "art. 2 forbids team play."
    ),
    "several_hashes": (
        "Annex 1.3 of the DET (HashJoueur): one IDJoueur under two HashJoueur is an account whose "
        "holder changed, unless a MODIFINFOPERSO corrected the identity (the money trail judges that)."
    ),
    "shared_session": (
        "Annex 1.3: IDSession is one connection; two players in one connection are one device or one person."
    ),
    "shared_ip": (
        "Operators' published practice (multi-accounting and collusion reviews begin with shared "
        "addresses: Yampolskiy, 'Detecting and Controlling Cheating in Online Poker', IEEE CCNC 2008)."
    ),
    "chip_dumping": (
        "Smed, Knuutila & Hakonen, 'Towards Swift and Accurate Collusion Detection', GAME-ON 2007 (chip "
        "dumping; pairwise statistics); Mazrooei, Archibald & Bowling, 'Automating Collusion Detection in "
        "Sequential Games', AAAI 2013 (judging a pair's decisions with every player's cards known, "
        "against a baseline). Statistic: a one-sided binomial test of the player's weak calls and "
        "best-hand folds facing the partner against its own rate facing everyone else."
    ),
    "soft_play": (
        "Smed, Knuutila & Hakonen 2007 (soft play: colluders avoid betting into each other); "
        "Yampolskiy 2008. Statistic: a one-sided binomial test of each player's bets and raises while "
        "the partner is live, against its own rate while only others are, in spots with as many "
        "opponents; the pair's score is the weaker of its two directions (soft play is mutual)."
    ),
    "long_sessions": (
        "Yampolskiy & Govindaraju, 'Embedded Noninteractive Continuous Bot Detection', ACM Computers in "
        "Entertainment 2008 (session and timing statistics of poker bots); operators' published bot "
        "reviews (unbroken play for very long periods)."
    ),
    "many_tables": "Yampolskiy & Govindaraju 2008; operators' published bot reviews (many tables at once).",
    "around_the_clock": (
        "Yampolskiy & Govindaraju 2008 (a program needs no sleep): days on which the player never "
        "paused for the rest a person needs."
    ),
    "regular_timing": (
        "Yampolskiy & Govindaraju 2008; Chen et al., 'Identifying MMORPG Bots: A Traffic Analysis "
        "Approach', EURASIP JASP 2009 (timing too regular for a person): coefficient of variation of "
        "the seconds per action of the rounds the player acted in."
    ),
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Where each signal crosses (documented in docs/signals.md, with the false-positive rate each
    gave on honest players)."""

    same_hash: float = 2
    """IDJoueur under one HashJoueur."""
    several_hashes: float = 2
    shared_session: float = 1
    """Events of a second player in one IDSession."""
    shared_ip: float = 1
    """Hands (or tournament registrations) the two played from one IPJoueur."""
    chip_dumping: float = 6.0
    """−log10 of the binomial test's p-value."""
    soft_play: float = 4.0
    """−log10 of the binomial test's p-value, the weaker direction."""
    long_sessions: float = 12.0
    """Hours of play without a pause longer than :attr:`pause_minutes`."""
    many_tables: float = 8
    """Tables in one five-minute slot."""
    around_the_clock: float = 2
    """Days on which the player never paused :attr:`rest_hours`."""
    regular_timing: float = 0.25
    """Coefficient of variation, at most."""
    min_decisions: int = 12
    """Decisions facing the partner (chip dumping) or with it live (soft play), each way."""
    pause_minutes: int = 15
    rest_hours: float = 5.0
    min_rounds: int = 200
    """Rounds acted in before the timing is judged."""

    def with_values(self, values: dict[str, str]) -> Thresholds:
        known = {f.name: f.type for f in fields(self)}
        changed: dict[str, Any] = {}
        for name, text in values.items():
            if name not in known:
                raise ValueError(f"no threshold {name!r} (known: {', '.join(sorted(known))})")
            current = getattr(self, name)
            try:
                changed[name] = type(current)(float(text)) if isinstance(current, int) else float(text)
            except ValueError:
                raise ValueError(f"threshold {name}: {text!r} is not a number") from None
        return replace(self, **changed)


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    score: float
    threshold: float
    below: bool
    """Crossed when the score is at most the threshold (regular timing), else at least."""
    detail: str
    evidence: tuple[tuple[float, Ref], ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def crossed(self) -> bool:
        return self.score <= self.threshold if self.below else self.score >= self.threshold

    @property
    def ratio(self) -> float:
        if self.below:
            return self.threshold / self.score if self.score > 0 else 100.0
        return self.score / self.threshold if self.threshold > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "signal": self.name,
            "score": round(self.score, 4),
            "threshold": self.threshold,
            "crossed": self.crossed,
            "comparison": "at most" if self.below else "at least",
            "detail": self.detail,
            "source": SOURCES[self.name],
            "metrics": self.metrics,
            "evidence": [
                {"weight": w, "id_oper": r[0], "id_coffre": r[1], "id_evt": r[2]} for w, r in self.evidence
            ],
        }


@dataclass(frozen=True, slots=True)
class Subject:
    kind: str
    """``pair`` or ``player``."""
    players: tuple[str, ...]
    signals: tuple[Signal, ...]

    @property
    def crossed(self) -> int:
        return sum(s.crossed for s in self.signals)

    @property
    def strength(self) -> float:
        return max((s.ratio for s in self.signals), default=0.0)

    def rank_key(self) -> tuple[int, float, tuple[str, ...]]:
        return (-self.crossed, -self.strength, self.players)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "players": list(self.players),
            "signals_crossed": self.crossed,
            "strength": round(self.strength, 4),
            "signals": [s.as_json() for s in self.signals],
        }


# --------------------------------------------------------------------------- binomial tests


def _log_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + (k * math.log(p) if k else 0.0)
        + ((n - k) * math.log1p(-p) if n - k else 0.0)
    )


def _log10_sum(logs: list[float]) -> float:
    top = max(logs)
    return (top + math.log(sum(math.exp(x - top) for x in logs))) / math.log(10)


def surprise_high(k: int, n: int, p: float) -> float:
    """−log10 P(X ≥ k), X binomial (n, p): how unlikely so many at the player's usual rate."""
    if n == 0 or k <= n * p:
        return 0.0
    p = min(max(p, 1e-9), 1 - 1e-9)
    return max(0.0, -_log10_sum([_log_pmf(i, n, p) for i in range(k, n + 1)]))


def surprise_low(k: int, n: int, p: float) -> float:
    """−log10 P(X ≤ k), X binomial (n, p): how unlikely so few at the player's usual rate."""
    if n == 0 or k >= n * p:
        return 0.0
    p = min(max(p, 1e-9), 1 - 1e-9)
    return max(0.0, -_log10_sum([_log_pmf(i, n, p) for i in range(0, k + 1)]))


# --------------------------------------------------------------------------- the signals


def _dumping(pair: Pair, side: int, giver: Player, t: Thresholds) -> tuple[float, dict[str, Any]]:
    n, weak, folds = pair.facing[side]
    bad = weak + folds
    all_n, all_weak, all_folds = giver.facing
    other_n, other_bad = all_n - n, all_weak + all_folds - bad
    rate = (other_bad + 1) / (other_n + 2)
    flow = pair.flow if side == 0 else -pair.flow
    score = surprise_high(bad, n, rate) if n >= t.min_decisions and flow > 0 else 0.0
    return score, {
        "decisions_facing_partner": n,
        "weak_calls": weak,
        "best_hand_folds": folds,
        "rate_facing_partner": round(bad / n, 4) if n else None,
        "rate_facing_others": round(other_bad / other_n, 4) if other_n else None,
        "decisions_facing_others": other_n,
        "chips_to_partner": round(flow, 2),
    }


def _softness(pair: Pair, side: int, player: Player, t: Thresholds) -> tuple[float, dict[str, Any]]:
    """The player's bets and raises with the partner live, against what its own rate with only
    others live, in spots with as many opponents (1, 2, 3 or more), would give."""
    mine = pair.aggression[side]
    n = sum(bucket[0] for bucket in mine)
    aggressive = sum(bucket[1] for bucket in mine)
    expected = 0.0
    for (pair_n, pair_a), (all_n, all_a) in zip(mine, player.aggression, strict=True):
        expected += pair_n * (all_a - pair_a + 1) / (all_n - pair_n + 2)
    rate = expected / n if n else 0.0
    score = surprise_low(aggressive, n, rate) if n >= t.min_decisions else 0.0
    return score, {
        "decisions_with_partner_live": n,
        "bets_or_raises": aggressive,
        "rate_with_partner": round(aggressive / n, 4) if n else None,
        "rate_expected_from_others": round(rate, 4) if n else None,
    }


def pair_signals(state: SignalState, key: str, pair: Pair, t: Thresholds) -> Subject | None:
    a, b = key.split("|", 1)
    signals: list[Signal] = []
    player_a, player_b = state.players.get(a), state.players.get(b)
    same_oper = a.split("/", 1)[0] == b.split("/", 1)[0]
    holders = (
        sorted(set(player_a.hashes) & set(player_b.hashes)) if player_a and player_b and same_oper else []
    )
    if holders:
        oper = a.split("/", 1)[0]
        signals.append(
            Signal(
                "same_hash",
                max(len(state.hashes.get(f"{oper}/{h}", ())) for h in holders),
                t.same_hash,
                False,
                f"one HashJoueur ({holders[0]}) behind {a} and {b}",
                tuple(top_evidence(pair.evidence.get("hash", []))),
                {"hashes": holders},
            )
        )
    if pair.shared_session:
        signals.append(
            Signal(
                "shared_session",
                pair.shared_session,
                t.shared_session,
                False,
                f"{a} and {b} in one IDSession",
                tuple(top_evidence(pair.evidence.get("session", []))),
            )
        )
    if pair.shared_ip:
        signals.append(
            Signal(
                "shared_ip",
                pair.shared_ip,
                t.shared_ip,
                False,
                f"{pair.shared_ip} hand(s) or registration(s) of {a} and {b} from one IPJoueur",
                tuple(top_evidence(pair.evidence.get("ip", []))),
            )
        )
    if player_a is not None and player_b is not None:
        best: tuple[float, int, dict[str, Any]] | None = None
        for side, giver in ((0, player_a), (1, player_b)):
            score, metrics = _dumping(pair, side, giver, t)
            if best is None or score > best[0]:
                best = (score, side, metrics)
        assert best is not None
        score, side, metrics = best
        if score > 0:
            giver_name, taker = (a, b) if side == 0 else (b, a)
            signals.append(
                Signal(
                    "chip_dumping",
                    score,
                    t.chip_dumping,
                    False,
                    f"{giver_name} facing {taker}'s bets: {metrics['weak_calls']} weak call(s) and "
                    f"{metrics['best_hand_folds']} fold(s) of the best hand in "
                    f"{metrics['decisions_facing_partner']} decisions ({metrics['rate_facing_partner']}, "
                    f"against {metrics['rate_facing_others']} facing others); "
                    f"{metrics['chips_to_partner']} chips moved to {taker}",
                    tuple(top_evidence(pair.evidence.get("dump_ab" if side == 0 else "dump_ba", []))),
                    {"from": giver_name, "to": taker, **metrics},
                )
            )
        score_a, metrics_a = _softness(pair, 0, player_a, t)
        score_b, metrics_b = _softness(pair, 1, player_b, t)
        soft = min(score_a, score_b)
        if soft > 0:
            signals.append(
                Signal(
                    "soft_play",
                    soft,
                    t.soft_play,
                    False,
                    f"{pair.meetings} hands together; with the other live {a} bet or raised in "
                    f"{metrics_a['rate_with_partner']} of {metrics_a['decisions_with_partner_live']} decisions "
                    f"(its rate with others only: {metrics_a['rate_expected_from_others']}), {b} in "
                    f"{metrics_b['rate_with_partner']} of {metrics_b['decisions_with_partner_live']} "
                    f"({metrics_b['rate_expected_from_others']})",
                    tuple(top_evidence(pair.evidence.get("passive", []))),
                    {"meetings": pair.meetings, a: metrics_a, b: metrics_b},
                )
            )
    return Subject("pair", (a, b), tuple(signals)) if signals else None


def _rest_days(slots: dict[int, list[int]], rest: float) -> tuple[int, list[str]]:
    """UTC days with at least two hours of play on which the player never paused ``rest`` hours."""
    per_day: dict[int, list[int]] = {}
    day_slots = 86400 // SLOT
    for slot in slots:
        per_day.setdefault(slot // day_slots, []).append(slot % day_slots)
    days: list[str] = []
    for day, active in sorted(per_day.items()):
        if len(active) * SLOT < 2 * 3600:
            continue
        active.sort()
        pauses = [active[0], day_slots - 1 - active[-1]]  # before the first and after the last
        pauses += [b - a - 1 for a, b in itertools.pairwise(active)]
        if max(pauses) * SLOT < rest * 3600:
            days.append(datetime.fromtimestamp(day * 86400, UTC).date().isoformat())
    return len(days), days


def player_signals(state: SignalState, key: str, player: Player, t: Thresholds) -> Subject | None:
    signals: list[Signal] = []
    if len(player.hashes) > 1:
        signals.append(
            Signal(
                "several_hashes",
                len(player.hashes),
                t.several_hashes,
                False,
                f"{key} under {len(player.hashes)} HashJoueur",
                tuple((1.0, tuple(ref)) for ref in player.hashes.values()),  # type: ignore[misc]
                {"hashes": sorted(player.hashes)},
            )
        )
    if player.slots:
        runs = sessions_of(player.slots, t.pause_minutes * 60 // SLOT)
        first, last = max(runs, key=lambda r: r[1] - r[0])
        hours = (last - first + 1) * SLOT / 3600
        session_hours = player.longest_session[0] / 3600
        signals.append(
            Signal(
                "long_sessions",
                max(hours, session_hours),
                t.long_sessions,
                False,
                f"{hours:.1f} h of hands without a {t.pause_minutes}-minute pause (from "
                f"{_when(first)}); longest IDSession {session_hours:.1f} h",
                (),
                {
                    "longest_hours": round(hours, 2),
                    "from": _when(first),
                    "sessions": len(runs),
                    "longest_idsession_hours": round(session_hours, 2),
                },
            )
        )
        widest = max(player.slots, key=lambda s: (len(player.slots[s]), -s))
        signals.append(
            Signal(
                "many_tables",
                len(player.slots[widest]),
                t.many_tables,
                False,
                f"{len(player.slots[widest])} table(s) within five minutes ({_when(widest)})",
                (),
                {"at": _when(widest)},
            )
        )
        restless, days = _rest_days(player.slots, t.rest_hours)
        if restless:
            signals.append(
                Signal(
                    "around_the_clock",
                    restless,
                    t.around_the_clock,
                    False,
                    f"{restless} day(s) without a {t.rest_hours:g}-hour pause",
                    (),
                    {"days": days[:31]},
                )
            )
    n, mean, _ = player.timing
    if n >= t.min_rounds and mean > 0:
        cv = stdev(player.timing) / mean
        signals.append(
            Signal(
                "regular_timing",
                cv,
                t.regular_timing,
                True,
                f"{mean:.2f} s per action in {int(n)} rounds, coefficient of variation {cv:.3f}",
                (),
                {"rounds": int(n), "mean_seconds_per_action": round(mean, 3)},
            )
        )
    return Subject("player", (key,), tuple(signals)) if signals else None


def _when(slot: int) -> str:
    return datetime.fromtimestamp(slot * SLOT, UTC).strftime("%Y-%m-%d %H:%M")


def evaluate(state: SignalState, thresholds: Thresholds | None = None) -> list[Subject]:
    """Every pair and player with a signal, ranked (most signals crossed, then strength)."""
    t = thresholds or Thresholds()
    subjects: list[Subject] = []
    for key, pair in state.pairs.items():
        if pair.shared_ip or pair.shared_session or pair.evidence.get("hash") or _enough(pair, t):
            found = pair_signals(state, key, pair, t)
            if found is not None:
                subjects.append(found)
    for key, player in state.players.items():
        found = player_signals(state, key, player, t)
        if found is not None:
            subjects.append(found)
    subjects.sort(key=Subject.rank_key)
    return subjects


def _enough(pair: Pair, t: Thresholds) -> bool:
    return (
        max(pair.facing[0][0], pair.facing[1][0]) >= t.min_decisions
        or min(sum(b[0] for b in pair.aggression[0]), sum(b[0] for b in pair.aggression[1]))
        >= t.min_decisions
    )
