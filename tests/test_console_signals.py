"""The signals' state in the console's index (services/regulator/index_signals.py), on both
backends: fed with each lot as the indexer writes it, it equals the state ``coffre signals`` builds
from the archive alone, through restarts with and without a save, a crash inside a lot, and two
writers (replicas) taking lots in turn: nothing is lost, nothing is counted twice."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from coffre_regulator.event_index import EventSearch, Indexer, connect
from coffre_regulator.index_signals import SignalsKeeper, load_state

from coffre.adapters.storage import LocalStorage
from coffre.commands.inputs import inputs
from coffre.commands.signals import signals_paths
from coffre.domain.signals.scores import evaluate
from coffre.domain.signals.state import SignalState
from coffre.domain.signing import TrustStore

from audit_hands import DEMO, normalized, seal_archive
from signal_events import signal_events


@pytest.fixture(scope="module")
def sealed(tmp_path_factory) -> tuple[Path, Path, dict]:
    """The demo's mixed table (coffre 0099/3) and a table with a shared IPJoueur and one person's
    two accounts (0099/5), in lots of 4; and the state ``coffre signals`` makes of the archive."""
    tmp = tmp_path_factory.mktemp("signals-index")
    mixed = [raw for _, raw in inputs([str(DEMO / "mixed")])]
    root, cert = seal_archive(
        tmp, {("0099", 3): normalized(mixed), ("0099", 5): normalized(signal_events(hands=6))}
    )
    run = signals_paths([str(root)], [cert])
    assert not run.problems and run.state.events == 48 and run.state.hands == 30
    assert {s.name for subject in run.alerts for s in subject.signals if s.crossed} == {
        "shared_ip",
        "same_hash",
    }
    return root, cert, run.state.as_json()


def saved(index: Path | str) -> SignalState:
    with closing(connect(index)) as db:
        found = load_state(db)
    assert found is not None, "no signals state in the index"
    return found[1]


def same(state: SignalState, expected: dict) -> None:
    assert state.as_json() == expected
    fresh = SignalState.from_json(expected)
    assert [s.as_json() for s in evaluate(state)] == [s.as_json() for s in evaluate(fresh)]


def one_pass(
    root: Path, cert: Path, index: Path | str, *, close: bool, max_lots: int | None = 1
) -> tuple[int, int]:
    """One pass of a new indexer (a restart), closed (its state saved) or not (killed): the lots
    it wrote and the events it fed again from the archive."""
    with closing(connect(index)) as db:
        indexer = Indexer(db, LocalStorage(root), TrustStore.from_pem_files([cert]))
        done = indexer.catch_up(max_lots=max_lots)
        if close:
            indexer.close()
        return done.lots, indexer.signals.refed


def test_restarts_with_and_without_a_save_count_every_event_once(sealed, index_at, monkeypatch):
    root, cert, expected = sealed
    index = index_at("index")
    monkeypatch.setattr(SignalsKeeper, "SAVE_LOTS", 3)  # saved with every third lot, and at close
    monkeypatch.setattr(SignalsKeeper, "SAVE_SECONDS", 3600.0)
    refed, passes = [], 0
    while True:
        lots, again = one_pass(root, cert, index, close=passes % 4 == 3)  # killed three times in four
        refed.append(again)
        passes += 1
        if not lots:
            break
    assert passes == 13  # 12 lots (10 + 2), one a pass, then a pass that finds none
    assert any(refed) and refed[0] == 0  # a restart fed again what the state saved before it lacked
    one_pass(root, cert, index, close=True)
    same(saved(index), expected)


def test_a_crash_inside_a_lot_counts_nothing_twice(sealed, index_at, monkeypatch):
    root, cert, expected = sealed
    index = index_at("index")
    monkeypatch.setattr(SignalsKeeper, "SAVE_LOTS", 1)  # saved in every lot's transaction,
    monkeypatch.setattr(SignalsKeeper, "SAVE_SHARE", 1e9)  # however long the last save took
    real = Indexer._add_event

    def dies_in_lot_2_of_coffre_5(self, oper, coffre, lot, id_evt, *rest):
        if coffre == 5 and id_evt == 6:
            raise KeyboardInterrupt("killed")
        return real(self, oper, coffre, lot, id_evt, *rest)

    monkeypatch.setattr(Indexer, "_add_event", dies_in_lot_2_of_coffre_5)
    with pytest.raises(KeyboardInterrupt):
        one_pass(root, cert, index, close=False, max_lots=None)
    half = saved(index)  # the state of the last lot written: coffre 3, lot 1 of coffre 5
    assert half.cursor == {"0099/3": 40, "0099/5": 4}
    monkeypatch.setattr(Indexer, "_add_event", real)
    assert one_pass(root, cert, index, close=True, max_lots=None) == (1, 0)
    same(saved(index), expected)


def test_two_writers_taking_lots_in_turn_each_feed_the_others(sealed, index_at, monkeypatch):
    """Two indexers on one index (API replicas): each lot is written by one of them, and each feeds
    its state the lots the other wrote (read again from the archive, under the write lock)."""
    root, cert, expected = sealed
    index = index_at("index")
    monkeypatch.setattr(SignalsKeeper, "SAVE_LOTS", 5)
    monkeypatch.setattr(SignalsKeeper, "IDLE_SAVE_SECONDS", 3600.0)
    trust = TrustStore.from_pem_files([cert])
    with closing(connect(index)) as first_db, closing(connect(index)) as second_db:
        first = Indexer(first_db, LocalStorage(root), trust)
        second = Indexer(second_db, LocalStorage(root), trust)
        written = [0, 0]
        for turn in range(14):
            written[turn % 2] += (first, second)[turn % 2].catch_up(max_lots=1).lots
        assert written == [6, 6]
        assert first.signals.state is not None and second.signals.state is not None
        assert first.signals.refed and second.signals.refed
        assert second.signals.state.as_json() == expected  # the last to write holds every lot
        first.catch_up()  # nothing to write: its state lacks the other's last lot until it writes
        assert first.signals.state.events < second.signals.state.events
        second.close()
        first._save_signals()  # as at a pass's end or its close: fed the other's lot under the lock
        assert first.signals.state.as_json() == expected
        first.close()
    same(saved(index), expected)
    assert sum(1 for _ in EventSearch(index).dump()) > 0


def test_an_index_made_before_the_signals_gets_them_from_the_archive(sealed, index_at):
    """An index whose lots were all written before it kept signals (its table empty): its next
    indexer, with no lot to write, feeds the state every indexed lot and saves it."""
    root, cert, expected = sealed
    index = index_at("index")
    one_pass(root, cert, index, close=True, max_lots=None)
    with closing(connect(index)) as db, db.writing():
        db.execute("DELETE FROM signals")
    assert one_pass(root, cert, index, close=True, max_lots=None) == (0, 48)
    same(saved(index), expected)


def test_workers_read_the_signals_of_the_whole_hand(sealed, tmp_path):
    """With worker processes (``coffre console-index --jobs 2``) the main process gets only the
    money trail's view of a hand: the workers read its signals' facts from the whole event."""
    root, cert, expected = sealed
    index = tmp_path / "index.sqlite"
    with closing(connect(index)) as db:
        indexer = Indexer(db, LocalStorage(root), TrustStore.from_pem_files([cert]), jobs=2)
        try:
            assert indexer.catch_up().events == 48
        finally:
            indexer.close()
        assert indexer._pool is None
    same(saved(index), expected)
