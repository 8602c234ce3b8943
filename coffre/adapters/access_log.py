"""The regulator API's access log: every request, allowed or refused, one durable JSON line.

Files are daily (UTC), ``regulator-access-YYYY-MM-DD.jsonl``, opened with ``O_APPEND`` and
fsynced before :meth:`AccessLog.append` returns, so a line the API has logged survives a
crash. The API logs a request before it sends the response body: if the log cannot be
written, the data is not served (fail closed). Lines are never rewritten or removed by coffre.

Secrets never reach a line: in every field, the value of a parameter whose name looks like a
credential (``token=``, ``access_token=``, ``api_key=``, ``password=``, ``signature=``,
``auth…=``, percent-encoded or not, any case) and anything that looks like a bearer
credential (``Bearer …``, ``Basic …``, a JWT) are replaced by :data:`REDACTED`; the parameter
names stay, so the line still says what was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from .files import fsync_directory, write_all

__all__ = ["FIELDS", "REDACTED", "AccessLog", "access_log_name", "redact"]

FIELDS = (
    "time",
    "request_id",
    "remote",
    "subject",
    "token",
    "auth",
    "method",
    "path",
    "query",
    "status",
    "bytes",
    "duration_ms",
    "outcome",
    "error",
    "user_agent",
)
"""The keys of every line, in this order (a value may be null)."""

_MAX_TEXT = 2048

REDACTED = "[REDACTED]"
"""What a logged secret is replaced with."""

_SECRET_NAME = re.compile(
    r"token|secret|passw|pwd|credential|signature|session|cookie|jwt|bearer|apikey|accesskey|privatekey"
    r"|^auth|(?:^|[^a-z])(?:key|sig|pass)(?:$|[^a-z])"
)
"""A parameter name (decoded, lower-cased) that looks like it names a credential."""
_NAME = re.compile(r"(?<![^\s&;?/,=])([^\s&;?/=,]+)=")
"""``name=`` in a query string or any text, the name starting after a separator (or the start:
so a long run without ``=`` is scanned once)."""
_VALUE_END = re.compile(r"[\s&;]")
_BEARER = re.compile(
    r"\b(bearer|basic|digest|negotiate|token)((?:\s|%20|\+)+)([A-Za-z0-9._~+/=%-]{8,})", re.IGNORECASE
)
"""An HTTP credential (``Authorization`` scheme and value), raw or percent-encoded."""
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")


def access_log_name(day: date) -> str:
    return f"regulator-access-{day:%Y-%m-%d}.jsonl"


def redact(text: str, public: frozenset[str] = frozenset()) -> str:
    """``text`` with every credential-looking value replaced by :data:`REDACTED`.

    ``public`` names parameters that look like credentials but are not (the API's
    ``page_token``, a listing cursor): their values are kept.
    """
    kept: list[str] = []
    position = 0
    for found in _NAME.finditer(text):
        if found.start() < position:
            continue  # inside a value already redacted
        name = unquote_plus(found[1])
        if name in public or not _SECRET_NAME.search(name.lower()):
            continue
        end = _VALUE_END.search(text, found.end())
        kept += [text[position : found.end()], REDACTED]
        position = end.start() if end else len(text)
    text = "".join(kept) + text[position:]
    text = _BEARER.sub(lambda found: f"{found[1]}{found[2]}{REDACTED}", text)
    return _JWT.sub(REDACTED, text)


def _bounded(value: Any) -> Any:
    """Values a client controls (path, query, user agent) are cut so a line stays small."""
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[:_MAX_TEXT] + "…"
    return value


class AccessLog:
    """Appends access records under ``root``; safe for concurrent callers (threads or tasks).

    ``public_parameters``: query parameters whose values are logged even though their names
    look like credentials (see :func:`redact`).
    """

    def __init__(self, root: Path, public_parameters: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.public_parameters = frozenset(public_parameters)
        self._lock = threading.Lock()
        self._fd = -1
        self._day: date | None = None

    def _open(self, day: date) -> int:
        if self._day == day and self._fd >= 0:
            return self._fd
        self.close_file()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o750)
        path = self.root / access_log_name(day)
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        if created:  # the new name must survive a crash too
            fsync_directory(self.root)
        self._fd, self._day = fd, day
        return fd

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record (keys of :data:`FIELDS`; ``time`` is set if absent) and fsync it.

        Blocking: call it from a thread in async code (:meth:`write`).
        """
        moment = record.get("time")
        if not isinstance(moment, datetime):
            moment = datetime.now(UTC)
        moment = moment.astimezone(UTC)
        line: dict[str, Any] = {name: self._clean(record.get(name)) for name in FIELDS}
        line["time"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            fd = self._open(moment.date())
            write_all(fd, data)
            os.fsync(fd)

    def _clean(self, value: Any) -> Any:
        """A field as logged: secrets redacted (before the cut, so none is cut in half), bounded."""
        return _bounded(redact(value, self.public_parameters) if isinstance(value, str) else value)

    async def write(self, record: Mapping[str, Any]) -> None:
        """:meth:`append` in a thread: returns once the line is on disk."""
        await asyncio.to_thread(self.append, record)

    def close_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._day = -1, None

    def close(self) -> None:
        with self._lock:
            self.close_file()
