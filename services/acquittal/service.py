"""The acquittal service: receipts and rejections in, acquittals out.

It also reads the normalized events (their headers) to know which acquittable events are
waiting for their record, so that late records are counted and reported even before
their receipt arrives. The acquittal itself is built from the receipt alone: it can
never precede the record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from coffre import metrics
from coffre.adapters.service import kafka_endpoints, run_until_signalled
from coffre.config import Settings
from coffre.domain.messages import (
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SUPERVISED,
    Acquittal,
    Receipt,
    Rejection,
    header,
)
from coffre.logs import log_context
from coffre.ops import BrokerCheck, LagMeter, Ops

log = logging.getLogger("coffre.acquittal")
Key = tuple[str, int, int]


@dataclass
class AcquittalStats:
    recorded: int = 0
    rejected: int = 0
    not_acquitted: int = 0
    late: int = 0
    unreadable: int = 0
    latencies: list[float] = field(default_factory=list)


class Acquitter:
    """The decisions, without Kafka."""

    def __init__(self, synthesis_events: set[str], late_after: float, clock=time.time):
        self.synthesis_events = synthesis_events
        self.late_after = late_after
        self.clock = clock
        self.waiting: dict[Key, float] = {}  # acquittable events seen, not yet recorded -> ingested at
        self.reported_late: set[Key] = set()
        self.recent: OrderedDict[Key, None] = OrderedDict()  # recorded keys, to ignore a late-read event
        self.stats = AcquittalStats()

    def acquittable(self, event_type: str, supervised: bool) -> bool:
        return event_type not in self.synthesis_events and not supervised

    def on_normalized(self, headers: list) -> None:
        event_type = header(headers, EVENT_TYPE) or ""
        if not self.acquittable(event_type, header(headers, SUPERVISED) == "1"):
            return
        key = (
            header(headers, ID_OPER) or "",
            int(header(headers, ID_COFFRE) or 0),
            int(header(headers, ID_EVT) or 0),
        )
        if key not in self.recent:
            self.waiting[key] = float(header(headers, INGESTED_AT) or self.clock())

    def on_receipt(self, receipt: Receipt) -> Acquittal | None:
        key = (receipt.id_oper, receipt.id_coffre, receipt.id_evt)
        self.waiting.pop(key, None)
        self.recent[key] = None
        if len(self.recent) > 200_000:
            self.recent.popitem(last=False)
        if not self.acquittable(receipt.event_type, receipt.supervised):
            self.stats.not_acquitted += 1
            return None
        if receipt.ingested_at is not None:
            latency = self.clock() - receipt.ingested_at
            self.stats.latencies.append(latency)
            if len(self.stats.latencies) > 100_000:
                del self.stats.latencies[:50_000]
            if latency > self.late_after and key not in self.reported_late:
                self._late(key, latency)
        self.reported_late.discard(key)
        self.stats.recorded += 1
        return Acquittal.recorded(receipt)

    def on_rejection(self, rejection: Rejection) -> Acquittal:
        self.stats.rejected += 1
        return Acquittal.rejected(rejection)

    def sweep(self) -> None:
        """Count and report what has waited too long for its record (once each)."""
        now = self.clock()
        for key, since in list(self.waiting.items()):
            if now - since > self.late_after and key not in self.reported_late:
                self._late(key, now - since)

    def _late(self, key: Key, waited: float) -> None:
        self.reported_late.add(key)
        self.stats.late += 1
        metrics.LATE_RECORDS.inc()
        with log_context(id_oper=key[0], id_coffre=key[1], id_evt=key[2]):
            log.warning("late record: coffre %s/%s IDEvt %s waited %.3fs", *key, waited)


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> AcquittalStats:
    topics = settings.topics
    stop = stop or asyncio.Event()
    acquitter = Acquitter(settings.synthesis_events, settings.late_after_seconds)
    ops = Ops("acquittal", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers))
    await ops.start()
    try:
        async with kafka_endpoints(
            settings, "acquittal", topics.normalized, topics.receipts, topics.rejected
        ) as kafka:
            lag = LagMeter(kafka.consumer)
            log.info("acquittal ready")
            last_sweep = time.monotonic()
            while not stop.is_set():
                batches = await kafka.consumer.getmany(timeout_ms=100, max_records=settings.batch_max)
                out: list[Acquittal] = []
                ingested: list[float] = []  # when ingest normalized each recorded event acquitted here
                for tp, records in batches.items():
                    for record in records:
                        headers = list(record.headers or ())
                        try:
                            if tp.topic == topics.normalized:
                                acquitter.on_normalized(headers)
                            elif tp.topic == topics.receipts:
                                receipt = Receipt.decode(record.value or b"")
                                acquittal = acquitter.on_receipt(receipt)
                                if acquittal:
                                    out.append(acquittal)
                                    if receipt.ingested_at is not None:
                                        ingested.append(receipt.ingested_at)
                            else:
                                out.append(acquitter.on_rejection(Rejection.decode(record.value or b"")))
                        except (ValueError, TypeError, KeyError):  # not written by coffre: never crash on it
                            acquitter.stats.unreadable += 1
                            metrics.UNREADABLE.inc()
                            log.error(
                                "passed over an unreadable record at %s offset %d",
                                tp,
                                record.offset,
                                exc_info=True,
                            )
                await kafka.send_all(
                    topics.acquittals,
                    (
                        (
                            a.correlation_id.encode() if a.correlation_id else None,
                            a.encode(),
                            a.correlation_id,
                        )
                        for a in out
                    ),
                )
                published = time.time()
                for a in out:
                    metrics.ACQUITTALS.labels(a.status).inc()
                for since in ingested:
                    metrics.ACQUITTAL_LATENCY.observe(max(0.0, published - since))
                if batches:
                    kafka.committer.commit({tp: records[-1].offset + 1 for tp, records in batches.items()})
                if time.monotonic() - last_sweep > 0.5:
                    acquitter.sweep()
                    last_sweep = time.monotonic()
                await lag.update()
    finally:
        await ops.stop()
    return acquitter.stats


def run(settings: Settings) -> None:
    """``coffre acquittal``: until SIGTERM or SIGINT."""
    run_until_signalled(serve, settings)
