"""The messages the services exchange on Kafka besides events: headers, rejections,
receipts and acquittals. One definition, used by every producer and every reader."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from .authenticity import Purpose, RecordKeys
from .errors import Problem, Rejected
from .limits import MAX_HEADER_BYTES, MAX_PROBLEM_TEXT, clip
from .routing import coffre_key

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
FINDINGS = "coffre-findings"
"""The findings of the event's own checks (``coffre.domain.audit.single``), compact JSON
``{"findings":[{"code":…,"message":…},…],"omitted":n}``: they travel to the receipt and the
acquittal. Absent when there are none. Bounded by :data:`MAX_FINDINGS_HEADER_BYTES`."""
MAX_FINDINGS_HEADER_BYTES = 4096
"""The findings header at most (and never more than what keeps the record within
``COFFRE_MAX_MESSAGE_BYTES``): the first findings that fit, each message cut to MAX_PROBLEM_TEXT,
and how many were left out."""

Headers = list[tuple[str, bytes]]

DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
"""The largest record coffre publishes, as a producer counts it (key, value, headers and framing):
``COFFRE_MAX_MESSAGE_BYTES``. faust's producer refuses more by default, Kafka's topics a little more."""
RECORD_FRAMING = 128
"""Bytes a record's framing may add to its key, value and headers, counted generously: a batch
header (61) and a record's own fields (at most 21), as aiokafka's upper estimate counts them."""
HEADROOM = 4096
"""What a rejection's value leaves of the record for its key and headers (the correlation and
source ids, each at most MAX_HEADER_BYTES characters)."""


def record_size(key: bytes | None, value: bytes, headers: Headers) -> int:
    """An upper bound of the size a producer counts for one record (aiokafka's estimate is smaller)."""
    size = RECORD_FRAMING + len(key or b"") + len(value)
    for name, data in headers:
        size += len(name.encode()) + len(data or b"") + 10  # two varint lengths, five bytes each at most
    return size


def header(headers: Headers | None, name: str) -> str | None:
    for key, value in headers or ():
        if key == name:
            return value.decode("utf-8", "replace") if value is not None else None
    return None


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One encoder for every message (``json.dumps`` with these options builds a new one per call)."""


def _dumps(value: dict[str, Any]) -> bytes:
    return _JSON.encode(value).encode()


# findings ------------------------------------------------------------------------------


def encode_findings(
    findings: list[dict[str, Any]], max_bytes: int = MAX_FINDINGS_HEADER_BYTES
) -> bytes | None:
    """The findings header's value: as many of ``findings`` (``Finding.as_dict()``) as fit in
    ``max_bytes``, in order, and how many did not; None when there are none, or when not even
    the count of those left out fits."""
    if not findings:
        return None
    kept = [{**f, "message": clip(str(f.get("message", "")), MAX_PROBLEM_TEXT)} for f in findings]
    omitted = 0
    while True:
        doc: dict[str, Any] = {"findings": kept}
        if omitted:
            doc["omitted"] = omitted
        data = _dumps(doc)
        if len(data) <= max_bytes:
            return data
        if not kept:
            return None
        # drop enough from the end at once to fit, then adjust one by one
        keep = max(0, min(len(kept) - 1, len(kept) * max_bytes // len(data)))
        omitted += len(kept) - keep
        kept = kept[:keep]


def decode_findings(raw: bytes | str | None) -> tuple[list[dict[str, Any]] | None, int | None]:
    """The findings and the count of those left out, from the header's value; (None, None) when
    absent or unreadable (the findings are evidence beside the event, never a reason to lose it)."""
    if not raw:
        return None, None
    try:
        doc = json.loads(raw)
        findings = [f for f in doc["findings"] if isinstance(f, dict) and "code" in f]
        omitted = int(doc.get("omitted") or 0)
    except (ValueError, KeyError, TypeError):
        return None, None
    return findings, omitted or None


# records: what one Kafka record carries, and who wrote it --------------------------------

_T = TypeVar("_T")
KafkaRecord = tuple[bytes | None, bytes, Headers]
"""(key, value, headers) of one record."""


class InvalidMessage(ValueError):
    """A record that cannot be what its topic holds (unreadable, or its headers contradict its bytes)."""


class ForeignRecord(InvalidMessage):
    """A record coffre did not write: its ``coffre-auth`` tag is missing or does not verify
    (:mod:`coffre.domain.authenticity`). Refused and counted, never obeyed."""


class UnknownRecordKey(ForeignRecord):
    """A record whose ``coffre-auth`` tag names a key id this service does not have: most likely written
    by another service of the install with other record keys (a configuration error to fix, every
    service needs the same ``COFFRE_RECORD_KEYS_FILE``), possibly by a stranger naming a made-up id.
    Passed over as any foreign record, but reported as what it is."""

    def __init__(self, what: str, key_id: str) -> None:
        self.key_id = key_id
        super().__init__(
            f"a {what} signed with key id {key_id!r}, which this service does not have: every service of "
            "one install needs the same COFFRE_RECORD_KEYS_FILE"
        )


UNKNOWN_KEY_ID = "unknown_key_id"
"""The ``reason`` of ``coffre_foreign_records_total`` for an :class:`UnknownRecordKey`."""


def foreign_reason(exc: BaseException, default: str) -> str:
    """The ``reason`` label a reader counts a record it passed over under: :data:`UNKNOWN_KEY_ID` for a
    record signed with a key the service lacks, ``default`` (its topic, or its own reason) otherwise."""
    return UNKNOWN_KEY_ID if isinstance(exc, UnknownRecordKey) else default


def authenticate(
    keys: RecordKeys, purpose: bytes, key: bytes | None, value: bytes | None, headers: Headers, what: str
) -> None:
    """Nothing when ``keys`` verify the record's tag for ``purpose``; else :class:`UnknownRecordKey` when
    the tag names a key id ``keys`` lack, :class:`ForeignRecord` otherwise (``what`` names the record)."""
    if keys.authentic(purpose, key, value, headers):
        return
    unknown = keys.unknown_key_id(headers)
    if unknown is not None:
        raise UnknownRecordKey(what, unknown)
    raise ForeignRecord(f"a {what} coffre did not write (no valid coffre-auth tag)")


def _read(
    keys: RecordKeys,
    purpose: bytes,
    record: tuple[bytes | None, bytes, Headers],
    what: str,
    decode: Callable[[bytes], _T],
) -> _T:
    """``decode(value)`` of a record coffre wrote for ``purpose``: :class:`ForeignRecord` when it did not,
    :class:`InvalidMessage` when the value does not decode."""
    key, value, headers = record
    authenticate(keys, purpose, key, value, headers, what)
    try:
        return decode(value)
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidMessage(f"an unreadable {what}: {exc}") from exc


# the normalized event --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NormalizedEvent:
    """An event as ingest numbered it, on ``coffre.events.normalized``: its canonical bytes, keyed
    by IDCoffre, the coffre's fields repeated as headers (so the vault need not parse the XML)."""

    id_oper: str
    id_coffre: int
    id_evt: int
    event_type: str
    value: bytes
    correlation_id: str | None
    supervised: bool
    ingested_at: float | None
    findings: list[dict[str, Any]] | None = None
    """The event's own findings, from ingest's ``coffre-findings`` header: copied into the receipt."""
    findings_omitted: int | None = None

    @property
    def key(self) -> bytes:
        return coffre_key(self.id_coffre)

    @staticmethod
    def headers_of(
        passthrough: Headers,
        event_type: str,
        id_oper: str,
        id_coffre: int,
        id_evt: int,
        supervised: bool,
        ingested_at: float,
    ) -> Headers:
        """The headers ingest writes (``coffre-findings`` may follow, then the tag): the platform's
        correlation and source ids as they came, then the coffre's fields."""
        return [
            *passthrough,
            (EVENT_TYPE, event_type.encode()),
            (ID_OPER, id_oper.encode()),
            (ID_COFFRE, str(id_coffre).encode()),
            (ID_EVT, str(id_evt).encode()),
            (SUPERVISED, b"1" if supervised else b"0"),
            (INGESTED_AT, repr(ingested_at).encode()),
        ]

    @staticmethod
    def seal(keys: RecordKeys, key: bytes, value: bytes, headers: Headers) -> Headers:
        return keys.seal(Purpose.NORMALIZED, key, value, headers)

    @classmethod
    def from_record(
        cls, key: bytes | None, value: bytes, headers: Headers, keys: RecordKeys
    ) -> NormalizedEvent:
        """The event of a record of the normalized topic, or :class:`ForeignRecord` when coffre did not
        write it, or :class:`InvalidMessage` when it is not what ingest writes."""
        authenticate(keys, Purpose.NORMALIZED, key, value, headers, "normalized event")
        event = cls.parse(value, headers)
        if key != event.key:
            raise InvalidMessage(f"a normalized event of coffre {event.id_coffre} under the key {key!r}")
        return event

    @classmethod
    def parse(cls, value: bytes, headers: Headers) -> NormalizedEvent:
        """The event of a normalized record's value and headers, without authenticating it."""
        named = dict(reversed(headers))  # the first of a repeated header wins, as in header()
        try:
            id_oper = (named.get(ID_OPER) or b"").decode()
            id_coffre = int(named.get(ID_COFFRE) or b"")
            id_evt = int(named.get(ID_EVT) or b"")
            event_type = (named.get(EVENT_TYPE) or b"").decode()
        except ValueError as exc:  # UnicodeDecodeError included
            raise InvalidMessage(f"normalized message without coffre headers: {headers!r}") from exc
        # the headers must say what the bytes say: the journal stores the bytes
        expected = (
            value.startswith(f"<{event_type}".encode())
            and f"<IDOper>{id_oper}</IDOper>".encode() in value
            and f"<IDCoffre>{id_coffre}</IDCoffre>".encode() in value
            and f"<IDEvt>{id_evt}</IDEvt>".encode() in value
        )
        if not expected:
            raise InvalidMessage(
                f"headers {id_oper}/{id_coffre}/{id_evt} {event_type} do not match the event bytes"
            )
        correlation_id = named.get(CORRELATION_ID)
        findings, omitted = decode_findings(named.get(FINDINGS))
        return cls(
            id_oper,
            id_coffre,
            id_evt,
            event_type,
            value,
            correlation_id.decode("utf-8", "replace") if correlation_id is not None else None,
            named.get(SUPERVISED) == b"1",
            _seconds(named.get(INGESTED_AT)),
            findings,
            omitted,
        )


def _seconds(raw: bytes | None) -> float | None:
    """The ingest time header; None when absent or unreadable (it only dates the event)."""
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


# rejections ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused input, on ``coffre.events.rejected``: nothing is dropped silently.

    Bounded whatever the input (docs/input-contract.md): the problems are capped (``problems_omitted``
    counts the others) and the original bytes travel whole when the record allows, else cut to
    fit, with the whole input's size and SHA-256; the whole input stays on the input topic at
    ``input_partition``/``input_offset`` for as long as that topic keeps it.
    """

    correlation_id: str | None
    source_id: str | None
    event_type: str | None
    problems: list[dict[str, str]]
    original: bytes
    input_topic: str
    input_partition: int
    input_offset: int
    rejected_at: str = field(default_factory=now_iso)
    problems_omitted: int = 0
    original_size: int | None = None
    """The input's size in bytes; ``original`` holds its first bytes when it is smaller."""
    original_sha256: str | None = None

    @classmethod
    def of(
        cls,
        refusal: Rejected,
        original: bytes,
        headers: Headers | None,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> Rejection:
        whole = cls(
            _bounded_header(headers, CORRELATION_ID),
            _bounded_header(headers, SOURCE_ID),
            refusal.event_type,
            [p.as_dict() for p in refusal.problems],
            original,
            topic,
            partition,
            offset,
            problems_omitted=refusal.omitted,
            original_size=len(original),
            original_sha256=hashlib.sha256(original).hexdigest(),
        )
        return whole.within(max_bytes - HEADROOM)

    def within(self, max_value_bytes: int) -> Rejection:
        """This rejection with as much of the original (and, past that, of the problems) as lets
        its encoded value fit in ``max_value_bytes``."""
        bare = replace(self, original=b"")
        while len(bare.encode()) > max_value_bytes and len(bare.problems) > 1:
            kept = len(bare.problems) // 2
            bare = replace(
                bare,
                problems=bare.problems[:kept],
                problems_omitted=bare.problems_omitted + len(bare.problems) - kept,
            )
        room = max_value_bytes - len(bare.encode())
        kept_bytes = max(0, room) // 4 * 3  # base64: 4 characters for every 3 bytes
        return replace(bare, original=self.original[:kept_bytes])

    @property
    def truncated(self) -> bool:
        """Whether ``original`` holds only the first bytes of the input."""
        return self.original_size is not None and len(self.original) < self.original_size

    @property
    def codes(self) -> list[str]:
        return [p["code"] for p in self.problems]

    def encode(self) -> bytes:
        data = asdict(self)
        data["original"] = base64.b64encode(self.original).decode()
        return _dumps({"status": "rejected", **data, "original_truncated": self.truncated})

    @classmethod
    def decode(cls, raw: bytes) -> Rejection:
        data = json.loads(raw)
        data.pop("status", None)
        data.pop("original_truncated", None)
        data["original"] = base64.b64decode(data["original"])
        return cls(**data)

    def record(self, keys: RecordKeys) -> KafkaRecord:
        """The record on ``events.rejected``: keyed by the correlation id, which travels as a header
        too, with the source id; authenticated."""
        key = (self.correlation_id or "").encode() or None
        value = self.encode()
        headers = [
            (name, text.encode())
            for name, text in ((CORRELATION_ID, self.correlation_id), (SOURCE_ID, self.source_id))
            if text is not None
        ]
        return key, value, keys.seal(Purpose.REJECTION, key, value, headers)

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes, headers: Headers, keys: RecordKeys) -> Rejection:
        """The rejection of a record of ``events.rejected``; :class:`ForeignRecord` when coffre did not write it."""
        return _read(keys, Purpose.REJECTION, (key, value, headers), "rejection", cls.decode)


def _correlation_header(correlation_id: str | None) -> Headers:
    """The correlation id of the event a receipt or an acquittal answers, as a header (none without one)."""
    return [(CORRELATION_ID, correlation_id.encode())] if correlation_id else []


def _bounded_header(headers: Headers | None, name: str) -> str | None:
    value = header(headers, name)
    return None if value is None else clip(value, MAX_HEADER_BYTES)


# audit records ----------------------------------------------------------------------------


class AuditRecord:
    """The auditor's findings about one recorded event, on ``coffre.audit``, keyed by IDCoffre: a JSON
    object (``id_oper``, ``id_coffre``, ``id_evt``, ``event_type``, ``chain_hash``, ``findings``,
    ``findings_omitted``, ``tech``, ``pool``, ``audited_at``). Held as a dict, which is how the
    auditor's table stores it while it waits for its receipt."""

    @staticmethod
    def encode(record: dict[str, Any]) -> bytes:
        return _dumps(record)

    @staticmethod
    def bounded(record: dict[str, Any], key: bytes, max_bytes: int) -> tuple[dict[str, Any], bytes]:
        """The record and its bytes, its findings cut (``findings_omitted`` counting the others) until
        the record fits in ``max_bytes`` as a producer counts it."""
        value = AuditRecord.encode(record)
        while record_size(key, value, []) > max_bytes and record["findings"]:
            findings = record["findings"]
            kept = len(findings) // 2
            record = {
                **record,
                "findings": findings[:kept],
                "findings_omitted": record["findings_omitted"] + len(findings) - kept,
            }
            value = AuditRecord.encode(record)
        return record, value

    @staticmethod
    def seal(keys: RecordKeys, key: bytes, value: bytes) -> Headers:
        return keys.seal(Purpose.AUDIT, key, value, [])

    @staticmethod
    def from_record(key: bytes | None, value: bytes, headers: Headers, keys: RecordKeys) -> dict[str, Any]:
        """The audit record of a record of ``coffre.audit``; :class:`ForeignRecord` when coffre did not write it."""
        record = _read(keys, Purpose.AUDIT, (key, value, headers), "audit record", json.loads)
        if not isinstance(record, dict):
            raise InvalidMessage("an audit record is a JSON object")
        return record


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
    """When ingest published the event (seconds since the epoch), from its ``coffre-ingested-at`` header."""
    recorded_at: str = field(default_factory=now_iso)
    """When the vault published this receipt, after the fsync (ISO 8601, UTC, milliseconds)."""
    findings: list[dict[str, Any]] | None = None
    """The findings of the event's own checks, from ingest's ``coffre-findings`` header (absent: none)."""
    findings_omitted: int | None = None
    """How many findings ingest left out of the header to keep it bounded (only when some were)."""

    def encode(self) -> bytes:
        # the fields by hand: dataclasses.asdict deep-copies, and a receipt is sent per event
        data: dict[str, Any] = {
            "id_oper": self.id_oper,
            "id_coffre": self.id_coffre,
            "id_evt": self.id_evt,
            "event_type": self.event_type,
            "chain_hash": self.chain_hash,
            "correlation_id": self.correlation_id,
            "supervised": self.supervised,
            "ingested_at": self.ingested_at,
            "recorded_at": self.recorded_at,
        }
        if self.findings:
            data["findings"] = self.findings
            if self.findings_omitted:
                data["findings_omitted"] = self.findings_omitted
        return _dumps(data)

    def recorded_after(self) -> float | None:
        """Seconds from ingest's publication of the event to this receipt (None when either time
        is unknown or unreadable): what makes a record late."""
        if self.ingested_at is None:
            return None
        try:
            recorded = datetime.fromisoformat(self.recorded_at)
        except (TypeError, ValueError):
            return None
        if recorded.tzinfo is None:
            recorded = recorded.replace(tzinfo=UTC)
        return recorded.timestamp() - self.ingested_at

    @classmethod
    def decode(cls, raw: bytes) -> Receipt:
        return cls(**json.loads(raw))

    def record(self, keys: RecordKeys) -> KafkaRecord:
        """The record on ``coffre.receipts``: keyed by IDCoffre, the correlation id as a header, authenticated."""
        key = coffre_key(self.id_coffre)
        value = self.encode()
        return key, value, keys.seal(Purpose.RECEIPT, key, value, _correlation_header(self.correlation_id))

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes, headers: Headers, keys: RecordKeys) -> Receipt:
        """The receipt of a record of ``coffre.receipts``; :class:`ForeignRecord` when coffre did not write it."""
        return _read(keys, Purpose.RECEIPT, (key, value, headers), "receipt", cls.decode)


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
    reasons_omitted: int | None = None
    """How many reasons the rejection had beyond those listed (only when some were left out)."""
    findings: list[dict[str, Any]] | None = None
    """A recorded event's findings (its own checks, as ingest ran them): evidence, the event is
    recorded all the same. Absent when there are none."""
    findings_omitted: int | None = None
    """How many findings were left out to keep the messages bounded (only when some were)."""

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
            findings=receipt.findings or None,
            findings_omitted=receipt.findings_omitted or None,
        )

    @classmethod
    def rejected(cls, rejection: Rejection) -> Acquittal:
        return cls(
            "rejected",
            rejection.correlation_id,
            rejection.event_type,
            reasons=rejection.problems,
            reasons_omitted=rejection.problems_omitted or None,
        )

    def record(self) -> KafkaRecord:
        """The record on ``coffre.acquittals``: keyed by the correlation id (none without one), which
        travels as a header too. Not tagged: platforms read it and cannot hold the key; ACLs protect
        the topic (docs/architecture.md)."""
        key = (self.correlation_id or "").encode() or None
        return key, self.encode(), _correlation_header(self.correlation_id)

    def encode(self) -> bytes:
        """JSON; ``status``, ``correlation_id`` and ``event_type`` always (null when unknown: an
        input that is not an event has no type), the other fields when they apply."""
        kept = ("status", "correlation_id", "event_type")
        return _dumps({k: v for k in _ACQUITTAL_FIELDS if (v := getattr(self, k)) is not None or k in kept})

    @classmethod
    def decode(cls, raw: bytes) -> Acquittal:
        return cls(**{"correlation_id": None, "event_type": None, **json.loads(raw)})


_ACQUITTAL_FIELDS = tuple(f.name for f in fields(Acquittal))

__all__ = [
    "Acquittal",
    "AuditRecord",
    "ForeignRecord",
    "Headers",
    "InvalidMessage",
    "KafkaRecord",
    "NormalizedEvent",
    "Problem",
    "Receipt",
    "Rejection",
    "UnknownRecordKey",
    "authenticate",
    "decode_findings",
    "encode_findings",
    "foreign_reason",
    "header",
]
