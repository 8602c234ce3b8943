"""bench/soak.py in a quick form (seconds, one hit): it runs, prints its lines and the outside check,
and its JSON holds every figure (nothing is timed here: tests/pipeline/test_chaos_soak.py runs the
short soak with a hit of every kind); and the embedded broker's producer linger that ``coffre up``
gives its services. ``--baseline`` is not run here (two stacks): see bench/README.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coffre.adapters import kafka
from coffre.config import Settings
from coffre.stack import EMBEDDED_LINGER_MS, SERVICES, Stack

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PROCESSES = {"broker", "ingest", "ingest-2", "vault", "vault-2", "acquittal", "bench"}


def test_a_quick_soak_runs_prints_and_checks_from_outside(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from apache_kafka import require_java

    require_java()
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "soak.py"),
            "--json",
            "--seconds",
            "15",
            "--report-every",
            "5",
            "--rate",
            "40",
            "--coffres",
            "3",
            "--hits",
            "every=6",
            "--plan",
            "acquittal:SIGKILL",
            "--seed",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=420,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for words in (
        "seed 7",
        "[soak] min   1",
        "SIGKILL acquittal: acquittals back",
        "[soak] check:",
        "summary",
    ):
        assert words in done.stderr, (words, done.stderr[-3000:])
    soak = json.loads(done.stdout)["soak"]
    assert soak["problems"] == [] and soak["exits"] == []
    check = soak["check"]
    assert check["ok"] and check["verified"] is True
    assert check["lost"] == 0 and check["duplicates"] == 0
    assert check["published"] == soak["published"] == check["recorded"] > 100
    assert check["idevt_gapless"] and check["chains_as_acknowledged"]
    assert [(h["victim"], h["action"]) for h in soak["hits"]] == [("acquittal", "SIGKILL")]
    assert len(soak["minutes"]) >= 3
    for minute in soak["minutes"]:
        assert set(minute["rss_mb"]) == PROCESSES and set(minute["cpu_percent"]) == PROCESSES
        assert minute["broker_disk_mb"] > 0 and minute["published"] > 0
    summary = soak["summary"]
    assert summary["lost"] == 0 and summary["duplicates"] == 0
    assert set(summary["resume_by_kind"]) == {"SIGKILL acquittal"}
    assert set(summary["memory"]) == PROCESSES
    assert set(summary["met"]) == {
        "lost_0",
        "resume_within_5_s",
        "p99_outside_hits_within_1_s",
        "memory_flat",
    }


def test_coffre_up_lingers_its_producers_on_the_embedded_broker_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(kafka.LINGER_VARIABLE, raising=False)
    stack = Stack(Settings(data_dir=tmp_path))
    stack._embedded_defaults()
    for name in SERVICES:
        assert stack.env(name)[kafka.LINGER_VARIABLE] == str(EMBEDDED_LINGER_MS)
    assert kafka.LINGER_VARIABLE not in Stack(Settings(data_dir=tmp_path), bootstrap="kafka:9092").env(
        "ingest"
    )

    monkeypatch.setenv(kafka.LINGER_VARIABLE, "0")  # the operator's choice wins
    stack = Stack(Settings(data_dir=tmp_path))
    stack._embedded_defaults()
    assert stack.env("vault")[kafka.LINGER_VARIABLE] == "0"


@pytest.mark.parametrize(("value", "linger"), [("", 0), ("7", 7), ("-3", 0), ("5000", 1000), ("soon", 0)])
def test_the_linger_variable(monkeypatch: pytest.MonkeyPatch, value: str, linger: int) -> None:
    monkeypatch.setenv(kafka.LINGER_VARIABLE, value)
    assert kafka._linger_ms() == linger
