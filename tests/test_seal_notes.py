"""Seal notes and the bounded start, without Kafka, on real files: a start reads the archive's
newest note and lot whatever the history (counted storage calls, not timed), the journal keeps
only the unsealed window, a vault without its journal continues the archive, a lot number is
claimed once (fencing), a note whose lot is missing is completed, an archive from before notes is
migrated, and a note that lies is caught by the vault and by ``coffre verify``."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from coffre_vault.history import recorded_events
from coffre_vault.sealer import ArchiveMismatch, Sealer

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.commands.verify import verify_archive
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize
from coffre.domain.seals import SealNote, seal_note_key
from coffre.domain.signing import Signer, generate_key_and_certificate

from events import POINSCRIT

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def normalized(id_evt: int, coffre: int = 7) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode()).replace(
        b"<IDJoueur>p-1<", f"<IDJoueur>n-{coffre}-{id_evt}<".encode()
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


TEMPLATES: dict[int, bytes] = {}


def event(id_evt: int, coffre: int = 7) -> bytes:
    """``normalized(id_evt, coffre)``, the same bytes, without normalizing each of the 20,000 events
    a long history needs: the coffre's first event with its IDEvt and IDJoueur put in (checked
    against ``normalized`` for the first and for a second IDEvt, once per coffre)."""
    template = TEMPLATES.get(coffre)
    if template is None:
        template = TEMPLATES[coffre] = normalized(1, coffre)
        assert _filled(template, 123_456, coffre) == normalized(123_456, coffre)
    return _filled(template, id_evt, coffre)


def _filled(template: bytes, id_evt: int, coffre: int) -> bytes:
    return template.replace(
        f"<IDEvt>1</IDEvt><IDJoueur>n-{coffre}-1<".encode(),
        f"<IDEvt>{id_evt}</IDEvt><IDJoueur>n-{coffre}-{id_evt}<".encode(),
    )


EVENTS: dict[int, bytes] = {}


def cached(id_evt: int) -> bytes:
    found = EVENTS.get(id_evt)
    if found is None:
        found = EVENTS[id_evt] = event(id_evt)
    return found


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> tuple[Signer, Path]:
    private, cert = generate_key_and_certificate("notes", "ecdsa", not_before=T0 - timedelta(days=1))
    path = tmp_path_factory.mktemp("keys") / "cert.pem"
    path.write_bytes(cert)
    return Signer.from_pem(private, cert), path


class Counted(LocalStorage):
    """The real local archive, counting each call by name."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: Counter[str] = Counter()

    def read(self, key: str) -> bytes:
        self.calls["read"] += 1
        return super().read(key)

    def exists(self, key: str) -> bool:
        self.calls["exists"] += 1
        return super().exists(key)

    def list(self, prefix: str) -> list[str]:
        self.calls["list"] += 1
        return super().list(prefix)


def record(journals: JournalSet, ids: range, coffre: int = 7) -> None:
    journal = journals.journal("0099", coffre)
    for n in ids:
        journal.append(n, cached(n) if coffre == 7 else event(n, coffre))
    journals.sync()


def seal(sealer: Sealer, coffre: int = 7) -> None:
    sealer.recorded("0099", coffre)
    sealer.seal_all()


def history(tmp_path: Path, key, events: int, tail: int, lot: int = 50) -> tuple[Path, Path]:
    archive, journal_root = tmp_path / "archive", tmp_path / "journal"
    archive.mkdir(parents=True)
    with JournalSet(journal_root) as journals:
        sealer = Sealer(LocalStorage(archive), key[0], journals, max_events=lot, clock=lambda: T0)
        for first in range(1, events + 1, lot):  # as a vault records and seals, lot after lot
            record(journals, range(first, min(first + lot, events + 1)))
            seal(sealer)
        record(journals, range(events + 1, events + tail + 1))  # recorded, not sealed
    return archive, journal_root


def start(archive: Path, journal_root: Path, key) -> tuple[Counted, int, int]:
    """A vault's start on this archive and journal: (its calls, the sealed IDEvt, journal bytes)."""
    storage = Counted(archive)
    with JournalSet(journal_root) as journals:
        sealer = Sealer(storage, key[0], journals, clock=lambda: T0)
        sealer.start()
        state = sealer.coffre("0099", 7)
        size = sum(p.stat().st_size for p in (journal_root / "0099" / "7").glob("*.log"))
        return storage, state.sealed_id_evt, size


def test_a_start_reads_the_same_whatever_the_sealed_history(tmp_path, key):
    """50 lots or 400 behind the same unsealed tail of 30 events: the start lists nothing, reads
    the newest note and lot (plus one note for the binary search), and the journal it opens
    holds the tail only."""
    figures = {}
    for lots in (50, 400):
        archive, journal_root = history(tmp_path / str(lots), key, events=lots * 50, tail=30)
        storage, sealed, size = start(archive, journal_root, key)
        assert sealed == lots * 50
        figures[lots] = (storage.calls, size)
    (small, small_size), (large, large_size) = figures[50], figures[400]
    assert small["list"] == large["list"] == 0
    assert small["read"] == large["read"] == 2  # the newest note and its lot
    assert large["exists"] <= small["exists"] + 8  # the search for the newest note: O(log n)
    # the unsealed tail and the last lot, whose segment it shares (a segment ends where the
    # records stood at the sync after a seal)
    assert small_size < (30 + 50) * 2_000, "the journal holds more than the unsealed window"
    assert abs(large_size - small_size) < small_size / 50  # the same, but for longer IDJoueur


def test_the_journal_keeps_what_the_archive_holds_only_for_the_keep_time(tmp_path, key):
    archive = tmp_path / "archive"
    archive.mkdir()
    now = [0.0]
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(
            LocalStorage(archive), key[0], journals, max_events=10, keep_seconds=60, monotonic=lambda: now[0]
        )
        for first in range(1, 41, 10):
            record(journals, range(first, first + 10))
            seal(sealer)
        journal = journals.journal("0099", 7)
        assert journal.first_id_evt == 1, "released before the keep time"
        now[0] = 61
        record(journals, range(41, 43))
        sealer.seal_due()
        assert journal.first_id_evt == 41 and journal.last_id_evt == 42
        assert journal.get(40) is None and journal.chain_hash_at(40) is not None


def test_a_vault_without_its_journal_continues_the_archive(tmp_path, key):
    """The volume is gone (a take-over by another replica): the journal opened for the coffre
    starts after the archive's newest lot, its chain continues, and the archive verifies."""
    archive, journal_root = history(tmp_path, key, events=120, tail=0)
    shutil.rmtree(journal_root)
    with JournalSet(tmp_path / "other") as journals:
        sealer = Sealer(LocalStorage(archive), key[0], journals, max_events=50, clock=lambda: T0)
        journal = journals.journal("0099", 7)
        assert (journal.first_id_evt, journal.last_id_evt) == (121, 120)
        assert sealer.sealed_id_evt("0099", 7) == 120
        assert sealer.sealed_event("0099", 7, 77) == (cached(77), chain_to(77))  # from its lot
        record(journals, range(121, 131))
        seal(sealer)
    report = verify_archive(archive, [key[1]])
    assert report.ok, report.lines()
    assert report.coffres[0].events == 130


def chain_to(n: int) -> bytes:
    previous = GENESIS
    for i in range(1, n + 1):
        previous = chain_hash(previous, cached(i))
    return previous


def test_a_lot_number_is_claimed_once(tmp_path, key):
    """Two vaults that both believe they seal coffre 0099/7 (one paused past its session): the
    second one's claim on lot 2 fails, it reads the archive again and goes on from there, since
    its journal holds the same events; one lot 2 exists."""
    archive = tmp_path / "archive"
    archive.mkdir()
    with JournalSet(tmp_path / "a") as a_journals, JournalSet(tmp_path / "b") as b_journals:
        a = Sealer(LocalStorage(archive), key[0], a_journals, max_events=10, clock=lambda: T0)
        b = Sealer(
            LocalStorage(archive), key[0], b_journals, max_events=10, clock=lambda: T0 + timedelta(days=1)
        )
        record(a_journals, range(1, 21))
        record(b_journals, range(1, 21))
        a.recorded("0099", 7)
        b.recorded("0099", 7)  # b loads where the archive stands: nothing sealed yet
        a.seal_all()  # lots 1 and 2
        b.seal_all()  # its claim on lot 1 fails: it reloads, finds 20 sealed
        assert b.counts.claims_lost == 1 and b.counts.lots == 0
        assert b.coffre("0099", 7).sealed_id_evt == 20
        record(b_journals, range(21, 26))
        seal(b)
    names = sorted(p.name for p in archive.rglob("0099-7-*.xml") if "checkpoints" not in p.parts)
    assert names == [f"0099-7-{n:010d}.xml" for n in (1, 2, 3)]
    report = verify_archive(archive, [key[1]])
    assert report.ok, report.lines()


def test_a_vault_whose_events_differ_from_the_claimed_lot_stops(tmp_path, key):
    """The same race, but the second vault holds other bytes for the same IDEvt (a second writer
    of the coffre): it stops rather than continue an archive its journal does not describe."""
    archive = tmp_path / "archive"
    archive.mkdir()
    with JournalSet(tmp_path / "a") as a_journals, JournalSet(tmp_path / "b") as b_journals:
        a = Sealer(LocalStorage(archive), key[0], a_journals, max_events=10, clock=lambda: T0)
        b = Sealer(LocalStorage(archive), key[0], b_journals, max_events=10, clock=lambda: T0)
        record(a_journals, range(1, 11))
        journal = b_journals.journal("0099", 7)
        for n in range(1, 11):
            journal.append(n, cached(n).replace(b"n-7-", b"X-7-"))
        b_journals.sync()
        b.recorded("0099", 7)
        a.recorded("0099", 7)
        a.seal_all()
        with pytest.raises(ArchiveMismatch, match="does not end where the journal says"):
            b.seal_all()
    assert len([p for p in archive.rglob("0099-7-*.xml") if "checkpoints" not in p.parts]) == 1


def test_a_note_whose_lot_is_missing_is_completed_with_its_events_and_date(tmp_path, key):
    """Killed between the note and the lot, and taken over without the journal: the events come
    again (from the topic) and the next seal writes exactly the lot the note announced (its range,
    its date, hence its key), even with more events waiting."""
    archive, _ = history(tmp_path, key, events=100, tail=0)
    lot2 = next(archive.rglob("0099-7-0000000002.xml"))
    lot2.unlink()
    next(archive.rglob("checkpoints/0099-7-0000000002.xml")).unlink()
    with JournalSet(tmp_path / "taken-over") as journals:
        later = T0 + timedelta(days=3)
        sealer = Sealer(LocalStorage(archive), key[0], journals, max_events=50, clock=lambda: later)
        state = sealer.coffre("0099", 7)
        assert state.pending is not None and state.sealed_id_evt == 50
        record(journals, range(51, 131))
        seal(sealer)
    assert next(archive.rglob("0099-7-0000000002.xml")) == lot2, "not under the note's key"
    report = verify_archive(archive, [key[1]])
    assert report.ok, report.lines()
    assert report.coffres[0].events == 130


def test_an_archive_from_before_seal_notes_is_migrated(tmp_path, key):
    archive, journal_root = history(tmp_path, key, events=120, tail=5)
    shutil.rmtree(archive / "0099" / "7" / "seals")
    storage = Counted(archive)
    with JournalSet(journal_root) as journals:
        sealer = Sealer(storage, key[0], journals, max_events=50, clock=lambda: T0)
        assert sealer.coffre("0099", 7).sealed_id_evt == 120
        assert sealer.counts.notes_migrated == 3 and storage.calls["list"] == 1
        seal(sealer)
    assert sorted(p.name for p in (archive / "0099" / "7" / "seals").iterdir()) == [
        f"0099-7-{n:010d}.json" for n in (1, 2, 3, 4)
    ]
    report = verify_archive(archive, [key[1]])
    assert report.ok, report.lines()


@pytest.mark.parametrize("lie", ["frontier", "range"])
def test_a_note_that_lies_is_refused_by_the_vault_and_by_verify(tmp_path, key, lie):
    archive, _ = history(tmp_path, key, events=100, tail=0)
    path = archive / seal_note_key("0099", 7, 2)
    note = json.loads(path.read_text())
    if lie == "frontier":
        note["frontier"][0] = "00" * 32
    else:
        note["first_IDEvt"] = 52
    path.write_text(json.dumps(note))
    with JournalSet(tmp_path / "empty") as journals:
        sealer = Sealer(LocalStorage(archive), key[0], journals)
        with pytest.raises(ArchiveMismatch):
            sealer.coffre("0099", 7)
    report = verify_archive(archive, [key[1]])
    assert [f.check for f in report.coffres[0].failures] == ["seal-note"]


def test_recorded_events_are_the_archive_s_then_the_journal_s(tmp_path, key):
    archive, journal_root = history(tmp_path, key, events=100, tail=7)
    records = recorded_events(LocalStorage(archive), journal_root, "0099", 7)
    assert [r.id_evt for r in records] == list(range(1, 108))
    assert [r.chain_hash for r in records[-3:]] == [chain_to(n) for n in (105, 106, 107)]
    note = SealNote.decode((archive / seal_note_key("0099", 7, 2)).read_bytes())
    assert note.tree().root() == note.tree_root and note.last_id_evt == 100


def test_a_restart_leaves_the_journal_only_what_the_archive_lacks(tmp_path, key):
    """A coffre idle between two runs (everything sealed at the stop, its journal never cut after
    that seal): its next start keeps no sealed record. With an unsealed tail, the journal is cut at
    the next sync and what the archive holds goes with the next lot."""
    archive, journal_root = tmp_path / "archive", tmp_path / "journal"
    archive.mkdir()
    with JournalSet(journal_root) as journals:  # one run: 100 events recorded, all sealed at its end
        record(journals, range(1, 101))
        seal(Sealer(LocalStorage(archive), key[0], journals, max_events=50))
    assert [p.name for p in (journal_root / "0099" / "7").glob("*.log")] == ["journal.log"]
    with JournalSet(journal_root) as journals:  # the next run
        Sealer(LocalStorage(archive), key[0], journals).coffre("0099", 7)
        journal = journals.journal("0099", 7)
        assert (journal.first_id_evt, journal.last_id_evt) == (101, 100)
    assert [p.name for p in (journal_root / "0099" / "7").glob("*.log")] == [f"journal-{101:020d}.log"]

    archive, journal_root = tmp_path / "archive2", tmp_path / "journal2"
    archive.mkdir()
    with JournalSet(journal_root) as journals:  # a run that stops with 5 events unsealed
        record(journals, range(1, 106))
        sealer = Sealer(LocalStorage(archive), key[0], journals, max_events=50, max_age=3600)
        sealer.recorded("0099", 7)
        sealer.seal_due()
        assert sealer.coffre("0099", 7).sealed_id_evt == 100
    with JournalSet(journal_root) as journals:  # the next run: a lot later, the sealed part is gone
        sealer = Sealer(LocalStorage(archive), key[0], journals, max_events=50)
        sealer.coffre("0099", 7)
        record(journals, range(106, 108))
        seal(sealer)
        journal = journals.journal("0099", 7)
        assert (journal.first_id_evt, journal.last_id_evt) == (108, 107)
