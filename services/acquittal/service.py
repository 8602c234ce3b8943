"""The acquittal service: receipts and rejections in, acquittals out.

The acquittal is built from the receipt alone: it can never precede the record. The receipt
also carries when ingest published the event (``ingested_at``) and when the vault published the
receipt, after its fsync (``recorded_at``): a record is *late* when the second comes more than
``COFFRE_LATE_AFTER_SECONDS`` after the first, counted and logged once. The service reads
nothing else: an event still waiting for its record shows, meanwhile, as the vault's consumer
lag on the normalized topic, and is counted late when its receipt comes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import InvalidSessionTimeoutError

from coffre import metrics
from coffre.adapters.kafka import COMMIT_INTERVAL
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.stream import Batch, Record, run_stream, run_until_signalled
from coffre.config import Settings, Topics, configuration_error
from coffre.domain.authenticity import RecordKeys
from coffre.domain.messages import Acquittal, ForeignRecord, Receipt, Rejection, foreign_reason
from coffre.logs import log_context
from coffre.ops import BrokerCheck, Ops

log = logging.getLogger("coffre.acquittal")
Key = tuple[str, int, int]
REMEMBERED_LATE = 100_000
"""How many late records are remembered, so that a receipt published twice is counted late once."""
LATE_LOG_SECONDS = 10.0
"""Late records are logged one line per coffre per this many seconds (the first of the window in full,
then how many more and the longest wait): after a stall every record of the backlog is late, and a
line each wrote 9 MB of log in five minutes of a chaos soak. The metric counts every one."""


@dataclass
class AcquittalStats:
    recorded: int = 0
    rejected: int = 0
    not_acquitted: int = 0
    late: int = 0
    unreadable: int = 0
    foreign: int = 0
    """Receipts and rejections coffre did not write: no acquittal comes of them."""
    latencies: list[float] = field(default_factory=list)


class Acquitter:
    """The decisions, without Kafka."""

    def __init__(
        self,
        synthesis_events: set[str],
        late_after: float,
        clock: Callable[[], float] = time.time,
        topics: Topics | None = None,
        keys: RecordKeys | None = None,
    ) -> None:
        self.synthesis_events = synthesis_events
        self.late_after = late_after
        self.clock = clock
        self.topics = topics
        """Where :meth:`handle` reads receipts and sends acquittals (the decisions alone need none)."""
        self.keys = keys
        """What the receipts and rejections :meth:`handle` reads must carry a tag of."""
        self.reported_late: OrderedDict[Key, None] = OrderedDict()
        self.late_windows: dict[tuple[str, int], list[Any]] = {}
        """Per coffre, [start of its logging window, late records not logged in it, their longest wait]."""
        self.stats = AcquittalStats()
        self._sent: tuple[int, int, list[float]] = (0, 0, [])
        """The last batch's acquittals recorded and rejected, and when ingest published each
        recorded event: counted once they are acknowledged."""

    async def handle(self, batch: Batch) -> list[Record]:
        """The acquittals of a batch of receipts and rejections; a record coffre did not write is
        counted and passed over, never a crash."""
        assert self.topics is not None and self.keys is not None, (
            "Acquitter(topics=..., keys=...) handles batches"
        )
        out: list[Acquittal] = []
        ingested: list[float] = []
        rejected = 0
        for tp, records in batch.items():
            from_vault = tp.topic == self.topics.receipts
            for record in records:
                headers = list(record.headers or ())
                try:
                    if from_vault:
                        receipt = Receipt.from_record(record.key, record.value or b"", headers, self.keys)
                        acquittal = self.on_receipt(receipt)
                        if acquittal:
                            out.append(acquittal)
                            if receipt.ingested_at is not None:
                                ingested.append(receipt.ingested_at)
                    else:
                        rejection = Rejection.from_record(record.key, record.value or b"", headers, self.keys)
                        out.append(self.on_rejection(rejection))
                        rejected += 1
                except ForeignRecord as exc:  # a stranger's: never acquitted, never a crash
                    self.stats.foreign += 1
                    metrics.FOREIGN_RECORDS.labels("acquittal", foreign_reason(exc, tp.topic)).inc()
                    log.error("passed over a record at %s offset %d: %s", tp, record.offset, exc)
                except (ValueError, TypeError, KeyError):  # unreadable: never crash
                    self.stats.unreadable += 1
                    metrics.UNREADABLE.inc()
                    log.error(
                        "passed over an unreadable record at %s offset %d", tp, record.offset, exc_info=True
                    )
        self._sent = (len(out) - rejected, rejected, ingested)
        return [(self.topics.acquittals, *a.record(), None) for a in out]

    def acknowledged(self) -> None:
        recorded, rejected, ingested = self._sent
        if recorded:
            metrics.ACQUITTALS.labels("recorded").inc(recorded)
        if rejected:
            metrics.ACQUITTALS.labels("rejected").inc(rejected)
        published = time.time()
        for since in ingested:
            metrics.ACQUITTAL_LATENCY.observe(max(0.0, published - since))

    def acquittable(self, event_type: str, supervised: bool) -> bool:
        return event_type not in self.synthesis_events and not supervised

    def on_receipt(self, receipt: Receipt) -> Acquittal | None:
        if not self.acquittable(receipt.event_type, receipt.supervised):
            self.stats.not_acquitted += 1
            return None
        if receipt.ingested_at is not None:
            latencies = self.stats.latencies
            latencies.append(self.clock() - receipt.ingested_at)
            if len(latencies) > 100_000:
                del latencies[:50_000]
            waited = receipt.recorded_after()
            if waited is not None and waited > self.late_after:
                self._late((receipt.id_oper, receipt.id_coffre, receipt.id_evt), waited)
        self.stats.recorded += 1
        return Acquittal.recorded(receipt)

    def on_rejection(self, rejection: Rejection) -> Acquittal:
        self.stats.rejected += 1
        return Acquittal.rejected(rejection)

    def _late(self, key: Key, waited: float) -> None:
        if key in self.reported_late:
            return  # the same receipt again (at-least-once delivery): counted already
        self.reported_late[key] = None
        if len(self.reported_late) > REMEMBERED_LATE:
            self.reported_late.popitem(last=False)
        self.stats.late += 1
        metrics.LATE_RECORDS.inc()
        coffre = (key[0], key[1])
        now = time.monotonic()
        window = self.late_windows.get(coffre)
        if window is not None and now - window[0] < LATE_LOG_SECONDS:
            window[1] += 1
            window[2] = max(window[2], waited)
            return
        if window is not None and window[1]:
            log.warning(
                "late records: %d more of coffre %s/%s in the last %.0fs, the latest IDEvt %s, the longest"
                " recorded %.3fs after ingest",
                window[1],
                *coffre,
                now - window[0],
                key[2],
                window[2],
            )
        self.late_windows[coffre] = [now, 0, 0.0]
        with log_context(id_oper=key[0], id_coffre=key[1], id_evt=key[2]):
            log.warning("late record: coffre %s/%s IDEvt %s recorded %.3fs after ingest", *key, waited)


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> AcquittalStats:
    await check_kafka_access(settings)  # a wrong credential or TLS setting: exit 2, not a retry loop
    topics = settings.topics
    stop = stop or asyncio.Event()
    acquitter = Acquitter(
        settings.synthesis_events, settings.late_after_seconds, topics=topics, keys=record_keys(settings)
    )
    ops = Ops("acquittal", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, client_options(settings)))
    await ops.start()
    try:
        log.info("acquittal ready")
        await run_stream(
            settings,
            "acquittal",
            [topics.receipts, topics.rejected],
            acquitter.handle,
            stop,
            acknowledged=acquitter.acknowledged,
            commit_interval=COMMIT_INTERVAL,
        )
    finally:
        await ops.stop()
    return acquitter.stats


def run(settings: Settings) -> None:
    """``coffre acquittal``: until SIGTERM or SIGINT."""
    try:
        run_until_signalled(serve, settings)
    except InvalidSessionTimeoutError:
        configuration_error(
            "COFFRE_KAFKA_SESSION_SECONDS (default: COFFRE_INGEST_SESSION_SECONDS): the brokers refuse "
            "this group session (below their group.min.session.timeout.ms, 6 s on Apache Kafka by "
            "default): raise it, or lower the brokers' minimum"
        )
