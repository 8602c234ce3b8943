"""``coffre up``'s stack on the embedded broker at a steady rate for a long time: does it slow down?

    .venv/bin/python bench/soak.py [--rate 300] [--minutes 60] [--baseline REV --baseline-minutes 10]

The stack is started as ``coffre up`` starts it (``coffre.stack.Stack`` with no bootstrap: it starts
the embedded broker, Tansu in memory, and applies the embedded broker's defaults), then a platform
publishes POINSCRIT events at ``--rate`` events/s over ``--coffres`` coffres without pause. Every
``--every`` seconds (a minute by default) one line per side: the acquittal latency p50/p99 of the
events published in that interval, the acquittals/s achieved, the events still waiting for their
acquittal, the broker's CPU (share of one core) and RSS, and the records held by the largest
partition of events.in and normalized (the embedded broker lists every record batch of a partition
at each fetch: what a fetch costs grows with them).

With ``--baseline REV``, REV's services run too, at the same time, on a broker of their own and with
REV's topic defaults (``--baseline-partitions``), for ``--baseline-minutes``: before and after side
by side in one run, under the same machine load. Each side, once its load stops: every acquittal is
awaited, the stack is stopped and each coffre's journal read back (IDEvt 1..n, every published event
exactly once, the chain verified on opening). Exit status 0 when nothing was lost, 1 otherwise, 130
on Ctrl-C. ``--seconds`` replaces ``--minutes`` (the test runs it for a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
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
from aiokafka import AIOKafkaConsumer, TopicPartition
from failover import Outcome, Platform, check_journals, tally_acquittals

from coffre.adapters.kafka import PRODUCER_TUNING
from coffre.config import Settings

from pipeline import WARM_START, Code, Session, cpu_seconds, say, spread, start_stack, text_to

# The platform (this process's producer, pipeline.Session's) publishes one event at a time as it
# comes, without linger, on both sides alike, whatever COFFRE_PRODUCER_LINGER_MS says: only coffre's
# side of the batching changes between the sides.
PRODUCER_TUNING["linger_ms"] = 0


def rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MB (VmRSS), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class Interval:
    """One line of the soak: what happened between two reports."""

    minute: float
    published: int
    acquitted_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    waiting: int
    broker_cpu: float | None
    broker_rss_mb: float | None
    largest_partition: dict[str, int]

    def line(self, side: str) -> str:
        def ms(v: float | None) -> str:
            return f"{v:,.0f}" if v is not None else "-"

        held = " ".join(f"{k}={v:,}" for k, v in self.largest_partition.items())
        cpu = f"{self.broker_cpu:.0f}%" if self.broker_cpu is not None else "-"
        rss = f"{self.broker_rss_mb:,.0f} MB" if self.broker_rss_mb is not None else "-"
        return (
            f"[{side}] {self.minute:6.1f} min  p50 {ms(self.p50_ms):>6} ms  p99 {ms(self.p99_ms):>7} ms  "
            f"{self.acquitted_per_s:6.0f} acq/s  waiting {self.waiting:>7,}  broker {cpu:>5} {rss:>8}  "
            f"largest partition: {held}"
        )


@dataclass
class Side:
    name: str
    code: Code
    seconds: float
    partitions: int | None
    data: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="coffre-soak-")))
    outcome: Outcome | None = None
    intervals: list[Interval] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        assert self.outcome is not None
        return {
            **self.outcome.to_json(),
            "partitions": self.partitions,
            "seconds": self.seconds,
            "intervals": [i.__dict__ for i in self.intervals],
        }


async def largest_partitions(bootstrap: str, settings: Settings) -> dict[str, int]:
    """Records held by the largest partition of events.in and normalized (end offsets: a floor on
    Tansu, which can under-report the last batch)."""
    names = {"events.in": settings.topics.events_in, "normalized": settings.topics.normalized}
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await consumer.start()
    try:
        out = {}
        for label, topic in names.items():
            tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
            ends = await consumer.end_offsets(tps)
            out[label] = max(ends.values(), default=0)
        return out
    finally:
        await consumer.stop()


async def monitor(side: Side, session: Session, platform: Platform, every: float, began: float) -> None:
    """One :class:`Interval` every ``every`` seconds, printed as it comes."""
    broker = session.stack.broker
    pid = broker.pid if broker else None
    reader = session.reader
    last_cpu = cpu_seconds(pid) if pid else None
    last_t = time.perf_counter()
    last_arrived = len(reader.arrived)
    window_start = last_t
    while True:
        await asyncio.sleep(max(0.0, last_t + every - time.perf_counter()))
        now = time.perf_counter()
        sent = list(platform.sent.items())
        in_window = [(cid, t) for cid, t in sent if window_start <= t < now]
        latencies = [(reader.arrived[c] - t) * 1000 for c, t in in_window if c in reader.arrived]
        stats = spread(latencies) or {}
        cpu = cpu_seconds(pid) if pid else None
        arrived = len(reader.arrived)
        try:
            held = await asyncio.wait_for(largest_partitions(session.bootstrap, session.settings), 20)
        except Exception:  # a busy broker: the figure is missing, the soak goes on
            held = {}
        interval = Interval(
            minute=round((now - began) / 60, 2),
            published=len(in_window),
            acquitted_per_s=(arrived - last_arrived) / (now - last_t),
            p50_ms=stats.get("p50"),
            p99_ms=stats.get("p99"),
            waiting=sum(1 for c, _ in sent if c not in reader.arrived),
            broker_cpu=100 * (cpu - last_cpu) / (now - last_t)
            if cpu is not None and last_cpu is not None
            else None,
            broker_rss_mb=rss_mb(pid) if pid else None,
            largest_partition=held,
        )
        side.intervals.append(interval)
        say(interval.line(side.name))
        last_cpu, last_t, last_arrived, window_start = cpu, now, arrived, now


async def run_side(side: Side, args: argparse.Namespace, began: float) -> None:
    """Start the stack as ``coffre up`` does, load it for ``side.seconds``, drain, stop, read back."""
    outcome = side.outcome = Outcome(side.code.label, side.code.revision, 1)
    (side.data / "logs").mkdir(exist_ok=True)
    stack = None
    try:
        side.code.verify_imports(side.data)
        options: dict[str, Any] = {}
        if side.partitions is not None:
            options["partitions"] = side.partitions
        settings = Settings(
            topic_prefix=f"soak{uuid.uuid4().hex[:8]}.",
            data_dir=side.data / "stack",
            ops_port=0,
            api_port=0,
            **options,
        )
        (side.data / "stack" / "logs").mkdir(parents=True, exist_ok=True)
        stack = await asyncio.to_thread(start_stack, settings, None, side.code, 1, side.data)  # type: ignore[arg-type]
        side.partitions = stack.settings.partitions
        say(
            f"[{side.name}] {side.code.label} ({side.code.revision}): embedded broker {stack.bootstrap}, "
            f"{side.partitions} partition(s) per topic, data in {side.data}"
        )
        async with Session(stack, args) as session:
            platform = Platform(session, args.rate, args.coffres)
            publisher = asyncio.create_task(platform.publish())
            watcher = asyncio.create_task(monitor(side, session, platform, args.every, time.perf_counter()))
            deadline = time.perf_counter() + side.seconds
            try:
                while time.perf_counter() < deadline:
                    session.check()
                    if publisher.done():
                        publisher.result()
                    await asyncio.sleep(min(1.0, max(0.0, deadline - time.perf_counter())))
            finally:
                platform.stop.set()
                await publisher
            outcome.published = len(platform.sent)
            if not await session.reader.wait_for(platform.sent, args.drain_timeout, session.check):
                outcome.problems.append(
                    f"acquittals missing {args.drain_timeout:.0f} s after the load stopped"
                )
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            tally_acquittals(outcome, platform.sent, session.reader)
        codes = await asyncio.to_thread(stack.stop)
        stack = None
        if any(c not in (0, None) for c in codes.values()):
            outcome.problems.append(f"exit codes at stop: {codes}")
        check_journals(side.data / "stack" / "vault" / "journal", outcome, args.coffres, WARM_START)
    except Exception as exc:
        outcome.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        if stack is not None:
            await asyncio.to_thread(stack.stop)
        if args.keep or outcome.problems:
            say(f"[{side.name}] data kept in {side.data}")
        else:
            shutil.rmtree(side.data, ignore_errors=True)
    say(
        f"[{side.name}] done: {outcome.published:,} published, {outcome.acquitted:,} acquitted, "
        f"{outcome.journal_events:,} in the journals (warm-up included), latency {outcome.latency_ms}"
    )
    for problem in outcome.problems:
        say(f"[{side.name}]   PROBLEM: {problem}")


def summary(sides: Sequence[Side], every: float) -> None:
    """The intervals of every side, side by side, for the minutes they share."""
    if len(sides) < 2:
        return
    say("side by side (p99 ms / acquittals/s / broker CPU):")
    count = max(len(s.intervals) for s in sides)
    for i in range(count):
        cells = []
        for s in sides:
            if i < len(s.intervals):
                iv = s.intervals[i]
                p99 = f"{iv.p99_ms:,.0f}" if iv.p99_ms is not None else "-"
                cpu = f"{iv.broker_cpu:.0f}%" if iv.broker_cpu is not None else "-"
                cells.append(f"{s.name}: {p99:>7} ms {iv.acquitted_per_s:5.0f}/s {cpu:>5}")
            else:
                cells.append(f"{s.name}: stopped")
        say(f"  {(i + 1) * every / 60:6.1f} min  " + "   ".join(cells))


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=300.0, help="offered load, events/s")
    parser.add_argument("--minutes", type=float, default=60.0, help="duration of the load")
    parser.add_argument("--seconds", type=float, help="duration of the load in seconds (replaces --minutes)")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between two report lines")
    parser.add_argument("--coffres", type=int, default=5, help="IDCoffre values the events are spread over")
    parser.add_argument("--partitions", type=int, help="partitions per topic (default: coffre up's own)")
    parser.add_argument("--baseline", metavar="REV", help="run REV's services too, at the same time")
    parser.add_argument(
        "--baseline-minutes", type=float, help="how long the baseline runs (default: as long)"
    )
    parser.add_argument(
        "--baseline-partitions", type=int, default=6, help="partitions per topic of the baseline (main's: 6)"
    )
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="most seconds to wait for a stack")
    parser.add_argument(
        "--drain-timeout", type=float, default=600.0, help="most seconds to wait for the last acquittals"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (text on stderr)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    args.duration = args.seconds if args.seconds is not None else args.minutes * 60
    if min(args.rate, args.duration, args.coffres, args.every) <= 0:
        parser.error("--rate, --minutes/--seconds, --coffres and --every must be positive")
    args.timeout = args.drain_timeout  # Session's
    return args


async def run(sides: Sequence[Side], args: argparse.Namespace) -> None:
    began = time.perf_counter()
    await asyncio.gather(*(run_side(side, args, began) for side in sides))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = sys.stdout
    sides: list[Side] = []
    try:
        with text_to(sys.stderr if args.json else None), contextlib.ExitStack() as exits:
            if args.baseline:
                scratch = Path(
                    exits.enter_context(tempfile.TemporaryDirectory(prefix="coffre-soak-baseline-"))
                )
                try:
                    code = Code.of(exits.enter_context(worktree(args.baseline, scratch / "wt")))
                except subprocess.CalledProcessError as exc:
                    print(f"--baseline {args.baseline}: {exc.stderr.strip()}", file=sys.stderr)
                    return 2
                seconds = args.baseline_minutes * 60 if args.baseline_minutes else args.duration
                sides.append(Side("before", code, min(seconds, args.duration), args.baseline_partitions))
            sides.append(
                Side("after" if args.baseline else "soak", Code.current(), args.duration, args.partitions)
            )
            say(f"soak: {args.rate:g} events/s over {args.coffres} coffres for {args.duration / 60:g} min")
            asyncio.run(run(sides, args))
            summary(sides, args.every)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    status = 0 if all(s.outcome and not s.outcome.problems for s in sides) else 1
    if args.json:
        document: dict[str, Any] = {s.name: s.to_json() for s in sides}
        document["args"] = {k: v for k, v in vars(args).items() if k != "json"}
        document["status"] = status
        print(json.dumps(document, indent=2), file=out, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
