"""Recording never waits for the regulator API (issue 11, "nothing stalls a receipt").

The vault (``coffre vault``) records events from a real broker while ``coffre regulator-api``,
a process of its own, serves the same archive folder read-only. A regulator downloads a large
export of today slowly (a few KB, then a pause) and asks inclusion proofs, among them one over
a coffre of 12,000 sealed events (all its lots verified first), while events are published.
Every receipt must arrive within RECEIPT_BOUND of its publication while that download is still
open; then the export and the proofs must be right.

RECEIPT_BOUND: a receipt takes a few tens of milliseconds here (measured 16 to 70 ms during the
download: the vault's poll of at most 100 ms, one group-committed fsync, the broker's
acknowledgement, this test's fetch of at most 50 ms). Two seconds leaves room for the two cores shared with the API process (building a
7 MB bundle, verifying 24 signed lots) and with other test runs, while a vault whose loop waited
for an export or a proof, as when it served the API itself, would take longer than that.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import ssl
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from coffre_ingest.step import Output as OutboxRow
from coffre_regulator.archive_index import read_manifest
from coffre_vault.sealer import Sealer

from coffre.adapters.broker import free_port_block
from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import PRODUCER_TUNING, ensure_topics
from coffre.adapters.keys import load_signer, write_key_pair
from coffre.adapters.storage import LocalStorage
from coffre.adapters.tls import development_tls
from coffre.commands.stack import Stack
from coffre.config import Settings
from coffre.domain.codec import canonical_bytes
from coffre.domain.lot import Checkpoint, parse_document, read_checkpoint
from coffre.domain.messages import Receipt
from coffre.domain.normalize import normalize
from coffre.domain.proofs import InclusionProof, check_inclusion
from coffre.domain.signing import TrustStore

from .kafka_io import normalized_rows
from .ops_http import get
from events import POINSCRIT
from ingest_fold import IngestFold
from pipeline.stack_settings import stack_settings

RECEIPT_BOUND = 2.0
SEALED_EVENTS = 12_000
"""Of coffre 0042/1, sealed before the vault starts: about 7 MB of lots today."""
LIVE_COFFRES = (7, 8, 9)
ROUNDS, PER_ROUND, PAUSE = 12, 15, 0.4
SLOW_READ, SLOW_PAUSE = 4096, 0.05


def live_event(coffre: int, n: int) -> bytes:
    return POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode()).replace(
        b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>iso-{coffre}-{n}</IDJoueur>".encode()
    )


def seal_large_coffre(archive: Path, key: Path, cert: Path, journal_dir: Path) -> bytes:
    """Coffre 0042/1's lots and checkpoints, sealed today; returns its event 1234's canonical bytes."""
    template = canonical_bytes(
        normalize(POINSCRIT.replace(b"<IDOper>0099</IDOper>", b"<IDOper>0042</IDOper>"), id_evt=1)
    ).replace(b"<IDCoffre>7</IDCoffre>", b"<IDCoffre>1</IDCoffre>")
    with JournalSet(journal_dir) as journals:
        sealer = Sealer(LocalStorage(archive), load_signer(key, cert), journals, max_events=500, max_age=3600)
        journal = journals.journal("0042", 1)
        for n in range(1, SEALED_EVENTS + 1):
            journal.append(n, template.replace(b"<IDEvt>1</IDEvt>", f"<IDEvt>{n}</IDEvt>".encode()))
        journal.sync()
        sealer.recorded("0042", 1)
        sealer.seal_all()
    return template.replace(b"<IDEvt>1</IDEvt>", b"<IDEvt>1234</IDEvt>")


def spawn(command: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "coffre.cli", command], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def wait_ready(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited {process.returncode}:\n{log.read_text()}"
        if get(f"http://127.0.0.1:{port}/readyz")[0] == 200:
            return
        time.sleep(0.3)
    raise AssertionError(f"not ready after {timeout}s:\n{log.read_text()}")


@dataclass
class Outcome:
    published: dict[tuple[int, int], tuple[float, bytes]] = field(default_factory=dict)
    """(IDCoffre, IDEvt) of coffre 0099/IDCoffre -> (when it was published, its canonical bytes)."""
    receipts: dict[tuple[int, int], float] = field(default_factory=dict)
    """(IDCoffre, IDEvt) -> when its first receipt was read."""
    export: bytes = b""
    read_slowly: int = 0
    """Bytes of the export read while the receipts came."""
    download_closed: float = 0.0
    timed: set[tuple[int, int]] = field(default_factory=set)
    """The events published while the export was being downloaded (not the warm-up's)."""
    proofs: dict[tuple[str, int, int], InclusionProof] = field(default_factory=dict)
    checkpoints: dict[tuple[str, int], Checkpoint] = field(default_factory=dict)


def ids(headers: list[tuple[str, bytes]]) -> tuple[int, int]:
    found = dict(headers)
    return int(found["coffre-idcoffre"]), int(found["coffre-idevt"])


async def scenario(settings: Settings, ca: Path, token: str, store: IngestFold) -> Outcome:
    outcome = Outcome()
    rounds = [
        normalized_rows(
            store,
            settings.topics,
            [live_event(LIVE_COFFRES[i % len(LIVE_COFFRES)], r * PER_ROUND + i) for i in range(PER_ROUND)],
            start_offset=r * PER_ROUND,
        )
        for r in range(ROUNDS + 1)
    ]
    warm_up, rounds = rounds[0], rounds[1:]
    expected = sum(len(rows) for rows in rounds) + len(warm_up)
    all_received = asyncio.Event()
    bootstrap, topic = settings.bootstrap_servers, settings.topics.receipts

    async def read_receipts() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(settings.partitions)])
            await consumer.seek_to_beginning()
            while len(outcome.receipts) < expected:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    now = time.monotonic()
                    for record in records:
                        receipt = Receipt.decode(record.value)
                        outcome.receipts.setdefault((receipt.id_coffre, receipt.id_evt), now)
            all_received.set()
        finally:
            await consumer.stop()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)

    async def send(rows: list[OutboxRow]) -> None:
        now = time.monotonic()
        for row in rows:
            outcome.published[ids(row.headers)] = (now, row.value)
        sent = [await producer.send(r.topic, r.value, key=r.key, headers=r.headers) for r in rows]
        await asyncio.gather(*sent)

    async def publish() -> None:
        for rows in rounds:
            await send(rows)
            await asyncio.sleep(PAUSE)

    context = ssl.create_default_context(cafile=str(ca))
    base = f"https://127.0.0.1:{settings.api_port}"
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context), headers={"Authorization": f"Bearer {token}"}
    ) as session:

        async def proof(oper: str, coffre: int, id_evt: int) -> tuple[int, dict]:
            async with session.get(f"{base}/v1/coffres/{oper}/{coffre}/events/{id_evt}/proof") as reply:
                return reply.status, await reply.json()

        async def ask_proofs() -> None:
            """Proofs while events are recorded: the first over the large coffre verifies its 24 lots."""
            status, body = await proof("0042", 1, 1234)
            assert status == 200, body
            outcome.proofs[("0042", 1, 1234)] = InclusionProof.from_dict(body)
            while not all_received.is_set():
                for coffre in LIVE_COFFRES:
                    await proof("0099", coffre, 1)  # 200 once its first lot is sealed, 404 before
                await asyncio.sleep(0.2)

        receipts = asyncio.create_task(read_receipts())
        await producer.start()
        # Not timed: the vault's first poll waits for its consumer group to form.
        await send(warm_up)
        while len(outcome.receipts) < len(warm_up):
            assert (
                not receipts.done() and time.monotonic() - outcome.published[ids(warm_up[0].headers)][0] < 60
            )
            await asyncio.sleep(0.1)
        warmed = set(outcome.published)
        today = time.strftime("%Y-%m-%d", time.gmtime())
        download = await session.get(f"{base}/v1/exports/{today}", read_bufsize=SLOW_READ)
        assert download.status == 200 and download.content_length, download.status
        slow = True

        async def read_export() -> None:
            while chunk := await download.content.read(SLOW_READ):
                outcome.export += chunk
                if slow:
                    await asyncio.sleep(SLOW_PAUSE)
            outcome.download_closed = time.monotonic()

        reading = asyncio.create_task(read_export())
        try:
            await asyncio.gather(publish(), ask_proofs(), asyncio.wait_for(receipts, 60))
        finally:
            await producer.stop()
        outcome.read_slowly = len(outcome.export)
        outcome.timed = set(outcome.published) - warmed
        assert not reading.done(), "the export was read whole before the receipts came"
        slow = False
        await asyncio.wait_for(reading, 60)
        download.release()
        assert len(outcome.export) == download.content_length

        # Once every live event is sealed (lots of 20, or 1 s old), a proof for some of each coffre.
        for coffre in LIVE_COFFRES:
            count = sum(1 for c, _ in outcome.published if c == coffre)
            deadline = time.monotonic() + 30
            while True:
                async with session.get(f"{base}/v1/coffres/0099/{coffre}/checkpoint") as reply:
                    body = await reply.read()
                    checkpoint = read_checkpoint(parse_document(body)) if reply.status == 200 else None
                if checkpoint is not None and checkpoint.tree_size == count:
                    break
                assert time.monotonic() < deadline, f"coffre 0099/{coffre} not sealed: {checkpoint}"
                await asyncio.sleep(0.3)
            outcome.checkpoints[("0099", coffre)] = checkpoint
            for id_evt in (1, count // 2, count):
                status, body = await proof("0099", coffre, id_evt)
                assert status == 200, body
                outcome.proofs[("0099", coffre, id_evt)] = InclusionProof.from_dict(body)
        async with session.get(f"{base}/v1/coffres/0042/1/checkpoint") as reply:
            outcome.checkpoints[("0042", 1)] = read_checkpoint(parse_document(await reply.read()))
    return outcome


def test_receipts_do_not_wait_for_a_slow_export_or_proofs(kafka_bootstrap, topic_prefix, tmp_path):
    vault_data, regulator_data = tmp_path / "vault", tmp_path / "regulator"
    key, cert = write_key_pair(tmp_path / "keys", "isolation test vault", "ecdsa", days=30)
    ports = free_port_block(3)
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        vault_data,
        lot_max_events=20,
        lot_max_age_seconds=1.0,
        signing_key=key,
        signing_cert=cert,
        api_port=ports,
        log_format="text",
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_partitions))
    (vault_data / "archive").mkdir(parents=True)
    sealed_1234 = seal_large_coffre(vault_data / "archive", key, cert, tmp_path / "preseal-journal")

    env = Stack(settings, bootstrap=kafka_bootstrap).env()
    vault_env = env | {"COFFRE_OPS_PORT": str(ports + 1)}
    regulator_env = env | {
        "COFFRE_OPS_PORT": str(ports + 2),
        "COFFRE_DATA_DIR": str(regulator_data),
        "COFFRE_ARCHIVE_DIR": str(vault_data / "archive"),
    }
    logs = {"vault": tmp_path / "vault.log", "regulator-api": tmp_path / "regulator.log"}
    vault = spawn("vault", vault_env, logs["vault"])
    regulator = spawn("regulator-api", regulator_env, logs["regulator-api"])
    try:
        wait_ready(ports + 1, vault, logs["vault"])
        wait_ready(ports + 2, regulator, logs["regulator-api"])
        tls = development_tls(regulator_data / "tls")
        outcome = asyncio.run(scenario(settings, tls.ca_cert, tls.token(), IngestFold()))
    finally:
        for process in (vault, regulator):
            if process.poll() is None:
                process.terminate()
        codes = [process.wait(timeout=30) for process in (vault, regulator)]
    assert codes == [0, 0], {name: path.read_text()[-3000:] for name, path in logs.items()}

    # Every receipt came, each within the bound, while the slow download was still open.
    assert sorted(outcome.receipts) == sorted(outcome.published), "a receipt is missing"
    latencies = {key: outcome.receipts[key] - outcome.published[key][0] for key in outcome.timed}
    assert len(latencies) == ROUNDS * PER_ROUND
    worst = max(latencies, key=latencies.__getitem__)
    assert latencies[worst] < RECEIPT_BOUND, f"the receipt of {worst} took {latencies[worst]:.2f}s"
    assert max(outcome.receipts.values()) < outcome.download_closed
    assert outcome.read_slowly < len(outcome.export) / 2, "the download was not slow: it proved nothing"

    # The export: a signed manifest, every file byte for byte the archive's, the large coffre whole.
    with tarfile.open(fileobj=io.BytesIO(outcome.export)) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}
    manifest = read_manifest(files.pop("manifest.xml"), TrustStore.from_pem_files([cert]))
    assert sorted(entry.path for entry in manifest.entries) == sorted(files)
    for entry in manifest.entries:
        stored = (vault_data / "archive" / entry.path.removeprefix("archive/")).read_bytes()
        assert files[entry.path] == stored and hashlib.sha256(stored).hexdigest() == entry.sha256
    assert len([path for path in files if path.startswith("archive/0042/1/")]) == 2 * SEALED_EVENTS // 500

    # The proofs: each holds for the event's bytes, against its coffre's signed checkpoint.
    events = {("0042", 1, 1234): sealed_1234} | {
        ("0099", coffre, id_evt): value for (coffre, id_evt), (_, value) in outcome.published.items()
    }
    assert {key[:2] for key in outcome.proofs} == {("0042", 1)} | {("0099", c) for c in LIVE_COFFRES}
    for key, proof in outcome.proofs.items():
        assert check_inclusion(proof, events[key]) == [], key
        checkpoint = outcome.checkpoints[key[:2]]
        assert (proof.tree_size, proof.tree_root) == (checkpoint.tree_size, checkpoint.tree_root.hex()), key
