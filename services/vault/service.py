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
from coffre.adapters.storage import ArchiveStorage
from coffre.adapters.stream import (
    Batch,
    Record,
    host_ordinal,
    owned_partitions,
    run_stream,
    run_until_signalled,
)
from coffre.config import Settings, configuration_error, paths
from coffre.domain.messages import now_iso
from coffre.domain.signing import Signer
from coffre.domain.timestamp import load_trust_files
from coffre.domain.witness import load_public_keys
from coffre.logs import bind
from coffre.ops import BrokerCheck, Ops, in_thread, writable_dir

from .evidence import EvidenceCollector, collector
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


def evidence_collector(settings: Settings, storage: ArchiveStorage) -> EvidenceCollector:
    """One thread per configured TSA and witness (none configured: a collector that does nothing).
    A certificate or key file that cannot be read stops the vault at start (exit 2)."""
    try:
        tsa_trust = load_trust_files(paths(settings.tsa_certs)) if settings.tsa_endpoints else []
        keys = [k for path in paths(settings.witness_keys) for k in load_public_keys(path.read_bytes())]
    except (OSError, ValueError) as exc:
        configuration_error(f"COFFRE_TSA_CERTS or COFFRE_WITNESS_KEYS: {exc}")
    return collector(
        storage,
        tsas=settings.tsa_endpoints,
        tsa_trust=tsa_trust,
        witnesses=settings.witness_endpoints,
        witness_ca=settings.witness_ca,
        witness_keys=keys,
        timeout=settings.tsa_timeout_seconds,
        max_retry_delay=settings.evidence_max_retry_seconds,
    )


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
    evidence = evidence_collector(settings, storage)
    sealer = Sealer(
        storage,
        key,
        journals,
        max_events=settings.lot_max_events,
        max_age=settings.lot_max_age_seconds,
        on_checkpoint=evidence.nudge,
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
        evidence.start()  # TSAs and witnesses: never a readiness check, never waited for
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
        # the last checkpoints' tokens and cosignatures, when the TSAs and witnesses answer at once
        if not await asyncio.to_thread(evidence.drain, settings.shutdown_timeout_seconds / 4):
            log.warning("the last checkpoints' evidence is not all fetched yet (the next start resumes)")
    except (VaultHalt, ArchiveMismatch) as exc:
        ops.halt(str(exc))
        raise
    finally:
        sealing.stop()
        evidence.stop()
        if not await asyncio.to_thread(sealing.join, settings.shutdown_timeout_seconds):
            log.error("the sealer did not stop within %gs", settings.shutdown_timeout_seconds)
        if not await asyncio.to_thread(evidence.join, settings.shutdown_timeout_seconds):
            log.warning("a TSA or witness call was still in flight at shutdown (the next start resumes)")
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
