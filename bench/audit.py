"""coffre's hand-audit benchmark: POJEU hands audited per second on one core.

    .venv/bin/python bench/audit.py [--hands N] [--variants THNL,O4HPL,...] [--profile K] [--json]
    .venv/bin/python bench/audit.py --baseline REV [--rounds 3] [--e2e-hands 10000] [--json]

Hands are played by pokerkit (coffre.domain.audit.play, seeded: the same hands every run), 3 to 6
seats, mixed variants (all eleven by default), normalized once; then, on this one process:

1. the arithmetic checks alone (audit_hand's passes 1 and 2: structure, cards, money), per hand;
2. the whole audit_hand, coffre's engine's replay included (coffre/domain/audit/engine.py);
3. a cProfile of the whole audit over the same hands: the top ``--profile`` functions by own time.

The targets (issue 31): 3,500 hands/s on one core for 6-max no-limit hold'em, 2,000 for every other
variant (``--baseline`` says whether this tree meets them; issue 12's was 2,000 over the mix).
``--json`` prints one JSON object.

``--baseline REV`` (issue 20) measures this tree and REV side by side in one run, on the same hands
(played once by this tree, written to a scratch folder, read by each side's own ``normalize``), in
child processes alternating between the two sides round after round (the machine is noisy: the
medians of ``--rounds`` rounds and their ratios are reported):

1. in the process: the full audit (``audit_event``: the event's own checks, the hand's, a money
   trail) per second, over 6-max Texas Hold'em No Limit and over each of the eleven variants
   (3 to 6 seats), the hands normalized beforehand (not timed);
2. ``coffre audit FOLDER --json`` end to end on ``--e2e-hands`` hands (the eleven variants in turn,
   one XML file per hand), wall time including the interpreter's start-up;
3. the start-up alone: ``coffre audit`` of an empty folder (every import the audit needs).

This tree's ``coffre audit`` runs with its default ``--jobs`` (the CPUs available); its ``--jobs 1``
is measured beside it each round (wall and CPU, the workers' CPU included), and its JSON must be
the default run's.

The participants belong to another operator than the hands' (``IDOper`` 0098), so the money trail
reads them but has no registration to ask for: the runs have no finding, as the in-process ones.
REV is checked out in a temporary worktree and imported from there (bench/_worktree.py).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from coffre.domain.audit import hand as hand_module
from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.play import MAX_PLAYERS, play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.normalize import normalize

TARGET = 2_000
"""Hands/s on one core, every variant but 6-max no-limit hold'em (issue 31)."""
TARGET_THNL_6MAX = 3_500
"""Hands/s on one core, 6-max no-limit hold'em (issue 31)."""


def hands(count: int, variants: list[str], seed: int = 12) -> list[POJEU]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        regle = variants[k % len(variants)]
        kind = ENGINE_VARIANTS[regle].kind
        n = rng.randint(3, min(6, MAX_PLAYERS[regle]))
        seats = {s: f"{rng.randint(200, 2000) / 100:.2f}" for s in rng.sample(range(1, 10), n)}
        played = play_hand(regle, seats, rng, ante="0.02" if kind == "stud" else 0, rake="0.05")
        event = normalize(played.json())
        assert isinstance(event, POJEU)
        out.append(event)
    return out


def arithmetic(event: POJEU) -> list[Any]:
    """audit_hand's passes without the engine."""
    h = hand_module._Hand(event)
    hand_module._structure(h)
    hand_module._cards(h)
    hand_module._money(h)
    return h.findings


def build_tables() -> None:
    """The showdown's tables (ranking.py, issue 31), built at their first use: before the clock starts,
    as pokerkit's lookups were built at its import. A revision before issue 31 has none."""
    try:
        from coffre.domain.audit import ranking
    except ImportError:
        return
    ranking.build_tables()


def rate(check: Callable[[POJEU], list[Any]], events: list[POJEU], repeat: int = 3) -> tuple[float, int]:
    """Best of ``repeat`` passes: hands per second, and the findings of the last (must be 0)."""
    best = float("inf")
    found = 0
    for _ in range(repeat):
        start = time.perf_counter()
        found = sum(len(check(e)) for e in events)
        best = min(best, time.perf_counter() - start)
    return len(events) / best, found


def profile(events: list[POJEU], top: int) -> list[dict[str, Any]]:
    profiler = cProfile.Profile()
    profiler.enable()
    for e in events:
        audit_hand(e)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]  # type: ignore[attr-defined]
    return [
        {
            "function": f"{file.rsplit('/', 1)[-1]}:{line} {name}",
            "calls": calls,
            "own_s": round(own, 4),
            "own_pct": round(100 * own / total, 1),
            "cumulative_s": round(cum, 4),
        }
        for (file, line, name), (calls, _, own, cum, _) in rows
    ]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=1_100, help="hands to audit (spread over the variants)")
    parser.add_argument("--variants", default=",".join(ENGINE_VARIANTS), help="Regle codes, comma-separated")
    parser.add_argument("--profile", type=int, default=12, help="functions in the profile summary (0: none)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--baseline", metavar="REV", help="measure REV and this tree side by side")
    parser.add_argument("--rounds", type=int, default=3, help="--baseline: rounds, alternating the sides")
    parser.add_argument(
        "--per-variant", type=int, default=120, help="--baseline: hands per variant (and of 6-max THNL)"
    )
    parser.add_argument(
        "--e2e-hands", type=int, default=10_000, help="--baseline: hands `coffre audit` reads"
    )
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- --baseline REV

OTHER_OPERATOR = "0098"


def played(regle: str, seats: int, rng: random.Random, id_evt: int) -> bytes:
    """One hand as JSON (coffre's form), its participants of another operator, IDEvt ``id_evt``."""
    kind = ENGINE_VARIANTS[regle].kind
    stacks = {s: f"{rng.randint(200, 2000) / 100:.2f}" for s in rng.sample(range(1, 10), seats)}
    hand = play_hand(
        regle,
        stacks,
        rng,
        ante="0.02" if kind == "stud" else 0,
        rake="0.05",
        players={s: {"IDOper": OTHER_OPERATOR} for s in stacks},
        header={"IDEvt": id_evt},
    )
    return hand.json()


def write_sets(folder: Path, per_variant: int, e2e: int, seed: int = 20) -> Path:
    """The in-process sets (``sets.json``: name -> JSON hands) and the end-to-end folder of XML files."""
    from coffre.domain.codec import canonical_bytes

    rng = random.Random(seed)
    sets: dict[str, list[str]] = {"THNL 6-max": []}
    for k in range(per_variant):
        sets["THNL 6-max"].append(played("THNL", 6, rng, k + 1).decode())
    for regle in ENGINE_VARIANTS:
        top = min(6, MAX_PLAYERS[regle])
        sets[regle] = [played(regle, rng.randint(3, top), rng, k + 1).decode() for k in range(per_variant)]
    (folder / "sets.json").write_text(json.dumps(sets))
    hands_folder = folder / "hands"
    hands_folder.mkdir()
    regles = list(ENGINE_VARIANTS)
    for k in range(e2e):
        regle = regles[k % len(regles)]
        raw = played(regle, rng.randint(3, min(6, MAX_PLAYERS[regle])), rng, k + 1)
        (hands_folder / f"{k + 1:06d}.xml").write_bytes(canonical_bytes(normalize(raw)))
    (folder / "empty").mkdir()
    return folder


def child(sets_file: str) -> int:
    """In a child process, on the side's own code: hands/s of the full audit per set (one JSON
    line), by the wall clock and by the process's CPU time (steadier when other jobs share the cores)."""
    from coffre.domain.audit.events import audit_event
    from coffre.domain.audit.trail import MoneyTrail

    sets = json.loads(Path(sets_file).read_text())
    out: dict[str, Any] = {}
    for name, raws in sets.items():
        events = [normalize(raw.encode()) for raw in raws]
        for e in events[:5]:
            audit_event(e, MoneyTrail())  # warm: caches, lazy imports
        best = best_cpu = float("inf")
        found = 0
        for _ in range(3):
            trail = MoneyTrail()
            start, cpu = time.perf_counter(), time.process_time()
            found = sum(len(audit_event(e, trail)) for e in events)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        out[name] = {
            "hands_per_s": len(events) / best,
            "hands_per_cpu_s": len(events) / max(best_cpu, 1e-9),
            "findings": found,
        }
    print(json.dumps(out))
    return 0


def children_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def coffre_audit(
    env: dict[str, str], folder: Path, cwd: Path, options: Sequence[str] = ()
) -> tuple[float, float, dict[str, Any] | None]:
    """Wall and CPU seconds of ``coffre audit FOLDER --json [options]`` (start-up included; the CPU
    of its worker processes too) and its JSON (None if none)."""
    start, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "audit", str(folder), "--json", *options],
        capture_output=True,
        env=env,
        cwd=cwd,
    )
    seconds, cpu_seconds = time.perf_counter() - start, children_cpu() - cpu
    try:
        return seconds, cpu_seconds, json.loads(done.stdout)
    except ValueError:
        sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])
        return seconds, cpu_seconds, None


def side_by_side(args: argparse.Namespace) -> int:
    from _worktree import PROJECT, short_revision, worktree

    here = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(PROJECT), *filter(None, (os.environ.get("PYTHONPATH") or "").split(os.pathsep))]
        ),
    }
    with (
        tempfile.TemporaryDirectory(prefix="coffre-bench-audit-") as scratch_name,
        contextlib.ExitStack() as exits,
    ):
        scratch = Path(scratch_name)
        try:
            base = exits.enter_context(worktree(args.baseline, scratch / "baseline"))
        except subprocess.CalledProcessError as exc:
            print(f"--baseline {args.baseline}: {exc.stderr.strip()}", file=sys.stderr)
            return 2
        label = f"this tree ({short_revision()})"
        sides = {f"baseline ({base.commit})": base.env(), label: here}
        print(f"writing {args.per_variant} hands per set and {args.e2e_hands} files…", file=sys.stderr)
        (scratch / "data").mkdir()
        data = write_sets(scratch / "data", args.per_variant, args.e2e_hands)
        runs: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
        checks: dict[str, list[Any]] = {side: [] for side in sides}
        jobs_runs: dict[str, list[float]] = {}
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

        def note(side: str, key: str, value: float) -> None:
            runs[side].setdefault(key, []).append(value)

        for n in range(args.rounds):
            order = list(sides.items())
            if n % 2:
                order.reverse()  # each side goes first in every other round
            for side, env in order:
                print(f"round {n + 1}/{args.rounds}: {side}", file=sys.stderr)
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(data / "sets.json")],
                    capture_output=True,
                    env=env,
                    cwd=scratch,
                    check=True,
                )
                for name, row in json.loads(done.stdout).items():
                    note(side, f"in process: {name}, hands/s", row["hands_per_s"])
                    note(side, f"in process: {name}, hands/CPU-s", row["hands_per_cpu_s"])
                    checks[side].append(("in process", name, row["findings"]))
                seconds, cpu, out = coffre_audit(env, data / "hands", scratch)
                note(side, f"coffre audit of {args.e2e_hands:,} hands, s", seconds)
                note(side, f"coffre audit of {args.e2e_hands:,} hands, CPU s", cpu)
                checks[side].append(("coffre audit", out and out["hands"], out and len(out["findings"])))
                if side == label:  # this tree's default is --jobs CPUs: its serial run beside it
                    serial_s, serial_cpu, serial = coffre_audit(env, data / "hands", scratch, ["--jobs", "1"])
                    jobs_runs.setdefault("s", []).append(serial_s)
                    jobs_runs.setdefault("CPU s", []).append(serial_cpu)
                    same = json.dumps(serial) == json.dumps(out)
                    checks[side].append(
                        ("coffre audit --jobs 1", serial and serial["hands"], 0 if same else 1)
                    )
                note(side, "coffre audit's hands/s, start-up included", args.e2e_hands / seconds)
                startup = [coffre_audit(env, data / "empty", scratch)[:2] for _ in range(3)]
                note(
                    side,
                    "start-up: coffre audit of an empty folder, s",
                    statistics.median(s for s, _ in startup),
                )
                note(
                    side,
                    "start-up: coffre audit of an empty folder, CPU s",
                    statistics.median(c for _, c in startup),
                )
        (before, before_runs), (after, after_runs) = runs.items()
        table = {
            key: {
                "baseline": statistics.median(before_runs[key]),
                "current": statistics.median(after_runs[key]),
                "baseline_runs": before_runs[key],
                "current_runs": after_runs[key],
            }
            for key in after_runs
            if key in before_runs
        }
        for row in table.values():
            row["current_over_baseline"] = row["current"] / row["baseline"]
        jobs_table = {
            f"coffre audit of {args.e2e_hands:,} hands, --jobs 1, {unit}": statistics.median(values)
            for unit, values in jobs_runs.items()
        }
        result = {
            "baseline": before,
            "current": after,
            "rounds": args.rounds,
            "figures": table,
            "cpus": cpus,
            "this_tree_jobs_1": jobs_table,
            "checks": checks,
        }
        if args.json:
            print(json.dumps(result, indent=1))
            return 0
        print(f"side by side, medians of {args.rounds} rounds, alternating: {before} and {after}")
        rows = [("figure", "baseline", "this tree", "ratio")]
        for key, row in table.items():
            fmt = "{:,.2f}" if key.endswith(" s") else "{:,.0f}"
            rows.append(
                (
                    key,
                    fmt.format(row["baseline"]),
                    fmt.format(row["current"]),
                    f"{row['current_over_baseline']:.2f}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print(
                "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
        print("targets (issue 31), in process on one core, by the CPU time of this tree's runs:")
        for key, row in table.items():
            if not key.startswith("in process:") or not key.endswith("hands/CPU-s"):
                continue
            target = TARGET_THNL_6MAX if "THNL 6-max" in key else TARGET
            verdict = "meets" if row["current"] >= target else "misses"
            print(f"  {key}: {row['current']:,.0f} {verdict} {target:,}")
        print(f"this tree's coffre audit runs --jobs {cpus} (the CPUs available); its --jobs 1 beside it:")
        for key, value in jobs_table.items():
            print(f"  {key}: {value:,.2f}")
        for side, seen in checks.items():
            bad = [c for c in seen if (c[0] == "in process" and c[2]) or (c[0] != "in process" and c[2] != 0)]
            print(f"{side}: {'no finding in any run' if not bad else f'unexpected: {bad[:3]}'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        return child(args.child)
    if args.baseline:
        return side_by_side(args)
    variants = [v.strip().upper() for v in args.variants.split(",") if v.strip()]
    events = hands(args.hands, variants)
    build_tables()
    per_variant = {}
    for regle in variants:
        subset = [e for e in events if e.Regle == regle]
        per_variant[regle] = round(rate(audit_hand, subset, repeat=1)[0])
    arith, arith_found = rate(arithmetic, events)
    full, full_found = rate(audit_hand, events)
    top = profile(events, args.profile) if args.profile else []
    result = {
        "hands": len(events),
        "variants": variants,
        "arithmetic_hands_per_s": round(arith),
        "audit_hands_per_s": round(full),
        "audit_us_per_hand": round(1e6 / full, 1),
        "target_hands_per_s": TARGET,
        "target_met": full >= TARGET,
        "findings": arith_found + full_found,
        "per_variant_hands_per_s": per_variant,
        "profile": top,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    out = sys.stdout
    print(
        f"{len(events)} hands ({', '.join(variants)}), one core; findings: {result['findings']} (must be 0)",
        file=out,
    )
    print(f"{'check':<28}{'hands/s':>10}{'µs/hand':>10}", file=out)
    print(f"{'arithmetic only':<28}{arith:>10.0f}{1e6 / arith:>10.1f}", file=out)
    mark = "meets" if full >= TARGET else "misses"
    print(
        f"{'audit_hand (coffre engine)':<28}{full:>10.0f}{1e6 / full:>10.1f}   {mark} {TARGET:,}/s", file=out
    )
    print("per variant (hands/s): " + ", ".join(f"{k} {v}" for k, v in per_variant.items()), file=out)
    if top:
        print(f"\n{'own %':>6} {'own s':>8} {'calls':>8}  function", file=out)
        for row in top:
            print(f"{row['own_pct']:>6} {row['own_s']:>8} {row['calls']:>8}  {row['function']}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
