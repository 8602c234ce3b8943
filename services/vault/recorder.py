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
from dataclasses import dataclass
from typing import Any

from coffre import metrics
from coffre.adapters.journal import Journal, JournalSet
from coffre.domain.messages import (
    CORRELATION_ID,
    EVENT_TYPE,
    FINDINGS,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SUPERVISED,
    Headers,
    Receipt,
    decode_findings,
    now_iso,
)
from coffre.logs import log_context

log = logging.getLogger("coffre.vault")


class VaultHalt(Exception):
    """A breach of the chain's invariants: an IDEvt already recorded with other bytes.
    The vault stops rather than write a broken chain: the event stays on Kafka."""


class InvalidMessage(ValueError):
    """A message on the normalized topic that ingest did not write (headers missing or
    not matching the event's bytes)."""


@dataclass(frozen=True, slots=True)
class NormalizedMessage:
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

    @classmethod
    def parse(cls, value: bytes, headers: Headers) -> NormalizedMessage:
        named = dict(reversed(headers))  # the first of a repeated header wins, as in messages.header
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


@dataclass
class RecordCounts:
    recorded: int = 0
    redelivered: int = 0
    ahead: int = 0
    foreign: int = 0


Recorded = tuple[NormalizedMessage, bytes]
"""A message recorded (or recorded before) and its chain hash: a receipt once durable."""


class Recorder:
    def __init__(self, journals: JournalSet, counts: RecordCounts | None = None):
        self.journals = journals
        self.counts = counts or RecordCounts()
        self._grown: dict[tuple[str, int], Journal] = {}

    def append(self, messages: list[tuple[bytes, Headers]]) -> list[Receipt]:
        """:meth:`record` then :meth:`receipts`, stamped now. Not durable: call :meth:`sync`
        before publishing the receipts (the vault stamps them after the sync instead)."""
        return self.receipts(self.record(messages))

    def record(self, messages: list[tuple[bytes, Headers]]) -> list[Recorded]:
        """Append what is new among ``(value, headers)`` messages of the normalized topic, and
        return what is recorded or was already, with its chain hash. Not durable: call
        :meth:`sync` before making receipts of them."""
        recorded: list[Recorded] = []
        counts = self.counts
        grown = self._grown
        journals = self.journals
        new = redelivered = 0
        try:
            for value, headers in messages:
                try:
                    m = NormalizedMessage.parse(value, headers)
                except InvalidMessage as exc:
                    counts.foreign += 1
                    metrics.EVENTS_SKIPPED.labels("not_from_ingest").inc()
                    log.error("passed over a message ingest did not write: %s", exc)
                    continue
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
