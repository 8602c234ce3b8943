"""The witness's HTTPS API (services/witness/README.md).

``POST /add-checkpoint`` (C2SP tlog-witness, with coffre's signed XML checkpoint: see
coffre.domain.witness), ``GET /checkpoints``, ``GET /checkpoints/{IDOper}/{IDCoffre}``,
``GET /key``, ``GET /healthz`` and ``GET /metrics``. The operator's signature is checked in a
worker thread; the judgement and the update of the state run in a worker thread under the
state's one lock, and the new newest is committed before the cosignature is answered.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from coffre.adapters.tls import TlsSite
from coffre.domain.signing import TrustStore
from coffre.domain.witness import (
    MAX_REQUEST_BYTES,
    AddCheckpoint,
    OperatorTrust,
    ProtocolError,
    Refusal,
    WitnessKey,
    open_checkpoint,
    parse_origin,
)

from .state import Cosigned, WitnessState

log = logging.getLogger("coffre.witness")
access = logging.getLogger("coffre.witness.access")

__all__ = ["HANDSHAKE_TIMEOUT", "KEEPALIVE_TIMEOUT", "Metrics", "Witness", "build_app", "start", "stop"]

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a client has to finish its TLS handshake (and a close)."""
REQUEST_HEAD_TIMEOUT = 10.0
"""Seconds a client has, after the handshake or its previous answer, to send a request line and
headers (aiohttp has no such deadline: a client sending nothing would hold its connection)."""
BODY_TIMEOUT = 30.0
"""Seconds a client has to send an add-checkpoint body."""
KEEPALIVE_TIMEOUT = 30.0
"""Seconds an idle keep-alive connection is kept (aiohttp's own timer, a backstop)."""
ACCESS_LOG_FORMAT = '%a "%r" %s %b %Tf "%{User-Agent}i"'


class Metrics:
    """The witness's own registry (served on its ``/metrics``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cosigned = Counter(
            "coffre_witness_cosigned_total", "Checkpoints the witness cosigned", registry=self.registry
        )
        self.refused = Counter(
            "coffre_witness_refused_total",
            "add-checkpoint requests the witness refused, by kind (fork, truncation and rewrite: "
            "the operator signed two histories; alert on any)",
            ["kind"],
            registry=self.registry,
        )
        for kind in Refusal.STATUS:
            self.refused.labels(kind)
        self.coffres = Gauge(
            "coffre_witness_coffres",
            "Coffres the witness holds a cosigned checkpoint of",
            registry=self.registry,
        )


@dataclass
class Witness:
    """What the API serves with."""

    key: WitnessKey
    trust: TrustStore | OperatorTrust
    state: WitnessState
    metrics: Metrics
    clock: Callable[[], float] = time.time


_WITNESS = web.AppKey("witness", Witness)


def _text(status: int, text: str, content_type: str = "text/plain") -> web.Response:
    return web.Response(status=status, text=text, content_type=content_type, charset="utf-8")


def _refused(witness: Witness, refusal: Refusal) -> web.Response:
    witness.metrics.refused.labels(refusal.kind).inc()
    if refusal.kind == "conflict":
        return web.Response(
            status=409, body=f"{refusal.size or 0}\n".encode(), headers={"Content-Type": "text/x.tlog.size"}
        )
    # A truncation, a fork or a rewrite is a history the operator signed and then replaced: evidence.
    level = logging.ERROR if refusal.kind in ("truncation", "fork", "rewrite") else logging.WARNING
    log.log(level, "witness: refused (%s): %s", refusal.kind, refusal.message)
    message = " ".join(refusal.message.split())  # one line
    return _text(refusal.status, f"{refusal.kind}: {message}\n")


async def _add_checkpoint(request: web.Request) -> web.Response:
    witness = request.app[_WITNESS]
    if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
        return _refused(witness, Refusal("malformed", f"a request of more than {MAX_REQUEST_BYTES} bytes"))
    try:
        body = await asyncio.wait_for(request.read(), BODY_TIMEOUT)
    except TimeoutError:
        return _refused(witness, Refusal("malformed", f"the body did not arrive within {BODY_TIMEOUT:g}s"))
    except web.HTTPRequestEntityTooLarge:
        return _refused(witness, Refusal("malformed", f"a request of more than {MAX_REQUEST_BYTES} bytes"))
    try:
        add = AddCheckpoint.decode(body)
    except ProtocolError as exc:
        return _refused(witness, Refusal("malformed", str(exc)))
    try:
        checkpoint = await asyncio.to_thread(open_checkpoint, add.checkpoint, witness.trust)
        line = await asyncio.to_thread(witness.state.add, checkpoint, add, witness.key, int(witness.clock()))
    except Refusal as refusal:
        return _refused(witness, refusal)
    witness.metrics.cosigned.inc()
    log.info(
        "witness: cosigned coffre/%s/%s at %d events",
        checkpoint.id_oper,
        checkpoint.id_coffre,
        checkpoint.tree_size,
    )
    return _text(200, line.decode("utf-8"))


def _entry(cosigned: Cosigned) -> dict[str, object]:
    latest = cosigned.latest
    return {
        "origin": latest.origin,
        "id_oper": latest.id_oper,
        "id_coffre": latest.id_coffre,
        "tree_size": latest.size,
        "root": latest.root.hex(),
        "note": cosigned.note.decode("utf-8"),
        "updated": cosigned.updated,
    }


def _json(data: object, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(data, ensure_ascii=False) + "\n", content_type="application/json"
    )


async def _checkpoints(request: web.Request) -> web.Response:
    witness = request.app[_WITNESS]
    every = await asyncio.to_thread(witness.state.all)
    witness.metrics.coffres.set(len(every))
    return _json(
        {
            "witness": witness.key.name,
            "vkey": witness.key.public.vkey,
            "coffres": [_entry(cosigned) for cosigned in every],
        }
    )


async def _checkpoint(request: web.Request) -> web.Response:
    witness = request.app[_WITNESS]
    coffre = parse_origin(f"coffre/{request.match_info['oper']}/{request.match_info['coffre']}")
    if coffre is None:
        return _json(
            {"error": "not_found", "message": "not a coffre: IDOper is 4 digits, IDCoffre a number"}, 404
        )
    cosigned = await asyncio.to_thread(witness.state.latest, *coffre)
    if cosigned is None:
        return _json(
            {"error": "not_found", "message": "the witness has cosigned nothing of this coffre"}, 404
        )
    return _json(_entry(cosigned))


async def _key(request: web.Request) -> web.Response:
    return _text(200, request.app[_WITNESS].key.public.vkey + "\n")


async def _healthz(request: web.Request) -> web.Response:
    try:
        await asyncio.to_thread(request.app[_WITNESS].state.probe)
    except Exception as exc:  # the state cannot be read: not healthy, say why
        return _text(503, f"state unreadable: {exc}\n")
    return _text(200, "ok\n")


async def _metrics(request: web.Request) -> web.Response:
    witness = request.app[_WITNESS]
    return web.Response(
        body=generate_latest(witness.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )


@web.middleware
async def _answering(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    if isinstance(request.protocol, _Connection):
        request.protocol.answering()
    return await handler(request)


def build_app(witness: Witness) -> web.Application:
    app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=[_answering])
    app[_WITNESS] = witness
    app.router.add_post("/add-checkpoint", _add_checkpoint)
    app.router.add_get("/checkpoints", _checkpoints, allow_head=False)
    app.router.add_get("/checkpoints/{oper}/{coffre}", _checkpoint, allow_head=False)
    app.router.add_get("/key", _key, allow_head=False)
    app.router.add_get("/healthz", _healthz, allow_head=False)
    app.router.add_get("/metrics", _metrics, allow_head=False)
    return app


class _Connection(web.RequestHandler):
    """aiohttp's handler of one connection, with a deadline for every request head
    (:data:`REQUEST_HEAD_TIMEOUT` after the handshake or the previous answer); none while a
    request is answered. Past it the connection is closed without an answer."""

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.answering()
        super().connection_lost(exc)

    def answering(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _arm(self) -> None:
        self.answering()
        self._deadline = asyncio.get_running_loop().call_later(REQUEST_HEAD_TIMEOUT, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.transport is not None:
            log.info("witness: closing a connection with no complete request after %gs", REQUEST_HEAD_TIMEOUT)
            self.force_close()

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._arm()


async def start(witness: Witness, host: str, port: int, context: ssl.SSLContext) -> web.AppRunner:
    """Serve ``witness`` over HTTPS on ``host:port``; stop it with :func:`stop`."""
    runner = web.AppRunner(
        build_app(witness),
        handle_signals=False,
        access_log=access,
        access_log_format=ACCESS_LOG_FORMAT,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
        shutdown_timeout=5.0,
    )
    await runner.setup()
    try:
        assert runner.server is not None  # set up
        connection = functools.partial(
            _Connection,
            runner.server,
            loop=asyncio.get_running_loop(),
            keepalive_timeout=KEEPALIVE_TIMEOUT,
            access_log=access,
            access_log_format=ACCESS_LOG_FORMAT,
        )
        site = TlsSite(runner, host, port, context, connection, HANDSHAKE_TIMEOUT)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    witness.metrics.coffres.set(len(await asyncio.to_thread(witness.state.all)))
    return runner


async def stop(runner: web.AppRunner) -> None:
    await runner.cleanup()
