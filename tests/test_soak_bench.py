"""bench/soak.py: one run of a few seconds on the embedded broker (its JSON: every event acquitted and
in the journals once, per-interval figures), and the embedded broker's producer linger that
``coffre up`` gives its services. ``--baseline`` is not run here (two stacks): see bench/README.md."""

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


def test_a_short_soak_loses_nothing_and_reports_each_interval() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "soak.py"),
            "--json",
            "--seconds",
            "8",
            "--every",
            "3",
            "--rate",
            "50",
            "--coffres",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    soak = document["soak"]
    assert soak["problems"] == []
    assert soak["published"] > 100
    assert soak["acquitted"] == soak["published"]
    assert soak["journal_events"] == soak["published"] + 3  # the warm-up: one event per coffre
    assert soak["intervals"], "no interval reported"
    first = soak["intervals"][0]
    assert first["published"] > 0
    assert first["broker_cpu"] is not None and first["broker_rss_mb"] > 0
    assert set(first["largest_partition"]) == {"events.in", "normalized"}
    assert 0 < soak["latency_ms"]["p50"] <= soak["latency_ms"]["p99"] <= soak["latency_ms"]["max"]


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
