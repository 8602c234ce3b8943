"""The ingest step proper: IDEvt as a pure fold over one partition of ``events.in``.

Whoever folds a partition, whenever, from the same snapshot, computes the same outputs for the
same inputs: the same IDEvt for the same event, the same rejection for the same bad input. That
is what lets any number of ingest replicas share the partitions, a replica take over another's
partitions after a crash, and a zombie (a replica that comes back after its partitions moved)
publish only identical duplicates, which the vault records once. No Kafka in sight here: the
loop around it (``app.py``) reads, publishes, snapshots.

The fold moves one offset at a time: it folds the input at its position, or passes over offsets
the log is known to hold no record at (:meth:`PartitionState.pass_over`), never over offsets a fetch
happened to skip. Per input of partition p at offset o (see docs/architecture.md):

* a copy ingest forwarded (header ``coffre-forwarded-from: s:so``) that this partition already
  folded (``so`` at most the highest offset of ``s`` folded) is a duplicate: skipped, counted;
* an input that is refused becomes its rejection (no IDEvt, no routing needed);
* an event whose coffre belongs to another partition is forwarded there, once, unchanged, with
  the header above; the owner of that partition numbers it;
* any other event takes its coffre's next IDEvt.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from coffre import metrics
from coffre.config import Topics
from coffre.domain.audit.single import check_event
from coffre.domain.authenticity import AUTH, Purpose, RecordKeys, reserved_headers
from coffre.domain.catalogue.base import Event
from coffre.domain.codec import Limits, canonical_bytes
from coffre.domain.errors import Problem, ReasonCode, Rejected
from coffre.domain.limits import MAX_HEADER_BYTES
from coffre.domain.messages import (
    CORRELATION_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    FINDINGS,
    MAX_FINDINGS_HEADER_BYTES,
    RECORD_FRAMING,
    SOURCE_ID,
    Headers,
    KafkaRecord,
    NormalizedEvent,
    Rejection,
    authenticate,
    encode_findings,
    record_size,
)
from coffre.domain.normalize import internal_error, normalize
from coffre.domain.routing import FORWARDED_FROM, coffre_key, forwarded_from, partition_of
from coffre.logs import log_context

log = logging.getLogger("coffre.ingest")

UNASSIGNED = 0
"""The IDEvt an event holds between normalization and assignment (never published)."""

SNAPSHOT_VERSION = 1
SNAPSHOT_FIXED_BYTES = 256
"""A snapshot's own fields and its record's key, counted generously."""


@dataclass(frozen=True, slots=True)
class InputMessage:
    partition: int
    offset: int
    value: bytes
    headers: Headers
    timestamp: int = 0
    """The record's Kafka timestamp (ms), as the broker delivers it."""
    key: bytes | None = None


class SnapshotError(ValueError):
    """A snapshot that cannot be read, or that belongs to another partitioning."""


@dataclass
class PartitionState:
    """The fold of partition ``partition`` of ``events.in`` (of ``partitions``) up to ``position``:
    each coffre's last IDEvt, and for each partition that forwarded copies here the highest
    offset of it folded. Snapshotted to ``<prefix>ingest.state`` as JSON."""

    partition: int
    partitions: int
    position: int = 0
    """The next offset to fold: every input before it is folded and its outputs are on Kafka."""
    counters: dict[tuple[str, int], int] = field(default_factory=dict)
    forwarded: dict[int, int] = field(default_factory=dict)
    size: int = 0
    """The snapshot's size as :meth:`counter_bytes` bounds it, kept so a new coffre is checked in O(1)."""

    def pass_over(self, offset: int) -> None:
        """Move the fold to ``offset`` over offsets that hold no record (transaction markers, say).

        Only once the log is known to hold none there: a fetch that skipped them is no proof (Tansu
        hands out a record batch's offsets before it stores the batch, and a fetch made in between
        skips the batch a later fetch returns). Folding past a record that is there loses its event,
        and makes this fold differ from that of a replica that read it."""
        self.position = max(self.position, offset)

    @staticmethod
    def counter_bytes(id_oper: str, id_coffre: int) -> int:
        """The most bytes one counter takes in a snapshot (its IDEvt written with 18 digits)."""
        return len(json.dumps(id_oper)) + len(str(id_coffre)) + 18 + 4

    def budget(self, max_message_bytes: int) -> int:
        """What the counters may take of a snapshot, which is one record bounded as every other:
        the record's bound less its framing, the fixed fields and one entry per partition that
        may forward copies here."""
        return max_message_bytes - RECORD_FRAMING - SNAPSHOT_FIXED_BYTES - 32 * self.partitions

    def encode(self) -> bytes:
        return json.dumps(
            {
                "v": SNAPSHOT_VERSION,
                "partition": self.partition,
                "partitions": self.partitions,
                "position": self.position,
                "counters": [[o, c, n] for (o, c), n in sorted(self.counters.items())],
                "forwarded": [[p, o] for p, o in sorted(self.forwarded.items())],
            },
            separators=(",", ":"),
        ).encode()

    def record(self, keys: RecordKeys) -> KafkaRecord:
        """The snapshot's record on ``<prefix>ingest.state`` (partition p's on partition p), authenticated:
        a snapshot is what a take-over folds from, so a stranger's must never be taken for one."""
        key = str(self.partition).encode()
        value = self.encode()
        return key, value, keys.seal(Purpose.snapshot(self.partition), key, value, [])

    @classmethod
    def from_record(
        cls,
        key: bytes | None,
        value: bytes,
        headers: Headers,
        partition: int,
        partitions: int,
        keys: RecordKeys,
    ) -> PartitionState:
        """The snapshot of a record of partition ``partition`` of ``<prefix>ingest.state``;
        :class:`ForeignRecord` when coffre did not write it (skipped by the reader: a stranger's record
        must neither move the fold nor stop ingest), :class:`SnapshotError` when coffre did and it
        cannot be used."""
        authenticate(
            keys, Purpose.snapshot(partition), key, value, headers, f"snapshot of partition {partition}"
        )
        return cls.decode(value, partition, partitions)

    @classmethod
    def decode(cls, data: bytes, partition: int, partitions: int) -> PartitionState:
        try:
            doc = json.loads(data)
            if doc["v"] != SNAPSHOT_VERSION:
                raise SnapshotError(f"snapshot version {doc['v']}, this ingest reads {SNAPSHOT_VERSION}")
            state = cls(
                int(doc["partition"]),
                int(doc["partitions"]),
                int(doc["position"]),
                {(str(o), int(c)): int(n) for o, c, n in doc["counters"]},
                {int(p): int(o) for p, o in doc["forwarded"]},
            )
        except SnapshotError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"unreadable snapshot of partition {partition}: {exc}") from exc
        if state.partition != partition:
            raise SnapshotError(f"a snapshot of partition {state.partition} on partition {partition}")
        if state.partitions != partitions:
            raise SnapshotError(
                f"partition {partition} was folded with {state.partitions} partitions of events.in, "
                f"which has {partitions} now: a coffre's events would be split between two partitions. "
                "The partition count of events.in must never change"
            )
        state.size = sum(cls.counter_bytes(o, c) for o, c in state.counters)
        return state


@dataclass
class StepCounts:
    accepted: int = 0
    rejected: int = 0
    forwarded: int = 0
    duplicate_copies: int = 0
    redelivered: int = 0
    """Inputs folded again after a take-over whose outputs were already on Kafka (not published again)."""
    event_types: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    """The codes of the findings of the events accepted (their own checks), each as often as found."""

    def count(self, output: Output) -> None:
        if output.forward:
            self.forwarded += 1
        elif output.coffre is not None:
            self.accepted += 1
            self.event_types[output.event_type or ""] += 1
            self.findings.update(output.findings)
        else:
            self.rejected += 1
            self.reasons.update(set(output.reasons))

    def merge(self, other: StepCounts) -> None:
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.forwarded += other.forwarded
        self.duplicate_copies += other.duplicate_copies
        self.redelivered += other.redelivered
        self.event_types.update(other.event_types)
        self.reasons.update(other.reasons)
        self.findings.update(other.findings)

    def publish_metrics(self) -> None:
        """Count the batch on /metrics, once its outputs are on Kafka."""
        metrics.EVENTS_IN.inc(
            self.accepted + self.rejected + self.forwarded + self.duplicate_copies + self.redelivered
        )
        metrics.INPUTS_REDELIVERED.inc(self.redelivered)
        metrics.INPUTS_FORWARDED.inc(self.forwarded)
        metrics.FORWARDED_DUPLICATES.inc(self.duplicate_copies)
        for event_type, n in self.event_types.items():
            metrics.EVENTS_NORMALIZED.labels(event_type).inc(n)
        for reason, n in self.reasons.items():
            metrics.EVENTS_REJECTED.labels(reason).inc(n)
        for code, n in self.findings.items():
            metrics.FINDINGS.labels(code, "ingest").inc(n)
        metrics.INTERNAL_ERRORS.labels("ingest").inc(self.reasons[ReasonCode.INTERNAL_ERROR])


@dataclass(frozen=True, slots=True)
class Output:
    """What one input becomes: an event (with the coffre whose IDEvt it took), a rejection, or a
    copy forwarded to the partition of ``events.in`` that owns its coffre."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers
    offset: int = 0
    """The offset of the input it comes from (in the partition folded)."""
    event_type: str | None = None
    coffre: tuple[str, int] | None = None
    reasons: tuple[str, ...] = ()
    partition: int | None = None
    """The partition to publish to; None: the producer's (by key)."""
    forward: bool = False
    findings: tuple[str, ...] = ()
    """The codes of the event's own findings (all of them, also those the header left out)."""


@dataclass
class StepResult:
    outputs: list[Output]
    """What to publish, in order."""
    counts: StepCounts


class IngestStep:
    """Fold a batch of one partition into its state. Whatever one input holds, it ends as one
    bounded output: the event, its rejection with reason codes, or its forwarded copy. A defect
    met on one input (any exception normalizing or encoding it) refuses that input with
    INTERNAL_ERROR and never stops the others."""

    def __init__(
        self,
        topics: Topics,
        limits: Limits,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        *,
        keys: RecordKeys,
    ):
        self.topics = topics
        self.limits = limits
        self.max_message_bytes = max_message_bytes
        self.keys = keys

    def run(self, state: PartitionState, batch: list[InputMessage], published_below: int = 0) -> StepResult:
        """Fold ``batch`` (inputs of ``state.partition``, in offset order) into ``state``.

        Inputs before ``state.position`` are skipped (already folded). The fold stops at the first
        input past ``state.position``: the offsets in between were not read, and that one fetch
        skipped them does not mean the log holds nothing there. The caller reads again from
        ``state.position`` (and passes over offsets proven empty with :meth:`PartitionState.pass_over`).
        The outputs of inputs before ``published_below`` are known to be on Kafka (the previous owner
        committed that offset after publishing them): they are folded, not published again."""
        counts = StepCounts()
        outputs: list[Output] = []
        for message in batch:
            if message.offset < state.position:
                continue
            if message.offset > state.position:
                break
            output = self._fold(state, message, counts)
            state.position = message.offset + 1
            if output is None:
                continue
            if message.offset < published_below:
                counts.redelivered += 1
                continue
            counts.count(output)
            outputs.append(output)
        return StepResult(outputs, counts)

    def _fold(self, state: PartitionState, message: InputMessage, counts: StepCounts) -> Output | None:
        reserved = reserved_headers(message.headers)
        source = None
        if reserved:
            source = self._authentic_copy(state, message, reserved)
            if source is None:
                return self._rejection(message, _reserved_header(reserved, self._unknown_key(message)))
            if source[1] <= state.forwarded.get(source[0], -1):
                counts.duplicate_copies += 1
                return None
            state.forwarded[source[0]] = source[1]
        try:
            return self._event(state, message, copy=source is not None)
        except Rejected as refusal:
            return self._rejection(message, refusal)
        except Exception as exc:
            return self._internal_error(message, exc)

    def _authentic_copy(
        self, state: PartitionState, message: InputMessage, reserved: list[str]
    ) -> tuple[int, int] | None:
        """The (partition, offset) of the original when ``message`` is a copy ingest forwarded to this
        partition (its two coffre headers, its tag verified for this partition), else None: whatever a
        platform writes, it cannot move the fold's marks."""
        if sorted(reserved) != sorted((AUTH, FORWARDED_FROM)):
            return None
        source = forwarded_from(_header_bytes(message.headers, FORWARDED_FROM))
        if source is None or source[0] == state.partition or source[0] >= state.partitions:
            return None
        # the key is left out of the tag: the fold reads the coffre from the value, never from the key
        if not self.keys.authentic(Purpose.forward(state.partition), None, message.value, message.headers):
            return None
        return source

    def _unknown_key(self, message: InputMessage) -> str | None:
        """The key id the input's ``coffre-auth`` tag names when this service has no key by that id: a
        copy another ingest replica forwarded with other record keys (a configuration error, logged as
        such), or a stranger's made-up id. Refused either way, as any record that does not verify."""
        key_id = self.keys.unknown_key_id(message.headers)
        if key_id is not None:
            log.error(
                "events.in[%d]@%d: an input tagged as a forwarded copy, signed with key id %r, which this "
                "service does not have: every service of one install needs the same COFFRE_RECORD_KEYS_FILE "
                "(refused with RESERVED_HEADER)",
                message.partition,
                message.offset,
                key_id,
            )
        return key_id

    def _event(self, state: PartitionState, message: InputMessage, copy: bool) -> Output:
        """The event under the IDEvt it takes, its forwarded copy, or Rejected."""
        passthrough = _passthrough(message.headers)
        event = normalize(message.value or b"", id_evt=UNASSIGNED, limits=self.limits)
        key = coffre_key(event.id_coffre)
        target = partition_of(key, state.partitions)
        if target != state.partition and not copy:
            return self._forward(state, message, target, key)
        coffre = (event.id_oper, event.id_coffre)
        last = state.counters.get(coffre)
        if last is None:
            grows = PartitionState.counter_bytes(*coffre)
            if state.size + grows > state.budget(self.max_message_bytes):
                raise Rejected(
                    [
                        Problem(
                            ReasonCode.LIMIT_EXCEEDED,
                            "IDCoffre",
                            f"partition {state.partition} of events.in already holds {len(state.counters)} "
                            f"coffres, as many as its snapshot can carry within COFFRE_MAX_MESSAGE_BYTES",
                        )
                    ],
                    event.xml_tag,
                )
        id_evt = (last or 0) + 1
        value = canonical_bytes(event, id_evt=id_evt)
        headers = NormalizedEvent.headers_of(
            passthrough, event.xml_tag, event.id_oper, event.id_coffre, id_evt, event.supervised, time.time()
        )
        size = record_size(key, value, headers) + self.keys.header_bytes
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
        codes = self._findings(event, headers, size)
        # taken only now that its record is built and bounded: a refusal costs no number
        if last is None:
            state.size += PartitionState.counter_bytes(*coffre)
        state.counters[coffre] = id_evt
        return Output(
            self.topics.normalized,
            key,
            value,
            NormalizedEvent.seal(self.keys, key, value, headers),
            offset=message.offset,
            event_type=event.xml_tag,
            coffre=coffre,
            findings=codes,
        )

    def _findings(self, event: Event, headers: Headers, size: int) -> tuple[str, ...]:
        """Run the event's own checks; add their header to ``headers`` within what the record leaves
        (never past COFFRE_MAX_MESSAGE_BYTES: the findings are cut, the event never refused for them).
        A defect of a check costs the findings, never the event."""
        try:
            findings = check_event(event)
        except Exception:
            log.exception(
                "the checks of a %s met a defect of coffre's; recorded without findings", event.xml_tag
            )
            return ()
        if not findings:
            return ()
        room = self.max_message_bytes - size - len(FINDINGS) - 10
        value = encode_findings([f.as_dict() for f in findings], min(MAX_FINDINGS_HEADER_BYTES, room))
        if value is not None:
            headers.append((FINDINGS, value))
        return tuple(f.code for f in findings)

    def _forward(self, state: PartitionState, message: InputMessage, target: int, key: bytes) -> Output:
        headers = [
            *message.headers,  # a platform's own: an input with coffre's headers never gets here
            (FORWARDED_FROM, b"%d:%d" % (state.partition, message.offset)),
        ]
        size = record_size(key, message.value, headers) + self.keys.header_bytes
        if size > self.max_message_bytes:
            raise Rejected(
                [
                    Problem(
                        ReasonCode.LIMIT_EXCEEDED,
                        "/",
                        f"forwarding this input to the partition of its coffre would make a record of "
                        f"{size} bytes; coffre publishes at most {self.max_message_bytes} "
                        "(COFFRE_MAX_MESSAGE_BYTES): key the record by IDCoffre",
                    )
                ]
            )
        return Output(
            self.topics.events_in,
            key,
            message.value,
            self.keys.seal(Purpose.forward(target), None, message.value, headers),
            offset=message.offset,
            partition=target,
            forward=True,
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
        key, value, headers = rejection.record(self.keys)
        return Output(
            self.topics.rejected,
            key,
            value,
            headers,
            offset=message.offset,
            reasons=tuple(refusal.codes),
        )

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


def _reserved_header(names: list[str], unknown_key_id: str | None = None) -> Rejected:
    why = (
        f" (signed with key id {unknown_key_id!r}, which this service does not have: every service of one "
        "install needs the same COFFRE_RECORD_KEYS_FILE)"
        if unknown_key_id is not None
        else ""
    )
    return Rejected(
        [
            Problem(
                ReasonCode.RESERVED_HEADER,
                f"headers/{names[0]}",
                f"headers named coffre-… are coffre's own, authenticated, and these are not coffre's: "
                f"{', '.join(sorted(set(names)))[:200]}{why}",
            )
        ]
    )


def _header_bytes(headers: Headers, name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None
