"""Structured logs: one JSON object per line, with the event in hand (IDCoffre, IDEvt,
correlation-id) taken from context variables, so a log line found by an SRE leads to the
record in the archive and to the operator's request."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import json
import logging
import sys
from collections.abc import Iterator

_CONTEXT: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "coffre_log", default=None
)

CONTEXT_FIELDS = ("service", "id_oper", "id_coffre", "id_evt", "correlation_id")
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


@contextlib.contextmanager
def log_context(**values: object) -> Iterator[None]:
    """Add ``values`` (e.g. ``id_coffre=3, id_evt=42``) to every log line written inside."""
    current = _CONTEXT.get() or {}
    token = _CONTEXT.set({**current, **{k: v for k, v in values.items() if v is not None}})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def bind(**values: object) -> None:
    """Add ``values`` to the log context for the rest of this task (e.g. the service's name)."""
    _CONTEXT.set({**(_CONTEXT.get() or {}), **values})


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", <context>, <extra=...>, "exception"}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_CONTEXT.get() or {})
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = _CONTEXT.get()
        if context:
            line += " [" + " ".join(f"{k}={v}" for k, v in context.items()) + "]"
        return line


def setup_logging(level: str, fmt: str = "json", service: str | None = None) -> None:
    """Route every logger (faust's and aiokafka's too) to stderr in ``fmt``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    if service:
        bind(service=service)
