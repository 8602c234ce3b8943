"""Restoring a vault after the loss of its volume (the archive survived: S3, or a copy):
``coffre restore`` verifies every coffre and starts an empty journal after its newest lot, and
rewinds the vault's offsets; the vault then takes back what was recorded but not sealed from the
topic, and the chain goes on."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time

from coffre.adapters.archive import signing_files
from coffre.adapters.journal import JournalSet
from coffre.client import CoffreClient
from coffre.commands.stack import Stack
from coffre.commands.verify import verify_archive
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.lot import parse_document, read_lot

from .test_crash import wait_for_receipts
from events import POINSCRIT
from pipeline.stack_settings import stack_settings


def players(start: int, count: int) -> list[bytes]:
    return [POINSCRIT.replace(b"p-1", f"restore-{n}".encode()) for n in range(start, start + count)]


def restore(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffre.cli", "restore", *args],
        env=stack.env("vault"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_lost_vault_volume_is_restored_from_the_archive(kafka_bootstrap, topic_prefix, tmp_path):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path / "data",
        archive_dir=tmp_path / "archive",  # survives the volume, as S3 would
        partitions=2,
        lot_max_events=5,
        lot_max_age_seconds=3600,
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()

    async def submit(events: list[bytes]) -> None:
        async with CoffreClient(kafka_bootstrap, settings.topics, settings.synthesis_events) as client:
            for raw in events:
                assert (await client.submit(raw, timeout=60)).status == "recorded"

    try:
        asyncio.run(submit(players(0, 23)))  # 4 lots of 5 sealed, 3 events recorded but not sealed
        deadline = time.monotonic() + 30  # sealing runs off the receipt path: lot 4 follows its receipts
        while not list(settings.archive_root.rglob("0099-7-0000000004.xml")) and time.monotonic() < deadline:
            time.sleep(0.1)
        stack.kill("vault", signal.SIGKILL)
        shutil.rmtree(settings.data_dir / "vault")  # the volume is gone
        # killed between lot 4 and its checkpoint (whether or not it was, here): restore mends it
        for checkpoint in settings.archive_root.rglob("checkpoints/0099-7-0000000004.xml"):
            checkpoint.unlink()
        shutil.copytree(settings.archive_root, tmp_path / "before")

        older = tmp_path / "older-checkpoint-missing"  # only the newest lot's may be missing
        shutil.copytree(settings.archive_root, older)
        next(older.rglob("checkpoints/0099-7-0000000002.xml")).unlink()
        refused = restore(
            Stack(settings.model_copy(update={"archive_dir": older}), bootstrap=kafka_bootstrap)
        )
        assert refused.returncode == 1 and "no checkpoint in the archive for lot 2" in refused.stderr
        assert not (settings.data_dir / "vault" / "journal" / "0099" / "7").exists()

        tampered = tmp_path / "tampered"
        shutil.copytree(settings.archive_root, tampered)
        lot = sorted(tampered.rglob("0099-7-0000000002.xml"))[0]
        lot.write_bytes(lot.read_bytes().replace(b"restore-7", b"restore-X"))
        refused = restore(
            Stack(settings.model_copy(update={"archive_dir": tampered}), bootstrap=kafka_bootstrap)
        )
        assert refused.returncode == 1 and "does not verify" in refused.stderr
        assert not (settings.data_dir / "vault" / "journal" / "0099" / "7").exists()

        result = restore(stack)
        assert result.returncode == 0, result.stderr
        assert list(settings.archive_root.rglob("checkpoints/0099-7-0000000004.xml")), "not mended"
        assert "coffre 0099/7: 4 lot(s), IDEvt 1..20: restored" in result.stdout
        assert "rewound" in result.stdout
        again = restore(stack, "--rewind", "none")
        assert "IDEvt 1..20: kept" in again.stdout

        stack.spawn("vault")
        asyncio.run(submit(players(23, 5)))
        seen = asyncio.run(wait_for_receipts(kafka_bootstrap, settings.topics.receipts, 2, 28, timeout=60))
        assert {id_evt for _, id_evt in seen} == set(range(1, 29))
    finally:
        codes = stack.stop()
    assert all(c == 0 for c in codes.values() if c is not None), codes

    lots = sorted(settings.archive_root.glob("0099/7/*/*/*/0099-7-*.xml"), key=lambda path: path.name)
    records = [event for lot in lots for event in read_lot(parse_document(lot.read_bytes())).events]
    assert [r.id_evt for r in records] == list(range(1, 29))  # sealed at the stop: the archive has all
    previous = GENESIS
    for record, n in zip(records, range(28), strict=True):
        previous = chain_hash(previous, record.canonical)
        assert record.chain_hash == previous
        assert f"restore-{n}".encode() in record.canonical, "an event recorded out of its order"
    with JournalSet(settings.data_dir / "vault" / "journal") as journals:
        journal = journals.journal("0099", 7)
        assert journal.last_id_evt == 28 and journal.first_id_evt > 20, (
            "the journal kept what the archive holds"
        )
    _, cert = signing_files(settings)
    report = verify_archive(settings.archive_root, [cert])
    assert report.ok, report.lines()
    assert report.coffres[0].events == 28
