"""Each service's /healthz, /readyz and /metrics on a running stack, and its JSON logs:
the metrics PRODUCT.md lists move with the traffic, and the log lines carry the event."""

from __future__ import annotations

import asyncio
import json
import time

from coffre.adapters.broker import free_port_block
from coffre.client import CoffreClient
from coffre.commands.stack import SERVICES, Stack

from .ops_http import get, metric, wait_ready
from events import POINSCRIT
from pipeline.stack_settings import stack_settings


def test_health_readiness_metrics_and_logs(kafka_bootstrap, topic_prefix, tmp_path):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        partitions=2,
        ops_port=free_port_block(len(SERVICES)),
        lot_max_events=2,
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()
    try:
        for name in SERVICES:
            ready = wait_ready(stack, name)
            assert ready["service"] == name and ready["status"] == "ready"
            status, body = get(f"http://127.0.0.1:{stack.ops_port(name)}/healthz")
            assert status == 200 and json.loads(body)["status"] == "ok"
        assert set(wait_ready(stack, "vault")["checks"]) == {"broker", "journal", "archive", "signing_key"}
        assert set(wait_ready(stack, "ingest")["checks"]) == {"broker"}  # its state is on the broker

        good = [POINSCRIT.replace(b"p-1", f"ops-{n}".encode()) for n in range(4)]
        bad = POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099")

        async def submit() -> list:
            async with CoffreClient(kafka_bootstrap, settings.topics, settings.synthesis_events) as client:
                return [
                    await client.submit(raw, timeout=60, correlation_id=f"ops-{n}")
                    for n, raw in enumerate([*good, bad])
                ]

        outcomes = asyncio.run(submit())
        assert [o.status for o in outcomes] == ["recorded"] * 4 + ["rejected"]
        deadline = time.monotonic() + 10
        while metric(stack, "vault", "coffre_lots_sealed_total") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)

        assert metric(stack, "ingest", "coffre_events_in_total") == 5
        assert metric(stack, "ingest", "coffre_events_normalized_total", 'event_type="POINSCRIT"') == 4
        assert metric(stack, "ingest", "coffre_events_rejected_total", 'reason="INVALID_OPERATOR_ID"') == 1
        assert metric(stack, "ingest", "coffre_ingest_partitions") == 2  # the one replica folds both
        deadline = time.monotonic() + 10  # a snapshot of the counters every COFFRE_INGEST_SNAPSHOT_SECONDS
        while metric(stack, "ingest", "coffre_ingest_snapshots_total") < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert metric(stack, "ingest", "coffre_ingest_snapshots_total") >= 1
        assert metric(stack, "vault", "coffre_events_recorded_total") == 4
        assert metric(stack, "vault", "coffre_fsync_seconds_count", 'store="vault_journal"') >= 1
        assert metric(stack, "vault", "coffre_lots_sealed_total") == 2
        assert metric(stack, "vault", "coffre_lot_seal_seconds_count") == 2
        assert metric(stack, "acquittal", "coffre_acquittals_total", 'status="recorded"') == 4
        assert metric(stack, "acquittal", "coffre_acquittals_total", 'status="rejected"') == 1
        assert metric(stack, "acquittal", "coffre_acquittal_latency_seconds_count") == 4
        deadline = time.monotonic() + 5  # the lag gauge is refreshed every second
        while time.monotonic() < deadline:
            status, text = get(f"http://127.0.0.1:{stack.ops_port('vault')}/metrics")
            if f'coffre_consumer_lag{{partition="0",topic="{settings.topics.normalized}"}}' in text:
                break
            time.sleep(0.3)
        else:
            raise AssertionError("the vault exports no consumer lag")
    finally:
        codes = stack.stop()
    assert all(c == 0 for c in codes.values()), codes

    def lines(service: str) -> list[dict]:
        text = (tmp_path / "logs" / f"{service}.log").read_text()
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    vault = lines("vault")
    assert all(entry["service"] == "vault" for entry in vault)
    sealed = [e for e in vault if e["message"].startswith("sealed ")]
    assert sealed and all(e["id_oper"] == "0099" and e["id_coffre"] == 7 for e in sealed)
    rejected = [e for e in lines("ingest") if e["message"].startswith("rejected input")]
    assert [e["correlation_id"] for e in rejected] == ["ops-4"]
    assert "INVALID_OPERATOR_ID" in rejected[0]["message"]
