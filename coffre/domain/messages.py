"""The messages the services exchange on Kafka besides events: headers, rejections,
receipts and acquittals. One definition, used by every producer and every reader."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import Problem, Rejected

# headers -------------------------------------------------------------------------------
CORRELATION_ID = "correlation-id"
"""The platform's id of the player's request; carried from input to acquittal."""
SOURCE_ID = "source-id"
EVENT_TYPE = "coffre-event-type"
ID_OPER = "coffre-idoper"
ID_COFFRE = "coffre-idcoffre"
ID_EVT = "coffre-idevt"
SUPERVISED = "coffre-supervised"
INGESTED_AT = "coffre-ingested-at"
"""Seconds since the epoch (float, text) when ingest published the event: the start of the acquittal latency."""

Headers = list[tuple[str, bytes]]


def header(headers: Headers | None, name: str) -> str | None:
    for key, value in headers or ():
        if key == name:
            return value.decode("utf-8", "replace") if value is not None else None
    return None


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# rejections ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused input, on ``coffre.events.rejected``: nothing is dropped silently."""

    correlation_id: str | None
    source_id: str | None
    event_type: str | None
    problems: list[dict[str, str]]
    original: bytes
    input_topic: str
    input_partition: int
    input_offset: int
    rejected_at: str = field(default_factory=now_iso)

    @classmethod
    def of(
        cls,
        refusal: Rejected,
        original: bytes,
        headers: Headers | None,
        topic: str,
        partition: int,
        offset: int,
    ) -> Rejection:
        return cls(
            header(headers, CORRELATION_ID),
            header(headers, SOURCE_ID),
            refusal.event_type,
            [p.as_dict() for p in refusal.problems],
            original,
            topic,
            partition,
            offset,
        )

    @property
    def codes(self) -> list[str]:
        return [p["code"] for p in self.problems]

    def encode(self) -> bytes:
        data = asdict(self)
        data["original"] = base64.b64encode(self.original).decode()
        return _dumps({"status": "rejected", **data})

    @classmethod
    def decode(cls, raw: bytes) -> Rejection:
        data = json.loads(raw)
        data.pop("status", None)
        data["original"] = base64.b64decode(data["original"])
        return cls(**data)


# receipts and acquittals -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Receipt:
    """The vault's word that an event is durably recorded (fsynced, chained), on ``coffre.receipts``."""

    id_oper: str
    id_coffre: int
    id_evt: int
    event_type: str
    chain_hash: str  # hex
    correlation_id: str | None
    supervised: bool
    ingested_at: float | None
    recorded_at: str = field(default_factory=now_iso)

    def encode(self) -> bytes:
        return _dumps(asdict(self))

    @classmethod
    def decode(cls, raw: bytes) -> Receipt:
        return cls(**json.loads(raw))


@dataclass(frozen=True, slots=True)
class Acquittal:
    """What the platform waits for, on ``coffre.acquittals``: ``recorded`` (the vault holds
    the event) or ``rejected`` (with the reasons)."""

    status: str  # "recorded" | "rejected"
    correlation_id: str | None
    event_type: str | None
    id_oper: str | None = None
    id_coffre: int | None = None
    id_evt: int | None = None
    chain_hash: str | None = None
    recorded_at: str | None = None
    reasons: list[dict[str, str]] | None = None

    @classmethod
    def recorded(cls, receipt: Receipt) -> Acquittal:
        return cls(
            "recorded",
            receipt.correlation_id,
            receipt.event_type,
            receipt.id_oper,
            receipt.id_coffre,
            receipt.id_evt,
            receipt.chain_hash,
            receipt.recorded_at,
        )

    @classmethod
    def rejected(cls, rejection: Rejection) -> Acquittal:
        return cls("rejected", rejection.correlation_id, rejection.event_type, reasons=rejection.problems)

    def encode(self) -> bytes:
        """JSON; ``status``, ``correlation_id`` and ``event_type`` always (null when unknown: an
        input that is not an event has no type), the other fields when they apply."""
        kept = ("status", "correlation_id", "event_type")
        return _dumps({k: v for k, v in asdict(self).items() if v is not None or k in kept})

    @classmethod
    def decode(cls, raw: bytes) -> Acquittal:
        return cls(**{"correlation_id": None, "event_type": None, **json.loads(raw)})


__all__ = ["Acquittal", "Headers", "Problem", "Receipt", "Rejection", "header"]
