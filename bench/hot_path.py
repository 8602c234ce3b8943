"""The recording path's CPU per event, service by service, without Kafka (issue 34, item 1).

    .venv/bin/python bench/hot_path.py [--events 5000] [--rounds 5] [--baseline REV] [--json]

Each service's own work on the same events, in the process that measures it: ``ingest`` (the
ingest step: normalize, number, canonical bytes, findings, the record's tag, over batches of 500
of events.in), ``vault`` (the recorder: each normalized record's tag verified and its headers
read, appended to a real journal, the group fsync, then the receipts and their tags) and
``acquittal`` (each receipt's tag verified and decoded, the acquittal and its record). The
events are ``bench/pipeline.py``'s POINSCRITs over 4 coffres. What Kafka's client, the event
loop and the broker cost is not here: ``bench/pipeline.py`` measures the processes whole.

CPU time (``time.process_time``) rather than wall time: the machine is shared, and a busy
neighbour lengthens wall time far more than the CPU time of the measured work. With
``--baseline REV`` each round runs one child process per side, alternately (REV's code imported
from a temporary worktree, bench/_worktree.py); the medians of ``--rounds`` rounds and their
ratios are printed. The quick mode (``--events 600 --rounds 1``) runs in the suite: it checks
that every event went through each service, and times nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET_US = 150.0
"""Issue 34's target for ingest + vault + acquittal together, tags included."""
BATCH = 500
COFFRES = 4


@dataclass
class KafkaRecord:
    """What the services read of a consumed record (aiokafka's ConsumerRecord has these)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


def events(count: int) -> list[bytes]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from events import POINSCRIT

    return [
        POINSCRIT.replace(
            b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{21 + n % COFFRES}</IDCoffre>".encode()
        ).replace(b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>bench-{n:09d}</IDJoueur>".encode())
        for n in range(count)
    ]


def measure(count: int) -> dict[str, float]:
    """CPU µs per event of each service's work on ``count`` events (run in the side's process),
    after a first pass over 200 events that builds what is built once (pydantic's deferred schemas,
    caches, imports), and the heap settled as the services settle theirs."""
    once(200)
    try:  # as the services do once started (run_until_signalled), when this code does
        from coffre.adapters.stream import settle_heap
    except ImportError:
        pass
    else:
        settle_heap()
    return once(count)


def once(count: int) -> dict[str, float]:
    from aiokafka.structs import TopicPartition
    from coffre_acquittal.service import Acquitter
    from coffre_ingest.step import IngestStep, InputMessage, PartitionState
    from coffre_vault.recorder import Recorder

    from coffre.adapters.journal import JournalSet
    from coffre.config import Settings
    from coffre.domain.authenticity import RecordKeys
    from coffre.domain.codec import Limits
    from coffre.domain.messages import CORRELATION_ID, DEFAULT_MAX_MESSAGE_BYTES, now_iso
    from coffre.domain.routing import coffre_partition

    settings = Settings()
    topics = settings.topics
    keys = RecordKeys.parse(RecordKeys.new_key_line("bench"))
    partitions = settings.partitions
    raw = events(count)
    results: dict[str, float] = {}

    # ingest: each event on its coffre's partition of events.in, as a platform keying by IDCoffre
    step = IngestStep(topics, Limits(), DEFAULT_MAX_MESSAGE_BYTES, keys=keys)
    states: dict[int, PartitionState] = {}
    per_partition: dict[int, list[Any]] = {}
    for n, value in enumerate(raw):
        p = coffre_partition(21 + n % COFFRES, partitions)
        messages = per_partition.setdefault(p, [])
        messages.append(InputMessage(p, len(messages), value, [(CORRELATION_ID, f"c-{n}".encode())]))
    outputs = []
    started = time.process_time()
    for p, messages in per_partition.items():
        state = states.setdefault(p, PartitionState(p, partitions))
        for i in range(0, len(messages), BATCH):
            outputs += step.run(state, messages[i : i + BATCH], 0).outputs
    results["ingest"] = (time.process_time() - started) / count * 1e6
    normalized = [o for o in outputs if o.topic == topics.normalized]
    if len(normalized) != count:
        raise RuntimeError(f"ingest: {len(normalized)} normalized events of {count}")

    # vault: the recorder on a real journal, one group fsync per batch, then the receipts
    offsets: dict[int, int] = {}
    records = []
    for o in normalized:
        p = coffre_partition(int(o.key), partitions)
        offsets[p] = offsets.get(p, -1) + 1
        records.append(KafkaRecord(p, offsets[p], o.key, o.value, list(o.headers)))
    receipts = []
    with tempfile.TemporaryDirectory(prefix="coffre-hot-path-") as scratch:
        journals = JournalSet(Path(scratch))
        recorder = Recorder(journals, keys=keys, partitions=partitions)
        started = time.process_time()
        for i in range(0, len(records), BATCH):
            recorded = recorder.record_records(records[i : i + BATCH])
            recorder.sync()
            recorder.durable()
            receipts += [r.record(keys) for r in recorder.receipts(recorded, now_iso())]
        results["vault"] = (time.process_time() - started) / count * 1e6
        journals.close()
    if len(receipts) != count:
        raise RuntimeError(f"vault: {len(receipts)} receipts of {count}")

    # acquittal: the receipts as the receipts topic delivers them, in batches
    acquitter = Acquitter(settings.synthesis_events, settings.late_after_seconds, topics=topics, keys=keys)
    tp = TopicPartition(topics.receipts, 0)
    batches = [
        {tp: [KafkaRecord(0, i + j, k, v, list(h)) for j, (k, v, h) in enumerate(receipts[i : i + BATCH])]}
        for i in range(0, len(receipts), BATCH)
    ]
    acquittals = 0

    async def acquit() -> None:
        nonlocal acquittals
        for batch in batches:
            acquittals += len(await acquitter.handle(batch))
            acquitter.acknowledged()

    loop = asyncio.new_event_loop()
    try:
        started = time.process_time()
        loop.run_until_complete(acquit())
        results["acquittal"] = (time.process_time() - started) / count * 1e6
    finally:
        loop.close()
    if acquittals != count:
        raise RuntimeError(f"acquittal: {acquittals} acquittals of {count}")
    results["total"] = results["ingest"] + results["vault"] + results["acquittal"]
    return results


def child(count: int) -> dict[str, float]:
    """One measure in a fresh process, importing whatever PYTHONPATH gives (REV's or this tree's)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(count)],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # not the project: PYTHONPATH alone says whose code is imported
        env=ENV[0],
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring child failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


ENV: list[dict[str, str]] = [dict(os.environ)]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000, help="events per measure")
    parser.add_argument("--rounds", type=int, default=5, help="measures per side (medians printed)")
    parser.add_argument("--baseline", metavar="REV", help="measure REV too, alternately, in one run")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (args.child is None) and (args.events <= 0 or args.rounds <= 0):
        parser.error("--events and --rounds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child is not None:
        print(json.dumps(measure(args.child)))
        return 0
    sys.path.insert(0, str(HERE))
    from _worktree import Checkout, short_revision, worktree

    here_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # this tree: its editable install
    sides: dict[str, dict[str, list[float]]] = {}
    with contextlib.ExitStack() as exits:
        envs = {"current": here_env}
        labels = {"current": short_revision()}
        if args.baseline:
            scratch = Path(exits.enter_context(tempfile.TemporaryDirectory(prefix="coffre-hot-path-")))
            checkout: Checkout = exits.enter_context(worktree(args.baseline, scratch / "worktree"))
            envs = {"baseline": checkout.env(), **envs}
            labels = {"baseline": checkout.commit, **labels}
        for n in range(args.rounds):
            for side, env in envs.items():
                ENV[0] = env
                result = child(args.events)
                for name, value in result.items():
                    sides.setdefault(side, {}).setdefault(name, []).append(value)
            print(f"round {n + 1}/{args.rounds} done", file=sys.stderr)
    medians = {
        side: {name: statistics.median(v) for name, v in values.items()} for side, values in sides.items()
    }
    document: dict[str, Any] = {"events": args.events, "rounds": args.rounds, "target_us": TARGET_US}
    document.update({side: {"revision": labels[side], **medians[side]} for side in medians})
    if args.baseline:
        document["current_over_baseline"] = {
            name: medians["current"][name] / medians["baseline"][name] for name in medians["current"]
        }
    out = sys.stderr if args.json else sys.stdout
    print(f"CPU µs per event, medians of {args.rounds} round(s) of {args.events:,} POINSCRIT:", file=out)
    header = f"  {'service':<10}" + "".join(f"{side + ' ' + labels[side]:>22}" for side in medians)
    print(header + ("   current/baseline" if args.baseline else ""), file=out)
    for name in ("ingest", "vault", "acquittal", "total"):
        line = f"  {name:<10}" + "".join(f"{medians[side][name]:>22.1f}" for side in medians)
        if args.baseline:
            line += f"   {document['current_over_baseline'][name]:>16.2f}"
        print(line, file=out)
    print(f"  target: ingest + vault + acquittal <= {TARGET_US:g} µs per event (issue 34)", file=out)
    if args.json:
        print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
