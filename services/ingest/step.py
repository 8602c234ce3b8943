"""The ingest step proper: normalize a batch and assign IDEvt, with no Kafka in sight
(unit-testable with an in-memory store)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from hashlib import sha256

from coffre import metrics
from coffre.config import Topics
from coffre.domain.codec import Limits, canonical_bytes
from coffre.domain.errors import Rejected
from coffre.domain.messages import (
    CORRELATION_ID,
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SOURCE_ID,
    SUPERVISED,
    Headers,
    Rejection,
    header,
)
from coffre.domain.normalize import normalize
from coffre.logs import log_context

from .store import IngestStore

log = logging.getLogger("coffre.ingest")

UNASSIGNED = 0
"""The IDEvt an event holds between normalization and assignment (never published)."""


@dataclass(frozen=True, slots=True)
class InputMessage:
    partition: int
    offset: int
    value: bytes
    headers: Headers
    timestamp: int = 0
    """The record's Kafka timestamp (ms), as the broker delivers it."""
    key: bytes | None = None

    @property
    def input_id(self) -> bytes:
        """What identifies this input among redeliveries: its position *and* its content.

        Kafka redelivers a record with the same partition, offset, timestamp, key, headers and
        value. The position alone is not enough: a broker that lost its log (an in-memory
        broker restarted, a topic recreated) hands out the same offsets again for new records,
        which must not be mistaken for redeliveries and dropped."""
        digest = sha256(b"%d:%d:%d:" % (self.partition, self.offset, self.timestamp))
        digest.update(b"k%d:" % -1 if self.key is None else b"k%d:" % len(self.key))
        digest.update(self.key or b"")
        for name, value in self.headers:
            encoded = name.encode()
            digest.update(b"h%d:%d:" % (len(encoded), -1 if value is None else len(value)))
            digest.update(encoded)
            digest.update(value or b"")
        digest.update(self.value)
        return digest.digest()


@dataclass
class StepCounts:
    accepted: int = 0
    rejected: int = 0
    redelivered: int = 0
    event_types: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)

    def publish_metrics(self) -> None:
        """Count the batch on /metrics, once its transaction is durable."""
        metrics.EVENTS_IN.inc(self.accepted + self.rejected + self.redelivered)
        metrics.INPUTS_REDELIVERED.inc(self.redelivered)
        for event_type, n in self.event_types.items():
            metrics.EVENTS_NORMALIZED.labels(event_type).inc(n)
        for reason, n in self.reasons.items():
            metrics.EVENTS_REJECTED.labels(reason).inc(n)


def ingest_batch(batch: list[InputMessage], store: IngestStore, topics: Topics, limits: Limits) -> StepCounts:
    """Normalize ``batch`` and commit its outputs (events with their IDEvt, or rejections)
    to the store's outbox in one durable transaction. Inputs already handled are skipped."""
    counts = StepCounts()
    ids = [m.input_id for m in batch]
    seen = store.handled(ids)
    with store.transaction() as tx:
        for message, input_id in zip(batch, ids, strict=True):
            if input_id in seen:
                counts.redelivered += 1
                continue
            passthrough = [
                (k, v) for k, v in message.headers if k in (CORRELATION_ID, SOURCE_ID) and v is not None
            ]
            try:
                event = normalize(message.value or b"", id_evt=UNASSIGNED, limits=limits)
            except Rejected as refusal:
                rejection = Rejection.of(
                    refusal,
                    message.value or b"",
                    message.headers,
                    topics.events_in,
                    message.partition,
                    message.offset,
                )
                key = (header(message.headers, CORRELATION_ID) or "").encode() or None
                tx.add(
                    input_id,
                    message.partition,
                    message.offset,
                    topics.rejected,
                    key,
                    rejection.encode(),
                    passthrough,
                )
                counts.rejected += 1
                counts.reasons.update(set(refusal.codes))
                with log_context(correlation_id=header(message.headers, CORRELATION_ID)):
                    log.info(
                        "rejected input %s[%d]@%d: %s",
                        topics.events_in,
                        message.partition,
                        message.offset,
                        ", ".join(refusal.codes),
                    )
                continue
            id_evt = tx.next_id_evt(event.id_oper, event.id_coffre)
            value = canonical_bytes(event.with_id_evt(id_evt))
            headers = [
                *passthrough,
                (EVENT_TYPE, event.xml_tag.encode()),
                (ID_OPER, event.id_oper.encode()),
                (ID_COFFRE, str(event.id_coffre).encode()),
                (ID_EVT, str(id_evt).encode()),
                (SUPERVISED, b"1" if event.supervised else b"0"),
                (INGESTED_AT, repr(time.time()).encode()),
            ]
            tx.add(
                input_id,
                message.partition,
                message.offset,
                topics.normalized,
                str(event.id_coffre).encode(),
                value,
                headers,
            )
            counts.accepted += 1
            counts.event_types[event.xml_tag] += 1
    counts.publish_metrics()
    return counts
