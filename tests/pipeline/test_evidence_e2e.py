"""End to end: the vault on a real broker gets every checkpoint timestamped by a real TSA
(``openssl ts`` behind loopback HTTP) and cosigned by a real ``coffre witness`` in its own
process over TLS; then ``coffre verify`` checks the archive with the TSA's root, the witness's
public key and its URL, and no checkpoint kept by hand, and catches the newest lots removed and
a coffre removed."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from coffre_vault.service import serve

from coffre.adapters.archive import signing_files
from coffre.adapters.kafka import ensure_topics
from coffre.cli import main
from coffre.domain.evidence import parse_evidence_name
from coffre.domain.lot import parse_lot_name

from events import POINSCRIT
from ingest_fold import IngestFold
from pipeline.kafka_io import normalized_rows, publish_rows, read_receipts
from pipeline.stack_settings import stack_settings
from tsa import Pki, Tsa
from witness.process import NAME, running_witness

EVENTS = 23
LOT_EVENTS = 5


def players(count: int) -> list[bytes]:
    return [POINSCRIT.replace(b"<IDJoueur>p-1<", f"<IDJoueur>e2e-{n}<".encode()) for n in range(count)]


def archive_files(root: Path) -> tuple[set[int], dict[str, set[int]]]:
    """The checkpoints' lot numbers, and per kind the lot numbers that have evidence."""
    checkpoints, evidence = set(), {"tsa": set(), "witness": set()}
    for path in root.rglob("*"):
        if "/checkpoints/" not in str(path):
            continue
        if (named := parse_evidence_name(path.name)) is not None:
            evidence[named.kind].add(named.lot_number)
        elif (lot := parse_lot_name(path.name)) is not None:
            checkpoints.add(lot[2])
    return checkpoints, evidence


def test_every_checkpoint_is_timestamped_and_cosigned_and_verify_needs_no_kept_checkpoint(
    kafka_bootstrap, topic_prefix, tmp_path, capsys
) -> None:
    pki = Pki(tmp_path)
    tsa_folder = tmp_path / "tsa"
    tsa_folder.mkdir()
    tsa = Tsa(tsa_folder, pki.issue("coffre e2e TSA"), pki)
    with tsa.serving(), running_witness(tmp_path / "witness", _operator_cert(tmp_path)) as witness:
        settings = stack_settings(
            kafka_bootstrap,
            topic_prefix,
            tmp_path / "data",
            partitions=1,
            lot_max_events=LOT_EVENTS,
            lot_max_age_seconds=600,  # the last, partial lot is sealed as the vault stops
            tsa_urls=f"e2e-tsa={tsa.url}",
            tsa_certs=str(pki.cert_path),
            witness_urls=f"{NAME}={witness.url}",
            witness_ca=str(witness.ca),
        )
        asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_partitions))
        rows = normalized_rows(IngestFold(), settings.topics, players(EVENTS))
        archive = settings.archive_root

        async def scenario() -> None:
            stop = asyncio.Event()
            vault = asyncio.create_task(serve(settings, stop))
            await publish_rows(kafka_bootstrap, rows)
            receipts = await read_receipts(kafka_bootstrap, settings.topics.receipts, EVENTS, 60)
            assert len(receipts) == EVENTS
            stop.set()
            await vault

        asyncio.run(scenario())
        checkpoints, evidence = archive_files(archive)
        assert checkpoints == set(range(1, len(checkpoints) + 1)) and len(checkpoints) >= EVENTS // LOT_EVENTS
        # the last lot was sealed as the vault stopped: its evidence was fetched before it exited
        assert evidence == {"tsa": checkpoints, "witness": checkpoints}, "a checkpoint lacks its evidence"

        _, cert = signing_files(settings)
        witness_pub = witness.base / "keys" / "witness-key.pub.pem"
        trust = [
            "--cert", str(cert),
            "--tsa-cert", str(pki.cert_path),
            "--witness-key", str(witness_pub),
            "--witness", witness.url,
            "--witness-ca", str(witness.ca),
        ]  # fmt: skip
        capsys.readouterr()
        assert main(["verify", str(archive), *trust]) == 0, capsys.readouterr().out
        assert "OK" in capsys.readouterr().out

        # The newest lot, its checkpoint and its evidence removed: the witness knows better.
        truncated = tmp_path / "truncated"
        shutil.copytree(archive, truncated)
        newest = max(checkpoints)
        for path in truncated.rglob(f"*-{newest:010d}.*"):
            path.chmod(0o600)
            path.unlink()
        assert main(["verify", str(truncated), *trust]) == 1
        out = capsys.readouterr().out
        assert "witness" in out and "truncat" in out, out

        # The whole coffre removed: only the witness knows it existed.
        emptied = tmp_path / "emptied"
        emptied.mkdir()
        assert main(["verify", str(emptied), *trust]) != 0
        out = capsys.readouterr().out
        assert "witness" in out and "removed" in out, out


def _operator_cert(tmp_path: Path) -> bytes:
    """The vault's development signing certificate, made before the vault starts so that the
    witness can trust it."""
    from coffre.config import Settings

    _, cert = signing_files(Settings(data_dir=tmp_path / "data"))
    return cert.read_bytes()
