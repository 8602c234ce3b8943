"""The ops server, JSON logs, the shutdown deadline and the vault's static partition ownership,
without Kafka."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import aiohttp
import pytest

from coffre.adapters.broker import free_port
from coffre.adapters.stream import SHUTDOWN_OVERRUN_EXIT, host_ordinal, owned_partitions
from coffre.config import Settings
from coffre.logs import JsonFormatter, TextFormatter, log_context
from coffre.ops import Ops, writable_dir


async def _get(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, response.headers["Content-Type"], await response.text()


def test_readiness_names_the_failing_check_and_liveness_reports_a_halt(tmp_path):
    async def scenario() -> None:
        ops = Ops("vault", Settings(ops_port=free_port(), data_dir=tmp_path))

        async def broken() -> None:
            raise RuntimeError("bucket unreachable")

        async def hung() -> None:
            await asyncio.sleep(60)

        ops.add_check("disk", writable_dir(tmp_path))
        await ops.start()
        try:
            status, _, body = await _get(ops.port, "/readyz")
            assert status == 200 and json.loads(body)["checks"] == {"disk": "ok"}
            ops.add_check("archive", broken)
            ops.add_check("broker", hung)
            status, _, body = await _get(ops.port, "/readyz")
            checks = json.loads(body)["checks"]
            assert status == 503
            assert checks == {
                "disk": "ok",
                "archive": "RuntimeError: bucket unreachable",
                "broker": "no answer within 3s",
            }
            status, _, body = await _get(ops.port, "/healthz")
            assert status == 200 and json.loads(body)["status"] == "ok"
            ops.halt("IDEvt 4 already recorded with other bytes")
            status, _, body = await _get(ops.port, "/healthz")
            assert status == 503 and "other bytes" in json.loads(body)["reason"]
            status, content_type, body = await _get(ops.port, "/metrics")
            assert status == 200 and content_type == "text/plain"
            assert "coffre_ready 0.0" in body
        finally:
            await ops.stop()

    asyncio.run(scenario())


def test_a_full_disk_or_missing_folder_is_not_ready(tmp_path):
    with pytest.raises(FileNotFoundError):
        asyncio.run(writable_dir(tmp_path / "missing")())


def test_json_logs_carry_the_event_in_context():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("coffre.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        with log_context(id_coffre=7, id_evt=42, correlation_id='req "1"'):
            logger.warning("late record: %s", "x\ny")
        logger.info("outside")
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed", extra={"lot": 3})
    finally:
        logger.removeHandler(handler)
    first, second, third = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "late record: x\ny" and first["level"] == "WARNING"
    assert (first["id_coffre"], first["id_evt"], first["correlation_id"]) == (7, 42, 'req "1"')
    assert "id_coffre" not in second
    assert third["lot"] == 3 and "ValueError: boom" in third["exception"]


def test_text_logs_carry_the_context_too():
    record = logging.LogRecord("coffre", logging.INFO, __file__, 1, "sealed", (), None)
    with log_context(id_coffre=7):
        assert TextFormatter().format(record).endswith("sealed [id_coffre=7]")


def test_each_vault_replica_owns_a_disjoint_share_of_the_partitions():
    replicas = 3
    owners = [owned_partitions(replicas, ordinal) for ordinal in range(replicas)]
    for partition in range(12):
        assert sum(owns(partition) for owns in owners) == 1
    assert host_ordinal("coffre-vault-2") == 2
    assert host_ordinal("laptop") is None


def test_a_drain_that_overruns_the_deadline_exits_75():
    script = textwrap.dedent(
        """
        import asyncio
        from coffre.adapters.stream import run_until_signalled
        from coffre.config import Settings

        async def serve(settings, stop):
            print("serving", flush=True)
            await stop.wait()
            await asyncio.sleep(60)  # a drain that hangs: a broker gone, a disk stuck

        run_until_signalled(serve, Settings(shutdown_timeout_seconds=1.5))
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"serving\n"
    started = time.monotonic()
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=20) == SHUTDOWN_OVERRUN_EXIT
    assert 1.4 < time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("settings", "variable"),
    [
        ({"api_tls_cert": "/x.pem"}, "COFFRE_API_TLS_KEY"),
        ({"api_tls_cert": "/x.pem", "api_tls_key": "/k.pem", "api_auth": "mtls"}, "COFFRE_API_CLIENT_CA"),
        (
            {
                "api_tls_cert": "/x.pem",
                "api_tls_key": "/k.pem",
                "api_auth": "both",
                "api_client_ca": "/c.pem",
            },
            "COFFRE_API_TOKENS_FILE",
        ),
        ({"vault_replicas": 2, "vault_ordinal": 2}, "COFFRE_VAULT_ORDINAL"),
        ({"log_level": "LOUD"}, "COFFRE_LOG_LEVEL"),
        ({"ops_port": 70000}, "COFFRE_OPS_PORT"),
    ],
)
def test_bad_settings_name_their_variable(settings, variable):
    env = {f"COFFRE_{k.upper()}": str(v) for k, v in settings.items()}
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "vault"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert variable in result.stderr and "configuration error" in result.stderr
