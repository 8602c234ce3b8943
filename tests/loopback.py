"""Stand-ins on loopback HTTP that can go down and come back, for the evidence tests and the
pipeline bench's evidence phase: :class:`Loopback`, a server whose port closes and opens again,
and :class:`DomainWitness`, the add-checkpoint protocol with the domain's own judgement and its
state in memory (the real ``coffre witness`` process, its TLS and SQLite state, is tested in
tests/witness/ and end to end in tests/pipeline/test_evidence_e2e.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from coffre.domain.signing import TrustStore
from coffre.domain.witness import (
    AddCheckpoint,
    Latest,
    ProtocolError,
    Refusal,
    WitnessKey,
    judge,
    note_body,
    open_checkpoint,
    origin,
)

Answer = tuple[int, str, bytes]


class Loopback:
    """An HTTP server on 127.0.0.1 answering POSTs with ``handle(path, content type, body)`` (an
    exception is a 500, as a sick service answers); :meth:`stop` closes its port (connections
    refused), :meth:`start` opens the same port again."""

    def __init__(self, handle: Callable[[str, str, bytes], Answer]) -> None:
        self.handle = handle
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self.start()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    status, content_type, answer = outer.handle(
                        self.path, self.headers.get("Content-Type", ""), body
                    )
                except Exception as exc:
                    status, content_type, answer = 500, "text/plain", f"{exc}\n".encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class DomainWitness:
    """A witness speaking add-checkpoint with the domain's judgement. ``trust`` is the operator's
    trust store, or a function giving it at the first request (a stack makes its key at start)."""

    __test__ = False

    def __init__(self, key: WitnessKey, trust: TrustStore | Callable[[], TrustStore]) -> None:
        self.key = key
        self._trust = trust
        self.latest: dict[str, Latest] = {}
        self.history: dict[str, list[Latest]] = {}
        self.refusals: list[Refusal] = []
        self.lock = threading.Lock()

    @property
    def cosigned(self) -> int:
        return sum(len(accepted) for accepted in self.history.values())

    def handle(self, path: str, content_type: str, body: bytes) -> Answer:
        if path != "/add-checkpoint":
            return 404, "text/plain", b"not found\n"
        try:
            request = AddCheckpoint.decode(body)
        except ProtocolError as exc:
            return 400, "text/plain", f"malformed: {exc}\n".encode()
        with self.lock:
            if not isinstance(self._trust, TrustStore):
                self._trust = self._trust()
            try:
                checkpoint = open_checkpoint(request.checkpoint, self._trust)
                name = origin(checkpoint.id_oper, checkpoint.id_coffre)
                accepted = judge(self.latest.get(name), checkpoint, request)
            except Refusal as refusal:
                self.refusals.append(refusal)
                if refusal.kind == "conflict":
                    return 409, "text/x.tlog.size", f"{refusal.size}\n".encode()
                return refusal.status, "text/plain", f"{refusal.kind}: {refusal.message}\n".encode()
            self.latest[name] = accepted
            self.history.setdefault(name, []).append(accepted)
            return 200, "text/plain", self.key.cosign(note_body(checkpoint), int(time.time()))
