"""coffre's own hand evaluators (coffre.domain.audit.ranking) against pokerkit's, side by side in one run.

    .venv/bin/python bench/ranking.py [--deals N] [--rounds R] [--json]

1. the tables: each one's build time (CPU, its first use) and the memory it keeps (tracemalloc, a
   second build of the same table);
2. evaluations per second (CPU time, the best of ``--rounds`` rounds, ours and pokerkit's alternating)
   of each function on ``--deals`` random deals (a fixed seed), and pokerkit's on a twentieth as
   many: pokerkit's best hand of the same cards as coffre's replay asks it today
   (``coffre.domain.audit.variants._evaluate``, its lru cache bypassed: pokerkit's own lookup table
   walked over every five-card combination), and the ratio.

CPU time rather than wall time: the machine is shared, and a process waiting for a core does not
count. Only one core is used.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pokerkit import (
    FixedLimitSevenCardStudHighLowSplitEightOrBetter,
    OmahaEightOrBetterLowHand,
    OmahaHoldemHand,
    RegularLowHand,
    StandardHighHand,
)

from coffre.domain.audit import ranking
from coffre.domain.audit.variants import CARDS, DecreeDeuceToSevenLowHand, _evaluate

EightOrBetterLowHand = FixedLimitSevenCardStudHighLowSplitEightOrBetter.hand_types[1]

# name, our function, pokerkit's hand type, hole cards, board cards (0: the cards are pooled)
CASES: tuple[tuple[str, Callable[..., Any], type, int, int], ...] = (
    ("high, 7 cards (hold'em, stud)", ranking.high, StandardHighHand, 7, 0),
    ("high, 5 cards", ranking.high, StandardHighHand, 5, 0),
    ("omaha_high, 4 + 5", ranking.omaha_high, OmahaHoldemHand, 4, 5),
    ("omaha_high, 5 + 5", ranking.omaha_high, OmahaHoldemHand, 5, 5),
    ("low8, 7 cards (7SJL)", ranking.low8, EightOrBetterLowHand, 7, 0),
    ("omaha_low8, 4 + 5", ranking.omaha_low8, OmahaEightOrBetterLowHand, 4, 5),
    ("razz, 7 cards", ranking.razz, RegularLowHand, 7, 0),
    ("deuce_seven, 5 cards", ranking.deuce_seven, DecreeDeuceToSevenLowHand, 5, 0),
)

TABLES: tuple[tuple[str, Callable[[], None], Callable[[], None]], ...] = (
    (
        "high (73,775 + Omaha's 6,175 rank multisets, 8,192 flush masks)",
        ranking._build_high,
        lambda: (ranking._HIGH_TABLE.clear(), ranking._OMAHA_TABLE.clear(), ranking._FLUSH_TABLE.clear()),
    ),
    ("razz (73,775 rank multisets)", ranking._build_razz, ranking._RAZZ_TABLE.clear),
    ("2-7 (6,175 rank multisets)", ranking._build_deuce_seven, ranking._DEUCE_SEVEN_TABLE.clear),
)


def tables() -> list[dict[str, Any]]:
    out = []
    for name, build, clear in TABLES:
        clear()
        start = time.process_time()
        build()
        seconds = time.process_time() - start
        clear()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        build()
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        out.append({"table": name, "build_ms": round(seconds * 1000, 1), "memory_mb": round(kept / 1e6, 2)})
    return out


def _cpu(run: Callable[[], None]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def measure(deals: int, rounds: int, seed: int = 31) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for name, ours, hand_type, hole, board in CASES:
        codes = [rng.sample(range(52), hole + board) for _ in range(deals)]
        ours_args: list[tuple[Sequence[int], ...]] = (
            [(d[:hole], d[hole:]) for d in codes] if board else [(d,) for d in codes]
        )
        theirs_args = [
            (hand_type, tuple(CARDS[c] for c in d[:hole]), tuple(CARDS[c] for c in d[hole:]))
            for d in codes[: max(deals // 20, 1)]
        ]

        def run_ours(f=ours, args=ours_args) -> None:
            for a in args:
                f(*a)

        def run_theirs(args=theirs_args, evaluate=_evaluate.__wrapped__) -> None:
            for a in args:
                evaluate(*a)

        run_ours()  # the tables built, the caches warm
        best_ours = best_theirs = float("inf")
        for _ in range(rounds):
            best_ours = min(best_ours, _cpu(run_ours))
            best_theirs = min(best_theirs, _cpu(run_theirs))
        ours_rate = len(ours_args) / best_ours
        theirs_rate = len(theirs_args) / best_theirs
        out.append(
            {
                "case": name,
                "coffre_per_s": round(ours_rate),
                "coffre_us": round(1e6 / ours_rate, 2),
                "pokerkit_per_s": round(theirs_rate),
                "pokerkit_us": round(1e6 / theirs_rate, 1),
                "ratio": round(ours_rate / theirs_rate, 1),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deals", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    built = tables()
    speeds = measure(args.deals, args.rounds)
    if args.json:
        print(json.dumps({"tables": built, "evaluations": speeds}, indent=2))
        return
    for t in built:
        print(f"table {t['table']:<50} built in {t['build_ms']:>7.1f} ms CPU, keeps {t['memory_mb']:5.2f} MB")
    print()
    print(f"{'evaluation':<32} {'coffre /s':>11} {'µs':>7} {'pokerkit /s':>12} {'µs':>8} {'ratio':>7}")
    for s in speeds:
        print(
            f"{s['case']:<32} {s['coffre_per_s']:>11,} {s['coffre_us']:>7.2f} {s['pokerkit_per_s']:>12,}"
            f" {s['pokerkit_us']:>8.1f} {s['ratio']:>6.1f}x"
        )


if __name__ == "__main__":
    main()
