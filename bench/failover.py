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
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _worktree import worktree

from coffre.adapters.broker import EmbeddedBroker
from coffre.adapters.journal import JournalSet
from coffre.config import Settings

from pipeline import (
    WARM_START,
    Code,
    Message,
    PhaseTimeout,
    Session,
    event,
    is_ingest,
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
    arrived = session.reader.arrived
    outcome.acquitted = sum(1 for cid in platform.sent if cid in arrived)
    latency = spread([(arrived[c] - t) * 1000 for c, t in platform.sent.items() if c in arrived])
    if latency:
        outcome.latency_ms = {name: round(value, 1) for name, value in latency.items()}
    statuses = {session.reader.status[c] for c in platform.sent if c in arrived}
    if statuses - {"recorded"}:
        outcome.problems.append(f"acquittal statuses {sorted(statuses)}")


def check_journals(journal_dir: Path, outcome: Outcome, coffres: int, warm: int) -> None:
    """IDEvt 1..n per coffre, every published event (and the warm-up's) exactly once."""
    journals = JournalSet(journal_dir)  # opening a journal verifies its chain
    players: list[int] = []
    try:
        for coffre in range(21, 21 + coffres):
            records = list(journals.journal("0099", coffre).records())
            if [r.id_evt for r in records] != list(range(1, len(records) + 1)):
                outcome.problems.append(f"coffre {coffre}: IDEvt not 1..{len(records)}")
            players += [int(m.group(1)) for r in records if (m := PLAYER.search(r.event))]
    finally:
        journals.close()
    outcome.journal_events = len(players)
    expected = sorted([*range(outcome.published), *warm_players(coffres, warm)])
    if sorted(players) != expected:
        extra, missing = len(players) - len(set(players)), set(expected) - set(players)
        outcome.problems.append(f"journals: {extra} recorded twice, {len(missing)} missing")


def warm_players(coffres: int, warm: int) -> range:
    return range(warm, warm + coffres)


def measure(args: argparse.Namespace, code: Code) -> Outcome:
    replicas = args.replicas if code.replicas else 1
    outcome = Outcome(code.label, code.revision, replicas)
    data = Path(tempfile.mkdtemp(prefix="coffre-failover-"))
    (data / "logs").mkdir()
    say(f"== {code.label} ({code.revision}): {replicas} ingest replica(s), data in {data}")
    broker = EmbeddedBroker(log_path=data / "logs" / "broker.log") if not args.bootstrap else None
    stack = None
    try:
        code.verify_imports(data)
        bootstrap = broker.start() if broker else args.bootstrap
        settings = Settings(
            bootstrap_servers=bootstrap,
            topic_prefix=f"failover{uuid.uuid4().hex[:8]}.",
            data_dir=data / "stack",
            partitions=args.partitions,
            ops_port=0,
            api_port=0,
        )
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


def report(outcome: Outcome) -> None:
    resumes = [k.resume_s for k in outcome.kills]
    say(
        f"{outcome.label} ({outcome.revision}), {outcome.replicas} ingest: resume after SIGKILL "
        f"{resumes} s (target {TARGET_RESUME_S:g} s); back: {[k.rejoin_max_ms for k in outcome.kills]} ms; "
        f"{outcome.published:,} published, {outcome.acquitted:,} acquitted, {outcome.journal_events:,} in the "
        f"journals (warm-up included); latency {outcome.latency_ms}"
    )
    for problem in outcome.problems:
        say(f"  PROBLEM: {problem}")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=300.0, help="offered load, events/s")
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
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (text on stderr)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    if (
        min(args.rate, args.kills, args.replicas, args.coffres, args.partitions) <= 0
        or args.restart_after < 0
    ):
        parser.error("--rate, --kills, --replicas, --coffres and --partitions must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
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
            for side, code in codes.items():
                sides[side] = measure(args, code)
                report(sides[side])
            if args.baseline:
                base, now = sides["baseline"].to_json(), sides["current"].to_json()
                if base["resume_s_max"] and now["resume_s_max"]:
                    say(f"worst resume: {now['resume_s_max'] / base['resume_s_max']:.2f} × the baseline's")
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


if __name__ == "__main__":
    sys.exit(main())
