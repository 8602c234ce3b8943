"""The recording step, without Kafka: append a batch to the journals, then make it durable.

Invariants (PRODUCT.md): IDEvt 1, 2, 3… per coffre with no gap and no duplicate; a
redelivered event (same IDEvt, same bytes) is recorded once and its receipt re-emitted;
"recorded" means appended with its chain hash and fsynced, and no receipt exists before.

Two kinds of message are passed over, never recorded, and counted:

* one *ahead* of its coffre's chain (IDEvt > last + 1). Ingest publishes its outbox in
  IDEvt order and, when a delivery fails, dies and publishes again everything from the first
  row not confirmed, so a later copy of the missing events and of this one follows on the
  same partition. Halting there instead would stop the vault for good: the offset of the
  early copy would be read again at every restart.
* one that ingest did not write (coffre headers missing or not matching the bytes): the
  topic is internal, but a stray producer must not stop the recording of everyone else.

The same IDEvt with other bytes is a real breach (two writers of one coffre): :class:`VaultHalt`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from coffre import metrics
from coffre.adapters.journal import JournalSet
from coffre.domain.messages import (
    CORRELATION_ID,
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SUPERVISED,
    Headers,
    Receipt,
    header,
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

    @classmethod
    def parse(cls, value: bytes, headers: Headers) -> NormalizedMessage:
        try:
            id_oper = header(headers, ID_OPER) or ""
            id_coffre = int(header(headers, ID_COFFRE) or "")
            id_evt = int(header(headers, ID_EVT) or "")
            event_type = header(headers, EVENT_TYPE) or ""
        except ValueError as exc:
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
        ingested = header(headers, INGESTED_AT)
        return cls(
            id_oper,
            id_coffre,
            id_evt,
            event_type,
            value,
            header(headers, CORRELATION_ID),
            header(headers, SUPERVISED) == "1",
            float(ingested) if ingested else None,
        )


@dataclass
class RecordCounts:
    recorded: int = 0
    redelivered: int = 0
    ahead: int = 0
    foreign: int = 0


class Recorder:
    def __init__(self, journals: JournalSet, counts: RecordCounts | None = None):
        self.journals = journals
        self.counts = counts or RecordCounts()

    def append(self, messages: list[tuple[bytes, Headers]]) -> list[Receipt]:
        """Append what is new among ``(value, headers)`` messages of the normalized topic, and
        return the receipts of what is recorded or was already. Not durable: call :meth:`sync`
        before publishing the receipts."""
        receipts = []
        counts = self.counts
        for value, headers in messages:
            try:
                m = NormalizedMessage.parse(value, headers)
            except InvalidMessage as exc:
                counts.foreign += 1
                metrics.EVENTS_SKIPPED.labels("not_from_ingest").inc()
                log.error("passed over a message ingest did not write: %s", exc)
                continue
            journal = self.journals.journal(m.id_oper, m.id_coffre)
            last = journal.last_id_evt
            if m.id_evt <= last:
                record = journal.get(m.id_evt)
                if record is None or record.event != m.value:
                    raise VaultHalt(
                        f"coffre {m.id_oper}/{m.id_coffre}: IDEvt {m.id_evt} is already recorded with other bytes"
                    )
                chain = record.chain_hash
                counts.redelivered += 1
                metrics.EVENTS_REDELIVERED.inc()
            elif m.id_evt == last + 1:
                chain = journal.append(m.id_evt, m.value)
                counts.recorded += 1
                metrics.EVENTS_RECORDED.inc()
            else:
                counts.ahead += 1
                metrics.EVENTS_SKIPPED.labels("ahead_of_chain").inc()
                with log_context(
                    id_oper=m.id_oper, id_coffre=m.id_coffre, id_evt=m.id_evt, correlation_id=m.correlation_id
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
            receipts.append(
                Receipt(
                    m.id_oper,
                    m.id_coffre,
                    m.id_evt,
                    m.event_type,
                    chain.hex(),
                    m.correlation_id,
                    m.supervised,
                    m.ingested_at,
                )
            )
        return receipts

    def sync(self) -> None:
        """Group commit: one fsync per journal appended to since the last sync."""
        with metrics.FSYNC_SECONDS.labels("vault_journal").time():
            self.journals.sync()
