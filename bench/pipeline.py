"""coffre's pipeline benchmark: raw Kafka passthrough, end-to-end rate, acquittal latency, in one run.

    .venv/bin/python bench/pipeline.py [--events N] [--seconds S] [--json] [--baseline REV]

On one broker (the embedded Tansu unless ``--bootstrap`` names one), in this order:

1. raw passthrough: N events produced to a fresh topic and consumed back by one aiokafka
   consumer, both running at once (the ceiling any pipeline on this broker and machine has);
2. the whole stack (``coffre.commands.stack.Stack``: ingest (``--ingest-replicas``), vault, acquittal, and
   the regulator API when it is a process of its own, as child processes), warmed up with one
   event per coffre; then N POINSCRIT events published as fast as possible, timed from the first
   publish to the last ``recorded`` acquittal, with the CPU each process used;
3. acquittal latency at a fixed offered load (500 events/s for S seconds by default), each
   latency from the publish of an event to the arrival of its acquittal;
4. the regulator stress phase: the same latency measure while a client, its own process,
   downloads the day's export from the regulator API and asks 100 inclusion proofs, in a loop;
5. with ``--auditor``, the auditor phase on the first stack, first of all (while its partitions are
   small): the latency measure without the auditor; the auditor started beside the stack (its own
   process, ``coffre auditor``), the time it takes to audit the backlog (the warm-up and the measure
   before), and the measure again while it audits every new event; then the auditor stopped and
   the measure once more without it; printed side by side, with the ratio of the measure with it
   to the mean of the two without it;
6. the sealing stress phase, on a second stack whose lots hold 10,000 events: each coffre is
   filled to just under a lot, then the same latency measure while the offered load itself makes
   every coffre seal one lot of 10,000, spread over the window.

7. with ``--evidence``, the evidence phase (issue 21), an A/B on two more stacks whose lots are
   sealed every second (``COFFRE_LOT_MAX_AGE_SECONDS=1``): one without evidence, one whose vault
   gets every checkpoint a token from a real TSA (``openssl ts``) and a cosignature from a witness
   (``bench/_evidence.py``, in a process of their own), each under the same three windows of load:
   ``up`` (``--stress-seconds``), ``outage`` (``--evidence-outage-seconds``, a minute by default;
   the TSA and the witness stopped, on the second stack) and ``back`` (they catch up); then it waits
   until every checkpoint of the archive has its token and its cosignature, and verifies them all.
   The acquittal p99 of each window is printed off / on side by side.

The figures are printed against issue 11's targets (ingest + vault + acquittal CPU <= 250 µs per
event, broker <= 250 µs per event, end to end >= 3,000 events/s, acquittal p99 <= 50 ms at 500
events/s in each latency phase). ``--json`` prints one JSON object instead (the text goes to
stderr). ``--baseline REV`` measures REV's services first (a temporary git worktree, imported
through ``PYTHONPATH``; the load and the measures stay this file's), then the current checkout's,
and prints both with the ratios. A missed target is not a failure: the exit status is 0 when
everything was measured, 1 when a phase failed or timed out, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import inspect
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from _evidence import EvidenceProcess, archive_evidence
from _regulator_client import TOKEN_VARIABLE
from _worktree import Checkout, dirty, short_revision, worktree
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coffre.adapters.apache_kafka import LocalKafka
from coffre.adapters.archive import signing_files
from coffre.adapters.broker import EmbeddedBroker, free_port_block
from coffre.adapters.kafka import CONSUMER_TUNING, PRODUCER_TUNING, drain, ensure_topics
from coffre.adapters.kafka_security import client_options
from coffre.commands.stack import Stack
from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID, Acquittal, header

CLIENT = Path(__file__).with_name("_regulator_client.py")

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

DEFAULT_LOT_EVENTS = Settings.model_fields["lot_max_events"].default  # 1000
TARGET_RATE = 3000.0  # events/s, end to end
TARGET_P99_MS = 50.0  # acquittal latency at the offered load, in every latency phase
TARGET_SERVICES_US = 250.0  # CPU of ingest + vault + acquittal per acknowledged event
TARGET_BROKER_US = 250.0  # CPU of the broker per event
YIELD_EVERY = 100  # messages between two yields of a publishing loop (lets aiokafka's sender run)
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
STACK_HAS_REPLICAS = "ingest_replicas" in inspect.signature(Stack).parameters
STACK_HAS_AUDITOR = "auditor" in inspect.signature(Stack).parameters
"""Whether this checkout's Stack may start the auditor (``Stack(..., auditor=False)`` leaves it out:
the bench starts it itself, in the auditor phase only)."""
"""Whether this checkout's Stack runs several ingest processes (``Stack(..., ingest_replicas=N)``)."""

# Where each phase's events are numbered from (IDJoueur bench-<n>, 9 digits; correlation ids by prefix).
WARM_START = 20_000_000
LATENCY_START = 10_000_000
REGULATOR_START = 40_000_000
PREFILL_START = 50_000_000
SEALING_START = 30_000_000
AUDITOR_OFF_START = 60_000_000
AUDITOR_ON_START = 70_000_000
AUDITOR_AFTER_START = 75_000_000
EVIDENCE_START = 80_000_000

Message = tuple[str, bytes]  # (correlation id, event)


def security(settings: Settings | None = None) -> dict[str, Any]:
    """The bench's own clients' TLS and SASL options: the ``COFFRE_KAFKA_*`` settings, as the services'."""
    return client_options(settings or Settings())


class PhaseTimeout(RuntimeError):
    """A phase did not complete within its time limit."""


def say(*parts: object) -> None:
    """Progress text (on stderr with ``--json``: stdout is redirected there)."""
    print(*parts, flush=True)


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


def aligned(start: int, coffres: int) -> int:
    """``start`` rounded down to a multiple of ``coffres``: event ``aligned + i`` goes to coffre index i."""
    return start - start % coffres


KEY_BY = ["coffre"]
"""What a published event is keyed by (``--key``): ``coffre``, its IDCoffre, as the input contract
asks and the client helper does (each event lands on the partition that numbers it), or
``correlation``, its correlation id, as a platform ignoring the rule would (most events are then
forwarded once by ingest to their coffre's partition)."""
IDCOFFRE = re.compile(rb"<IDCoffre>(\d+)</IDCoffre>")


async def send(producer: AIOKafkaProducer, topic: str, message: Message) -> asyncio.Future[object]:
    """Enqueue one message as a platform would publish it (key: see KEY_BY; header: its correlation id)."""
    cid = message[0].encode()
    key = cid
    if KEY_BY[0] == "coffre" and (found := IDCOFFRE.search(message[1])):
        key = found.group(1)
    return await producer.send(topic, message[1], key=key, headers=[(CORRELATION_ID, cid)])


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


def spread(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p99 and max of ``values`` (any order), or None when there is none."""
    if not values:
        return None
    ordered = sorted(values)
    return {"p50": percentile(ordered, 0.5), "p99": percentile(ordered, 0.99), "max": ordered[-1]}


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

    def percent(self) -> dict[str, float]:
        """Each process's CPU in % of one core over the measure's wall time."""
        return {name: 100 * used / self.wall for name, used in self.used.items()} if self.wall > 0 else {}


def is_ingest(name: str) -> bool:
    """``ingest``, ``ingest-2``, ``ingest-3``…: the ingest replicas' child names."""
    return name == "ingest" or name.startswith("ingest-")


def cpu_per_event(used: dict[str, float], events: int) -> dict[str, Any]:
    """µs of CPU per event for each process, ``ingest`` summed over its replicas (each one under
    ``ingest_per_replica``), ``services_total`` = ingest + vault + acquittal, ``all`` = every process
    measured."""
    micros = {name: 1e6 * seconds / events for name, seconds in used.items()}
    replicas = {name: us for name, us in sorted(micros.items()) if is_ingest(name)}
    out: dict[str, Any] = {"ingest": sum(replicas.values()), "ingest_per_replica": replicas}
    for name, us in sorted(micros.items()):
        if not is_ingest(name):
            out[name] = us
    out["services_total"] = out["ingest"] + out.get("vault", 0.0) + out.get("acquittal", 0.0)
    out["all"] = sum(micros.values())
    return out


# the acquittal reader -----------------------------------------------------------------------


class AcquittalReader:
    """Reads every partition of the acquittals topic (assigned by hand, no group) from the beginning
    of the (fresh) topic, and notes when each correlation id's first acquittal arrived."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.bootstrap = bootstrap
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.arrived: dict[str, float] = {}  # correlation id -> perf_counter at arrival
        self.arrived_at: dict[
            str, float
        ] = {}  # correlation id -> time.time() at arrival (the records' clock)
        self.status: dict[str, str] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, **CONSUMER_TUNING, **security())
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
            now, wall = time.perf_counter(), time.time()
            for records in batches.values():
                for record in records:
                    cid = header(list(record.headers or ()), CORRELATION_ID)
                    if cid is None or cid in self.arrived:
                        continue
                    self.arrived[cid] = now
                    self.arrived_at[cid] = wall
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
    await ensure_topics(bootstrap, {topic: partitions}, security=security())
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **CONSUMER_TUNING, **security())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING, **security())
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

    def to_json(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "arrived": self.arrived,
            "recorded": self.recorded,
            "achieved_rate": self.achieved_rate,
            "behind_ms": self.behind_ms,
        }


async def offered_load(
    producer: AIOKafkaProducer,
    topic: str,
    reader: AcquittalReader,
    batch: Sequence[Message],
    rate: float,
    drain_timeout: float,
    check: Callable[[], None],
) -> Latency:
    """Publish ``batch`` at ``rate`` events/s (scheduled by absolute time) and measure, per event, the
    time from its publish to its acquittal's arrival."""
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


async def hop_latencies(
    bootstrap: str, topics: object, prefixes: Collection[str], arrived_at: dict[str, float] | None = None
) -> dict[str, dict[str, list[float]]]:
    """Per correlation-id prefix, per service, the delays (ms) between an event's record on its input
    topic and the record it caused on its output topic, from the broker's record timestamps
    (CreateTime, set by each producer's clock: one machine, one clock). Where the end-to-end latency
    goes, hop by hop. With ``arrived_at`` (the reader's arrival times), the last hop too: from the
    acquittal's record to the platform's consumer (the broker's append, the fetch)."""
    stamps: dict[str, dict[str, dict[str, int]]] = {prefix: {} for prefix in prefixes}
    for name in ("events_in", "normalized", "receipts", "acquittals"):
        for record in await drain(bootstrap, getattr(topics, name), security=security()):
            cid = header(list(record.headers or ()), CORRELATION_ID)
            if cid:
                prefix = cid.split("-", 1)[0] + "-"
                if prefix in stamps:
                    stamps[prefix].setdefault(cid, {})[name] = record.timestamp
    hops = {
        prefix: {
            label: sorted(float(s[b] - s[a]) for s in by_cid.values() if a in s and b in s)
            for a, b, label in HOPS
        }
        for prefix, by_cid in stamps.items()
    }
    if arrived_at is not None:
        for prefix, by_cid in stamps.items():
            hops[prefix][DELIVERY] = sorted(
                arrived_at[cid] * 1000 - s["acquittals"]
                for cid, s in by_cid.items()
                if "acquittals" in s and cid in arrived_at
            )
    return hops


DELIVERY = "delivery: acquittals -> platform"
FSYNC = "vault: journal fsync (bucket bound)"


def fsync_buckets(stack: Stack) -> dict[float, float] | None:
    """The vault's ``coffre_fsync_seconds{store="vault_journal"}`` histogram (cumulative count per
    upper bound, seconds) from its metrics endpoint; None when it does not answer."""
    port = stack.ops_port("vault") if "vault" in stack.children else 0
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    found: dict[float, float] = {}
    for line in text.splitlines():
        m = FSYNC_BUCKET.match(line)
        if m:
            found[math.inf if m["le"] == "+Inf" else float(m["le"])] = float(m["count"])
    return found or None


FSYNC_BUCKET = re.compile(
    r'coffre_fsync_seconds_bucket\{(?=[^}]*store="vault_journal")[^}]*le="(?P<le>[^"]+)"[^}]*\} (?P<count>\S+)'
)


def fsync_delays(before: dict[float, float] | None, after: dict[float, float] | None) -> list[float]:
    """The group fsyncs between two readings of :func:`fsync_buckets`, each given its bucket's upper
    bound in ms (the histogram keeps no more): percentiles read "at most"."""
    if not before or not after:
        return []
    delays: list[float] = []
    below = 0.0
    for bound in sorted(after):
        count = after[bound] - before.get(bound, 0.0)
        delays += [bound * 1000 if bound != math.inf else math.inf] * int(count - below)
        below = count
    return delays


@dataclass
class Stress:
    """One stress phase: the latency at the offered load while something else happens."""

    name: str
    latency: Latency | None = None
    hops: dict[str, list[float]] = field(default_factory=dict)
    cpu: CpuMeter | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    """What happened besides (lots sealed, downloads and proofs and their times)."""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"latency_ms": spread(self.latency.latencies_ms) if self.latency else None}
        if self.latency:
            out.update(self.latency.to_json())
        out["hops_ms"] = {label: spread(delays) for label, delays in self.hops.items()}
        out.update(self.facts)
        if self.cpu:
            out["wall_s"] = self.cpu.wall
            out["cpu_percent"] = self.cpu.percent()
        out["error"] = self.error
        return out


@dataclass
class Results:
    code: Code
    replicas: int = 1
    bootstrap: str = ""
    broker: str = "embedded"
    """``embedded``, ``apache`` or the ``--bootstrap`` given."""
    raw_rate: float | None = None
    e2e_rate: float | None = None
    e2e_recorded: int = 0
    e2e_seconds: float = 0.0
    latency: Latency | None = None
    hops: dict[str, list[float]] = field(default_factory=dict)
    cpu: CpuMeter | None = None
    stress: dict[str, Stress] = field(default_factory=dict)
    auditor: AuditorPhase | None = None
    evidence: EvidencePhase | None = None
    children: dict[str, list[str]] = field(default_factory=dict)
    """Each stack's child processes, by stack ("main", "sealing")."""
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: int = 0


class Session:
    """The bench's side of one running stack: an acquittal reader, a producer, and a check that
    every service is still alive. Entered, it warms the stack up (one event per coffre, acquitted:
    every group joined and every service ready)."""

    def __init__(self, stack: Stack, args: argparse.Namespace):
        self.stack = stack
        self.args = args
        self.settings = stack.settings
        self.topics = stack.settings.topics
        assert stack.bootstrap
        self.bootstrap = stack.bootstrap
        self.reader = AcquittalReader(self.bootstrap, self.topics.acquittals, self.settings.partitions)
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, **PRODUCER_TUNING, **security(self.settings)
        )

    def check(self) -> None:
        dead = {
            name: child.returncode for name, child in self.stack.children.items() if child.poll() is not None
        }
        if dead:
            raise RuntimeError(f"service(s) exited: {dead} (logs in {self.settings.data_dir}/logs)")

    async def __aenter__(self) -> Session:
        await self.reader.start()
        await self.producer.start()
        try:
            warm = messages("w", self.args.coffres, self.args.coffres, start=WARM_START)
            began = time.perf_counter()
            await publish_burst(self.producer, self.topics.events_in, warm)
            if not await self.reader.wait_for([cid for cid, _ in warm], self.args.ready_timeout, self.check):
                raise PhaseTimeout(
                    f"the stack was not ready within {self.args.ready_timeout:.0f} s (no warm-up acquittal)"
                )
            say(f"stack ready: warm-up acquittals after {time.perf_counter() - began:.1f} s")
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.producer.stop()
        await self.reader.stop()

    async def burst(self, batch: Sequence[Message], what: str) -> float:
        """Publish ``batch`` as fast as possible and wait for every acquittal; the seconds from the
        first publish to the last acquittal."""
        first = await publish_burst(self.producer, self.topics.events_in, batch)
        if not await self.reader.wait_for([cid for cid, _ in batch], self.args.timeout, self.check):
            got = sum(1 for cid, _ in batch if cid in self.reader.arrived)
            raise PhaseTimeout(
                f"{what}: {got:,} of {len(batch):,} acquittals within {self.args.timeout:.0f} s"
            )
        return max(self.reader.arrived[cid] for cid, _ in batch) - first

    async def load(self, batch: Sequence[Message], what: str) -> Latency:
        """The offered load of the latency phases: ``batch`` at ``--rate``, each event's latency."""
        latency = await offered_load(
            self.producer,
            self.topics.events_in,
            self.reader,
            batch,
            self.args.rate,
            self.args.timeout,
            self.check,
        )
        if latency.arrived < latency.sent:
            raise PhaseTimeout(
                f"{what}: {latency.arrived:,} of {latency.sent:,} acquittals within {self.args.timeout:.0f} s"
            )
        return latency


async def main_stack_phases(
    stack: Stack, args: argparse.Namespace, results: Results, pids: dict[str, int]
) -> None:
    """Warm-up, sustained end-to-end rate, latency at a fixed load, then the regulator stress phase:
    all against the first stack."""
    async with Session(stack, args) as session:

        async def rate_phase() -> None:
            """Sustained end-to-end rate, and the CPU per event."""
            batch = messages("t", args.events, args.coffres)
            meter = CpuMeter(pids)
            results.cpu = meter
            say(f"end to end: publishing {len(batch):,} events…")
            meter.start()
            try:
                first = await publish_burst(session.producer, session.topics.events_in, batch)
                complete = await session.reader.wait_for(
                    [cid for cid, _ in batch], args.timeout, session.check
                )
            finally:
                meter.stop()
            times = [session.reader.arrived[cid] for cid, _ in batch if cid in session.reader.arrived]
            results.e2e_recorded = sum(1 for cid, _ in batch if session.reader.status.get(cid) == "recorded")
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

        fsyncs: list[float] = []

        async def latency_phase() -> None:
            """Latency at a fixed offered load."""
            await asyncio.sleep(1.0)  # let the pipeline settle
            say(f"latency: {args.rate:,.0f} events/s for {args.seconds:g} s…")
            batch = messages("l", max(1, round(args.rate * args.seconds)), args.coffres, start=LATENCY_START)
            before = await asyncio.to_thread(fsync_buckets, stack)
            results.latency = await session.load(batch, "latency")
            fsyncs[:] = fsync_delays(before, await asyncio.to_thread(fsync_buckets, stack))

        if args.auditor:  # first, while the partitions are small (the other phases grow them)
            auditor = AuditorPhase()
            results.auditor = auditor
            try:
                await auditor_phase(session, stack, args, pids, auditor)
            except Exception as exc:
                auditor.error = f"{type(exc).__name__}: {exc}"
            if auditor.error:
                results.errors.append(f"auditor phase: {auditor.error}")
                results.status = 1

        for phase in (latency_phase, rate_phase) if args.latency_first else (rate_phase, latency_phase):
            await phase()

        stress = Stress("regulator")
        results.stress["regulator"] = stress
        try:
            await regulator_phase(session, stack, args, pids, stress)
        except Exception as exc:
            stress.error = f"{type(exc).__name__}: {exc}"
        if stress.error:
            results.errors.append(f"regulator phase: {stress.error}")
            results.status = 1

        hops = await hop_latencies(
            session.bootstrap, session.topics, ("l-", "g-", "b-", "a-", "z-"), session.reader.arrived_at
        )
        results.hops = hops["l-"]
        if fsyncs:
            results.hops[FSYNC] = fsyncs
        stress.hops = hops["g-"]
        if results.auditor:
            results.auditor.hops = {"without": hops["b-"], "with": hops["a-"], "after": hops["z-"]}


@dataclass
class AuditorPhase:
    """The acquittal latency without the auditor, with it auditing beside the stack, and without
    it again once stopped: the two measures without it bracket the one with it, so that what the
    stack's growth alone changes (the embedded broker's fetches slow as partitions grow) is seen
    apart from what the auditor changes."""

    without: Latency | None = None
    with_auditor: Latency | None = None
    after: Latency | None = None
    """Without the auditor again, once it is stopped."""
    hops: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    backlog_events: int = 0
    """Events on the normalized topic when the auditor started (the phases before)."""
    catch_up_s: float | None = None
    """From the auditor's start to its group's offsets on the normalized topic at that backlog's end."""
    cpu: CpuMeter | None = None
    """Every process during the latency measure with the auditor."""
    error: str | None = None

    def ratio(self) -> dict[str, float] | None:
        """with / without, for p50 and p99; without = the mean of the measures before and after
        (the one before alone when there is no after)."""
        if not (
            self.without
            and self.with_auditor
            and self.without.latencies_ms
            and self.with_auditor.latencies_ms
        ):
            return None
        sides = [m for m in (self.without, self.after) if m and m.latencies_ms]
        out = {}
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            before = sum(percentile(m.latencies_ms, q) for m in sides) / len(sides)
            out[name] = percentile(self.with_auditor.latencies_ms, q) / before if before > 0 else math.nan
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_without_ms": spread(self.without.latencies_ms) if self.without else None,
            "latency_with_ms": spread(self.with_auditor.latencies_ms) if self.with_auditor else None,
            "latency_after_ms": spread(self.after.latencies_ms) if self.after else None,
            "with_over_without": self.ratio(),
            "hops_ms": {
                side: {label: spread(delays) for label, delays in hops.items()}
                for side, hops in self.hops.items()
            },
            "backlog_events": self.backlog_events,
            "catch_up_s": self.catch_up_s,
            "audited_per_s": self.backlog_events / self.catch_up_s if self.catch_up_s else None,
            "cpu_percent": self.cpu.percent() if self.cpu else None,
            "error": self.error,
        }


async def auditor_lag(bootstrap: str, prefix: str, topic: str, partitions: int) -> tuple[int, int]:
    """(events on ``topic``, how many of them the auditor's group has not committed yet)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=f"{prefix}auditor", enable_auto_commit=False, **security()
    )
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps)
        committed = {tp: (await consumer.committed(tp)) or 0 for tp in tps}
    finally:
        await consumer.stop()
    return sum(ends.values()), sum(max(0, ends[tp] - committed[tp]) for tp in tps)


async def auditor_phase(
    session: Session, stack: Stack, args: argparse.Namespace, pids: dict[str, int], phase: AuditorPhase
) -> None:
    """The latency at ``--rate`` without the auditor; the auditor started and given the backlog of
    the phases before; the latency again while it audits each new event."""
    from coffre.commands.stack import AUDITOR

    count = max(1, round(args.rate * args.seconds))
    await asyncio.sleep(1.0)
    say(f"auditor phase: latency without the auditor, {args.rate:,.0f} events/s for {args.seconds:g} s…")
    phase.without = await session.load(
        messages("b", count, args.coffres, start=AUDITOR_OFF_START), "without auditor"
    )
    topic, prefix = session.topics.normalized, session.settings.topic_prefix
    phase.backlog_events, _ = await auditor_lag(session.bootstrap, prefix, topic, session.settings.partitions)
    began = time.perf_counter()
    child = stack.spawn(AUDITOR)
    if child is None:
        raise RuntimeError("this code has no auditor")
    pids[AUDITOR] = child.pid
    say(f"auditor phase: the auditor started; auditing the {phase.backlog_events:,} events recorded so far…")
    while True:
        session.check()
        _, lag = await auditor_lag(session.bootstrap, prefix, topic, session.settings.partitions)
        if lag == 0:
            break
        if time.perf_counter() - began > args.timeout:
            raise PhaseTimeout(
                f"the auditor did not catch up within {args.timeout:.0f} s ({lag:,} events left)"
            )
        await asyncio.sleep(0.5)
    phase.catch_up_s = time.perf_counter() - began
    say(f"auditor phase: caught up in {phase.catch_up_s:.1f} s; latency with the auditor…")
    phase.cpu = CpuMeter(dict(pids))
    phase.cpu.start()
    try:
        phase.with_auditor = await session.load(
            messages("a", count, args.coffres, start=AUDITOR_ON_START), "with the auditor"
        )
    finally:
        phase.cpu.stop()
    say("auditor phase: the auditor stopped; latency without it again…")
    stack.children.pop(AUDITOR, None)  # stopped on purpose: not a service that died
    child.terminate()
    await asyncio.to_thread(child.wait, 30)
    pids.pop(AUDITOR, None)
    await asyncio.sleep(1.0)
    phase.after = await session.load(
        messages("z", count, args.coffres, start=AUDITOR_AFTER_START), "without the auditor again"
    )


async def regulator_phase(
    session: Session, stack: Stack, args: argparse.Namespace, pids: dict[str, int], stress: Stress
) -> None:
    """The offered load while a client process downloads the day's export and asks ``--proofs``
    inclusion proofs, in a loop for the whole window (``bench/_regulator_client.py``)."""
    tls, port = stack.api_tls, stack.settings.api_port
    if tls is None or not port:
        raise RuntimeError("the regulator API is off (no port or no development TLS material)")
    await asyncio.sleep(1.0)  # let the pipeline settle
    data = Path(stack.settings.data_dir)
    log = open(data / "logs" / "regulator-client.log", "ab")  # noqa: SIM115 - closed below
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CLIENT),
        "--port",
        str(port),
        "--ca",
        str(tls.ca_cert),
        "--seconds",
        str(args.stress_seconds),
        "--proofs",
        str(args.proofs),
        "--ready-timeout",
        str(args.ready_timeout),
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
        env={**os.environ, TOKEN_VARIABLE: tls.token()},
        cwd=data,
    )
    try:
        assert client.stdout
        try:
            ready = await asyncio.wait_for(client.stdout.readline(), args.ready_timeout + 10)
        except TimeoutError:
            ready = b""
        if ready.strip() != b"ready":
            log.flush()
            said = (data / "logs" / "regulator-client.log").read_text(errors="replace").strip().splitlines()
            raise RuntimeError(
                f"the regulator client did not start: {said[-1] if said else 'nothing said'} (is any "
                f"process of the stack serving the API on port {port}? children: {', '.join(stack.children)})"
            )
        say(
            f"regulator: {args.rate:,.0f} events/s for {args.stress_seconds:g} s while a client downloads "
            f"the day's export and asks {args.proofs} proofs, in a loop…"
        )
        meter = CpuMeter(pids)
        stress.cpu = meter
        meter.start()
        batch = messages(
            "g", max(1, round(args.rate * args.stress_seconds)), args.coffres, start=REGULATOR_START
        )
        stress.latency = await session.load(batch, "regulator phase")
        try:
            output = await asyncio.wait_for(client.stdout.read(), args.timeout)
        except TimeoutError:
            raise PhaseTimeout(
                f"regulator phase: the client did not finish within {args.timeout:.0f} s"
            ) from None
        await client.wait()
        meter.stop()
        if client.returncode != 0:
            raise RuntimeError(
                f"the regulator client exited with {client.returncode} (see {data}/logs/regulator-client.log)"
            )
        stress.facts.update(client_facts(json.loads(output.decode().strip().splitlines()[-1]), args.proofs))
        if isinstance(stress.facts.get("client_cpu_s"), float):
            meter.used["regulator_client"] = stress.facts["client_cpu_s"]  # its own, measured from ready
    finally:
        if client.returncode is None:
            client.kill()
            await client.wait()
        log.close()
    failures = stress.facts.get("failures") or []
    if failures:
        stress.error = f"the regulator client: {failures[0]}"


def client_facts(out: dict[str, Any], proofs_per_batch: int) -> dict[str, Any]:
    """The regulator client's report, summed up for the JSON and the table."""
    downloads = out["downloads"]
    seconds = [d[0] for d in downloads]
    batches = out["proof_batches_s"]
    return {
        "day": out["day"],
        "sealed_events_at_start": out["sealed_events_at_start"],
        "sealed_events_at_end": out["sealed_events_at_end"],
        "export_downloads": len(downloads),
        "export_bytes": max((d[1] for d in downloads), default=0),
        "download_s": {"mean": sum(seconds) / len(seconds), "max": max(seconds)} if seconds else None,
        "proofs": len(out["proofs_ms"]),
        "proofs_per_batch": proofs_per_batch,
        "proof_ms": spread(out["proofs_ms"]),
        "proof_batches": len(batches),
        "proof_batch_s": {"mean": sum(batches) / len(batches), "max": max(batches)} if batches else None,
        "statuses": out["statuses"],
        "client_cpu_s": out.get("cpu_s"),
        "failures": out["failures"],
    }


def count_lots(archive: Path) -> int:
    """Lots in a local archive (``IDOper/IDCoffre/YYYY/MM/DD/<lot>.xml``; checkpoints are shallower)."""
    return sum(1 for _ in archive.glob("*/*/*/*/*/*.xml"))


def sealing_plan(coffres: int, window: int, lot: int, recorded: int = 1) -> tuple[list[int], list[int]]:
    """(events to publish before the window, lots the window should seal), per coffre index.

    The window's events go round-robin to the coffres (event ``aligned + k`` to coffre index
    ``k % coffres``). Coffre index i is filled so that its lot fills at its window event number
    ``(i + 1/2) / coffres`` of the way through: the seals are spread over the window. ``recorded``:
    the events each coffre already holds (the warm-up's one)."""
    prefill, seals = [], []
    for i in range(coffres):
        count = len(range(i, window, coffres))
        if count == 0:
            prefill.append(0)
            seals.append(0)
            continue
        at = max(1, round((i + 0.5) / coffres * count))
        fill = (-recorded - at) % lot
        prefill.append(fill)
        before = recorded + fill
        seals.append((before + count) // lot - before // lot)
    return prefill, seals


async def sealing_phases(
    stack: Stack, args: argparse.Namespace, pids: dict[str, int], stress: Stress
) -> None:
    """The offered load while lots of ``--sealing-lot-events`` are sealed, on the second stack."""
    async with Session(stack, args) as session:
        lot = stack.settings.lot_max_events
        window = max(1, round(args.rate * args.stress_seconds))
        prefill, seals = sealing_plan(args.coffres, window, lot)
        base = aligned(PREFILL_START, args.coffres)
        batch = [
            (f"p-{n}", event(n, args.coffres))
            for j in range(max(prefill))
            for i in range(args.coffres)
            if j < prefill[i]
            for n in (base + i + args.coffres * j,)
        ]
        say(
            f"sealing: filling {args.coffres} coffres to just under a lot of {lot:,} ({len(batch):,} events)…"
        )
        prefill_s = await session.burst(batch, "sealing prefill") if batch else 0.0
        stress.facts.update(
            {
                "lot_events": lot,
                "prefill_events": len(batch),
                "prefill_s": prefill_s,
                "lots_expected": sum(seals),
            }
        )
        await asyncio.sleep(1.0)  # let the pipeline settle
        archive = stack.settings.archive_root
        before = count_lots(archive)
        say(
            f"sealing: {args.rate:,.0f} events/s for {args.stress_seconds:g} s, sealing {sum(seals)} lots "
            f"of {lot:,} on the way…"
        )
        meter = CpuMeter(pids)
        stress.cpu = meter
        meter.start()
        window_batch = messages("s", window, args.coffres, start=aligned(SEALING_START, args.coffres))
        stress.latency = await session.load(window_batch, "sealing phase")
        meter.stop()
        deadline = time.monotonic() + 30  # the last seal may still be under way
        while (sealed := count_lots(archive) - before) < sum(seals) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stress.facts["lots_sealed"] = sealed
        if sealed < sum(seals):
            stress.error = f"only {sealed} of the {sum(seals)} lots expected were sealed"
        stress.hops = (await hop_latencies(session.bootstrap, session.topics, ("s-",)))["s-"]


WINDOWS = ("up", "outage", "back")
"""The evidence phase's three measures: the TSA and witness up, stopped, back (catching up)."""


@dataclass
class EvidencePhase:
    """The acquittal latency of two stacks under the same load in three windows (``up``,
    ``outage``, ``back``): one without evidence, one whose vault gets a token and a cosignature
    for every checkpoint and whose TSA and witness are stopped during ``outage``; then whether
    every checkpoint got its token and its cosignature."""

    off: dict[str, Latency] = field(default_factory=dict)
    on: dict[str, Latency] = field(default_factory=dict)
    hops: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    """Per side and window, the delays of each service."""
    outage_s: float = 0.0
    missing_after_outage: dict[str, int] = field(default_factory=dict)
    """Checkpoints without a token, without a cosignature, when the TSA and witness came back."""
    catch_up_s: float | None = None
    """From their return to every checkpoint of the archive having both."""
    archive: dict[str, Any] = field(default_factory=dict)
    witness: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        sides = {"off": self.off, "on": self.on}
        return {
            "latency_ms": {
                side: {w: spread(m[w].latencies_ms) if w in m else None for w in WINDOWS}
                for side, m in sides.items()
            },
            "arrived": {
                side: {w: [m[w].arrived, m[w].sent] if w in m else None for w in WINDOWS}
                for side, m in sides.items()
            },
            "hops_ms": {
                side: {
                    w: {label: spread(delays) for label, delays in hops.items()}
                    for w, hops in windows.items()
                }
                for side, windows in self.hops.items()
            },
            "outage_s": self.outage_s,
            "missing_after_outage": self.missing_after_outage,
            "catch_up_s": self.catch_up_s,
            "archive": self.archive,
            "witness": self.witness,
            "error": self.error,
        }


def evidence_settings(base: dict[str, Any], prefix: str, data: Path, **extra: Any) -> Settings:
    return Settings(**base, topic_prefix=prefix, data_dir=data, **extra)


async def evidence_windows(
    stack: Stack, args: argparse.Namespace, side: str, phase: EvidencePhase, services: EvidenceProcess | None
) -> float | None:
    """The three windows of load on ``stack``; with ``services``, stopped during the second.
    Returns when they came back (monotonic)."""
    measures = phase.on if services else phase.off
    back = None
    async with Session(stack, args) as session:
        await asyncio.sleep(1.0)  # let the pipeline settle
        for n, window in enumerate(WINDOWS):
            seconds = args.evidence_outage_seconds if window == "outage" else args.stress_seconds
            prefix = f"e{side}{window}"
            batch = messages(
                prefix,
                max(1, round(args.evidence_rate * seconds)),
                args.coffres,
                start=aligned(EVIDENCE_START + n * 2_000_000 + (1_000_000 if services else 0), args.coffres),
            )
            what = "with a TSA and a witness" if services else "without evidence"
            if window == "outage" and services:
                what = "the TSA and the witness stopped"
                await asyncio.to_thread(services.down)  # waits for the child: not in the measuring loop
            say(f"evidence: {args.evidence_rate:,.0f} events/s for {seconds:g} s, {what} ({window})…")
            try:
                measures[window] = latency = await offered_load(
                    session.producer,
                    session.topics.events_in,
                    session.reader,
                    batch,
                    args.evidence_rate,
                    args.timeout,
                    session.check,
                )
                if latency.arrived < latency.sent:
                    raise PhaseTimeout(
                        f"evidence phase ({side}, {window}): {latency.arrived:,} of {latency.sent:,} "
                        f"acquittals within {args.timeout:.0f} s"
                    )
                if window == "outage":
                    await asyncio.sleep(1.5)  # the last lots of the window sealed (lots age 1 s)
            finally:
                if window == "outage" and services:
                    await asyncio.to_thread(services.up)
            if window == "outage" and services:
                back = time.monotonic()
                phase.outage_s = services.outages[-1]
                missing = archive_evidence(stack.settings.archive_root)
                phase.missing_after_outage = {
                    "untimestamped": missing.untimestamped,
                    "uncosigned": missing.uncosigned,
                }
                say(
                    f"evidence: back after {phase.outage_s:.1f} s; {missing.untimestamped} checkpoints "
                    f"without a token, {missing.uncosigned} without a cosignature"
                )
        prefixes = [f"e{side}{window}-" for window in WINDOWS]
        hops = await hop_latencies(session.bootstrap, session.topics, prefixes)
        phase.hops[side] = {window: hops[f"e{side}{window}-"] for window in WINDOWS}
    return back


async def evidence_check(
    stack: Stack, args: argparse.Namespace, services: EvidenceProcess, phase: EvidencePhase, back: float
) -> None:
    """Wait until every checkpoint has its token and cosignature, then verify them all."""
    archive = stack.settings.archive_root
    await asyncio.sleep(1.5)  # the last lot sealed
    deadline = time.monotonic() + args.timeout
    while not (found := archive_evidence(archive)).complete and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    if found.complete:
        phase.catch_up_s = time.monotonic() - back
    checked = archive_evidence(archive, services)
    phase.archive = checked.to_json()
    phase.witness = services.stats()
    if not checked.complete:
        phase.error = (
            f"{checked.untimestamped} of {checked.checkpoints} checkpoints without a token and "
            f"{checked.uncosigned} without a cosignature {args.timeout:.0f} s after the TSA and witness came back"
        )
    elif checked.invalid:
        phase.error = f"{len(checked.invalid)} tokens or cosignatures do not verify: {checked.invalid[0]}"


def evidence_phases(
    args: argparse.Namespace,
    bootstrap: str,
    code: Code,
    replicas: int,
    data: Path,
    run: str,
    phase: EvidencePhase,
    stacks: list[Stack],
    codes: dict[str, dict[str, int | None]],
) -> None:
    """The evidence phase: a stack without evidence, then one with a TSA and a witness, each
    under the same three windows of load."""
    base = {
        "bootstrap_servers": bootstrap,
        "partitions": args.partitions,
        "ops_port": 0,
        "api_port": 0,
        "lot_max_events": args.lot_events,
        "lot_max_age_seconds": 1.0,  # a checkpoint per coffre every second: evidence to fetch all along
    }
    say("evidence: a stack without evidence, lots sealed every second…")
    stack = start_stack(
        evidence_settings(base, f"bench{run}eo.", data / "evidence-off"), bootstrap, code, replicas, data
    )
    stacks.append(stack)
    try:
        asyncio.run(evidence_windows(stack, args, "off", phase, None))
    finally:
        codes["evidence-off"] = stack.stop()
        stacks.remove(stack)
    on_data = data / "evidence"
    services = EvidenceProcess(
        data / "evidence-services", operator_cert=Settings(data_dir=on_data).key_paths[1]
    )
    services.start()
    try:
        settings = evidence_settings(
            base, f"bench{run}e.", on_data, **services.settings(max_retry_seconds=1.0)
        )
        say("evidence: a stack whose vault gets a token and a cosignature for every checkpoint…")
        stack = start_stack(settings, bootstrap, code, replicas, data)
        stacks.append(stack)
        try:
            back = asyncio.run(evidence_windows(stack, args, "on", phase, services))
            assert back is not None
            asyncio.run(evidence_check(stack, args, services, phase, back))
        finally:
            codes["evidence"] = stack.stop()
            stacks.remove(stack)
    finally:
        services.stop()


# whose services run ---------------------------------------------------------------------------


@dataclass
class Code:
    """Whose services the stack runs: the current checkout's, or REV's from a temporary worktree."""

    label: str
    """``current``, or REV as given."""
    revision: str
    """The abbreviated commit."""
    dirty: bool = False
    checkout: Checkout | None = None
    services: tuple[str, ...] | None = None
    """REV's ``coffre.commands.stack.SERVICES`` (None: the current Stack's own)."""
    replicas: bool = True
    """Whether this code's ingest can run as several replicas."""
    auditor: bool = True
    """Whether this code has the auditor (``coffre auditor``, ``coffre.commands.stack.AUDITOR``)."""

    @classmethod
    def current(cls) -> Code:
        try:
            return cls("current", short_revision(), dirty(), replicas=STACK_HAS_REPLICAS)
        except (OSError, subprocess.CalledProcessError):
            return cls("current", "unknown", replicas=STACK_HAS_REPLICAS)

    @classmethod
    def of(cls, checkout: Checkout) -> Code:
        # where REV keeps its Stack: coffre/commands/stack.py since the command layer moved, before that coffre/stack.py
        stack = checkout.read("coffre/commands/stack.py") or checkout.read("coffre/stack.py") or ""
        return cls(
            checkout.revision,
            checkout.commit,
            checkout=checkout,
            services=with_regulator(stack_services(stack), stack),
            replicas="ingest_replicas" in stack,
            auditor='AUDITOR = "auditor"' in stack,
        )

    def env(self) -> dict[str, str]:
        """What the children's environment gets on top of the Stack's."""
        return {"PYTHONPATH": self.checkout.pythonpath} if self.checkout else {}

    def verify_imports(self, cwd: Path) -> None:
        """Raise unless a child run like the stack's imports this code (REV's, not the checkout's)."""
        if not self.checkout:
            return
        packages = [
            "coffre",
            *(f"coffre_{name}" for name in self.services or ("ingest", "vault", "acquittal")),
        ]
        probe = "import importlib, json, sys; print(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))"
        done = subprocess.run(
            [sys.executable, "-c", probe, *packages],
            env={**os.environ, **self.env()},
            cwd=cwd,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.label}'s code does not import: {done.stderr.strip()[-500:]}")
        root = self.checkout.folder.resolve()
        wrong = {
            n: f for n, f in json.loads(done.stdout).items() if not Path(f).resolve().is_relative_to(root)
        }
        if wrong:
            raise RuntimeError(f"{self.label}: imported from outside its worktree: {wrong}")


def stack_services(source: str) -> tuple[str, ...] | None:
    """The ``SERVICES = (...)`` tuple of a stack's source (``coffre/commands/stack.py``), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "SERVICES" for t in targets) and node.value:
                with contextlib.suppress(ValueError):
                    value = ast.literal_eval(node.value)
                    if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
                        return tuple(value)
    return None


def with_regulator(services: tuple[str, ...] | None, source: str) -> tuple[str, ...] | None:
    """``services`` and ``regulator`` when the stack's source spawns the API as a process of its own
    beside ``SERVICES`` (since the console's index): without it REV would run without the API while
    the current checkout runs with it, and the CPU and rates would not compare."""
    if (
        services is None
        or "regulator" in services
        or not re.search(r'spawn\(("regulator"|REGULATOR)\)', source)
    ):
        return services
    return (*services, "regulator")


def base_service(name: str) -> str:
    """``ingest-2`` -> ``ingest``: the service a child name runs."""
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


def vault_data_dir(settings: Settings, name: str) -> Path:
    """The data folder of vault replica ``name``: the stack's own for ``vault``, else a folder of its
    own beside it (``<data>/vault-2`` for a stack in ``<data>/stack``): its journal and signing key."""
    return Path(settings.data_dir) if name == "vault" else Path(settings.data_dir).parent / name


def vault_certificates(settings: Settings, vaults: int = 1) -> list[Path]:
    """The signing certificate of each vault replica (each signs with its own development key)."""
    return [
        signing_files(settings.model_copy(update={"data_dir": vault_data_dir(settings, name)}))[1]
        for name in ["vault", *(f"vault-{n}" for n in range(2, vaults + 1))]
    ]


def start_stack(
    settings: Settings,
    bootstrap: str | None,
    code: Code,
    replicas: int,
    cwd: Path,
    *,
    static: bool = False,
    vaults: int = 1,
) -> Stack:
    """A Stack running ``code``'s services, started with ``cwd`` as working directory (outside the
    project, so that ``python -m coffre.cli`` does not import the checkout it runs from). ``static``:
    each child its own ``COFFRE_KAFKA_GROUP_INSTANCE_ID`` (its name: ``ingest-2``…), the same at
    every restart, as a pod's name in Kubernetes. ``bootstrap`` None: the Stack starts its broker as
    ``coffre up`` does. ``vaults`` > 1: vault replicas ``vault-2``… beside ``vault``, in its group,
    each with its own data folder (:func:`vault_data_dir`: journal, signing key) over the one archive
    (``COFFRE_ARCHIVE_DIR``, as an S3 bucket would be shared), each started and restarted as
    ``spawn("vault-2")``."""
    extra = code.env()
    allowed = code.services
    if vaults > 1:
        settings = settings.model_copy(update={"archive_dir": settings.archive_root})

    class BenchStack(Stack):
        def env(self, *args: Any, **kwargs: Any) -> dict[str, str]:
            env = {**super().env(*args, **kwargs), **extra}
            name = args[0] if args else kwargs.get("name")
            if static and name:
                env["COFFRE_KAFKA_GROUP_INSTANCE_ID"] = f"{settings.topic_prefix}{name}"
            if name and base_service(name) == "vault" and name != "vault":
                env["COFFRE_DATA_DIR"] = str(vault_data_dir(settings, name))
            return env

        def spawn(self, name: str, *args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
            if (
                allowed is not None
                and base_service(name) not in allowed
                and not (name == "auditor" and code.auditor)
            ):
                # REV has no such service (e.g. a regulator API of its own): its vault serves it.
                say(f"{code.label} has no {name} service: not started")
                return None  # type: ignore[return-value]
            return super().spawn(name, *args, **kwargs)

    kwargs: dict[str, Any] = {"bootstrap": bootstrap}
    if STACK_HAS_AUDITOR:
        kwargs["auditor"] = False  # started by the auditor phase alone
    if STACK_HAS_REPLICAS:
        kwargs["ingest_replicas"] = replicas
    stack = BenchStack(settings, **kwargs)
    with contextlib.chdir(cwd):
        if allowed is not None and "services" in inspect.signature(stack.start).parameters:
            # the API is the Stack's to start beside SERVICES (when the settings give it a port)
            stack.start(services=tuple(name for name in allowed if name != "regulator"))
        else:
            stack.start()
        for n in range(2, vaults + 1):
            stack.spawn(f"vault-{n}")
    for name in [name for name, child in stack.children.items() if child is None]:
        del stack.children[name]  # a service skipped above, should the Stack have kept its None
    return stack


def open_broker(kind: str, data: Path) -> tuple[Any, str]:
    """A broker of ``kind`` (``embedded``: Tansu; ``apache``: ``coffre up``'s own Apache Kafka,
    :class:`~coffre.adapters.apache_kafka.LocalKafka`, on free ports) for one measure,
    its logs under ``data``: the broker (``stop()``, ``pid``) and its bootstrap address."""
    if kind == "apache":
        broker: Any = LocalKafka(data / "apache-kafka", free_port_block(2), data / "logs" / "broker.log")
    else:
        broker = EmbeddedBroker(log_path=data / "logs" / "broker.log")
    return broker, broker.start()


BROKERS = {"embedded": ("embedded",), "apache": ("apache",), "both": ("embedded", "apache")}
"""``--broker``'s choices: the brokers measured, in order."""


def child_pids(stack: Stack, broker: EmbeddedBroker | None) -> dict[str, int]:
    pids = {name: child.pid for name, child in stack.children.items()}
    pids["bench"] = os.getpid()
    if broker and broker.pid:
        pids["broker"] = broker.pid
    return pids


# one measurement ------------------------------------------------------------------------------


def measure(args: argparse.Namespace, code: Code, broker_kind: str = "embedded") -> Results:
    """The whole measurement (raw, end to end, latency, both stress phases) for ``code``'s services,
    on a broker of its own (``broker_kind``: see :func:`open_broker`) unless ``--bootstrap`` names
    one. Raises KeyboardInterrupt (after cleaning up) on Ctrl-C."""
    results = Results(code)
    results.broker = args.bootstrap or broker_kind
    results.replicas = args.ingest_replicas
    if args.ingest_replicas > 1 and not code.replicas:
        results.replicas = 1
        results.notes.append(
            f"{code.label} ({code.revision}) has no ingest replicas: measured with 1 ingest, not {args.ingest_replicas}"
        )
    data = Path(tempfile.mkdtemp(prefix="coffre-bench-"))
    (data / "logs").mkdir()
    run = uuid.uuid4().hex[:8]
    broker: Any = None
    stacks: list[Stack] = []
    codes: dict[str, dict[str, int | None]] = {}
    say(
        f"== measuring {code.label} ({code.revision}{', uncommitted changes' if code.dirty else ''}), data in {data}"
    )
    try:
        code.verify_imports(data)
        if not args.bootstrap:
            broker, results.bootstrap = open_broker(broker_kind, data)
            say(f"{broker_kind} broker on {results.bootstrap} (pid {broker.pid})")
        else:
            results.bootstrap = args.bootstrap
        bootstrap = results.bootstrap

        say(f"raw passthrough: {args.events:,} messages…")
        raw_batch = messages("r", args.events, args.coffres)
        results.raw_rate = asyncio.run(
            raw_passthrough(bootstrap, f"bench{run}.raw", args.partitions, raw_batch, args.timeout)
        )

        main_settings = Settings(
            bootstrap_servers=bootstrap,
            topic_prefix=f"bench{run}.",
            data_dir=data / "main",
            partitions=args.partitions,
            # the services' metrics: the vault's journal fsyncs during the latency phase
            ops_port=free_port_block(5 + args.ingest_replicas),
            api_port=free_port_block(1),
            lot_max_events=args.lot_events,
        )
        stack = start_stack(main_settings, bootstrap, code, results.replicas, data)
        stacks.append(stack)
        results.children["main"] = list(stack.children)
        pids = child_pids(stack, broker)
        if args.profile:
            profile_hints(stack, broker.pid if broker else None)
        asyncio.run(main_stack_phases(stack, args, results, pids))
        codes["main"] = stack.stop()
        stacks.remove(stack)

        sealing = Stress("sealing")
        results.stress["sealing"] = sealing
        sealing_settings = Settings(
            bootstrap_servers=bootstrap,
            topic_prefix=f"bench{run}s.",
            data_dir=data / "sealing",
            partitions=args.partitions,
            ops_port=0,
            api_port=0,
            lot_max_events=args.sealing_lot_events,
            lot_max_age_seconds=24 * 3600,  # lots are sealed by count only
        )
        say(f"sealing: a second stack, lots of {args.sealing_lot_events:,} events…")
        stack = start_stack(sealing_settings, bootstrap, code, results.replicas, data)
        stacks.append(stack)
        results.children["sealing"] = list(stack.children)
        try:
            asyncio.run(sealing_phases(stack, args, child_pids(stack, broker), sealing))
        except Exception as exc:
            sealing.error = f"{type(exc).__name__}: {exc}"
        if sealing.error:
            results.errors.append(f"sealing phase: {sealing.error}")
            results.status = 1
        codes["sealing"] = stack.stop()
        stacks.remove(stack)

        if args.evidence:
            evidence = EvidencePhase()
            results.evidence = evidence
            try:
                evidence_phases(args, bootstrap, code, results.replicas, data, run, evidence, stacks, codes)
            except Exception as exc:
                evidence.error = f"{type(exc).__name__}: {exc}"
            if evidence.error:
                results.errors.append(f"evidence phase: {evidence.error}")
                results.status = 1
    except PhaseTimeout as exc:
        results.errors.append(str(exc))
        results.status = 1
    except Exception as exc:
        results.errors.append(f"{type(exc).__name__}: {exc}")
        results.status = 1
    finally:
        with contextlib.suppress(KeyboardInterrupt):
            for stack in stacks:
                codes[stack.settings.topic_prefix] = stack.stop()
            if broker:
                broker.stop()
            for which, exits in codes.items():
                if any(code != 0 for code in exits.values()):
                    results.notes.append(f"services of the {which} stack exited with {exits}")
            if results.status == 1:
                log_tails(data)
            if args.keep:
                say(f"data kept in {data}")
            else:
                shutil.rmtree(data, ignore_errors=True)
    return results


# the JSON ---------------------------------------------------------------------------------------


def to_json(results: Results, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement as a JSON object (see bench/README.md for every key)."""
    code = results.code
    cpu = results.cpu
    e2e_cpu = cpu_per_event(cpu.used, args.events) if cpu and cpu.used and results.e2e_rate else None
    latency = spread(results.latency.latencies_ms) if results.latency else None
    out: dict[str, Any] = {
        "code": code.label,
        "revision": code.revision,
        "uncommitted_changes": code.dirty,
        "ingest_replicas": results.replicas,
        "children": results.children,
        "broker": results.broker,
        "raw_msgs_per_s": results.raw_rate,
        "e2e_events_per_s": results.e2e_rate,
        "e2e_seconds": results.e2e_seconds or None,
        "e2e_recorded": results.e2e_recorded,
        "e2e_over_raw": results.e2e_rate / results.raw_rate
        if results.e2e_rate and results.raw_rate
        else None,
        "latency_ms": latency,
        "latency": {
            **(results.latency.to_json() if results.latency else {}),
            "hops_ms": {label: spread(delays) for label, delays in results.hops.items()},
        },
        "cpu_us_per_event": e2e_cpu,
        "cpu_percent": cpu.percent() if cpu else None,
        "sealing": results.stress["sealing"].to_json() if "sealing" in results.stress else None,
        "regulator": results.stress["regulator"].to_json() if "regulator" in results.stress else None,
        "auditor": results.auditor.to_json() if results.auditor else None,
        "evidence": results.evidence.to_json() if results.evidence else None,
    }
    p99 = {
        "latency": latency,
        "sealing": (out["sealing"] or {}).get("latency_ms"),
        "regulator": (out["regulator"] or {}).get("latency_ms"),
    }
    out["targets"] = {
        "e2e_events_per_s": TARGET_RATE,
        "services_cpu_us_per_event": TARGET_SERVICES_US,
        "broker_cpu_us_per_event": TARGET_BROKER_US,
        "latency_p99_ms": TARGET_P99_MS,
    }
    out["met"] = {
        "e2e_events_per_s": results.e2e_rate >= TARGET_RATE if results.e2e_rate else None,
        "services_cpu_us_per_event": e2e_cpu["services_total"] <= TARGET_SERVICES_US if e2e_cpu else None,
        "broker_cpu_us_per_event": e2e_cpu["broker"] <= TARGET_BROKER_US
        if e2e_cpu and "broker" in e2e_cpu
        else None,
        **{f"{name}_p99": s["p99"] <= TARGET_P99_MS if s else None for name, s in p99.items()},
    }
    out["errors"] = results.errors
    out["notes"] = results.notes
    out["status"] = results.status
    return out


def figures(side: dict[str, Any]) -> dict[str, float]:
    """The figures a baseline is compared on, flattened (``latency_ms.p99``…)."""
    out: dict[str, float] = {}
    for key in ("raw_msgs_per_s", "e2e_events_per_s"):
        if isinstance(side.get(key), int | float):
            out[key] = side[key]
    sections: list[tuple[str, Any]] = [
        ("latency_ms", side.get("latency_ms")),
        (
            "cpu_us_per_event",
            {k: v for k, v in (side.get("cpu_us_per_event") or {}).items() if k != "ingest_per_replica"},
        ),
    ]
    for stress in ("sealing", "regulator"):
        for key in ("latency_ms", "download_s", "proof_ms", "proof_batch_s"):
            sections.append((f"{stress}.{key}", (side.get(stress) or {}).get(key)))
    for key in ("latency_without_ms", "latency_with_ms"):
        sections.append((f"auditor.{key}", (side.get("auditor") or {}).get(key)))
    for prefix, values in sections:
        for key, value in (values or {}).items():
            if isinstance(value, int | float):
                out[f"{prefix}.{key}"] = value
    return out


def ratios(baseline: dict[str, Any], current: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """current / baseline for every figure both have; ``better`` says which way is better."""
    before, after = figures(baseline), figures(current)
    out = {}
    for key, value in after.items():
        if key in before and before[key] > 0:
            ratio = value / before[key]
            better = "higher" if key.endswith("_per_s") else "lower"
            out[key] = {
                "baseline": before[key],
                "current": value,
                "current_over_baseline": ratio,
                "better": better,
                "improved": ratio > 1 if better == "higher" else ratio < 1,
            }
    return out


# the table --------------------------------------------------------------------------------------


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


def latency_rows(
    head: str, lat: Latency | None, hops: dict[str, list[float]]
) -> list[tuple[str, str, str, str]]:
    if not lat or not lat.latencies_ms:
        return [(head, "n/a", f"p99 <= {TARGET_P99_MS:.0f} ms", "")]
    p99 = percentile(lat.latencies_ms, 0.99)
    rows = [
        (f"{head}: p50", f"{percentile(lat.latencies_ms, 0.50):.1f} ms", "", ""),
        ("  p99", f"{p99:.1f} ms", f"<= {TARGET_P99_MS:.0f} ms", verdict(p99 <= TARGET_P99_MS)),
        ("  max", f"{lat.latencies_ms[-1]:.1f} ms", "", ""),
        ("  acquittals arrived (recorded)", f"{lat.arrived:,}/{lat.sent:,} ({lat.recorded:,})", "", ""),
        ("  offered rate achieved", f"{lat.achieved_rate:,.0f} events/s", "", ""),
        ("  publisher behind schedule, max", f"{lat.behind_ms:.1f} ms", "", ""),
    ]
    for label, delays in hops.items():
        if delays:
            rows.append(
                (
                    f"  {label}",
                    f"p50 {percentile(delays, 0.5):.0f} / p99 {percentile(delays, 0.99):.0f} ms",
                    "",
                    "",
                )
            )
    return rows


def report(results: Results, args: argparse.Namespace, event_size: int) -> None:
    rows: list[tuple[str, str, str, str]] = []
    raw, e2e = results.raw_rate, results.e2e_rate
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
        if raw:
            rows.append(("  end to end / raw passthrough", f"{e2e / raw:.2f}", "", ""))
    meter = results.cpu
    e2e_cpu = cpu_per_event(meter.used, args.events) if meter and meter.used and e2e else None
    if e2e_cpu:
        services = e2e_cpu["services_total"]
        rows.append(
            (
                "CPU ingest + vault + acquittal",
                f"{services:,.0f} µs/event",
                f"<= {TARGET_SERVICES_US:.0f} µs/event",
                verdict(services <= TARGET_SERVICES_US),
            )
        )
        if "broker" in e2e_cpu:
            rows.append(
                (
                    "CPU broker",
                    f"{e2e_cpu['broker']:,.0f} µs/event",
                    f"<= {TARGET_BROKER_US:.0f} µs/event",
                    verdict(e2e_cpu["broker"] <= TARGET_BROKER_US),
                )
            )
    rows += latency_rows(
        f"latency @ {args.rate:,.0f}/s for {args.seconds:g} s", results.latency, results.hops
    )

    regulator = results.stress.get("regulator")
    if regulator:
        rows += latency_rows(
            f"while the regulator downloads + {args.proofs} proofs", regulator.latency, regulator.hops
        )
        f = regulator.facts
        if f.get("download_s"):
            rows.append(
                (
                    f"  export of {f['day']} downloads",
                    f"{f['export_downloads']} × {f['export_bytes'] / 1e6:,.1f} MB, "
                    f"mean {f['download_s']['mean']:.2f} s / max {f['download_s']['max']:.2f} s",
                    "",
                    "",
                )
            )
        if f.get("proof_ms"):
            batch = (
                f", {f['proofs_per_batch']} in mean {f['proof_batch_s']['mean']:.2f} s / max {f['proof_batch_s']['max']:.2f} s"
                if f.get("proof_batch_s")
                else ""
            )
            rows.append(
                (
                    "  inclusion proofs",
                    f"{f['proofs']:,}, p50 {f['proof_ms']['p50']:.1f} / p99 {f['proof_ms']['p99']:.1f} ms{batch}",
                    "",
                    "",
                )
            )
        if regulator.error:
            rows.append(("  error", regulator.error[:80], "", ""))

    auditor = results.auditor
    if auditor:
        rows += latency_rows(
            "auditor phase, without the auditor", auditor.without, auditor.hops.get("without", {})
        )
        rows += latency_rows(
            "with the auditor beside the stack", auditor.with_auditor, auditor.hops.get("with", {})
        )
        if auditor.after:
            rows += latency_rows(
                "the auditor stopped, without it again", auditor.after, auditor.hops.get("after", {})
            )
        ratio = auditor.ratio()
        if ratio:
            rows.append(
                (
                    "  with / without the auditor (mean of before and after)",
                    f"p50 {ratio['p50']:.2f}, p99 {ratio['p99']:.2f}",
                    "",
                    "",
                )
            )
        if auditor.catch_up_s:
            rows.append(
                (
                    "  auditor's catch-up of the backlog",
                    f"{auditor.backlog_events:,} events in {auditor.catch_up_s:.1f} s "
                    f"({auditor.backlog_events / auditor.catch_up_s:,.0f}/s)",
                    "",
                    "",
                )
            )
        if auditor.error:
            rows.append(("  error", auditor.error[:80], "", ""))

    sealing = results.stress.get("sealing")
    if sealing:
        lot = sealing.facts.get("lot_events", args.sealing_lot_events)
        rows += latency_rows(f"while sealing lots of {lot:,}", sealing.latency, sealing.hops)
        if "lots_sealed" in sealing.facts:
            f = sealing.facts
            rows.append(
                ("  lots sealed in the window", f"{f['lots_sealed']} (expected {f['lots_expected']})", "", "")
            )
            rows.append(
                (
                    "  prefill before the window",
                    f"{f['prefill_events']:,} events in {f['prefill_s']:.1f} s",
                    "",
                    "",
                )
            )
        if sealing.error:
            rows.append(("  error", sealing.error[:80], "", ""))
    evidence = results.evidence
    if evidence:
        labels = {
            "up": "with a TSA and a witness",
            "outage": f"TSA and witness down {evidence.outage_s:.0f} s",
            "back": "once they are back",
        }
        for window in WINDOWS:
            off, on = evidence.off.get(window), evidence.on.get(window)
            if off and on and off.latencies_ms and on.latencies_ms:
                p99_off, p99_on = percentile(off.latencies_ms, 0.99), percentile(on.latencies_ms, 0.99)
                rows.append(
                    (
                        f"evidence {labels[window]}: p99 off / on",
                        f"{p99_off:.1f} / {p99_on:.1f} ms",
                        f"<= {TARGET_P99_MS:.0f} ms",
                        verdict(p99_on <= TARGET_P99_MS),
                    )
                )
            else:
                rows.append((f"evidence {labels[window]}: p99 off / on", "n/a", "", ""))
        if evidence.archive:
            a = evidence.archive
            ok = a["checkpoints"] > 0 and not a["untimestamped"] and not a["uncosigned"] and not a["invalid"]
            done = a["checkpoints"] - max(a["untimestamped"], a["uncosigned"])
            rows.append(
                ("  checkpoints timestamped and cosigned", f"{done}/{a['checkpoints']}", "all", verdict(ok))
            )
        if evidence.missing_after_outage:
            m = evidence.missing_after_outage
            rows.append(
                (
                    "  missing when they came back",
                    f"{m['untimestamped']} tokens, {m['uncosigned']} cosignatures",
                    "",
                    "",
                )
            )
        if evidence.catch_up_s is not None:
            rows.append(("  all filled in after their return", f"{evidence.catch_up_s:.1f} s", "", ""))
        if evidence.error:
            rows.append(("  error", evidence.error[:80], "", ""))
    code = results.code
    print()
    print(
        f"coffre pipeline bench, {code.label} ({code.revision}{', uncommitted changes' if code.dirty else ''}): "
        f"broker {results.bootstrap}, {args.partitions} partitions, {results.replicas} ingest replica(s), "
        f"{args.events:,} events of {event_size} bytes (POINSCRIT) over {args.coffres} coffres, {os.cpu_count()} CPUs"
    )
    print_table(rows)
    if meter and meter.used and meter.wall > 0:
        print(f"CPU during the end-to-end phase ({meter.wall:.2f} s wall; 100% = one core):")
        events = args.events if e2e else 0
        for name, used in sorted(meter.used.items(), key=lambda item: -item[1]):
            per_event = f"  {1e6 * used / events:6.0f} µs/event" if events else ""
            print(f"  {name:<10} {used:7.2f} s  {100 * used / meter.wall:5.0f}%{per_event}")
        total = sum(meter.used.values())
        if events:
            print(
                f"  {'all':<10} {total:7.2f} s  {100 * total / meter.wall:5.0f}%  {1e6 * total / events:6.0f} µs/event"
                f"  -> at most {events / total * (os.cpu_count() or 1):,.0f} events/s on {os.cpu_count()} cores"
            )
    if results.auditor and results.auditor.cpu and results.auditor.cpu.wall > 0:
        cpu = results.auditor.cpu
        shares = ", ".join(f"{n} {p:.0f}%" for n, p in sorted(cpu.percent().items(), key=lambda i: -i[1]))
        print(f"CPU during the latency measure with the auditor ({cpu.wall:.1f} s): {shares}")
    for stress in results.stress.values():
        if stress.cpu and stress.cpu.wall > 0:
            shares = ", ".join(
                f"{n} {p:.0f}%" for n, p in sorted(stress.cpu.percent().items(), key=lambda i: -i[1])
            )
            print(f"CPU during the {stress.name} phase ({stress.cpu.wall:.1f} s): {shares}")
    for note in results.notes:
        print(f"note: {note}")
    for error in results.errors:
        print(f"error: {error}")


def number(value: float) -> str:
    """A figure for the side-by-side table: 1,234.5, or three significant digits below 10."""
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def compare(baseline: dict[str, Any], current: dict[str, Any], table: dict[str, dict[str, Any]]) -> None:
    print()
    print(
        f"side by side: baseline {baseline['code']} ({baseline['revision']}), current ({current['revision']})"
    )
    rows = [("figure", "baseline", "current", "current / baseline", "")]
    for key, r in table.items():
        rows.append(
            (
                key,
                number(r["baseline"]),
                number(r["current"]),
                f"{r['current_over_baseline']:.2f}",
                f"({r['better']} is better{': better' if r['improved'] else ''})",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def side_by_side(left_label: str, left: dict[str, Any], right_label: str, right: dict[str, Any]) -> None:
    """Two measures of one run (the embedded broker and Apache Kafka), figure by figure."""
    print()
    print(f"side by side: {left_label} ({left['broker']}) and {right_label} ({right['broker']})")
    rows = [("figure", left_label, right_label, f"{right_label} / {left_label}")]
    for key, r in ratios(left, right).items():
        rows.append((key, number(r["baseline"]), number(r["current"]), f"{r['current_over_baseline']:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def profile_hints(stack: Stack, broker_pid: int | None) -> None:
    """How to look inside the processes of this run (nothing is profiled automatically)."""
    say("profiling (--profile): coffre has no built-in profiler (no COFFRE_PROFILE variable).")
    say("  the per-process CPU table at the end says which process is busiest; then, while a phase runs:")
    for name, child in stack.children.items():
        say(f"    {name:<10} pid {child.pid}: py-spy top --pid {child.pid}   (pip install py-spy)")
    if broker_pid:
        say(f"    broker     pid {broker_pid}: perf top -p {broker_pid}")
    say("  or run one service under cProfile with the environment of Stack.env(), e.g.")
    say("    COFFRE_BOOTSTRAP_SERVERS=... COFFRE_TOPIC_PREFIX=... COFFRE_DATA_DIR=... \\")
    say("      .venv/bin/python -m cProfile -o vault.prof -m coffre.cli vault")


def log_tails(data: Path, lines: int = 15) -> None:
    for log in sorted(data.glob("**/logs/*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.relative_to(data)} (last {len(text)} lines)")
        print("\n".join(text))


# main -----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--broker",
        choices=sorted(BROKERS),
        default="embedded",
        help="the embedded broker (Tansu), a single-node Apache Kafka (coffre up's own, LocalKafka), or both "
        "one after the other, printed side by side",
    )
    parser.add_argument("--events", type=int, default=20_000, help="events of the raw and end-to-end phases")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the latency phase")
    parser.add_argument(
        "--rate", type=float, default=500.0, help="offered load of every latency phase, events/s"
    )
    parser.add_argument(
        "--stress-seconds",
        type=float,
        help="duration of each stress phase's window (default: --seconds)",
    )
    parser.add_argument(
        "--lot-events",
        type=int,
        help="COFFRE_LOT_MAX_EVENTS of the main stack (default: coffre's, 1000, or less when --events "
        "would not fill one lot per coffre: the regulator phase needs sealed lots)",
    )
    parser.add_argument(
        "--sealing-lot-events",
        type=int,
        default=10_000,
        help="COFFRE_LOT_MAX_EVENTS of the sealing phase's stack",
    )
    parser.add_argument(
        "--proofs", type=int, default=100, help="inclusion proofs per round of the regulator phase"
    )
    parser.add_argument(
        "--ingest-replicas",
        type=int,
        default=1,
        help="ingest processes of each stack (more than 1 needs a Stack with ingest_replicas)",
    )
    parser.add_argument("--coffres", type=int, default=4, help="IDCoffre values the events are spread over")
    parser.add_argument(
        "--key",
        choices=("coffre", "correlation"),
        default="coffre",
        help="the key of each published event: its IDCoffre, as the input contract asks (default), or its "
        "correlation id (ingest then forwards most events once to their coffre's partition)",
    )
    parser.add_argument("--partitions", type=int, default=6, help="partitions of every topic")
    parser.add_argument(
        "--bootstrap", help="HOST:PORT of a running Kafka (default: start the embedded broker)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="most seconds to wait for a phase's acquittals"
    )
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="most seconds to wait for a stack")
    parser.add_argument(
        "--latency-first",
        action="store_true",
        help="measure the latency on the fresh stack, before the end-to-end burst",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (text on stderr)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="measure REV's services first (a temporary git worktree), then the current checkout's",
    )
    parser.add_argument(
        "--auditor",
        action="store_true",
        help="also the auditor phase: the acquittal latency without, then with, the auditor beside the stack",
    )
    parser.add_argument(
        "--evidence",
        action="store_true",
        help="also the evidence phase: the acquittal latency without, then with, a TSA and a witness, "
        "with both stopped for a while, and every checkpoint's token and cosignature checked at the end",
    )
    parser.add_argument(
        "--evidence-outage-seconds",
        type=float,
        default=60.0,
        help="how long the evidence phase stops the TSA and the witness, under load",
    )
    parser.add_argument(
        "--evidence-rate",
        type=float,
        help="offered load of the evidence phase, events/s (default: --rate); its windows are long, and "
        "the embedded broker slows as it holds more",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directories (journals, logs)")
    parser.add_argument(
        "--profile", action="store_true", help="print how to profile the processes of the run"
    )
    args = parser.parse_args(argv)
    if args.bootstrap and args.broker != "embedded":
        parser.error("--bootstrap names the broker: leave --broker out")
    if args.stress_seconds is None:
        args.stress_seconds = args.seconds
    if args.evidence_rate is None:
        args.evidence_rate = args.rate
    if args.lot_events is None and args.coffres > 0:
        args.lot_events = max(1, min(DEFAULT_LOT_EVENTS, args.events // args.coffres))
    positive = ("events", "coffres", "partitions", "rate", "seconds", "stress_seconds", "lot_events")
    if any(
        getattr(args, name) <= 0 for name in (*positive, "sealing_lot_events", "proofs", "ingest_replicas")
    ):
        parser.error(
            "--events, --coffres, --partitions, --rate, --seconds, --stress-seconds, --lot-events, "
            "--sealing-lot-events, --proofs and --ingest-replicas must be positive"
        )
    if args.auditor and not STACK_HAS_AUDITOR:
        parser.error("--auditor: this checkout's coffre.commands.stack.Stack has no auditor")
    if args.ingest_replicas > 1 and not STACK_HAS_REPLICAS:
        parser.error(
            "--ingest-replicas: this checkout's coffre.commands.stack.Stack runs one ingest (no ingest_replicas)"
        )
    return args


@contextlib.contextmanager
def text_to(stream: TextIO | None) -> Iterator[None]:
    """stdout redirected to ``stream`` (None: left alone)."""
    if stream is None:
        yield
        return
    with contextlib.redirect_stdout(stream):
        yield


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    KEY_BY[0] = args.key
    out = sys.stdout

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    event_size = len(event(0, args.coffres))
    sides: dict[str, dict[str, Any]] = {}
    codes: dict[str, Code] = {}
    status = 0
    try:
        with text_to(sys.stderr if args.json else None), contextlib.ExitStack() as exits:
            if args.baseline:
                scratch = Path(exits.enter_context(tempfile.TemporaryDirectory(prefix="coffre-baseline-")))
                try:
                    checkout = exits.enter_context(worktree(args.baseline, scratch / "worktree"))
                except subprocess.CalledProcessError as exc:
                    print(
                        f"--baseline {args.baseline}: cannot check it out: {exc.stderr.strip()}",
                        file=sys.stderr,
                    )
                    return 2
                codes["baseline"] = Code.of(checkout)
            codes["current"] = Code.current()
            for broker in BROKERS[args.broker]:
                for side, code in codes.items():
                    results = measure(args, code, broker)
                    report(results, args, event_size)
                    sides[side if args.broker != "both" else f"{broker}/{side}"] = to_json(results, args)
                    status = max(status, results.status)
                if args.baseline:
                    prefix = "" if args.broker != "both" else f"{broker}/"
                    base, now = sides[f"{prefix}baseline"], sides[f"{prefix}current"]
                    compare(base, now, ratios(base, now))
            if args.broker == "both":
                for side in codes:
                    left, right = sides[f"embedded/{side}"], sides[f"apache/{side}"]
                    print(f"\n== {side} ({left['revision']})")
                    side_by_side("embedded", left, "apache", right)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if args.json:
        arguments = {k: v for k, v in vars(args).items() if k not in ("json",)}
        if args.broker == "both":
            document = {"args": arguments, "status": status}
            for broker in BROKERS["both"]:
                document[broker] = {side: sides[f"{broker}/{side}"] for side in codes}
            document["apache_over_embedded"] = {
                side: ratios(sides[f"embedded/{side}"], sides[f"apache/{side}"]) for side in codes
            }
        elif args.baseline:
            document = {
                "baseline": sides["baseline"],
                "current": sides["current"],
                "ratios": ratios(sides["baseline"], sides["current"]),
                "args": arguments,
                "status": status,
            }
        else:
            document = {**sides["current"], "args": arguments}
        print(json.dumps(document, indent=2), file=out, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
