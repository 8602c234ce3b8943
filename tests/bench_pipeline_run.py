"""One tiny run of ``bench/pipeline.py`` for the whole session, shared by tests/test_bench_pipeline.py
(its raw, end-to-end, latency, sealing and regulator figures) and tests/test_evidence_bench.py (its
evidence phase). ``--evidence`` runs after the other phases, on stacks of its own, so the figures
the first test reads are those of the same tiny run without it; one run instead of two saves the
embedded broker's and the two stacks' start and the tiny run's load (about 20 s). Without openssl
(the evidence phase's TSA) the run leaves ``--evidence`` out, and the evidence test skips as before."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--events",
    "300",
    "--seconds",
    "1",
    "--rate",
    "100",
    "--stress-seconds",
    "1",
    "--sealing-lot-events",
    "40",
    "--proofs",
    "20",
]
EVIDENCE = ["--evidence", "--evidence-outage-seconds", "3"]
"""The evidence phase's quick form: a few seconds of outage instead of a minute."""


@functools.cache
def tiny_run() -> subprocess.CompletedProcess[str]:
    """``bench/pipeline.py --json`` with TINY (and EVIDENCE when openssl is at hand), run once."""
    evidence = EVIDENCE if shutil.which("openssl") else []
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "pipeline.py"), "--json", *TINY, *evidence],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
