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
from coffre.domain.errors import Problem, ReasonCode, Rejected
from coffre.domain.limits import MAX_HEADER_BYTES
from coffre.domain.messages import (
    CORRELATION_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SOURCE_ID,
    SUPERVISED,
    Headers,
    Rejection,
    record_size,
)
from coffre.domain.normalize import internal_error, normalize
from coffre.logs import log_context

from .store import STORE_FAILURES, IngestStore, Transaction

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

    def count(self, output: Output) -> None:
        if output.coffre is not None:
            self.accepted += 1
            self.event_types[output.event_type or ""] += 1
        else:
            self.rejected += 1
            self.reasons.update(set(output.reasons))

    def merge(self, other: StepCounts) -> None:
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.event_types.update(other.event_types)
        self.reasons.update(other.reasons)

    def publish_metrics(self) -> None:
        """Count the batch on /metrics, once its transaction is durable."""
        metrics.EVENTS_IN.inc(self.accepted + self.rejected + self.redelivered)
        metrics.INPUTS_REDELIVERED.inc(self.redelivered)
        for event_type, n in self.event_types.items():
            metrics.EVENTS_NORMALIZED.labels(event_type).inc(n)
        for reason, n in self.reasons.items():
            metrics.EVENTS_REJECTED.labels(reason).inc(n)
        metrics.INTERNAL_ERRORS.labels("ingest").inc(self.reasons[ReasonCode.INTERNAL_ERROR])


@dataclass(frozen=True, slots=True)
class Output:
    """What one input becomes, ready for the outbox: an event (with the coffre whose IDEvt it
    takes) or a rejection."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers
    event_type: str | None = None
    coffre: tuple[str, int] | None = None
    reasons: tuple[str, ...] = ()


class IngestStep:
    """Normalize inputs and commit their outputs to the store's outbox, one durable transaction a
    batch. Whatever one input holds, it ends as one bounded output: the event, or a rejection
    with reason codes. A defect met on one input (any exception normalize, encoding or the store
    raises for its values) refuses that input with INTERNAL_ERROR and never stops the others;
    only a failure of the store itself (disk) propagates."""

    def __init__(
        self,
        store: IngestStore,
        topics: Topics,
        limits: Limits,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ):
        self.store = store
        self.topics = topics
        self.limits = limits
        self.max_message_bytes = max_message_bytes

    def run(self, batch: list[InputMessage]) -> StepCounts:
        """Handle ``batch``; inputs already handled (redeliveries) are skipped."""
        counts = StepCounts()
        ids = [m.input_id for m in batch]
        seen = self.store.handled(ids)
        fresh = []
        for message, input_id in zip(batch, ids, strict=True):
            if input_id not in seen:  # handled before, or earlier in this very batch
                seen.add(input_id)
                fresh.append((message, input_id))
        counts.redelivered = len(batch) - len(fresh)
        try:
            self._commit(fresh, counts)
        except STORE_FAILURES:
            raise
        except Exception:
            # a value the store cannot hold: find the input it belongs to, one transaction each
            log.exception("ingest batch refused by the store; committing its inputs one by one")
            for item in fresh:
                try:
                    self._commit([item], counts)
                except STORE_FAILURES:
                    raise
                except Exception as exc:
                    self._commit([item], counts, failure=exc)
        counts.publish_metrics()
        return counts

    def _commit(
        self, items: list[tuple[InputMessage, bytes]], counts: StepCounts, failure: Exception | None = None
    ) -> None:
        tally = StepCounts()
        with self.store.transaction() as tx:
            for message, input_id in items:
                output = (
                    self._internal_error(message, failure)
                    if failure is not None
                    else self._output(message, tx)
                )
                if output.coffre is not None:
                    tx.next_id_evt(*output.coffre)
                tx.add(
                    input_id,
                    message.partition,
                    message.offset,
                    output.topic,
                    output.key,
                    output.value,
                    output.headers,
                )
                tally.count(output)
        counts.merge(tally)  # only what is durable counts

    def _output(self, message: InputMessage, tx: Transaction) -> Output:
        try:
            return self._event(message, tx)
        except Rejected as refusal:
            return self._rejection(message, refusal)
        except Exception as exc:
            return self._internal_error(message, exc)

    def _event(self, message: InputMessage, tx: Transaction) -> Output:
        """The normalized event under the IDEvt it will take (not taken yet), or Rejected."""
        passthrough = _passthrough(message.headers)
        event = normalize(message.value or b"", id_evt=UNASSIGNED, limits=self.limits)
        id_evt = tx.peek_id_evt(event.id_oper, event.id_coffre)
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
        key = str(event.id_coffre).encode()
        size = record_size(key, value, headers)
        if size > self.max_message_bytes:
            raise Rejected(
                [
                    Problem(
                        ReasonCode.LIMIT_EXCEEDED,
                        "/",
                        f"the normalized event would be a record of {size} bytes; coffre publishes at "
                        f"most {self.max_message_bytes} (COFFRE_MAX_MESSAGE_BYTES)",
                    )
                ],
                event.xml_tag,
            )
        return Output(
            self.topics.normalized,
            key,
            value,
            headers,
            event_type=event.xml_tag,
            coffre=(event.id_oper, event.id_coffre),
        )

    def _rejection(self, message: InputMessage, refusal: Rejected) -> Output:
        rejection = Rejection.of(
            refusal,
            message.value or b"",
            message.headers,
            self.topics.events_in,
            message.partition,
            message.offset,
            max_bytes=self.max_message_bytes,
        )
        with log_context(correlation_id=rejection.correlation_id):
            log.info(
                "rejected input %s[%d]@%d: %s",
                self.topics.events_in,
                message.partition,
                message.offset,
                ", ".join(refusal.codes),
            )
        key = (rejection.correlation_id or "").encode() or None
        headers = [
            (name, value.encode())
            for name, value in ((CORRELATION_ID, rejection.correlation_id), (SOURCE_ID, rejection.source_id))
            if value is not None
        ]
        return Output(self.topics.rejected, key, rejection.encode(), headers, reasons=tuple(refusal.codes))

    def _internal_error(self, message: InputMessage, exc: BaseException) -> Output:
        log.error(
            "input %s[%d]@%d met a defect of coffre's; refused with INTERNAL_ERROR",
            self.topics.events_in,
            message.partition,
            message.offset,
            exc_info=exc,
        )
        return self._rejection(message, internal_error(exc))


def _passthrough(headers: Headers) -> Headers:
    """The headers an event carries on (correlation-id, source-id), or Rejected when one is over
    coffre's bound: it travels to the receipt and the acquittal."""
    kept = []
    for name, value in headers:
        if name not in (CORRELATION_ID, SOURCE_ID) or value is None:
            continue
        if len(value) > MAX_HEADER_BYTES:
            raise Rejected(
                [
                    Problem(
                        ReasonCode.LIMIT_EXCEEDED,
                        f"headers/{name}",
                        f"{len(value)} bytes: coffre takes at most {MAX_HEADER_BYTES}",
                    )
                ]
            )
        kept.append((name, value))
    return kept


def ingest_batch(
    batch: list[InputMessage],
    store: IngestStore,
    topics: Topics,
    limits: Limits,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> StepCounts:
    """Normalize ``batch`` and commit its outputs (events with their IDEvt, or rejections) to the
    store's outbox in one durable transaction (see :class:`IngestStep`)."""
    return IngestStep(store, topics, limits, max_message_bytes).run(batch)
