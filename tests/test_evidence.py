"""The vault's evidence collector (services/vault/evidence.py): every checkpoint gets a token
from a real RFC 3161 TSA (``openssl ts -reply``, tests/tsa.py) and a cosignature from a
witness, without sealing ever waiting on either.

The witness here is a minimal one in the test, over loopback HTTP: the domain's own
``open_checkpoint``/``judge``/``WitnessKey.cosign`` behind the add-checkpoint protocol of the
issue's plan, its state a dict. The real ``coffre witness`` process (its TLS, its SQLite state)
is tested in tests/witness/, and the two together end to end after the merge.

The TSA and the witness sit behind :class:`Loopback`, a server that can be stopped (its port
closed: connections refused) and started again on the same port, as a service that goes down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from coffre_vault.evidence import EvidenceCollector, EvidenceThread, TsaSource, WitnessSource, collector
from coffre_vault.sealer import Sealer
from prometheus_client import REGISTRY

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.adapters.witness_client import WitnessClient
from coffre.domain.codec import canonical_bytes
from coffre.domain.evidence import cosignature_key, parse_evidence_name, timestamp_key
from coffre.domain.lot import checkpoint_key, parse_document, read_checkpoint
from coffre.domain.normalize import normalize
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate
from coffre.domain.timestamp import verify_token
from coffre.domain.witness import (
    AddCheckpoint,
    Latest,
    WitnessKey,
    cosigned_by,
    note_body,
    origin,
)

from events import POINSCRIT
from loopback import Answer, DomainWitness, Loopback
from tsa import Pki, Tsa, openssl_or_skip

OPER = "0099"
LOT = 3  # events per lot


def event(coffre: int, id_evt: int) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode()).replace(
        b"<IDJoueur>p-1<", f"<IDJoueur>e-{coffre}-{id_evt}<".encode()
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def gauge(metric: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(metric, labels)
    return 0.0 if value is None else value


# -- the services, behind a port that can close -----------------------------------------------------


# -- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def operator(tmp_path_factory) -> tuple[Signer, TrustStore]:
    private, cert = generate_key_and_certificate(
        "evidence", "ecdsa", not_before=datetime.now(UTC) - timedelta(days=1)
    )
    path = tmp_path_factory.mktemp("keys") / "cert.pem"
    path.write_bytes(cert)
    return Signer.from_pem(private, cert), TrustStore.from_pem_files([path])


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    openssl_or_skip()
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tsa(tmp_path, pki) -> Tsa:
    folder = tmp_path / "tsa"
    folder.mkdir()
    return Tsa(folder, pki.issue("coffre test tsa"), pki)


class Vault:
    """An archive, journals and a sealer of ``LOT``-event lots, its checkpoints nudging ``nudge``."""

    def __init__(self, folder: Path, signer: Signer) -> None:
        self.root = folder / "archive"
        self.root.mkdir(exist_ok=True)
        self.storage = LocalStorage(self.root)
        self.journals = JournalSet(folder / "journal")
        self.nudge: Callable[[str, int, int], None] | None = None
        self.sealer = Sealer(
            self.storage, signer, self.journals, max_events=LOT, max_age=3600, on_checkpoint=self._nudged
        )
        self.next_id: dict[int, int] = {}

    def _nudged(self, id_oper: str, id_coffre: int, number: int) -> None:
        if self.nudge is not None:
            self.nudge(id_oper, id_coffre, number)

    def record(self, coffre: int, count: int) -> None:
        journal = self.journals.journal(OPER, coffre)
        first = self.next_id.get(coffre, 1)
        for n in range(first, first + count):
            journal.append(n, event(coffre, n))
        self.next_id[coffre] = first + count
        self.journals.sync()
        self.sealer.recorded(OPER, coffre)

    def seal(self, coffres: dict[int, int]) -> None:
        """Record ``count`` events per coffre and seal them all."""
        for coffre, count in coffres.items():
            self.record(coffre, count)
        self.sealer.seal_all()

    def checkpoints(self) -> list[tuple[int, int]]:
        return sorted(
            (int(p.parent.parent.name), int(p.stem.rsplit("-", 1)[1]))
            for p in self.root.rglob("checkpoints/*.xml")
        )

    def checkpoint(self, coffre: int, number: int) -> bytes:
        return self.storage.read(checkpoint_key(OPER, coffre, number))

    def close(self) -> None:
        self.journals.close()


@pytest.fixture
def vault(tmp_path, operator):
    made = Vault(tmp_path, operator[0])
    yield made
    made.close()


class Recording(LocalStorage):
    """The archive, remembering the order evidence files were created in."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.created: list[str] = []

    def create(self, key: str, data: bytes) -> str:
        version = super().create(key, data)
        if parse_evidence_name(key) is not None:
            self.created.append(key)
        return version


def start(threads: list[EvidenceThread], vault: Vault) -> EvidenceCollector:
    collector = EvidenceCollector(threads)
    vault.nudge = collector.nudge
    collector.start()
    return collector


def tsa_thread(storage, name: str, url: str, pki: Pki, **kw) -> EvidenceThread:
    return EvidenceThread(
        storage, TsaSource(name, url, [pki.certificate], timeout=kw.pop("timeout", 5.0)), **kw
    )


def witness_thread(storage, name: str, url: str, keys=(), **kw) -> EvidenceThread:
    return EvidenceThread(storage, WitnessSource(name, storage, WitnessClient(url, timeout=5.0), keys), **kw)


def all_have(vault: Vault, key: Callable[[int, int], str]) -> bool:
    return all(vault.storage.exists(key(coffre, number)) for coffre, number in vault.checkpoints())


def ts_key(name: str) -> Callable[[int, int], str]:
    return lambda coffre, number: timestamp_key(OPER, coffre, number, name)


def cs_key(name: str) -> Callable[[int, int], str]:
    return lambda coffre, number: cosignature_key(OPER, coffre, number, name)


def in_order(created: list[str]) -> bool:
    """Per coffre and per source, the files came in lot order."""
    seen: dict[tuple[int, str, str], int] = {}
    for key in created:
        name = parse_evidence_name(key)
        assert name is not None
        where = (name.id_coffre, name.kind, name.name)
        if name.lot_number <= seen.get(where, 0):
            return False
        seen[where] = name.lot_number
    return True


# -- the tests ----------------------------------------------------------------------------------------


def test_every_checkpoint_gets_a_verified_token_and_a_cosignature(vault, tsa, pki, operator):
    witness = DomainWitness(WitnessKey.generate("w1.test"), operator[1])
    tsa_server = Loopback(lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body)))
    witness_server = Loopback(witness.handle)
    try:
        vault.seal({7: 7, 8: 4})  # before the collector: found by listing the archive
        threads = [
            tsa_thread(vault.storage, "tsa1", tsa_server.url, pki, period=0.05),
            witness_thread(vault.storage, "w1", witness_server.url, [witness.key.public.key], period=0.05),
        ]
        collection = start(threads, vault)
        vault.seal({7: 8, 8: 9, 9: 5})  # after: nudged by the sealer
        assert len(vault.checkpoints()) >= 10
        assert wait_for(lambda: all_have(vault, ts_key("tsa1")) and all_have(vault, cs_key("w1")))
        assert wait_for(lambda: gauge("coffre_checkpoints_untimestamped", tsa="tsa1") == 0)
        collection.stop()
        assert collection.join(10)
    finally:
        tsa_server.stop()
        witness_server.stop()
    for coffre, number in vault.checkpoints():
        document = vault.checkpoint(coffre, number)
        checkpoint = read_checkpoint(parse_document(document))
        token = vault.storage.read(timestamp_key(OPER, coffre, number, "tsa1"))
        stamp = verify_token(token, document, [pki.certificate])
        assert abs((stamp.gen_time - checkpoint.at).total_seconds()) < 60
        note = vault.storage.read(cosignature_key(OPER, coffre, number, "w1"))
        assert cosigned_by(note, note_body(checkpoint), witness.key.public.key).name == "w1.test"
    # the witness saw every lot, in order, each extending the one before (its judge checked the proofs)
    # (seal_all seals what waits: lots of 3 events, the last of each seal shorter)
    assert [latest.size for latest in witness.history[origin(OPER, 7)]] == [3, 6, 7, 10, 13, 15]
    assert witness.latest[origin(OPER, 8)].size == 13 and witness.latest[origin(OPER, 9)].size == 5
    assert not witness.refusals
    assert gauge("coffre_checkpoints_uncosigned", witness="w1") == 0
    assert gauge("coffre_checkpoint_uncosigned_age_seconds", witness="w1") == 0


def test_a_tsa_down_holds_nothing_and_its_tokens_come_in_order_once_it_is_back(tmp_path, operator, tsa, pki):
    vault = Vault(tmp_path, operator[0])
    vault.storage = Recording(vault.root)
    vault.sealer.storage = vault.storage
    tsa_server = Loopback(lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body)))
    tsa_server.stop()  # down from the start
    try:
        thread = tsa_thread(
            vault.storage, "tsa-down", tsa_server.url, pki, period=0.05, retry_delay=0.05, max_retry_delay=0.2
        )
        collection = start([thread], vault)
        started = time.monotonic()
        vault.seal({7: 9, 8: 6})
        assert time.monotonic() - started < 5  # sealing went on
        assert len(vault.checkpoints()) == 5
        assert wait_for(lambda: gauge("coffre_checkpoints_untimestamped", tsa="tsa-down") == 5)
        assert wait_for(lambda: gauge("coffre_checkpoint_untimestamped_age_seconds", tsa="tsa-down") > 0)
        assert wait_for(lambda: gauge("coffre_evidence_failures_total", kind="tsa", name="tsa-down") >= 2)
        assert not vault.storage.created
        vault.seal({7: 3})  # still sealing while it is down
        tsa_server.start()
        assert wait_for(lambda: all_have(vault, ts_key("tsa-down")))
        assert wait_for(lambda: gauge("coffre_checkpoints_untimestamped", tsa="tsa-down") == 0)
        assert gauge("coffre_checkpoint_untimestamped_age_seconds", tsa="tsa-down") == 0
        assert len(vault.storage.created) == 6 and in_order(vault.storage.created)
        collection.stop()
        assert collection.join(10)
    finally:
        tsa_server.stop()
        vault.close()


def test_a_witness_down_then_back_cosigns_everything_in_order(tmp_path, operator):
    vault = Vault(tmp_path, operator[0])
    vault.storage = Recording(vault.root)
    vault.sealer.storage = vault.storage
    witness = DomainWitness(WitnessKey.generate("w-down"), operator[1])
    server = Loopback(witness.handle)
    try:
        thread = witness_thread(
            vault.storage, "w-down", server.url, period=0.05, retry_delay=0.05, max_retry_delay=0.2
        )
        collection = start([thread], vault)
        vault.seal({7: 3})
        assert wait_for(lambda: all_have(vault, cs_key("w-down")))
        server.stop()
        vault.seal({7: 9, 8: 6})
        assert wait_for(lambda: gauge("coffre_checkpoints_uncosigned", witness="w-down") == 5)
        assert wait_for(lambda: gauge("coffre_checkpoint_uncosigned_age_seconds", witness="w-down") > 0)
        assert wait_for(lambda: gauge("coffre_evidence_failures_total", kind="witness", name="w-down") >= 2)
        server.start()
        assert wait_for(lambda: all_have(vault, cs_key("w-down")))
        assert wait_for(lambda: gauge("coffre_checkpoints_uncosigned", witness="w-down") == 0)
        assert in_order(vault.storage.created) and len(vault.storage.created) == 6
        assert [latest.size for latest in witness.history[origin(OPER, 7)]] == [3, 6, 9, 12]
        assert not witness.refusals
        collection.stop()
        assert collection.join(10)
    finally:
        server.stop()
        vault.close()


def test_a_new_vault_fills_in_what_the_previous_one_left(vault, tsa, pki, operator):
    witness = DomainWitness(WitnessKey.generate("w-restart"), operator[1])
    tsa_server = Loopback(lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body)))
    witness_server = Loopback(witness.handle)
    try:
        first = start(
            [
                tsa_thread(vault.storage, "tsa-r", tsa_server.url, pki, period=0.05),
                witness_thread(vault.storage, "w-r", witness_server.url, period=0.05),
            ],
            vault,
        )
        vault.seal({7: 6, 8: 3})
        assert wait_for(lambda: all_have(vault, ts_key("tsa-r")) and all_have(vault, cs_key("w-r")))
        first.stop()
        assert first.join(10)
        tsa_server.stop()
        witness_server.stop()  # both go down; the vault seals on, then stops
        vault.nudge = None
        vault.seal({7: 9, 8: 6, 9: 3})
        assert not all_have(vault, ts_key("tsa-r"))
        tsa_server.start()
        witness_server.start()
        # a new vault on the same archive: nothing nudges it, the archive is the queue
        second = EvidenceCollector(
            [
                tsa_thread(vault.storage, "tsa-r", tsa_server.url, pki, period=0.05),
                witness_thread(vault.storage, "w-r", witness_server.url, period=0.05),
            ]
        )
        second.start()
        assert wait_for(lambda: all_have(vault, ts_key("tsa-r")) and all_have(vault, cs_key("w-r")))
        second.stop()
        assert second.join(10)
    finally:
        tsa_server.stop()
        witness_server.stop()
    assert witness.latest[origin(OPER, 7)].size == 15 and not witness.refusals
    for coffre, number in vault.checkpoints():
        document = vault.checkpoint(coffre, number)
        token = vault.storage.read(timestamp_key(OPER, coffre, number, "tsa-r"))
        verify_token(token, document, [pki.certificate])


def test_a_witness_that_lost_its_state_or_went_back_is_sent_a_proof_from_its_own_size(vault, operator):
    """A conflict (the witness holds another size than the vault thinks): the vault rebuilds the
    tree at the witness's size from the lots and proves the extension from there."""
    witness = DomainWitness(WitnessKey.generate("w-conflict"), operator[1])
    server = Loopback(witness.handle)
    try:
        collection = start([witness_thread(vault.storage, "w-c", server.url, period=0.05)], vault)
        vault.seal({7: 6})
        assert wait_for(lambda: all_have(vault, cs_key("w-c")))
        name = origin(OPER, 7)
        witness.latest[name] = witness.history[name][0]  # restored from a backup: at lot 1 (3 events)
        vault.seal({7: 6})
        assert wait_for(lambda: all_have(vault, cs_key("w-c")))
        assert [r.kind for r in witness.refusals] == ["conflict"]
        assert witness.latest[name].size == 12
        del witness.latest[name]  # lost everything: it answers conflict with size 0
        vault.seal({7: 3})
        assert wait_for(lambda: all_have(vault, cs_key("w-c")))
        assert witness.latest[name].size == 15
        collection.stop()
        assert collection.join(10)
    finally:
        server.stop()


def test_a_fork_stops_that_coffre_s_submissions_and_nothing_else(vault, operator, caplog):
    witness = DomainWitness(WitnessKey.generate("w-fork"), operator[1])
    server = Loopback(witness.handle)
    try:
        vault.seal({7: 3, 8: 3})
        # the witness already cosigned another tree of 3 events for coffre 7: a fork
        real = witness.handle(
            "/add-checkpoint", "text/plain", AddCheckpoint(0, (), vault.checkpoint(7, 1)).encode()
        )
        assert real[0] == 200
        other = witness.latest[origin(OPER, 7)]
        witness.latest[origin(OPER, 7)] = Latest(other.id_oper, other.id_coffre, 3, b"\x01" * 32, b"")
        thread = witness_thread(vault.storage, "w-f", server.url, period=0.05)
        collection = start([thread], vault)
        vault.seal({7: 3, 8: 6})
        assert wait_for(lambda: (OPER, 7) in thread.stopped())
        assert wait_for(lambda: all(vault.storage.exists(cs_key("w-f")(8, n)) for n in (1, 2, 3)))
        assert "fork" in thread.stopped()[(OPER, 7)]
        assert gauge("coffre_evidence_refused_total", witness="w-f", kind="fork") == 1
        time.sleep(0.3)
        assert [r.kind for r in witness.refusals] == ["fork"]  # sent once, never again
        assert thread.alive  # the vault goes on
        assert gauge("coffre_checkpoints_uncosigned", witness="w-f") == 2  # coffre 7's two lots
        assert any(r.levelname == "CRITICAL" and "fork" in r.getMessage() for r in caplog.records)
        collection.stop()
        assert collection.join(10)
    finally:
        server.stop()


def test_sealing_never_waits_on_a_hanging_tsa(vault, tsa, pki):
    release = threading.Event()

    def hanging(path: str, ctype: str, body: bytes) -> Answer:
        release.wait(10)
        return 200, "application/timestamp-reply", tsa.reply(body)

    server = Loopback(hanging)
    try:
        thread = tsa_thread(vault.storage, "tsa-hang", server.url, pki, timeout=20, period=0.05)
        collection = start([thread], vault)
        started = time.monotonic()
        for _ in range(5):
            vault.seal({7: 3, 8: 3})  # a checkpoint each: each nudges the collector
        assert time.monotonic() - started < 3  # the TSA answers nothing for 10 s
        assert len(vault.checkpoints()) == 10 and thread.stored == 0
        release.set()
        assert wait_for(lambda: all_have(vault, ts_key("tsa-hang")))
        collection.stop()
        assert collection.join(10)
    finally:
        release.set()
        server.stop()


def test_a_tsa_whose_token_does_not_verify_gets_nothing_stored(vault, tsa, tmp_path):
    stranger = Pki(tmp_path, "another root")  # the vault trusts another root than the TSA's
    server = Loopback(lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body)))
    try:
        thread = tsa_thread(
            vault.storage, "tsa-bad", server.url, stranger, period=0.05, retry_delay=0.05, max_retry_delay=0.1
        )
        collection = start([thread], vault)
        vault.seal({7: 3})
        assert wait_for(lambda: gauge("coffre_evidence_failures_total", kind="tsa", name="tsa-bad") >= 2)
        assert not vault.storage.exists(ts_key("tsa-bad")(7, 1))
        collection.stop()
        assert collection.join(10)
    finally:
        server.stop()


def test_the_collector_of_the_settings(tmp_path, pki):
    storage = LocalStorage(tmp_path)
    made = collector(
        storage,
        tsas=[("a", "http://127.0.0.1:1/tsa")],
        tsa_trust=[pki.certificate],
        witnesses=[("w", "https://127.0.0.1:2")],
    )
    assert [(t.source.kind, t.source.name) for t in made.threads] == [("tsa", "a"), ("witness", "w")]
    with pytest.raises(ValueError):
        collector(storage, tsas=[("a", "http://127.0.0.1:1/tsa")])  # no trusted certificate


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"tsa_urls": "http://127.0.0.1:1/tsa"}, "COFFRE_TSA_URLS needs COFFRE_TSA_CERTS"),
        ({"tsa_urls": "Big=http://x/tsa", "tsa_certs": "a.pem"}, "the name 'Big'"),
        ({"witness_urls": "a=ftp://x"}, "not an http(s) URL"),
        ({"witness_urls": "a=https://x,a=https://y"}, "given twice"),
    ],
)
def test_evidence_settings_are_checked_at_start(variables, says, capsys):
    from coffre.config import load_settings

    with pytest.raises(SystemExit) as stopped:
        load_settings(**variables)
    assert stopped.value.code == 2 and says in capsys.readouterr().err


def test_evidence_settings_name_each_source(tmp_path, pki, capsys):
    from coffre_vault.service import evidence_collector

    from coffre.config import load_settings

    settings = load_settings(
        tsa_urls="tsa.example=https://tsa.example/tsr, http://127.0.0.1:9/tsa",
        tsa_certs=str(pki.cert_path),
        witness_urls="anj=https://witness.anj.example:8444",
    )
    assert settings.tsa_endpoints == [
        ("tsa.example", "https://tsa.example/tsr"),
        ("127.0.0.1", "http://127.0.0.1:9/tsa"),
    ]
    made = evidence_collector(settings, LocalStorage(tmp_path))
    assert [t.source.name for t in made.threads] == ["tsa.example", "127.0.0.1", "anj"]
    assert evidence_collector(load_settings(), LocalStorage(tmp_path)).threads == []
    with pytest.raises(SystemExit):
        evidence_collector(
            load_settings(tsa_urls="http://x/tsa", tsa_certs=str(tmp_path / "missing.pem")),
            LocalStorage(tmp_path),
        )
    assert "COFFRE_TSA_CERTS" in capsys.readouterr().err


def test_drain_waits_for_the_last_checkpoints_and_no_longer_for_a_source_that_is_down(vault, tsa, pki):
    """At shutdown the vault drains (services/vault/service.py): the last checkpoints' tokens
    when the TSA answers; when it does not, ``drain`` gives up at its bound and says so."""
    tsa_server = Loopback(lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body)))
    try:
        collection = start([tsa_thread(vault.storage, "tsa1", tsa_server.url, pki, period=5.0)], vault)
        vault.seal({7: 7, 8: 5})
        assert collection.drain(30)
        assert all_have(vault, ts_key("tsa1"))  # every one, not only the call in flight
        tsa_server.stop()
        vault.seal({7: 4})
        started = time.monotonic()
        assert not collection.drain(0.5)
        assert time.monotonic() - started < 5
        collection.stop()
        assert collection.join(10)
    finally:
        tsa_server.stop()


def test_a_checkpoint_the_tsa_keeps_failing_holds_no_other_coffre(vault, tsa, pki):
    """A TSA whose answer for coffre 7's checkpoints never verifies: coffre 8's tokens all come
    meanwhile, and coffre 7's are tried again (nothing stored that does not verify)."""
    import hashlib

    vault.seal({7: 4, 8: 7})
    refused = {hashlib.sha256(vault.checkpoint(7, n)).digest() for c, n in vault.checkpoints() if c == 7}
    asked: list[bool] = []

    def answer(path: str, ctype: str, body: bytes) -> Answer:
        bad = any(digest in body for digest in refused)
        asked.append(bad)
        return 200, "application/timestamp-reply", b"\x30\x03\x02\x01\x02" if bad else tsa.reply(body)

    tsa_server = Loopback(answer)
    try:
        collection = start(
            [tsa_thread(vault.storage, "tsa1", tsa_server.url, pki, period=0.05, retry_delay=0.05)], vault
        )
        assert wait_for(
            lambda: all(vault.storage.exists(ts_key("tsa1")(8, n)) for c, n in vault.checkpoints() if c == 8)
        )
        assert wait_for(lambda: asked.count(True) >= 3)  # coffre 7 tried again and again
        assert not any(vault.storage.exists(ts_key("tsa1")(7, n)) for c, n in vault.checkpoints() if c == 7)
        collection.stop()
        assert collection.join(10)
    finally:
        tsa_server.stop()
