"""Every service's operations endpoints, plain HTTP on ``COFFRE_OPS_PORT``:

- ``/healthz`` (liveness): the process's event loop answers, with its measured lag, and no
  fatal condition was raised. A loop blocked for good never answers: the probe times out.
- ``/readyz`` (readiness): each named check of the service holds (broker reachable,
  storage writable, keys loaded…); 503 with the failing checks otherwise.
- ``/metrics``: Prometheus text format (see coffre.metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from aiokafka.client import AIOKafkaClient
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from . import metrics
from .adapters.storage import probe_directory
from .config import Settings

log = logging.getLogger("coffre.ops")

Check = Callable[[], Awaitable[None]]
"""A readiness check: returns when it holds, raises (with a message) when it does not."""

CHECK_TIMEOUT = 3.0


class Ops:
    """The health, readiness and metrics server of one service."""

    def __init__(self, service: str, settings: Settings) -> None:
        self.service = service
        self.host = settings.http_host
        self.port = settings.ops_port
        self.checks: dict[str, Check] = {}
        self.fatal: str | None = None
        self.loop_lag = 0.0
        self._runner: web.AppRunner | None = None
        self._watchdog: asyncio.Task[None] | None = None

    def add_check(self, name: str, check: Check) -> None:
        self.checks[name] = check

    def halt(self, reason: str) -> None:
        """Mark the process unhealthy (liveness fails): it can no longer do its work."""
        self.fatal = reason

    async def start(self) -> None:
        self._watchdog = asyncio.get_running_loop().create_task(self._watch_loop())
        if not self.port:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("ops endpoints on http://%s:%d (/healthz /readyz /metrics)", self.host, self.port)

    async def stop(self) -> None:
        """Stop serving, and close the checks that hold a connection (``BrokerCheck``)."""
        for check in self.checks.values():
            close = getattr(check, "close", None)
            if close is not None:
                await close()
        if self._watchdog:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._runner:
            await self._runner.cleanup()
            self._runner = None

    async def _watch_loop(self, period: float = 0.5) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(period)
            self.loop_lag = max(0.0, time.monotonic() - before - period)

    async def readiness(self) -> dict[str, str]:
        """Every check's result: ``"ok"`` or why it fails."""

        async def run(check: Check) -> str:
            try:
                await asyncio.wait_for(check(), CHECK_TIMEOUT)
            except TimeoutError:
                return f"no answer within {CHECK_TIMEOUT:g}s"
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            return "ok"

        names = list(self.checks)
        results = await asyncio.gather(*(run(self.checks[n]) for n in names))
        return dict(zip(names, results, strict=True))

    async def _healthz(self, _: web.Request) -> web.Response:
        body = {"service": self.service, "loop_lag_ms": round(self.loop_lag * 1000, 1)}
        if self.fatal:
            return web.json_response({**body, "status": "halted", "reason": self.fatal}, status=503)
        return web.json_response({**body, "status": "ok"})

    async def _readyz(self, _: web.Request) -> web.Response:
        results = await self.readiness()
        ready = self.fatal is None and all(r == "ok" for r in results.values())
        metrics.READY.set(1 if ready else 0)
        body = {"service": self.service, "status": "ready" if ready else "not ready", "checks": results}
        if self.fatal:
            body["halted"] = self.fatal
        return web.json_response(body, status=200 if ready else 503)

    async def _metrics(self, _: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(REGISTRY))
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response


class BrokerCheck:
    """The Kafka cluster answers a metadata request (one client kept for the probes)."""

    def __init__(self, bootstrap_servers: str, security: Mapping[str, Any] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = dict(security or {})
        self._client: AIOKafkaClient | None = None

    async def __call__(self) -> None:
        if self._client is None:
            client = AIOKafkaClient(
                bootstrap_servers=self.bootstrap_servers, request_timeout_ms=2500, **self.security
            )
            try:
                await client.bootstrap()
            except Exception:
                await client.close()
                raise
            self._client = client
        try:
            await self._client.fetch_all_metadata()
        except Exception:
            client, self._client = self._client, None
            await client.close()
            raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def in_thread(probe: Callable[[], object]) -> Check:
    """A check made of a blocking ``probe`` (disk, S3), run in a worker thread."""

    async def check() -> None:
        await asyncio.to_thread(probe)

    return check


def writable_dir(path: Path) -> Check:
    """``path`` takes a new file now (written, fsynced, removed)."""
    return in_thread(lambda: probe_directory(path))
