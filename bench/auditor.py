"""The auditor's records per second on one core, without Kafka nor faust (issue 31).

    .venv/bin/python bench/auditor.py [--hands 2000] [--rounds 3] [--baseline REV] [--json]

What the auditor's agent does with each record (services/auditor/app.py, ``audit``), on one core in
this process: a normalized event's record authenticated (``NormalizedEvent.from_record``) and
audited (``AuditJoin.on_event``: normalize, the event's own checks, the hand's, the money trail in
the join's versioned store), then its receipt authenticated and joined (``Receipt.from_record``,
``AuditJoin.on_receipt``). The faust table is a dict and publishing appends to a list: what
faust, aiokafka and the broker cost per record is not in this figure (bench/pipeline.py
``--auditor`` measures the service whole, on a broker). The hands are bench/audit.py's (the eleven
variants in turn, 3 to 6 seats, their participants of another operator: no finding). The target
(issue 31): 1,000 hands/s on one core. Hands per CPU second, the best of ``--rounds``.

``--baseline REV`` measures REV's auditor too on the same records (a temporary git worktree,
bench/_worktree.py), each side in a child process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

KEYS = "bench:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowMTIzNDU="


def records(count: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], bytes, list[tuple[str, bytes]]]]:
    """(key, event value, its headers, receipt value, its headers) of ``count`` hands of coffre 0099/1."""
    from audit import MAX_PLAYERS, played

    from coffre.domain.audit.variants import ENGINE_VARIANTS
    from coffre.domain.authenticity import RecordKeys
    from coffre.domain.codec import canonical_bytes
    from coffre.domain.messages import NormalizedEvent, Receipt
    from coffre.domain.normalize import normalize

    keys = RecordKeys.parse(KEYS)
    rng, regles, out = random.Random(20), list(ENGINE_VARIANTS), []
    for k in range(count):
        regle = regles[k % len(regles)]
        event = normalize(played(regle, rng.randint(3, min(6, MAX_PLAYERS[regle])), rng, k + 1))
        value = canonical_bytes(event)
        key = str(event.id_coffre).encode()
        headers = NormalizedEvent.seal(
            keys,
            key,
            value,
            NormalizedEvent.headers_of([], "POJEU", event.id_oper, event.id_coffre, k + 1, False, 1.0),
        )
        receipt = Receipt(event.id_oper, event.id_coffre, k + 1, "POJEU", f"{k + 1:064x}", None, False, None)
        _key, receipt_value, receipt_headers = receipt.record(keys)
        out.append((key, value, headers, receipt_value, receipt_headers))
    return out


def measure(data: list[Any], rounds: int) -> dict[str, Any]:
    """Hands per CPU second (and per second) of the agent's work, best of ``rounds`` fresh joins."""
    from coffre_auditor.join import AuditJoin

    from coffre.domain.authenticity import RecordKeys
    from coffre.domain.messages import NormalizedEvent, Receipt

    keys = RecordKeys.parse(KEYS)

    async def publish(key: bytes, value: bytes) -> None:
        published.append(value)

    async def run(join: AuditJoin) -> None:
        for offset, (key, value, headers, receipt_value, receipt_headers) in enumerate(data):
            NormalizedEvent.from_record(key, value, headers, keys)
            await join.on_event(value, headers, 0, offset)
            Receipt.from_record(key, receipt_value, receipt_headers, keys)
            await join.on_receipt(receipt_value, 0, offset)

    best: tuple[float, float] | None = None
    for _ in range(rounds):
        published: list[bytes] = []
        join = AuditJoin({}, publish, max_message_bytes=1_000_000)
        wall, cpu = time.perf_counter(), time.process_time()
        asyncio.run(run(join))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if best is None or cpu < best[1]:
            best = (wall, cpu)
        assert join.counts.audited == len(data) and not published, (join.counts, len(published))
    assert best is not None
    return {"hands": len(data), "hands_per_s": len(data) / best[0], "hands_per_cpu_s": len(data) / best[1]}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hands", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="measure REV's auditor too, side by side")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        data = pickle.loads(Path(args.child).read_bytes())
        print(json.dumps(measure(data, args.rounds)))
        return 0
    from _worktree import PROJECT, short_revision, worktree

    here = {**os.environ, "PYTHONPATH": str(PROJECT)}
    with tempfile.TemporaryDirectory(prefix="coffre-bench-auditor-") as scratch_name:
        scratch = Path(scratch_name)
        print(f"making {args.hands:,} hands' records…", file=sys.stderr)
        (scratch / "records.pickle").write_bytes(pickle.dumps(records(args.hands)))
        sides: dict[str, dict[str, str]] = {}
        with worktree(args.baseline, scratch / "baseline") if args.baseline else _nothing() as base:
            if base is not None:
                sides[f"baseline ({base.commit})"] = base.env()
            sides[f"this tree ({short_revision()})"] = here
            result: dict[str, Any] = {}
            for side, env in sides.items():
                done = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        str(scratch / "records.pickle"),
                        "--rounds",
                        str(args.rounds),
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=scratch,
                )
                if done.returncode != 0:
                    sys.stderr.write(done.stderr[-3000:])
                    return 1
                result[side] = json.loads(done.stdout)
        for side, row in result.items():
            print(
                f"{side:28s} {row['hands_per_cpu_s']:8,.0f} hands/CPU-s {row['hands_per_s']:8,.0f} hands/s "
                f"({row['hands']:,} hands, best of {args.rounds})",
                file=sys.stderr,
            )
        if args.json:
            print(json.dumps(result))
    return 0


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
