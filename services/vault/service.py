"""The vault service: aiokafka, manual commits. Per batch: append -> fsync -> receipts
(awaited) -> commit offsets -> tell the sealer which coffres grew. Sealing runs in its own
thread (:class:`~coffre_vault.sealer.SealerThread`): no seal or storage call ever holds a
receipt. SIGTERM finishes the batch in hand, seals what waits, then exits. It also serves the
regulator's HTTPS API and the health, readiness and metrics endpoints.

Replicas share the normalized topic's partitions through the vault's consumer group: when one
dies, the others take its partitions over after its session times out, without its volume.
That holds because the committed offset never passes an unsealed event
(:meth:`~coffre_vault.recorder.Recorder.commit_offsets`) and a journal opened for a coffre
continues the archive's newest lot (:meth:`~coffre_vault.sealer.Sealer.align`). A replica that
loses partitions in a rebalance stops sealing their coffres first; one whose membership lapsed
(paused past its session) seals nothing until its group says it is current again
(:class:`GroupLease`); and a lot number is claimed once in the archive (seal notes).

Each commit also carries, in its metadata, how far the partition's receipts were acknowledged
(:mod:`~coffre_vault.acknowledged`): a vault given the partition (after a restart, or again in a
rebalance) reads its unsealed events again without sending their receipts again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from coffre.adapters.archive import archive_storage, signer
from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import COMMIT_INTERVAL, topic_retention
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.storage import ArchiveStorage
from coffre.adapters.stream import (
    INVARIANT_EXIT,
    Batch,
    Record,
    Stream,
    ensure_coffre_topics,
    group_options,
    host_ordinal,
    run_until_signalled,
    stream,
)
from coffre.config import Settings, configuration_error, paths
from coffre.domain.messages import now_iso
from coffre.domain.signing import Signer
from coffre.domain.timestamp import load_trust_files
from coffre.domain.witness import load_public_keys
from coffre.logs import bind
from coffre.ops import BrokerCheck, Ops, in_thread, writable_dir

from . import acknowledged
from .evidence import EvidenceCollector, collector
from .recorder import RecordCounts, Recorder, VaultHalt
from .sealer import ArchiveMismatch, Sealer, SealerThread

log = logging.getLogger("coffre.vault")


class GroupLease:
    """Whether this vault's group membership is current: its last heartbeat the coordinator
    accepted (or its last assignment) is recent, within two thirds of the session timeout.

    A vault paused past its session (SIGSTOP, a frozen VM) wakes with its partitions already
    given to another replica; until a heartbeat tells it so, its sealer must not write. aiokafka
    keeps that time to itself, so the consumer's coordinator is wrapped here once it exists."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.window = session_timeout_ms / 1000 * 2 / 3
        self._renewed = -float("inf")  # nothing is sealed before the group's first assignment

    def watch(self, consumer: AIOKafkaConsumer) -> None:
        coordinator = getattr(consumer, "_coordinator", None)
        heartbeat = getattr(coordinator, "_do_heartbeat", None)
        if heartbeat is None:  # an aiokafka without it: the lease stays as the assignments renew it
            log.warning("the group lease cannot follow heartbeats with this aiokafka")
            return

        async def renewing() -> bool:
            started = time.monotonic()
            accepted = await heartbeat()
            if accepted:
                self._renewed = max(self._renewed, started)
            return accepted

        coordinator._do_heartbeat = renewing

    def renew(self) -> None:
        self._renewed = time.monotonic()

    def current(self) -> bool:
        return time.monotonic() - self._renewed < self.window


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


RETENTION_WARNING_SECONDS = 24 * 3600
"""Below this retention of the normalized topic, the vault warns at start (docs/operations.md)."""


async def check_retention(settings: Settings) -> None:
    """The normalized topic must keep a record until the vault has sealed it: a replica that takes a
    coffre over reads its unsealed events there again. A retention shorter than twice the lot age
    cannot hold (exit 2); one under a day holds only while the archive answers (a warning): the
    unsealed window grows for as long as the archive is unreachable."""
    topic = settings.topics.normalized
    retention_ms, retention_bytes = await topic_retention(
        settings.bootstrap_servers, topic, client_options(settings)
    )
    if retention_ms is not None and retention_ms < 2000 * settings.lot_max_age_seconds:
        configuration_error(
            f"topic {topic} keeps records {retention_ms / 1000:g}s (retention.ms), less than twice "
            f"COFFRE_LOT_MAX_AGE_SECONDS ({settings.lot_max_age_seconds:g}s): a vault taking a coffre over "
            "would not find its unsealed events; raise the topic's retention.ms (docs/operations.md)"
        )
    if retention_ms is not None and retention_ms < RETENTION_WARNING_SECONDS * 1000:
        log.warning(
            "topic %s keeps records %gs: an archive unreachable for longer loses the unsealed events a "
            "take-over would need (docs/operations.md, vault failover)",
            topic,
            retention_ms / 1000,
        )
    if retention_bytes is not None:
        log.warning(
            "topic %s keeps at most %d bytes per partition (retention.bytes): a take-over needs every "
            "unsealed event, whatever the traffic; prefer a time retention (docs/operations.md)",
            topic,
            retention_bytes,
        )


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> RecordCounts:
    await check_kafka_access(settings)  # a wrong credential or TLS setting: exit 2, not a retry loop
    await ensure_coffre_topics(settings)
    await check_retention(settings)
    topics = settings.topics
    stop = stop or asyncio.Event()
    if settings.vault_replicas > 1:
        bind(vault_ordinal=settings.vault_ordinal if settings.vault_ordinal is not None else host_ordinal())
    journal_dir = settings.journal_root
    journal_dir.mkdir(parents=True, exist_ok=True)
    journals = JournalSet(journal_dir)
    keys = record_keys(settings)
    storage = archive_storage(settings)
    key = signer(settings)
    evidence = evidence_collector(settings, storage)
    sealer = Sealer(
        storage,
        key,
        journals,  # opening a coffre's journal aligns it with the archive (Sealer.align)
        max_events=settings.lot_max_events,
        max_age=settings.lot_max_age_seconds,
        keep_seconds=settings.journal_keep_seconds,
        on_checkpoint=evidence.nudge,
    )
    recorder = Recorder(
        journals,
        keys=keys,
        partitions=settings.partitions,
        sealed=sealer.sealed_id_evt,
        sealed_event=sealer.sealed_event,
    )
    ops = Ops("vault", settings)
    ops.add_check("broker", BrokerCheck(settings.bootstrap_servers, client_options(settings)))
    ops.add_check("journal", writable_dir(journal_dir))
    ops.add_check("archive", in_thread(storage.probe))
    ops.add_check("signing_key", in_thread(key_check(key)))
    await ops.start()
    lease = GroupLease(group_options(settings)["session_timeout_ms"])
    sealing = SealerThread(sealer, may_seal=lease.current)
    try:
        sealer.start()  # start-up recovery, before anything new is recorded
        sealing.start()
        evidence.start()  # TSAs and witnesses: never a readiness check, never waited for
        log.info("vault ready: recording %s, sealing into %s", topics.normalized, settings.archive_root)

        async with stream(settings, "vault", topics.normalized, commit_interval=COMMIT_INTERVAL) as s:
            lease.watch(s.consumer)
            await _run(s, settings, recorder, journals, sealing, lease, stop)
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


async def _run(
    s: Stream,
    settings: Settings,
    recorder: Recorder,
    journals: JournalSet,
    sealing: SealerThread,
    lease: GroupLease,
    stop: asyncio.Event,
) -> None:
    """The recording loop, the commits it may make, and what a rebalance moves."""
    topics = settings.topics
    keys = recorder.keys
    assert keys is not None
    consumed: dict[int, int] = {}  # partition -> the next offset to read, its records' receipts acknowledged
    committed: dict[int, tuple[int, int]] = {}  # partition -> (offset, acknowledged position) handed over

    def commit_filter(offsets: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndMetadata]:
        # Stream.run calls this once the batch's receipts are acknowledged: only then may the
        # acknowledged position (the metadata) move past its records
        consumed.update((tp.partition, offset) for tp, offset in offsets.items())
        return allowed()

    def allowed() -> dict[TopicPartition, OffsetAndMetadata]:
        """The commits that move: never past an unsealed event, with the acknowledged position."""
        found = {}
        for p, offset in recorder.commit_offsets(consumed).items():
            position = consumed[p]
            if committed.get(p) == (offset, position):
                continue
            committed[p] = (offset, position)
            metadata = acknowledged.encode(keys, topics.normalized, p, offset, position)
            found[TopicPartition(topics.normalized, p)] = OffsetAndMetadata(offset, metadata)
        return found

    async def step(batch: Batch) -> list[Record]:
        recorded = recorder.record_records(r for rs in batch.values() for r in rs)
        await asyncio.to_thread(recorder.sync)  # durable: only now may receipts exist
        sealing.recorded(recorder.durable())  # a dict update: the seals happen elsewhere
        return [(topics.receipts, *r.record(keys), None) for r in recorder.receipts(recorded, now_iso())]

    async def tick(final: bool) -> None:
        sealing.check()  # the archive and the journal disagree: halt
        if final:
            recorder.sync()
            sealing.recorded(recorder.durable())
            # what waits is sealed before the vault stops: the archive is complete, and the
            # offsets can be committed up to what was read
            await asyncio.to_thread(sealing.finish)
        if consumed:
            s.committer.commit(allowed())  # seals since the last batch let the commit move on

    def moved_away(partitions: set[int]) -> None:
        for p in partitions:
            consumed.pop(p, None)
            committed.pop(p, None)

    async def positions(assigned: list[TopicPartition]) -> dict[int, int]:
        return await acknowledged.read_positions(s.consumer, keys, assigned)

    handover = Handover(
        s.lock, recorder, journals, sealing, lease, settings.partitions, moved_away, acknowledged=positions
    )
    await s.run(step, stop, listener=handover, tick=tick, commit_filter=commit_filter)


class Handover(ConsumerRebalanceListener):
    """What a rebalance moves. The coffres of revoked partitions are let go: no longer recorded nor
    sealed here (``moved_away`` is told the partitions, for the loop's offsets). At an assignment, so
    are the coffres of every partition not held here without a break until then, assigned now or not:
    those loaded at start (:meth:`Sealer.start`), before the group gave their partition, and any
    opened since the last revocation. Such a coffre is opened again when its next event comes, and
    its journal aligned with the archive then (:meth:`Sealer.align`): another replica may have sealed
    it in between, and a vault that continued from its older alignment passed over every event after
    that replica's lot as "ahead of the chain" and committed past them (the coffre stalled for good).

    ``acknowledged`` reads the acknowledged positions of the assigned partitions (their committed
    offsets' metadata, :func:`coffre_vault.acknowledged.read_positions`) for the recorder, before any
    of their records is recorded: the receipts below them are not sent again."""

    def __init__(
        self,
        lock: asyncio.Lock,
        recorder: Recorder,
        journals: JournalSet,
        sealing: SealerThread,
        lease: GroupLease,
        partitions: int,
        moved_away: Callable[[set[int]], None] = lambda _: None,
        *,
        acknowledged: Callable[[list[TopicPartition]], Awaitable[dict[int, int]]] | None = None,
    ):
        self.lock = lock
        self.recorder = recorder
        self.journals = journals
        self.sealing = sealing
        self.lease = lease
        self.partitions = partitions
        self.moved_away = moved_away
        self.acknowledged = acknowledged
        self.held: set[int] = set()
        """The partitions assigned here and not revoked since."""

    async def let_go(self, partitions: set[int]) -> list[tuple[str, int]]:
        """Stop recording and sealing the coffres of these partitions; the caller holds the stream's
        lock, so no step is in flight."""
        moved = [c for c in self.journals.opened() if self.recorder.home(c[1]) in partitions]
        if moved:
            await asyncio.to_thread(self.sealing.forget, moved)  # after the seal in hand
            self.journals.close_coffres(moved)
            self.recorder.forget(moved)
        return moved

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        partitions = {tp.partition for tp in revoked}
        if not partitions:
            return
        async with self.lock:  # no step in flight: what it appended is synced and acknowledged
            moved = await self.let_go(partitions)
            self.held -= partitions
            for p in partitions:
                self.recorder.acknowledged.pop(p, None)
            self.moved_away(partitions)
        log.info(
            "partitions %s moved away: %d coffre(s) no longer sealed here", sorted(partitions), len(moved)
        )

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        mine = {tp.partition for tp in assigned}
        async with self.lock:  # no step runs before the positions are known
            await self.let_go(set(range(self.partitions)) - self.held)
            self.held = mine
            if self.acknowledged is not None:
                self.recorder.acknowledged = await self.acknowledged(sorted(assigned))
        self.lease.renew()
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in assigned) or "nothing")
        if self.recorder.acknowledged:
            log.info(
                "receipts acknowledged below offsets %s (partition: offset): not sent again",
                dict(sorted(self.recorder.acknowledged.items())),
            )


def run(settings: Settings) -> None:
    """``coffre vault``: until SIGTERM or SIGINT."""
    try:
        run_until_signalled(serve, settings)
    except (VaultHalt, ArchiveMismatch):
        log.critical("vault halted: the chain's invariants would break; nothing committed", exc_info=True)
        raise SystemExit(INVARIANT_EXIT) from None


__all__ = ["run", "serve"]
