"""A ``coffre witness`` in its own process over TLS, for the tests: started with a CA and a key
made for the test, stopped at the end."""

from __future__ import annotations

import os
import sqlite3
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from coffre.adapters.broker import free_port_block
from coffre.adapters.tls import development_tls
from coffre.adapters.witness_client import WitnessClient
from coffre.cli import main
from coffre.domain.witness import WitnessKey

NAME = "witness.test.example"


@dataclass
class Witness:
    base: Path
    env: dict[str, str]
    url: str
    ca: Path
    key: WitnessKey
    state: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def client(self) -> WitnessClient:
        return WitnessClient(self.url, ca=self.ca, timeout=10)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "coffre.cli", "witness"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append(self.process)
        wait_healthy(self)

    def stop(self) -> None:
        """SIGTERM every process this witness started (SIGKILL after 20 s)."""
        for process in self.started:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def refusals(self) -> list[tuple[str, int | None, bytes]]:
        with sqlite3.connect(f"file:{self.state / 'witness.sqlite3'}?mode=ro", uri=True) as db:
            return db.execute("SELECT kind, size, checkpoint FROM refusals ORDER BY id").fetchall()


def https(witness: Witness, path: str, data: bytes | None = None) -> tuple[int, str, bytes]:
    context = ssl.create_default_context(cafile=str(witness.ca))
    req = urllib.request.Request(witness.url + path, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, context=context, timeout=10) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def wait_healthy(witness: Witness, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert witness.process is not None
        assert witness.process.poll() is None, (
            f"exited {witness.process.returncode}: {witness.log.read_text()}"
        )
        try:
            if https(witness, "/healthz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"not healthy after {timeout}s: {witness.log.read_text()}")


def environment(base: Path, port: int, **variables: str) -> dict[str, str]:
    tls = development_tls(base / "tls")
    env = {name: value for name, value in os.environ.items() if not name.startswith("COFFRE_")}
    return env | {
        "COFFRE_DATA_DIR": str(base / "data"),
        "COFFRE_LOG_FORMAT": "text",
        "COFFRE_WITNESS_NAME": NAME,
        "COFFRE_WITNESS_KEY": str(base / "keys" / "witness-key.pem"),
        "COFFRE_WITNESS_STATE_DIR": str(base / "state"),
        "COFFRE_WITNESS_OPERATOR_CERTS": str(base / "operator-cert.pem"),
        "COFFRE_WITNESS_PORT": str(port),
        "COFFRE_WITNESS_TLS_CERT": str(tls.server_cert),
        "COFFRE_WITNESS_TLS_KEY": str(tls.server_key),
        **variables,
    }


@contextmanager
def running_witness(
    base: Path, operator_cert: bytes, name: str = NAME, *, bound_to: str | None = None
) -> Iterator[Witness]:
    """A witness trusting ``operator_cert`` (for IDOper ``bound_to`` only, when given), its key
    made with ``coffre witness-keygen``."""
    assert main(["witness-keygen", "--name", name, "--out", str(base / "keys")]) == 0
    key = WitnessKey.from_pem(name, (base / "keys" / "witness-key.pem").read_bytes())
    (base / "operator-cert.pem").write_bytes(operator_cert)
    port = free_port_block(1)
    env = environment(base, port, COFFRE_WITNESS_NAME=name)
    if bound_to is not None:
        env["COFFRE_WITNESS_OPERATOR_CERTS"] = f"{bound_to}={base / 'operator-cert.pem'}"
    running = Witness(
        base,
        env,
        f"https://127.0.0.1:{port}",
        development_tls(base / "tls").ca_cert,
        key,
        base / "state",
        base / "witness.log",
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()
