"""The recording step, without Kafka: append a batch to the journals, then make it durable.

Invariants (PRODUCT.md): IDEvt 1, 2, 3… per coffre with no gap and no duplicate; a
redelivered event (same IDEvt, same bytes) is recorded once and its receipt re-emitted;
"recorded" means appended with its chain hash and fsynced, and no receipt exists before.

Two kinds of message are passed over, never recorded, and counted:

* one *ahead* of its coffre's chain (IDEvt > last + 1). Ingest publishes in IDEvt order
  and, when a delivery fails, dies without committing; whoever folds the partition next
  publishes again everything after the committed offset, so a later copy of the missing
  events and of this one follows on the same partition. Halting there instead would stop the vault for good: the offset of the
  early copy would be read again at every restart.
* one that ingest did not write (coffre headers missing or not matching the bytes): the
  topic is internal, but a stray producer must not stop the recording of everyone else.

The same IDEvt with other bytes is a real breach (two writers of one coffre): :class:`VaultHalt`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from coffre import metrics
from coffre.adapters.journal import Journal, JournalSet
from coffre.domain.authenticity import RecordKeys
from coffre.domain.messages import ForeignRecord, Headers, InvalidMessage, NormalizedEvent, Receipt, now_iso
from coffre.domain.routing import coffre_partition
from coffre.logs import log_context

log = logging.getLogger("coffre.vault")


class VaultHalt(Exception):
    """A breach of the chain's invariants: an IDEvt already recorded with other bytes.
    The vault stops rather than write a broken chain: the event stays on Kafka."""


NormalizedMessage = NormalizedEvent
"""The event of a normalized record (its definition is the domain's, beside the other records)."""


@dataclass
class RecordCounts:
    recorded: int = 0
    redelivered: int = 0
    ahead: int = 0
    foreign: int = 0
    """Records coffre did not write (no valid tag, or on another coffre's partition), or unreadable."""


class KafkaRecordLike(Protocol):
    """What the vault reads of a consumer record."""

    key: bytes | None
    value: bytes | None
    headers: Iterable[tuple[str, bytes]]
    partition: int


Recorded = tuple[NormalizedEvent, bytes]
"""A message recorded (or recorded before) and its chain hash: a receipt once durable."""


class Recorder:
    def __init__(
        self,
        journals: JournalSet,
        counts: RecordCounts | None = None,
        *,
        keys: RecordKeys | None = None,
        partitions: int | None = None,
    ):
        self.journals = journals
        self.counts = counts or RecordCounts()
        self.keys = keys
        """The record keys the normalized records must carry a tag of (:meth:`record_records`)."""
        self.partitions = partitions
        """The partition count of the normalized topic: a coffre's events are on its own partition."""
        self._grown: dict[tuple[str, int], Journal] = {}
        self._homes: dict[int, int] = {}
        """Each coffre's partition of the normalized topic, computed once."""

    def record_records(self, records: Iterable[KafkaRecordLike]) -> list[Recorded]:
        """:meth:`record` for records of the normalized topic as Kafka delivers them: each must be
        coffre's (its tag verified, :class:`~coffre.domain.messages.ForeignRecord` otherwise) and on
        its coffre's partition (a genuine record replayed onto another partition would start a second
        chain of that coffre on another vault replica). Any other is passed over, counted and
        logged: a stranger's record never halts the vault nor takes an IDEvt."""
        assert self.keys is not None and self.partitions is not None
        events: list[NormalizedEvent] = []
        for r in records:
            try:
                event = NormalizedEvent.from_record(r.key, r.value or b"", list(r.headers or ()), self.keys)
                home = self._homes.get(event.id_coffre)
                if home is None:  # murmur2 in Python costs as much as the tag: once per coffre
                    home = self._homes[event.id_coffre] = coffre_partition(event.id_coffre, self.partitions)
                if home != r.partition:
                    raise ForeignRecord(
                        f"coffre {event.id_oper}/{event.id_coffre} IDEvt {event.id_evt} on partition {r.partition}, "
                        f"not its coffre's ({home})"
                    )
            except InvalidMessage as exc:
                self._foreign(exc, r.partition)
                continue
            events.append(event)
        return self.record_events(events)

    def _foreign(self, exc: InvalidMessage, partition: int | None = None) -> None:
        self.counts.foreign += 1
        reason = "not_from_coffre" if isinstance(exc, ForeignRecord) else "not_from_ingest"
        metrics.EVENTS_SKIPPED.labels(reason).inc()
        metrics.FOREIGN_RECORDS.labels("vault", reason).inc()
        where = f" (partition {partition})" if partition is not None else ""
        log.error("passed over a normalized record%s that ingest did not write: %s", where, exc)

    def append(self, messages: list[tuple[bytes, Headers]]) -> list[Receipt]:
        """:meth:`record` then :meth:`receipts`, stamped now. Not durable: call :meth:`sync`
        before publishing the receipts (the vault stamps them after the sync instead)."""
        return self.receipts(self.record(messages))

    def record(self, messages: list[tuple[bytes, Headers]]) -> list[Recorded]:
        """Append what is new among ``(value, headers)`` messages of the normalized topic, and
        return what is recorded or was already, with its chain hash. Not durable: call
        :meth:`sync` before making receipts of them."""
        events = []
        for value, headers in messages:
            try:
                events.append(NormalizedEvent.parse(value, headers))
            except InvalidMessage as exc:
                self._foreign(exc)
        return self.record_events(events)

    def record_events(self, events: Iterable[NormalizedEvent]) -> list[Recorded]:
        """Append what is new among ``events``; see :meth:`record`."""
        recorded: list[Recorded] = []
        counts = self.counts
        grown = self._grown
        journals = self.journals
        new = redelivered = 0
        try:
            for m in events:
                journal = journals.journal(m.id_oper, m.id_coffre)
                last = journal.last_id_evt
                if m.id_evt == last + 1:
                    recorded.append((m, journal.append(m.id_evt, m.value)))
                    grown[(m.id_oper, m.id_coffre)] = journal
                    new += 1
                elif m.id_evt <= last:
                    record = journal.get(m.id_evt)
                    if record is None or record.event != m.value:
                        raise VaultHalt(
                            f"coffre {m.id_oper}/{m.id_coffre}: IDEvt {m.id_evt} is already recorded "
                            "with other bytes"
                        )
                    recorded.append((m, record.chain_hash))
                    redelivered += 1
                else:
                    counts.ahead += 1
                    metrics.EVENTS_SKIPPED.labels("ahead_of_chain").inc()
                    with log_context(
                        id_oper=m.id_oper,
                        id_coffre=m.id_coffre,
                        id_evt=m.id_evt,
                        correlation_id=m.correlation_id,
                    ):
                        log.warning(
                            "coffre %s/%s: IDEvt %d arrived while the chain ends at %d; passed over until "
                            "ingest publishes the missing events again",
                            m.id_oper,
                            m.id_coffre,
                            m.id_evt,
                            last,
                        )
        finally:  # counted once per batch, not per event
            counts.recorded += new
            counts.redelivered += redelivered
            if new:
                metrics.EVENTS_RECORDED.inc(new)
            if redelivered:
                metrics.EVENTS_REDELIVERED.inc(redelivered)
        return recorded

    @staticmethod
    def receipts(recorded: list[Recorded], recorded_at: str | None = None) -> list[Receipt]:
        """The receipts of durable records, all stamped ``recorded_at`` (default: now)."""
        stamp = recorded_at or now_iso()
        return [
            Receipt(
                m.id_oper,
                m.id_coffre,
                m.id_evt,
                m.event_type,
                chain.hex(),
                m.correlation_id,
                m.supervised,
                m.ingested_at,
                stamp,
                m.findings,
                m.findings_omitted,
            )
            for m, chain in recorded
        ]

    def sync(self) -> None:
        """Group commit: one fsync per journal appended to since the last sync."""
        with metrics.FSYNC_SECONDS.labels("vault_journal").time():
            self.journals.sync()

    def durable(self) -> dict[tuple[str, int], int]:
        """The coffres appended to since the last call, each with the IDEvt up to which it is
        durable (call after :meth:`sync`): what the sealer is told."""
        grown, self._grown = self._grown, {}
        return {coffre: journal.synced_id_evt for coffre, journal in grown.items()}
