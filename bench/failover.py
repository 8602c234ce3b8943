"""How long acquittals stop when an ingest replica dies, under load, and that nothing is lost.

    .venv/bin/python bench/failover.py [--rate 300] [--kills 4] [--replicas 2] [--json] [--baseline REV]

On the embedded broker (or ``--bootstrap``), a stack with ``--replicas`` ingest processes is warmed
up, then a platform publishes POINSCRIT events at ``--rate`` events/s over ``--coffres`` coffres
without pause while, ``--kills`` times, one ingest replica (each in turn) is SIGKILLed and
started again ``--restart-after`` seconds later (by default long after its partitions moved:
what a node loss does, where the replacement pod comes much later). For each kill:

- **resume**: the seconds from the SIGKILL to the moment every coffre has an acquittal again for
  an event published after the SIGKILL (issue 11's target: 10 s with 2 replicas at 300 events/s);
- **rejoin**: the worst acquittal latency of the events published in the ``--settle`` seconds after
  the replica came back (its return moves partitions again).

At the end the platform stops, every acquittal is awaited, the stack stops, and each coffre's
journal is read back: IDEvt 1..n, every published event exactly once, the chain recomputed (the
journal verifies it when opened). ``--baseline REV`` runs the same scenario on REV's services first
(a temporary git worktree; REV with a single ingest runs one replica, which is then all of ingest)
and prints the ratios. Exit status: 0 when measured and nothing lost, 1 otherwise, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _worktree import worktree

from coffre.adapters.archive import signing_files
from coffre.adapters.storage import LocalStorage
from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID

from pipeline import (
    BROKERS,
    WARM_START,
    Code,
    Message,
    PhaseTimeout,
    Session,
    event,
    is_ingest,
    open_broker,
    percentile,
    say,
    send,
    spread,
    start_stack,
    text_to,
)

TARGET_RESUME_S = 10.0
PLAYER = re.compile(rb"<IDJoueur>bench-(\d+)</IDJoueur>")


@dataclass
class Kill:
    victim: str
    resume_s: float | None = None  # None: not within --resume-timeout
    rejoin_max_ms: float | None = None


@dataclass
class Outcome:
    label: str
    revision: str
    replicas: int
    broker: str = "embedded"
    kills: list[Kill] = field(default_factory=list)
    published: int = 0
    acquitted: int = 0
    latency_ms: dict[str, float] = field(default_factory=dict)
    journal_events: int = 0
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        resumes = [k.resume_s for k in self.kills]
        measured = [r for r in resumes if r is not None]
        return {
            "code": self.label,
            "revision": self.revision,
            "broker": self.broker,
            "ingest_replicas": self.replicas,
            "kills": [k.__dict__ for k in self.kills],
            "resume_s_max": max(measured) if len(measured) == len(resumes) and measured else None,
            "published": self.published,
            "acquitted": self.acquitted,
            "journal_events": self.journal_events,
            "latency_ms": self.latency_ms,
            "problems": self.problems,
        }


class Platform:
    """Publishes at ``rate`` until told to stop; remembers when each event went out."""

    def __init__(self, session: Session, rate: float, coffres: int):
        self.session = session
        self.rate = rate
        self.coffres = coffres
        self.sent: dict[str, float] = {}  # correlation id -> perf_counter at send
        self.stop = asyncio.Event()

    async def publish(self) -> None:
        start = time.perf_counter()
        n = 0
        while not self.stop.is_set():
            target = start + n / self.rate
            now = time.perf_counter()
            if target > now:
                await asyncio.sleep(target - now)
            message: Message = (f"f-{n}", event(n, self.coffres))
            self.sent[message[0]] = time.perf_counter()
            await send(self.session.producer, self.session.topics.events_in, message)
            n += 1
        await self.session.producer.flush()

    def coffre(self, correlation: str) -> int:
        return 21 + int(correlation[2:]) % self.coffres

    def check(self, victim: str) -> None:
        """Raise if a service other than ``victim`` (killed on purpose, started again later) died."""
        dead = {
            name: child.returncode
            for name, child in self.session.stack.children.items()
            if name != victim and child.poll() is not None
        }
        if dead:
            raise RuntimeError(f"service(s) exited: {dead}")

    async def resumed(self, moment: float, timeout: float, victim: str) -> float | None:
        """Seconds from ``moment`` until every coffre has an acquittal for an event sent after it."""
        arrived = self.session.reader.arrived
        waiting = set(range(21, 21 + self.coffres))
        seen: set[str] = set()
        deadline = moment + timeout
        while time.perf_counter() < deadline:
            for cid, sent in list(self.sent.items()):
                if cid in seen or sent <= moment:
                    continue
                if cid in arrived:
                    seen.add(cid)
                    waiting.discard(self.coffre(cid))
            if not waiting:
                return round(time.perf_counter() - moment, 2)
            self.check(victim)
            await asyncio.sleep(0.05)
        return None


async def scenario(session: Session, args: argparse.Namespace, names: list[str], outcome: Outcome) -> None:
    stack = session.stack
    platform = Platform(session, args.rate, args.coffres)
    publisher = asyncio.create_task(platform.publish())
    try:
        await asyncio.sleep(args.settle)
        for n in range(args.kills):
            victim = names[n % len(names)]
            kill = Kill(victim)
            outcome.kills.append(kill)
            moment = time.perf_counter()
            stack.kill(victim, signal.SIGKILL)
            stack.children[victim].wait()
            resume = asyncio.create_task(platform.resumed(moment, args.resume_timeout, victim))
            await asyncio.sleep(args.restart_after)
            stack.spawn(victim)
            back = time.perf_counter()
            kill.resume_s = await resume
            say(f"SIGKILL {victim}: acquittals resumed for every coffre after {kill.resume_s} s")
            await asyncio.sleep(args.settle)
            window = [cid for cid, t in list(platform.sent.items()) if back < t <= back + args.settle]
            if not await session.reader.wait_for(window, args.resume_timeout, session.check):
                outcome.problems.append(
                    f"{victim} came back: acquittals missing {args.resume_timeout:.0f} s later"
                )
            else:
                kill.rejoin_max_ms = round(
                    max((session.reader.arrived[c] - platform.sent[c] for c in window), default=0.0) * 1000, 1
                )
                say(f"{victim} back: worst acquittal latency {kill.rejoin_max_ms:,.0f} ms")
    finally:
        platform.stop.set()
        await publisher
    outcome.published = len(platform.sent)
    if not await session.reader.wait_for(platform.sent, args.resume_timeout * 3, session.check):
        outcome.problems.append("acquittals missing at the end")
    tally_acquittals(outcome, platform.sent, session.reader)


def tally_acquittals(outcome: Any, sent: dict[str, float], reader: Any) -> None:
    """Into ``outcome`` (``acquitted``, ``latency_ms``, ``problems``): how many of the events
    ``sent`` (correlation id -> monotonic send time) ``reader`` saw acquitted, their latency
    spread, and any status other than ``recorded``."""
    arrived = reader.arrived
    outcome.acquitted = sum(1 for cid in sent if cid in arrived)
    latency = spread([(arrived[c] - t) * 1000 for c, t in sent.items() if c in arrived])
    if latency:
        outcome.latency_ms = {name: round(value, 1) for name, value in latency.items()}
    statuses = {reader.status[c] for c in sent if c in arrived}
    if statuses - {"recorded"}:
        outcome.problems.append(f"acquittal statuses {sorted(statuses)}")


def check_journals(journal_dir: Path, outcome: Outcome, coffres: int, warm: int) -> None:
    """IDEvt 1..n per coffre, every published event (and the warm-up's) exactly once: what the
    stack's vault recorded, its archive's lots then its journal's unsealed window (the journal no
    longer holds what is sealed)."""
    from coffre_vault.history import recorded_events

    archive = LocalStorage(journal_dir.parents[1] / "archive")  # <data>/vault/journal -> <data>/archive
    players: list[int] = []
    for coffre in range(21, 21 + coffres):
        records = recorded_events(archive, journal_dir, "0099", coffre)  # opening the journal verifies it
        if [r.id_evt for r in records] != list(range(1, len(records) + 1)):
            outcome.problems.append(f"coffre {coffre}: IDEvt not 1..{len(records)}")
        players += [int(m.group(1)) for r in records if (m := PLAYER.search(r.event))]
    outcome.journal_events = len(players)
    expected = sorted([*range(outcome.published), *warm_players(coffres, warm)])
    if sorted(players) != expected:
        extra, missing = len(players) - len(set(players)), set(expected) - set(players)
        outcome.problems.append(f"journals: {extra} recorded twice, {len(missing)} missing")


def warm_players(coffres: int, warm: int) -> range:
    return range(warm, warm + coffres)


def bench_broker(
    args: argparse.Namespace, broker_kind: str, data: Path, prefix: str, **extra: Any
) -> tuple[Any, str, Settings]:
    """The broker of a run (``--bootstrap``'s, else one started of ``broker_kind``; None when not
    started here) and the stack's settings on it: its own topics, no ops or API ports."""
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker, bootstrap = open_broker(broker_kind, data)
    settings = Settings(
        bootstrap_servers=bootstrap,
        topic_prefix=f"{prefix}{uuid.uuid4().hex[:8]}.",
        data_dir=data / "stack",
        partitions=args.partitions,
        ops_port=0,
        api_port=0,
        **extra,
    )
    return broker, bootstrap, settings


def measure(args: argparse.Namespace, code: Code, broker_kind: str = "embedded") -> Outcome:
    replicas = args.replicas if code.replicas else 1
    outcome = Outcome(code.label, code.revision, replicas, broker_kind)
    data = Path(tempfile.mkdtemp(prefix="coffre-failover-"))
    (data / "logs").mkdir()
    say(f"== {code.label} ({code.revision}) on {broker_kind}: {replicas} ingest replica(s), data in {data}")
    broker = None
    stack = None
    try:
        code.verify_imports(data)
        broker, bootstrap, settings = bench_broker(args, broker_kind, data, "failover")
        stack = start_stack(settings, bootstrap, code, replicas, data)
        names = [name for name in stack.children if is_ingest(name)]

        async def run() -> None:
            async with Session(stack, args) as session:
                await scenario(session, args, names, outcome)

        asyncio.run(run())
        codes = stack.stop()
        stack = None
        if any(c not in (0, None) for c in codes.values()):
            outcome.problems.append(f"exit codes at stop: {codes}")
        check_journals(data / "stack" / "vault" / "journal", outcome, args.coffres, WARM_START)
    except (PhaseTimeout, RuntimeError, OSError) as exc:
        outcome.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        if stack is not None:
            stack.stop()
        if broker:
            broker.stop()
        if args.keep or outcome.problems:
            say(f"data kept in {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    return outcome


# the chaos run (issue 22, point 3) ------------------------------------------------------------------

TARGET_CHAOS_RESUME_S = 5.0
TARGET_CHAOS_MEDIAN_MS = 1000.0
CHAOS_VICTIMS = ("ingest", "vault", "ingest-2", "acquittal")
"""The services hit in turn (the regulator API and the auditor are off the acquittal's path)."""


@dataclass
class Hit:
    at_s: float
    """Seconds into the run."""
    victim: str
    action: str
    """SIGKILL or SIGTERM (then started again at once, as Kubernetes does), or SIGSTOP (SIGCONT
    ``--pause`` seconds later)."""
    resume_s: float | None = None
    """Seconds from the signal until every coffre has an acquittal for an event published after it
    (None: not within ``--resume-timeout``)."""
    down_s: float | None = None
    """SIGKILL/SIGTERM: seconds from the signal until the process had exited and was started again."""
    ready_s: float | None = None
    """SIGKILL/SIGTERM: seconds from the new process's start to its "ready" line (imports, the access
    check, topics, and the vault's start-up recovery), as its log shows."""
    spawned: float | None = None


def hit_plan(victims: Sequence[str], count: int) -> list[tuple[str, str]]:
    """The ``count`` hits: the victims in turn, each one's actions in turn (an ingest replica's
    include SIGSTOP, the others' are SIGKILL and SIGTERM)."""
    plan = []
    for k in range(count):
        victim = victims[k % len(victims)]
        actions = ("SIGKILL", "SIGTERM", "SIGSTOP") if is_ingest(victim) else ("SIGKILL", "SIGTERM")
        plan.append((victim, actions[(k // len(victims)) % len(actions)]))
    return plan


def plan_of(text: str, victims: Sequence[str] = CHAOS_VICTIMS) -> list[tuple[str, str]]:
    """``--plan``: ``SERVICE:SIGNAL`` items, comma-separated, SERVICE one of ``victims``."""
    plan = []
    for item in text.split(","):
        victim, _, action = item.strip().partition(":")
        if victim not in victims or action not in ("SIGKILL", "SIGTERM", "SIGSTOP"):
            raise argparse.ArgumentTypeError(
                f"{item!r}: SERVICE:SIGKILL|SIGTERM|SIGSTOP, SERVICE one of {', '.join(victims)}"
            )
        plan.append((victim, action))
    return plan


class LibrdkafkaPlatform:
    """A platform as an operator's would be: librdkafka (confluent-kafka), in a thread of its own,
    publishing at ``rate`` events/s over ``coffres`` coffres (half keyed by IDCoffre, hashed by
    librdkafka's CRC32, half by request), remembering when each event went out. ``config``: more
    of the producer's settings (``enable.idempotence``, say)."""

    def __init__(
        self, bootstrap: str, topic: str, rate: float, coffres: int, config: dict[str, Any] | None = None
    ):
        self.bootstrap = bootstrap
        self.config = config or {}
        self.topic = topic
        self.rate = rate
        self.coffres = coffres
        self.sent: dict[str, float] = {}  # correlation id -> perf_counter at produce()
        self.order: list[str] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._publish, name="platform", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(90)
        if self.error is not None:
            raise RuntimeError(f"the platform failed: {self.error!r}")

    def coffre(self, correlation: str) -> int:
        return 21 + int(correlation[2:]) % self.coffres

    def _publish(self) -> None:
        from confluent_kafka import Producer

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed.append(f"{msg.key()!r}: {err}")

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "linger.ms": 0,
                    "acks": "all",
                    # a silent broker (paused) waited out 5 s, as coffre's clients do (librdkafka's 60 s
                    # by default: docs/operations.md, "When a broker fails")
                    "socket.timeout.ms": 5000,
                    **self.config,
                }
            )
            start = time.perf_counter()
            n = 0
            while not self.stop.is_set():
                delay = start + n / self.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                correlation = f"c-{n}"
                key = str(21 + n % self.coffres) if n % 2 else correlation
                self.sent[correlation] = time.perf_counter()
                producer.produce(
                    self.topic,
                    value=event(n, self.coffres),
                    key=key.encode(),
                    headers=[(CORRELATION_ID, correlation.encode())],
                    on_delivery=delivered,
                )
                self.order.append(correlation)
                producer.poll(0)
                n += 1
            left = producer.flush(60)
            if left:
                self.failed.append(f"{left} event(s) not delivered within 60 s")
        except BaseException as exc:
            self.error = exc


@dataclass
class Chaos:
    label: str
    broker: str
    hits: list[Hit] = field(default_factory=list)
    minutes: float = 0.0
    published: int = 0
    acquitted: int = 0
    latency_ms: dict[str, float] = field(default_factory=dict)
    journal_events: int = 0
    verified: bool | None = None
    static: bool = False
    """Whether each service ran with its own COFFRE_KAFKA_GROUP_INSTANCE_ID (static membership)."""
    problems: list[str] = field(default_factory=list)

    def resumes(self) -> list[float | None]:
        return [h.resume_s for h in self.hits]

    def worst_resume(self) -> float | None:
        resumes = self.resumes()
        return None if not resumes or None in resumes else max(r for r in resumes if r is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.label,
            "broker": self.broker,
            "minutes": self.minutes,
            "static_membership": self.static,
            "hits": [{k: v for k, v in h.__dict__.items() if k != "spawned"} for h in self.hits],
            "resume_s_max": self.worst_resume(),
            "resume_s_median": (
                round(percentile(sorted(r for r in self.resumes() if r is not None), 0.5), 2)
                if any(r is not None for r in self.resumes())
                else None
            ),
            "published": self.published,
            "acquitted": self.acquitted,
            "journal_events": self.journal_events,
            "latency_ms": self.latency_ms,
            "verified": self.verified,
            "problems": self.problems,
        }


async def resumed(
    platform: LibrdkafkaPlatform, arrived: dict[str, float], moment: float, timeout: float
) -> float | None:
    """Seconds from ``moment`` until every coffre has an acquittal for an event sent after it."""
    waiting = set(range(21, 21 + platform.coffres))
    pending: dict[int, list[str]] = {c: [] for c in waiting}
    index = len(platform.order)
    while index > 0 and platform.sent[platform.order[index - 1]] > moment:
        index -= 1
    deadline = moment + timeout
    while time.perf_counter() < deadline:
        order = platform.order
        while index < len(order):
            cid = order[index]
            index += 1
            if platform.sent[cid] > moment and platform.coffre(cid) in waiting:
                pending[platform.coffre(cid)].append(cid)
        for coffre in list(waiting):
            if any(cid in arrived for cid in pending[coffre]):
                waiting.discard(coffre)
        if not waiting:
            return round(time.perf_counter() - moment, 2)
        await asyncio.sleep(0.02)
    return None


async def chaos_scenario(session: Session, args: argparse.Namespace, outcome: Chaos) -> None:
    stack = session.stack
    platform = LibrdkafkaPlatform(session.bootstrap, session.topics.events_in, args.rate, args.coffres)
    arrived = session.reader.arrived
    victims = [v for v in CHAOS_VICTIMS if v in stack.children]
    hits = max(1, int(args.chaos_minutes * 60 / args.every))
    plan = args.plan or hit_plan(victims, hits)
    measures: list[asyncio.Task[float | None]] = []
    paused: list[asyncio.Task[None]] = []
    began = time.perf_counter()
    platform.start()

    async def cont(name: str, child: Any) -> None:
        await asyncio.sleep(args.pause)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGCONT)

    try:
        await asyncio.sleep(args.settle)
        for k, (victim, action) in enumerate(plan):
            target = began + args.settle + k * args.every
            await asyncio.sleep(max(0.0, target - time.perf_counter()))
            dead = {n: c.returncode for n, c in stack.children.items() if c.poll() is not None}
            if dead:
                raise RuntimeError(f"service(s) exited by themselves: {dead}")
            child = stack.children[victim]
            hit = Hit(round(time.perf_counter() - began, 1), victim, action)
            outcome.hits.append(hit)
            moment = time.perf_counter()
            measures.append(asyncio.create_task(resumed(platform, arrived, moment, args.resume_timeout)))
            if action == "SIGSTOP":
                child.send_signal(signal.SIGSTOP)
                paused.append(asyncio.create_task(cont(victim, child)))
            else:
                child.send_signal(signal.SIGKILL if action == "SIGKILL" else signal.SIGTERM)
                code = await asyncio.to_thread(child.wait, args.resume_timeout)
                if action == "SIGTERM" and code not in (0, None):
                    outcome.problems.append(f"{victim} exited {code} at SIGTERM (not a clean drain)")
                hit.spawned = time.time()
                stack.spawn(victim)
                hit.down_s = round(time.perf_counter() - moment, 2)
            say(f"{hit.at_s:6.1f} s  {action} {victim}")
        await asyncio.sleep(args.every)
    finally:
        for task in paused:
            await task
        platform.finish()
    for hit, task in zip(outcome.hits, measures, strict=False):
        hit.resume_s = await task
        say(
            f"{hit.action} {hit.victim} at {hit.at_s} s: acquittals resumed for every coffre after {hit.resume_s} s"
        )
    outcome.minutes = round((time.perf_counter() - began) / 60, 2)
    outcome.published = len(platform.order)
    if platform.failed:
        outcome.problems.append(f"the platform: {len(platform.failed)} failed: {platform.failed[:3]}")
    if not await session.reader.wait_for(platform.sent, args.resume_timeout * 3, session.check):
        outcome.problems.append("acquittals missing at the end")
    tally_acquittals(outcome, platform.sent, session.reader)


READY = re.compile(r'"time": "([^"]+)".*"message": "(?:ingest|vault|acquittal) ready')


def startup_times(outcome: Chaos, logs: Path) -> None:
    """Each restarted service's seconds from its start to its "ready" line."""
    for hit in outcome.hits:
        if hit.spawned is None:
            continue
        try:
            lines = (logs / f"{hit.victim}.log").read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            found = READY.search(line)
            if found:
                at = dt.datetime.fromisoformat(found.group(1)).timestamp()
                if at >= hit.spawned:
                    hit.ready_s = round(at - hit.spawned, 2)
                    break


def verify_archive_command(
    settings: Settings, data: Path, certs: Sequence[Path] | None = None, timeout: float = 600.0
) -> tuple[bool, str]:
    """``coffre verify`` of the stack's archive, as an operator runs it (trusting ``certs``, by default
    the stack's signing certificate; at most ``timeout`` seconds): passes, and its output."""
    trusted = certs if certs is not None else [signing_files(settings)[1]]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffre.cli",
            "verify",
            str(settings.archive_root),
            *(arg for cert in trusted for arg in ("--cert", str(cert))),
        ],
        cwd=data,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode == 0, (done.stdout + done.stderr).strip()


def measure_chaos(args: argparse.Namespace, code: Code, broker_kind: str) -> Chaos:
    outcome = Chaos(code.label, broker_kind)
    data = Path(tempfile.mkdtemp(prefix="coffre-chaos-"))
    (data / "logs").mkdir()
    say(f"== chaos on {broker_kind} ({code.label}, {code.revision}): data in {data}")
    broker = None
    stack = None
    try:
        code.verify_imports(data)
        session = {"ingest_session_seconds": args.session} if args.session else {}
        broker, bootstrap, settings = bench_broker(args, broker_kind, data, "chaos", **session)
        static = args.static == "on" or (args.static == "auto" and broker_kind == "apache")
        outcome.static = static
        stack = start_stack(settings, bootstrap, code, args.replicas, data, static=static)

        async def run() -> None:
            async with Session(stack, args) as session:
                await chaos_scenario(session, args, outcome)

        asyncio.run(run())
        codes = stack.stop()
        stack = None
        if any(c not in (0, None) for c in codes.values()):
            outcome.problems.append(f"exit codes at stop: {codes}")
        startup_times(outcome, data / "stack" / "logs")
        check_journals(data / "stack" / "vault" / "journal", outcome, args.coffres, WARM_START)  # type: ignore[arg-type]
        outcome.verified, said = verify_archive_command(settings, data)
        if not outcome.verified:
            outcome.problems.append(f"coffre verify failed: {said[-600:]}")
    except (PhaseTimeout, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        outcome.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        if stack is not None:
            stack.stop()
        if broker is not None:
            broker.stop()
        if args.keep or outcome.problems:
            say(f"data kept in {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)
    return outcome


def chaos_report(outcomes: Sequence[Chaos]) -> None:
    for o in outcomes:
        say(
            f"{o.broker} ({o.label}): {len(o.hits)} hits over {o.minutes} min; resume after each hit "
            f"{o.resumes()} s (worst {o.worst_resume()} s, target {TARGET_CHAOS_RESUME_S:g} s); "
            f"{o.published:,} published, {o.acquitted:,} acquitted, {o.journal_events:,} in the journals; "
            f"latency {o.latency_ms} (median target < {TARGET_CHAOS_MEDIAN_MS:g} ms); "
            f"coffre verify {'passes' if o.verified else 'FAILS' if o.verified is False else 'not run'}"
        )
        for problem in o.problems:
            say(f"  PROBLEM: {problem}")
    if len(outcomes) < 2:
        return
    rows = [("", *(f"{o.broker} ({o.label})" for o in outcomes))]
    for action in ("SIGKILL", "SIGTERM", "SIGSTOP"):
        for victim in CHAOS_VICTIMS:
            cells = []
            for o in outcomes:
                got = [h.resume_s for h in o.hits if h.victim == victim and h.action == action]
                cells.append(", ".join("-" if r is None else f"{r:.2f}" for r in got) or "")
            if any(cells):
                rows.append((f"resume s, {action} {victim}", *cells))
    rows.append(("worst resume s", *(str(o.worst_resume()) for o in outcomes)))
    rows.append(("median resume s", *(str(o.to_json()["resume_s_median"]) for o in outcomes)))
    for victim in CHAOS_VICTIMS:
        cells = []
        for o in outcomes:
            got = sorted(h.ready_s for h in o.hits if h.victim == victim and h.ready_s is not None)
            cells.append(f"{got[len(got) // 2]:.2f} (max {got[-1]:.2f})" if got else "")
        if any(cells):
            rows.append((f"start to ready s, {victim}", *cells))
    for name in ("p50", "p99", "max"):
        rows.append((f"acquittal {name} ms", *(str(o.latency_ms.get(name)) for o in outcomes)))
    rows.append(
        ("lost / duplicated / misnumbered", *("none" if not o.problems else "SEE ABOVE" for o in outcomes))
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


def report(outcome: Outcome) -> None:
    resumes = [k.resume_s for k in outcome.kills]
    say(
        f"{outcome.label} ({outcome.revision}) on {outcome.broker}, {outcome.replicas} ingest: resume after SIGKILL "
        f"{resumes} s (target {TARGET_RESUME_S:g} s); back: {[k.rejoin_max_ms for k in outcome.kills]} ms; "
        f"{outcome.published:,} published, {outcome.acquitted:,} acquitted, {outcome.journal_events:,} in the "
        f"journals (warm-up included); latency {outcome.latency_ms}"
    )
    for problem in outcome.problems:
        say(f"  PROBLEM: {problem}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, help="offered load, events/s (default: 300; 150 with --chaos)")
    parser.add_argument(
        "--broker",
        choices=sorted(BROKERS),
        default="embedded",
        help="the embedded broker (Tansu), a single-node Apache Kafka (coffre up's own, LocalKafka), or both "
        "one after the other, printed side by side",
    )
    parser.add_argument(
        "--chaos",
        action="store_true",
        help="the chaos run: every service hit in turn every --every seconds (SIGKILL, SIGTERM, or an "
        "ingest replica SIGSTOPped for --pause seconds) while a librdkafka platform publishes",
    )
    parser.add_argument("--chaos-minutes", type=float, default=3.0, help="--chaos: minutes of hits")
    parser.add_argument("--every", type=float, default=7.0, help="--chaos: seconds between two hits")
    parser.add_argument(
        "--plan",
        type=plan_of,
        help="--chaos: the hits instead of --chaos-minutes' rotation, SERVICE:SIGNAL,… "
        "(say ingest:SIGKILL,vault:SIGTERM,ingest-2:SIGSTOP)",
    )
    parser.add_argument(
        "--session",
        type=float,
        help="--chaos: COFFRE_INGEST_SESSION_SECONDS, hence every group's session (default: coffre's)",
    )
    parser.add_argument(
        "--static",
        choices=("auto", "on", "off"),
        default="auto",
        help="--chaos: each service its own COFFRE_KAFKA_GROUP_INSTANCE_ID (auto: on Apache Kafka only)",
    )
    parser.add_argument(
        "--pause", type=float, default=5.0, help="--chaos: seconds a SIGSTOPped ingest replica stays paused"
    )
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs, one replica after the other")
    parser.add_argument("--replicas", type=int, default=2, help="ingest replicas")
    parser.add_argument(
        "--restart-after", type=float, default=12.0, help="seconds from a SIGKILL to the replica's restart"
    )
    parser.add_argument("--settle", type=float, default=8.0, help="seconds of steady load around each kill")
    parser.add_argument(
        "--resume-timeout", type=float, default=60.0, help="most seconds to wait for a resume"
    )
    parser.add_argument("--coffres", type=int, default=5, help="IDCoffre values the events are spread over")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of every topic")
    parser.add_argument("--bootstrap", help="HOST:PORT of a running Kafka (default: the embedded broker)")
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="most seconds to wait for a stack")
    parser.add_argument("--baseline", metavar="REV", help="run REV's services first, then the checkout's")
    parser.add_argument(
        "--only-baseline", action="store_true", help="--chaos: measure --baseline's services alone"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (text on stderr)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    if args.rate is None:
        args.rate = 150.0 if args.chaos else 300.0
    if args.bootstrap and args.broker != "embedded":
        parser.error("--bootstrap names the broker: leave --broker out")
    if (
        min(args.rate, args.kills, args.replicas, args.coffres, args.partitions) <= 0
        or args.restart_after < 0
    ):
        parser.error("--rate, --kills, --replicas, --coffres and --partitions must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.chaos:
        return main_chaos(args)
    out = sys.stdout
    sides: dict[str, Outcome] = {}
    try:
        with text_to(sys.stderr if args.json else None), contextlib.ExitStack() as exits:
            codes: dict[str, Code] = {}
            if args.baseline:
                scratch = Path(exits.enter_context(tempfile.TemporaryDirectory(prefix="coffre-baseline-")))
                try:
                    codes["baseline"] = Code.of(exits.enter_context(worktree(args.baseline, scratch / "wt")))
                except subprocess.CalledProcessError as exc:
                    print(f"--baseline {args.baseline}: {exc.stderr.strip()}", file=sys.stderr)
                    return 2
            codes["current"] = Code.current()
            for broker in BROKERS[args.broker]:
                for side, code in codes.items():
                    name = side if args.broker != "both" else f"{broker}/{side}"
                    sides[name] = measure(args, code, broker)
                    report(sides[name])
                if args.baseline:
                    prefix = "" if args.broker != "both" else f"{broker}/"
                    base, now = sides[f"{prefix}baseline"].to_json(), sides[f"{prefix}current"].to_json()
                    if base["resume_s_max"] and now["resume_s_max"]:
                        say(
                            f"{broker}: worst resume {now['resume_s_max'] / base['resume_s_max']:.2f} × the baseline's"
                        )
            if args.broker == "both":
                for o in sides.values():
                    report(o)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    status = 0 if all(not o.problems and all(k.resume_s for k in o.kills) for o in sides.values()) else 1
    if args.json:
        document: dict[str, Any] = {side: o.to_json() for side, o in sides.items()}
        document["args"] = {k: v for k, v in vars(args).items() if k != "json"}
        document["status"] = status
        print(json.dumps(document, indent=2), file=out, flush=True)
    return status


def main_chaos(args: argparse.Namespace) -> int:
    """``--chaos``: the chaos run on each broker asked (and REV's services first with ``--baseline``)."""
    outcomes: list[Chaos] = []
    try:
        with text_to(sys.stderr if args.json else None), contextlib.ExitStack() as exits:
            codes: list[Code] = []
            if args.baseline:
                scratch = Path(exits.enter_context(tempfile.TemporaryDirectory(prefix="coffre-baseline-")))
                try:
                    codes.append(Code.of(exits.enter_context(worktree(args.baseline, scratch / "wt"))))
                except subprocess.CalledProcessError as exc:
                    print(f"--baseline {args.baseline}: {exc.stderr.strip()}", file=sys.stderr)
                    return 2
            if not (args.baseline and args.only_baseline):
                codes.append(Code.current())
            for broker in BROKERS[args.broker]:
                for code in codes:
                    outcomes.append(measure_chaos(args, code, broker))
                    chaos_report(outcomes[-1:])
            chaos_report(outcomes)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    status = 0 if all(not o.problems and o.worst_resume() is not None for o in outcomes) else 1
    if args.json:
        document: dict[str, Any] = {
            "runs": [o.to_json() for o in outcomes],
            "args": {k: v for k, v in vars(args).items() if k != "json"},
            "status": status,
        }
        print(json.dumps(document, indent=2), file=sys.stdout, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
