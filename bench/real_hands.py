"""The hand audit's speed on real hands (tests/fixtures/phh), per variant, inside the process.

    .venv/bin/python bench/real_hands.py              # every hand of the corpus
    .venv/bin/python bench/real_hands.py --hands 2000 # at most 2,000 hands a variant
    .venv/bin/python bench/real_hands.py --command [--baseline REV] [--rounds 3]

The hands are converted by the tests' own writer (tests/phh/writer.py) and normalized first; only
``audit_hand`` is timed (one core). Real hands differ from the generated ones of bench/audit.py:
Pluribus's are 6-max no-limit hold'em where most hands end before the flop, the WSOP's a five-handed
mixed game. Prints hands/s per variant and the findings met (today's known engine defects).

``--command`` (issue 31's "10,000 real hands in 5 s on 2 cores") writes the converted hands as one
JSON file each into a scratch folder and times ``coffre audit FOLDER --json`` end to end (start-up
included, the workers' CPU too) with its default ``--jobs`` (the CPUs available) and with
``--jobs 1``, ``--rounds`` times, medians; the two JSON outputs must be equal. ``--baseline REV``
times REV's ``coffre audit`` on the same files, alternating with this tree's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from phh import corpus, writer

from coffre.domain.audit.hand import audit_hand
from coffre.domain.normalize import normalize


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=0, help="at most this many hands a variant (0: all)")
    parser.add_argument("--command", action="store_true", help="time `coffre audit` of the hands' files")
    parser.add_argument("--baseline", metavar="REV", help="--command: REV's coffre audit beside this tree's")
    parser.add_argument("--rounds", type=int, default=3, help="--command: rounds (medians)")
    args = parser.parse_args()

    converted, skipped = writer.convert_all(corpus.hands())
    if args.command:
        return command(converted, args)
    by_regle: dict[str, list] = defaultdict(list)
    for _, regle, event in converted:
        if not args.hands or len(by_regle[regle]) < args.hands:
            by_regle[regle].append(normalize(json.dumps(event).encode()))
    try:  # the showdown's tables, built at their first use, before the clock starts (pokerkit's
        # lookups were built at its import, not timed either)
        from coffre.domain.audit import ranking

        ranking.build_tables()
    except ImportError:  # a revision before issue 31
        pass
    total_hands, total_time = 0, 0.0
    print(f"{'Regle':6} {'hands':>6} {'hands/s':>8}  findings")
    for regle, events in sorted(by_regle.items(), key=lambda kv: -len(kv[1])):
        found: Counter[str] = Counter()
        started = time.perf_counter()
        for event in events:
            found.update(f.code for f in audit_hand(event))
        elapsed = time.perf_counter() - started
        total_hands += len(events)
        total_time += elapsed
        print(f"{regle:6} {len(events):6} {len(events) / elapsed:8.0f}  {dict(found) or ''}")
    print(f"{'all':6} {total_hands:6} {total_hands / total_time:8.0f}  ({sum(skipped.values())} skipped)")
    return 0


def command(converted: list, args: argparse.Namespace) -> int:
    import contextlib
    import os

    from _worktree import PROJECT, short_revision, worktree
    from audit import coffre_audit

    counts: Counter[str] = Counter()
    with (
        tempfile.TemporaryDirectory(prefix="coffre-bench-real-") as scratch_name,
        contextlib.ExitStack() as exits,
    ):
        scratch = Path(scratch_name)
        folder = scratch / "hands"
        folder.mkdir()
        for k, (_, regle, event) in enumerate(converted):
            if args.hands and counts[regle] >= args.hands:
                continue
            counts[regle] += 1
            (folder / f"{k:06d}.json").write_text(json.dumps(event))
        here = {**os.environ, "PYTHONPATH": str(PROJECT)}
        sides = {f"this tree ({short_revision()})": here}
        if args.baseline:
            base = exits.enter_context(worktree(args.baseline, scratch / "baseline"))
            sides = {f"baseline ({base.commit})": base.env(), **sides}
        hands = sum(counts.values())
        print(f"`coffre audit` of {hands:,} real hands, one JSON file each ({os.cpu_count()} CPUs)")
        times: dict[str, list[tuple[float, float]]] = {}
        outputs: dict[str, object] = {}
        for n in range(args.rounds):
            order = list(sides.items())
            if n % 2:
                order.reverse()
            for side, env in order:
                for jobs in ((), ("--jobs", "1")):
                    seconds, cpu, report = coffre_audit(env, folder, scratch, jobs)
                    key = f"{side}{' --jobs 1' if jobs else ''}"
                    times.setdefault(key, []).append((seconds, cpu))
                    if report is None:
                        print(f"{key}: no JSON")
                        return 1
                    report.pop("seconds", None)
                    outputs.setdefault(side, report)
                    if report != outputs[side]:
                        print(f"{key}: its JSON differs from the default run's")
                        return 1
        print(f"{'run':45} {'wall s':>8} {'CPU s':>8} {'hands/s':>8}")
        for key, runs in times.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{key:45} {wall:8.2f} {cpu:8.2f} {hands / wall:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
