"""The console's index: every sealed event of the archive by the fields an investigator searches.

An SQLite database (docs/console.md, "The index"), or a PostgreSQL one that API replicas share
(``COFFRE_CONSOLE_INDEX=postgresql://…``, docs/console.md, "PostgreSQL"), that the regulator API
keeps beside the archive and can rebuild from the archive alone at any time (``coffre
console-index``). One SQL serves both, written in SQLite's words; :class:`Dialect` says it in the
other's. It holds no event's
bytes: an event's page reads its lot from the archive, and checks that lot's SHA-256 against the
one recorded here.

- **Only verified lots.** Each lot is walked as ``coffre verify`` walks it (signature, chain, links
  to the previous lot, the coffre's tree, its checkpoint) by a :class:`CoffreWalk` resumed from
  what the index recorded after the lot before; a lot that fails stops its coffre's index before
  it, and the overview says why.
- **A lot at a time.** A lot's rows, its findings and the money trail's state after it are written
  in one transaction: after a crash the index holds whole lots, and goes on from the next.
- **Signals** (issue 33): the collusion and robot signals' running counters, fed each lot's events
  in its transaction and kept in the index (:mod:`.index_signals`), read by the console's signals
  page. An index of schema 3 made before them gets the table when a writer opens it, and its state
  is fed from the archive (every indexed lot) by its next indexer.
- **Findings** are the auditor's: each event's own checks as ``coffre audit``'s workers make them,
  then the money trail's, whose state is kept in the index itself. They are the same whichever
  process computed them, and a rebuild gives the same.
- **Search** drives each query from one index ordered by date (or IDEvt), the one with the fewest
  rows for it, and reads at most :data:`SCAN_WINDOW` of its rows per page: the first page comes
  from the first rows of an index, however many events the archive holds (bench/console_search.py).
"""

from __future__ import annotations

import calendar
import functools
import gc
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from coffre import metrics
from coffre.adapters.audit_workers import Outcome, events_task, loads, outcome, pool
from coffre.adapters.storage import ArchiveStorage, ObjectMissing
from coffre.domain.audit.findings import Finding
from coffre.domain.audit.house import DEFAULT_RULES
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.facets import Facets, event_facets
from coffre.domain.lot import LotHeader, checkpoint_key, numbered_lots, parse_document, read_lot
from coffre.domain.merkle import MerkleAccumulator
from coffre.domain.seals import SealNote, SealNoteError, seal_note_key
from coffre.domain.signals.state import SignalState
from coffre.domain.signing import TrustStore
from coffre.domain.verify import CoffreReport, CoffreWalk

from .archive_index import InvalidRequest, parse_coffre, parse_oper
from .index_signals import Facts, SignalsKeeper, event_facts, load_state, stored_version

log = logging.getLogger("coffre.console")
T = TypeVar("T")

SCHEMA_VERSION = "3"
"""3: a hand's game, each party's IPJoueur, IDSession and place; 2: dates as integer seconds (1: ISO
text); the full text of PostgreSQL or SQLite."""
PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
PAGE_LIMIT = 5000
"""Events one player or Tech page shows (the first of the period): past it, the page says so and
the search pages through the rest."""
MAX_EXPORT_ROWS = 100_000
"""Rows of one CSV export; a search that matches more says so and is narrowed."""
_ROOT_TAG = re.compile(rb"<([A-Za-z_][A-Za-z0-9_.-]*)")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS coffres (
  oper TEXT NOT NULL, coffre INTEGER NOT NULL, lots INTEGER NOT NULL, events INTEGER NOT NULL,
  lot_digest BLOB NOT NULL, chain BLOB NOT NULL, frontier BLOB NOT NULL, sealed_at INTEGER,
  refused TEXT, PRIMARY KEY (oper, coffre)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lots (
  oper TEXT NOT NULL, coffre INTEGER NOT NULL, number INTEGER NOT NULL, first_id INTEGER NOT NULL,
  last_id INTEGER NOT NULL, key TEXT NOT NULL, digest BLOB NOT NULL, sealed_at INTEGER NOT NULL,
  PRIMARY KEY (oper, coffre, number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lot_days (
  day INTEGER NOT NULL, oper TEXT NOT NULL, coffre INTEGER NOT NULL, lots INTEGER NOT NULL,
  events INTEGER NOT NULL, PRIMARY KEY (day, oper, coffre)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
  row INTEGER PRIMARY KEY, oper TEXT NOT NULL, coffre INTEGER NOT NULL, id_evt INTEGER NOT NULL,
  type TEXT NOT NULL, at INTEGER NOT NULL, lot INTEGER NOT NULL, tech TEXT, pool TEXT, inscription TEXT,
  forced TEXT, findings INTEGER NOT NULL, game TEXT, UNIQUE (oper, coffre, id_evt));
CREATE INDEX IF NOT EXISTS events_at ON events (at, row);
CREATE INDEX IF NOT EXISTS events_type ON events (type, at, row);
CREATE INDEX IF NOT EXISTS events_coffre ON events (coffre, id_evt);
CREATE INDEX IF NOT EXISTS events_tech ON events (tech, at, row) WHERE tech IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_pool ON events (pool, at, row) WHERE pool IS NOT NULL;
CREATE TABLE IF NOT EXISTS parties (
  row INTEGER NOT NULL, player TEXT NOT NULL, hash TEXT, inscription TEXT, seat TEXT, before TEXT,
  after TEXT, at INTEGER NOT NULL, ip TEXT, session TEXT, place INTEGER, PRIMARY KEY (row, player))
  WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS parties_player ON parties (player, at, row);
CREATE INDEX IF NOT EXISTS parties_hash ON parties (hash, at, row) WHERE hash IS NOT NULL;
CREATE INDEX IF NOT EXISTS parties_inscription ON parties (inscription, at, row) WHERE inscription IS NOT NULL;
CREATE TABLE IF NOT EXISTS findings (
  row INTEGER NOT NULL, n INTEGER NOT NULL, code TEXT NOT NULL, message TEXT NOT NULL, round TEXT,
  seat INTEGER, player TEXT, PRIMARY KEY (row, n)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS flags (
  code TEXT NOT NULL, at INTEGER NOT NULL, row INTEGER NOT NULL, PRIMARY KEY (code, at, row)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS finding_days (
  day INTEGER NOT NULL, code TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (day, code)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trail (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
  key TEXT PRIMARY KEY, version INTEGER NOT NULL, events INTEGER NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
"""
"""The index's tables in SQLite's words; :class:`Dialect` says them in PostgreSQL's. Dates (``at``,
``sealed_at``) are whole seconds since 1970-01-01 UTC (:func:`seconds`), days the second their day
starts: the index has always kept dates to the second, and an integer of seconds is 4 to 6 bytes in
SQLite where the text was 20, in each row and each index that holds the date."""
TABLES = (
    "meta",
    "coffres",
    "lots",
    "lot_days",
    "events",
    "parties",
    "findings",
    "flags",
    "finding_days",
    "trail",
    "event_text",
    "signals",
)


class OtherSchema(ValueError):
    """An index written by another version of coffre's schema: rebuilt, never read as it is."""

    def __init__(self, path: Path | str, found: str) -> None:
        super().__init__(
            f"{path}: an index of schema {found}, this coffre writes schema {SCHEMA_VERSION}: rebuild it "
            "(coffre console-index --rebuild)"
        )
        self.found = found


class LotRefused(Exception):
    """The coffre's next lot does not verify: the index stops before it (the message says why)."""

    def __init__(self, reason: str, number: int = 0) -> None:
        super().__init__(reason)
        self.number = number


class IndexQueryError(ValueError):
    """A search the index cannot answer as asked (a message for the investigator)."""


def _named(parse: Callable[[str], T], name: str) -> T | None:
    """A folder's name read as the archive names them (the API's own parsers), None when it is not."""
    try:
        return parse(name)
    except InvalidRequest:
        return None


def stamp(moment: datetime) -> str:
    """How the console writes a date: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unstamp(text: str) -> datetime:
    """A date as :func:`stamp` writes it."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def seconds(moment: datetime) -> int:
    """How the index stores a date: whole seconds since 1970-01-01T00:00:00Z (UTC, floored)."""
    return calendar.timegm(moment.astimezone(UTC).timetuple())


def at_text(value: int) -> str:
    """A date the index stores (:func:`seconds`) as :func:`stamp` writes it."""
    return stamp(datetime.fromtimestamp(value, UTC))


def _day(at: int) -> int:
    """The second the day of ``at`` starts (UTC): how ``lot_days`` and ``finding_days`` name a day."""
    return at - at % 86400


def _day_text(day: int) -> str:
    return at_text(day)[:10]


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


# -- what the index answers ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Query:
    """A search: every field given must hold (AND). Dates are UTC and inclusive."""

    oper: str | None = None
    coffre: int | None = None
    first_id: int | None = None
    last_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    type: str | None = None
    player: str | None = None
    hash_joueur: str | None = None
    tech: str | None = None
    pool: str | None = None
    inscription: str | None = None
    finding: str | None = None
    text: str | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in self.__slots__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class EventRow:
    oper: str
    coffre: int
    id_evt: int
    type: str
    at: str
    lot: int
    tech: str | None
    pool: str | None
    inscription: str | None
    forced: str | None
    findings: int
    row: int
    """The event's row in the index (its place in the date order among events of one instant)."""
    players: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    """The event's finding codes, each once, in order (filled with the players for a page's rows)."""
    game: str | None = None
    """A hand's variant (``Regle``: a table may change game between hands)."""


SORTS = ("date", "-date", "id", "-id")
"""A search's orders: by DateEvt (the oldest first, or ``-``: the newest first), or by IDEvt within
one coffre."""


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[EventRow]
    next: str | None
    """The cursor of the next page, None on the last."""
    driver: str
    """Which index the search was driven by (shown to the investigator, and measured in bench/)."""
    stopped_at: str | None = None
    """Where the page's reading stopped when it is not full and a next page goes on (a date, or an
    IDEvt): the search read :data:`SCAN_WINDOW` rows of its index there."""
    previous: str | None = None
    """The cursor of the previous page (``before=``), None on the first."""
    total: int = 0
    """Events the search matches, counted among the first :data:`CHOICE_LIMIT` rows of its index."""
    total_exact: bool = True
    """Whether :attr:`total` is every match (False: at least that many)."""
    sort: str = "date"


@dataclass(frozen=True, slots=True)
class PartyRow:
    oper: str
    coffre: int
    id_evt: int
    type: str
    at: str
    player: str
    hash_joueur: str | None
    inscription: str | None
    seat: str | None
    before: Decimal | None
    after: Decimal | None
    tech: str | None
    ip: str | None = None
    """``IPJoueur`` (a hand's participant, a player event)."""
    session: str | None = None
    """``IDSession`` of a player event."""
    place: int | None = None
    """``Classement`` of a tournament's result (``POBILAN``)."""
    game: str | None = None
    """The hand's variant (``Regle``)."""


@dataclass(frozen=True, slots=True)
class FindingRow:
    oper: str
    coffre: int
    id_evt: int
    type: str
    at: str
    finding: Finding


@dataclass(frozen=True, slots=True)
class CoffreState:
    oper: str
    coffre: int
    lots: int
    events: int
    chain: bytes
    sealed_at: str | None
    refused: str | None


@dataclass(frozen=True, slots=True)
class LotRow:
    oper: str
    coffre: int
    number: int
    first_id: int
    last_id: int
    key: str
    digest: bytes
    sealed_at: str


_EVENT_COLUMNS = (
    "e.oper, e.coffre, e.id_evt, e.type, e.at, e.lot, e.tech, e.pool, e.inscription, e.forced, e.findings, "
    "e.row, e.game"
)


_PARTY_COLUMNS = (
    "e.oper, e.coffre, e.id_evt, e.type, e.at, d.player, d.hash, d.inscription, d.seat, d.before, d.after, "
    "e.tech, d.ip, d.session, d.place, e.game"
)


def _event_row(values: Sequence[Any]) -> EventRow:
    return EventRow(*values[:4], at_text(values[4]), *values[5:12], game=values[12])


# -- a trail store, the writer, the readers --------------------------------------------------------


_UNREAD = object()


class _TrailTable:
    """The money trail's state (coffre.domain.audit.store) in the index's ``trail`` table.

    Values go through JSON exactly as they are stored (each :meth:`get` a fresh copy, as when each
    read asked SQLite), but a lot's reads and writes meet a cache of the JSON texts: a key is read
    from SQLite once, and what the lot changed is written at its end, in the lot's transaction
    (:meth:`flush`; :meth:`discard` after a rollback). Issue 31: the SQL of the trail's reads and
    writes was a fifth of the index's own work. At most :data:`CACHED_KEYS` texts are kept between
    lots."""

    CACHED_KEYS = 50_000

    def __init__(self, db: IndexDB) -> None:
        self.db = db
        self._texts: dict[str, str | None] = {}
        """key -> its JSON text, None when it has no value (deleted, or absent from the table)."""
        self._dirty: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        text = self._texts.get(key, _UNREAD)
        if text is _UNREAD:
            found = self.db.execute("SELECT value FROM trail WHERE key = ?", (key,)).fetchone()
            text = self._texts[key] = None if found is None else found[0]
        return default if text is None else json.loads(text)  # type: ignore[arg-type]

    def __setitem__(self, key: str, value: Any) -> None:
        self._texts[key] = json.dumps(value, separators=(",", ":"), default=str)
        self._dirty.add(key)

    def __delitem__(self, key: str) -> None:
        self._texts[key] = None
        self._dirty.add(key)

    def flush(self) -> None:
        """Write what changed since the last flush (inside the caller's transaction)."""
        texts = self._texts
        dirty = sorted(self._dirty)
        self.db.executemany(
            "DELETE FROM trail WHERE key = ?", [(key,) for key in dirty if texts[key] is None]
        )
        self.db.executemany(
            "INSERT INTO trail (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [(key, texts[key]) for key in dirty if texts[key] is not None],
        )
        self._dirty.clear()
        if len(texts) > self.CACHED_KEYS:
            texts.clear()

    def discard(self) -> None:
        """Forget everything cached (the transaction that was to write it rolled back)."""
        self._texts.clear()
        self._dirty.clear()


# -- two databases, one SQL: the dialect of each -------------------------------------------------


POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")
_TOKEN = re.compile(r"[^\W_]+")
_QUOTED = re.compile(r"('(?:[^']|'')*')")
_MAX_TOKEN = 200
"""Characters of a word the full text keeps (PostgreSQL's lexemes are at most 2,047 bytes)."""


def is_postgresql(target: Path | str) -> bool:
    """Whether ``target`` names a PostgreSQL database (a ``postgresql://`` URL) rather than an SQLite file."""
    return isinstance(target, str) and target.startswith(POSTGRESQL_SCHEMES)


def shown(target: Path | str) -> str:
    """``target`` as a message may show it: a URL's password left out."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", str(target))


def words(text: str) -> list[str]:
    """The words of ``text`` as the full text indexes and searches them, on both databases: runs of
    letters and digits, lower case, without accents (``Chloé-2`` is ``chloe`` then ``2``), as
    SQLite's ``unicode61`` tokenizer splits them. Made here rather than by either database, so that
    both index the very same words and answer a search alike."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return [word[:_MAX_TOKEN] for word in _TOKEN.findall(folded)]


class Dialect:
    """What SQLite and PostgreSQL say differently. The index's SQL is written once, in SQLite's
    words (``?`` placeholders, ``rowid`` of the full text's table aside): every statement goes
    through :meth:`sql` (:class:`IndexDB` does it), the schema through :meth:`schema`, a page's
    driving index through :meth:`driven`, and the full text through :meth:`text_match`,
    :meth:`text_query` and :meth:`text_body`. The rest is SQL both read alike (``INSERT … ON CONFLICT … DO UPDATE`` with the table's name for the old row,
    ``1 = 1`` for true, an alias on each subquery)."""

    name = "sqlite"
    text_row = "rowid"
    """The full text's column holding the event's row."""

    def sql(self, text: str) -> str:
        return text

    def schema(self) -> list[str]:
        """The statements that make the index's tables (each ``IF NOT EXISTS``)."""
        return [
            *(statement for statement in _SCHEMA.split(";") if statement.strip()),
            "CREATE VIRTUAL TABLE IF NOT EXISTS event_text USING fts5 (body, content='', tokenize='unicode61')",
        ]

    def driven(self, table: str, columns: str, where: str, key: str) -> tuple[str, list[str]]:
        """The ``FROM`` of a page's driving index (as ``d``, its ``columns`` at least: ``where`` in
        it, by ``key``; at most :data:`SCAN_WINDOW` rows: the page's window), and the conditions
        left to the outer ``WHERE``. SQLite reads the driver's index first, then each event by
        its row: the table, and ``where`` outside."""
        return f"{table} d", [where]

    def text_match(self, alias: str) -> str:
        """The condition that the full text's table (as ``alias``) matches the query given as ``?``."""
        return "event_text MATCH ?"

    def text_query(self, phrases: list[list[str]]) -> str:
        """The query of :meth:`text_match`: every phrase (a word the investigator typed, as
        :func:`words` splits it) in the event, its words one after the other. A quoted FTS5 string
        each: nothing typed is read as FTS5 syntax."""
        return " ".join('"' + " ".join(phrase) + '"' for phrase in phrases)

    def text_body(self, tokens: list[str]) -> str:
        """What the full text's ``body`` gets for an event of these words."""
        return " ".join(tokens)


class PostgreSQL(Dialect):
    """The index in a PostgreSQL database: ``?`` as ``%s`` (psycopg), BLOB as ``bytea``, every
    integer ``bigint`` (seconds after 2038, rows past 2**31), text in the ``C`` collation (ordered
    by code point as SQLite orders it), no ``WITHOUT ROWID``; the full text a ``tsvector`` of the
    very words SQLite's FTS5 gets, with their positions, in a GIN index, searched with a
    ``tsquery`` (``<->`` for the words of one phrase, ``&`` between phrases)."""

    name = "postgresql"
    text_row = "row"

    def sql(self, text: str) -> str:
        return _pg_sql(text)

    def schema(self) -> list[str]:
        found = []
        for statement in _SCHEMA.split(";"):
            if not statement.strip():
                continue
            statement = statement.replace("WITHOUT ROWID", "").replace(" BLOB", " BYTEA")
            statement = re.sub(r"\bINTEGER\b", "BIGINT", statement)
            statement = re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', statement)
            indexed = re.search(r"ON events \(([^)]*)\)", statement)
            if indexed and indexed.group(1).split(",")[-1].strip() != "row":
                # SQLite's index of events ends with the rowid, which ``row`` is: said here
                statement = f"{statement[: indexed.end(1)]}, row{statement[indexed.end(1) :]}"
            found.append(statement)
        return [
            *found,
            "CREATE TABLE IF NOT EXISTS event_text (row BIGINT PRIMARY KEY, body TSVECTOR NOT NULL)",
            "CREATE INDEX IF NOT EXISTS event_text_body ON event_text USING gin (body)",
        ]

    def driven(self, table: str, columns: str, where: str, key: str) -> tuple[str, list[str]]:
        """The window as a subquery, read first and in order (its ``LIMIT``): the events' own
        conditions are then checked on each event of the window, read by its row (see
        :func:`_connect_postgresql`)."""
        return f"(SELECT {columns} FROM {table} d WHERE {where} ORDER BY {key} LIMIT {SCAN_WINDOW}) d", []

    def text_match(self, alias: str) -> str:
        return f"{alias}.body @@ CAST(? AS tsquery)"

    def text_query(self, phrases: list[list[str]]) -> str:
        return " & ".join("(" + " <-> ".join(_lexeme(w) for w in phrase) + ")" for phrase in phrases)

    def text_body(self, tokens: list[str]) -> str:
        """A ``tsvector`` written out: each word with its positions (1, 2…, as FTS5 counts them)."""
        places: dict[str, list[int]] = {}
        for position, token in enumerate(tokens[:16_000], start=1):
            places.setdefault(token, []).append(position)
        return " ".join(f"{_lexeme(t)}:{','.join(map(str, p[:256]))}" for t, p in places.items())


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


@functools.lru_cache(maxsize=1024)
def _pg_sql(text: str) -> str:
    """``text`` with psycopg's placeholders: ``?`` as ``%s``, ``%`` as ``%%`` (outside quotes)."""
    parts = _QUOTED.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("%", "%%").replace("?", "%s")
    return "".join(parts)


SQLITE, POSTGRESQL = Dialect(), PostgreSQL()


class IndexDB:
    """A connection to the index, SQLite's or PostgreSQL's, that reads the index's SQL (SQLite's
    words) in its database's :class:`Dialect`: ``execute`` and ``executemany`` as sqlite3's
    (psycopg's cursors answer ``fetchone``, ``fetchall``, ``rowcount`` and iteration alike)."""

    def __init__(self, raw: Any, dialect: Dialect, target: Path | str) -> None:
        self.raw, self.dialect, self.target = raw, dialect, target

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self.dialect.sql(sql), args)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self.dialect is SQLITE:
            self.raw.executemany(sql, rows)
        else:
            with self.raw.cursor() as cursor:
                cursor.executemany(self.dialect.sql(sql), rows)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A transaction that writes, one at a time over the whole index: SQLite's ``BEGIN
        IMMEDIATE`` (its one writer), PostgreSQL's transaction-scoped advisory lock :data:`WRITER_LOCK`
        (every replica's writer waits for it). Whatever the transaction reads is then what the
        other writers committed."""
        if self.dialect is SQLITE:
            self.raw.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.raw.execute("ROLLBACK")
                raise
            self.raw.execute("COMMIT")
        else:
            with self.raw.transaction():
                self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                yield

    @property
    def broken(self) -> bool:
        """Whether the connection is lost (PostgreSQL's: the server restarted, the network cut);
        an SQLite file's never is."""
        return bool(getattr(self.raw, "broken", False) or getattr(self.raw, "closed", False) is True)

    def close(self) -> None:
        self.raw.close()


WRITER_LOCK = 0x636F66667265  # "coffre"
"""PostgreSQL's advisory lock key of the index's writers (one writes at a time, in its transaction)."""


def connect(target: Path | str, *, readonly: bool = False) -> IndexDB:
    """A connection to the index at ``target``: an SQLite file, or a PostgreSQL database named by a
    ``postgresql://`` URL; its schema made unless ``readonly`` (:class:`OtherSchema` when the index
    is of another schema version)."""
    if is_postgresql(target):
        return _connect_postgresql(str(target), readonly)
    path = Path(target)
    if readonly:
        raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = NORMAL")
        raw.executescript(";\n".join(SQLITE.schema()))
        _check_schema(IndexDB(raw, SQLITE, path))
    raw.execute("PRAGMA query_only = 1" if readonly else "PRAGMA foreign_keys = 0")
    raw.execute("PRAGMA cache_size = -65536")  # 64 MiB per connection
    return IndexDB(raw, SQLITE, path)


def _connect_postgresql(url: str, readonly: bool) -> IndexDB:
    import psycopg  # the maintained PostgreSQL driver (psycopg 3), only where an index is in PostgreSQL

    try:
        raw = psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise OSError(f"{shown(url)}: {str(exc).strip()}") from None
    db = IndexDB(raw, POSTGRESQL, url)
    if readonly:
        raw.execute("SET default_transaction_read_only = on")
        # Every search is a nested loop by design: a bounded window of one index (the driver), then
        # each event by its row. From its estimates PostgreSQL's planner may prefer reading events
        # by their own indexes over the whole table and joining by hash (a type and a coffre: 514
        # ms cold at 1M events, where the driven plan takes tens); parallel workers only add
        # their start to so short a read.
        raw.execute("SET enable_hashjoin = off")
        raw.execute("SET enable_mergejoin = off")
        raw.execute("SET max_parallel_workers_per_gather = 0")
        return db
    with raw.transaction():  # replicas starting together: one makes the tables, the others wait
        raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        for statement in POSTGRESQL.schema():
            raw.execute(statement)
    _check_schema(db)
    return db


def _check_schema(db: IndexDB) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('schema', ?) ON CONFLICT (key) DO NOTHING", (SCHEMA_VERSION,)
    )
    found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if found[0] != SCHEMA_VERSION:
        db.close()
        raise OtherSchema(shown(db.target), found[0])


def drop(target: Path | str) -> None:
    """Remove the index at ``target``: the file (with its WAL), or the tables in PostgreSQL."""
    if not is_postgresql(target):
        for path in (Path(target), Path(f"{target}-wal"), Path(f"{target}-shm")):
            path.unlink(missing_ok=True)
        return
    with closing(_connect_postgresql(str(target), readonly=True)) as db:
        db.raw.execute("SET default_transaction_read_only = off")
        with db.raw.transaction():
            db.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            db.raw.execute(f"DROP TABLE IF EXISTS {', '.join(TABLES)}")


# -- building: verified lots in, rows out ---------------------------------------------------------


@dataclass
class CatchUp:
    """What one pass over the archive did."""

    lots: int = 0
    events: int = 0
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """Coffres this pass could not go on with (a storage error, a defect): tried again next pass,
    while the other coffres are indexed."""
    lag_seconds: float = 0.0
    behind: int = 0
    skipped: int = 0
    """Lots verified here that another writer (a replica) wrote first: not written twice."""


class Indexer:
    """Adds the archive's sealed lots to the index, in lot order per coffre, verified first."""

    def __init__(
        self,
        db: IndexDB,
        storage: ArchiveStorage,
        trust: TrustStore,
        *,
        jobs: int = 1,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.db, self.storage, self.trust, self.clock = db, storage, trust, clock
        self.trail = MoneyTrail(_TrailTable(db))
        self._refused_logged: set[tuple[str, int, int]] = set()
        self.jobs = jobs
        self._pool: Executor | None = None
        self._listings: dict[tuple[str, int], dict[int, str]] = {}
        self._noted: set[tuple[str, int]] = set()
        self._notes: dict[tuple[str, int, int], SealNote | None] = {}
        self._last_row: int | None = None
        """The index's last row as this indexer last wrote it: another value at the next write means
        another writer (a replica) wrote since, and the trail's cached state is read again."""
        self.signals = SignalsKeeper(db, storage)

    def close(self) -> None:
        """The signals' state saved if it has lots it has not saved, the workers stopped."""
        try:
            if self.signals.dirty:
                self._save_signals()
        finally:
            self._close_pool()

    def _save_signals(self) -> None:
        """Save the signals' state in its own transaction, under the write lock: first fed the lots
        other writers committed since this one last wrote, so that it holds every lot the index does."""
        with self.db.writing():
            self.signals.refeed()
            self.signals.save()

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
            gc.unfreeze()  # frozen by audit_workers.pool

    def _submit(self, raws: list[bytes]) -> Callable[[], list[Outcome]]:
        """Each event read and checked on its own (coffre audit's workers with ``jobs`` > 1: the
        hand's replay is most of an event's cost); the money trail follows, in order, here. Returns
        what gives the outcomes: with workers they start now, in one process when asked."""
        if self.jobs <= 1 or len(raws) < 2 * self.jobs:
            return lambda: [outcome(raw) for raw in raws]
        if self._pool is None:
            self._pool = pool(self.jobs, DEFAULT_RULES)
        parts = min(len(raws), 4 * self.jobs)
        chunks = [raws[len(raws) * i // parts : len(raws) * (i + 1) // parts] for i in range(parts)]
        futures = [self._pool.submit(events_task, chunk) for chunk in chunks]
        return lambda: [item for future in futures for item in loads(future.result())]

    def coffres(self) -> list[tuple[str, int]]:
        """Every coffre of the archive (its folders ``<IDOper>/<IDCoffre>/``)."""
        pairs = []
        for oper in self.storage.children("")[0]:
            if _named(parse_oper, oper) is not None:
                pairs += [
                    (oper, coffre)
                    for name in self.storage.children(f"{oper}/")[0]
                    if (coffre := _named(parse_coffre, name)) is not None
                ]
        return sorted(pairs)

    def catch_up(self, max_lots: int | None = None) -> CatchUp:
        """Index every lot sealed since the last pass (at most ``max_lots`` of them)."""
        done = CatchUp()
        now = self.clock()
        self._notes.clear()
        self.signals.ready()  # after a restart: the lots indexed past the saved state, fed again
        for oper, coffre in self.coffres():
            try:
                self._index_coffre(oper, coffre, done, max_lots)
                behind = self._note(oper, coffre, self._state(oper, coffre)[0] + 1)  # the next lot, if sealed
            except Exception as exc:  # one coffre's trouble stops only that coffre, for this pass
                log.warning("console index: coffre %s/%s not indexed this pass", oper, coffre, exc_info=True)
                done.failed.append(f"{oper}/{coffre}: {type(exc).__name__}: {str(exc)[:300]}")
                behind = self._notes.get((oper, coffre, self._state(oper, coffre)[0] + 1))
            if behind is not None:
                done.behind += 1
                done.lag_seconds = max(done.lag_seconds, (now - behind.sealed_at).total_seconds())
        if self.signals.idle_save_due():
            self._save_signals()
        return done

    def _index_coffre(self, oper: str, coffre: int, done: CatchUp, max_lots: int | None) -> None:
        """Index the coffre's lots sealed since the last pass, until one is not there yet or refused.

        With workers (``jobs`` > 1) the next lot is verified and given to them before this process
        writes the lot before it (the trail, the rows: issue 31, the workers waited for those);
        in one process each lot is written before the next is read, as it always was."""
        state = self._state(oper, coffre)
        pending: _Checked | None = None
        try:
            while max_lots is None or done.lots + (pending is not None) < max_lots:
                found = self._next_lot(oper, coffre, state[0] + 1)
                if found is None:
                    break
                try:
                    checked = self._check(oper, coffre, state, *found)
                except LotRefused as exc:
                    if pending is not None:
                        pending, written = None, pending
                        self._write(written, done)
                    self._refuse(oper, coffre, exc.number, str(exc))
                    done.refused.append(f"{oper}/{coffre}: {exc}")
                    return
                if pending is not None:
                    pending, written = None, pending
                    self._write(written, done)
                pending, state = checked, checked.after
                if self.jobs <= 1:
                    pending, written = None, pending
                    self._write(written, done)
                    state = self._state(oper, coffre)
        except Exception:
            if pending is not None:  # what the lot before the failure needs is there: written first
                self._write(pending, done)
            raise
        if pending is not None:
            self._write(pending, done)

    # the coffre's state as the index left it
    def _state(self, oper: str, coffre: int) -> tuple[int, MerkleAccumulator, bytes, bytes]:
        found = self.db.execute(
            "SELECT lots, events, lot_digest, chain, frontier FROM coffres WHERE oper = ? AND coffre = ?",
            (oper, coffre),
        ).fetchone()
        if found is None:
            return 0, MerkleAccumulator(), b"\0" * 32, b"\0" * 32
        lots, events, digest, chain, frontier = found
        hashes = [bytes(frontier[i : i + 32]) for i in range(0, len(frontier), 32)]
        return lots, MerkleAccumulator.from_frontier(events, hashes), bytes(digest), bytes(chain)

    def _note(self, oper: str, coffre: int, number: int) -> SealNote | None:
        """Lot ``number``'s seal note, read once per pass (a pass asks for the next lot's twice)."""
        asked = (oper, coffre, number)
        if asked in self._notes:
            return self._notes[asked]
        note: SealNote | None = None
        try:
            note = SealNote.decode(self.storage.read(seal_note_key(oper, coffre, number)))
        except ObjectMissing:
            pass
        except SealNoteError as exc:
            log.warning(
                "console index: seal note of lot %d of %s/%s unreadable: %s", number, oper, coffre, exc
            )
        self._notes[asked] = note
        return note

    def _has_notes(self, oper: str, coffre: int) -> bool:
        """Whether the coffre's archive has seal notes (every vault since they exist writes them,
        and migrates an older archive at its start): asked until it does."""
        if (oper, coffre) not in self._noted:
            if not self.storage.exists(seal_note_key(oper, coffre, 1)):
                return False
            self._noted.add((oper, coffre))
        return True

    def _lot_key(self, oper: str, coffre: int, number: int) -> str | None:
        """Lot ``number``'s key, None when it is not sealed yet: from its seal note, or, in an
        archive from before seal notes (one without the note of lot 1), from a listing kept until
        a lot is not in it."""
        note = self._note(oper, coffre, number)
        if note is not None:
            return note.lot_key
        if self._has_notes(oper, coffre):
            return None  # the vault writes a lot's note first: this lot is not sealed
        listed = self._listings.get((oper, coffre), {})
        if number not in listed:
            listed = self._listings[(oper, coffre)] = dict(
                numbered_lots(self.storage.list(f"{oper}/{coffre}/"))
            )
        return listed.get(number)

    def _next_lot(self, oper: str, coffre: int, number: int) -> tuple[str, bytes, bytes] | None:
        """Lot ``number`` with its checkpoint, or None when it is not (entirely) sealed yet."""
        key = self._lot_key(oper, coffre, number)
        if key is None:
            return None
        try:
            checkpoint = self.storage.read(checkpoint_key(oper, coffre, number))
            document = self.storage.read(key)
        except ObjectMissing:
            return None  # the checkpoint follows the lot: the next pass
        return key, document, checkpoint

    def _check(
        self,
        oper: str,
        coffre: int,
        state: tuple[int, MerkleAccumulator, bytes, bytes],
        key: str,
        document: bytes,
        checkpoint: bytes,
    ) -> _Checked:
        """Verify lot ``state[0] + 1`` (LotRefused: it does not verify) and start reading and
        checking its events."""
        lots, tree, digest, chain = state
        number = lots + 1
        walk = CoffreWalk.resume(
            CoffreReport(oper, coffre),
            self.trust,
            lots=lots,
            tree=tree.copy(),
            lot_digest=digest,
            chain_hash=chain,
        )
        failures = walk.extend(number, key, document, [(checkpoint_key(oper, coffre, number), checkpoint)])
        if failures:
            raise LotRefused("; ".join(str(f) for f in failures[:3]), number)
        read = walk.last_events  # the lot as the walk read it (verified), else read here again
        if read is not None:
            h, events = read.header, list(zip(read.ids, read.canonical, strict=True))
        else:
            lot = read_lot(parse_document(document))
            h, events = lot.header, [(event.id_evt, event.canonical) for event in lot.events]
        lot_digest = hashlib.sha256(document).digest()
        frontier = list(walk.tree.frontier)
        # the coffre's state once this lot is written, as _state reads it back
        after = (
            number,
            MerkleAccumulator.from_frontier(h.last_id_evt, frontier),
            lot_digest,
            h.last_chain_hash,
        )
        gather = self._submit([canonical for _, canonical in events])
        return _Checked(oper, coffre, number, key, h, events, lot_digest, b"".join(frontier), gather, after)

    def _write(self, lot: _Checked, done: CatchUp) -> None:
        """Write a verified lot's rows, its findings and the trail's state after it, in one
        transaction, unless another writer (an API replica on the same PostgreSQL database, a
        ``coffre console-index`` beside the API) wrote that lot already: the transaction takes the
        index's write lock (:meth:`IndexDB.writing`), then reads the coffre's lots as committed.
        The lot is written once whoever verified it; the one that lost skips it and goes on."""
        oper, coffre, number, h = lot.oper, lot.coffre, lot.number, lot.header
        outcomes = lot.gather()
        store: _TrailTable = self.trail.store  # type: ignore[assignment]
        try:
            with self.db.writing():
                indexed = self.db.execute(
                    "SELECT lots FROM coffres WHERE oper = ? AND coffre = ?", (oper, coffre)
                ).fetchone()
                if (indexed[0] if indexed else 0) >= number:
                    done.skipped += 1
                    return
                last = self.db.execute("SELECT coalesce(max(row), 0) FROM events").fetchone()[0]
                if last != self._last_row:
                    store.discard()  # written by another since: the trail's state is read again
                    self.signals.others_wrote()  # and the signals are fed its lots
                rows = _LotRows(last)
                for (id_evt, canonical), checked in zip(lot.events, outcomes, strict=True):
                    self._add_event(oper, coffre, number, id_evt, canonical, checked, rows)
                    self.signals.feed((oper, coffre, id_evt), _signal_facts(checked))
                rows.write(self.db)
                store.flush()
                self.signals.lot_written()
                sealed = seconds(h.sealed_at)
                self.db.execute(
                    "INSERT INTO lots VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (oper, coffre, number, h.first_id_evt, h.last_id_evt, lot.key, lot.digest, sealed),
                )
                self.db.execute(
                    "INSERT INTO lot_days VALUES (?, ?, ?, 1, ?) ON CONFLICT (day, oper, coffre) DO UPDATE "
                    "SET lots = lot_days.lots + 1, events = lot_days.events + excluded.events",
                    (_day(sealed), oper, coffre, h.count),
                )
                self.db.execute(
                    "INSERT INTO coffres VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (oper, coffre) DO UPDATE SET "
                    "lots = excluded.lots, events = excluded.events, lot_digest = excluded.lot_digest, "
                    "chain = excluded.chain, frontier = excluded.frontier, sealed_at = excluded.sealed_at, refused = NULL",
                    (
                        oper,
                        coffre,
                        number,
                        h.last_id_evt,
                        lot.digest,
                        h.last_chain_hash,
                        lot.frontier,
                        sealed,
                    ),
                )
                self._last_row = rows.row
        except BaseException:
            store.discard()  # what the lot's trail wrote was rolled back with it
            self.signals.discard()  # and what the signals were fed
            self._last_row = None
            raise
        metrics.CONSOLE_INDEX_EVENTS.inc(len(lot.events))
        done.events += len(lot.events)
        done.lots += 1

    def _refuse(self, oper: str, coffre: int, number: int, reason: str) -> None:
        if (oper, coffre, number) not in self._refused_logged:
            self._refused_logged.add((oper, coffre, number))
            log.error(
                "console index: lot %d of %s/%s does not verify, not indexed: %s",
                number,
                oper,
                coffre,
                reason,
            )
        text = f"lot {number} does not verify: {reason}"[:2000]
        with self.db.writing():
            updated = self.db.execute(
                "UPDATE coffres SET refused = ? WHERE oper = ? AND coffre = ?", (text, oper, coffre)
            ).rowcount
            if not updated:
                self.db.execute(
                    "INSERT INTO coffres VALUES (?, ?, 0, 0, ?, ?, ?, NULL, ?)",
                    (oper, coffre, b"\0" * 32, b"\0" * 32, b"", text),
                )

    def _read_event(self, canonical: bytes, checked: Outcome) -> tuple[Facets | None, str, list[Finding]]:
        """The event's facets and findings (its own checks in ``checked``, then the money trail's);
        an event this version cannot read again is indexed by its type with an ``AUDIT_FAILED``
        finding (it is in the archive: it must be found)."""
        if checked[0] != "ok":
            tag = _ROOT_TAG.search(canonical)
            return (
                None,
                tag.group(1).decode() if tag else "?",
                [Finding("AUDIT_FAILED", f"the event cannot be read again: {str(checked[1])[:300]}")],
            )
        event, findings = checked[1], checked[2]
        facets = checked[3] if len(checked) > 3 else event_facets(event)  # a worker's (events_task)
        try:
            findings = [*findings, *self.trail.observe(event)]
        except Exception as exc:  # a defect of a check: said, and the event is indexed all the same
            findings = [
                *findings,
                Finding("AUDIT_FAILED", f"the audit failed: {type(exc).__name__}: {str(exc)[:300]}"),
            ]
        return facets, facets.type, findings

    def _add_event(
        self,
        oper: str,
        coffre: int,
        lot: int,
        id_evt: int,
        canonical: bytes,
        checked: Outcome,
        rows: _LotRows,
    ) -> None:
        facets, kind, findings = self._read_event(canonical, checked)
        at = seconds(facets.at) if facets else 0
        rows.row += 1
        row = rows.row
        rows.events.append(
            (
                row,
                oper,
                coffre,
                id_evt,
                kind,
                at,
                lot,
                facets and facets.tech,
                facets and facets.pool,
                facets and facets.inscription,
                facets and facets.forced_bets,
                len(findings),
                facets and facets.game,
            )
        )
        words_of_event = [kind, oper, str(coffre), str(id_evt)]
        if facets is not None:
            seen: set[str] = set()
            for party in facets.parties:
                if party.player in seen:
                    continue
                seen.add(party.player)
                rows.parties.append(
                    (
                        row,
                        party.player,
                        party.hash_joueur,
                        party.inscription,
                        _text(party.seat),
                        _text(party.before),
                        _text(party.after),
                        at,
                        party.ip,
                        party.session,
                        party.place,
                    )
                )
                words_of_event += [party.player, party.hash_joueur or "", party.inscription or ""]
            words_of_event += [facets.tech or "", facets.pool or "", facets.inscription or "", facets.text]
        codes: set[str] = set()
        for n, finding in enumerate(findings):
            rows.findings.append(
                (row, n, finding.code, finding.message, finding.round, finding.seat, finding.player)
            )
            codes.add(finding.code)
        for code in sorted(codes):
            rows.flags.append((code, at, row))
            rows.finding_days.append((_day(at), code))
            words_of_event.append(code)
        rows.text.append((row, words(" ".join(words_of_event))))


def _signal_facts(checked: Outcome) -> Facts:
    """What the signals read of an event the indexer checked: a worker's (``events_task`` reads
    them from the whole event; the main process gets only the money trail's view of a hand), or
    read here; None for an event that could not be read."""
    if checked[0] != "ok":
        return None
    return checked[4] if len(checked) > 4 else event_facts(checked[1])


@dataclass(frozen=True, slots=True)
class _Checked:
    """A lot verified, its events being read and checked, not written yet."""

    oper: str
    coffre: int
    number: int
    key: str
    header: LotHeader
    events: list[tuple[int, bytes]]
    """(IDEvt, canonical bytes) of each event."""
    digest: bytes
    frontier: bytes
    gather: Callable[[], list[Outcome]]
    after: tuple[int, MerkleAccumulator, bytes, bytes]
    """The coffre's state once it is written (:meth:`Indexer._state`)."""


@dataclass
class _LotRows:
    """A lot's rows, written table by table at its end (``executemany``) in its transaction. Each
    event's ``row`` is given as SQLite would give it (one more than the largest), so that the
    index is the one inserting the events one by one made."""

    row: int
    """The last row number given."""
    events: list[tuple[Any, ...]] = field(default_factory=list)
    parties: list[tuple[Any, ...]] = field(default_factory=list)
    findings: list[tuple[Any, ...]] = field(default_factory=list)
    flags: list[tuple[Any, ...]] = field(default_factory=list)
    finding_days: list[tuple[Any, ...]] = field(default_factory=list)
    text: list[tuple[Any, ...]] = field(default_factory=list)

    def write(self, db: IndexDB) -> None:
        db.executemany(
            "INSERT INTO events (row, oper, coffre, id_evt, type, at, lot, tech, pool, inscription, forced, "
            "findings, game) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.events,
        )
        db.executemany("INSERT INTO parties VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.parties)
        db.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?)", self.findings)
        db.executemany("INSERT INTO flags VALUES (?, ?, ?)", self.flags)
        db.executemany(
            "INSERT INTO finding_days VALUES (?, ?, 1) ON CONFLICT (day, code) DO UPDATE "
            "SET count = finding_days.count + 1",
            self.finding_days,
        )
        body = db.dialect.text_body
        db.executemany(
            f"INSERT INTO event_text ({db.dialect.text_row}, body) VALUES (?, ?)",
            [(row, body(tokens)) for row, tokens in self.text],
        )


def rebuild(target: Path | str, storage: ArchiveStorage, trust: TrustStore, *, jobs: int = 1) -> CatchUp:
    """A new index at ``target`` from the archive alone. An SQLite file is written beside it, then
    moved in place; a PostgreSQL index's tables are dropped and made again (the console shows the
    index growing meanwhile)."""
    if is_postgresql(target):
        drop(target)
        fresh: Path | str = target
    else:
        fresh = Path(target).with_name(Path(target).name + ".rebuild")
        drop(fresh)
    with closing(connect(fresh)) as db:
        indexer = Indexer(db, storage, trust, jobs=jobs)
        try:
            done = indexer.catch_up()
        finally:
            indexer.close()
        if db.dialect is SQLITE:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if not is_postgresql(target):
        Path(fresh).replace(target)
        for stale in (Path(f"{target}-wal"), Path(f"{target}-shm")):
            stale.unlink(missing_ok=True)
    return done


# -- reading ----------------------------------------------------------------------------------------


def _period(column: str, since: datetime | None, until: datetime | None) -> tuple[str, list[int]]:
    """The SQL (`` AND …``) and arguments of a period on ``column``."""
    sql, args = "", []
    for moment, comparison in ((since, ">="), (until, "<=")):
        if moment is not None:
            sql += f" AND {column} {comparison} ?"
            args.append(seconds(moment))
    return sql, args


def _text_match(text: str, dialect: Dialect, alias: str) -> tuple[str, tuple[Any, ...]]:
    """The condition (and its argument) that the full text (``alias``) holds every word the
    investigator typed (up to 16), each as :func:`words` splits it: nothing typed is read as the
    database's syntax. Typed words without a letter or a digit match no event."""
    typed = text.split()
    if not typed:
        raise IndexQueryError("the text to search is empty")
    phrases = [split for word in typed[:16] if (split := words(word))]
    if not phrases:
        return "1 = 0", ()
    return dialect.text_match(alias), (dialect.text_query(phrases),)


def _cursor(kind: str, *parts: object) -> str:
    return ":".join([kind, *(str(p) for p in parts)])


def _parse_cursor(text: str) -> tuple[str, list[str]]:
    kind, _, rest = text.partition(":")
    if kind not in ("a", "i", "r", "A", "I", "R") or not rest or len(text) > 200:
        raise IndexQueryError("the page cursor is not one this console gave")
    return kind, rest.rsplit(":", 1) if kind in ("a", "A") else rest.split(":")


SCAN_WINDOW = 5_000
"""Rows of its driving index one page reads at most: a search whose conditions few of those rows
meet (the busiest player's events of a rare type) answers a page that is not full, in bounded time,
and its next page goes on from where it stopped (bench/console_search.py: 20,000 took up to 1.7 s
from a cold disk at 10M events)."""
CHOICE_LIMIT = 20_000
"""Rows of each candidate index counted to choose the driving one (index entries only: cheap)."""


@dataclass(frozen=True, slots=True)
class _Driver:
    """An index a search can be driven from: its table (as ``d``), its conditions, its order."""

    name: str
    table: str
    where: tuple[str, ...]
    args: tuple[Any, ...]
    order: str = "a"
    """``a``: by date (``d.at, d.row``); ``i``: by IDEvt (``d.id_evt, d.row``); ``r``: by row."""
    row: str = "row"
    """The table's column holding the event's row (the full text's: :attr:`Dialect.text_row`)."""

    @property
    def key(self) -> tuple[str, ...]:
        return {"a": ("d.at", "d.row"), "i": ("d.id_evt", "d.row"), "r": (f"d.{self.row}",)}[self.order]


def _drivers(q: Query, dialect: Dialect, *, dated: bool = False) -> list[_Driver]:
    """The indexes ``q`` can be driven from, the most selective by nature first (a Pool is one hand,
    an Inscription one registration); the dates bound every index ordered by date. ``dated``: only
    those ordered by date (the words and a coffre's IDEvt are then checked on each event)."""
    dates: tuple[tuple[str, int], ...] = tuple(
        (condition, seconds(moment))
        for moment, condition in ((q.since, "d.at >= ?"), (q.until, "d.at <= ?"))
        if moment is not None
    )
    found = [
        _Driver(name, table, (f"d.{column} = ?", *(c for c, _ in dates)), (value, *(v for _, v in dates)))
        for name, table, column, value in (
            ("Pool", "events", "pool", q.pool),
            ("Inscription", "parties", "inscription", q.inscription),
            ("finding", "flags", "code", q.finding),
            ("HashJoueur", "parties", "hash", q.hash_joueur),
            ("IDJoueur", "parties", "player", q.player),
            ("Tech", "events", "tech", q.tech),
        )
        if value is not None
    ]
    if q.text is not None and not dated:
        match, args = _text_match(q.text, dialect, "d")
        found.append(_Driver("text", "event_text", (match,), args, "r", dialect.text_row))
    if q.coffre is not None and not dated:
        where, args = ["d.coffre = ?"], [q.coffre]
        for value, condition in ((q.first_id, "d.id_evt >= ?"), (q.last_id, "d.id_evt <= ?")):
            if value is not None:
                where.append(condition)
                args.append(value)
        found.append(_Driver("IDEvt", "events", tuple(where), tuple(args), "i"))
    if q.type is not None:
        found.append(
            _Driver(
                "type", "events", ("d.type = ?", *(c for c, _ in dates)), (q.type, *(v for _, v in dates))
            )
        )
    if dates or not found:
        found.append(_Driver("date", "events", tuple(c for c, _ in dates), tuple(v for _, v in dates)))
    return found


class EventSearch:
    """Queries on the index, from any thread (one read-only connection per thread)."""

    def __init__(self, target: Path | str) -> None:
        self.path: Path | str = target if is_postgresql(target) else Path(target)
        """The SQLite file, or the PostgreSQL database's URL."""
        self._local = threading.local()

    @property
    def db(self) -> IndexDB:
        db = getattr(self._local, "db", None)
        if db is None or db.broken:  # a PostgreSQL connection lost (the query that met it failed): anew
            db = self._local.db = connect(self.path, readonly=True)
        return db

    @property
    def dialect(self) -> Dialect:
        return POSTGRESQL if is_postgresql(self.path) else SQLITE

    def search(
        self,
        query: Query,
        *,
        after: str | None = None,
        before: str | None = None,
        sort: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> Page:
        """One page of the events ``query`` matches, in the order ``sort`` names (:data:`SORTS`:
        by date, or by IDEvt within one coffre; ``-`` for the newest or highest first; None: the
        order of the index that drives it best, by date, by IDEvt or as indexed for words), after the
        cursor ``after`` (the next page) or before ``before`` (the previous one). A page reads at
        most :data:`SCAN_WINDOW` rows of the index that drives it (:class:`_Driver`): a page that
        is not full but has a next cursor stopped there. ``total`` counts the matches among the
        first :data:`CHOICE_LIMIT` rows of that index (exact when it holds no more)."""
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise IndexQueryError(f"page size from 1 to {MAX_PAGE_SIZE}")
        if sort is not None and sort not in SORTS:
            raise IndexQueryError(f"sort: one of {', '.join(SORTS)}")
        if after is not None and before is not None:
            raise IndexQueryError("a page is after a cursor or before one, not both")
        descending = sort is not None and sort.startswith("-")
        if sort is not None and sort.lstrip("-") == "id":
            if query.coffre is None:
                raise IndexQueryError(
                    "sorting by IDEvt needs a coffre: IDEvt numbers the events of one coffre"
                )
            driver = next(d for d in _drivers(query, self.dialect) if d.name == "IDEvt")
        else:
            driver = self._choose(query, dated=sort is not None)
        backwards = before is not None
        reverse = descending != backwards  # the order the index is read in
        cursor = self._cursor_values(after if after is not None else before, driver, descending)
        key = ", ".join(driver.key)
        order = ", ".join(f"{column} DESC" for column in driver.key) if reverse else key
        where, args = list(driver.where), list(driver.args)
        if cursor:
            where.append(f"({key}) {'<' if reverse else '>'} ({', '.join('?' * len(cursor))})")
            args += cursor
        ending = self.db.execute(
            f"SELECT {key} FROM {driver.table} d WHERE {' AND '.join(where) or '1 = 1'} "
            f"ORDER BY {order} LIMIT 1 OFFSET {SCAN_WINDOW - 1}",
            args,
        ).fetchone()
        if ending is not None:
            where.append(f"({key}) {'>=' if reverse else '<='} ({', '.join('?' * len(ending))})")
            args += list(ending)
        residual, residual_args = self._residual(query, driver)
        columns = ", ".join(dict.fromkeys([*driver.key, f"d.{driver.row}"]))
        source, outer = self.dialect.driven(driver.table, columns, " AND ".join(where) or "1 = 1", order)
        found = self.db.execute(
            f"SELECT {_EVENT_COLUMNS}, {key} FROM {source} JOIN events e ON e.row = d.{driver.row} "
            f"WHERE {' AND '.join(outer + residual) or '1 = 1'} ORDER BY {order} LIMIT ?",
            [*args, *residual_args, page_size + 1],
        ).fetchall()
        width = len(driver.key)
        kind = driver.order.upper() if descending else driver.order
        shown = found[:page_size]
        if len(found) > page_size:
            onward, stopped = _cursor(kind, *found[page_size - 1][-width:]), None
        elif ending is not None:  # the window ends before the page is full: the next one goes on
            onward = _cursor(kind, *ending)
            stopped = at_text(ending[0]) if driver.order == "a" else str(ending[0])
        else:
            onward, stopped = None, None
        if backwards:
            shown = shown[::-1]
            following = _cursor(kind, *shown[-1][-width:]) if shown else None
            previous = onward
        else:
            following = onward
            previous = _cursor(kind, *shown[0][-width:]) if shown and after is not None else None
        rows = self._with_players_all(shown)
        total, exact = self._total(driver, residual, residual_args)
        effective = {"a": "date", "i": "id", "r": "words"}[driver.order]
        return Page(
            rows,
            following,
            driver.name,
            stopped,
            previous,
            total,
            exact,
            ("-" if descending else "") + effective,
        )

    def _cursor_values(self, text: str | None, driver: _Driver, descending: bool) -> list[Any]:
        if text is None:
            return []
        kind, parts = _parse_cursor(text)
        expected = driver.order.upper() if descending else driver.order
        if kind != expected or len(parts) != len(driver.key):
            raise IndexQueryError("the page cursor belongs to another search")
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise IndexQueryError("the page cursor is not one this console gave") from None

    def _total(self, driver: _Driver, residual: list[str], residual_args: list[Any]) -> tuple[int, bool]:
        """The events matched among the first :data:`CHOICE_LIMIT` rows of the driving index, and
        whether that is all of them (the index held no more rows for the driver's conditions)."""
        window = self.db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {driver.table} d "
            f"WHERE {' AND '.join(driver.where) or '1 = 1'} LIMIT {CHOICE_LIMIT + 1}) w",
            driver.args,
        ).fetchone()[0]
        if not residual:
            return min(window, CHOICE_LIMIT), window <= CHOICE_LIMIT
        matched = self.db.execute(
            f"SELECT count(*) FROM (SELECT d.{driver.row} AS r FROM {driver.table} d "
            f"WHERE {' AND '.join(driver.where) or '1 = 1'} ORDER BY {', '.join(driver.key)} LIMIT {CHOICE_LIMIT}) w "
            f"JOIN events e ON e.row = w.r WHERE {' AND '.join(residual)}",
            [*driver.args, *residual_args],
        ).fetchone()[0]
        return matched, window <= CHOICE_LIMIT

    def players_starting(self, prefix: str, *, hashes: bool = False, limit: int = 50) -> list[str]:
        """The distinct IDJoueur (or HashJoueur) that start with ``prefix``, in order, at most
        ``limit``: one index seek each (a prefix that thousands of players share costs no more)."""
        column = "hash" if hashes else "player"
        found: list[str] = []
        for _ in range(limit):
            after, beyond = (found[-1], ">") if found else (prefix, ">=")
            row = self.db.execute(
                f"SELECT {column} FROM parties WHERE {column} {beyond} ? ORDER BY {column} LIMIT 1", (after,)
            ).fetchone()
            if row is None or not row[0].startswith(prefix):
                break
            found.append(row[0])
        return found

    def _with_players(self, values: Sequence[Any]) -> EventRow:
        return self._with_players_all([values])[0]

    def _with_players_all(self, found: Sequence[Sequence[Any]]) -> list[EventRow]:
        """Rows with their players (the first 13 by name) and finding codes: two queries for a
        whole page, not two per row (each a round trip to a PostgreSQL server)."""
        rows = [_event_row(values) for values in found]
        players: dict[int, list[str]] = {row.row: [] for row in rows}
        codes: dict[int, list[str]] = {row.row: [] for row in rows}
        for start in range(0, len(rows), 500):  # a bounded number of arguments per statement
            chunk = rows[start : start + 500]
            for row, player in self.db.execute(
                f"SELECT row, player FROM parties WHERE row IN ({', '.join('?' * len(chunk))}) ORDER BY row, player",
                [r.row for r in chunk],
            ):
                players[row].append(player)
            flagged = [r.row for r in chunk if r.findings]
            if flagged:
                for row, code in self.db.execute(
                    f"SELECT DISTINCT row, code FROM findings WHERE row IN ({', '.join('?' * len(flagged))}) "
                    "ORDER BY row, code",
                    flagged,
                ):
                    codes[row].append(code)
        return [replace(r, players=tuple(players[r.row][:13]), codes=tuple(codes[r.row])) for r in rows]

    def _choose(self, q: Query, *, dated: bool = False) -> _Driver:
        """The index to drive ``q`` from: among those ``q`` can use, the one with the fewest matching
        rows, each counted up to :data:`CHOICE_LIMIT` (a few milliseconds); on a tie, the first of
        :func:`_drivers`' order (the most selective by nature first)."""
        candidates = _drivers(q, self.dialect, dated=dated)
        if len(candidates) == 1:
            return candidates[0]
        best, fewest = candidates[0], None
        for candidate in candidates:
            count = self.db.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {candidate.table} d "
                f"WHERE {' AND '.join(candidate.where) or '1 = 1'} LIMIT {CHOICE_LIMIT}) AS c",
                candidate.args,
            ).fetchone()[0]
            if fewest is None or count < fewest:
                best, fewest = candidate, count
            if count == 0:
                break
        return best

    def _residual(self, q: Query, driver: _Driver) -> tuple[list[str], list[Any]]:
        """Every condition of ``q`` the driver does not check itself, on the event (``e``)."""
        where: list[str] = []
        args: list[Any] = []
        checks: list[tuple[object, str]] = [
            (q.oper, "e.oper = ?"),
            (q.coffre, "e.coffre = ?"),
            (q.first_id, "e.id_evt >= ?"),
            (q.last_id, "e.id_evt <= ?"),
            (q.since and seconds(q.since), "e.at >= ?"),
            (q.until and seconds(q.until), "e.at <= ?"),
            (q.type, "e.type = ?"),
            (q.tech, "e.tech = ?"),
            (q.pool, "e.pool = ?"),
        ]
        for value, condition in checks:
            if value is not None:
                where.append(condition)
                args.append(value)
        for value, column, name in (
            (q.player, "player", "IDJoueur"),
            (q.hash_joueur, "hash", "HashJoueur"),
            (q.inscription, "inscription", "Inscription"),
        ):
            if value is not None and driver.name != name:
                where.append(f"EXISTS (SELECT 1 FROM parties p WHERE p.row = e.row AND p.{column} = ?)")
                args.append(value)
        if q.finding is not None and driver.name != "finding":
            where.append("EXISTS (SELECT 1 FROM flags f WHERE f.row = e.row AND f.code = ?)")
            args.append(q.finding)
        if q.text is not None and driver.name != "text":
            match, match_args = _text_match(q.text, self.dialect, "t")
            where.append(f"e.row IN (SELECT t.{self.dialect.text_row} FROM event_text t WHERE {match})")
            args += match_args
        return where, args

    # -- one event, one player, one Tech ---------------------------------------------------------

    def event(self, oper: str, coffre: int, id_evt: int) -> tuple[EventRow, LotRow, list[Finding]] | None:
        found = self.db.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events e WHERE e.oper = ? AND e.coffre = ? AND e.id_evt = ?",
            (oper, coffre, id_evt),
        ).fetchone()
        if found is None:
            return None
        row = self._with_players(found)
        lot = self.lot(oper, coffre, row.lot)
        assert lot is not None
        return row, lot, self._findings(row.row)

    def _findings(self, row: int) -> list[Finding]:
        return [
            Finding(code, message, round_, seat, player)
            for code, message, round_, seat, player in self.db.execute(
                "SELECT code, message, round, seat, player FROM findings WHERE row = ? ORDER BY n", (row,)
            )
        ]

    def lot(self, oper: str, coffre: int, number: int) -> LotRow | None:
        found = self.db.execute(
            "SELECT * FROM lots WHERE oper = ? AND coffre = ? AND number = ?", (oper, coffre, number)
        ).fetchone()
        return None if found is None else LotRow(*found[:6], bytes(found[6]), at_text(found[7]))

    def neighbours(
        self, oper: str, player: str, at: str, row: int
    ) -> tuple[EventRow | None, EventRow | None]:
        """The player's events just before and just after the event at (``at``, ``row``)."""
        out: list[EventRow | None] = []
        for comparison, direction in (("<", "DESC"), (">", "ASC")):
            found = self.db.execute(
                f"SELECT {_EVENT_COLUMNS} FROM parties d JOIN events e ON e.row = d.row "
                f"WHERE d.player = ? AND e.oper = ? AND (d.at, d.row) {comparison} (?, ?) "
                f"ORDER BY d.at {direction}, d.row {direction} LIMIT 1",
                (player, oper, seconds(unstamp(at)), row),
            ).fetchone()
            out.append(None if found is None else _event_row(found))
        return out[0], out[1]

    def _parties(self, sql: str, args: Sequence[Any]) -> list[PartyRow]:
        """Rows of ``_PARTY_COLUMNS`` (parties ``d`` joined to their events ``e``) as PartyRow."""
        return [
            PartyRow(
                *values[:4],
                at_text(values[4]),
                *values[5:9],
                _decimal(values[9]),
                _decimal(values[10]),
                *values[11:16],
            )
            for values in self.db.execute(f"SELECT {_PARTY_COLUMNS} {sql}", args)
        ]

    def player_parties(
        self, player: str, since: datetime | None, until: datetime | None, limit: int = PAGE_LIMIT
    ) -> list[PartyRow]:
        """The player's events over a period, by date (at most ``limit``, the first)."""
        period, args = _period("d.at", since, until)
        return self._parties(
            f"FROM parties d JOIN events e ON e.row = d.row WHERE d.player = ?{period} ORDER BY d.at, d.row LIMIT ?",
            [player, *args, limit],
        )

    def player_findings(
        self, player: str, since: datetime | None, until: datetime | None, limit: int = PAGE_LIMIT
    ) -> list[FindingRow]:
        """The findings of the player's first ``limit`` events over a period (those naming another
        player left out), by date."""
        period, args = _period("d.at", since, until)
        sql = (
            "SELECT e.oper, e.coffre, e.id_evt, e.type, e.at, f.code, f.message, f.round, f.seat, f.player "
            f"FROM (SELECT d.row, d.at FROM parties d WHERE d.player = ?{period} ORDER BY d.at, d.row LIMIT ?) d "
            "JOIN events e ON e.row = d.row JOIN findings f ON f.row = e.row "
            "WHERE e.findings > 0 AND (f.player IS NULL OR f.player = ?) ORDER BY d.at, d.row, f.n"
        )
        return [
            FindingRow(*values[:4], at_text(values[4]), Finding(*values[5:]))
            for values in self.db.execute(sql, (player, *args, limit, player))
        ]

    def tech_events(self, tech: str, limit: int = PAGE_LIMIT) -> list[tuple[EventRow, list[Finding]]]:
        """Every event of a Tech (table or tournament), by date (at most ``limit``, the first)."""
        found = self.db.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events e WHERE e.tech = ? ORDER BY e.at, e.row LIMIT ?",
            (tech, limit),
        ).fetchall()
        return [
            (row, self._findings(row.row) if row.findings else []) for row in self._with_players_all(found)
        ]

    def tech_parties(self, tech: str, limit: int = 4 * PAGE_LIMIT) -> list[PartyRow]:
        """The seats of every hand of a Tech: chips before and after, by date."""
        return self._parties(
            "FROM events e JOIN parties d ON d.row = e.row WHERE e.tech = ? AND e.type = 'POJEU' "
            "ORDER BY e.at, e.row, d.player LIMIT ?",
            (tech, limit),
        )

    def tech_results(self, tech: str, limit: int = PAGE_LIMIT) -> list[PartyRow]:
        """The players of a Tech's other events (results, buy-ins, gains, cancellations), by date:
        each one's place and balance before and after."""
        return self._parties(
            "FROM events e JOIN parties d ON d.row = e.row WHERE e.tech = ? "
            "AND e.type NOT IN ('POJEU', 'POINSCRIT') ORDER BY e.at, e.row, d.player LIMIT ?",
            (tech, limit),
        )

    # -- the overview ---------------------------------------------------------------------------

    def coffres(self) -> list[CoffreState]:
        return [
            CoffreState(
                oper,
                coffre,
                lots,
                events,
                bytes(chain),
                None if sealed_at is None else at_text(sealed_at),
                refused,
            )
            for oper, coffre, lots, events, chain, sealed_at, refused in self.db.execute(
                "SELECT oper, coffre, lots, events, chain, sealed_at, refused FROM coffres ORDER BY oper, coffre"
            )
        ]

    def lots_by_day(self, days: int = 90) -> list[tuple[str, int, int]]:
        """(day, lots, events) of the newest ``days`` days that have lots."""
        found = self.db.execute(
            "SELECT day, sum(lots), sum(events) FROM lot_days GROUP BY day ORDER BY day DESC LIMIT ?", (days,)
        ).fetchall()
        return [(_day_text(day), int(lots), int(events)) for day, lots, events in reversed(found)]

    def findings_by_day(self, days: int = 90) -> list[tuple[str, str, int]]:
        """(day, code, count) of the newest ``days`` days that have findings."""
        newest = [
            d
            for (d,) in self.db.execute(
                "SELECT DISTINCT day FROM finding_days ORDER BY day DESC LIMIT ?", (days,)
            )
        ]
        if not newest:
            return []
        return [
            (_day_text(day), code, count)
            for day, code, count in self.db.execute(
                "SELECT day, code, count FROM finding_days WHERE day >= ? ORDER BY day, code", (min(newest),)
            )
        ]

    def finding_codes(self) -> list[str]:
        return [code for (code,) in self.db.execute("SELECT DISTINCT code FROM finding_days ORDER BY code")]

    def event_types(self) -> list[str]:
        """The event types indexed, one index seek each (a DISTINCT would read every event)."""
        return [
            t
            for (t,) in self.db.execute(
                "WITH RECURSIVE t(type) AS (SELECT min(type) FROM events UNION ALL "
                "SELECT (SELECT min(type) FROM events WHERE type > t.type) FROM t WHERE t.type IS NOT NULL) "
                "SELECT type FROM t WHERE type IS NOT NULL"
            )
        ]

    def export_rows(self, query: Query, limit: int = MAX_EXPORT_ROWS) -> Iterator[EventRow]:
        """Every row ``query`` matches, page after page, up to ``limit`` (then IndexQueryError)."""
        after, given = None, 0
        while True:
            page = self.search(query, after=after, page_size=MAX_PAGE_SIZE)
            for row in page.rows:
                given += 1
                if given > limit:
                    raise IndexQueryError(f"more than {limit} events match: narrow the search to export it")
                yield row
            if page.next is None:
                return
            after = page.next

    # -- the signals page ---------------------------------------------------------------------------

    def signals_version(self) -> int | None:
        """The version of the signals' state saved in the index (each save adds one); None: none yet."""
        found = stored_version(self.db)
        return None if found is None else found[0]

    def signals_state(self) -> tuple[int, SignalState] | None:
        """The signals' state saved in the index and its version; None when none is."""
        return load_state(self.db)

    def types_of(self, refs: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int, int], str]:
        """The type of each event (IDOper, IDCoffre, IDEvt) the index holds, by its key (one seek each)."""
        found: dict[tuple[str, int, int], str] = {}
        for ref in dict.fromkeys(refs):
            row = self.db.execute(
                "SELECT type FROM events WHERE oper = ? AND coffre = ? AND id_evt = ?", ref
            ).fetchone()
            if row is not None:
                found[ref] = row[0]
        return found

    # -- comparing two indexes (a rebuild against the live one) ---------------------------------

    def dump(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """Every fact of the index keyed by (IDOper, IDCoffre, IDEvt) rather than row numbers, which
        depend on the order coffres were indexed in: two indexes of one archive dump the same."""
        db = self.db
        queries = {
            "coffres": "SELECT oper, coffre, lots, events, lot_digest, chain, frontier, sealed_at, refused FROM coffres",
            "lots": "SELECT * FROM lots",
            "lot_days": "SELECT * FROM lot_days",
            "events": "SELECT oper, coffre, id_evt, type, at, lot, tech, pool, inscription, forced, findings, game "
            "FROM events",
            "parties": "SELECT e.oper, e.coffre, e.id_evt, p.player, p.hash, p.inscription, p.seat, p.before, "
            "p.after, p.at, p.ip, p.session, p.place FROM parties p JOIN events e ON e.row = p.row",
            "findings": "SELECT e.oper, e.coffre, e.id_evt, f.n, f.code, f.message, f.round, f.seat, f.player "
            "FROM findings f JOIN events e ON e.row = f.row",
            "flags": "SELECT e.oper, e.coffre, e.id_evt, f.code, f.at FROM flags f JOIN events e ON e.row = f.row",
            "finding_days": "SELECT * FROM finding_days",
            "trail": "SELECT * FROM trail",
            "text": "SELECT e.oper, e.coffre, e.id_evt FROM events e "
            f"WHERE e.row IN (SELECT {self.dialect.text_row} FROM event_text)",
        }
        for table, sql in queries.items():
            for values in sorted(db.execute(sql).fetchall(), key=repr):
                yield table, tuple(values)

    # -- the findings page: events with findings by code, operator and period ------------------------
    # Plain SQL with ? placeholders (flags: one row per event and code; events: its IDOper).

    @staticmethod
    def _flag_filter(
        oper: str | None, since: datetime | None, until: datetime | None
    ) -> tuple[str, list[Any]]:
        """The WHERE clause (empty, or `` WHERE …``) on ``flags f`` joined to ``events e``."""
        period, args = _period("f.at", since, until)
        if oper is not None:
            period, args = " AND e.oper = ?" + period, [oper, *args]
        return (" WHERE 1 = 1" + period) if period else "", args

    def findings_per_code(
        self, oper: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> list[tuple[str, int, str, str]]:
        """(code, events, first DateEvt, last DateEvt) of the events with each finding code, of
        IDOper ``oper`` over a period (each None: any), by code. An event counts once per code, as
        the search by that code lists it."""
        where, args = self._flag_filter(oper, since, until)
        return [
            (code, int(count), at_text(first), at_text(last))
            for code, count, first, last in self.db.execute(
                "SELECT f.code, count(*), min(f.at), max(f.at) FROM flags f JOIN events e ON e.row = f.row"
                f"{where} GROUP BY f.code ORDER BY f.code",
                args,
            )
        ]

    def findings_per_operator(
        self, oper: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> list[tuple[str, str, int]]:
        """(IDOper, code, events) over a period, by IDOper and code."""
        where, args = self._flag_filter(oper, since, until)
        return [
            (found_oper, code, int(count))
            for found_oper, code, count in self.db.execute(
                "SELECT e.oper, f.code, count(*) FROM flags f JOIN events e ON e.row = f.row"
                f"{where} GROUP BY e.oper, f.code ORDER BY e.oper, f.code",
                args,
            )
        ]

    def findings_over_time(
        self,
        oper: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[tuple[str, str, int]]:
        """(day ``YYYY-MM-DD`` of DateEvt in UTC, code, events), by day and code."""
        where, args = self._flag_filter(oper, since, until)
        return sorted(
            (_day_text(int(day) * 86400), code, int(count))
            for day, code, count in self.db.execute(  # days since 1970 (dates are whole UTC seconds)
                f"SELECT f.at / 86400 AS day, f.code, count(*) FROM flags f JOIN events e ON e.row = f.row"
                f"{where} GROUP BY f.at / 86400, f.code",
                args,
            )
        )


# -- the background thread of the regulator API ---------------------------------------------------


INDEX_NICE = 10
"""The console index's thread runs this much nicer than the process (Linux schedules threads on
their own): it reads and checks every lot the vault seals, some 150-300 µs of CPU an event, and on
a machine it shares with ingest, the vault and acquittal it took that CPU from the recording path
(issue 34). Nice 10 weighs about a tenth of nice 0: under load the index waits, and catches up when
the load falls; it is eventually consistent anyway (``coffre_console_index_lag_seconds``). The API's
own threads keep the process's priority."""


def yield_to_recording() -> bool:
    """The calling thread's priority lowered by :data:`INDEX_NICE` (False where the system cannot,
    or will not, do it per thread: the index then runs at the process's priority, as before)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + INDEX_NICE))
    except (AttributeError, OSError):
        return False
    return True


class IndexThread(threading.Thread):
    """Keeps the index up with the archive, every ``interval`` seconds, in its own thread with its
    own connection: the API's answers read the index while it writes (SQLite's WAL, PostgreSQL's
    MVCC), and nothing here touches the recording path (the archive is only read). Replicas of the
    API on one PostgreSQL index each run one: a lot is written by one of them (:meth:`Indexer._write`).

    An SQLite index of another schema version is moved aside and built again from the archive; a
    PostgreSQL one is refused (:class:`OtherSchema`: the API does not start), since other replicas
    of another version may be using it: ``coffre console-index --rebuild`` makes it again."""

    def __init__(
        self,
        path: Path | str,
        storage: ArchiveStorage,
        trust: TrustStore,
        *,
        interval: float = 2.0,
    ) -> None:
        super().__init__(name="coffre-console-index", daemon=True)
        self.path, self.storage, self.trust, self.interval = path, storage, trust, interval
        self._halt = threading.Event()
        self.passes = 0
        self.last: CatchUp | None = None
        self.caught_up = threading.Event()
        try:
            connect(path).close()  # created (or its schema checked) before the API answers
        except OtherSchema as exc:
            if not isinstance(path, Path):
                raise
            aside = path.with_name(f"{path.name}.schema-{exc.found}")
            log.warning("console index: %s; moved to %s, a new one is built from the archive", exc, aside)
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            path.replace(aside)
            connect(path).close()

    def run(self) -> None:
        yield_to_recording()
        db: IndexDB | None = None
        indexer: Indexer | None = None
        try:
            while not self._halt.is_set():
                started = time.monotonic()
                try:
                    if db is None or db.broken:  # PostgreSQL restarted, the network cut: connect again
                        if db is not None:
                            db.close()
                        db = None
                        db = connect(self.path)
                        indexer = Indexer(db, self.storage, self.trust)
                    done = indexer.catch_up(max_lots=200)
                except Exception:
                    log.warning("console index: a pass failed; trying again", exc_info=True)
                    self._halt.wait(self.interval)
                    continue
                self.last = done
                self.passes += 1
                metrics.CONSOLE_INDEX_LAG.set(done.lag_seconds)
                metrics.CONSOLE_INDEX_LOTS_BEHIND.set(done.behind)
                metrics.CONSOLE_INDEX_REFUSED.set(len(done.refused))
                if done.behind == 0:
                    self.caught_up.set()
                if done.lots and done.behind:
                    continue  # more to index: no wait
                self._halt.wait(max(0.0, self.interval - (time.monotonic() - started)))
        finally:
            if indexer is not None and db is not None and not db.broken:
                try:
                    indexer.close()  # the signals' state saved
                except Exception:
                    log.warning("console index: the signals' state not saved at stop", exc_info=True)
            if db is not None:
                db.close()

    def stop(self, timeout: float = 10.0) -> None:
        self._halt.set()
        self.join(timeout)


__all__ = [
    "MAX_EXPORT_ROWS",
    "PAGE_LIMIT",
    "PAGE_SIZE",
    "CatchUp",
    "CoffreState",
    "EventRow",
    "EventSearch",
    "FindingRow",
    "IndexQueryError",
    "IndexThread",
    "Indexer",
    "LotRow",
    "Page",
    "PartyRow",
    "Query",
    "connect",
    "rebuild",
    "stamp",
    "unstamp",
]
