"""The regulator's read-only HTTPS API, ``coffre regulator-api`` (docs/regulator-api.md).

GET only, JSON with stable field names, lots and checkpoints byte for byte with the evidence
beside each checkpoint (time-stamp tokens, cosignatures), inclusion and consistency proofs, the
certificates and a daily export bundle with a signed manifest. Every request passes the
authentication middleware (mutual TLS and/or bearer token, per ``COFFRE_API_AUTH``) and is
written to the access log, fsynced, *before* its response is sent: if the log cannot be
written, nothing is served. Storage calls run in threads; a storage failure is a 503 with a
message, never a traceback.

Each connection is an :class:`_ApiConnection`: aiohttp's handler plus deadlines for slow
clients (:class:`ConnectionTimeouts`) and, for a request aiohttp cannot parse, the API's own
JSON error, logged like any other.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import hmac
import logging
import os
import re
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod
from aiohttp.payload import Payload
from cryptography import x509

from coffre import metrics
from coffre.adapters.access_log import AccessLog
from coffre.adapters.storage import ArchiveStorage
from coffre.adapters.tls import TlsSite, api_tls_material, server_ssl_context
from coffre.config import Settings
from coffre.domain.signing import Signer, TrustStore

from . import console
from .archive_index import (
    MAX_LOT_NUMBER,
    MAX_PAGE_SIZE,
    ArchiveIndex,
    ArchiveQueryError,
    InvalidRequest,
    StoredDocument,
    parse_coffre,
    parse_day,
    parse_evidence_label,
    parse_number,
    parse_oper,
)
from .event_index import EventSearch, IndexQueryError, IndexThread

log = logging.getLogger("coffre.api")

__all__ = [
    "DEFAULT_TIMEOUTS",
    "AuthMode",
    "AuthResult",
    "Authenticator",
    "ConnectionTimeouts",
    "SubjectAllowList",
    "TokenFile",
    "build_app",
    "start_regulator_api",
    "stop_regulator_api",
]

AuthMode = Literal["mtls", "token", "either", "both"]
MIN_TOKEN_LENGTH = 16
_TOKEN_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_TOKEN = re.compile(r"[\x21-\x7e]+")


# -- credentials ---------------------------------------------------------------------------------


class TokenFile:
    """Bearer tokens from a file of ``name:token`` lines (``#`` comments and blank lines ignored).

    Read at start (a missing or unreadable file is an error then) and again whenever its
    modification time, size or inode changes, so a rotated Kubernetes Secret applies without a
    restart. If it later becomes unreadable, no token is accepted until it is readable again.
    Tokens shorter than 16 characters are refused (logged, by line number only).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._tokens: list[tuple[str, bytes]] = []
        try:
            self._load(self.path.stat())
        except OSError as exc:
            raise ValueError(f"regulator API: cannot read the tokens file {self.path}: {exc}") from None

    def _load(self, stat: os.stat_result) -> None:
        text = self.path.read_text(encoding="utf-8")
        tokens = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, token = line.partition(":")
            name, token = name.strip(), token.strip()
            if not sep or not _TOKEN_NAME.fullmatch(name) or not _TOKEN.fullmatch(token):
                log.warning("regulator API: %s line %d is not 'name:token': ignored", self.path, number)
                continue
            if len(token) < MIN_TOKEN_LENGTH:
                log.warning(
                    "regulator API: %s line %d: token %r shorter than %d characters: ignored",
                    self.path,
                    number,
                    name,
                    MIN_TOKEN_LENGTH,
                )
                continue
            tokens.append((name, hashlib.sha256(token.encode("ascii")).digest()))
        self._tokens = tokens
        self._stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        log.info("regulator API: %d bearer token(s) loaded from %s", len(tokens), self.path)

    def _refresh(self) -> None:
        try:
            stat = self.path.stat()
            if (stat.st_mtime_ns, stat.st_size, stat.st_ino) != self._stamp:
                self._load(stat)
        except (OSError, UnicodeDecodeError) as exc:
            if self._stamp is not None:
                log.error("regulator API: tokens file %s unreadable (%s): no token accepted", self.path, exc)
            self._tokens, self._stamp = [], None

    def names(self) -> list[str]:
        self._refresh()
        return [name for name, _ in self._tokens]

    def check(self, presented: str) -> str | None:
        """The name of the token ``presented``, or None; compared in constant time against all."""
        self._refresh()
        given = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
        found = None
        for name, expected in self._tokens:
            if hmac.compare_digest(given, expected) and found is None:
                found = name
        return found


def _attribute_value(value: str | bytes) -> str:
    return value if isinstance(value, str) else "#" + value.hex()


def _name_key(name: x509.Name) -> tuple[tuple[str, str], ...]:
    """A subject as its multiset of (type OID, value): the order of attributes does not matter."""
    return tuple(sorted((a.oid.dotted_string, _attribute_value(a.value)) for a in name))


_SHORT_NAMES = {"CN", "L", "ST", "O", "OU", "C", "STREET", "DC", "UID"}


def _lenient_rfc4514(text: str) -> str:
    """``cn=Regulator, o=ANJ`` → ``CN=Regulator,O=ANJ``: spaces around separators and lower-case
    attribute names (as written by hand or by ``openssl x509 -subject``) are accepted."""
    parts: list[tuple[str, str]] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if c in ",+":
            parts.append(("".join(current), c))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append(("".join(current), ""))
    out = []
    for attribute, separator in parts:
        kind, equals, value = attribute.partition("=")
        if not equals:
            raise ValueError(f"{attribute.strip()!r} is not TYPE=value")
        kind = kind.strip()
        if kind.upper() in _SHORT_NAMES:
            kind = kind.upper()
        value = value.lstrip()
        stripped = value.rstrip()
        if (len(value) - len(stripped)) and stripped.endswith("\\"):
            stripped += " "  # an escaped trailing space stays
        out.append(f"{kind}={stripped}{separator}")
    return "".join(out)


class SubjectAllowList:
    """Client certificate subjects allowed, written as RFC 4514 strings (``CN=x,O=y``).

    A certificate matches when its subject's ``rfc4514_string()`` is one of them, or when it
    holds exactly the same attributes (type and value, case-sensitive) in any order.
    """

    def __init__(self, subjects: Iterable[str]) -> None:
        self.subjects = tuple(subjects)
        self._strings = set(self.subjects)
        self._keys = set()
        for subject in self.subjects:
            try:
                name = x509.Name.from_rfc4514_string(_lenient_rfc4514(subject))
            except ValueError as exc:
                raise ValueError(
                    f"regulator API: allowed subject {subject!r} is not an RFC 4514 name ({exc})"
                ) from None
            self._strings.add(name.rfc4514_string())
            self._keys.add(_name_key(name))

    def allows(self, subject: x509.Name) -> bool:
        return subject.rfc4514_string() in self._strings or _name_key(subject) in self._keys


@dataclass(frozen=True, slots=True)
class AuthResult:
    status: int
    """200 (allowed), 401 or 403."""
    subject: str | None
    token: str | None
    method: str | None
    """mtls, token or mtls+token when allowed."""
    message: str = ""
    invalid_token: bool = False


class Authenticator:
    """What a request must present, per ``mode`` (``COFFRE_API_AUTH``):

    * ``mtls``: a verified client certificate whose subject is allowed;
    * ``token``: a valid ``Authorization: Bearer`` token;
    * ``either``: one of them; ``both``: both.

    A certificate reaching here was verified by the TLS handshake against the client CA. A
    verified certificate whose subject is not allowed is a 403; nothing valid is a 401.
    """

    def __init__(self, mode: AuthMode, subjects: SubjectAllowList, tokens: TokenFile | None) -> None:
        if mode not in ("mtls", "token", "either", "both"):
            raise ValueError(f"unknown authentication mode {mode!r}")
        self.mode = mode
        self.subjects = subjects
        self.tokens = tokens

    def authenticate(self, peer_certificate: bytes | None, authorization: str | None) -> AuthResult:
        subject: str | None = None
        cert_ok = cert_refused = False
        if peer_certificate and self.mode != "token":
            name = x509.load_der_x509_certificate(peer_certificate).subject
            subject = name.rfc4514_string()
            cert_ok = self.subjects.allows(name)
            cert_refused = not cert_ok
        token_name: str | None = None
        token_given = authorization is not None and self.mode != "mtls"
        if token_given and authorization is not None:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and value.strip() and self.tokens is not None:
                token_name = self.tokens.check(value.strip())
        token_ok = token_name is not None
        bad_token = token_given and not token_ok
        method = "+".join(m for m, ok in (("mtls", cert_ok), ("token", token_ok)) if ok) or None
        allowed = {
            "mtls": cert_ok,
            "token": token_ok,
            "either": cert_ok or token_ok,
            "both": cert_ok and token_ok,
        }[self.mode]
        if allowed:
            return AuthResult(200, subject, token_name, method)
        if cert_refused:
            return AuthResult(
                403, subject, token_name, method, f"the client certificate {subject!r} is not allowed"
            )
        if bad_token:
            message = "the bearer token is not valid"
        elif self.mode == "both" and cert_ok:
            message = "a bearer token is required as well as the client certificate"
        elif self.mode == "both" and token_ok:
            message = "a client certificate is required as well as the bearer token"
        else:
            message = {
                "mtls": "authentication required: a client certificate",
                "token": "authentication required: Authorization: Bearer <token>",
                "either": "authentication required: a client certificate or Authorization: Bearer <token>",
                "both": "authentication required: a client certificate and Authorization: Bearer <token>",
            }[self.mode]
        return AuthResult(401, subject, token_name, method, message, invalid_token=bad_token)


# -- the application ---------------------------------------------------------------------------------

_INDEX = web.AppKey("index", ArchiveIndex)
_SPOOL = web.AppKey("spool", Path)
_QUERY_BOUND = 20
_LOTS_QUERY = ("from", "to", "page_size", "page_token")
_EXPORT_QUERY = ("oper", "format")
_CHECKPOINTS_QUERY = ("from_lot", "page_size", "page_token")
_CONSISTENCY_QUERY = ("old", "new")
_API_QUERY_PARAMETERS = frozenset(_LOTS_QUERY + _EXPORT_QUERY + _CHECKPOINTS_QUERY + _CONSISTENCY_QUERY)
"""The API's own query parameters: none holds a secret, so the access log keeps their values
(``page_token`` is a listing cursor, not a credential)."""
_ALLOWED_METHOD = "GET"
"""The only method served; every other one gets 405 with ``Allow: GET``."""


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    response = web.json_response({"error": code, "message": message}, status=status, headers=headers)
    response.headers["Cache-Control"] = "no-store"
    return response


def _json(data: object) -> web.Response:
    response = web.json_response(data)
    response.headers["Cache-Control"] = "no-store"
    return response


def _query(request: web.Request, allowed: Iterable[str]) -> dict[str, str]:
    """The query parameters, each at most once, none unknown."""
    allowed = set(allowed)
    values: dict[str, str] = {}
    for name, value in request.query.items():
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidRequest(f"unknown query parameter {name[:_QUERY_BOUND]!r} (known: {known})")
        if name in values:
            raise InvalidRequest(f"query parameter {name!r} given twice")
        values[name] = value
    return values


def _coffre(request: web.Request) -> tuple[str, int]:
    return parse_oper(request.match_info["oper"]), parse_coffre(request.match_info["coffre"])


async def _in_thread(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(call, *args, **kwargs)


def _digest_headers(sha256: bytes) -> dict[str, str]:
    b64 = base64.b64encode(sha256).decode("ascii")
    return {"ETag": f'"{sha256.hex()}"', "Repr-Digest": f"sha-256=:{b64}:", "Digest": f"sha-256={b64}"}


def _not_modified(request: web.Request, sha256: bytes, headers: dict[str, str]) -> web.Response | None:
    tags = {t.strip() for t in request.headers.get("If-None-Match", "").split(",")}
    if f'"{sha256.hex()}"' in tags or "*" in tags:
        return web.Response(status=304, headers=headers)
    return None


async def _coffres(request: web.Request) -> web.Response:
    _query(request, ())
    coffres = await _in_thread(request.app[_INDEX].coffres)
    return _json({"coffres": [c.to_dict() for c in coffres]})


async def _lots(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    query = _query(request, _LOTS_QUERY)
    first = parse_day(query["from"], "'from'") if "from" in query else None
    last = parse_day(query["to"], "'to'") if "to" in query else None
    page_size = parse_number(query.get("page_size", "100"), "page_size", MAX_PAGE_SIZE)
    page = await _in_thread(
        request.app[_INDEX].lots,
        oper,
        coffre,
        first,
        last,
        page_size=page_size,
        page_token=query.get("page_token"),
    )
    lots = [lot.to_dict() for lot in page.lots]
    return _json(
        {
            "id_oper": oper,
            "id_coffre": coffre,
            "lots": lots,
            "next_page_token": page.next_page_token,
        }
    )


def _document(
    request: web.Request,
    document: StoredDocument,
    cache_control: str,
    content_type: str = "application/xml",
    charset: str | None = None,
) -> web.Response:
    """A stored file byte for byte, with its digest headers (or 304 when the client has it)."""
    headers = _digest_headers(document.sha256) | {
        "Cache-Control": cache_control,
        "Content-Disposition": f'attachment; filename="{document.name}"',
        "X-Coffre-Path": document.key,
    }
    return _not_modified(request, document.sha256, headers) or web.Response(
        body=document.data, content_type=content_type, charset=charset, headers=headers
    )


_IMMUTABLE = "private, max-age=31536000, immutable"
"""Lots, checkpoints and their evidence files are written once and never replaced."""


async def _lot(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    number = parse_number(request.match_info["number"], "the lot number", MAX_LOT_NUMBER)
    _query(request, ())
    document = await _in_thread(request.app[_INDEX].lot, oper, coffre, number)
    return _document(request, document, _IMMUTABLE)


async def _checkpoint(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    _query(request, ())
    document = await _in_thread(request.app[_INDEX].checkpoint, oper, coffre)
    return _document(request, document, "no-cache")  # the latest one changes at each seal


async def _checkpoints(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    query = _query(request, _CHECKPOINTS_QUERY)
    from_lot = parse_number(query.get("from_lot", "1"), "from_lot", MAX_LOT_NUMBER)
    page_size = parse_number(query.get("page_size", "100"), "page_size", MAX_PAGE_SIZE)
    page = await _in_thread(
        request.app[_INDEX].checkpoints,
        oper,
        coffre,
        from_lot,
        page_size=page_size,
        page_token=query.get("page_token"),
    )
    return _json(
        {
            "id_oper": oper,
            "id_coffre": coffre,
            "checkpoints": [checkpoint.to_dict() for checkpoint in page.checkpoints],
            "next_page_token": page.next_page_token,
        }
    )


def _checkpoint_number(request: web.Request) -> int:
    return parse_number(request.match_info["number"], "the checkpoint's lot number", MAX_LOT_NUMBER)


async def _checkpoint_at(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    number = _checkpoint_number(request)
    _query(request, ())
    document = await _in_thread(request.app[_INDEX].checkpoint_at, oper, coffre, number)
    return _document(request, document, _IMMUTABLE)


TIMESTAMP_CONTENT_TYPE = "application/pkcs7-mime"
"""A ``.tsr`` file is a bare RFC 3161 TimeStampToken: a CMS ContentInfo holding SignedData
(RFC 5652), not a TimeStampResp (``application/timestamp-reply`` has a status before it)."""
COSIGNATURE_CONTENT_TYPE = "text/plain"
"""A ``.cosig`` file is a C2SP signed note, UTF-8 text."""


async def _timestamp(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    number = _checkpoint_number(request)
    name = parse_evidence_label(request.match_info["name"], "the TSA's name")
    _query(request, ())
    document = await _in_thread(request.app[_INDEX].evidence, oper, coffre, number, "tsa", name)
    return _document(request, document, _IMMUTABLE, TIMESTAMP_CONTENT_TYPE)


async def _cosignature(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    number = _checkpoint_number(request)
    name = parse_evidence_label(request.match_info["name"], "the witness's name")
    _query(request, ())
    document = await _in_thread(request.app[_INDEX].evidence, oper, coffre, number, "witness", name)
    return _document(request, document, _IMMUTABLE, COSIGNATURE_CONTENT_TYPE, "utf-8")


async def _consistency(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    query = _query(request, _CONSISTENCY_QUERY)
    if "old" not in query:
        raise InvalidRequest("old is required: the older tree size, from 1")
    old = parse_number(query["old"], "old")
    new = parse_number(query["new"], "new") if "new" in query else None
    proof = await _in_thread(request.app[_INDEX].consistency_proof, oper, coffre, old, new)
    return _json(proof)


async def _proof(request: web.Request) -> web.Response:
    oper, coffre = _coffre(request)
    id_evt = parse_number(request.match_info["id_evt"], "IDEvt")
    _query(request, ())
    proof = await _in_thread(request.app[_INDEX].inclusion_proof, oper, coffre, id_evt)
    return _json(proof)


async def _certificates(request: web.Request) -> web.Response:
    _query(request, ())
    return _json({"certificates": request.app[_INDEX].certificates()})


async def _export(request: web.Request) -> web.Response:
    day = parse_day(request.match_info["day"], "the day")
    query = _query(request, _EXPORT_QUERY)
    oper = parse_oper(query["oper"]) if "oper" in query else None
    kind = query.get("format", "tar")
    if kind not in ("tar", "tar.gz"):
        raise InvalidRequest(f"format must be tar or tar.gz, not {kind[:_QUERY_BOUND]!r}")
    spool_dir = request.app[_SPOOL]
    spool_dir.mkdir(parents=True, exist_ok=True)
    # On disk, not in memory: a day of an operator's lots may be large. The bundle is complete
    # before a byte is sent, so a 200 always carries the whole bundle and its manifest.
    spool = tempfile.TemporaryFile(dir=spool_dir, prefix="export-")  # noqa: SIM115 - aiohttp closes it once sent
    try:
        await _in_thread(request.app[_INDEX].export_day, day, oper, spool, gzip=kind == "tar.gz")
        await _in_thread(spool.seek, 0)
    except BaseException:
        spool.close()
        raise
    name = f"coffre-export-{day.isoformat()}{'-' + oper if oper else ''}.{kind}"
    response = web.Response(
        body=spool,
        content_type="application/gzip" if kind == "tar.gz" else "application/x-tar",
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )
    return response


def _peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    try:
        return ssl_object.getpeercert(binary_form=True)
    except ValueError:  # the handshake is not complete
        return None


def _body_size(response: web.StreamResponse) -> int | None:
    if isinstance(response, web.Response):
        body = response.body
        if body is None:
            return 0
        if isinstance(body, bytes | bytearray):
            return len(body)
        if isinstance(body, Payload):
            return body.size
    return response.content_length


_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    414: "uri_too_long",
    431: "headers_too_large",
}

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_RAW_BYTES = re.compile(r":\s*(?:b['\"]|bytearray\()")
"""Where aiohttp's parser errors start quoting the raw request, which a message never repeats."""


def _method_not_allowed(method: str | None) -> tuple[tuple[str, str], web.Response]:
    """The one answer to every method but GET (aiohttp's router would answer CONNECT with 404):
    405 with ``Allow``, and the connection closed after it (a refused PUT's body is not read,
    and a CONNECT would leave the parser expecting a tunnel)."""
    shown = method[:_QUERY_BOUND] if method else "this method"
    error = ("method_not_allowed", f"{shown} is not allowed: {_ALLOWED_METHOD} only")
    response = _error(405, *error, headers={"Allow": _ALLOWED_METHOD})
    response.force_close()
    return error, response


def _record(request: web.BaseRequest, request_id: str, *, parsed: bool = True) -> dict[str, Any]:
    """A request's access record, before its answer; for a request that could not be parsed
    (``parsed=False``), method, path, query and user agent are unknown."""
    # From the request target as received (a CONNECT's URL is parsed as an authority: no query).
    path, _, query = request.raw_path.partition("?")
    return {
        "time": datetime.now(UTC),
        "request_id": request_id,
        "remote": request.remote,
        "method": request.method if parsed else None,
        "path": path if parsed else None,
        "query": (query or None) if parsed else None,
        "user_agent": request.headers.get("User-Agent") if parsed else None,
    }


async def _logged(
    access_log: AccessLog,
    record: dict[str, Any],
    response: web.StreamResponse,
    error: tuple[str, str] | None,
    started: float,
) -> web.StreamResponse:
    """``response`` once its access record is on disk, or a 503 without data if it cannot be."""
    record.update(
        status=response.status,
        bytes=_body_size(response),
        duration_ms=round((time.monotonic() - started) * 1000, 3),
        outcome=error[0] if error else "ok",
        error=error[1] if error else None,
    )
    try:
        await access_log.write(record)
    except Exception:
        log.exception(
            "regulator API: the access log cannot be written; request %s refused", record["request_id"]
        )
        body = getattr(response, "body", None)
        if isinstance(body, Payload):
            with contextlib.suppress(Exception):
                await body.close()
        response = _error(
            503, "access_log_unavailable", "the access log cannot be written: nothing is served"
        )
    response.headers["X-Request-Id"] = record["request_id"]
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    metrics.API_REQUESTS.labels(str(response.status)).inc()
    metrics.API_REQUEST_SECONDS.observe(record["duration_ms"] / 1000)
    return response


async def _console_answer(
    request: web.Request, handler: _Handler, result: AuthResult
) -> tuple[web.StreamResponse, tuple[str, str] | None]:
    """A console request (services/regulator/console.py): pages for errors, the login page for a
    browser without credentials, the console's headers on every answer."""
    error: tuple[str, str] | None = None
    response: web.StreamResponse
    path = request.path
    if path not in console.PUBLIC_PATHS and result.status == 401:
        error = ("unauthorized", result.message)
        response = console.redirect(f"{console.PREFIX}/login")
    elif result.status == 403:
        error = ("forbidden", result.message)
        response = console.error_page(request, 403, result.message)
    elif request.method != "GET" and not (request.method == "POST" and path in console.POST_PATHS):
        error = ("method_not_allowed", f"{request.method} is not served here")
        response = console.error_page(request, 405, error[1])
        response.headers["Allow"] = "GET"
    elif request.method == "POST" and request.headers.get("Origin") not in (None, f"https://{request.host}"):
        error = ("forbidden", "a form posted from another site")
        response = console.error_page(request, 403, error[1])
    else:
        try:
            response = await handler(request)
        except console.PageError as exc:
            error = (
                "invalid_request" if exc.status == 400 else _HTTP_CODES.get(exc.status, "error"),
                str(exc),
            )
            response = console.error_page(request, exc.status, exc.message)
        except IndexQueryError as exc:
            error = ("invalid_request", str(exc))
            response = console.error_page(request, 400, str(exc))
        except ArchiveQueryError as exc:
            error = (exc.code, exc.message)
            response = console.error_page(request, exc.status, exc.message)
        except web.HTTPException as exc:
            error = (_HTTP_CODES.get(exc.status, "error"), exc.reason)
            response = console.error_page(request, exc.status, exc.reason)
    console.secure_headers(response)
    return response, error


def _middleware(
    auth: Authenticator, access_log: AccessLog
) -> Callable[[web.Request, _Handler], Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler: _Handler) -> web.StreamResponse:
        started = time.monotonic()
        if isinstance(request.protocol, _ApiConnection):
            request.protocol.request_started()
        record = _record(request, uuid.uuid4().hex)
        response: web.StreamResponse
        error: tuple[str, str] | None = None
        try:
            authorization = request.headers.get("Authorization")
            in_console = console.console_app_ready(request.app) and (
                request.path == console.PREFIX or request.path.startswith(console.PREFIX + "/")
            )
            session = console.session_token(request) if in_console and authorization is None else None
            if session is not None:
                authorization = f"Bearer {session}"
            result = auth.authenticate(_peer_certificate(request), authorization)
            record.update(subject=result.subject, token=result.token, auth=result.method)
            if in_console:
                if session is not None and result.method:
                    record["auth"] = f"{result.method} (console session)"
                response, error = await _console_answer(request, handler, result)
                if console.LOGIN in request:
                    outcome, name = request[console.LOGIN]
                    if outcome == "accepted":
                        record.update(token=name, auth="token (console login)")
                    else:
                        error = ("login_refused", "the token given on the login page is not accepted")
            elif result.status == 401:
                challenge = 'Bearer realm="coffre"' + (
                    ', error="invalid_token"' if result.invalid_token else ""
                )
                error = ("unauthorized", result.message)
                response = _error(401, *error, headers={"WWW-Authenticate": challenge})
            elif result.status == 403:
                error = ("forbidden", result.message)
                response = _error(403, *error)
            elif request.method != _ALLOWED_METHOD:
                error, response = _method_not_allowed(request.method)
            else:
                try:
                    response = await handler(request)
                except ArchiveQueryError as exc:
                    error = (exc.code, exc.message)
                    response = _error(exc.status, *error)
                except web.HTTPException as exc:
                    error = (_HTTP_CODES.get(exc.status, "error"), exc.reason)
                    response = _error(exc.status, *error)
        except asyncio.CancelledError:
            record.update(
                status=499,
                outcome="client_closed",
                error="the client closed the connection first",
                duration_ms=round((time.monotonic() - started) * 1000, 3),
            )
            with contextlib.suppress(Exception):
                access_log.append(record)  # the task is cancelled: no await is possible any more
            raise
        except Exception:
            log.exception("regulator API: request %s failed", record["request_id"])
            error = ("internal", f"internal error (request {record['request_id']})")
            response = _error(500, *error)
        return await _logged(access_log, record, response, error, started)

    return middleware


# -- connections ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionTimeouts:
    """How long a client may take, in seconds (docs/regulator-api.md, "Slow clients").

    aiohttp's only timer is its keep-alive timeout: an hour by default, never restarted by
    incoming bytes, and, before its recent releases, not started until a first request was
    answered. asyncio's TLS handshake timeout is a minute. So a client that completes the
    handshake, then sends nothing or one byte every few seconds, would hold its connection
    (and a file descriptor) for an hour or forever; these bound every stage.
    """

    handshake: float = 10.0
    """From the TCP connection to the end of the TLS handshake (asyncio's
    ``ssl_handshake_timeout``); also bounds the TLS close (``ssl_shutdown_timeout``)."""
    request_head: float = 10.0
    """From the end of the handshake to the end of the first request's line and headers."""
    idle: float = 30.0
    """From the end of an answer to the end of the next request's line and headers (an idle
    keep-alive connection is closed then); a request body, which no endpoint reads, is drained
    for at most this long after the answer."""

    def __post_init__(self) -> None:
        for name in ("handshake", "request_head", "idle"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ConnectionTimeouts.{name} must be positive")


DEFAULT_TIMEOUTS = ConnectionTimeouts()


class _ApiConnection(web.RequestHandler):
    """aiohttp's handler of one connection, plus what aiohttp does not do for this API:

    * a deadline for every request head: :attr:`ConnectionTimeouts.request_head` after the
      handshake for the first, :attr:`ConnectionTimeouts.idle` after the previous answer for
      the next ones; none while a request is being answered. Past it, the connection is closed
      without an answer (the request was never complete, so nothing reaches the access log).
    * a request aiohttp cannot parse (a method its parser does not know, a malformed line or
      header) gets the API's JSON error, a 405 for a method, and is written to the access log
      before it is sent, like any other request, instead of aiohttp's plain-text, unlogged 400.
    """

    def __init__(
        self,
        manager: web.Server,
        *,
        auth: Authenticator,
        access_log: AccessLog,
        timeouts: ConnectionTimeouts,
        connections: _OpenConnections | None = None,
    ) -> None:
        super().__init__(
            manager,
            loop=asyncio.get_running_loop(),
            # aiohttp's own keep-alive timer, a backstop: ours fire first.
            keepalive_timeout=max(timeouts.request_head, timeouts.idle),
            lingering_time=timeouts.idle,
            access_log=None,  # aiohttp's logger; the API writes its own access log
        )
        self._auth = auth
        self._records = access_log
        self._timeouts = timeouts
        self._connections = connections
        self._deadline: asyncio.TimerHandle | None = None
        self._unlogged: tuple[web.StreamResponse, dict[str, Any], tuple[str, str], float] | None = None

    # -- deadlines --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._connections is not None:
            self._connections.opened(self)
        self._arm(self._timeouts.request_head, "the TLS handshake")

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        if self._connections is not None:
            self._connections.closed(self)

    def request_started(self) -> None:
        """A complete request head arrived: no deadline while it is being answered."""
        self._disarm()

    def _arm(self, seconds: float, since: str) -> None:
        self._disarm()
        self._deadline = asyncio.get_running_loop().call_later(seconds, self._expire, seconds, since)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, seconds: float, since: str) -> None:
        self._deadline = None
        if self.transport is None:
            return
        log.info(
            "regulator API: closing the connection from %s: no complete request %g s after %s",
            self.transport.get_extra_info("peername"),
            seconds,
            since,
        )
        self.force_close()

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        """Send the answer (a parse error's once its access record is written), then wait for
        the next request head."""
        if self._unlogged is not None and self._unlogged[0] is resp:
            _, record, error, started = self._unlogged
            self._unlogged = None
            resp = await _logged(self._records, record, resp, error, started)
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._arm(self._timeouts.idle, "the previous answer")

    # -- requests aiohttp cannot parse --

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # an answer has begun: aiohttp's own handling
            return super().handle_error(request, status, exc, message)
        self.request_started()  # being answered: no deadline while its record is written
        started = time.monotonic()
        record = _record(request, uuid.uuid4().hex, parsed=False)
        result = self._auth.authenticate(_peer_certificate(request), None)  # no header was read
        record.update(subject=result.subject, token=None, auth=result.method)
        response: web.Response
        if isinstance(exc, BadHttpMethod):
            error, response = _method_not_allowed(None)
        else:
            # The parser's first line, before it quotes the raw request (the next lines do too).
            first_line = next(iter((message or str(exc or "")).strip().splitlines()), "")
            reason = _RAW_BYTES.split(first_line, maxsplit=1)[0][:120]
            error = (
                _HTTP_CODES.get(status, "bad_request"),
                f"the request cannot be parsed: {reason or 'malformed request'}",
            )
            response = _error(status, *error)
            response.force_close()
        log.debug("regulator API: unparsable request from %s: %s", request.remote, error[1])
        self._unlogged = (response, record, error, started)  # written in finish_response
        return response


class _OpenConnections:
    """The API's open connections. aiohttp's stop waits for the answers in flight to be written,
    not for the bytes still in a transport's buffers (the end of a download) to be sent: the
    process waits for the connections to close before it exits, or those bytes are lost."""

    def __init__(self, flush_timeout: float) -> None:
        self.flush_timeout = flush_timeout
        self._open: set[_ApiConnection] = set()
        self._none = asyncio.Event()
        self._none.set()

    def opened(self, connection: _ApiConnection) -> None:
        self._open.add(connection)
        self._none.clear()

    def closed(self, connection: _ApiConnection) -> None:
        self._open.discard(connection)
        if not self._open:
            self._none.set()

    async def wait_closed(self) -> int:
        """Wait (at most ``flush_timeout``) for every connection to close; how many did not."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._none.wait(), self.flush_timeout)
        return len(self._open)


_CONNECTIONS = web.AppKey("connections", _OpenConnections)


def build_app(
    index: ArchiveIndex,
    auth: Authenticator,
    access_log: AccessLog,
    *,
    spool_dir: Path | None = None,
    flush_timeout: float = 1.0,
    console_parts: tuple[console.Console, Callable[[str], str | None]] | None = None,
) -> web.Application:
    """The API's application: routes, authentication and access log. ``spool_dir`` holds export
    bundles while they are built (default: the system's temporary folder); on stop, connections
    get ``flush_timeout`` seconds to deliver what was written to them."""
    app = web.Application(middlewares=[_middleware(auth, access_log)], client_max_size=64 << 10)
    app[_INDEX] = index
    app[_SPOOL] = Path(spool_dir) if spool_dir is not None else Path(tempfile.gettempdir())
    app[_CONNECTIONS] = _OpenConnections(flush_timeout)
    coffre = "/v1/coffres/{oper}/{coffre}"
    for path, handler in (
        ("/v1/coffres", _coffres),
        (f"{coffre}/lots", _lots),
        (coffre + "/lots/{number}", _lot),
        (f"{coffre}/checkpoint", _checkpoint),
        (f"{coffre}/checkpoints", _checkpoints),
        (coffre + "/checkpoints/{number}", _checkpoint_at),
        (coffre + "/checkpoints/{number}/timestamps/{name}", _timestamp),
        (coffre + "/checkpoints/{number}/cosignatures/{name}", _cosignature),
        (f"{coffre}/consistency", _consistency),
        (coffre + "/events/{id_evt}/proof", _proof),
        ("/v1/certificates", _certificates),
        ("/v1/exports/{day}", _export),
    ):
        app.router.add_get(path, handler, allow_head=False)

    if console_parts is not None:
        console.add_console(app, *console_parts)

    async def cleanup(_: web.Application) -> None:
        if console_parts is not None and console_parts[0].thread is not None:
            await asyncio.to_thread(console_parts[0].thread.stop)
        index.close()
        access_log.close()

    app.on_cleanup.append(cleanup)
    return app


def _console_parts(
    settings: Settings,
    storage: ArchiveStorage,
    index: ArchiveIndex,
    tokens: TokenFile | None,
    certificates: bool,
) -> tuple[console.Console, Callable[[str], str | None]]:
    """The console and its index thread (started here: it indexes while the API starts)."""
    path = settings.console_index_path
    try:
        thread = IndexThread(path, storage, index.trust, interval=settings.console_index_interval_seconds)
    except (OSError, ValueError) as exc:
        raise ValueError(f"COFFRE_CONSOLE_INDEX: {exc}") from None
    thread.start()
    modes = tuple(m for m, on in (("token", tokens is not None), ("certificate", certificates)) if on)
    parts = console.Console(EventSearch(path), index, storage, thread, console.Sessions(), modes)
    return parts, (tokens.check if tokens is not None else lambda _: None)


async def start_regulator_api(
    settings: Settings,
    storage: ArchiveStorage,
    trust: TrustStore,
    signer: Signer,
    *,
    timeouts: ConnectionTimeouts | None = None,
) -> web.AppRunner | None:
    """Serve the API over HTTPS on ``api_host:api_port``; None when ``api_port`` is 0.

    ``timeouts`` bound slow clients (default: the ``COFFRE_API_*_TIMEOUT_SECONDS`` settings). Stop it with
    :func:`stop_regulator_api` (or ``await runner.cleanup()``). Raises ValueError for unusable
    TLS material, subjects or tokens file.
    """
    if settings.api_port == 0:
        return None
    timeouts = timeouts or ConnectionTimeouts(
        settings.api_handshake_timeout_seconds,
        settings.api_request_head_timeout_seconds,
        settings.api_idle_timeout_seconds,
    )
    mode: AuthMode = settings.api_auth
    material = api_tls_material(settings)
    wants_cert = mode in ("mtls", "either", "both")
    wants_token = mode in ("token", "either", "both")
    if mode in ("mtls", "both") and material.client_ca is None:
        raise ValueError(f"COFFRE_API_AUTH={mode} needs COFFRE_API_CLIENT_CA")
    tokens = TokenFile(material.tokens_file) if wants_token and material.tokens_file is not None else None
    if mode in ("token", "both") and tokens is None:
        raise ValueError(f"COFFRE_API_AUTH={mode} needs COFFRE_API_TOKENS_FILE")
    if mode == "either" and material.client_ca is None and tokens is None:
        raise ValueError("COFFRE_API_AUTH=either needs COFFRE_API_CLIENT_CA or COFFRE_API_TOKENS_FILE")
    subjects = SubjectAllowList(material.allowed_subjects if wants_cert else ())
    if wants_cert and material.client_ca is not None and not subjects.subjects:
        log.warning("regulator API: no COFFRE_API_ALLOWED_SUBJECTS: every client certificate is refused")
    context = server_ssl_context(
        material.server_cert, material.server_key, material.client_ca if wants_cert else None
    )
    index = ArchiveIndex(storage, trust, signer, max_range_days=settings.api_max_range_days)
    try:
        settings.access_log_root.mkdir(parents=True, exist_ok=True, mode=0o750)
    except OSError as exc:
        raise ValueError(
            f"regulator API: cannot create the access log folder {settings.access_log_root}: {exc}"
        ) from None
    access_log = AccessLog(
        settings.access_log_root, public_parameters=_API_QUERY_PARAMETERS | console.QUERY_PARAMETERS
    )
    auth = Authenticator(mode, subjects, tokens)
    console_parts = _console_parts(settings, storage, index, tokens, wants_cert) if settings.console else None
    # On stop, answers being written get 70 % of COFFRE_SHUTDOWN_TIMEOUT_SECONDS to finish (a slow
    # export download included), then 15 % for their last bytes to leave; the rest is for closing.
    app = build_app(
        index,
        auth,
        access_log,
        spool_dir=Path(settings.data_dir) / "api-spool",
        flush_timeout=0.15 * settings.shutdown_timeout_seconds,
        console_parts=console_parts,
    )
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=0.7 * settings.shutdown_timeout_seconds,
    )
    await runner.setup()
    assert runner.server is not None  # set up
    connection = functools.partial(
        _ApiConnection,
        runner.server,
        auth=auth,
        access_log=access_log,
        timeouts=timeouts,
        connections=app[_CONNECTIONS],
    )
    try:
        site = TlsSite(runner, settings.api_host, settings.api_port, context, connection, timeouts.handshake)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    if material.development is not None:
        log.warning(
            "regulator API: DEVELOPMENT TLS material from %s (set COFFRE_API_TLS_CERT/KEY in production)",
            material.development.directory,
        )
    log.info(
        "regulator API: https://%s:%d (auth %s), access log in %s",
        settings.api_host,
        settings.api_port,
        mode,
        settings.access_log_root,
    )
    return runner


async def stop_regulator_api(runner: web.AppRunner | None) -> None:
    """Stop accepting connections, let the answers in flight be written (at most 70 % of
    ``COFFRE_SHUTDOWN_TIMEOUT_SECONDS``) and delivered (15 % more), then close the index and the
    access log."""
    if runner is None:
        return
    connections = runner.app[_CONNECTIONS]
    await runner.cleanup()
    left = await connections.wait_closed()
    if left:
        log.warning(
            "regulator API: %d connection(s) not closed %gs after the stop: their last bytes may be lost",
            left,
            connections.flush_timeout,
        )
