"""What coffre's input limits cost and what they save, side by side with an older revision, in one run.

    .venv/bin/python bench/normalize.py [--baseline REV] [--rounds R] [--timeout S] [--hands N]

1. **Valid events**: normalize + canonical bytes per event (CPU time, which holds better than the
   wall clock on shared cores), for a POINSCRIT and the annex's six-player POJEU (the demo's copy),
   best of R rounds, in alternating child processes (this tree, then REV, then REV, then this
   tree…) so that both see the same machine. With them, **poker hands** (``--hands N``, default
   1,000; 0 for none): ``normalize`` alone per POJEU over N hands that this tree's
   ``coffre.domain.audit.play`` plays (bench/audit.py's, the eleven variants in turn, 3 to 6 seats),
   as the canonical XML files ``coffre audit`` reads: the first pass over the hands (what a fresh
   process pays) and the best of three more.
2. **Hostile inputs** (tests/hostile.py, one per class that once jammed the pipeline): the wall
   time and peak memory of ``coffre normalize`` on each, in a child process killed after S
   seconds, for this tree and for REV.

Without ``--baseline`` only this tree is measured. REV is checked out in a temporary worktree
and imported from there (``PYTHONPATH``); the measuring code is this file's, run by the same
interpreter. Exit status 0 when everything was measured (however slow REV was).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _worktree import PROJECT, worktree

ITERATIONS = {"POINSCRIT": 2000, "POJEU": 200}


def valid_events() -> dict[str, bytes]:
    sys.path.insert(0, str(PROJECT / "tests"))
    from events import POINSCRIT  # the tests' own events, coffre's

    pojeu = (PROJECT / "coffre" / "demo" / "events" / "annex" / "1.4.3.f-POJEU.xml").read_bytes()
    return {"POINSCRIT": POINSCRIT, "POJEU": pojeu}


def measure_valid(hands_file: str | None = None) -> dict[str, float]:
    """µs per event of normalize + canonical_bytes, for each valid event (one round); with
    ``hands_file``, µs per hand of normalize alone over its hands, first pass and best of three more."""
    from coffre.domain.codec import canonical_bytes
    from coffre.domain.normalize import normalize

    out = {}
    for name, raw in valid_events().items():
        canonical_bytes(normalize(raw))  # warm: imports, caches
        n = ITERATIONS[name]
        started = time.process_time()  # CPU time: it holds better than the wall clock on shared cores
        for _ in range(n):
            canonical_bytes(normalize(raw))
        out[name] = (time.process_time() - started) / n * 1e6
    if hands_file:
        hands = [hand.encode() for hand in json.loads(Path(hands_file).read_text())]
        passes = []
        for _ in range(4):
            started = time.process_time()
            for hand in hands:
                normalize(hand)
            passes.append((time.process_time() - started) / len(hands) * 1e6)
        out[HANDS_FIRST], out[HANDS_LATER] = passes[0], min(passes[1:])
    return out


HANDS_FIRST = "POJEU hands, normalize alone, first pass"
HANDS_LATER = "POJEU hands, normalize alone, later passes"


def write_hands(path: Path, count: int, seed: int = 31) -> Path:
    """``count`` hands played by this tree (bench/audit.py's), as canonical XML, in a JSON list."""
    import random

    from audit import ENGINE_VARIANTS, MAX_PLAYERS, played

    from coffre.domain.codec import canonical_bytes
    from coffre.domain.normalize import normalize

    rng = random.Random(seed)
    regles = list(ENGINE_VARIANTS)
    hands = []
    for k in range(count):
        regle = regles[k % len(regles)]
        raw = played(regle, rng.randint(3, min(6, MAX_PLAYERS[regle])), rng, k + 1)
        hands.append(canonical_bytes(normalize(raw)).decode())
    path.write_text(json.dumps(hands))
    return path


def hostile_files(folder: Path) -> dict[str, Path]:
    sys.path.insert(0, str(PROJECT / "tests"))
    from hostile import hostile_cases

    files = {}
    for case in hostile_cases():
        if case.headers:
            continue  # a header is no input of coffre normalize
        path = folder / f"{case.name}.in"
        path.write_bytes(case.value)
        files[case.name] = path
    return files


def measure_hostile(path: Path, env: dict[str, str], timeout: float) -> tuple[float, float | None, str]:
    """(seconds, peak MB or None, outcome) of ``coffre normalize PATH`` in a child process."""
    from hostile import measure_coffre

    try:
        run = measure_coffre(["normalize", str(path)], cwd=path.parent, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return timeout, None, f"killed after {timeout:.0f} s"
    if b"Traceback" in run.stderr:
        last = run.stderr.decode(errors="replace").strip().splitlines()[-1]
        return run.seconds, run.megabytes, f"crashed: {last[:60]}"
    lines = run.stdout.decode(errors="replace").splitlines()
    codes = sorted({line.split()[2] for line in lines if " REJECTED " in line})
    outcome = "rejected " + ",".join(codes[:2]) if codes else "accepted"
    return run.seconds, run.megabytes, outcome + f" ({len(run.stdout):,} B out)"


def child_valid(env: dict[str, str], hands_file: Path | None) -> dict[str, float]:
    extra = ["--hands-file", str(hands_file)] if hands_file else []
    done = subprocess.run(
        [sys.executable, __file__, "--valid-once", *extra], capture_output=True, env=env, check=True
    )
    return json.loads(done.stdout)


def table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a git revision to measure side by side (e.g. a tag or a commit)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the valid-event timing (best kept)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds before a hostile run is killed")
    parser.add_argument("--hands", type=int, default=1000, help="poker hands normalized per round (0: none)")
    parser.add_argument("--valid-once", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hands-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.valid_once:
        print(json.dumps(measure_valid(args.hands_file)))
        return 0

    here = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(PROJECT), *(os.environ.get("PYTHONPATH") or "").split(os.pathsep)]
        ),
    }
    with tempfile.TemporaryDirectory(prefix="coffre-bench-") as scratch, contextlib.ExitStack() as exits:
        envs = {"this tree": here}
        if args.baseline:
            envs[args.baseline] = exits.enter_context(
                worktree(args.baseline, Path(scratch) / "baseline")
            ).env()
        hands_file = write_hands(Path(scratch) / "hands.json", args.hands) if args.hands else None
        best: dict[str, dict[str, float]] = {label: {} for label in envs}
        for round_ in range(args.rounds):
            for label in list(envs)[:: 1 if round_ % 2 == 0 else -1]:  # each side first in turn
                for name, micros in child_valid(envs[label], hands_file).items():
                    best[label][name] = min(micros, best[label].get(name, float("inf")))
        labels = list(envs)
        print(f"1. valid events: CPU µs per normalize + canonical bytes, best of {args.rounds} rounds")
        rows = [["event", *labels, *(["ratio (this tree / baseline)"] if args.baseline else [])]]
        names = [*ITERATIONS, *([HANDS_FIRST, HANDS_LATER] if hands_file else [])]
        for name in names:
            cells = [f"{best[label][name]:,.0f} µs" for label in labels]
            ratio = [f"{best[labels[0]][name] / best[labels[1]][name]:.2f}"] if args.baseline else []
            rows.append([name if name in ITERATIONS else f"{name} ({args.hands:,})", *cells, *ratio])
        table(rows)

        print(
            f"\n2. hostile inputs: coffre normalize, wall time and peak memory (killed after {args.timeout:.0f} s)"
        )
        files = hostile_files(Path(scratch))
        rows = [["input", *labels]]
        for name, path in files.items():
            cells = []
            for env in envs.values():
                seconds, megabytes, outcome = measure_hostile(path, env, args.timeout)
                memory = f"{megabytes:,.0f} MB" if megabytes is not None else "? MB"
                cells.append(f"{seconds:6.2f} s {memory:>9}  {outcome}")
            rows.append([name, *cells])
        table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
