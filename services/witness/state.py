"""The witness's durable state: SQLite in ``COFFRE_WITNESS_STATE_DIR``.

Two tables, in ``witness.sqlite3`` (WAL, ``synchronous=FULL``: a commit is on disk when it
returns):

* ``latest``: the newest checkpoint cosigned per coffre (its origin, size, root, the signed XML
  checkpoint as it was shown and the cosigned note answered for it);
* ``refusals``: append-only, every refusal of a checkpoint whose operator signature held (a
  truncation, a fork, a rewrite, a malformed one), with that checkpoint: the evidence that the
  operator signed two histories. Conflicts (the vault's idea of the witness's size is stale) are
  routine and not kept; requests that are not signed by a trusted operator are not kept either
  (anyone who can reach the port could fill the disk with them).

Every check-and-update runs under one lock (:meth:`WitnessState.add`), in a worker thread: the
judgement reads the newest, decides, and the new newest is committed before the answer leaves.
A second witness process on the same folder is refused (an ``flock`` on ``witness.lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coffre.domain.lot import Checkpoint
from coffre.domain.witness import AddCheckpoint, Latest, Refusal, WitnessKey, judge, note_body

__all__ = ["KEPT_REFUSALS", "Cosigned", "RefusalRecord", "StateLocked", "WitnessState"]

KEPT_REFUSALS = frozenset({"truncation", "fork", "rewrite", "malformed"})
"""The refusals of a validly signed checkpoint that are kept, with it, in ``refusals``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS latest (
    id_oper TEXT NOT NULL,
    id_coffre INTEGER NOT NULL,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    checkpoint BLOB NOT NULL,
    note BLOB NOT NULL,
    updated TEXT NOT NULL,
    PRIMARY KEY (id_oper, id_coffre)
);
CREATE TABLE IF NOT EXISTS refusals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    id_oper TEXT,
    id_coffre INTEGER,
    size INTEGER,
    root BLOB,
    old_size INTEGER,
    checkpoint BLOB NOT NULL
);
CREATE TRIGGER IF NOT EXISTS refusals_append_only_update BEFORE UPDATE ON refusals
BEGIN SELECT RAISE(ABORT, 'refusals are append-only'); END;
CREATE TRIGGER IF NOT EXISTS refusals_append_only_delete BEFORE DELETE ON refusals
BEGIN SELECT RAISE(ABORT, 'refusals are append-only'); END;
"""


class StateLocked(Exception):
    """Another witness process holds the state folder."""


@dataclass(frozen=True, slots=True)
class Cosigned:
    """The newest checkpoint cosigned for one coffre, and the cosigned note answered for it."""

    latest: Latest
    note: bytes
    updated: str


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    time: str
    kind: str
    message: str
    id_oper: str | None
    id_coffre: int | None
    size: int | None
    root: bytes | None
    old_size: int | None
    checkpoint: bytes


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class WitnessState:
    """The state folder, opened by one process at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_fd = os.open(self.directory / "witness.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StateLocked(
                f"another witness process holds {self.directory} (its witness.lock is locked)"
            ) from None
        try:
            self._db = sqlite3.connect(
                self.directory / "witness.sqlite3", isolation_level=None, check_same_thread=False
            )
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise OSError(f"SQLite refused WAL mode in {self.directory} ({mode})")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)

    # -- reads --

    def latest(self, id_oper: str, id_coffre: int) -> Cosigned | None:
        with self._lock:
            return self._latest(id_oper, id_coffre)

    def _latest(self, id_oper: str, id_coffre: int) -> Cosigned | None:
        row = self._db.execute(
            "SELECT id_oper, id_coffre, size, root, checkpoint, note, updated FROM latest "
            "WHERE id_oper = ? AND id_coffre = ?",
            (id_oper, id_coffre),
        ).fetchone()
        return _cosigned(row) if row else None

    def all(self) -> list[Cosigned]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id_oper, id_coffre, size, root, checkpoint, note, updated FROM latest "
                "ORDER BY id_oper, id_coffre"
            ).fetchall()
        return [_cosigned(row) for row in rows]

    def refusals(self) -> list[RefusalRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT time, kind, message, id_oper, id_coffre, size, root, old_size, checkpoint "
                "FROM refusals ORDER BY id"
            ).fetchall()
        return [RefusalRecord(*row) for row in rows]

    def probe(self) -> None:
        with self._lock:
            self._db.execute("SELECT count(*) FROM latest").fetchone()

    # -- the check-and-update --

    def add(self, checkpoint: Checkpoint, request: AddCheckpoint, key: WitnessKey, at: int) -> bytes:
        """Judge ``request`` (its ``checkpoint``'s signature already checked) against the newest
        cosigned for its coffre; on success commit the new newest, then return the signature
        line. A :class:`Refusal` of a kind in :data:`KEPT_REFUSALS` is committed to ``refusals``
        before it is raised."""
        with self._lock:
            held = self._latest(checkpoint.id_oper, checkpoint.id_coffre)
            try:
                accepted = judge(held.latest if held else None, checkpoint, request)
            except Refusal as refusal:
                if refusal.kind in KEPT_REFUSALS:
                    self._refused(refusal, checkpoint, request)
                raise
            body = note_body(checkpoint)
            line = key.cosign(body, at)
            if held is not None and accepted == held.latest:
                return line  # the same tree again: cosigned again, the stored note is kept
            self._db.execute(
                "INSERT OR REPLACE INTO latest (id_oper, id_coffre, size, root, checkpoint, note, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    accepted.id_oper,
                    accepted.id_coffre,
                    accepted.size,
                    accepted.root,
                    accepted.checkpoint,
                    body + b"\n" + line,
                    _now(),
                ),
            )
            return line

    def _refused(self, refusal: Refusal, checkpoint: Checkpoint | None, request: AddCheckpoint) -> None:
        self._db.execute(
            "INSERT INTO refusals (time, kind, message, id_oper, id_coffre, size, root, old_size, checkpoint) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                _now(),
                refusal.kind,
                refusal.message,
                checkpoint.id_oper if checkpoint else None,
                checkpoint.id_coffre if checkpoint else None,
                checkpoint.tree_size if checkpoint else None,
                checkpoint.tree_root if checkpoint else None,
                request.old_size,
                request.checkpoint,
            ),
        )


def _cosigned(row: tuple[Any, ...]) -> Cosigned:
    id_oper, id_coffre, size, root, checkpoint, note, updated = row
    latest = Latest(str(id_oper), int(id_coffre), int(size), bytes(root), bytes(checkpoint))
    return Cosigned(latest, bytes(note), str(updated))
