"""The auditor's step, without Kafka: audit each recorded event once, and join its findings
with the vault's receipt of it (for the chain hash) before they are published.

All the state is in one key/value table (a faust table in the service, a dict in the tests),
every key beginning with the coffre (``IDOper/IDCoffre/``), so that one coffre's state lives on
the partition its events and receipts are read from (both topics are keyed by ``IDCoffre``):

``<coffre>/audited``
    the last IDEvt of the coffre audited: a copy of an older event is passed over, which makes a
    replay after a restart audit nothing twice. An event further ahead than the next one is audited
    all the same (and counted): ingest publishes each coffre in order, so such a gap is a mark the
    table lost in a crash (faust can lose an update there), and an event is never left unaudited.
``<coffre>/waiting/<IDEvt>``
    the findings of an audited event whose receipt has not come yet (bounded by how far the
    vault lags the auditor);
``<coffre>/receipt/<IDEvt>``
    the chain hash of a receipt that came before its event was audited (bounded by how far the
    auditor lags the vault); a receipt of an event audited without findings is dropped at once;
``<coffre>/trail/…``
    the money trail's state (:class:`~coffre.domain.audit.trail.MoneyTrail`), each value kept
    with the one before it and the IDEvt that wrote it (:class:`VersionedStore`), so that an
    event audited again after a crash (its trail writes recovered, not its ``audited`` mark)
    reads the state as it was before it, and finds what it found the first time.

One record is published per audited event with findings, once its receipt is known; a crash
between the publication and the table's writes publishes it again after the restart (at least
once: a reader keeps one record per ``id_oper``/``id_coffre``/``id_evt``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from coffre import metrics
from coffre.domain.audit.events import audit_event
from coffre.domain.audit.findings import Finding, register
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.codec import Limits
from coffre.domain.errors import Rejected
from coffre.domain.messages import AuditRecord, Headers, InvalidMessage, NormalizedEvent, Receipt, now_iso
from coffre.domain.normalize import normalize
from coffre.logs import log_context

log = logging.getLogger("coffre.auditor")

register(
    "audit",
    AUDIT_FAILED="the event is recorded but could not be audited (unreadable, or a defect of the audit): "
    "the message says why",
)

Table = MutableMapping[str, Any]
"""The auditor's state: a faust table in the service, a dict in the tests."""
Publish = Callable[[bytes, bytes], Awaitable[None]]
"""Publish (key, value) to the audit topic and return once the broker acknowledged it."""
FetchMissing = Callable[[int, int, str, int, set[int]], Awaitable[list[tuple[bytes, Headers]]]]
"""(partition, before offset, IDOper, IDCoffre, the IDEvt wanted) -> the (value, headers) of those of
the coffre's events found in the normalized topic's partition before that offset, in IDEvt order."""
FetchReceipts = Callable[[int, int, str, int, set[int]], Awaitable[dict[int, str]]]
"""The same on the receipts topic: IDEvt -> chain hash of the coffre's receipts found there."""


def table_prefix(id_oper: str, id_coffre: int) -> str:
    return f"{id_oper}/{id_coffre}"


class VersionedStore:
    """A :class:`~coffre.domain.audit.trail.TrailStore` over the auditor's table, for one event at
    a time (:attr:`id_evt`): each write keeps the value before it, so that the event audited again
    reads what it read the first time. Keys are those of the trail, under ``<coffre>/trail/``."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.id_evt = 0

    def _key(self, key: str) -> str:
        id_oper, id_coffre, rest = key.split("/", 2)  # the trail's keys begin with IDOper/IDCoffre/
        return f"{id_oper}/{id_coffre}/trail/{rest}"

    def get(self, key: str, default: Any = None) -> Any:
        value = self._current(self.table.get(self._key(key)))
        return default if value is None else value

    def _current(self, entry: dict[str, Any] | None) -> Any:
        """The value as it stood before the event audited now (None: none)."""
        if entry is None:
            return None
        return entry["prev"] if entry["evt"] >= self.id_evt else entry["value"]

    def __setitem__(self, key: str, value: Any) -> None:
        stored = self._key(key)
        entry = self.table.get(stored)
        before = self._current(entry)
        self.table[stored] = {"value": value, "prev": before, "evt": self.id_evt}


@dataclass
class JoinCounts:
    audited: int = 0
    published: int = 0
    duplicates: int = 0
    """events already audited (ingest published them again, or the auditor reads them again)"""
    ahead: int = 0
    """events past their coffre's next IDEvt (a crash lost marks or records): audited all the same"""
    refetched: int = 0
    """events missing before one ahead, read again from the log and audited"""
    foreign: int = 0
    dropped_receipts: int = 0
    """receipts of events audited without findings, or already published"""
    failed: int = 0


class AuditJoin:
    """Feed it the normalized events and the receipts of a set of partitions, in their order."""

    def __init__(
        self,
        table: Table,
        publish: Publish,
        *,
        max_message_bytes: int,
        limits: Limits | None = None,
        audit: Callable[[Event, MoneyTrail], list[Finding]] = audit_event,
        clock: Callable[[], str] = now_iso,
        fetch_missing: FetchMissing | None = None,
        fetch_receipts: FetchReceipts | None = None,
    ) -> None:
        self.table = table
        self.publish = publish
        self.max_message_bytes = max_message_bytes
        self.limits = limits or Limits(max_bytes=max_message_bytes)
        self.audit = audit
        self.clock = clock
        self.fetch_missing = fetch_missing
        self.fetch_receipts = fetch_receipts
        self.last_receipt: dict[str, int] = {}
        """Per coffre, the last receipt seen since the start (a gap after it: receipts skipped)."""
        self.last_receipt_at: dict[str, tuple[int, int]] = {}
        """Per coffre, the (partition, offset) of that receipt."""
        self.store = VersionedStore(table)
        self.trail = MoneyTrail(self.store)
        self.counts = JoinCounts()

    # events ------------------------------------------------------------------------------

    async def on_event(
        self, value: bytes, headers: Headers, partition: int | None = None, offset: int | None = None
    ) -> dict[str, Any] | None:
        """Audit one message of the normalized topic (at ``partition``/``offset``, when known, from
        where missing events are fetched again); the audit record published, if any."""
        try:
            m = NormalizedEvent.parse(value, headers)
        except InvalidMessage as exc:
            self.counts.foreign += 1
            log.error("passed over a message ingest did not write: %s", exc)
            return None
        coffre = table_prefix(m.id_oper, m.id_coffre)
        last = self.table.get(f"{coffre}/audited")
        if last is not None and m.id_evt <= last:
            self.counts.duplicates += 1
            return None
        if last is not None and m.id_evt > last + 1:
            # ingest publishes a coffre's events in IDEvt order on one partition: a gap here is the
            # auditor's own, never the log's (faust's table can lose an update in a crash, and its
            # consumer skipped records after a restart until app._LowLatencyConsumer.perform_seek):
            # the missing events are read again from the partition and audited first; an event is
            # never passed over
            self.counts.ahead += 1
            wanted = set(range(last + 1, m.id_evt))
            found: list[tuple[bytes, Headers]] = []
            if self.fetch_missing is not None and partition is not None and offset is not None:
                found = await self.fetch_missing(partition, offset, m.id_oper, m.id_coffre, wanted)
            log.warning(
                "coffre %s: IDEvt %d arrived while the audit stands at %d: %d missing event(s) read again "
                "from the log and audited first, %d not found (their audit is lost)",
                coffre,
                m.id_evt,
                last,
                len(found),
                len(wanted) - len(found),
            )
            for missing_value, missing_headers in found:
                await self.on_event(missing_value, missing_headers)
            self.counts.refetched += len(found)
        with log_context(id_oper=m.id_oper, id_coffre=m.id_coffre, id_evt=m.id_evt):
            findings, event = self._audit(m)
        self.counts.audited += 1
        metrics.AUDIT_EVENTS.labels(m.event_type).inc()
        for finding in findings:
            metrics.FINDINGS.labels(finding.code, "auditor").inc()
        for code, times in self.trail.not_checked_now.items():
            metrics.AUDIT_NOT_CHECKED.labels(code).inc(times)
        key = f"{coffre}/{m.id_evt}"
        published = None
        if findings:
            record = self.record(m, event, findings)
            chain_hash = self.table.get(f"{coffre}/receipt/{m.id_evt}")
            if chain_hash is None:
                chain_hash = await self._passed_receipt(coffre, m)
            if chain_hash is not None:
                published = await self._publish({**record, "chain_hash": chain_hash})
                if self.table.get(f"{coffre}/receipt/{m.id_evt}") is not None:
                    del self.table[f"{coffre}/receipt/{m.id_evt}"]
            else:
                self.table[f"{coffre}/waiting/{m.id_evt}"] = record
        elif self.table.get(f"{coffre}/receipt/{m.id_evt}") is not None:
            del self.table[f"{coffre}/receipt/{m.id_evt}"]
        self.table[f"{coffre}/audited"] = m.id_evt  # last: a replay of this event is passed over
        log.debug("audited %s: %d findings", key, len(findings))
        return published

    def _audit(self, m: NormalizedEvent) -> tuple[list[Finding], Event | None]:
        """The event's findings; an event that cannot be read or audited has ``AUDIT_FAILED``."""
        started = time.perf_counter()
        event: Event | None = None
        try:
            event = normalize(m.value, limits=self.limits)
            self.store.id_evt = m.id_evt
            self.trail.not_checked_now.clear()  # this event's counts only (the metric)
            findings = self.audit(event, self.trail)
        except Rejected as exc:
            findings = [self._failed(f"the recorded bytes do not read as a {m.event_type}: {exc}")]
        except Exception as exc:  # a defect of the audit must not stop the service
            log.exception("audit of %s/%s IDEvt %d failed", m.id_oper, m.id_coffre, m.id_evt)
            findings = [self._failed(f"the audit failed: {type(exc).__name__}: {exc}")]
        finally:
            metrics.AUDIT_SECONDS.observe(time.perf_counter() - started)
        return findings, event

    def _failed(self, message: str) -> Finding:
        self.counts.failed += 1
        return Finding("AUDIT_FAILED", message[:1000])

    def record(self, m: NormalizedEvent, event: Event | None, findings: list[Finding]) -> dict[str, Any]:
        """The audit record, without its chain hash yet."""
        return {
            "id_oper": m.id_oper,
            "id_coffre": m.id_coffre,
            "id_evt": m.id_evt,
            "event_type": m.event_type,
            "chain_hash": None,
            "findings": [f.as_dict() for f in findings],
            "findings_omitted": 0,
            "tech": getattr(event, "Tech", None),
            "pool": _text(getattr(event, "Pool", None)),
            "audited_at": self.clock(),
        }

    # receipts ----------------------------------------------------------------------------

    async def on_receipt(
        self, raw: bytes, partition: int | None = None, offset: int | None = None
    ) -> dict[str, Any] | None:
        """Join one receipt of the vault with its event's findings; the audit record published, if any."""
        receipt = Receipt.decode(raw)
        coffre = table_prefix(receipt.id_oper, receipt.id_coffre)
        seen = self.last_receipt.get(coffre)
        if seen is None or receipt.id_evt > seen:
            self.last_receipt[coffre] = receipt.id_evt
            if partition is not None and offset is not None:
                self.last_receipt_at[coffre] = (partition, offset)
        if (seen is None or receipt.id_evt > seen + 1) and partition is not None and offset is not None:
            await self._skipped_receipts(receipt, coffre, partition, offset)
        waiting = self.table.get(f"{coffre}/waiting/{receipt.id_evt}")
        if waiting is not None:
            published = await self._publish({**waiting, "chain_hash": receipt.chain_hash})
            del self.table[f"{coffre}/waiting/{receipt.id_evt}"]
            return published
        last = self.table.get(f"{coffre}/audited")
        if last is not None and receipt.id_evt <= last:
            self.counts.dropped_receipts += 1  # audited without findings, or published already
            return None
        self.table[f"{coffre}/receipt/{receipt.id_evt}"] = receipt.chain_hash
        return None

    async def _passed_receipt(self, coffre: str, m: NormalizedEvent) -> str | None:
        """The chain hash of an event audited late (read back after a restart) whose receipt is
        already behind the receipts read since the start: read back from the receipts partition."""
        at = self.last_receipt_at.get(coffre)
        if self.fetch_receipts is None or at is None or self.last_receipt.get(coffre, 0) < m.id_evt:
            return None
        partition, offset = at
        hashes = await self.fetch_receipts(partition, offset + 1, m.id_oper, m.id_coffre, {m.id_evt})
        return hashes.get(m.id_evt)

    async def _skipped_receipts(self, receipt: Receipt, coffre: str, partition: int, offset: int) -> None:
        """Findings waiting for receipts older than this one (the vault publishes a coffre's receipts
        in IDEvt order): those receipts were skipped (a restart), so they are read again from the
        partition before this one, and the findings published. Checked at each coffre's first
        receipt since the start and after a gap."""
        prefix = f"{coffre}/waiting/"
        waiting = {int(k[len(prefix) :]) for k in list(self.table.keys()) if k.startswith(prefix)}
        wanted = {i for i in waiting if i < receipt.id_evt}
        if not wanted or self.fetch_receipts is None:
            return
        hashes = await self.fetch_receipts(partition, offset, receipt.id_oper, receipt.id_coffre, wanted)
        log.warning(
            "coffre %s: %d finding record(s) waited for receipts older than IDEvt %d: %d read again from the "
            "log and published",
            coffre,
            len(wanted),
            receipt.id_evt,
            len(hashes),
        )
        for id_evt in sorted(hashes):
            record = self.table.get(f"{prefix}{id_evt}")
            if record is not None:
                await self._publish({**record, "chain_hash": hashes[id_evt]})
                del self.table[f"{prefix}{id_evt}"]

    # publishing ----------------------------------------------------------------------------

    async def _publish(self, record: dict[str, Any]) -> dict[str, Any]:
        key = str(record["id_coffre"]).encode()
        record, value = bounded(record, key, self.max_message_bytes)
        await self.publish(key, value)
        self.counts.published += 1
        metrics.AUDIT_PUBLISHED.inc()
        return record


encode = AuditRecord.encode
bounded = AuditRecord.bounded
"""The audit record's format is the domain's (:class:`coffre.domain.messages.AuditRecord`)."""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
