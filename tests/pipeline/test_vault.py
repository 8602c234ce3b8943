"""The vault service on a real broker, in this process: no receipt before the fsync returns,
redelivery, a restart on a journal with a torn tail, receipts while a seal is held, and a
halt when the sealer finds an archive its journal does not describe."""

from __future__ import annotations

import asyncio
import os
import threading

import coffre_vault.service as vault_service
import pytest
from coffre_vault.history import recorded_events
from coffre_vault.recorder import VaultHalt
from coffre_vault.sealer import ArchiveMismatch, Sealer
from coffre_vault.service import serve

import coffre.adapters.journal as journal_module
from coffre.adapters.archive import signer, signing_files
from coffre.adapters.journal import JOURNAL_NAME, JournalSet
from coffre.adapters.kafka import ensure_topics
from coffre.adapters.storage import ArchiveStorage, LocalStorage
from coffre.commands.verify import verify_archive
from coffre.config import Settings
from coffre.domain.chain import GENESIS, chain_hash

from events import POINSCRIT
from ingest_fold import IngestFold
from pipeline.groups import wait_for_group
from pipeline.kafka_io import normalized_rows, publish_rows, read_receipts
from pipeline.stack_settings import stack_settings


def players(first: int, count: int) -> list[bytes]:
    return [
        POINSCRIT.replace(b"<IDJoueur>p-1<", f"<IDJoueur>v-{n}<".encode())
        for n in range(first, first + count)
    ]


@pytest.fixture
def settings(kafka_bootstrap, topic_prefix, tmp_path) -> Settings:
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        partitions=2,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_partitions))
    return settings


class FsyncGate:
    """os.fsync that, once armed, blocks in every thread but the main one (the vault's group
    commit runs in a worker thread) until released."""

    def __init__(self) -> None:
        self.real = os.fsync
        self.armed = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        if self.armed.is_set() and threading.current_thread() is not threading.main_thread():
            self.entered.set()
            assert self.release.wait(60), "the test never released the fsync"
        self.real(fd)


def test_no_receipt_exists_before_the_fsync_returns(settings, monkeypatch, tmp_path):
    gate = FsyncGate()
    monkeypatch.setattr(journal_module.os, "fsync", gate)
    rows = normalized_rows(IngestFold(), settings.topics, players(0, 20))
    bootstrap, receipts_topic = settings.bootstrap_servers, settings.topics.receipts

    async def scenario() -> tuple[int, int]:
        stop = asyncio.Event()
        vault = asyncio.create_task(serve(settings, stop))
        gate.armed.set()
        await publish_rows(bootstrap, rows)
        entered = await asyncio.to_thread(gate.entered.wait, 60)
        assert entered, "the vault never reached its fsync"
        await asyncio.sleep(1.0)  # time enough for a receipt sent too early to land
        during = await read_receipts(bootstrap, receipts_topic, 1, timeout=1.0)
        gate.release.set()
        after = await read_receipts(bootstrap, receipts_topic, len(rows), timeout=30)
        stop.set()
        await vault
        return len(during), len({r.id_evt for r in after})

    during, after = asyncio.run(scenario())
    assert during == 0, "a receipt was published while the fsync had not returned"
    assert after == len(rows)


def test_redelivery_and_restart_on_a_torn_tail(settings, tmp_path):
    store = IngestFold()
    first = normalized_rows(store, settings.topics, players(0, 10))
    bootstrap, topics = settings.bootstrap_servers, settings.topics

    async def run_vault_until(receipts: int) -> list:
        stop = asyncio.Event()
        vault = asyncio.create_task(serve(settings, stop))
        found = await read_receipts(bootstrap, topics.receipts, receipts, timeout=60)
        stop.set()
        await vault
        return found

    asyncio.run(publish_rows(bootstrap, first))
    assert len(asyncio.run(run_vault_until(10))) == 10

    journal_file = tmp_path / "vault" / "journal" / "0099" / "7" / JOURNAL_NAME
    size = journal_file.stat().st_size
    with open(journal_file, "ab") as torn:  # what a kill -9 in the middle of a write leaves
        torn.write(journal_file.read_bytes()[: size // 20])

    second = normalized_rows(store, settings.topics, players(10, 5), start_offset=10)
    asyncio.run(publish_rows(bootstrap, [first[3], *second, first[3]]))  # 4 redelivered twice
    receipts = asyncio.run(run_vault_until(17))
    assert len(receipts) == 17
    by_id: dict[int, set[str]] = {}
    for r in receipts:
        by_id.setdefault(r.id_evt, set()).add(r.chain_hash)
    assert sorted(by_id) == list(range(1, 16))
    assert all(len(hashes) == 1 for hashes in by_id.values()), "a redelivery got another chain hash"

    records = recorded_events(LocalStorage(tmp_path / "archive"), tmp_path / "vault" / "journal", "0099", 7)
    assert [r.id_evt for r in records] == list(range(1, 16))
    previous = GENESIS
    for record in records:
        previous = chain_hash(previous, record.event)
        assert record.chain_hash == previous and by_id[record.id_evt] == {previous.hex()}


def test_vault_replicas_share_the_coffres_by_partition_and_commit_their_offsets(settings, tmp_path):
    """Two replicas sharing the partitions through their group: every coffre is recorded by
    exactly one of them, the one its partition went to, and after a restart (everything sealed
    at the stop) neither reads again what it had committed."""
    from coffre.domain.routing import coffre_partition

    coffres = range(1, 7)
    events = [
        POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{c}<".encode()).replace(b"p-1", f"r-{c}-{n}".encode())
        for c in coffres
        for n in range(4)
    ]
    rows = normalized_rows(IngestFold(), settings.topics, events)
    replicas = [
        settings.model_copy(update={"vault_replicas": 2, "vault_ordinal": i, "data_dir": tmp_path / f"v{i}"})
        for i in range(2)
    ]
    bootstrap = settings.bootstrap_servers
    group = f"{settings.topic_prefix}vault"

    async def run_replicas(expected: int, publish: bool = False) -> list:
        stops = [asyncio.Event() for _ in replicas]
        vaults = [asyncio.create_task(serve(s, stop)) for s, stop in zip(replicas, stops, strict=True)]
        if publish:  # once both are in the group: a replica alone first would take every partition
            await asyncio.to_thread(wait_for_group, bootstrap, group, len(replicas))
            await publish_rows(bootstrap, rows)
        found = await read_receipts(bootstrap, settings.topics.receipts, expected, timeout=60)
        await asyncio.sleep(1.0)  # time for a second receipt of anything read twice
        # one after the other, as a rolling update stops them: a replica seals only while it holds
        # the group's lease, and one leaving starts a rebalance; two stopping at once may each find
        # the lease gone before their last seal (nothing lost: the next start records them again,
        # which this test's second run would count), so the second waits for the group to settle
        stops[0].set()
        first = await vaults[0]
        await asyncio.to_thread(wait_for_group, bootstrap, group, 1)
        await asyncio.sleep(1.0)  # two of its heartbeats: its lease renewed after the new assignment
        stops[1].set()
        return [first, await vaults[1]], found

    counts, receipts = asyncio.run(run_replicas(len(rows), publish=True))
    assert len(receipts) == len(rows)
    assert sum(c.recorded for c in counts) == len(rows) and all(c.recorded for c in counts)
    held = []
    for replica in replicas:
        with JournalSet(replica.data_dir / "vault" / "journal") as journals:
            held.append({coffre for _, coffre in journals.coffres()})
    assert held[0] | held[1] == set(coffres) and not held[0] & held[1]
    for share in held:  # a partition's coffres all went to one replica
        partitions = {coffre_partition(c, settings.partitions) for c in share}
        assert share == {c for c in coffres if coffre_partition(c, settings.partitions) in partitions}

    counts, _ = asyncio.run(run_replicas(len(rows)))
    assert [(c.recorded, c.redelivered) for c in counts] == [(0, 0), (0, 0)], "offsets were not committed"


class HeldStorage:
    """The vault's real archive storage, whose writes wait until the test releases them: a seal
    held as long as a slow S3 put would hold it."""

    def __init__(self, real: ArchiveStorage) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()
        self.created = 0

    def create(self, key: str, data: bytes) -> str:
        self.entered.set()
        assert self.release.wait(120), "the test never released the seal"
        self.created += 1
        return self.real.create(key, data)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


def test_receipts_are_published_while_a_seal_is_held(settings, monkeypatch, tmp_path):
    settings = settings.model_copy(update={"lot_max_events": 5})
    held: list[HeldStorage] = []
    real_storage = vault_service.archive_storage

    def slow_storage(s: Settings) -> HeldStorage:
        held.append(HeldStorage(real_storage(s)))
        return held[-1]

    monkeypatch.setattr(vault_service, "archive_storage", slow_storage)
    rows = normalized_rows(IngestFold(), settings.topics, players(0, 25))
    bootstrap, receipts_topic = settings.bootstrap_servers, settings.topics.receipts

    async def scenario() -> tuple[list, list, int]:
        stop = asyncio.Event()
        vault = asyncio.create_task(serve(settings, stop))
        await publish_rows(bootstrap, rows[:5])  # a full lot: its seal starts, and is held
        async with asyncio.timeout(60):
            while not held:  # the vault makes its storage after its Kafka checks
                await asyncio.sleep(0.05)
        entered = await asyncio.to_thread(held[0].entered.wait, 60)
        assert entered, "the vault never began to seal"
        await publish_rows(bootstrap, rows[5:])
        receipts = await read_receipts(bootstrap, receipts_topic, len(rows), timeout=60)
        assert not held[0].release.is_set()
        stored_meanwhile = held[0].created
        lots_meanwhile = sorted(settings.archive_root.rglob("*.xml"))
        held[0].release.set()
        stop.set()
        await vault
        return receipts, lots_meanwhile, stored_meanwhile

    receipts, lots_meanwhile, stored_meanwhile = asyncio.run(scenario())
    assert sorted({r.id_evt for r in receipts}) == list(range(1, 26)), "a receipt waited for the seal"
    assert (stored_meanwhile, lots_meanwhile) == (0, []), "the seal was not held: the test proves nothing"
    lots = [p for p in settings.archive_root.rglob("*.xml") if "checkpoints" not in p.parts]
    assert len(lots) == 5  # 25 events in lots of 5: sealed once released, or at shutdown
    _, cert = signing_files(settings)
    report = verify_archive(settings.archive_root, [cert])
    assert report.ok, report.lines()
    assert report.coffres[0].events == 25


def _other_lot(settings, events: list[bytes], tmp_path) -> None:
    """Lot 1 of coffre 0099/8 in the vault's archive, sealed by another vault from ``events``."""
    settings.archive_root.mkdir(parents=True, exist_ok=True)
    with JournalSet(tmp_path / "other-journal") as journals:
        journal = journals.journal("0099", 8)
        for n, row in enumerate(normalized_rows(IngestFold(), settings.topics, events), start=1):
            journal.append(n, row.value)
        journal.sync()
        sealer = Sealer(LocalStorage(settings.archive_root), signer(settings), journals, max_events=3)
        sealer.recorded("0099", 8)
        sealer.seal_all()


def test_events_that_disagree_with_the_archive_halt_the_vault_without_a_receipt(settings, tmp_path):
    """The archive already holds lot 1 of coffre 0099/8 (IDEvt 1..3), written from other bytes
    than those the vault is now given for the same IDEvt (a second writer): the vault continues
    the archive, finds each one differs from its lot, and stops (VaultHalt, exit 70 from
    ``coffre vault``) without a receipt for any of them."""
    coffre8 = [e.replace(b"<IDCoffre>7<", b"<IDCoffre>8<") for e in players(0, 6)]
    _other_lot(settings, coffre8[3:], tmp_path)
    rows = normalized_rows(IngestFold(), settings.topics, coffre8[:3])

    async def scenario() -> None:
        vault = asyncio.create_task(serve(settings, asyncio.Event()))
        await publish_rows(settings.bootstrap_servers, rows)
        await asyncio.wait_for(vault, 60)

    with pytest.raises(VaultHalt, match="IDEvt 1 is already recorded with other bytes"):
        asyncio.run(scenario())
    receipts = asyncio.run(read_receipts(settings.bootstrap_servers, settings.topics.receipts, 1, timeout=3))
    assert receipts == []


def test_a_journal_that_disagrees_with_the_archive_halts_the_vault_at_start(settings, tmp_path):
    """The vault's own journal holds IDEvt 1..3 of coffre 0099/8 and the archive a lot 1 sealed
    from other bytes: the vault refuses to extend it (ArchiveMismatch) before recording anything."""
    coffre8 = [e.replace(b"<IDCoffre>7<", b"<IDCoffre>8<") for e in players(0, 6)]
    _other_lot(settings, coffre8[3:], tmp_path)
    with JournalSet(settings.journal_root) as journals:
        journal = journals.journal("0099", 8)
        for n, row in enumerate(normalized_rows(IngestFold(), settings.topics, coffre8[:3]), start=1):
            journal.append(n, row.value)

    with pytest.raises(ArchiveMismatch, match="does not end where the journal says IDEvt 3 ends"):
        asyncio.run(asyncio.wait_for(serve(settings, asyncio.Event()), 60))
