"""bench/hot_path.py in its quick form (issue 34): the recording path's work per service without
Kafka, run and printed, not timed. The bench itself fails when an event does not come out of a
service (a normalized event, a receipt and an acquittal for each input)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_quick_mode_runs_every_event_through_the_three_services():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hot_path.py"), "--events", "300", "--rounds", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    current = document["current"]
    assert set(current) == {"revision", "ingest", "vault", "acquittal", "total"}
    assert all(current[name] > 0 for name in ("ingest", "vault", "acquittal"))
    assert current["total"] == current["ingest"] + current["vault"] + current["acquittal"]
    assert "ingest" in done.stderr and "target" in done.stderr  # the table, on stderr with --json
