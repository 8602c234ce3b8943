"""``coffre verify`` of a whole archive: events verified per second (issue 22, point 6).

    .venv/bin/python bench/verify.py [--coffres 4] [--events 50000] [--lot 1000] [--profile K] [--json]
    .venv/bin/python bench/verify.py --baseline REV [--rounds 3] [--json]

The archive is synthetic, built once by this tree with coffre's own journal and sealer (as
tests/test_archive.py builds its archives): ``--coffres`` coffres of ``--events`` POINSCRIT each
(tests/events.py's, normalized once, then each event's IDEvt and IDJoueur set in its canonical
bytes: every event differs, about 480 bytes), in lots of ``--lot`` events, each lot and checkpoint
signed (ECDSA P-256) and stored in a scratch folder. Then :func:`coffre.commands.verify.verify_archive` runs
over it in this process (serial, and with ``jobs`` when this tree's ``verify_archive`` takes it) and
the events per second are printed; the report must be OK.

``--profile K`` prints the top K functions by own time under cProfile (serial verify).

``--baseline REV`` measures this tree and REV side by side in one run, on the same archive, in
child processes alternating between the two sides round after round (the machine is noisy: the
medians of ``--rounds`` rounds and their ratios are reported). Each child imports its side's code
(REV is checked out in a temporary worktree, bench/_worktree.py) and times ``verify_archive``
serially, and this tree's also with every CPU (``jobs``): wall time, and CPU time of the process and
its workers (events per CPU-second is the per-core figure). Each side's report lines must be the
same as the other's.

The target is 100,000 events per CPU-second, parallel over cores (issues 22 and 34; about 29,000
at issue 22, 58,000 at issue 34). The yardstick is a 100-million-event archive verified in under
10 minutes on 2 cores: it is extrapolated from this tree's ``--jobs`` run, from its events per
CPU-second (2 cores all the verifier's) and from its wall rate (this machine as it is).
``rss MB`` is the process's peak after the serial run (the parallel run's workers are not in it).

``--quick`` is a small run for the test suite (1 coffre of 600 events in lots of 100, ``--jobs 2``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 100_000
YARDSTICK_EVENTS = 100_000_000
YARDSTICK_CORES = 2
YARDSTICK_SECONDS = 600
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def event_template() -> bytes:
    """tests/events.py's POINSCRIT, normalized: its canonical bytes, IDEvt 1."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from coffre.domain.codec import canonical_bytes
    from coffre.domain.normalize import normalize

    from events import POINSCRIT

    return canonical_bytes(normalize(POINSCRIT, id_evt=1))


def build(folder: Path, coffres: int, events: int, lot: int) -> tuple[Path, Path]:
    """The archive (its root) and the certificate that verifies it."""
    from coffre_vault.sealer import Sealer

    from coffre.adapters.journal import JournalSet
    from coffre.adapters.storage import LocalStorage
    from coffre.domain.signing import Signer, generate_key_and_certificate

    key, cert = generate_key_and_certificate("bench verify", "ecdsa", not_before=T0 - timedelta(days=1))
    cert_path = folder / "cert.pem"
    cert_path.write_bytes(cert)
    signer = Signer.from_pem(key, cert)
    root = folder / "archive"
    root.mkdir()
    template = event_template()
    head, _, rest = template.partition(b"<IDCoffre>7</IDCoffre>")
    moment = [T0]

    def clock() -> datetime:
        moment[0] += timedelta(minutes=37)  # lots land on several days
        return moment[0]

    with JournalSet(folder / "journal") as journals:
        sealer = Sealer(LocalStorage(root), signer, journals, max_events=lot, max_age=3600, clock=clock)
        for coffre in range(1, coffres + 1):
            journal = journals.journal("0099", coffre)
            body = head + f"<IDCoffre>{coffre}</IDCoffre>".encode() + rest
            before, _, after = body.partition(b"<IDEvt>1</IDEvt><IDJoueur>p-1</IDJoueur>")
            for n in range(1, events + 1):
                player = f"<IDEvt>{n}</IDEvt><IDJoueur>j-{coffre}-{n * 7919 % 100_003}</IDJoueur>".encode()
                journal.append(n, before + player + after)
            journal.sync()
            sealer.recorded("0099", coffre)
            sealer.seal_all()
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root, cert_path


# A child's measure: this side's verify_archive over the archive, serially and (when it takes
# ``jobs``) with every CPU. It runs with the side's PYTHONPATH, outside the project.
CHILD = r"""
import hashlib, inspect, json, os, resource, sys, time
from pathlib import Path
from coffre.commands.verify import verify_archive
root, cert, jobs = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
takes_jobs = "jobs" in inspect.signature(verify_archive).parameters
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
out = {}
for name, kwargs in [("serial", {"jobs": 1} if takes_jobs else {}), ("parallel", {"jobs": jobs})]:
    if name == "parallel" and (not takes_jobs or jobs <= 1):
        continue
    c0, t0 = cpu(), time.perf_counter()
    report = verify_archive(root, [cert], **kwargs)
    wall, used = time.perf_counter() - t0, cpu() - c0
    lines = report.lines()
    out[name] = {
        "ok": report.ok, "events": sum(c.events for c in report.coffres), "wall": wall, "cpu": used,
        "lines": hashlib.sha256("\n".join(lines).encode()).hexdigest(), "last": lines[-1],
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
print(json.dumps(out))
"""


def run_child(root: Path, cert: Path, jobs: int, env: dict[str, str] | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(cert), str(jobs)],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    if done.returncode:
        raise SystemExit(f"the child failed:\n{done.stderr}")
    return json.loads(done.stdout)


def profile(root: Path, cert: Path, top: int) -> str:
    from coffre.commands.verify import verify_archive

    profiler = cProfile.Profile()
    profiler.enable()
    report = verify_archive(root, [cert])
    profiler.disable()
    assert report.ok, report.lines()[:5]
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _yardstick(rows: list[dict[str, Any]], here: str, jobs: int) -> dict[str, Any] | None:
    """The 100-million-event archive on 2 cores, from this tree's parallel run (its serial run
    when it has none): minutes at its events per CPU-second with both cores the verifier's, and
    at its wall rate as measured."""
    mine = {row["mode"]: row for row in rows if row["side"] == here}
    row = mine.get("parallel") or mine.get("serial")
    if row is None:
        return None
    return {
        "mode": row["mode"],
        "jobs": jobs if row["mode"] == "parallel" else 1,
        "cpu_minutes": YARDSTICK_EVENTS / (YARDSTICK_CORES * row["events_per_cpu_s"]) / 60,
        "wall_minutes": YARDSTICK_EVENTS / row["events_per_s"] / 60,
    }


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--coffres", type=int, default=4)
    parser.add_argument("--events", type=int, default=50_000, help="events per coffre")
    parser.add_argument("--lot", type=int, default=1000, help="events per lot")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers of the parallel run")
    parser.add_argument("--profile", type=int, default=0, metavar="K", help="cProfile's top K functions")
    parser.add_argument("--baseline", metavar="REV", help="measure REV and this tree side by side")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the sides")
    parser.add_argument("--keep", metavar="DIR", help="build the archive in DIR (reused when it is there)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a small run, for the test suite")
    args = parser.parse_args(argv)
    if args.quick:
        args.coffres, args.events, args.lot, args.jobs = 1, 600, 100, 2
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    with contextlib.ExitStack() as exits:
        scratch = Path(args.keep) if args.keep else Path(exits.enter_context(tempfile.TemporaryDirectory()))
        scratch.mkdir(parents=True, exist_ok=True)
        if (scratch / "archive").is_dir():
            root, cert = scratch / "archive", scratch / "cert.pem"
            built = 0.0
        else:
            started = time.perf_counter()
            root, cert = build(scratch, args.coffres, args.events, args.lot)
            built = time.perf_counter() - started
        if not args.json:
            print(
                f"archive: {args.coffres} coffre(s) x {args.events} events, lots of {args.lot} "
                f"(built in {built:.1f} s)",
                flush=True,
            )
        if args.profile:
            print(profile(root, cert, args.profile))
            return 0
        sides: dict[str, dict[str, str] | None] = {}
        if args.baseline:
            sys.path.insert(0, str(HERE))
            from _worktree import short_revision, worktree

            try:
                base = exits.enter_context(worktree(args.baseline, scratch / "baseline-tree"))
            except subprocess.CalledProcessError as exc:
                print(f"--baseline {args.baseline}: {exc.stderr.strip()}", file=sys.stderr)
                return 2
            sides[f"baseline ({base.commit})"] = base.env()
            here = f"this tree ({short_revision()})"
        else:
            here = "this tree"
        sides[here] = None
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.rounds if args.baseline else 1):
            for side, env in sides.items():
                for mode, figures in run_child(root, cert, args.jobs, env).items():
                    runs.setdefault((side, mode), []).append(figures)
        rows = []
        digests = set()
        for (side, mode), found in runs.items():
            if not all(f["ok"] for f in found):
                print(f"{side} {mode}: the archive does not verify: {found[0]['last']}", file=sys.stderr)
                return 1
            digests |= {f["lines"] for f in found}
            events = found[0]["events"]
            wall = statistics.median(f["wall"] for f in found)
            cpu = statistics.median(f["cpu"] for f in found)
            rows.append(
                {
                    "side": side,
                    "mode": mode,
                    "events": events,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "events_per_s": events / wall,
                    "events_per_cpu_s": events / cpu,
                    "rss_mb": statistics.median(f["rss_mb"] for f in found),
                }
            )
        serial = {row["side"]: row for row in rows if row["mode"] == "serial"}
        first = next(iter(serial.values()))
        for row in rows:
            row["ratio"] = row["events_per_s"] / first["events_per_s"]
        same = len(digests) == 1
        yardstick = _yardstick(rows, here, args.jobs)
        if args.json:
            print(
                json.dumps(
                    {"rows": rows, "same_report": same, "target": TARGET, "yardstick": yardstick}, indent=2
                )
            )
            return 0 if same else 1
        header = ("side", "mode", "events", "wall s", "events/s", "events/CPU-s", "x first serial", "rss MB")
        table = [header] + [
            (
                r["side"],
                r["mode"],
                f"{r['events']:,}",
                f"{r['wall_s']:.2f}",
                f"{r['events_per_s']:,.0f}",
                f"{r['events_per_cpu_s']:,.0f}",
                f"{r['ratio']:.2f}",
                f"{r['rss_mb']:.0f}" if r["mode"] == "serial" else "",
            )
            for r in rows
        ]
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        for line in table:
            print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        print(f"target: {TARGET:,} events/s per core; the report lines are the same on every run: {same}")
        if yardstick:
            print(
                f"yardstick, {YARDSTICK_EVENTS:,} events on {YARDSTICK_CORES} cores (under "
                f"{YARDSTICK_SECONDS // 60} min): {yardstick['cpu_minutes']:.1f} min at this tree's "
                f"--jobs {yardstick['jobs']} events per CPU-second, {yardstick['wall_minutes']:.1f} min at "
                f"its wall rate on this machine as it is"
            )
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
