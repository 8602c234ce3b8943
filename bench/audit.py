"""coffre's hand-audit benchmark: POJEU hands audited per second on one core.

    .venv/bin/python bench/audit.py [--hands N] [--variants THNL,O4HPL,...] [--profile K] [--json]

Hands are played by pokerkit (coffre.domain.audit.play, seeded: the same hands every run), 3 to 6
seats, mixed variants (all eleven by default), normalized once; then, on this one process:

1. the arithmetic checks alone (audit_hand's passes 1 and 2: structure, cards, money), per hand;
2. the whole audit_hand, pokerkit's replay included;
3. a cProfile of the whole audit over the same hands: the top ``--profile`` functions by own time.

The target is 2,000 hands/s/core with the engine (issue 12). ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from coffre.domain.audit import hand as hand_module
from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.play import MAX_PLAYERS, play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.normalize import normalize

TARGET = 2_000


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
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    variants = [v.strip().upper() for v in args.variants.split(",") if v.strip()]
    events = hands(args.hands, variants)
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
        f"{'audit_hand (with pokerkit)':<28}{full:>10.0f}{1e6 / full:>10.1f}   {mark} {TARGET:,}/s", file=out
    )
    print("per variant (hands/s): " + ", ".join(f"{k} {v}" for k, v in per_variant.items()), file=out)
    if top:
        print(f"\n{'own %':>6} {'own s':>8} {'calls':>8}  function", file=out)
        for row in top:
            print(f"{row['own_pct']:>6} {row['own_s']:>8} {row['calls']:>8}  {row['function']}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
