"""What today's hand audit finds on the real hands: ``python -m tests.phh.triage`` (from the repository's
root) prints, for each variant and finding code, how many hands it flags, one example hand and its
message, then the hands the writer skipped and why. ``--all`` lists every flagged hand.

The real hands are legal (they were played and dealt by a casino or an online room): a finding here
is either coffre's mistake, a real inconsistency of the dataset, or a bug of the tests' writer
(tests/phh/writer.py) — the report of issue 20 diagnoses each code.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from typing import Any

from coffre.domain.audit.findings import Finding
from coffre.domain.audit.hand import audit_hand
from coffre.domain.normalize import normalize

from . import corpus, writer


def audit_event(event: dict[str, Any]) -> list[Finding]:
    """``event`` read by normalize() as ingest reads it, then audited."""
    return audit_hand(normalize(json.dumps(event).encode()))


def flagged(
    converted: list[tuple[str, str, dict[str, Any]]],
) -> dict[str, tuple[str, list[Finding]]]:
    """Hand name -> (Regle, findings) for every hand with at least one finding."""
    out: dict[str, tuple[str, list[Finding]]] = {}
    for name, regle, event in converted:
        findings = audit_event(event)
        if findings:
            out[name] = (regle, findings)
    return out


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    converted, skipped = writer.convert_all(corpus.hands())
    per_variant = Counter(regle for _, regle, _ in converted)
    found = flagged(converted)
    elapsed = time.perf_counter() - started

    print(f"{len(converted)} hands converted, {sum(skipped.values())} skipped, audited in {elapsed:.1f} s")
    print("hands per variant:", ", ".join(f"{r} {n}" for r, n in sorted(per_variant.items())))
    table: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for name, (regle, findings) in found.items():
        for code in dict.fromkeys(f.code for f in findings):
            message = next(f.message for f in findings if f.code == code)
            table[(regle, code)].append((name, message))
    print(f"\n{len(found)} hands flagged\n")
    print(f"| {'Regle':6} | {'code':22} | {'hands':>5} | example | message |")
    print(f"|{'-' * 8}|{'-' * 24}|{'-' * 7}|---|---|")
    for (regle, code), hands in sorted(table.items()):
        name, message = hands[0]
        print(f"| {regle:6} | {code:22} | {len(hands):5} | {name} | {message} |")
        if "--all" in argv:
            for other, msg in hands[1:]:
                print(f"|        |                        |       | {other} | {msg} |")
    print("\nskipped (the annex cannot express them, or the dataset lacks what the writer needs):")
    for reason, n in skipped.most_common():
        print(f"  {n:5}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
