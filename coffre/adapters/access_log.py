"""The regulator API's access log: every request, allowed or refused, one durable JSON line.

Files are daily (UTC), ``regulator-access-YYYY-MM-DD.jsonl``, opened with ``O_APPEND`` and
fsynced before :meth:`AccessLog.append` returns, so a line the API has logged survives a
crash. The API logs a request before it sends the response body: if the log cannot be
written, the data is not served (fail closed). Lines are never rewritten or removed by coffre.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from .files import fsync_directory, write_all

__all__ = ["FIELDS", "AccessLog", "access_log_name"]

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


def access_log_name(day: date) -> str:
    return f"regulator-access-{day:%Y-%m-%d}.jsonl"


def _bounded(value: Any) -> Any:
    """Values a client controls (path, query, user agent) are cut so a line stays small."""
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[:_MAX_TEXT] + "…"
    return value


class AccessLog:
    """Appends access records under ``root``; safe for concurrent callers (threads or tasks)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
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
        line: dict[str, Any] = {name: _bounded(record.get(name)) for name in FIELDS}
        line["time"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            fd = self._open(moment.date())
            write_all(fd, data)
            os.fsync(fd)

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
