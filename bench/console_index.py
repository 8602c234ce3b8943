"""The regulator console's index rebuilt from an archive: events per CPU second (issue 31).

    .venv/bin/python bench/console_index.py [--events 8000] [--lot-events 1000] [--source demo|hands]
        [--jobs 1,2] [--rounds 1] [--baseline REV] [--keep DIR] [--json]

Builds a signed archive of ``--events`` events (on the coffres they name, IDEvt 1..n in each), sealed by the
vault's own :class:`~coffre_vault.sealer.Sealer` in lots of ``--lot-events`` (ECDSA), then times
``coffre console-index ARCHIVE --cert CERT --index FILE --rebuild --jobs J`` for each ``--jobs``, in
a child process: its wall time and its CPU time (the workers' included). The figure the issue sets
(5,000 events/s per core) is events per CPU second.

``--source demo`` (the default): the demo's events (coffre/demo/events: the T-42 tournament, the
T-77 mixed games, the CG-9 cash table; 30 of their 66 events are hands) in turn, each renumbered
(the money trail then finds the repeated registrations and broken chains a replayed demo gives:
the index writes those findings too). ``--source hands``: bench/audit.py's generated hands (the
eleven variants in turn, their participants of another operator: no finding).

``--baseline REV`` rebuilds the same archive with REV's code too (a temporary git worktree,
bench/_worktree.py), the sides alternating round after round, and checks that every row of the
indexes is the same (``EventSearch.dump``) on both sides and for every ``--jobs``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

T0 = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)


def demo_events(count: int) -> dict[tuple[str, int], list[bytes]]:
    """``count`` events from the demo's folders in turn, as ingest hands them to the vault, by the
    coffre each names (IDEvt 1..n in each)."""
    import coffre.demo
    from coffre.commands.inputs import inputs
    from coffre.domain.codec import canonical_bytes
    from coffre.domain.normalize import normalize

    folder = Path(coffre.demo.__file__).parent / "events"
    raws = [raw for _, raw in inputs([str(folder / name) for name in ("tournament", "mixed", "cash")])]
    coffres: dict[tuple[str, int], list[bytes]] = {}
    for k in range(count):
        event = normalize(raws[k % len(raws)], id_evt=1)
        numbered = coffres.setdefault((event.id_oper, event.id_coffre), [])
        numbered.append(canonical_bytes(normalize(raws[k % len(raws)], id_evt=len(numbered) + 1)))
    return coffres


def generated_hands(count: int) -> dict[tuple[str, int], list[bytes]]:
    """``count`` of bench/audit.py's hands (participants of another operator), as the vault gets them."""
    import random

    from audit import MAX_PLAYERS, played

    from coffre.domain.audit.variants import ENGINE_VARIANTS
    from coffre.domain.codec import canonical_bytes
    from coffre.domain.normalize import normalize

    rng, regles = random.Random(20), list(ENGINE_VARIANTS)
    coffres: dict[tuple[str, int], list[bytes]] = {}
    for k in range(count):
        regle = regles[k % len(regles)]
        raw = played(regle, rng.randint(3, min(6, MAX_PLAYERS[regle])), rng, k + 1)
        event = normalize(raw)
        numbered = coffres.setdefault((event.id_oper, event.id_coffre), [])
        numbered.append(canonical_bytes(normalize(raw, id_evt=len(numbered) + 1)))
    return coffres


def build(folder: Path, coffres: dict[tuple[str, int], list[bytes]], lot_events: int) -> tuple[Path, Path]:
    """A signed archive of each coffre's events under ``folder/archive``; (root, cert)."""
    from coffre_vault.sealer import Sealer

    from coffre.adapters.journal import JournalSet
    from coffre.adapters.storage import LocalStorage
    from coffre.domain.signing import Signer, generate_key_and_certificate

    key, cert = generate_key_and_certificate("bench", "ecdsa", not_before=T0 - timedelta(days=1))
    cert_path = folder / "cert.pem"
    cert_path.write_bytes(cert)
    root = folder / "archive"
    root.mkdir()
    moments = iter(T0 + timedelta(hours=5 * k) for k in range(10**9))
    with JournalSet(folder / "journal") as journals:
        sealer = Sealer(
            LocalStorage(root),
            Signer.from_pem(key, cert),
            journals,
            max_events=lot_events,
            max_age=3600 * 24 * 365,
            clock=lambda: next(moments),
        )
        for (oper, coffre), events in coffres.items():
            journal = journals.journal(oper, coffre)
            for n, canonical in enumerate(events, start=1):
                journal.append(n, canonical)
            journal.sync()
            sealer.recorded(oper, coffre)
        sealer.seal_all()
    return root, cert_path


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dump_digest(index: Path, env: dict[str, str]) -> tuple[str, int]:
    """SHA-256 of every row of the index (``EventSearch.dump``, this tree's reader) and its findings."""
    code = (
        "import hashlib, sys\n"
        "from coffre_regulator.event_index import EventSearch\n"
        "h, n = hashlib.sha256(), 0\n"
        "for table, row in EventSearch(sys.argv[1]).dump():\n"
        "    h.update(repr((table, row)).encode()); n += table == 'findings'\n"
        "print(h.hexdigest(), n)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(index)], capture_output=True, text=True, check=True, env=env
    )
    digest, findings = done.stdout.split()
    return digest, int(findings)


def rebuild(
    env: dict[str, str], cwd: Path, root: Path, cert: Path, index: Path, jobs: int
) -> tuple[float, float]:
    """Wall and CPU seconds of ``coffre console-index --rebuild --jobs J`` (workers included)."""
    start, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffre.cli",
            "console-index",
            str(root),
            "--cert",
            str(cert),
            "--index",
            str(index),
            "--rebuild",
            "--jobs",
            str(jobs),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    seconds, cpu_seconds = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(
            f"console-index failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}"
        )
    return seconds, cpu_seconds


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=8_000)
    parser.add_argument("--lot-events", type=int, default=1_000)
    parser.add_argument("--source", choices=("demo", "hands"), default="demo")
    parser.add_argument("--jobs", default="1,2", help="comma-separated --jobs values")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", metavar="REV", help="rebuild with REV's code too, side by side")
    parser.add_argument("--keep", metavar="DIR", help="build the archive in DIR (reused when it is there)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    from _worktree import PROJECT, short_revision, worktree

    here = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(PROJECT), *filter(None, (os.environ.get("PYTHONPATH") or "").split(os.pathsep))]
        ),
    }
    jobs = [int(j) for j in args.jobs.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="coffre-bench-index-") as scratch_name,
        contextlib.ExitStack() as exits,
    ):
        scratch = Path(scratch_name)
        data = Path(args.keep) if args.keep else scratch / "data"
        shape = f"{args.source}-{args.events}-{args.lot_events}"
        if not (data / shape / "cert.pem").exists():
            (data / shape).mkdir(parents=True)
            print(f"building an archive of {args.events:,} events ({args.source})…", file=sys.stderr)
            events = demo_events(args.events) if args.source == "demo" else generated_hands(args.events)
            build(data / shape, events, args.lot_events)
        root, cert = data / shape / "archive", data / shape / "cert.pem"
        sides: dict[str, dict[str, str]] = {}
        if args.baseline:
            base = exits.enter_context(worktree(args.baseline, scratch / "baseline"))
            sides[f"baseline ({base.commit})"] = base.env()
        sides[f"this tree ({short_revision()})"] = here
        runs: dict[str, dict[str, list[float]]] = {}
        digests: dict[str, set[str]] = {}
        findings: set[int] = set()
        for n in range(args.rounds):
            order = list(sides.items())
            if n % 2:
                order.reverse()
            for side, env in order:
                for j in jobs:
                    index = scratch / f"index-{len(runs)}-{n}-{j}.sqlite"
                    print(f"round {n + 1}/{args.rounds}: {side}, --jobs {j}", file=sys.stderr)
                    seconds, cpu = rebuild(env, scratch, root, cert, index, j)
                    row = runs.setdefault(f"{side} --jobs {j}", {})
                    row.setdefault("s", []).append(seconds)
                    row.setdefault("CPU s", []).append(cpu)
                    digest, found = dump_digest(index, here)
                    digests.setdefault(digest, set()).add(f"{side} --jobs {j}")
                    findings.add(found)
                    index.unlink()
        table = {
            name: {
                "runs": [f"{s:.2f}/{c:.2f}" for s, c in zip(row["s"], row["CPU s"], strict=True)],
                "s": statistics.median(row["s"]),
                "CPU s": statistics.median(row["CPU s"]),
                "events/s": args.events / statistics.median(row["s"]),
                "events/CPU-s": args.events / statistics.median(row["CPU s"]),
            }
            for name, row in runs.items()
        }
        result: dict[str, Any] = {
            "events": args.events,
            "lot_events": args.lot_events,
            "source": args.source,
            "rounds": args.rounds,
            "runs": table,
            "same_rows": len(digests) == 1,
            "findings": sorted(findings),
            "index_digest": hashlib.sha256(repr(sorted(digests)).encode()).hexdigest()[:16],
        }
        lines = [
            f"{args.events:,} events ({args.source}), lots of {args.lot_events:,}, medians of {args.rounds}"
        ]
        lines.append(f"    {'run':40s} {'wall s':>8s} {'CPU s':>8s} {'events/s':>10s} {'events/CPU-s':>13s}")
        for name, r in table.items():
            lines.append(
                f"    {name:40s} {r['s']:8.2f} {r['CPU s']:8.2f} {r['events/s']:10,.0f} {r['events/CPU-s']:13,.0f}"
            )
        lines.append(
            f"    every index the same rows: {'yes' if result['same_rows'] else 'NO'}; findings {sorted(findings)}"
        )
        if not result["same_rows"]:
            for k, (digest, names) in enumerate(sorted(digests.items()), start=1):
                lines.append(f"    rows {k} ({digest[:12]}): {', '.join(sorted(names))}")
        print("\n".join(lines), file=sys.stderr)
        if args.json:
            print(json.dumps(result))
        return 0 if result["same_rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
