"""The vault service: aiokafka, manual commits. Per batch: append -> fsync -> receipts
(awaited) -> commit offsets -> tell the sealer which coffres grew. Sealing runs in its own
thread (:class:`~coffre_vault.sealer.SealerThread`): no seal or storage call ever holds a
receipt. SIGTERM finishes the batch in hand, seals what waits, then exits. It also serves the
regulator's HTTPS API and the health, readiness and metrics endpoints."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from coffre.adapters.archive import archive_storage, signer
from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import COMMIT_INTERVAL
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.stream import (
    Batch,
    Record,
    host_ordinal,
    owned_partitions,
    run_stream,
    run_until_signalled,
)
from coffre.config import Settings, configuration_error
from coffre.domain.messages import now_iso
from coffre.domain.signing import Signer
from coffre.logs import bind
from coffre.ops import BrokerCheck, Ops, in_thread, writable_dir

from .recorder import RecordCounts, Recorder, VaultHalt
from .sealer import ArchiveMismatch, Sealer, SealerThread

log = logging.getLogger("coffre.vault")
FATAL_EXIT = 70


def partition_owner(settings: Settings) -> Callable[[int], bool] | None:
    """None (join the group) for one vault; the partitions this replica owns for several."""
    if settings.vault_replicas == 1:
        return None
    ordinal = settings.vault_ordinal if settings.vault_ordinal is not None else host_ordinal()
    if ordinal is None or ordinal >= settings.vault_replicas:
        configuration_error(
            f"COFFRE_VAULT_ORDINAL: with COFFRE_VAULT_REPLICAS={settings.vault_replicas}, set it "
            f"(0..{settings.vault_replicas - 1}) or run in a StatefulSet whose host names end in -<ordinal>"
        )
    bind(vault_ordinal=ordinal)
    return owned_partitions(settings.vault_replicas, ordinal)


def key_check(key: Signer) -> Callable[[], None]:
    def check() -> None:
        now = dt.datetime.now(dt.UTC)
        cert = key.certificate
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise RuntimeError(
                f"the signing certificate is valid from {cert.not_valid_before_utc:%Y-%m-%d} "
                f"to {cert.not_valid_after_utc:%Y-%m-%d}"
            )

    return check


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> RecordCounts:
    await check_kafka_access(settings)  # a wrong credential or TLS setting: exit 2, not a retry loop
    topics = settings.topics
    stop = stop or asyncio.Event()
    owns = partition_owner(settings)
    journal_dir = settings.journal_root
    journal_dir.mkdir(parents=True, exist_ok=True)
    journals = JournalSet(journal_dir)
    keys = record_keys(settings)
    recorder = Recorder(journals, keys=keys, partitions=settings.partitions)
    storage = archive_storage(settings)
    key = signer(settings)
    sealer = Sealer(
        storage, key, journals, max_events=settings.lot_max_events, max_age=settings.lot_max_age_seconds
    )
    ops = Ops("vault", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, client_options(settings)))
    ops.add_check("journal", writable_dir(journal_dir))
    ops.add_check("archive", in_thread(storage.probe))
    ops.add_check("signing_key", in_thread(key_check(key)))
    await ops.start()
    sealing = SealerThread(sealer)
    try:
        sealer.start()  # start-up recovery, before anything new is recorded
        sealing.start()
        log.info("vault ready: recording %s, sealing into %s", topics.normalized, settings.archive_root)

        async def step(batch: Batch) -> list[Record]:
            recorded = recorder.record_records(r for rs in batch.values() for r in rs)
            await asyncio.to_thread(recorder.sync)  # durable: only now may receipts exist
            sealing.recorded(recorder.durable())  # a dict update: the seals happen elsewhere
            return [(topics.receipts, *r.record(keys), None) for r in recorder.receipts(recorded, now_iso())]

        async def tick(_: bool) -> None:
            sealing.check()  # the archive and the journal disagree: halt

        await run_stream(
            settings,
            "vault",
            [topics.normalized],
            step,
            stop,
            owns=owns,
            tick=tick,
            commit_interval=COMMIT_INTERVAL,
        )
        recorder.sync()
        sealing.recorded(recorder.durable())
        # what waits is sealed before the vault stops: the archive is complete
        await asyncio.to_thread(sealing.finish)
    except (VaultHalt, ArchiveMismatch) as exc:
        ops.halt(str(exc))
        raise
    finally:
        sealing.stop()
        if not await asyncio.to_thread(sealing.join, settings.shutdown_timeout_seconds):
            log.error("the sealer did not stop within %gs", settings.shutdown_timeout_seconds)
        journals.close()
        await ops.stop()
    return recorder.counts


def run(settings: Settings) -> None:
    """``coffre vault``: until SIGTERM or SIGINT."""
    try:
        run_until_signalled(serve, settings)
    except (VaultHalt, ArchiveMismatch):
        log.critical("vault halted: the chain's invariants would break; nothing committed", exc_info=True)
        raise SystemExit(FATAL_EXIT) from None


__all__ = ["run", "serve"]
