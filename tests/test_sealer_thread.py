"""The vault's sealer thread, without Kafka: it seals only what the loop said is durable, a
failed storage call is retried from the archive's own state (no lot lost or doubled), and a
disagreement between archive and journal stops it for the loop to raise."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from coffre_vault.sealer import ArchiveMismatch, Sealer, SealerThread

from coffre import metrics
from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.commands.verify import verify_archive
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize
from coffre.domain.signing import Signer, generate_key_and_certificate

from events import POINSCRIT

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def event(coffre: int, id_evt: int) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode()).replace(
        b"<IDJoueur>p-1<", f"<IDJoueur>t-{coffre}-{id_evt}<".encode()
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> tuple[Signer, Path]:
    private, cert = generate_key_and_certificate("thread", "ecdsa", not_before=T0 - timedelta(days=1))
    path = tmp_path_factory.mktemp("keys") / "cert.pem"
    path.write_bytes(cert)
    return Signer.from_pem(private, cert), path


def lots(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.xml") if "checkpoints" not in p.parts)


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def append(journals: JournalSet, coffre: int, ids: range) -> None:
    journal = journals.journal("0099", coffre)
    for n in ids:
        journal.append(n, event(coffre, n))


def test_the_thread_seals_what_is_handed_over_and_never_a_record_not_yet_fsynced(tmp_path, key):
    root = tmp_path / "archive"
    root.mkdir()
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(LocalStorage(root), key[0], journals, max_events=3, max_age=3600)
        sealing = SealerThread(sealer, period=0.01)
        sealing.start()
        try:
            append(journals, 7, range(1, 8))
            journals.sync()
            sealing.recorded({("0099", 7): 7})
            assert wait_for(lambda: sealer.counts.lots == 2)
            append(journals, 7, range(8, 11))  # appended, not fsynced
            sealing.recorded({("0099", 7): 10})  # even when told otherwise
            time.sleep(0.2)
            assert (
                sealer.counts.lots == 2 and sealer.coffre("0099", 7).sealed_id_evt == 6
            )  # 7 is not a full lot
            journals.sync()
            sealing.recorded({("0099", 7): 10})
            sealing.finish()  # at shutdown: everything durable is sealed
        finally:
            sealing.stop()
        assert not sealing.alive
        assert sealer.coffre("0099", 7).sealed_id_evt == 10
    assert lots(root) == [f"0099-7-000000000{n}.xml" for n in (1, 2, 3, 4)]
    assert verify_archive(root, [key[1]]).ok


def test_a_position_past_the_journal_s_fsync_is_never_sealed(tmp_path, key):
    root = tmp_path / "archive"
    root.mkdir()
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(LocalStorage(root), key[0], journals, max_events=100, max_age=3600)
        append(journals, 7, range(1, 4))
        journals.sync()
        append(journals, 7, range(4, 6))  # not durable
        sealer.recorded("0099", 7, 5)
        sealer.seal_all()
        assert sealer.coffre("0099", 7).sealed_id_evt == 3


class LostAnswer:
    """The real storage; its first ``failures`` creates store the object and then fail, as a put
    whose answer was lost would (the worst case: the caller cannot know the lot is there)."""

    def __init__(self, real: LocalStorage, failures: int) -> None:
        self.real = real
        self.failures = failures

    def create(self, key: str, data: bytes) -> str:
        version = self.real.create(key, data)
        if self.failures > 0:
            self.failures -= 1
            raise OSError("connection reset while reading the answer")
        return version

    def __getattr__(self, name: str):
        return getattr(self.real, name)


@pytest.mark.parametrize(
    ("failures", "mended"),
    [(1, 0), (2, 1)],
    ids=[
        "the seal note's answer lost: its lot written after it",
        "the lot's answer lost too: its checkpoint mended",
    ],
)
def test_a_failed_store_is_retried_from_the_archive_s_state_without_a_second_copy(
    tmp_path, key, failures, mended
):
    root = tmp_path / "archive"
    root.mkdir()
    failures_before = metrics.SEAL_FAILURES._value.get()
    with JournalSet(tmp_path / "journal") as journals:
        storage = LostAnswer(LocalStorage(root), failures=failures)
        sealer = Sealer(storage, key[0], journals, max_events=3, max_age=3600)
        sealing = SealerThread(sealer, period=0.01, retry_delay=0.01)
        sealing.start()
        append(journals, 7, range(1, 10))
        journals.sync()
        sealing.recorded({("0099", 7): 9})
        assert wait_for(lambda: storage.failures == 0 and sealer.counts.lots >= 2)
        sealing.finish()
        assert sealing.fatal is None
        assert sealer.counts.checkpoints_mended == mended
    assert metrics.SEAL_FAILURES._value.get() - failures_before == failures
    assert lots(root) == ["0099-7-0000000001.xml", "0099-7-0000000002.xml", "0099-7-0000000003.xml"]
    report = verify_archive(root, [key[1]])
    assert report.ok, report.lines()


def test_a_disagreement_with_the_archive_stops_the_thread_and_the_loop_raises_it(tmp_path, key):
    root = tmp_path / "archive"
    root.mkdir()
    with JournalSet(tmp_path / "other") as other:  # an archive written from other bytes
        append(other, 7, range(1, 4))
        other.sync()
        foreign = Sealer(LocalStorage(root), key[0], other, max_events=3, max_age=3600)
        foreign.recorded("0099", 7)
        foreign.seal_all()
    with JournalSet(tmp_path / "journal") as journals:
        journal = journals.journal("0099", 7)
        for n in range(1, 4):
            journal.append(n, event(8, n).replace(b">8<", b">7<"))
        journal.sync()
        sealing = SealerThread(Sealer(LocalStorage(root), key[0], journals, max_events=3), period=0.01)
        sealing.start()
        sealing.check()  # nothing wrong yet
        sealing.recorded({("0099", 7): 3})
        assert sealing.join(10), "the thread did not stop"
        with pytest.raises(ArchiveMismatch):
            sealing.check()
        with pytest.raises(ArchiveMismatch):
            sealing.finish()


def test_handing_over_never_waits_for_a_seal_in_progress(tmp_path, key):
    root = tmp_path / "archive"
    root.mkdir()
    entered, release = threading.Event(), threading.Event()

    class Held(LostAnswer):
        def create(self, key: str, data: bytes) -> str:
            entered.set()
            assert release.wait(30)
            return self.real.create(key, data)

    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(Held(LocalStorage(root), 0), key[0], journals, max_events=3, max_age=3600)
        sealing = SealerThread(sealer, period=0.01)
        sealing.start()
        append(journals, 7, range(1, 4))
        journals.sync()
        sealing.recorded({("0099", 7): 3})
        assert entered.wait(10)
        started = time.perf_counter()
        for n in range(4, 100):  # the loop goes on while the seal is held
            journals.journal("0099", 7).append(n, event(7, n))
            journals.sync()
            sealing.recorded({("0099", 7): n})
        assert time.perf_counter() - started < 20 and not release.is_set()
        release.set()
        sealing.stop()
        assert sealing.join(10)
