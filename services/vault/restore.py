"""``coffre restore``: check the archive before a vault starts on it without its journal (after
the loss of its volume), and rewind offsets an earlier version committed.

The vault itself needs no restore: a journal opened for a coffre continues the archive's newest
lot (:meth:`~coffre_vault.sealer.Sealer.align`), and the vault's committed offsets never pass an
unsealed event, so what was recorded but not sealed is read again from the normalized topic.
What ``coffre restore`` adds is the auditor's check of every coffre it would start from
(signatures, chain, IDEvt continuity, Merkle roots, checkpoints): a coffre whose archive does
not verify is refused, and nothing of it is started. Each verified coffre without a journal
gets an empty one that continues its newest lot; the newest lot's missing checkpoint (the vault
was killed between the two) is written, and an archive from before seal notes gets them.

Vaults of versions before journal segments committed offsets past what they had sealed:
``rewind`` moves the vault group's committed offsets back to the first record published shortly
before the oldest last seal among the restored coffres, so the vault reads those events again;
what the archive already holds comes back as redeliveries (checked against its lot), the rest is
appended in order.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from coffre.adapters.archive import archive_storage, signer, trust_store
from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka_security import client_options
from coffre.adapters.storage import ArchiveStorage
from coffre.config import Settings
from coffre.domain.lot import checkpoint_key, parse_document, parse_lot_name, read_lot
from coffre.domain.routing import coffre_partition
from coffre.domain.verify import verify_coffre

from .sealer import Sealer

log = logging.getLogger("coffre.vault.restore")


class RestoreRefused(Exception):
    """The archive of a coffre does not verify: nothing of it is restored."""


@dataclass(frozen=True)
class RestoredCoffre:
    id_oper: str
    id_coffre: int
    lots: int
    last_id_evt: int
    last_sealed_at: dt.datetime | None
    restored: bool
    """False when the vault already had a journal for it (left as it is)."""


def _archive_files(storage: ArchiveStorage) -> dict[tuple[str, int], tuple[list, list]]:
    found: dict[tuple[str, int], tuple[list, list]] = {}
    for key in storage.list(""):
        parsed = parse_lot_name(key.rsplit("/", 1)[-1])
        if parsed is None:
            continue
        lots, checkpoints = found.setdefault((parsed[0], parsed[1]), ([], []))
        (checkpoints if "/checkpoints/" in f"/{key}" else lots).append(key)
    return found


def restore_journals(
    settings: Settings, owns: Callable[[int], bool] | None = None, storage: ArchiveStorage | None = None
) -> list[RestoredCoffre]:
    """Restore every coffre of the archive that this vault owns (``owns(partition)``, all when
    None) and has no journal for. Raises :class:`RestoreRefused` on an archive that does not
    verify; coffres restored before it stay restored."""
    storage = storage or archive_storage(settings)
    trust = trust_store(settings)
    root = settings.journal_root
    scratch = Path(settings.data_dir) / "vault" / "restoring"  # what an earlier version left
    shutil.rmtree(scratch, ignore_errors=True)
    journals = JournalSet(root)
    existing = set(journals.coffres())
    journals.close()
    results = []
    for (id_oper, id_coffre), (lot_keys, checkpoint_keys) in sorted(_archive_files(storage).items()):
        if owns is not None and not owns(coffre_partition(id_coffre, settings.partitions)):
            continue
        # each lot read when the check reaches it: one lot in memory at a time, whatever the history
        lots = [(key, lambda key=key: storage.read(key)) for key in sorted(lot_keys)]
        newest = max(lot_keys, key=lambda key: parse_lot_name(key)[2], default=None)
        last = read_lot(parse_document(storage.read(newest))).header if newest else None
        summary = dict(
            id_oper=id_oper,
            id_coffre=id_coffre,
            lots=len(lots),
            last_id_evt=last.last_id_evt if last else 0,
            last_sealed_at=last.sealed_at if last else None,
        )
        if (id_oper, id_coffre) in existing:
            results.append(RestoredCoffre(**summary, restored=False))
            continue
        checkpoints = [(key, lambda key=key: storage.read(key)) for key in sorted(checkpoint_keys)]
        report = verify_coffre(id_oper, id_coffre, lots, checkpoints, trust)
        # A vault killed between its newest lot and that lot's checkpoint mends it at its next
        # start (Sealer): here the volume is gone, so the restored journal is handed to the same
        # mend below. Only that lot's missing checkpoint is let through; the lot itself verified.
        unsealed = newest is not None and not storage.exists(
            checkpoint_key(id_oper, id_coffre, parse_lot_name(newest)[2])
        )
        failures = [
            f for f in report.failures if not (unsealed and f.check == "checkpoint" and f.where == newest)
        ]
        if failures:
            raise RestoreRefused(
                f"coffre {id_oper}/{id_coffre}: the archive does not verify, nothing restored: "
                + "; ".join(str(f) for f in failures[:5])
            )
        sealer = Sealer(storage, signer(settings), JournalSet(scratch))
        with JournalSet(root, on_open=sealer.align) as journals:
            journals.journal(id_oper, id_coffre)  # an empty journal after the newest lot; mends
        if unsealed:
            log.info("coffre %s/%s: the missing checkpoint of %s written", id_oper, id_coffre, newest)
        log.info(
            "restored coffre %s/%s: %d lots, IDEvt 1..%d",
            id_oper,
            id_coffre,
            len(lots),
            summary["last_id_evt"],
        )
        results.append(RestoredCoffre(**summary, restored=True))
    shutil.rmtree(scratch, ignore_errors=True)
    return results


async def rewind(
    settings: Settings,
    since: dt.datetime | None,
    owns: Callable[[int], bool] | None = None,
    wait_for_group: float = 60.0,
) -> dict[int, int]:
    """Set the vault group's committed offsets on the normalized topic (the partitions it owns)
    to the first record at or after ``since`` (None: the beginning). Run it while the vault is
    stopped. Returns partition -> offset."""
    topic = settings.topics.normalized
    # joining the group (rather than committing from outside it) works on every broker; the
    # join waits until a vault killed a moment ago has left (its session timed out)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}vault",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        **client_options(settings),
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + wait_for_group
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise RestoreRefused(
                    f"no partition of {topic} assigned after {wait_for_group:g}s: "
                    f"stop every vault before restoring"
                )
            await consumer.getmany(timeout_ms=500, max_records=1)  # drives the join
        partitions = sorted(
            (tp for tp in consumer.assignment() if owns is None or owns(tp.partition)),
            key=lambda tp: tp.partition,
        )
        beginnings = await consumer.beginning_offsets(partitions)
        if since is None:
            offsets = dict(beginnings)
        else:
            found = await consumer.offsets_for_times({tp: int(since.timestamp() * 1000) for tp in partitions})
            ends = await consumer.end_offsets(partitions)
            offsets = {tp: found[tp].offset if found.get(tp) else ends[tp] for tp in partitions}
        if offsets:
            await consumer.commit(offsets)
        return {tp.partition: offset for tp, offset in offsets.items()}
    finally:
        await consumer.stop()
