"""The vault service: aiokafka, manual commits. Per batch: append -> fsync -> receipts
(awaited) -> commit offsets -> seal the lots that are due. SIGTERM finishes the batch in
hand, seals what waits, then exits."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from coffre.adapters.archive import archive_storage, signer
from coffre.adapters.journal import JournalSet
from coffre.adapters.service import kafka_endpoints, run_until_signalled
from coffre.config import Settings

from .recorder import RecordCounts, Recorder, VaultHalt
from .sealer import ArchiveMismatch, Sealer

log = logging.getLogger("coffre.vault")
FATAL_EXIT = 70


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> RecordCounts:
    topics = settings.topics
    stop = stop or asyncio.Event()
    journals = JournalSet(Path(settings.data_dir) / "vault" / "journal")
    recorder = Recorder(journals)
    sealer = Sealer(
        archive_storage(settings),
        signer(settings),
        journals,
        max_events=settings.lot_max_events,
        max_age=settings.lot_max_age_seconds,
    )
    try:
        sealer.start()
        async with kafka_endpoints(settings, "vault", topics.normalized) as kafka:
            log.info("vault ready: recording %s, sealing into %s", topics.normalized, settings.archive_root)
            while not stop.is_set():
                batches = await kafka.consumer.getmany(timeout_ms=100, max_records=settings.batch_max)
                if batches:
                    receipts = recorder.append(
                        [
                            (r.value or b"", list(r.headers or ()))
                            for records in batches.values()
                            for r in records
                        ]
                    )
                    await asyncio.to_thread(recorder.sync)  # durable: only now may receipts exist
                    await kafka.send_all(
                        topics.receipts,
                        ((str(r.id_coffre).encode(), r.encode(), r.correlation_id) for r in receipts),
                    )
                    kafka.committer.commit({tp: records[-1].offset + 1 for tp, records in batches.items()})
                    for coffre in {(r.id_oper, r.id_coffre) for r in receipts}:
                        sealer.recorded(*coffre)
                sealer.seal_due()
        recorder.sync()
        sealer.seal_all()  # what waits is sealed before the vault stops: the archive is complete
    finally:
        journals.close()
    return recorder.counts


def run(settings: Settings) -> None:
    """``coffre vault``: until SIGTERM or SIGINT."""
    try:
        run_until_signalled(serve, settings)
    except (VaultHalt, ArchiveMismatch):
        log.critical("vault halted: the chain's invariants would break; nothing committed", exc_info=True)
        raise SystemExit(FATAL_EXIT) from None


__all__ = ["run", "serve"]
