"""The collusion and robot signals (issue 33) of the console's index: a
:class:`~coffre.domain.signals.state.SignalState` fed with each lot's events as the indexer writes
them, kept in the index's own database (the ``signals`` table: the state's gzip JSON), on SQLite
and PostgreSQL alike. The console's signals page evaluates it (docs/console.md, "Signals").

- **Fed in the lot's transaction.** The indexer feeds the state each event it writes, inside the
  write lock that claims the lot (:meth:`IndexDB.writing`): a lot is counted by whichever writer (an
  API replica, ``coffre console-index``) wrote it, once.
- **Saved every few lots.** Writing the whole state with every lot would cost as much as the state
  is large; it is saved in the lot's transaction every :attr:`SignalsKeeper.SAVE_LOTS` lots or
  :attr:`SignalsKeeper.SAVE_SECONDS` seconds, at the end of a pass when it waited
  :attr:`SignalsKeeper.IDLE_SAVE_SECONDS`, and when the indexer closes; never more often than
  keeps the saves within :attr:`SignalsKeeper.SAVE_SHARE` of the time (a large state less often).
- **Nothing lost, nothing twice.** The state's cursor says, per coffre, the last IDEvt it was fed.
  When the state is loaded (an indexer starting, after a crash), and when another writer wrote lots
  since this one last did, the lots the index holds past the cursor are read again from the archive
  (their SHA-256 the one the index verified) and fed in the order they were written: the state is
  then the one a fresh state fed every indexed event in that order would be.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from coffre.adapters.storage import ArchiveStorage, ObjectMissing
from coffre.domain.errors import Rejected
from coffre.domain.lot import LotFormatError, parse_document, read_lot
from coffre.domain.normalize import normalize
from coffre.domain.signals.facts import AccountFacts, HandFacts, Ref, facts_of
from coffre.domain.signals.state import SignalState

if TYPE_CHECKING:
    from .event_index import IndexDB

log = logging.getLogger("coffre.console")

STATE_KEY = "state"
"""The ``signals`` table's one row (a key, should the index ever keep more than one state)."""

Facts = HandFacts | AccountFacts | None


def event_facts(event: Any) -> Facts:
    """What the signals read of a normalized event (None: nothing, or a defect of the reading,
    logged: the event is passed over, the others are read)."""
    try:
        return facts_of(event)
    except Exception:
        log.warning("console index: the signals could not read an event", exc_info=True)
        return None


def stored_version(db: IndexDB) -> tuple[int, int] | None:
    """(version, events) of the state saved in the index; None when none was."""
    found = db.execute("SELECT version, events FROM signals WHERE key = ?", (STATE_KEY,)).fetchone()
    return None if found is None else (int(found[0]), int(found[1]))


def load_state(db: IndexDB) -> tuple[int, SignalState] | None:
    """The state saved in the index and its version; None when none was (or it is of another
    version of the state, which is then fed again from the archive)."""
    found = db.execute("SELECT version, value FROM signals WHERE key = ?", (STATE_KEY,)).fetchone()
    if found is None:
        return None
    try:
        return int(found[0]), SignalState.from_json(json.loads(gzip.decompress(bytes(found[1]))))
    except (ValueError, KeyError, TypeError, OSError) as exc:
        log.warning(
            "console index: the saved signals state is not read (%s): fed again from the archive", exc
        )
        return None


def save_state(db: IndexDB, state: SignalState) -> int:
    """Write ``state`` (inside the caller's transaction); returns the bytes written."""
    value = gzip.compress(json.dumps(state.as_json(), separators=(",", ":")).encode(), compresslevel=3)
    db.execute(
        "INSERT INTO signals (key, version, events, value) VALUES (?, 1, ?, ?) ON CONFLICT (key) DO UPDATE "
        "SET version = signals.version + 1, events = excluded.events, value = excluded.value",
        (STATE_KEY, state.events, value),
    )
    return len(value)


class SignalsKeeper:
    """The indexer's signals state: loaded, fed, saved and, when it may miss lots, fed again."""

    SAVE_LOTS = 50
    SAVE_SECONDS = 60.0
    IDLE_SAVE_SECONDS = 5.0
    SAVE_SHARE = 0.05
    """At most this share of the indexer's time goes to saving: a state that takes 3 s to write
    (10,000 players who met in 126,000 pairs over 100,000 hands: 4 MB) is saved at most once a
    minute however small the lots."""

    def __init__(
        self, db: IndexDB, storage: ArchiveStorage, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.db, self.storage, self.clock = db, storage, clock
        self.state: SignalState | None = None
        self.unsaved_lots = 0
        self.saved_at = -math.inf
        self.save_seconds = 0.0
        """How long the last save took."""
        self.refed = 0
        """Events fed again from the archive (a restart, another writer's lots)."""

    def ready(self) -> SignalState:
        """The state as saved, fed every lot the index holds past it (read without the write lock:
        what is committed is read; a lot committed meanwhile is fed under the lock)."""
        if self.state is None:
            loaded = load_state(self.db)
            self.state = loaded[1] if loaded is not None else SignalState()
            self.unsaved_lots, self.saved_at = 0, self.clock() if loaded is not None else -math.inf
            self.refeed()
        return self.state

    def others_wrote(self) -> None:
        """Another writer wrote lots since this one last did (inside the write lock): the state
        saved by it when it is further on, then the lots past the cursor fed again."""
        stored = stored_version(self.db)
        if self.state is None or (stored is not None and stored[1] > self.state.events):
            self.state = None
            self.ready()
        else:
            self.refeed()

    def refeed(self) -> int:
        """Feed the state every event of the lots the index holds past its cursor, lot after lot in
        the order the index wrote them (the row of each lot's first event). Returns the events fed."""
        state = self.state
        assert state is not None
        lots: list[tuple[int, str, int, int, int, str, bytes]] = []
        for oper, coffre, last in self.db.execute("SELECT oper, coffre, events FROM coffres").fetchall():
            fed = state.cursor.get(f"{oper}/{coffre}", 0)
            if last <= fed:
                continue
            lots += [
                (row, oper, coffre, number, last_id, key, bytes(digest))
                for row, number, last_id, key, digest in self.db.execute(
                    "SELECT e.row, l.number, l.last_id, l.key, l.digest FROM lots l JOIN events e "
                    "ON e.oper = l.oper AND e.coffre = l.coffre AND e.id_evt = l.first_id "
                    "WHERE l.oper = ? AND l.coffre = ? AND l.last_id > ?",
                    (oper, coffre, fed),
                ).fetchall()
            ]
        before = state.events
        for _, oper, coffre, number, last_id, key, digest in sorted(lots):
            for ref, facts in self._lot_facts(oper, coffre, number, last_id, key, digest):
                if not state.seen(ref):
                    state.add_event(facts, ref)
        fed = state.events - before
        if fed:
            self.refed += fed
            self.unsaved_lots += 1  # to be saved: a restart would read them again otherwise
            log.info("console index: %d event(s) fed to the signals again from the archive", fed)
        return fed

    def _lot_facts(
        self, oper: str, coffre: int, number: int, last_id: int, key: str, digest: bytes
    ) -> list[tuple[Ref, Facts]]:
        """The facts of each event of an indexed lot, read again from the archive. A lot that is no
        longer the one the index verified gives none (said in the log): its IDEvt are passed over."""
        try:
            document = self.storage.read(key)
            if hashlib.sha256(document).digest() != digest:
                raise LotFormatError("its SHA-256 is no longer the one the index verified")
            events = read_lot(parse_document(document)).events
        except (ObjectMissing, LotFormatError) as exc:
            log.error("console index: lot %d of %s/%s not fed to the signals: %s", number, oper, coffre, exc)
            return [((oper, coffre, last_id), None)]
        out: list[tuple[Ref, Facts]] = []
        for item in events:
            try:
                facts = event_facts(normalize(item.canonical))
            except Rejected:
                facts = None
            out.append(((oper, coffre, item.id_evt), facts))
        return out

    def feed(self, ref: Ref, facts: Facts) -> None:
        """One event the indexer is writing (inside the lot's transaction)."""
        assert self.state is not None
        if not self.state.seen(ref):
            self.state.add_event(facts, ref)

    def lot_written(self) -> None:
        """The lot's events were fed (inside its transaction): saved with it when it is time."""
        self.unsaved_lots += 1
        since = self.clock() - self.saved_at
        if (self.unsaved_lots >= self.SAVE_LOTS or since >= self.SAVE_SECONDS) and self._spare(since):
            self.save()

    @property
    def dirty(self) -> bool:
        return self.state is not None and self.unsaved_lots > 0

    def _spare(self, since: float) -> bool:
        """Whether saving now keeps the saves within :attr:`SAVE_SHARE` of the time."""
        return since * self.SAVE_SHARE >= self.save_seconds

    def save(self) -> None:
        """Write the state (inside a transaction that holds the write lock, the state up to date)."""
        assert self.state is not None
        started = self.clock()
        save_state(self.db, self.state)
        self.unsaved_lots, self.saved_at = 0, self.clock()
        self.save_seconds = self.saved_at - started

    def idle_save_due(self) -> bool:
        since = self.clock() - self.saved_at
        return self.dirty and since >= self.IDLE_SAVE_SECONDS and self._spare(since)

    def discard(self) -> None:
        """Forget the state (a transaction that fed it rolled back): loaded and fed again next time."""
        self.state = None
        self.unsaved_lots = 0
