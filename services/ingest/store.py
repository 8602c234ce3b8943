"""The ingest's durable state: IDEvt counters and the outbox, in one SQLite file.

Why an outbox: Tansu (and many Kafka set-ups) offer no transactional producer, so
"assign IDEvt, publish, commit the input offset" cannot be atomic. Instead the
assignment and the exact bytes to publish are committed here first (WAL, fsync: one
transaction per batch, a group commit), then published. After a crash:

* an input redelivered by Kafka is found here by its id (its position and a digest of its
  content, so that a broker that lost its log and reuses offsets is not mistaken for a
  redelivery) and is never assigned a second IDEvt: invariant 2, same IDEvt and same bytes;
* whatever was committed here but not confirmed published is published again, in
  IDEvt order, before any new input is read, so the vault never sees a gap.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from coffre.domain.messages import Headers
from coffre.metrics import FSYNC_SECONDS

STORE_FAILURES = (sqlite3.OperationalError, OSError, MemoryError)
"""Failures of the store itself (disk full, I/O error, locked database), not of one input's values:
these stop ingest, which a restart resumes; any other failure of a commit is tied to an input."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (
    id_oper TEXT NOT NULL, id_coffre INTEGER NOT NULL, last_id_evt INTEGER NOT NULL,
    PRIMARY KEY (id_oper, id_coffre)
);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    input_id BLOB NOT NULL UNIQUE,
    in_partition INTEGER NOT NULL, in_offset INTEGER NOT NULL,
    topic TEXT NOT NULL, key BLOB, value BLOB NOT NULL, headers TEXT NOT NULL,
    published INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_unpublished ON outbox (published, seq);
"""


@dataclass(frozen=True, slots=True)
class OutboxRow:
    seq: int
    in_partition: int
    in_offset: int
    topic: str
    key: bytes | None
    value: bytes
    headers: Headers


class Transaction:
    """One batch's assignments and outputs; committed (fsynced) as a whole or not at all."""

    def __init__(self, store: IngestStore):
        self._store = store
        self._counters: dict[tuple[str, int], int] = {}
        self.rows: list[tuple[bytes, int, int, str, bytes | None, bytes, Headers]] = []

    def peek_id_evt(self, id_oper: str, id_coffre: int) -> int:
        """The IDEvt the coffre's next event takes, without taking it."""
        key = (id_oper, id_coffre)
        return self._counters.get(key, self._store.last_id_evt(id_oper, id_coffre)) + 1

    def next_id_evt(self, id_oper: str, id_coffre: int) -> int:
        """Take the coffre's next IDEvt (durable with the transaction)."""
        id_evt = self.peek_id_evt(id_oper, id_coffre)
        self._counters[(id_oper, id_coffre)] = id_evt
        return id_evt

    def add(
        self,
        input_id: bytes,
        partition: int,
        offset: int,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: Headers,
    ) -> None:
        """The output of one input (``input_id``, see :attr:`InputMessage.input_id`), to publish."""
        self.rows.append((input_id, partition, offset, topic, key, value, headers))


class IngestStore:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # the commit is the durable point: fsync it
        self._db.executescript(SCHEMA)
        self._last: dict[tuple[str, int], int] = {
            (oper, coffre): last
            for oper, coffre, last in self._db.execute("SELECT id_oper, id_coffre, last_id_evt FROM counters")
        }
        self._published_up_to = 0  # outbox rows up to this seq are on Kafka; written with the next commit

    def last_id_evt(self, id_oper: str, id_coffre: int) -> int:
        return self._last.get((id_oper, id_coffre), 0)

    def handled(self, input_ids: list[bytes]) -> set[bytes]:
        """The ids (:attr:`InputMessage.input_id`) of inputs already handled: redeliveries."""
        found: set[bytes] = set()
        for start in range(0, len(input_ids), 500):  # SQLite's bound on host parameters
            chunk = input_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                row[0]
                for row in self._db.execute(f"SELECT input_id FROM outbox WHERE input_id IN ({marks})", chunk)
            )
        return found

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        tx = Transaction(self)
        yield tx
        if not tx.rows:
            return
        now = time.time()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._write_published_mark()
            db.executemany(
                "INSERT INTO counters (id_oper, id_coffre, last_id_evt) VALUES (?, ?, ?) "
                "ON CONFLICT (id_oper, id_coffre) DO UPDATE SET last_id_evt = excluded.last_id_evt",
                [(oper, coffre, last) for (oper, coffre), last in tx._counters.items()],
            )
            db.executemany(
                "INSERT INTO outbox (input_id, in_partition, in_offset, topic, key, value, headers, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(i, p, o, t, k, v, _encode_headers(h), now) for i, p, o, t, k, v, h in tx.rows],
            )
            with FSYNC_SECONDS.labels("ingest_store").time():
                db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._last.update(tx._counters)

    def unpublished(self) -> list[OutboxRow]:
        """Outputs committed but not confirmed published, in the order they were assigned."""
        return [
            OutboxRow(seq, p, o, t, k, v, _decode_headers(h))
            for seq, p, o, t, k, v, h in self._db.execute(
                "SELECT seq, in_partition, in_offset, topic, key, value, headers FROM outbox"
                " WHERE published = 0 AND seq > ? ORDER BY seq",
                (self._published_up_to,),
            )
        ]

    def mark_published(self, up_to_seq: int) -> None:
        """Everything up to ``up_to_seq`` is on Kafka. Kept in memory and written with the next
        transaction (or at close), which saves an fsync per batch: losing the mark in a crash
        only publishes those rows once more, which the vault takes as redeliveries."""
        self._published_up_to = max(self._published_up_to, up_to_seq)

    def _write_published_mark(self) -> None:
        self._db.execute(
            "UPDATE outbox SET published = 1 WHERE published = 0 AND seq <= ?", (self._published_up_to,)
        )

    def prune(self, older_than_seconds: float) -> int:
        """Forget published outputs older than this: their inputs were committed long ago."""
        self._write_published_mark()
        cursor = self._db.execute(
            "DELETE FROM outbox WHERE published = 1 AND created < ?", (time.time() - older_than_seconds,)
        )
        return cursor.rowcount

    def flush(self) -> None:
        """Write the published mark now (at shutdown), so that a restart publishes nothing twice."""
        with self._db:
            self._write_published_mark()

    def close(self) -> None:
        self.flush()
        self._db.close()


def _encode_headers(headers: Headers) -> str:
    return json.dumps([[k, v.decode("latin-1")] for k, v in headers])


def _decode_headers(text: str) -> Headers:
    return [(k, v.encode("latin-1")) for k, v in json.loads(text)]
