"""coffre's pipeline benchmark: raw Kafka passthrough, end-to-end rate and acquittal latency, in one run.

    .venv/bin/python bench/pipeline.py [--events N] [--seconds S] [--bootstrap HOST:PORT]

On one broker (the embedded Tansu unless ``--bootstrap`` names one), in this order:

1. raw passthrough: N events produced to a fresh topic and consumed back by one aiokafka
   consumer, both running at once (the ceiling any pipeline on this broker and machine has);
2. the whole stack (``coffre.stack.Stack``: ingest, vault, acquittal as child processes),
   warmed up with one event per coffre; then N POINSCRIT events published as fast as possible,
   timed from the first publish to the last ``recorded`` acquittal;
3. acquittal latency at a fixed offered load (500 events/s for 10 s by default), each
   latency from the publish of an event to the arrival of its acquittal.

The figures are printed against the targets (end to end >= 3,000 events/s and >= 1/3 of raw
passthrough; p99 < 20 ms at 500 events/s). A missed target is not a failure: the exit status
is 0 when everything was measured, 1 when a phase timed out, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coffre.adapters.broker import EmbeddedBroker
from coffre.adapters.kafka import CONSUMER_TUNING, PRODUCER_TUNING, drain, ensure_topics
from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID, Acquittal, header
from coffre.stack import Stack

#: The POINSCRIT of ``tests/events.py``: an event that requires an acquittal.
POINSCRIT = """<POINSCRIT>
  <IDOper>0099</IDOper>
  <IDCoffre>7</IDCoffre>
  <DateEvt>2026-03-01T10:00:00+01:00</DateEvt>
  <IDEvt>12</IDEvt>
  <IDJoueur>p-1</IDJoueur>
  <HashJoueur>a94a8fe5ccb19ba61c4c0873d391e987982fbbd3</HashJoueur>
  <IPJoueur>2001:0DB8:0000:0000:0000:0000:0000:0001</IPJoueur>
  <IDSession>s-1</IDSession>
  <Inscription>ins-1</Inscription>
  <Tech>T-1</Tech>
  <Description>Tournoi du dimanche</Description>
  <Format>T /AS</Format>
  <SoldeAvant>100.10</SoldeAvant>
  <SoldeMouvement>10.05</SoldeMouvement>
  <SoldeAprès>90.05</SoldeAprès>
</POINSCRIT>""".encode()

TARGET_RATE = 3000.0  # events/s, end to end
TARGET_RATIO = 1 / 3  # of raw passthrough
TARGET_P99_MS = 20.0  # at the offered load
YIELD_EVERY = 100  # messages between two yields of a publishing loop (lets aiokafka's sender run)
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

Message = tuple[str, bytes]  # (correlation id, event)


class PhaseTimeout(RuntimeError):
    """A phase did not complete within its time limit."""


# events ----------------------------------------------------------------------------------


def event(n: int, coffres: int) -> bytes:
    """POINSCRIT number ``n``: coffre ``21 + n % coffres``, player ``bench-<n>`` (zero-padded, so all
    events of a run have the same size)."""
    return POINSCRIT.replace(
        b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{21 + n % coffres}</IDCoffre>".encode()
    ).replace(b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>bench-{n:09d}</IDJoueur>".encode())


def messages(prefix: str, count: int, coffres: int, start: int = 0) -> list[Message]:
    """``count`` (correlation id, event) pairs, numbered from ``start``."""
    return [(f"{prefix}-{n}", event(n, coffres)) for n in range(start, start + count)]


async def send(producer: AIOKafkaProducer, topic: str, message: Message) -> asyncio.Future[object]:
    """Enqueue one message as a platform would publish it (key and header: its correlation id)."""
    cid = message[0].encode()
    return await producer.send(topic, message[1], key=cid, headers=[(CORRELATION_ID, cid)])


async def publish_burst(producer: AIOKafkaProducer, topic: str, batch: Sequence[Message]) -> float:
    """Publish ``batch`` as fast as possible, wait for every delivery; the time of the first send."""
    first = time.perf_counter()
    deliveries = []
    for i, message in enumerate(batch):
        deliveries.append(await send(producer, topic, message))
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    await asyncio.gather(*deliveries)
    return first


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (``q`` in 0..1)."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# CPU accounting from /proc ----------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None without /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class CpuMeter:
    """CPU seconds per named process between :meth:`start` and :meth:`stop`."""

    pids: dict[str, int]
    before: dict[str, float] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0

    def start(self) -> None:
        self.before = {name: s for name, pid in self.pids.items() if (s := cpu_seconds(pid)) is not None}
        self.wall = time.perf_counter()

    def stop(self) -> None:
        self.wall = time.perf_counter() - self.wall
        for name, pid in self.pids.items():
            now = cpu_seconds(pid)
            if now is not None and name in self.before:
                self.used[name] = now - self.before[name]


# the acquittal reader -----------------------------------------------------------------------


class AcquittalReader:
    """Reads every partition of the acquittals topic (assigned by hand, no group) from the beginning
    of the (fresh) topic, and notes when each correlation id's first acquittal arrived."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.bootstrap = bootstrap
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.arrived: dict[str, float] = {}  # correlation id -> perf_counter at arrival
        self.status: dict[str, str] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, **CONSUMER_TUNING)
        await self._consumer.start()
        self._consumer.assign(self.tps)
        # The topic is fresh (unique prefix): reading from the beginning and filtering by
        # correlation id avoids trusting end offsets, which Tansu can under-report.
        await self._consumer.seek_to_beginning(*self.tps)
        self._task = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._consumer:
            await self._consumer.stop()

    async def _read(self) -> None:
        assert self._consumer
        while True:
            batches = await self._consumer.getmany(timeout_ms=100)
            now = time.perf_counter()
            for records in batches.values():
                for record in records:
                    cid = header(list(record.headers or ()), CORRELATION_ID)
                    if cid is None or cid in self.arrived:
                        continue
                    self.arrived[cid] = now
                    self.status[cid] = Acquittal.decode(record.value).status

    async def wait_for(self, ids: Collection[str], timeout: float, check: Callable[[], None]) -> bool:
        """Wait until every id in ``ids`` has its acquittal; False after ``timeout`` seconds.
        ``check`` is called about every second and may raise (a service died)."""
        missing = set(ids)
        deadline = time.monotonic() + timeout
        next_check = 0.0
        while True:
            missing = {cid for cid in missing if cid not in self.arrived}
            if not missing:
                return True
            if self._task is not None and self._task.done():
                self._task.result()  # raises what stopped the reader
                raise RuntimeError("the acquittal reader stopped")
            now = time.monotonic()
            if now >= deadline:
                return False
            if now >= next_check:
                check()
                next_check = now + 1.0
            await asyncio.sleep(0.005)


# phases ---------------------------------------------------------------------------------------


async def raw_passthrough(
    bootstrap: str, topic: str, partitions: int, batch: Sequence[Message], timeout: float
) -> float:
    """Messages/s of one aiokafka producer into ``topic`` and one consumer out of it, concurrently,
    from the first send to the last record consumed."""
    await ensure_topics(bootstrap, {topic: partitions})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **CONSUMER_TUNING)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await consumer.start()
    await producer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        await consumer.getmany(timeout_ms=10)  # positions resolved before the clock starts
        last = 0.0

        async def consume() -> int:
            nonlocal last
            seen = 0
            while seen < len(batch):
                got = await consumer.getmany(timeout_ms=100)
                if got:
                    seen += sum(len(records) for records in got.values())
                    last = time.perf_counter()
            return seen

        reader = asyncio.create_task(consume())
        first = await publish_burst(producer, topic, batch)
        try:
            await asyncio.wait_for(reader, timeout)
        except TimeoutError:
            raise PhaseTimeout(
                f"raw passthrough: not every message was consumed within {timeout:.0f} s"
            ) from None
        return len(batch) / (last - first)
    finally:
        await producer.stop()
        await consumer.stop()


@dataclass
class Latency:
    sent: int
    arrived: int
    recorded: int
    achieved_rate: float  # events/s actually offered
    behind_ms: float  # the most the publisher fell behind its schedule
    latencies_ms: list[float]


async def offered_load(
    producer: AIOKafkaProducer,
    topic: str,
    reader: AcquittalReader,
    rate: float,
    seconds: float,
    coffres: int,
    drain_timeout: float,
    check: Callable[[], None],
) -> Latency:
    """Publish at ``rate`` events/s for ``seconds`` (scheduled by absolute time) and measure, per
    event, the time from its publish to its acquittal's arrival."""
    batch = messages("l", max(1, round(rate * seconds)), coffres, start=10_000_000)
    sent: dict[str, float] = {}
    behind = 0.0
    start = time.perf_counter()
    for i, message in enumerate(batch):
        target = start + i / rate
        now = time.perf_counter()
        if target > now:
            await asyncio.sleep(target - now)
        now = time.perf_counter()
        behind = max(behind, now - target)
        sent[message[0]] = now
        await send(producer, topic, message)
    last_send = time.perf_counter()
    await producer.flush()
    await reader.wait_for(sent, drain_timeout, check)
    latencies = sorted((reader.arrived[cid] - t) * 1000 for cid, t in sent.items() if cid in reader.arrived)
    recorded = sum(1 for cid in sent if reader.status.get(cid) == "recorded")
    span = last_send - start
    return Latency(
        len(sent), len(latencies), recorded, len(sent) / span if span > 0 else 0.0, behind * 1000, latencies
    )


HOPS = (
    ("events_in", "normalized", "ingest: events.in -> normalized"),
    ("normalized", "receipts", "vault: normalized -> receipts"),
    ("receipts", "acquittals", "acquittal: receipts -> acquittals"),
)


async def hop_latencies(bootstrap: str, topics: object, prefix: str) -> dict[str, list[float]]:
    """Per service, the delay (ms) between an event's record on its input topic and the record it
    caused on its output topic, from the broker's record timestamps (CreateTime, set by each
    producer's clock: one machine, one clock), for the events whose correlation id starts with
    ``prefix``. Where the end-to-end latency goes, hop by hop."""
    stamps: dict[str, dict[str, int]] = {}
    for name in ("events_in", "normalized", "receipts", "acquittals"):
        for record in await drain(bootstrap, getattr(topics, name)):
            cid = header(list(record.headers or ()), CORRELATION_ID)
            if cid and cid.startswith(prefix):
                stamps.setdefault(cid, {})[name] = record.timestamp
    return {
        label: sorted(float(s[b] - s[a]) for s in stamps.values() if a in s and b in s)
        for a, b, label in HOPS
    }


@dataclass
class Results:
    raw_rate: float | None = None
    e2e_rate: float | None = None
    e2e_recorded: int = 0
    e2e_seconds: float = 0.0
    latency: Latency | None = None
    hops: dict[str, list[float]] = field(default_factory=dict)
    cpu: CpuMeter | None = None
    errors: list[str] = field(default_factory=list)


async def coffre_phases(
    stack: Stack, args: argparse.Namespace, results: Results, pids: dict[str, int]
) -> None:
    """Warm-up, sustained end-to-end rate, then latency at a fixed load: all against the running stack."""
    settings = stack.settings
    topics = settings.topics
    assert stack.bootstrap

    def check() -> None:
        dead = {name: child.returncode for name, child in stack.children.items() if child.poll() is not None}
        if dead:
            raise RuntimeError(f"service(s) exited: {dead} (logs in {settings.data_dir}/logs)")

    reader = AcquittalReader(stack.bootstrap, topics.acquittals, settings.partitions)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, **PRODUCER_TUNING)
    await reader.start()
    await producer.start()
    try:
        # warm-up: one event per coffre, acquitted = every group joined and every service ready
        warm = messages("w", args.coffres, args.coffres, start=20_000_000)
        began = time.perf_counter()
        await publish_burst(producer, topics.events_in, warm)
        if not await reader.wait_for([cid for cid, _ in warm], args.ready_timeout, check):
            raise PhaseTimeout(
                f"the stack was not ready within {args.ready_timeout:.0f} s (no warm-up acquittal)"
            )
        print(f"stack ready: warm-up acquittals after {time.perf_counter() - began:.1f} s", flush=True)

        async def rate_phase() -> None:
            """Sustained end-to-end rate."""
            batch = messages("t", args.events, args.coffres)
            meter = CpuMeter(pids)
            results.cpu = meter
            print(f"end to end: publishing {len(batch):,} events…", flush=True)
            meter.start()
            first = await publish_burst(producer, topics.events_in, batch)
            complete = await reader.wait_for([cid for cid, _ in batch], args.timeout, check)
            meter.stop()
            times = [reader.arrived[cid] for cid, _ in batch if cid in reader.arrived]
            results.e2e_recorded = sum(1 for cid, _ in batch if reader.status.get(cid) == "recorded")
            if not complete:
                raise PhaseTimeout(
                    f"end to end: {len(times):,} of {len(batch):,} acquittals within {args.timeout:.0f} s "
                    f"({results.e2e_recorded:,} recorded)"
                )
            results.e2e_seconds = max(times) - first
            results.e2e_rate = len(batch) / results.e2e_seconds
            if results.e2e_recorded != len(batch):
                results.errors.append(
                    f"end to end: only {results.e2e_recorded:,} of {len(batch):,} acquittals say recorded"
                )

        async def latency_phase() -> None:
            """Latency at a fixed offered load, and where it goes hop by hop."""
            await asyncio.sleep(1.0)  # let the pipeline settle
            print(f"latency: {args.rate:,.0f} events/s for {args.seconds:g} s…", flush=True)
            results.latency = await offered_load(
                producer, topics.events_in, reader, args.rate, args.seconds, args.coffres, args.timeout, check
            )
            if results.latency.arrived < results.latency.sent:
                raise PhaseTimeout(
                    f"latency: {results.latency.arrived:,} of {results.latency.sent:,} acquittals within {args.timeout:.0f} s"
                )
            results.hops = await hop_latencies(stack.bootstrap, topics, "l-")

        for phase in (latency_phase, rate_phase) if args.latency_first else (rate_phase, latency_phase):
            await phase()
    finally:
        await producer.stop()
        await reader.stop()


# report ---------------------------------------------------------------------------------------


def print_table(rows: Sequence[tuple[str, str, str, str]]) -> None:
    """(measure, result, target, verdict) rows, aligned, between rules."""
    widths = [max(len(r[i]) for r in [*rows, ("measure", "result", "target", "")]) for i in range(4)]
    line = "  ".join("-" * w for w in widths if w)
    print(line)
    print(
        "  ".join(
            h.ljust(w) for h, w in zip(("measure", "result", "target", ""), widths, strict=True)
        ).rstrip()
    )
    print(line)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(line)


def verdict(ok: bool | None) -> str:
    return "" if ok is None else ("met" if ok else "MISSED")


def report(results: Results, args: argparse.Namespace, bootstrap: str, event_size: int) -> None:
    rows: list[tuple[str, str, str, str]] = []
    raw, e2e, lat = results.raw_rate, results.e2e_rate, results.latency
    rows.append(("raw aiokafka passthrough", f"{raw:,.0f} msg/s" if raw else "n/a", "", ""))
    rows.append(
        (
            "end to end, publish -> acquittal",
            f"{e2e:,.0f} events/s" if e2e else "n/a",
            f">= {TARGET_RATE:,.0f} events/s",
            verdict(e2e >= TARGET_RATE if e2e else None),
        )
    )
    if e2e:
        rows.append(("  (N events / seconds)", f"{args.events:,} / {results.e2e_seconds:.2f} s", "", ""))
    ratio = e2e / raw if e2e and raw else None
    rows.append(
        (
            "end to end / raw passthrough",
            f"{ratio:.2f}" if ratio else "n/a",
            f">= {TARGET_RATIO:.2f}",
            verdict(ratio >= TARGET_RATIO if ratio else None),
        )
    )
    if lat and lat.latencies_ms:
        p99 = percentile(lat.latencies_ms, 0.99)
        head = f"latency @ {args.rate:,.0f}/s for {args.seconds:g} s"
        rows.append((f"{head}: p50", f"{percentile(lat.latencies_ms, 0.50):.1f} ms", "", ""))
        rows.append(("  p99", f"{p99:.1f} ms", f"< {TARGET_P99_MS:.0f} ms", verdict(p99 < TARGET_P99_MS)))
        rows.append(("  max", f"{lat.latencies_ms[-1]:.1f} ms", "", ""))
        rows.append(
            ("  acquittals arrived (recorded)", f"{lat.arrived:,}/{lat.sent:,} ({lat.recorded:,})", "", "")
        )
        rows.append(("  offered rate achieved", f"{lat.achieved_rate:,.0f} events/s", "", ""))
        rows.append(("  publisher behind schedule, max", f"{lat.behind_ms:.1f} ms", "", ""))
        for label, delays in results.hops.items():
            if delays:
                rows.append(
                    (
                        f"  {label}",
                        f"p50 {percentile(delays, 0.5):.0f} / p99 {percentile(delays, 0.99):.0f} ms",
                        "",
                        "",
                    )
                )
    else:
        rows.append((f"latency @ {args.rate:,.0f}/s", "n/a", f"p99 < {TARGET_P99_MS:.0f} ms", ""))

    print()
    print(
        f"coffre pipeline bench: broker {bootstrap}, {args.partitions} partitions, "
        f"{args.events:,} events of {event_size} bytes (POINSCRIT) over {args.coffres} coffres, {os.cpu_count()} CPUs"
    )
    print_table(rows)
    meter = results.cpu
    if meter and meter.used and meter.wall > 0:
        print(f"CPU during the end-to-end phase ({meter.wall:.2f} s wall; 100% = one core):")
        events = args.events if results.e2e_rate else 0
        for name, used in sorted(meter.used.items(), key=lambda item: -item[1]):
            per_event = f"  {1e6 * used / events:6.0f} µs/event" if events else ""
            print(f"  {name:<10} {used:7.2f} s  {100 * used / meter.wall:5.0f}%{per_event}")
        total = sum(meter.used.values())
        if events:
            print(
                f"  {'all':<10} {total:7.2f} s  {100 * total / meter.wall:5.0f}%  {1e6 * total / events:6.0f} µs/event"
                f"  -> at most {events / total * (os.cpu_count() or 1):,.0f} events/s on {os.cpu_count()} cores"
            )
    for error in results.errors:
        print(f"note: {error}")


def profile_hints(stack: Stack, broker_pid: int | None) -> None:
    """How to look inside the processes of this run (nothing is profiled automatically)."""
    print("profiling (--profile): coffre has no built-in profiler (no COFFRE_PROFILE variable).")
    print("  the per-process CPU table at the end says which process is busiest; then, while a phase runs:")
    for name, child in stack.children.items():
        print(f"    {name:<10} pid {child.pid}: py-spy top --pid {child.pid}   (pip install py-spy)")
    if broker_pid:
        print(f"    broker     pid {broker_pid}: perf top -p {broker_pid}")
    print("  or run one service under cProfile with the environment of Stack.env(), e.g.")
    print("    COFFRE_BOOTSTRAP_SERVERS=... COFFRE_TOPIC_PREFIX=... COFFRE_DATA_DIR=... \\")
    print("      .venv/bin/python -m cProfile -o vault.prof -m coffre.cli vault", flush=True)


def log_tails(data: Path, lines: int = 15) -> None:
    for log in sorted((data / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.name} (last {len(text)} lines)")
        print("\n".join(text))


# main -----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events of the raw and end-to-end phases")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the latency phase")
    parser.add_argument(
        "--rate", type=float, default=500.0, help="offered load of the latency phase, events/s"
    )
    parser.add_argument("--coffres", type=int, default=4, help="IDCoffre values the events are spread over")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of every topic")
    parser.add_argument(
        "--bootstrap", help="HOST:PORT of a running Kafka (default: start the embedded broker)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="most seconds to wait for a phase's acquittals"
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=90.0, help="most seconds to wait for the stack"
    )
    parser.add_argument(
        "--latency-first",
        action="store_true",
        help="measure the latency on the fresh stack, before the end-to-end burst",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directory (journals, logs)")
    parser.add_argument(
        "--profile", action="store_true", help="print how to profile the processes of the run"
    )
    args = parser.parse_args(argv)
    if args.events < 1 or args.coffres < 1 or args.partitions < 1 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--events, --coffres, --partitions, --rate and --seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    data = Path(tempfile.mkdtemp(prefix="coffre-bench-"))
    run = uuid.uuid4().hex[:8]
    broker: EmbeddedBroker | None = None
    stack: Stack | None = None
    results = Results()
    bootstrap = args.bootstrap or ""
    status = 0
    try:
        if not args.bootstrap:
            broker = EmbeddedBroker(log_path=data / "logs" / "broker.log")
            bootstrap = broker.start()
            print(f"embedded broker on {bootstrap} (pid {broker.pid})", flush=True)

        print(f"raw passthrough: {args.events:,} messages…", flush=True)
        raw_batch = messages("r", args.events, args.coffres)
        results.raw_rate = asyncio.run(
            raw_passthrough(bootstrap, f"bench{run}.raw", args.partitions, raw_batch, args.timeout)
        )

        settings = Settings(
            bootstrap_servers=bootstrap,
            topic_prefix=f"bench{run}.",
            data_dir=data,
            partitions=args.partitions,
            ops_port=0,
            api_port=0,
        )
        stack = Stack(settings, bootstrap=bootstrap)
        stack.start()
        pids = {name: child.pid for name, child in stack.children.items()}
        pids["bench"] = os.getpid()
        if broker and broker.pid:
            pids["broker"] = broker.pid
        if args.profile:
            profile_hints(stack, broker.pid if broker else None)
        asyncio.run(coffre_phases(stack, args, results, pids))
    except PhaseTimeout as exc:
        results.errors.append(str(exc))
        status = 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    except Exception as exc:
        results.errors.append(f"{type(exc).__name__}: {exc}")
        status = 1
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            codes = stack.stop() if stack else {}
            if broker:
                broker.stop()
            if status != 130:
                report(results, args, bootstrap, len(event(0, args.coffres)))
            if codes and any(code != 0 for code in codes.values()):
                print(f"note: services exited with {codes}")
            if status == 1:
                log_tails(data)
            if args.keep:
                print(f"data kept in {data}")
            else:
                shutil.rmtree(data, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
