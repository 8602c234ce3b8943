"""The hand audit's speed on real hands (tests/fixtures/phh), per variant, inside the process.

    .venv/bin/python bench/real_hands.py              # every hand of the corpus
    .venv/bin/python bench/real_hands.py --hands 2000 # at most 2,000 hands a variant

The hands are converted by the tests' own writer (tests/phh/writer.py) and normalized first; only
``audit_hand`` is timed (one core). Real hands differ from the generated ones of bench/audit.py:
Pluribus's are 6-max no-limit hold'em where most hands end before the flop, the WSOP's a five-handed
mixed game. Prints hands/s per variant and the findings met (today's known engine defects).
"""

from __future__ import annotations

import argparse
import json
import sys
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
    args = parser.parse_args()

    converted, skipped = writer.convert_all(corpus.hands())
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


if __name__ == "__main__":
    sys.exit(main())
