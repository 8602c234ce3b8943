"""The chaos soak (issue 30): coffre's stack at a steady rate for an hour while its processes are hit,
and what was recorded checked from outside.

    .venv/bin/python bench/soak.py --minutes 60 --rate 300 --hits every=30 [--seed N] [--json]
    .venv/bin/python bench/soak.py --minutes 60 --rate 300 --hits every=30 --cluster
    .venv/bin/python bench/soak.py --seconds 120 --rate 100 --hits every=12 --plan ingest:SIGKILL,vault:SIGTERM
    .venv/bin/python bench/soak.py --minutes 10 --hits every=30 --baseline bb25f14   # REV beside, same hits

**The stack.** ``coffre up``'s (:class:`coffre.commands.stack.Stack` without a bootstrap: its own Apache Kafka,
``LocalKafka``, its log under the data folder), with two ingest replicas and two vault replicas (``vault-2``
its own data folder, journal and signing key, the archive shared, as ``tests/pipeline/test_vault_failover.py``
runs them) and the acquittal service; the auditor and the regulator API, off the acquittal's path, are
not run. ``--cluster`` (``--broker cluster``): three Apache Kafka brokers instead (``tests/apache_kafka.py``:
``cluster()``), every topic replicated 3 times, ``min.insync.replicas`` 2. ``--bootstrap``: a running Kafka.

**The load.** A platform as an operator's would be (``failover.LibrdkafkaPlatform``: librdkafka, idempotent,
``acks=all``) publishes POINSCRITs at ``--rate`` over ``--coffres`` coffres; the acquittals are read with
librdkafka too, ``assign()``ed (``_checker.AcquittalLog``). The minutes start once every coffre has had
an acquittal and every event published until then has its own.

**The hits** (``--hits every=30``): one every 30 s, chosen at random (``--seed``, printed) among SIGKILL,
SIGTERM and SIGSTOP of each service process (ingest, ingest-2, vault, vault-2, acquittal) and, on the
cluster, SIGKILL and SIGSTOP of each broker; or the hits of ``--plan`` in order. A killed or terminated
service is started again as soon as it has exited (as ``coffre up`` and Kubernetes do), a SIGSTOPped one
gets SIGCONT ``--pause`` seconds later, a killed broker is started again ``--down`` seconds later. One hit
at a time: the next waits until acquittals are back for every coffre (or ``--resume-timeout``). A service
that exits by itself is a failure (it is started again, as ``coffre up`` would, and the run goes on).

**Printed.** One line per hit: the seconds until every coffre has an acquittal for an event published
after it (``failover.resumed``). One line per ``--report-every`` (a minute): acquittals/s; acquittal
latency p50/p99 of the events published in that minute, and p99 leaving out those in a hit's window
(published from the hit to ``--hit-window``, 10 s, after it, or in flight when it came: published before
it, acquitted after it); the longest pause between two acquittals; each process's RSS (its peak in
the minute) and CPU % of one core (from /proc); the brokers' disk (their log folders). At the end the
outside check, then a summary against the targets (0 lost; acquittals back within 5 s of any hit; p99 per
minute outside the hit windows within 1 s; memory flat: each process's RSS in the last minute within 20 %
of the first's). ``--json``: one JSON object on stdout, the text on stderr.

**The check** (``_checker.check_archive``), once the load stops, every acquittal came and the services
were stopped with SIGTERM: every event published acknowledged ``recorded`` or ``rejected``; each recorded
one exactly once in the archive's lots (or durable in a vault's journal past them, which the vault's next
start seals), IDEvt 1..n per coffre, with the IDEvt and chain hash its acquittal carried, the chain
recomputed over the bytes; and ``coffre verify`` passes. Exit status 0 only then (targets missed are
reported, not failed), 1 otherwise, 2 for a ``--baseline`` that cannot be checked out, 130 on Ctrl-C.

``--baseline REV``: REV's services run too, at the same time, on a broker of their own (or the same
``--bootstrap``), with the same seed, hence the same hits, for ``--baseline-minutes``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from _checker import AcquittalLog, Verdict, check_archive, player_correlation
from _worktree import worktree
from failover import (
    TARGET_CHAOS_RESUME_S,
    Hit,
    LibrdkafkaPlatform,
    plan_of,
    resumed,
    startup_times,
    verify_archive_command,
)

from coffre.adapters.apache_kafka import START_TIMEOUT, KafkaNode
from coffre.adapters.broker import free_port_block
from coffre.commands.stack import Stack
from coffre.config import Settings

from pipeline import (
    Code,
    base_service,
    cpu_seconds,
    percentile,
    say,
    start_stack,
    text_to,
    vault_certificates,
    vault_data_dir,
)

TESTS = Path(__file__).resolve().parents[1] / "tests"
VICTIMS = ("ingest", "ingest-2", "vault", "vault-2", "acquittal")
SERVICE_ACTIONS = ("SIGKILL", "SIGTERM", "SIGSTOP")
BROKER_ACTIONS = ("SIGKILL", "SIGSTOP")
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGSTOP": signal.SIGSTOP}
TARGET_P99_MS = 1000.0
TARGET_GROWTH = 1.2
"""Memory flat: a process's RSS in the last minute at most 20 % above the first minute's."""
BROKERS = ("single", "cluster")


def rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MB (VmRSS), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def disk_mb(folders: Sequence[Path]) -> float | None:
    """Bytes on disk under ``folders`` (allocated blocks, as ``du``: the broker's preallocated index
    files count for what they use), in MB; None when none exists."""
    total, seen = 0, False
    for folder in folders:
        for root, _, files in os.walk(folder):
            seen = True
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total / 1e6 if seen else None


def hit_kind(victim: str, action: str) -> str:
    """``SIGKILL vault`` for vault-2 as for vault, ``SIGSTOP broker`` for any broker."""
    return f"{action} {'broker' if victim.startswith('broker') else base_service(victim)}"


@dataclass
class Minute:
    """One report line: the events published in it, the acquittals that came in it, the processes."""

    minute: int
    published: int = 0
    acquitted_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_outside_hits_ms: float | None = None
    longest_pause_s: float = 0.0
    waiting: int = 0
    """Events published in it still without their acquittal when the line was printed (their age
    counts in its percentiles, as a floor); 0 in the final figures unless lost."""
    hits: list[str] = field(default_factory=list)
    rss_mb: dict[str, float] = field(default_factory=dict)
    cpu_percent: dict[str, float] = field(default_factory=dict)
    broker_disk_mb: float | None = None

    def line(self, side: str) -> str:
        def ms(value: float | None) -> str:
            return "-" if value is None else f"{'≥' if self.waiting else ''}{value:,.0f}"

        processes = " ".join(
            f"{name} {self.rss_mb.get(name, 0):,.0f}/{self.cpu_percent.get(name, 0):.0f}"
            for name in sorted(set(self.rss_mb) | set(self.cpu_percent))
        )
        disk = "-" if self.broker_disk_mb is None else f"{self.broker_disk_mb:,.0f} MB"
        return (
            f"[{side}] min {self.minute:>3}  {self.acquitted_per_s:5.0f} acq/s  p50 {ms(self.p50_ms):>6} ms  "
            f"p99 {ms(self.p99_ms):>7} ms  outside hits {ms(self.p99_outside_hits_ms):>7} ms  "
            f"longest pause {self.longest_pause_s:5.1f} s  hits {','.join(self.hits) or '-'}  "
            f"waiting {self.waiting}  disk {disk}  RSS MB/CPU %: {processes}"
        )


@dataclass
class Side:
    """One stack under the soak: whose code, on what broker, and what it measured."""

    name: str
    code: Code
    seconds: float
    seed: int
    broker: str
    data: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="coffre-soak-")))
    hits: list[Hit] = field(default_factory=list)
    minutes: list[Minute] = field(default_factory=list)
    published: int = 0
    verdict: Verdict | None = None
    exits: list[str] = field(default_factory=list)
    """Services and brokers that exited by themselves."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.verdict is not None and self.verdict.ok

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, list[float | None]] = {}
        for hit in self.hits:
            kinds.setdefault(hit_kind(hit.victim, hit.action), []).append(hit.resume_s)
        by_kind = {}
        for kind, resumes in sorted(kinds.items()):
            measured = sorted(r for r in resumes if r is not None)
            by_kind[kind] = {
                "hits": len(resumes),
                "median_s": percentile(measured, 0.5) if measured else None,
                "worst_s": measured[-1] if len(measured) == len(resumes) else None,
            }
        resumes = [h.resume_s for h in self.hits]
        worst = None if None in resumes or not resumes else max(r for r in resumes if r is not None)
        outside = [m.p99_outside_hits_ms for m in self.minutes if m.p99_outside_hits_ms is not None]
        first, last = (self.minutes[0], self.minutes[-1]) if self.minutes else (None, None)
        memory = {}
        if first and last:
            for name in sorted(first.rss_mb.keys() & last.rss_mb.keys()):
                a, b = first.rss_mb[name], last.rss_mb[name]
                memory[name] = {
                    "first_mb": round(a, 1),
                    "last_mb": round(b, 1),
                    "flat": b <= a * TARGET_GROWTH,
                }
        verdict = self.verdict
        services = {n: m for n, m in memory.items() if n != "bench"}
        return {
            "lost": verdict.lost if verdict else None,
            "duplicates": verdict.duplicates if verdict else None,
            "resume_by_kind": by_kind,
            "resume_worst_s": worst,
            "resume_median_s": percentile(sorted(r for r in resumes if r is not None), 0.5)
            if any(r is not None for r in resumes)
            else None,
            "p99_outside_hits_max_ms": max(outside) if outside else None,
            "memory": memory,
            "met": {
                "lost_0": verdict.lost == 0 if verdict else None,
                f"resume_within_{TARGET_CHAOS_RESUME_S:g}_s": (
                    worst <= TARGET_CHAOS_RESUME_S if worst is not None else None
                ),
                "p99_outside_hits_within_1_s": max(outside) <= TARGET_P99_MS if outside else None,
                "memory_flat": all(m["flat"] for m in services.values()) if services else None,
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code.label,
            "revision": self.code.revision,
            "broker": self.broker,
            "seed": self.seed,
            "seconds": self.seconds,
            "published": self.published,
            "hits": [{k: v for k, v in h.__dict__.items() if k != "spawned"} for h in self.hits],
            "minutes": [m.__dict__ for m in self.minutes],
            "check": self.verdict.to_json() if self.verdict else None,
            "summary": self.summary(),
            "exits": self.exits,
            "problems": self.problems,
            "data": str(self.data),
        }


class Soak:
    """One side's run: its broker(s) and stack, the platform and the acquittal log, the hits, the
    per-minute figures and the check."""

    def __init__(self, side: Side, args: argparse.Namespace):
        self.side = side
        self.args = args
        self.cluster: Any = None
        self.stack: Stack | None = None
        self.nodes: dict[str, KafkaNode] = {}
        self.platform: LibrdkafkaPlatform | None = None
        self.log: AcquittalLog | None = None
        self.settings: Settings | None = None
        self.began = 0.0
        self.busy: set[str] = set()
        """The processes a hit is handling (not exits by themselves)."""
        self.moments: list[float] = []
        self.rng = random.Random(side.seed)
        self.cpu_used: dict[str, float] = {}
        self.rss_peak: dict[str, float] = {}
        self.last_cpu: dict[str, tuple[int, float]] = {}
        self.printing: list[asyncio.Task[None]] = []
        self.windows: list[tuple[float, float]] = []
        """Each minute's [start, end) (perf_counter), beside ``side.minutes``."""

    # the stack ------------------------------------------------------------------------------------

    def start(self) -> None:
        args, side = self.args, self.side
        (side.data / "logs").mkdir(exist_ok=True)
        side.code.verify_imports(side.data)
        extra: dict[str, Any] = {}
        if args.partitions:
            extra["partitions"] = args.partitions
        if args.lot_events:
            extra["lot_max_events"] = args.lot_events
        if args.session:
            extra["ingest_session_seconds"] = args.session
        bootstrap = args.bootstrap
        if side.broker == "cluster":
            sys.path.insert(0, str(TESTS))
            try:
                from apache_kafka import cluster
            finally:
                sys.path.remove(str(TESTS))
            say(f"[{side.name}] starting three Apache Kafka brokers")
            # coffre up's broker's group.min.session.timeout.ms: the services' sessions of a few seconds
            self.cluster = cluster(side.data / "cluster", extra={"group.min.session.timeout.ms": 1000})
            bootstrap = self.cluster.bootstrap
            self.nodes = {f"broker-{b.node_id}": b for b in self.cluster.brokers}
            extra["replication_factor"] = 3
        self.settings = Settings(
            bootstrap_servers=bootstrap or "127.0.0.1:9092",
            topic_prefix=f"soak{uuid.uuid4().hex[:8]}.",
            data_dir=side.data / "stack",
            broker_port=free_port_block(2),
            ops_port=0,
            api_port=0,
            **extra,
        )
        (side.data / "stack" / "logs").mkdir(parents=True, exist_ok=True)
        static = args.static == "on"
        self.stack = start_stack(self.settings, bootstrap, side.code, 2, side.data, static=static, vaults=2)
        self.settings = self.stack.settings
        if self.stack.broker is not None:
            node = getattr(self.stack.broker, "node", None)
            if node is not None:
                self.nodes = {"broker": node}
        say(
            f"[{side.name}] {side.code.label} ({side.code.revision}) on {side.broker}: Kafka {self.stack.bootstrap}, "
            f"{self.settings.partitions} partitions, services {', '.join(self.stack.children)}; data in {side.data}"
        )

    def pids(self) -> dict[str, int]:
        assert self.stack is not None
        out = {name: node.pid for name, node in self.nodes.items() if node.pid is not None}
        out.update({name: child.pid for name, child in self.stack.children.items()})
        out["bench"] = os.getpid()
        return out

    def log_dirs(self) -> list[Path]:
        return [Path(str(d)) for node in self.nodes.values() for d in str(node.config["log.dirs"]).split(",")]

    def check_alive(self) -> None:
        """A service or broker that exited by itself: noted, and started again as ``coffre up`` would."""
        assert self.stack is not None
        at = time.perf_counter() - self.began if self.began else 0.0
        for name, child in list(self.stack.children.items()):
            if name not in self.busy and child.poll() is not None:
                said = f"{name} exited by itself with {child.returncode} at {at:.1f} s (its log: {name}.log)"
                self.side.exits.append(said)
                say(f"[{self.side.name}] {said}: started again")
                self.stack.spawn(name)
        for name, node in self.nodes.items():
            if name not in self.busy and not node.running:
                said = f"{name} exited by itself at {at:.1f} s"
                self.side.exits.append(said)
                say(f"[{self.side.name}] {said}: started again")
                node.start()

    async def supervise(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            self.check_alive()

    # the hits -------------------------------------------------------------------------------------

    def candidates(self) -> list[tuple[str, str]]:
        assert self.stack is not None
        services = [v for v in VICTIMS if v in self.stack.children]
        brokers = list(self.nodes) if self.cluster is not None else []
        return [(v, a) for v in services for a in SERVICE_ACTIONS] + [
            (b, a) for b in brokers for a in BROKER_ACTIONS
        ]

    async def hit(self, victim: str, action: str) -> Hit:
        assert self.stack is not None and self.platform is not None and self.log is not None
        args = self.args
        moment = time.perf_counter()
        hit = Hit(round(moment - self.began, 1), victim, action)
        self.moments.append(moment)
        self.side.hits.append(hit)
        resume = asyncio.create_task(resumed(self.platform, self.log.arrived, moment, args.resume_timeout))
        self.busy.add(victim)
        try:
            if victim in self.nodes:
                node = self.nodes[victim]
                if action == "SIGSTOP":
                    node.signal(signal.SIGSTOP)
                    await asyncio.sleep(args.pause)
                    node.signal(signal.SIGCONT)
                else:
                    since = node.starts()
                    await asyncio.to_thread(node.signal, signal.SIGKILL)
                    await asyncio.sleep(args.down)
                    node.start()
                    await asyncio.to_thread(node.wait_started, START_TIMEOUT, since)
                    hit.down_s = round(time.perf_counter() - moment, 2)
            else:
                child = self.stack.children[victim]
                child.send_signal(SIGNALS[action])
                if action == "SIGSTOP":
                    await asyncio.sleep(args.pause)
                    child.send_signal(signal.SIGCONT)
                else:
                    try:
                        code = await asyncio.to_thread(child.wait, args.resume_timeout)
                    except subprocess.TimeoutExpired:
                        self.side.problems.append(
                            f"{victim} still running {args.resume_timeout:.0f} s after {action}"
                        )
                        child.kill()
                        code = await asyncio.to_thread(child.wait)
                    if action == "SIGTERM" and code != 0:
                        self.side.problems.append(f"{victim} exited {code} at SIGTERM (not a clean drain)")
                    hit.spawned = time.time()
                    self.stack.spawn(victim)
                    hit.down_s = round(time.perf_counter() - moment, 2)
        finally:
            self.busy.discard(victim)
        hit.resume_s = await resume
        back = (
            f"not within {args.resume_timeout:.0f} s" if hit.resume_s is None else f"after {hit.resume_s} s"
        )
        restarted = f" (started again {hit.down_s} s after the signal)" if hit.down_s is not None else ""
        say(
            f"[{self.side.name}] {hit.at_s:7.1f} s  {action} {victim}: acquittals back for every coffre {back}{restarted}"
        )
        return hit

    async def hits(self, end: float) -> None:
        """The hits, one at a time, each at its turn (``--hits every=``) or as soon as the previous one is
        over if that took longer."""
        every = self.args.hits
        if every is None:
            return
        plan = self.args.plan
        candidates = self.candidates()
        k = 1
        while True:
            at = max(self.began + k * every, time.perf_counter())
            if (plan and k > len(plan)) or (not plan and at > end - 5):
                return
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            victim, action = plan[k - 1] if plan else self.rng.choice(candidates)
            await self.hit(victim, action)
            k += 1

    # per minute -----------------------------------------------------------------------------------

    def sample(self, count: bool = True) -> None:
        """CPU seconds and RSS of every process now; ``count``: add the CPU used since the last sample
        to the minute's (a process started since: all its CPU)."""
        for name, pid in self.pids().items():
            cpu = cpu_seconds(pid)
            if cpu is None:
                continue
            previous = self.last_cpu.get(name)
            if count:
                used = cpu - previous[1] if previous and previous[0] == pid else cpu
                self.cpu_used[name] = self.cpu_used.get(name, 0.0) + max(0.0, used)
            self.last_cpu[name] = (pid, cpu)
            rss = rss_mb(pid)
            if rss is not None:
                self.rss_peak[name] = max(rss, self.rss_peak.get(name, 0.0))

    async def monitor(self) -> None:
        """Samples every few seconds and closes a minute at each ``--report-every``, until cancelled
        (:meth:`close_minute` closes the last one, the load's end in it)."""
        every = self.args.report_every
        ticks = max(1, math.ceil(every / 5))
        self.sample(count=False)
        while True:
            start = self.began + len(self.side.minutes) * every
            for tick in range(1, ticks + 1):
                await asyncio.sleep(max(0.0, start + tick * every / ticks - time.perf_counter()))
                self.sample(count=tick < ticks)
            await self.close_minute(start + every)

    async def close_minute(self, end: float) -> None:
        """The minute from the last one's end to ``end`` (at least a second): its processes' figures
        now, its line once its events are acquitted."""
        start = self.began + len(self.side.minutes) * self.args.report_every
        if end - start < 1:
            return
        self.sample()
        disk = await asyncio.to_thread(disk_mb, self.log_dirs()) if self.nodes else None
        wall = time.perf_counter() - start
        figures = Minute(
            len(self.side.minutes) + 1,
            rss_mb={n: round(v, 1) for n, v in self.rss_peak.items()},
            cpu_percent={n: round(100 * v / wall, 1) for n, v in self.cpu_used.items()},
            broker_disk_mb=None if disk is None else round(disk, 1),
        )
        self.cpu_used, self.rss_peak = {}, {}
        self.side.minutes.append(figures)
        self.windows.append((start, end))
        self.printing.append(asyncio.create_task(self.print_minute(figures, start, end)))

    async def print_minute(self, figures: Minute, start: float, end: float) -> None:
        """The minute's line, once its events are acquitted (at most ``--report-every`` later)."""
        assert self.platform is not None and self.log is not None
        deadline = end + min(30.0, self.args.report_every)
        while time.perf_counter() < deadline and self.waiting(start, end):
            await asyncio.sleep(0.5)
        self.latencies(figures, start, end)
        say(figures.line(self.side.name))

    def published_between(self, start: float, end: float) -> list[str]:
        assert self.platform is not None
        order, sent = self.platform.order, self.platform.sent
        count = len(order)
        lo = bisect.bisect_left(order, start, 0, count, key=sent.__getitem__)
        hi = bisect.bisect_left(order, end, lo, count, key=sent.__getitem__)
        return order[lo:hi]

    def waiting(self, start: float, end: float) -> bool:
        assert self.log is not None
        return any(cid not in self.log.arrived for cid in self.published_between(start, end))

    def hit_by(self, sent: float, came: float) -> bool:
        """Whether an event published at ``sent`` and acquitted at ``came`` is in a hit's window: published
        within ``--hit-window`` seconds after a hit, or before it and still waiting for its acquittal
        when the hit came (in flight: the hit holds it as much as the events published after it)."""
        first = bisect.bisect_left(self.moments, sent - self.args.hit_window)
        return first < len(self.moments) and self.moments[first] < came

    def latencies(self, figures: Minute, start: float, end: float) -> None:
        """Into ``figures``: the latency spread of the events published in [start, end) (those still
        waiting count with their age), the acquittal rate and the longest pause in it, its hits."""
        assert self.platform is not None and self.log is not None
        sent, arrived = self.platform.sent, self.log.arrived
        now = time.perf_counter()
        window = self.published_between(start, end)
        every: list[float] = []
        outside: list[float] = []
        figures.waiting = 0
        for cid in window:
            came = arrived.get(cid)
            if came is None:
                figures.waiting += 1
            came = now if came is None else came
            latency = (came - sent[cid]) * 1000
            every.append(latency)
            if not self.hit_by(sent[cid], came):
                outside.append(latency)
        every.sort()
        outside.sort()
        figures.published = len(window)
        figures.p50_ms = round(percentile(every, 0.5), 1) if every else None
        figures.p99_ms = round(percentile(every, 0.99), 1) if every else None
        figures.p99_outside_hits_ms = round(percentile(outside, 0.99), 1) if outside else None
        times = self.log.times
        lo, hi = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
        figures.acquitted_per_s = round((hi - lo) / (end - start), 1) if end > start else 0.0
        gaps = [times[i] - times[i - 1] for i in range(max(lo, 1), hi)]
        gaps.append(end - (times[hi - 1] if hi else start))
        if lo == hi and lo > 0:
            gaps.append(end - times[lo - 1])
        figures.longest_pause_s = round(max(gaps), 2)
        figures.hits = [
            f"{h.action} {h.victim}"
            for h, m in zip(self.side.hits, self.moments, strict=False)
            if start <= m < end
        ]

    # the run --------------------------------------------------------------------------------------

    async def run(self) -> None:
        args, side = self.args, self.side
        assert self.stack is not None and self.settings is not None
        topics = self.settings.topics
        self.log = AcquittalLog(self.stack.bootstrap or "", topics.acquittals, self.settings.partitions)
        self.log.start()
        self.platform = LibrdkafkaPlatform(
            self.stack.bootstrap or "",
            topics.events_in,
            args.rate,
            args.coffres,
            {"enable.idempotence": True},
        )
        self.platform.start()
        supervisor = asyncio.create_task(self.supervise())
        try:
            await self.ready()
            self.began = time.perf_counter()
            end = self.began + side.seconds
            say(
                f"[{side.name}] every coffre acquitted, the start's backlog too: the minutes start (seed {side.seed})"
            )
            monitor = asyncio.create_task(self.monitor())
            hits = asyncio.create_task(self.hits(end))
            while time.perf_counter() < end or not hits.done():
                self.log.check()
                if self.platform.error is not None or not self.platform.thread.is_alive():
                    raise RuntimeError(f"the platform stopped: {self.platform.error!r}")
                if hits.done():
                    hits.result()
                await asyncio.sleep(0.5)
            if self.moments and time.perf_counter() < self.moments[-1] + args.hit_window:
                await asyncio.sleep(self.moments[-1] + args.hit_window - time.perf_counter())
            end = time.perf_counter()  # the load's end, when a plan ran past --seconds
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor
            await self.close_minute(end)
            self.platform.finish()
            side.published = len(self.platform.order)
            if self.platform.failed:
                side.problems.append(
                    f"the platform: {len(self.platform.failed)} not delivered: {self.platform.failed[:3]}"
                )
            say(f"[{side.name}] load stopped: {side.published:,} published; waiting for every acquittal")
            await self.drain()
            for task in self.printing:
                await task
        finally:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
            self.platform.stop.set()
            self.log.stop()

    async def ready(self) -> None:
        """Until every coffre has had an acquittal (the groups joined, every service working), then
        until every event published by then has its own (the start's backlog worked off)."""
        assert self.platform is not None and self.log is not None
        platform, log = self.platform, self.log
        want = set(range(21, 21 + self.args.coffres))
        deadline = time.perf_counter() + self.args.ready_timeout
        backlog: list[str] | None = None
        while backlog is None or backlog:
            if backlog is None and {platform.coffre(cid) for cid in list(log.arrived)} >= want:
                backlog = list(platform.order)
            if backlog:
                backlog = [cid for cid in backlog if cid not in log.arrived]
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"the stack did not keep up within {self.args.ready_timeout:.0f} s of its start"
                )
            log.check()
            await asyncio.sleep(0.2)

    async def drain(self) -> None:
        assert self.platform is not None and self.log is not None
        deadline = time.perf_counter() + self.args.drain_timeout
        missing = list(self.platform.order)
        while missing and time.perf_counter() < deadline:
            missing = [cid for cid in missing if cid not in self.log.arrived]
            await asyncio.sleep(0.5)
        if missing:
            self.side.problems.append(
                f"{len(missing):,} acquittals missing {self.args.drain_timeout:.0f} s after the load stopped"
            )

    def stop_and_check(self) -> None:
        """SIGTERM the services (they drain, seal and commit), stop the brokers, then the outside
        check of the archive and the journals, and ``coffre verify``."""
        side = self.side
        assert self.settings is not None
        if self.stack is not None:
            codes = self.stack.stop(timeout=60)
            self.stack = None
            if any(code != 0 for code in codes.values()):
                side.problems.append(f"exit codes at the stop: {codes}")
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        startup_times(side, Path(self.settings.data_dir) / "logs")  # type: ignore[arg-type]
        if self.platform is None or self.log is None:
            return
        settings = self.settings
        journals = [vault_data_dir(settings, name) / "vault" / "journal" for name in ("vault", "vault-2")]
        verdict = check_archive(
            settings.archive_root,
            journals,
            "0099",
            range(21, 21 + self.args.coffres),
            self.platform.order,
            self.log,
            player_correlation("c"),
        )
        verdict.verified, said = verify_archive_command(
            settings,
            side.data,
            vault_certificates(settings, 2),
            timeout=max(600.0, len(self.platform.order) / 500),  # an hour's archive on a busy machine
        )
        if not verdict.verified:
            verdict.problems.append(f"coffre verify failed: {said[-600:]}")
        side.verdict = verdict
        for figures, (start, end) in zip(side.minutes, self.windows, strict=True):
            self.latencies(figures, start, end)  # the final figures: every acquittal in

    def cleanup(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        if self.cluster is not None:
            self.cluster.stop()
        for node in self.nodes.values():  # whatever a hit left paused
            if node.running:
                with contextlib.suppress(ProcessLookupError):
                    node.signal(signal.SIGCONT)


async def run_side(side: Side, args: argparse.Namespace) -> None:
    soak = Soak(side, args)
    try:
        await asyncio.to_thread(soak.start)
        await soak.run()
        await asyncio.to_thread(soak.stop_and_check)
    except Exception as exc:
        side.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        await asyncio.to_thread(soak.cleanup)
    report(side)
    if args.keep or not side.ok:
        say(f"[{side.name}] data kept in {side.data}")
    else:
        shutil.rmtree(side.data, ignore_errors=True)


def report(side: Side) -> None:
    """The outside check and the summary against the targets."""
    name = side.name
    if side.verdict is not None:
        say(f"[{name}] check: {side.verdict.line()}")
    summary = side.summary()
    met = summary["met"]

    def verdict(key: str) -> str:
        return {True: "met", False: "MISSED", None: "not measured"}[met[key]]

    say(
        f"[{name}] summary: {side.published:,} published, {len(side.hits)} hits over {len(side.minutes)} minute(s)"
    )
    say(
        f"[{name}]   lost {summary['lost']} (target 0: {verdict('lost_0')}), duplicates {summary['duplicates']}"
    )
    for kind, figures in summary["resume_by_kind"].items():
        say(
            f"[{name}]   resume after {kind}: median {figures['median_s']} s, worst {figures['worst_s']} s "
            f"({figures['hits']} hit(s))"
        )
    say(
        f"[{name}]   worst resume {summary['resume_worst_s']} s, median {summary['resume_median_s']} s "
        f"(target {TARGET_CHAOS_RESUME_S:g} s: {verdict(f'resume_within_{TARGET_CHAOS_RESUME_S:g}_s')})"
    )
    say(
        f"[{name}]   p99 per minute outside the hit windows: max {summary['p99_outside_hits_max_ms']} ms "
        f"(target {TARGET_P99_MS:g} ms: {verdict('p99_outside_hits_within_1_s')})"
    )
    memory = ", ".join(
        f"{n} {m['first_mb']:,.0f} → {m['last_mb']:,.0f}{'' if m['flat'] else ' (grew)'}"
        for n, m in summary["memory"].items()
    )
    say(f"[{name}]   RSS MB, first → last minute: {memory} (flat: {verdict('memory_flat')})")
    for said in side.exits:
        say(f"[{name}]   EXITED BY ITSELF: {said}")
    for problem in side.problems + (side.verdict.problems if side.verdict else []):
        say(f"[{name}]   PROBLEM: {problem}")


def side_by_side(sides: Sequence[Side]) -> None:
    if len(sides) < 2:
        return
    say("side by side, per minute (acquittals/s, p99 outside the hit windows ms, longest pause s):")
    for i in range(max(len(s.minutes) for s in sides)):
        cells = []
        for s in sides:
            if i < len(s.minutes):
                m = s.minutes[i]
                cells.append(
                    f"{s.name}: {m.acquitted_per_s:5.0f}/s {m.p99_outside_hits_ms or 0:7,.0f} ms {m.longest_pause_s:5.1f} s"
                )
            else:
                cells.append(f"{s.name}: -")
        say(f"  min {i + 1:>3}  " + "   ".join(cells))


def hits_of(text: str) -> float | None:
    """``--hits``: ``every=SECONDS`` (or SECONDS), or ``off``."""
    if text.strip().lower() in ("off", "none", "0"):
        return None
    value = text.split("=", 1)[1] if "=" in text else text
    if "=" in text and text.split("=", 1)[0].strip() != "every":
        raise argparse.ArgumentTypeError(f"{text!r}: every=SECONDS or off")
    try:
        every = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: every=SECONDS or off") from None
    if every <= 0:
        raise argparse.ArgumentTypeError("every must be positive")
    return every


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=300.0, help="offered load, events/s")
    parser.add_argument("--minutes", type=float, default=60.0, help="duration of the load")
    parser.add_argument("--seconds", type=float, help="duration of the load in seconds (replaces --minutes)")
    parser.add_argument(
        "--hits", type=hits_of, default=None, help="every=SECONDS: a hit that often (default: off)"
    )
    parser.add_argument("--seed", type=int, help="the hits' random seed (default: a new one, printed)")
    parser.add_argument(
        "--plan",
        type=partial(plan_of, victims=VICTIMS),
        help="these hits in this order instead of random ones, SERVICE:SIGNAL,… (with --hits every=)",
    )
    parser.add_argument("--pause", type=float, default=5.0, help="seconds a SIGSTOPped process stays paused")
    parser.add_argument("--down", type=float, default=5.0, help="seconds a SIGKILLed broker stays down")
    parser.add_argument(
        "--hit-window", type=float, default=10.0, help="seconds after a hit left out of 'p99 outside hits'"
    )
    parser.add_argument("--broker", choices=BROKERS, default="single", help="coffre up's own Kafka, or three")
    parser.add_argument("--cluster", action="store_true", help="the same as --broker cluster")
    parser.add_argument(
        "--bootstrap", help="HOST:PORT of a running Kafka instead (no broker hits or figures)"
    )
    parser.add_argument("--coffres", type=int, default=5, help="IDCoffre values the events are spread over")
    parser.add_argument("--partitions", type=int, help="partitions per topic (default: coffre's own)")
    parser.add_argument("--lot-events", type=int, help="COFFRE_LOT_MAX_EVENTS (default: coffre's own)")
    parser.add_argument("--session", type=float, help="COFFRE_INGEST_SESSION_SECONDS, every group's session")
    parser.add_argument(
        "--static",
        choices=("on", "off"),
        default="off",
        help="each service its own COFFRE_KAFKA_GROUP_INSTANCE_ID (off: as coffre up runs them)",
    )
    parser.add_argument("--report-every", type=float, default=60.0, help="seconds between two report lines")
    parser.add_argument(
        "--resume-timeout", type=float, default=60.0, help="most seconds to wait for a resume"
    )
    parser.add_argument("--ready-timeout", type=float, default=180.0, help="most seconds to wait for a stack")
    parser.add_argument(
        "--drain-timeout", type=float, default=600.0, help="most seconds to wait for the last acquittals"
    )
    parser.add_argument("--baseline", metavar="REV", help="run REV's services too, at the same time")
    parser.add_argument(
        "--baseline-minutes", type=float, help="how long the baseline runs (default: as long)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout (text on stderr)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    args = parser.parse_args(argv)
    if args.cluster:
        args.broker = "cluster"
    if args.bootstrap and args.broker == "cluster":
        parser.error("--bootstrap names the broker: leave --cluster out")
    if args.bootstrap:
        args.broker = f"bootstrap {args.bootstrap}"
    args.duration = args.seconds if args.seconds is not None else args.minutes * 60
    if min(args.rate, args.duration, args.coffres, args.report_every) <= 0:
        parser.error("--rate, --minutes/--seconds, --coffres and --report-every must be positive")
    if args.plan and args.hits is None:
        parser.error("--plan needs --hits every=SECONDS")
    if args.seed is None:
        args.seed = random.randrange(2**31)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = sys.stdout
    sides: list[Side] = []
    try:
        with (
            text_to(sys.stderr if args.json else None),
            contextlib.ExitStack() as exits,
            tempfile.TemporaryDirectory(prefix="coffre-soak-cwd-") as cwd,
            contextlib.chdir(cwd),  # every child started outside the project: it imports its own code
        ):
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
                sides.append(Side("before", code, min(seconds, args.duration), args.seed, args.broker))
            sides.append(
                Side(
                    "after" if args.baseline else "soak",
                    Code.current(),
                    args.duration,
                    args.seed,
                    args.broker,
                )
            )
            hits = f"a hit every {args.hits:g} s" if args.hits else "no hits"
            say(
                f"soak: {args.rate:g} events/s over {args.coffres} coffres for {args.duration / 60:g} min on "
                f"{args.broker}, {hits}, seed {args.seed}"
            )

            async def run() -> None:
                await asyncio.gather(*(run_side(side, args) for side in sides))

            asyncio.run(run())
            side_by_side(sides)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    status = 0 if all(side.ok for side in sides) else 1
    if args.json:
        document: dict[str, Any] = {s.name: s.to_json() for s in sides}
        document["args"] = {k: v for k, v in vars(args).items() if k not in ("json", "plan")}
        document["args"]["plan"] = [f"{v}:{a}" for v, a in args.plan or []]
        document["status"] = status
        print(json.dumps(document, indent=2), file=out, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
