"""bench/history.py in its quick form (issue 22): a tiny history, built, started, restored, verified
and proved, side by side at two sizes, with the JSON the README's figures come from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PHASES = {
    "build": {
        "seconds",
        "events_per_second",
        "journal_seconds_max",
        "seal_seconds_max",
        "lots",
        "sealed_events",
        "tail_events",
        "event_bytes",
        "journal_bytes",
        "archive_bytes",
        "days",
    },
    "startup_warm": {
        "journal_open_seconds",
        "sealer_start_seconds",
        "seconds",
        "coffres",
        "sealed_events",
        "journal_events",
        "maxrss_mb",
        "baseline_rss_mb",
    },
    "takeover": {"seconds", "coffres", "sealed_events", "maxrss_mb", "baseline_rss_mb"},
    "restore": {"seconds", "coffres", "events", "events_per_second", "maxrss_mb", "baseline_rss_mb"},
    "verify": {"seconds", "ok", "problems", "events", "events_per_second", "maxrss_mb", "baseline_rss_mb"},
    "proofs": {
        "coffre_events",
        "inclusion_first_seconds",
        "inclusion_warm_seconds",
        "consistency_first_seconds",
        "consistency_warm_seconds",
        "maxrss_mb",
        "baseline_rss_mb",
    },
}


def test_a_tiny_history_is_built_and_measured_at_two_sizes() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "history.py"),
            "--json",
            "--events",
            "600,1200",
            "--coffres",
            "3",
            "--lot-events",
            "100",
            "--tail",
            "7",
            "--days",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["errors"] == [] and out["status"] == 0 and out["coffres"] == 3
    assert [run["events"] for run in out["runs"]] == [600, 1200]
    for run in out["runs"]:
        events = run["events"]
        assert set(run) == {"events", "startup_cold", *PHASES}
        for phase, keys in PHASES.items():
            assert keys <= set(run[phase]), (phase, keys - set(run[phase]))
        assert run["startup_cold"].keys() == run["startup_warm"].keys()
        build = run["build"]
        assert build["sealed_events"] == events and build["tail_events"] == 21
        assert build["lots"] == events // 100  # 200 or 400 per coffre: full lots of 100
        assert 560 <= build["event_bytes"] <= 640
        for startup in (run["startup_warm"], run["startup_cold"]):
            assert startup["coffres"] == 3
            assert startup["sealed_events"] == events  # where sealing stands, from the archive
            assert startup["journal_events"] == events + 21
        assert run["takeover"]["coffres"] == 3 and run["takeover"]["sealed_events"] == events
        assert run["restore"]["coffres"] == 3 and run["restore"]["events"] == events
        assert run["verify"]["ok"] and run["verify"]["events"] == events
        assert run["proofs"]["coffre_events"] == events // 3
    # the table is printed too (on stderr with --json)
    assert "vault start-up, cache warm" in done.stderr and "1,200 events" in done.stderr


DIRECT = {
    "build": {
        "seconds",
        "events_per_second",
        "seal_seconds_max",
        "lots",
        "sealed_events",
        "event_bytes",
        "archive_bytes",
    },
    "verify_cli": {
        "seconds",
        "cpu_seconds",
        "jobs",
        "ok",
        "events",
        "events_per_second",
        "events_per_cpu_second",
    },
    "proofs": {
        "coffre_events",
        "inclusion_first_seconds",
        "inclusion_warm_seconds",
        "consistency_first_seconds",
    },
    "export": {"day", "lots", "bytes", "seconds"},
}


def test_an_archive_written_directly_is_verified_by_coffre_verify_jobs_and_proved() -> None:
    """--direct: lots of small events written by the lot builder and signer, no journal; the archive
    passes ``coffre verify --jobs 2`` (which would fail the run otherwise), and the regulator API
    proves an event and exports a day of it."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "history.py"),
            "--json",
            "--direct",
            "--events",
            "2000",
            "--coffres",
            "3",
            "--lot-events",
            "150",
            "--days",
            "10",
            "--verify-jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["errors"] == [] and out["status"] == 0
    (run,) = out["runs"]
    assert set(run) == {"events", *DIRECT}
    for phase, keys in DIRECT.items():
        assert keys <= set(run[phase]), (phase, keys - set(run[phase]))
    build = run["build"]
    assert build["sealed_events"] == 2000 and build["lots"] == 3 * 5  # 667, 667, 666: 5 lots of <= 150 each
    assert 200 <= build["event_bytes"] <= 260
    assert run["verify_cli"]["ok"] and run["verify_cli"]["jobs"] == 2 and run["verify_cli"]["events"] == 2000
    assert run["proofs"]["coffre_events"] == 667
    assert run["export"]["lots"] >= 1 and run["export"]["bytes"] > 0
    assert "coffre verify --jobs N (CLI)" in done.stderr and "export of a day" in done.stderr
