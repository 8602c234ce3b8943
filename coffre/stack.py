"""``coffre up``: the whole stack on one machine, for development and demonstration.

The embedded broker (Tansu, in memory) unless ``--bootstrap`` names a Kafka, the topics,
and the three services as child processes (as they run in Kubernetes, one process each),
their logs under ``<data>/logs``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .adapters.archive import signing_files
from .adapters.broker import EmbeddedBroker
from .adapters.kafka import ensure_topics
from .adapters.tls import DevelopmentTls, development_tls
from .config import Settings

SERVICES = ("ingest", "vault", "acquittal")


@dataclass
class Stack:
    settings: Settings
    bootstrap: str | None = None
    broker: EmbeddedBroker | None = None
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_tls: DevelopmentTls | None = None
    """The regulator API's development certificates and token, when none is configured."""

    def start(self, services: tuple[str, ...] = SERVICES) -> str:
        data = Path(self.settings.data_dir)
        (data / "logs").mkdir(parents=True, exist_ok=True)
        if self.bootstrap is None:
            self.broker = EmbeddedBroker(log_path=data / "logs" / "broker.log")
            self.bootstrap = self.broker.start()
        signing_files(self.settings)  # the development key, made once here rather than raced for
        if self.settings.api_port and self.settings.api_tls_cert is None:
            self.api_tls = development_tls(data / "tls")  # made here once, for the demo's curl line
        asyncio.run(
            ensure_topics(
                self.bootstrap, self.settings.topic_partitions, replication=self.settings.replication_factor
            )
        )
        for name in services:
            self.spawn(name)
        return self.bootstrap

    def ops_port(self, name: str) -> int:
        """Each service's /healthz, /readyz and /metrics port: COFFRE_OPS_PORT, + 1, + 2 (0: off)."""
        base = self.settings.ops_port
        return base + SERVICES.index(name) if base else 0

    def env(self, name: str | None = None) -> dict[str, str]:
        """The children's environment: this process's, with every setting as its COFFRE_ variable."""
        env = dict(os.environ)
        for setting in type(self.settings).model_fields:
            value = getattr(self.settings, setting)
            if value is None:
                continue
            if isinstance(value, set):
                value = ",".join(sorted(value))
            elif isinstance(value, tuple):
                value = ";".join(value)
            env[f"COFFRE_{setting.upper()}"] = str(value)
        env["COFFRE_BOOTSTRAP_SERVERS"] = self.bootstrap or ""
        if name is not None:
            env["COFFRE_OPS_PORT"] = str(self.ops_port(name))
        return env

    def spawn(self, name: str) -> subprocess.Popen[bytes]:
        log = open(Path(self.settings.data_dir) / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        child = subprocess.Popen(
            [sys.executable, "-m", "coffre.cli", name],
            env=self.env(name),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.children[name] = child
        return child

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        child = self.children[name]
        if child.poll() is None:
            child.send_signal(sig)
        child.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM every service (they drain and commit), then stop the broker."""
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[str, int | None] = {}
        for name, child in self.children.items():
            try:
                codes[name] = child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                codes[name] = child.wait()
        if self.broker:
            self.broker.stop()
        return codes
