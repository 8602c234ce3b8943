"""The console's index (services/regulator/event_index.py): built from verified lots only, searched
page by page, resumed after a crash or a restart, and equal to a rebuild from the archive alone."""

from __future__ import annotations

import itertools
import json
import shutil
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from coffre_regulator import event_index
from coffre_regulator.event_index import EventSearch, Indexer, IndexQueryError, Query, connect, rebuild

from coffre.adapters.storage import LocalStorage
from coffre.cli import main
from coffre.domain.signing import TrustStore

from audit_hands import RecordingStorage, build_archive, normalized, seal_archive


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    return build_archive(tmp_path_factory.mktemp("console-index"))


@pytest.fixture
def archive(built, tmp_path) -> tuple[Path, TrustStore]:
    """A copy of the built archive (tests may damage theirs)."""
    root = tmp_path / "archive"
    shutil.copytree(built[0], root)
    return root, TrustStore.from_pem_files([built[1]])


def index_all(root: Path, trust: TrustStore, path: Path | str, **kwargs) -> event_index.CatchUp:
    with closing(connect(path)) as db:
        return Indexer(db, LocalStorage(root), trust).catch_up(**kwargs)


def ids(page: event_index.Page) -> list[tuple[int, int]]:
    return [(row.coffre, row.id_evt) for row in page.rows]


def every_page(search: EventSearch, query: Query, size: int) -> list[tuple[int, int]]:
    found, after = [], None
    while True:
        page = search.search(query, after=after, page_size=size)
        found += ids(page)
        if page.next is None:
            return found
        after = page.next


def test_every_sealed_event_is_found_by_each_field(archive, tmp_path, index_at):
    index = index_at("index")
    root, trust = archive
    done = index_all(root, trust, index)
    assert (done.lots, done.events, done.refused, done.behind) == (7, 22, [], 0)
    search = EventSearch(index)
    assert [(c.oper, c.coffre, c.lots, c.events, c.refused) for c in search.coffres()] == [
        ("0099", 1, 1, 1, None),
        ("0099", 2, 6, 21, None),
    ]
    everything = search.search(Query(oper="0099"), page_size=100)
    assert len(everything.rows) == 22 and everything.next is None
    dates = [row.at for row in everything.rows]
    assert dates == sorted(dates), "a search is by date"
    assert search.event_types() == sorted({row.type for row in everything.rows})

    alice = search.search(Query(player="alice"), page_size=100)
    assert alice.driver == "IDJoueur" and alice.rows
    assert all("alice" in row.players for row in alice.rows)
    kinds = {row.type for row in alice.rows}
    assert {"CPTEALIM", "POINSCRIT", "POJEU"} <= kinds
    hands = search.search(Query(player="alice", type="POJEU"), page_size=100)
    assert [r.id_evt for r in hands.rows] == [r.id_evt for r in alice.rows if r.type == "POJEU"]
    assert search.search(Query(tech="T-42"), page_size=100).rows
    assert all(r.tech == "T-42" for r in search.search(Query(tech="T-42"), page_size=100).rows)

    flagged = search.search(Query(finding="CARD_DEALT_TWICE"))
    assert ids(flagged) == [(1, 1)]
    row, lot, findings = search.event("0099", 1, 1)
    assert row.type == "POJEU" and row.findings == len(findings) >= 1
    assert findings[0].code == "CARD_DEALT_TWICE" and findings[0].seat == 3
    assert lot.number == 1 and lot.key.startswith("0099/1/")

    span = search.search(Query(oper="0099", coffre=2, first_id=5, last_id=9))
    assert span.driver == "IDEvt" and ids(span) == [(2, n) for n in range(5, 10)]
    day = datetime.fromisoformat(alice.rows[0].at.replace("Z", "+00:00"))
    same_day = search.search(Query(since=day, until=day), page_size=100)
    assert (2, alice.rows[0].id_evt) in ids(same_day)
    assert all(r.at == alice.rows[0].at for r in same_day.rows)
    worded = search.search(Query(text="alice"), page_size=100)
    assert set(ids(alice)) <= set(ids(worded))  # and events whose words name her (a finding, an Info)
    inscription = alice.rows[1].inscription or next(r.inscription for r in alice.rows if r.inscription)
    assert search.search(Query(inscription=inscription)).rows
    hashed = search.player_parties("alice", None, None)[0].hash_joueur
    assert hashed and ids(search.search(Query(hash_joueur=hashed), page_size=100)) == [
        (2, p.id_evt) for p in search.player_parties("alice", None, None) if p.hash_joueur == hashed
    ]
    assert search.search(Query(player="nobody")).rows == []


def test_pages_cover_the_results_once_and_cursors_are_checked(archive, tmp_path, index_at):
    index = index_at("index")
    root, trust = archive
    index_all(root, trust, index)
    search = EventSearch(index)
    for query in (
        Query(oper="0099"),
        Query(player="alice"),
        Query(oper="0099", coffre=2),
        Query(text="T-42"),
    ):
        whole = ids(search.search(query, page_size=1000))
        for size in (1, 2, 5):
            assert every_page(search, query, size) == whole, (query, size)
    page = search.search(Query(player="alice"), page_size=2)
    for forged in ("x:1", "a:zz", "i:1", "a:2026-01-01T00:00:00Z:notanumber", "r:" + "9" * 300):
        with pytest.raises(IndexQueryError):
            search.search(Query(player="alice"), after=forged)
    with pytest.raises(IndexQueryError):  # a cursor of another kind of search
        search.search(Query(oper="0099", coffre=2), after=page.next)


@pytest.mark.parametrize(
    "words", ['"', "ali*", "NEAR(alice bruno)", "' OR 1=1 --", "a:b", "<script>alert(1)</script>", "../.."]
)
def test_words_are_only_words(archive, tmp_path, words, index_at):
    """Full-text words are matched as words: no FTS5 syntax, no SQL, no error."""
    index = index_at("index")
    root, trust = archive
    index_all(root, trust, index)
    found = EventSearch(index).search(Query(text=words))
    assert found.driver == "text"
    if words == "ali*":
        assert found.rows == []  # the star is not a prefix query: "ali" is no word of the index


def test_a_live_index_resumed_lot_by_lot_equals_a_rebuild(archive, tmp_path, index_at):
    """The index as the API builds it (a few lots per pass, a new connection each time: a restart)
    holds exactly what a rebuild from the archive alone holds, the money trail's state included."""
    live = index_at("live")
    rebuilt = index_at("rebuilt")
    root, trust = archive
    passes = 0
    while True:
        done = index_all(root, trust, live, max_lots=1)
        passes += 1
        if done.lots == 0:
            break
    assert passes == 8
    assert rebuild(rebuilt, LocalStorage(root), trust).events == 22
    dump_live, dump_rebuilt = list(EventSearch(live).dump()), list(EventSearch(rebuilt).dump())
    assert dump_live == dump_rebuilt
    assert {table for table, _ in dump_live} >= {"events", "parties", "findings", "flags", "trail", "lots"}


def test_a_crash_inside_a_lot_leaves_whole_lots(archive, tmp_path, monkeypatch, index_at):
    path = index_at("index")
    rebuilt = index_at("rebuilt")
    root, trust = archive
    real = Indexer._add_event
    seen = []

    def dies_at_the_third_event_of_coffre_2(self, oper, coffre, lot, id_evt, *rest):
        if coffre == 2 and id_evt == 7:
            raise KeyboardInterrupt("killed")
        seen.append((coffre, id_evt))
        return real(self, oper, coffre, lot, id_evt, *rest)

    monkeypatch.setattr(Indexer, "_add_event", dies_at_the_third_event_of_coffre_2)
    with pytest.raises(KeyboardInterrupt):
        index_all(root, trust, path)
    assert (2, 5) in seen and (2, 6) in seen  # lot 2 of coffre 2 (IDEvt 5..8) was being written
    search = EventSearch(path)
    assert [r.id_evt for r in search.search(Query(oper="0099", coffre=2), page_size=100).rows] == [1, 2, 3, 4]
    monkeypatch.setattr(Indexer, "_add_event", real)
    index_all(root, trust, path)
    rebuild(rebuilt, LocalStorage(root), trust)
    assert list(EventSearch(path).dump()) == list(EventSearch(rebuilt).dump())


def test_a_lot_that_does_not_verify_stops_its_coffre_only(archive, tmp_path, index_at):
    index = index_at("index")
    root, trust = archive
    lots = sorted((root / "0099" / "2").rglob("0099-2-0000000003.xml"))
    lot = next(p for p in lots if p.parent.name != "checkpoints")
    lot.write_bytes(lot.read_bytes().replace(b"alice", b"alicf", 1))
    done = index_all(root, trust, index)
    assert len(done.refused) == 1 and done.refused[0].startswith("0099/2: ")
    search = EventSearch(index)
    states = {c.coffre: c for c in search.coffres()}
    assert states[1].lots == 1 and states[1].refused is None
    assert states[2].lots == 2 and "lot 3 does not verify" in (states[2].refused or "")
    assert max(r.id_evt for r in search.search(Query(oper="0099", coffre=2), page_size=100).rows) == 8
    assert done.behind == 1  # lot 3 is sealed and not indexed: the lag says so


def test_an_event_this_version_cannot_read_is_indexed_with_a_finding(tmp_path, index_at):
    """Whatever a lot holds is found: an event the catalogue cannot read again is indexed by its
    root element with AUDIT_FAILED, and the next events are indexed as usual."""
    index = index_at("index")
    strange = b"<ZZUNKNOWN><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><IDEvt>1</IDEvt></ZZUNKNOWN>"
    root, _ = seal_archive(tmp_path, {7: [strange]})
    trust = TrustStore.from_pem_files([tmp_path / "cert.pem"])
    done = index_all(root, trust, index)
    assert done.events == 1 and not done.refused
    row, _, findings = EventSearch(index).event("0099", 7, 1)
    assert row.type == "ZZUNKNOWN" and [f.code for f in findings] == ["AUDIT_FAILED"]
    assert row.at == "1970-01-01T00:00:00Z"


def test_the_command_builds_and_rebuilds(archive, tmp_path, capsys, built, index_at):
    index = index_at("cli")
    root, _ = archive
    assert main(["console-index", str(root), "--cert", str(built[1]), "--index", str(index)]) == 0
    assert "7 lot(s), 22 event(s) added" in capsys.readouterr().out
    assert main(["console-index", str(root), "--cert", str(built[1]), "--index", str(index)]) == 0
    assert "0 lot(s), 0 event(s) added" in capsys.readouterr().out
    before = list(EventSearch(index).dump())
    assert (
        main(["console-index", str(root), "--cert", str(built[1]), "--index", str(index), "--rebuild"]) == 0
    )
    assert list(EventSearch(index).dump()) == before
    assert main(["console-index", str(root), "--index", str(index)]) == 2


def test_an_index_of_another_schema_is_refused(tmp_path, index_at):
    path = index_at("index")
    with closing(connect(path)) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    with pytest.raises(ValueError, match="rebuild it"):
        connect(path)


def test_dates_are_stamped_in_utc():
    assert event_index.stamp(datetime(2026, 3, 1, 21, 0, tzinfo=UTC)) == "2026-03-01T21:00:00Z"


def test_a_page_reads_a_bounded_window_and_the_next_goes_on(archive, tmp_path, monkeypatch, index_at):
    """A sparse combination (alice's few POBILAN among her events) answers pages that are not full
    when the window is small, each saying where it stopped; together they hold every match once."""
    index = index_at("index")
    root, trust = archive
    index_all(root, trust, index)
    search = EventSearch(index)
    query = Query(player="alice", type="POJEU", oper="0099")
    whole = ids(search.search(query, page_size=1000))
    assert len(whole) >= 2
    monkeypatch.setattr(event_index, "SCAN_WINDOW", 2)
    pages, after, found = 0, None, []
    while True:
        page = search.search(query, after=after, page_size=50)
        pages += 1
        found += ids(page)
        if page.next is None:
            break
        assert len(page.rows) < 50 and page.stopped_at is not None
        after = page.next
    assert found == whole and pages > 2


def test_the_index_with_the_fewest_rows_drives(archive, tmp_path, index_at):
    index = index_at("index")
    root, trust = archive
    index_all(root, trust, index)
    search = EventSearch(index)
    assert search.search(Query(player="alice", finding="CARD_DEALT_TWICE")).driver == "finding"
    assert search.search(Query(player="alice", type="CPTEALIM")).driver == "type"
    hands = len(search.search(Query(type="POJEU"), page_size=1000).rows)
    for player in ("alice", "bruno", "chloe", "david"):
        own = len(search.search(Query(player=player), page_size=1000).rows)
        expected = "IDJoueur" if own < hands else "type"
        assert search.search(Query(player=player, type="POJEU")).driver == expected, (player, own, hands)


def test_the_findings_are_coffre_audits(archive, tmp_path, capsys, built, index_at):
    """Each event's findings in the index are those ``coffre audit`` reports on the same archive (one
    engine of checks, the money trail fed in the same order)."""
    index = index_at("index")
    root, trust = archive
    index_all(root, trust, index)
    main(["audit", str(root), "--cert", str(built[1]), "--json"])
    report = json.loads(capsys.readouterr().out)
    audited = sorted((f["id_coffre"], f["id_evt"], f["code"], f["message"]) for f in report["findings"])
    search = EventSearch(index)
    indexed = sorted(
        (row.coffre, row.id_evt, finding.code, finding.message)
        for row in search.search(Query(oper="0099"), page_size=1000).rows
        for finding in search.event("0099", row.coffre, row.id_evt)[2]
    )
    assert indexed and indexed == audited


def normalized_copies(raws: list[bytes], copies: int) -> list[bytes]:
    """``normalized(raws * copies)``, the same bytes: the first copy normalized, each later one made
    from it with its IDEvt put in (the canonical bytes differ in that element only; checked against
    ``normalized`` for the second copy). Normalizing the 1,600 events was a second and a half."""
    first = normalized(raws)
    made = [
        event.replace(f"<IDEvt>{n}</IDEvt>".encode(), f"<IDEvt>{copy * len(raws) + n}</IDEvt>".encode(), 1)
        for copy in range(copies)
        for n, event in enumerate(first, start=1)
    ]
    assert made[: 2 * len(raws)] == normalized(raws * 2)
    return made


def test_kill_9_while_indexing_then_resume(tmp_path, index_at):
    """``coffre console-index`` SIGKILLed while it writes: the index it left holds whole lots, and
    the next run ends with exactly what a rebuild holds."""
    index = index_at("index")
    rebuilt = index_at("rebuilt")
    import os
    import signal
    import subprocess
    import sys
    import time

    from coffre.commands.inputs import inputs

    from audit_hands import DEMO

    raws = [raw for _, raw in inputs([str(DEMO / "mixed")])]
    root, _ = seal_archive(tmp_path, {3: normalized_copies(raws, 40)}, lot_events=50)
    argv = [
        sys.executable,
        "-m",
        "coffre.cli",
        "console-index",
        str(root),
        "--cert",
        str(tmp_path / "cert.pem"),
    ]
    child = subprocess.Popen(
        [*argv, "--index", str(index)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    lots = 0
    while time.monotonic() < deadline and lots < 3:
        time.sleep(0.05)
        if not isinstance(index, Path) or index.exists():
            try:
                with closing(connect(index, readonly=True)) as db:
                    lots = db.execute("SELECT count(*) FROM lots").fetchone()[0]
            except Exception:
                lots = 0
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert lots >= 3, "the index never got going"
    with closing(connect(index, readonly=True)) as db:
        held = db.execute("SELECT count(*), coalesce(sum(last_id - first_id + 1), 0) FROM lots").fetchone()
        events = db.execute("SELECT count(*) FROM events").fetchone()[0]
    total = 40 * len(raws)
    assert held[0] < total // 50 and events == held[1], "killed after the end, or a lot half written"
    assert subprocess.run([*argv, "--index", str(index)], capture_output=True).returncode == 0
    assert (
        rebuild(rebuilt, LocalStorage(root), TrustStore.from_pem_files([tmp_path / "cert.pem"])).events
        == total
    )
    assert list(EventSearch(index).dump()) == list(EventSearch(rebuilt).dump())


def test_a_pass_with_nothing_new_lists_no_lot(archive, tmp_path, index_at):
    """Once caught up, a pass asks each coffre for its next seal note and lists no lot: its cost does
    not grow with the history."""
    index = index_at("index")
    root, trust = archive
    storage = RecordingStorage(root)
    with closing(connect(index)) as db:
        indexer = Indexer(db, storage, trust)
        assert indexer.catch_up().events == 22
        storage.calls.clear()
        assert indexer.catch_up().events == 0
    assert not [call for call in storage.calls if call[0] == "list"]
    assert [call[0] for call in storage.calls] == ["read", "read"]  # the next note of each coffre


def test_an_archive_from_before_seal_notes(archive, tmp_path, index_at):
    index = index_at("index")
    root, trust = archive
    for notes in root.rglob("seals"):
        shutil.rmtree(notes)
    assert not list(root.rglob("*.json"))
    done = index_all(root, trust, index)
    assert (done.lots, done.events, done.refused) == (7, 22, [])


def test_the_api_rebuilds_an_index_of_another_schema(archive, tmp_path):
    root, trust = archive
    path = tmp_path / "index.sqlite"
    index_all(root, trust, path)
    with closing(connect(path)) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    thread = event_index.IndexThread(path, LocalStorage(root), trust, interval=0.1)
    thread.start()
    try:
        assert thread.caught_up.wait(30)
    finally:
        thread.stop()
    assert (tmp_path / "index.sqlite.schema-0").exists()
    rebuilt = tmp_path / "rebuilt.sqlite"
    rebuild(rebuilt, LocalStorage(root), trust)
    assert list(EventSearch(path).dump()) == list(EventSearch(rebuilt).dump())


def test_a_defect_on_one_coffre_stops_only_that_coffre(archive, tmp_path, monkeypatch, index_at):
    """An unexpected error while indexing one coffre (a storage fault, a defect) leaves that coffre
    for the next pass; the other coffres are indexed in this one."""
    index = index_at("index")
    root, trust = archive
    real = Indexer._add_event

    def fails_on_coffre_1(self, oper, coffre, *rest):
        if coffre == 1:
            raise RuntimeError("a defect met on coffre 1")
        return real(self, oper, coffre, *rest)

    monkeypatch.setattr(Indexer, "_add_event", fails_on_coffre_1)
    done = index_all(root, trust, index)
    assert (done.lots, done.events) == (6, 21)
    assert len(done.failed) == 1 and done.failed[0].startswith("0099/1: RuntimeError")
    assert done.behind == 1  # coffre 1's lot is sealed, not indexed
    monkeypatch.setattr(Indexer, "_add_event", real)
    done = index_all(root, trust, index)
    assert (done.lots, done.events, done.failed) == (1, 1, [])


def test_workers_index_what_one_process_indexes(archive, tmp_path, index_at):
    """With --jobs 2 the next lot is verified and checked by the workers while the one before is
    written: the same rows as one process, lot by lot or whole, and a lot that does not verify is
    refused after the lots before it are written."""
    one = index_at("one")
    passes = index_at("passes")
    two = index_at("two")
    root, trust = archive
    assert rebuild(one, LocalStorage(root), trust).events == 22
    done = rebuild(two, LocalStorage(root), trust, jobs=2)
    assert (done.lots, done.events, done.refused, done.failed) == (7, 22, [], [])
    assert list(EventSearch(one).dump()) == list(EventSearch(two).dump())
    with closing(connect(passes)) as db:
        indexer = Indexer(db, LocalStorage(root), trust, jobs=2)
        try:
            counts = [indexer.catch_up(max_lots=2).lots for _ in range(5)]
        finally:
            indexer.close()
    assert counts == [2, 2, 2, 1, 0]
    assert list(EventSearch(passes).dump()) == list(EventSearch(one).dump())

    lots = sorted((root / "0099" / "2").rglob("0099-2-0000000003.xml"))
    lot = next(p for p in lots if p.parent.name != "checkpoints")
    lot.write_bytes(lot.read_bytes().replace(b"alice", b"alicf", 1))
    bad1, bad2 = index_at("bad1"), index_at("bad2")
    for jobs, path in ((1, bad1), (2, bad2)):
        with closing(connect(path)) as db:
            indexer = Indexer(db, LocalStorage(root), trust, jobs=jobs)
            try:
                done = indexer.catch_up()
            finally:
                indexer.close()
        assert (done.lots, len(done.refused), done.behind) == (3, 1, 1), jobs
        states = {c.coffre: c for c in EventSearch(path).coffres()}
        assert states[2].lots == 2 and "lot 3 does not verify" in (states[2].refused or "")
    assert list(EventSearch(bad1).dump()) == list(EventSearch(bad2).dump())


# -- PostgreSQL beside SQLite (docs/console.md, "PostgreSQL") -------------------------------------


def test_seconds_are_the_dates_of_the_index():
    """The index stores dates as whole seconds since 1970 UTC, floored; shown as before."""
    moment = datetime(2026, 3, 1, 21, 0, 5, 999_999, tzinfo=UTC)
    assert event_index.seconds(moment) == 1772398805
    assert event_index.at_text(1772398805) == "2026-03-01T21:00:05Z"
    assert event_index.seconds(datetime(1970, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))) == 0


def test_both_backends_hold_the_same_rows_and_answer_alike(archive, tmp_path, postgres_server):
    """One archive indexed in SQLite and in PostgreSQL: the same rows (keyed as ``dump`` keys them),
    and every kind of question answered alike, page by page, cursors and drivers included."""
    root, trust = archive
    lite, pg = tmp_path / "index.sqlite", postgres_server.create_database("alike")
    for target in (lite, pg):
        assert index_all(root, trust, target).events == 22
    a, b = EventSearch(lite), EventSearch(pg)
    assert list(a.dump()) == list(b.dump())
    alice = a.search(Query(player="alice"), page_size=100).rows
    day = datetime.fromisoformat(alice[0].at.replace("Z", "+00:00"))
    hashed = a.player_parties("alice", None, None)[0].hash_joueur
    queries = [
        Query(),
        Query(oper="0099"),
        Query(player="alice"),
        Query(player="alice", type="POJEU"),
        Query(tech="T-42"),
        Query(finding="CARD_DEALT_TWICE"),
        Query(oper="0099", coffre=2, first_id=5, last_id=9),
        Query(since=day, until=day),
        Query(since=day),
        Query(hash_joueur=hashed),
        Query(inscription=alice[1].inscription or next(r.inscription for r in alice if r.inscription)),
        Query(text="alice"),
        Query(text="ALICE t-42"),
        Query(text="T-42", type="POJEU"),
        Query(text="42 T"),
        Query(text="POJEU", player="bruno"),
        Query(text="nobody"),
        Query(text="' OR 1=1 --"),
        Query(player="alice", text="CARD_DEALT_TWICE"),
    ]
    for query in queries:
        for size in (1, 3, 1000):
            after: str | None = None
            while True:
                first, second = (
                    a.search(query, after=after, page_size=size),
                    b.search(query, after=after, page_size=size),
                )
                assert first == second, (query, size, after)
                if first.next is None:
                    break
                after = first.next
    assert a.search(Query(text="T-42"), page_size=100).rows, "the words of a Tech are found"
    assert a.coffres() == b.coffres()
    assert a.lots_by_day() == b.lots_by_day() and a.lots_by_day()[0][0] == "2026-03-02"
    assert a.findings_by_day() == b.findings_by_day() and a.findings_by_day()
    assert a.finding_codes() == b.finding_codes() and a.event_types() == b.event_types()
    for player in ("alice", "bruno"):
        assert a.player_parties(player, day, None) == b.player_parties(player, day, None)
        assert a.player_findings(player, None, None) == b.player_findings(player, None, None)
    assert a.tech_events("T-42") == b.tech_events("T-42") and a.tech_parties("T-42") == b.tech_parties("T-42")
    row = alice[2]
    assert a.event("0099", row.coffre, row.id_evt) == b.event("0099", row.coffre, row.id_evt)
    assert a.neighbours("0099", "alice", row.at, row.row) == b.neighbours("0099", "alice", row.at, row.row)
    assert a.neighbours("0099", "alice", row.at, row.row)[0] is not None


def test_the_full_text_finds_the_same_on_both_databases(postgres_server):
    """The words are cut by :func:`event_index.words` for both databases; FTS5 (SQLite) and a
    tsvector with a GIN index (PostgreSQL) then match the same events: each typed word a phrase of
    its parts, one after the other, every typed word in the event, accents and case aside."""
    import sqlite3

    import psycopg

    bodies = [
        "POJEU Chloé-2 paid at T-42",
        "POJEU t then 42, not T-42 as one",
        "CPTEALIM 42 T",
        "CPTEMODIF Ünïcode ÉTÉ offre",
        "alice.b@example.fr don't",
        "POINSCRIT T-420 ali",
    ]
    typed = [
        "T-42",
        "42 t",
        "t-42 paid",
        "chloe",
        "CHLOÉ-2",
        "ete",
        "unicode",
        "alice.b",
        "b@example",
        "don't",
        "ali",
        "T-420",
        "42",
        "paid T-42 Chloé",
        "nothing",
        "T 42 then",
    ]
    lite = sqlite3.connect(":memory:")
    lite_db = event_index.IndexDB(lite, event_index.SQLITE, ":memory:")
    for statement in event_index.SQLITE.schema():
        if "event_text" in statement:
            lite.execute(statement)
    pg = event_index.IndexDB(
        psycopg.connect(postgres_server.create_database("words"), autocommit=True), event_index.POSTGRESQL, ""
    )
    for statement in event_index.POSTGRESQL.schema():
        if "event_text" in statement:
            pg.execute(statement)
    for db in (lite_db, pg):
        db.executemany(
            f"INSERT INTO event_text ({db.dialect.text_row}, body) VALUES (?, ?)",
            [(n, db.dialect.text_body(event_index.words(body))) for n, body in enumerate(bodies, start=1)],
        )
    found: dict[str, list[int]] = {}
    for text in typed:
        answers = []
        for db in (lite_db, pg):
            match, args = event_index._text_match(text, db.dialect, "t")
            sql = f"SELECT t.{db.dialect.text_row} FROM event_text t WHERE {match} ORDER BY 1"
            answers.append([n for (n,) in db.execute(sql, args)])
        assert answers[0] == answers[1], text
        found[text] = answers[0]
    assert found["T-42"] == [1, 2] and found["42 t"] == [1, 2, 3] and found["t-42 paid"] == [1]
    assert found["chloe"] == found["CHLOÉ-2"] == [1] and found["ete"] == found["unicode"] == [4]
    assert (
        found["ali"] == [6] and found["T-420"] == [6] and found["nothing"] == [] and found["T 42 then"] == [2]
    )
    pg.close()


def test_two_indexers_on_one_postgresql_database_write_each_lot_once(archive, tmp_path, postgres_server):
    """Two API replicas' indexers over one archive and one PostgreSQL database, verifying each lot
    at the same moment (a barrier before each write): each lot is written by one of them, the other
    skips it, and the index is the one a single indexer makes, the findings and the trail's state
    included."""
    import threading

    root, trust = archive
    shared, single = postgres_server.create_database("shared"), tmp_path / "single.sqlite"
    index_all(root, trust, single)
    barrier = threading.Barrier(2, timeout=30)
    real = Indexer._write

    def together(self, lot, done):
        barrier.wait()
        return real(self, lot, done)

    results: dict[int, event_index.CatchUp] = {}
    errors: list[BaseException] = []

    def replica(n: int) -> None:
        try:
            with closing(connect(shared)) as db:
                results[n] = Indexer(db, LocalStorage(root), trust).catch_up()
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
            barrier.abort()

    Indexer._write = together  # type: ignore[method-assign]
    try:
        threads = [threading.Thread(target=replica, args=(n,)) for n in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        Indexer._write = real  # type: ignore[method-assign]
    assert not errors, errors
    assert sorted((r.lots + r.skipped, r.refused) for r in results.values()) == [(7, []), (7, [])]
    assert sum(r.lots for r in results.values()) == 7 and sum(r.events for r in results.values()) == 22
    assert list(EventSearch(shared).dump()) == list(EventSearch(single).dump())


def test_indexers_taking_turns_read_what_the_other_wrote(archive, tmp_path, index_at):
    """Two indexers writing lots in turn (one lot each pass): each reads the money trail's state the
    other left (its own cache is dropped when another wrote), so the findings are a single one's."""
    root, trust = archive
    shared, single = index_at("shared"), tmp_path / "single.sqlite"
    index_all(root, trust, single)
    with closing(connect(shared)) as one, closing(connect(shared)) as two:
        indexers = [Indexer(one, LocalStorage(root), trust), Indexer(two, LocalStorage(root), trust)]
        written = [indexers[n % 2].catch_up(max_lots=1).lots for n in range(8)]
    assert written == [1] * 7 + [0]
    assert list(EventSearch(shared).dump()) == list(EventSearch(single).dump())


def test_two_commands_at_once_on_one_postgresql_database(archive, tmp_path, postgres_server, built):
    """Two ``coffre console-index`` processes started together on one PostgreSQL index (as two
    replicas starting on an empty one): between them every event once, as one alone writes it."""
    import subprocess
    import sys

    root, _ = archive
    shared, single = postgres_server.create_database("commands"), tmp_path / "single.sqlite"
    index_all(root, TrustStore.from_pem_files([built[1]]), single)
    argv = [sys.executable, "-m", "coffre.cli", "console-index", str(root), "--cert", str(built[1])]
    children = [
        subprocess.Popen([*argv, "--index", shared], stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [child.communicate(timeout=120)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    assert "postgresql://coffre@/" in outputs[0] and "host=" in outputs[0]
    assert sum(int(out.split(" lot(s)")[0].rsplit(" ", 1)[1]) for out in outputs) == 7, outputs
    dump = list(EventSearch(shared).dump())
    assert dump == list(EventSearch(single).dump())
    assert len([row for table, row in dump if table == "events"]) == 22


def test_the_api_refuses_a_postgresql_index_of_another_schema(archive, postgres_server):
    """A PostgreSQL index of another schema version is not moved aside nor dropped (other replicas
    may read it): the API does not start, and says how to rebuild it."""
    root, trust = archive
    url = postgres_server.create_database("other")
    with closing(connect(url)) as db:
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    with pytest.raises(event_index.OtherSchema, match=r"an index of schema 1.*rebuild it") as refused:
        event_index.IndexThread(url, LocalStorage(root), trust, interval=0.1)
    assert refused.value.found == "1"
    done = rebuild(url, LocalStorage(root), trust)  # coffre console-index --rebuild
    assert done.events == 22 and EventSearch(url).search(Query(oper="0099"), page_size=100).rows


def test_the_index_setting_is_a_file_or_a_postgresql_url(tmp_path, archive):
    """COFFRE_CONSOLE_INDEX: a postgresql:// URL is the database (kept as written), anything else
    the SQLite file; SQLite by default. A database that does not answer is said without its password."""
    from coffre.config import Settings

    url = "postgresql://coffre:secret@/nowhere?host=/nonexistent&port=1"
    assert Settings(data_dir=tmp_path, console_index=url).console_index_path == url
    assert (
        Settings(data_dir=tmp_path, console_index="postgres://h/db").console_index_path == "postgres://h/db"
    )
    assert Settings(data_dir=tmp_path, console_index="x/i.sqlite").console_index_path == Path("x/i.sqlite")
    assert Settings(data_dir=tmp_path).console_index_path == tmp_path / "console" / "index.sqlite"
    root, trust = archive
    with pytest.raises(OSError) as refused:
        event_index.IndexThread(url, LocalStorage(root), trust)
    assert "coffre:***@" in str(refused.value) and "secret" not in str(refused.value)


def test_without_postgresql_its_tests_skip_saying_how_but_fail_under_ci(monkeypatch):
    import postgres

    monkeypatch.setattr(postgres, "bindir", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql"):
        postgres.require_postgresql()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the PostgreSQL tests"):
        postgres.require_postgresql()


def test_the_tests_postgresql_server_dies_with_the_test_process(tmp_path):
    """tests/postgres.py's server is tied to the process that started it: SIGKILLed, that process
    takes the server with it (no server left holding its port and folder)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import postgres

    postgres.require_postgresql()
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from postgres import LocalPostgres, require_postgresql\n"
        "server = LocalPostgres(require_postgresql()).start()\n"
        "print(server.process.pid, server.folder, flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid, folder = child.stdout.readline().split()  # type: ignore[union-attr]
        os.kill(int(pid), 0)  # the server (the lifeline's shim became postgres) runs
    finally:
        child.kill()
        child.wait(10)

    def alive() -> bool:  # a zombie is dead: it waits for its new parent to reap it
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return not stat.read().rsplit(") ", 1)[1].startswith("Z")
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.kill(int(pid), signal.SIGKILL)
        pytest.fail("the PostgreSQL server outlived the process that started it")
    subprocess.run(["rm", "-rf", folder], check=False)


def test_connections_lost_to_postgresql_are_made_again(archive, postgres_server):
    """The server ends a connection (a restart, a failover, the network): the search that met it
    fails, the next one connects again; the index thread connects again and goes on indexing."""
    import time

    import psycopg

    root, trust = archive
    url = postgres_server.create_database("lost")
    search = EventSearch(url)
    thread = event_index.IndexThread(url, LocalStorage(root), trust, interval=0.1)
    thread.start()
    try:
        assert thread.caught_up.wait(30)
        assert len(search.search(Query(oper="0099"), page_size=100).rows) == 22
        with psycopg.connect(url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        assert ended == 2  # the search's connection and the thread's
        with pytest.raises(psycopg.OperationalError):
            search.search(Query(oper="0099"))
        assert len(search.search(Query(oper="0099"), page_size=100).rows) == 22
        passes = thread.passes
        deadline = time.monotonic() + 30
        while thread.passes < passes + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert thread.last is not None and thread.last.failed == [] and thread.passes >= passes + 3
    finally:
        thread.stop()


def _dates(page: event_index.Page) -> list[tuple[str, int]]:
    return [(row.at, row.row) for row in page.rows]


@pytest.mark.parametrize("window", [event_index.SCAN_WINDOW, 2])
def test_previous_pages_go_back_over_the_same_rows_in_every_order(archive, monkeypatch, window, index_at):
    """Forward with ``after`` then back with ``before`` gives each page again, in each order, also
    when the bounded window cuts pages short (``window`` 2)."""
    root, trust = archive
    index = index_at("index")
    index_all(root, trust, index)
    search = EventSearch(index)
    monkeypatch.setattr(event_index, "SCAN_WINDOW", window)
    for query, sort in (
        (Query(oper="0099"), "date"),
        (Query(oper="0099"), "-date"),
        (Query(player="alice"), "-date"),
        (Query(oper="0099", coffre=2), "id"),
        (Query(oper="0099", coffre=2), "-id"),
        (Query(oper="0099", coffre=2), None),
    ):
        pages, after = [], None
        while True:
            page = search.search(query, after=after, sort=sort, page_size=3)
            pages.append(page)
            if page.next is None:
                break
            after = page.next
        assert pages[0].previous is None
        for earlier, later in itertools.pairwise(pages):
            if not later.rows or not earlier.rows:
                continue
            back = search.search(query, before=later.previous, sort=sort, page_size=3)
            if window > 3:  # no page cut short: each page exactly again
                assert ids(back) == ids(earlier), (query, sort)
            assert ids(back)[-len(earlier.rows) :] == ids(earlier)[-len(back.rows) :], (query, sort)
            assert back.next is not None
            again = search.search(query, after=back.next, sort=sort, page_size=3)
            assert ids(again)[: len(later.rows)] == ids(later)[: len(again.rows)], (query, sort)


def test_sorting_by_date_and_by_idevt_both_ways(archive, index_at):
    root, trust = archive
    index = index_at("index")
    index_all(root, trust, index)
    search = EventSearch(index)
    oldest = search.search(Query(oper="0099"), sort="date", page_size=100)
    newest = search.search(Query(oper="0099"), sort="-date", page_size=100)
    assert _dates(newest) == sorted(_dates(oldest), reverse=True) and len(oldest.rows) == 22
    assert oldest.sort == "date" and newest.sort == "-date"
    by_id = [r.id_evt for r in search.search(Query(oper="0099", coffre=2), sort="-id", page_size=100).rows]
    assert by_id == list(range(21, 0, -1))
    # a coffre drives by IDEvt unless the date order is asked
    assert search.search(Query(oper="0099", coffre=2)).sort == "id"
    dated = search.search(Query(oper="0099", coffre=2), sort="date", page_size=100)
    assert dated.sort == "date" and _dates(dated) == sorted(_dates(dated))
    assert sorted(r.id_evt for r in dated.rows) == list(range(1, 22))
    with pytest.raises(IndexQueryError, match="needs a coffre"):
        search.search(Query(player="alice"), sort="id")
    with pytest.raises(IndexQueryError, match="sort"):
        search.search(Query(player="alice"), sort="sideways")
    with pytest.raises(IndexQueryError):  # a cursor of the other direction
        search.search(
            Query(oper="0099"), sort="-date", after=search.search(Query(oper="0099"), page_size=2).next
        )


def test_the_total_counts_every_match_and_says_when_it_is_a_floor(archive, monkeypatch, index_at):
    root, trust = archive
    index = index_at("index")
    index_all(root, trust, index)
    search = EventSearch(index)
    for query in (
        Query(oper="0099"),
        Query(player="alice"),
        Query(player="alice", type="POJEU"),
        Query(text="T-42"),
    ):
        page = search.search(query, page_size=1)
        assert (page.total, page.total_exact) == (len(every_page(search, query, 1000)), True), query
    monkeypatch.setattr(event_index, "CHOICE_LIMIT", 3)
    page = search.search(Query(oper="0099"), page_size=1)
    assert (page.total, page.total_exact) == (3, False)  # at least 3: counted in the first 3 rows


def test_players_found_by_the_start_of_their_identifier(archive, index_at):
    root, trust = archive
    index = index_at("index")
    index_all(root, trust, index)
    search = EventSearch(index)
    with closing(connect(index, readonly=True)) as db:
        players = sorted({p for (p,) in db.execute("SELECT player FROM parties")})
        hashes = sorted({h for (h,) in db.execute("SELECT hash FROM parties WHERE hash IS NOT NULL")})
    assert search.players_starting("") == players[:50]
    for player in players:
        for cut in (1, 2, len(player)):
            expected = [p for p in players if p.startswith(player[:cut])]
            assert search.players_starting(player[:cut]) == expected[:50]
    assert search.players_starting("al", limit=1) == [p for p in players if p.startswith("al")][:1]
    assert search.players_starting("zzz-nobody") == []
    assert hashes and search.players_starting(hashes[0][:6], hashes=True) == [
        h for h in hashes if h.startswith(hashes[0][:6])
    ]


def test_the_index_thread_yields_to_the_recording_path():
    """The console index's thread runs nicer than the process (issue 34): on a shared machine its
    reading of every sealed lot waits for ingest, the vault and acquittal, not the other way."""
    import os
    import threading

    from coffre_regulator.event_index import INDEX_NICE, yield_to_recording

    seen: dict[str, int | bool] = {}

    def body() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        seen["lowered"] = yield_to_recording()
        seen["before"], seen["after"] = before, os.getpriority(os.PRIO_PROCESS, tid)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen["lowered"] is True
    assert seen["after"] == min(19, seen["before"] + INDEX_NICE)
    assert os.getpriority(os.PRIO_PROCESS, 0) == seen["before"]  # the process (its other threads) unchanged
