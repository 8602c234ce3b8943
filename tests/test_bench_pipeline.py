"""bench/pipeline.py: its JSON, from one tiny run on the embedded broker (about 20 s; the session's
one run, shared with tests/test_evidence_bench.py: tests/bench_pipeline_run.py), and its arithmetic.
``--baseline`` is not run here (two whole measurements): see bench/README.md."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench_pipeline_run import tiny_run

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/pipeline.py imported under another name (``pipeline`` is tests/pipeline)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_pipeline", BENCH / "pipeline.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_pipeline"] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def ordered(spread: dict[str, float] | None) -> None:
    assert spread is not None
    assert 0 < spread["p50"] <= spread["p99"] <= spread["max"]


def test_tiny_run_prints_every_figure_as_json() -> None:
    done = tiny_run()
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)  # exactly one JSON object, nothing else
    assert "raw passthrough" in done.stderr  # the progress went to stderr

    assert out["code"] == "current" and out["revision"]
    assert out["args"]["events"] == 300 and out["args"]["lot_events"] == 75
    assert out["ingest_replicas"] == 1
    assert out["raw_msgs_per_s"] > 0 and out["e2e_events_per_s"] > 0
    assert out["e2e_recorded"] == 300
    ordered(out["latency_ms"])
    assert out["latency"]["arrived"] == out["latency"]["sent"] == 100

    cpu = out["cpu_us_per_event"]
    for name in ("ingest", "vault", "acquittal", "broker", "services_total", "all"):
        assert cpu[name] > 0, name
    # /proc counts CPU in 10 ms ticks: the bench's own share of a 300-event burst can be 0 ticks
    assert cpu["bench"] >= 0
    assert cpu["ingest_per_replica"] == {"ingest": cpu["ingest"]}
    assert cpu["services_total"] == pytest.approx(cpu["ingest"] + cpu["vault"] + cpu["acquittal"])
    if "regulator" in out["children"]["main"]:
        assert "regulator" in cpu

    sealing = out["sealing"]
    ordered(sealing["latency_ms"])
    assert sealing["arrived"] == sealing["sent"] == 100
    assert sealing["lot_events"] == 40
    assert sealing["lots_expected"] == 4 and sealing["lots_sealed"] >= 4
    assert sealing["prefill_events"] > 0 and sealing["error"] is None

    regulator = out["regulator"]
    ordered(regulator["latency_ms"])
    assert regulator["arrived"] == regulator["sent"] == 100
    assert regulator["export_downloads"] >= 1 and regulator["export_bytes"] > 10_000
    assert regulator["download_s"]["max"] >= regulator["download_s"]["mean"] > 0
    assert regulator["proofs"] >= 20 and regulator["proof_batches"] >= 1
    ordered(regulator["proof_ms"])
    assert regulator["proof_batch_s"]["mean"] > 0
    assert set(regulator["statuses"]) == {"200"} and regulator["failures"] == []
    assert regulator["sealed_events_at_start"] > 0
    assert regulator["cpu_percent"]["regulator_client"] >= 0

    assert set(out["targets"]) == {
        "e2e_events_per_s",
        "services_cpu_us_per_event",
        "broker_cpu_us_per_event",
        "latency_p99_ms",
    }
    assert all(isinstance(value, bool) for value in out["met"].values())
    assert out["errors"] == [] and out["status"] == 0


def test_cpu_per_event_sums_the_ingest_replicas(bench: ModuleType) -> None:
    used = {
        "ingest": 0.2,
        "ingest-2": 0.1,
        "vault": 0.05,
        "acquittal": 0.05,
        "regulator": 0.01,
        "broker": 0.3,
    }
    cpu = bench.cpu_per_event(used, 1000)
    assert cpu["ingest"] == pytest.approx(300)
    assert cpu["ingest_per_replica"] == pytest.approx({"ingest": 200, "ingest-2": 100})
    assert cpu["services_total"] == pytest.approx(400)  # ingest + vault + acquittal, not the API
    assert cpu["regulator"] == pytest.approx(10)
    assert cpu["all"] == pytest.approx(710)
    assert bench.base_service("ingest-12") == "ingest" and bench.base_service("regulator") == "regulator"


def test_the_sealing_plan_spreads_one_seal_per_coffre_over_the_window(bench: ModuleType) -> None:
    prefill, seals = bench.sealing_plan(4, 5000, 10_000)
    assert seals == [1, 1, 1, 1]
    assert prefill == [9843, 9530, 9218, 8905]  # + 1 warm-up event: full at 1/8, 3/8, 5/8, 7/8 of the window
    prefill, seals = bench.sealing_plan(4, 100, 40)
    assert seals == [1, 1, 1, 1] and all(0 <= p < 40 for p in prefill)


def test_ratios_say_which_way_is_better(bench: ModuleType) -> None:
    base = {"e2e_events_per_s": 1000.0, "latency_ms": {"p50": 10.0, "p99": 40.0, "max": 50.0}}
    now = {"e2e_events_per_s": 1500.0, "latency_ms": {"p50": 20.0, "p99": 20.0, "max": 50.0}}
    ratios = bench.ratios(base, now)
    assert ratios["e2e_events_per_s"]["current_over_baseline"] == pytest.approx(1.5)
    assert ratios["e2e_events_per_s"]["better"] == "higher" and ratios["e2e_events_per_s"]["improved"]
    assert ratios["latency_ms.p50"]["better"] == "lower" and not ratios["latency_ms.p50"]["improved"]
    assert ratios["latency_ms.p99"]["improved"]
    assert bench.stack_services((ROOT / "coffre" / "commands" / "stack.py").read_text()) is not None
