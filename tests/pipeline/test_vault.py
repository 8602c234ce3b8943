"""The vault service on a real broker, in this process: no receipt before the fsync returns,
redelivery, and a restart on a journal with a torn tail."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from coffre_ingest.store import IngestStore
from coffre_vault.service import serve

import coffre.adapters.journal as journal_module
from coffre.adapters.journal import JOURNAL_NAME, JournalSet
from coffre.adapters.kafka import ensure_topics
from coffre.config import Settings
from coffre.domain.chain import GENESIS, chain_hash

from events import POINSCRIT
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
    rows = normalized_rows(IngestStore(tmp_path / "ingest.sqlite"), settings.topics, players(0, 20))
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
    store = IngestStore(tmp_path / "ingest.sqlite")
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

    journals = JournalSet(tmp_path / "vault" / "journal")
    records = list(journals.journal("0099", 7).records())
    journals.close()
    assert [r.id_evt for r in records] == list(range(1, 16))
    previous = GENESIS
    for record in records:
        previous = chain_hash(previous, record.event)
        assert record.chain_hash == previous and by_id[record.id_evt] == {previous.hex()}


def test_vault_replicas_share_the_coffres_by_partition_and_commit_their_offsets(settings, tmp_path):
    """Two replicas with a static share of the partitions (a StatefulSet of 2): every coffre is
    recorded by exactly one of them, the one owning its partition, and after a restart neither
    reads again what it had committed."""
    from coffre_vault.restore import coffre_partition

    coffres = range(1, 7)
    events = [
        POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{c}<".encode()).replace(b"p-1", f"r-{c}-{n}".encode())
        for c in coffres
        for n in range(4)
    ]
    rows = normalized_rows(IngestStore(tmp_path / "ingest.sqlite"), settings.topics, events)
    replicas = [
        settings.model_copy(update={"vault_replicas": 2, "vault_ordinal": i, "data_dir": tmp_path / f"v{i}"})
        for i in range(2)
    ]
    bootstrap = settings.bootstrap_servers

    async def run_replicas(expected: int) -> list:
        stop = asyncio.Event()
        vaults = [asyncio.create_task(serve(s, stop)) for s in replicas]
        await asyncio.sleep(0)
        found = await read_receipts(bootstrap, settings.topics.receipts, expected, timeout=60)
        await asyncio.sleep(1.0)  # time for a second receipt of anything read twice
        stop.set()
        return [await v for v in vaults], found

    asyncio.run(publish_rows(bootstrap, rows))
    counts, receipts = asyncio.run(run_replicas(len(rows)))
    assert len(receipts) == len(rows)
    assert sum(c.recorded for c in counts) == len(rows) and all(c.recorded for c in counts)
    for ordinal, replica in enumerate(replicas):
        with JournalSet(replica.data_dir / "vault" / "journal") as journals:
            held = {coffre for _, coffre in journals.coffres()}
        assert held == {c for c in coffres if coffre_partition(c, settings.partitions) % 2 == ordinal}

    counts, _ = asyncio.run(run_replicas(len(rows)))
    assert [(c.recorded, c.redelivered) for c in counts] == [(0, 0), (0, 0)], "offsets were not committed"
