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

A redelivered IDEvt the journal no longer holds (sealed, its segment released; or recorded by
another replica before a take-over) is checked against its lot in the archive
(``sealed_event``), and its receipt re-emitted with the lot's chain hash.

A redelivered IDEvt read below its partition's *acknowledged position* (:attr:`Recorder.acknowledged`,
from the committed offset's metadata, :mod:`coffre_vault.acknowledged`) is checked all the same, but
its receipt is not sent again: that record's receipt was published and acknowledged before the vault
started again or was given the partition again.

**Where the vault may commit** (:meth:`Recorder.commit_offsets`): the journal is a cache of what
the archive does not hold yet, and a replica taking a coffre over has no journal; so the vault's
committed offset on a partition never passes the first unsealed event of any of its coffres.
The recorder remembers, per coffre, the offset each IDEvt after the sealed one arrived at; a
take-over reads from the committed offset and finds every unsealed event again on the topic.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from coffre import metrics
from coffre.adapters.journal import Journal, JournalSet
from coffre.domain.authenticity import RecordKeys
from coffre.domain.messages import (
    ForeignRecord,
    Headers,
    InvalidMessage,
    NormalizedEvent,
    Receipt,
    UnknownRecordKey,
    foreign_reason,
    now_iso,
)
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
    acknowledged: int = 0
    """Redelivered events, among ``redelivered``, read below the acknowledged position: receipt not sent again."""


class KafkaRecordLike(Protocol):
    """What the vault reads of a consumer record."""

    key: bytes | None
    value: bytes | None
    headers: Iterable[tuple[str, bytes]]
    partition: int
    offset: int


Recorded = tuple[NormalizedEvent, bytes]
"""A message recorded (or recorded before) and its chain hash: a receipt once durable."""

Coffre = tuple[str, int]


@dataclass
class _Arrivals:
    """Where each IDEvt after the sealed one arrived (topic offsets), for the commit position."""

    partition: int
    last_id: int
    """The last IDEvt whose offset is known (the chain of known offsets starts after the sealed one)."""
    offsets: deque[tuple[int, int]]
    """(IDEvt, offset), consecutive IDEvt."""


class Recorder:
    def __init__(
        self,
        journals: JournalSet,
        counts: RecordCounts | None = None,
        *,
        keys: RecordKeys | None = None,
        partitions: int | None = None,
        sealed: Callable[[str, int], int | None] | None = None,
        sealed_event: Callable[[str, int, int], tuple[bytes, bytes] | None] | None = None,
    ):
        self.journals = journals
        self.sealed = sealed
        """The newest IDEvt of a coffre in the archive (None: unknown), for :meth:`commit_offsets`."""
        self.sealed_event = sealed_event
        """(canonical bytes, chain hash) of a sealed IDEvt, read from its lot; None when absent."""
        self._arrivals: dict[Coffre, _Arrivals] = {}
        self.counts = counts or RecordCounts()
        self.keys = keys
        """The record keys the normalized records must carry a tag of (:meth:`record_records`)."""
        self.partitions = partitions
        """The partition count of the normalized topic: a coffre's events are on its own partition."""
        self._grown: dict[tuple[str, int], Journal] = {}
        self._homes: dict[int, int] = {}
        """Each coffre's partition of the normalized topic, computed once."""
        self.acknowledged: dict[int, int] = {}
        """Partition -> the offset below which every record's receipt was published and acknowledged
        (read from the committed offsets' metadata when the partition is assigned): a redelivered
        event read below it is checked, its receipt not sent again (:meth:`record_events`)."""

    def record_records(self, records: Iterable[KafkaRecordLike]) -> list[Recorded]:
        """:meth:`record` for records of the normalized topic as Kafka delivers them: each must be
        coffre's (its tag verified, :class:`~coffre.domain.messages.ForeignRecord` otherwise) and on
        its coffre's partition (a genuine record replayed onto another partition would start a second
        chain of that coffre on another vault replica). Any other is passed over, counted and
        logged: a stranger's record never halts the vault nor takes an IDEvt."""
        assert self.keys is not None and self.partitions is not None
        events: list[NormalizedEvent] = []
        arrived: list[tuple[int, int]] = []
        for r in records:
            try:
                event = NormalizedEvent.from_record(r.key, r.value or b"", list(r.headers or ()), self.keys)
                home = self.home(event.id_coffre)
                if home != r.partition:
                    raise ForeignRecord(
                        f"coffre {event.id_oper}/{event.id_coffre} IDEvt {event.id_evt} on partition {r.partition}, "
                        f"not its coffre's ({home})"
                    )
            except InvalidMessage as exc:
                self._foreign(exc, r.partition)
                continue
            events.append(event)
            arrived.append((r.partition, r.offset))
        return self.record_events(events, arrived)

    def _foreign(self, exc: InvalidMessage, partition: int | None = None) -> None:
        self.counts.foreign += 1
        reason = "not_from_coffre" if isinstance(exc, ForeignRecord) else "not_from_ingest"
        metrics.EVENTS_SKIPPED.labels(reason).inc()
        metrics.FOREIGN_RECORDS.labels("vault", foreign_reason(exc, reason)).inc()
        where = f" (partition {partition})" if partition is not None else ""
        if isinstance(exc, UnknownRecordKey):  # most likely ingest, with other record keys than this vault's
            log.error("passed over a normalized record%s: %s", where, exc)
        else:
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

    def record_events(
        self, events: Iterable[NormalizedEvent], arrived: list[tuple[int, int]] | None = None
    ) -> list[Recorded]:
        """Append what is new among ``events``; see :meth:`record`. ``arrived``: the (partition,
        offset) each came from, remembered for :meth:`commit_offsets`; a redelivered event that
        arrived below its partition's :attr:`acknowledged` position is checked but not returned (its
        receipt was published)."""
        recorded: list[Recorded] = []
        counts = self.counts
        grown = self._grown
        journals = self.journals
        acknowledged = self.acknowledged
        new = redelivered = passed = 0
        try:
            for index, m in enumerate(events):
                journal = journals.journal(m.id_oper, m.id_coffre)
                last = journal.last_id_evt
                if m.id_evt == last + 1:
                    recorded.append((m, journal.append(m.id_evt, m.value)))
                    grown[(m.id_oper, m.id_coffre)] = journal
                    new += 1
                elif m.id_evt <= last:
                    record = journal.get(m.id_evt)
                    if record is not None:
                        found: tuple[bytes, bytes] | None = (record.event, record.chain_hash)
                    elif m.id_evt < journal.first_id_evt and self.sealed_event is not None:
                        found = self.sealed_event(m.id_oper, m.id_coffre, m.id_evt)  # released: its lot
                    else:
                        found = None
                    if found is None or found[0] != m.value:
                        raise VaultHalt(
                            f"coffre {m.id_oper}/{m.id_coffre}: IDEvt {m.id_evt} is already recorded "
                            "with other bytes"
                        )
                    redelivered += 1
                    where = arrived[index] if arrived is not None else None
                    if where is not None and where[1] < acknowledged.get(where[0], -1):
                        passed += 1  # its receipt was published and acknowledged before: not sent again
                    else:
                        recorded.append((m, found[1]))
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
                    continue
                if arrived is not None:
                    self._arrived(m.id_oper, m.id_coffre, m.id_evt, *arrived[index])
        finally:  # counted once per batch, not per event
            counts.recorded += new
            counts.redelivered += redelivered
            counts.acknowledged += passed
            if passed:
                metrics.RECEIPTS_ACKNOWLEDGED.inc(passed)
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

    def _arrived(self, id_oper: str, id_coffre: int, id_evt: int, partition: int, offset: int) -> None:
        key = (id_oper, id_coffre)
        arrivals = self._arrivals.get(key)
        if arrivals is None:
            sealed = self._sealed_id(id_oper, id_coffre)
            if sealed is None:
                return
            arrivals = self._arrivals[key] = _Arrivals(partition, sealed, deque())
        if id_evt == arrivals.last_id + 1:
            arrivals.offsets.append((id_evt, offset))
            arrivals.last_id = id_evt

    def commit_offsets(self, consumed: dict[int, int]) -> dict[int, int]:
        """How far the vault may commit on each partition it consumed up to ``consumed[partition]``
        (the next offset to read): never past the first unsealed event of one of its coffres. A
        partition with a coffre whose unsealed events arrived at unknown offsets (journal records
        from before a restart, not read again yet) is left out: its commit waits."""
        allowed = dict(consumed)
        for (id_oper, id_coffre), arrivals in self._arrivals.items():
            partition = arrivals.partition
            if partition not in allowed:
                continue
            sealed = self._sealed_id(id_oper, id_coffre)
            if sealed is None:
                del allowed[partition]
                continue
            offsets = arrivals.offsets
            while offsets and offsets[0][0] <= sealed:
                offsets.popleft()
            if arrivals.last_id < sealed:
                arrivals.last_id = sealed
            last = self.journals.journal(id_oper, id_coffre).last_id_evt
            if last <= sealed:
                continue  # nothing unsealed
            if not offsets or offsets[0][0] != sealed + 1:
                del allowed[partition]
            else:
                allowed[partition] = min(allowed[partition], offsets[0][1])
        for id_oper, id_coffre in self.journals.opened():
            if (id_oper, id_coffre) not in self._arrivals:
                sealed = self._sealed_id(id_oper, id_coffre)
                journal = self.journals.journal(id_oper, id_coffre)
                if sealed is None or journal.last_id_evt > sealed:  # unsealed records, offsets unknown
                    allowed.pop(self.home(id_coffre), None)
        return allowed

    def home(self, id_coffre: int) -> int:
        """The coffre's partition of the normalized topic (murmur2 in Python costs as much as the
        record's tag: computed once per coffre)."""
        home = self._homes.get(id_coffre)
        if home is None:
            assert self.partitions is not None
            home = self._homes[id_coffre] = coffre_partition(id_coffre, self.partitions)
        return home

    def _sealed_id(self, id_oper: str, id_coffre: int) -> int | None:
        return self.sealed(id_oper, id_coffre) if self.sealed is not None else None

    def forget(self, coffres: Iterable[Coffre]) -> None:
        """Drop what is known of these coffres' arrivals (their partitions moved away)."""
        for key in coffres:
            self._arrivals.pop(key, None)

    def durable(self) -> dict[tuple[str, int], int]:
        """The coffres appended to since the last call, each with the IDEvt up to which it is
        durable (call after :meth:`sync`): what the sealer is told."""
        grown, self._grown = self._grown, {}
        return {coffre: journal.synced_id_evt for coffre, journal in grown.items()}
