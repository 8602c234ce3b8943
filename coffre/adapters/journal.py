"""The vault's durable per-coffre journal: an append-only file of recorded events.

One file per coffre, ``<root>/<IDOper>/<IDCoffre>/journal.log``, holding IDEvt 1, 2, 3, … each
with its chain hash (``SHA-256(previous ‖ canonical bytes)``, see :mod:`coffre.domain.chain`).
The byte format, and how a reader tells a torn tail from corruption, are in
``docs/journal-format.md``; this module is one implementation of that document.

Durability: :meth:`Journal.append` only buffers; :meth:`Journal.sync` writes and fsyncs, so an
event is "recorded" (invariant 4 of the product contract) once a ``sync`` that started after its
``append`` has returned. Several appends then one sync is the group commit;
:meth:`JournalSet.sync` does it across coffres.

Threads: one thread may append (the event loop) while another runs ``sync`` (for instance
through ``asyncio.to_thread``): appends go on while the fsync runs and are picked up by the
next sync. Reading (:meth:`Journal.get`, :meth:`Journal.records`, ``synced_id_evt``) is safe from
any thread while the appending thread goes on: each read takes the journal's lock for its
in-memory state and reads the file with ``pread`` (no shared file position); a read after
:meth:`Journal.close` fails, it never reads another file. The vault's sealer thread reads this
way. Appending stays with one thread.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import struct
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from types import TracebackType
from typing import Self
from zlib import crc32

from coffre.domain.chain import GENESIS
from coffre.domain.limits import ID_COFFRE_RE, MAX_ID

from .files import write_all

JOURNAL_NAME = "journal.log"
MAGIC = b"CFJR"
VERSION = 1
HEADER_SIZE = 56
"""magic 4, version 1, flags 1, reserved 2, payload length 4, IDEvt 8, chain hash 32, header CRC 4."""
TRAILER_SIZE = 4
"""The record CRC-32, over the header and the payload."""
OVERHEAD = HEADER_SIZE + TRAILER_SIZE
MAX_EVENT_BYTES = 0xFFFF_FFFF
"""The payload length is a u32."""

READ_CHUNK = 4 << 20
"""Scans and iteration read this many bytes at a time (a record larger than this is read whole)."""
FLUSH_THRESHOLD = 1 << 20
"""Appended bytes are handed to the OS (without fsync) once this many are buffered."""

_HEAD = struct.Struct(">4sBBHIQ32s")  # the header without its CRC: 52 bytes
_HEADER = struct.Struct(">4sBBHIQ32sI")  # the whole header: 56 bytes
_U32 = struct.Struct(">I")
_HEAD_SIZE = _HEAD.size
assert _HEADER.size == HEADER_SIZE

_OPER = re.compile(r"[0-9]{4}")
_COFFRE = ID_COFFRE_RE


class JournalCorrupted(Exception):
    """A complete record fails its checksum or the chain, or IDEvt is not consecutive, or a bad
    record is followed by a valid one. Never repaired: an operator must look."""

    def __init__(self, message: str, *, path: Path | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class JournalLocked(Exception):
    """Another open journal (in this or another process) holds the file's lock."""


class JournalFailed(Exception):
    """A write or fsync of this journal failed: what reached the disk is unknown (after a failed
    fsync the kernel may have dropped the dirty pages). The journal refuses further use; close it
    and open it again, which re-reads the file and repairs a torn tail."""


@dataclass(frozen=True, slots=True)
class JournalRecord:
    id_evt: int
    chain_hash: bytes
    """32 bytes."""
    event: bytes
    """The event's canonical bytes, exactly as given to :meth:`Journal.append`."""


class Journal:
    """One coffre's append-only journal: <directory>/journal.log"""

    def __init__(
        self,
        path: Path,
        fd: int,
        offsets: array,
        end: int,
        last_id: int,
        last_hash: bytes,
        repaired: int,
    ) -> None:
        # Use Journal.open(directory).
        self._path = path
        self._fd = fd
        self._offsets = offsets  # offsets[i] = file offset of IDEvt i + 1
        self._end = end  # file offset after the last appended record (pending included)
        self._written = end  # file offset after the last record handed to the OS
        self._pending = bytearray()  # appended records not yet handed to the OS
        self._last_id = last_id
        self._last_hash = last_hash
        self._synced_id = last_id
        self._dirty = False  # appended since the last sync started
        self._repaired = repaired
        self._failed: BaseException | None = None
        self._lock = threading.Lock()  # the in-memory state and the writes
        self._sync_lock = threading.Lock()  # one sync at a time, so a sync returns only once durable
        self._on_dirty: Callable[[Journal], None] | None = None  # set by JournalSet

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path) -> Journal:
        """Open (creating if absent) the journal in ``directory``, repair a torn tail, verify
        every record and the whole chain.

        Raises :class:`JournalCorrupted` when the file is damaged anywhere but its tail, and
        :class:`JournalLocked` when another open journal holds the file.
        """
        directory = Path(directory)
        _make_directories(directory)
        path = directory / JOURNAL_NAME
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, flags)
            created = False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalLocked(f"{path} is already open (by this or another process)") from None
            if created:
                os.fsync(fd)
                _fsync_directory(directory)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise JournalCorrupted(f"{path} is not a regular file", path=path)
            size = info.st_size
            offsets, last_id, last_hash, good = _scan(fd, size, path)
            if good < size:
                found = _find_valid_record(fd, good + 1, size)
                if found is not None:
                    raise JournalCorrupted(
                        f"{path}: the record at offset {good} (IDEvt {last_id + 1}) is damaged and "
                        f"followed by a valid record at offset {found}",
                        path=path,
                        offset=good,
                    )
                os.ftruncate(fd, good)
            # Always: what a killed predecessor wrote may still be only in the page cache, and it
            # is about to be treated as recorded.
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, offsets, good, last_id, last_hash, size - good)

    # -- state -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def last_id_evt(self) -> int:
        """The last appended IDEvt (synced or not); 0 when empty."""
        return self._last_id

    @property
    def last_hash(self) -> bytes:
        """The chain hash of the last appended record; GENESIS when empty."""
        return self._last_hash

    @property
    def synced_id_evt(self) -> int:
        """The last IDEvt known to be durable (everything found at open is)."""
        return self._synced_id

    @property
    def repaired_bytes(self) -> int:
        """How many bytes of torn tail :meth:`open` truncated (0 normally)."""
        return self._repaired

    @property
    def closed(self) -> bool:
        return self._fd < 0

    # -- writing ---------------------------------------------------------------------------

    def append(self, id_evt: int, event: bytes) -> bytes:
        """Buffer the record of ``id_evt`` (which must be ``last_id_evt + 1``) and return its chain
        hash. Not durable until :meth:`sync`."""
        if not isinstance(event, bytes | bytearray | memoryview):
            raise TypeError(f"an event is bytes, not {type(event).__name__}")
        length = len(event)
        if length > MAX_EVENT_BYTES:
            raise ValueError(f"an event is at most {MAX_EVENT_BYTES} bytes, not {length}")
        with self._lock:
            self._check_usable()
            if id_evt != self._last_id + 1 or isinstance(id_evt, bool) or not isinstance(id_evt, int):
                raise ValueError(f"{self._path}: IDEvt {id_evt!r} appended after {self._last_id}")
            digest = sha256(self._last_hash + event).digest()
            head = _HEAD.pack(MAGIC, VERSION, 0, 0, length, id_evt, digest)
            head_crc = crc32(head)
            head_crc_bytes = _U32.pack(head_crc)
            record_crc = crc32(event, crc32(head_crc_bytes, head_crc))
            pending = self._pending
            pending += head
            pending += head_crc_bytes
            pending += event
            pending += _U32.pack(record_crc)
            self._offsets.append(self._end)
            self._end += OVERHEAD + length
            self._last_id = id_evt
            self._last_hash = digest
            became_dirty = not self._dirty
            self._dirty = True
            if len(pending) >= FLUSH_THRESHOLD:
                self._write_pending()
        if became_dirty and self._on_dirty is not None:
            self._on_dirty(self)
        return digest

    def sync(self) -> None:
        """Write what was appended and fsync it; a no-op when nothing was appended since the last
        sync. When it returns, every record appended before the call is durable."""
        with self._sync_lock:
            with self._lock:
                if self._failed is not None:
                    self._check_usable()
                if not self._dirty:
                    return
                self._check_usable()
                self._dirty = False
                target = self._last_id
                self._write_pending()
            try:
                os.fsync(self._fd)
            except BaseException as exc:
                with self._lock:
                    self._failed = exc
                if isinstance(exc, OSError):
                    raise JournalFailed(f"{self._path}: fsync failed: {exc}") from exc
                raise
            with self._lock:
                self._synced_id = target

    def _write_pending(self) -> None:
        """Hand the pending records to the OS (no fsync). Holds ``_lock``."""
        data = self._pending
        if not data:
            return
        self._pending = bytearray()
        try:
            write_all(self._fd, data)
        except BaseException as exc:
            self._failed = exc
            if isinstance(exc, OSError):
                raise JournalFailed(f"{self._path}: write failed: {exc}") from exc
            raise
        self._written += len(data)

    # -- reading ---------------------------------------------------------------------------

    def get(self, id_evt: int) -> JournalRecord | None:
        """The record of ``id_evt`` (synced or not), or None when it is not in the journal."""
        with self._lock:
            self._check_usable()
            if not 1 <= id_evt <= self._last_id:
                return None
            start = self._offsets[id_evt - 1]
            end = self._offsets[id_evt] if id_evt < self._last_id else self._end
            data = self._read(start, end)
        record, _ = _decode(memoryview(data), 0, id_evt, self._path, start)
        return record

    def records(self, start: int = 1) -> Iterator[JournalRecord]:
        """The records from IDEvt ``start`` to the last one appended when this is called."""
        with self._lock:
            self._check_usable()
            last = self._last_id
        return self._iter_records(max(start, 1), last)

    def _iter_records(self, first: int, last: int) -> Iterator[JournalRecord]:
        index = first - 1  # 0-based
        while index < last:
            with self._lock:
                self._check_usable()
                offsets = self._offsets
                low = offsets[index]
                stop = max(bisect_right(offsets, low + READ_CHUNK, index + 1, last) - 1, index + 1)
                high = offsets[stop] if stop < len(offsets) else self._end
                data = self._read(low, high)
            view = memoryview(data)
            position = 0
            for id_evt in range(index + 1, stop + 1):
                record, position = _decode(view, position, id_evt, self._path, low + position)
                yield record
            index = stop

    def _read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the journal, from the file and the pending buffer. Holds ``_lock``."""
        written = self._written
        parts = []
        if start < written:
            parts.append(_pread(self._fd, min(end, written) - start, start))
        if end > written:
            parts.append(bytes(self._pending[max(start, written) - written : end - written]))
        return b"".join(parts) if len(parts) > 1 else parts[0]

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Sync what was appended, then release the file. Closing twice is harmless."""
        try:
            if self._fd >= 0 and self._failed is None:
                self.sync()
        finally:
            with self._sync_lock, self._lock:
                if self._fd >= 0:
                    os.close(self._fd)  # also releases the lock
                    self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Journal {self._path} last_id_evt={self._last_id} synced_id_evt={self._synced_id}>"

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise JournalFailed(f"{self._path}: an earlier write or fsync failed; reopen the journal")
        if self._fd < 0:
            raise ValueError(f"{self._path}: the journal is closed")


class JournalSet:
    """All coffres under a root: <root>/<IDOper>/<IDCoffre>/journal.log; IDOper is 4 digits, IDCoffre an int"""

    def __init__(self, root: Path):
        self._root = Path(root)
        self._journals: dict[tuple[str, int], Journal] = {}
        self._dirty: dict[Journal, None] = {}  # insertion-ordered set
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._closed = False

    @property
    def root(self) -> Path:
        return self._root

    def directory(self, id_oper: str, id_coffre: int) -> Path:
        """Where the journal of a coffre lives."""
        id_oper, id_coffre = _coffre_key(id_oper, id_coffre)
        return self._root / id_oper / str(id_coffre)

    def journal(self, id_oper: str, id_coffre: int) -> Journal:
        """The coffre's journal, opened (and created if absent) on first use, then cached."""
        if type(id_oper) is str and type(id_coffre) is int:  # the cache first: only valid keys are in it
            journal = self._journals.get((id_oper, id_coffre))
            if journal is not None:
                return journal
        key = _coffre_key(id_oper, id_coffre)
        with self._lock:
            if self._closed:
                raise ValueError(f"the journal set under {self._root} is closed")
            journal = self._journals.get(key)
            if journal is None:
                journal = Journal.open(self._root / key[0] / str(key[1]))
                journal._on_dirty = self._mark_dirty
                self._journals[key] = journal
            return journal

    def _mark_dirty(self, journal: Journal) -> None:
        with self._lock:
            self._dirty[journal] = None

    def sync(self) -> None:
        """Sync every journal appended to since the last call (group commit across coffres).
        When it returns, every record appended before the call is durable. Errors are raised
        after every dirty journal was tried (the first one)."""
        with self._sync_lock:
            with self._lock:
                dirty = list(self._dirty)
                self._dirty.clear()
            first_error: BaseException | None = None
            for journal in dirty:
                try:
                    journal.sync()
                except Exception as exc:
                    first_error = first_error or exc
            if first_error is not None:
                raise first_error

    def coffres(self) -> list[tuple[str, int]]:
        """Every coffre with a journal on disk (opened or not), sorted."""
        with self._lock:
            found = set(self._journals)
        try:
            operators = list(os.scandir(self._root))
        except FileNotFoundError:
            operators = []
        for operator in operators:
            if not (_OPER.fullmatch(operator.name) and operator.is_dir()):
                continue
            for coffre in os.scandir(operator.path):
                if _COFFRE.fullmatch(coffre.name) and os.path.isfile(os.path.join(coffre.path, JOURNAL_NAME)):
                    found.add((operator.name, int(coffre.name)))
        return sorted(found)

    def close(self) -> None:
        """Sync and close every open journal."""
        with self._lock:
            self._closed = True
            journals = list(self._journals.values())
            self._journals.clear()
            self._dirty.clear()
        first_error: BaseException | None = None
        for journal in journals:
            try:
                journal.close()
            except Exception as exc:
                first_error = first_error or exc
        if first_error is not None:
            raise first_error

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# -- the format --------------------------------------------------------------------------------


def _scan(fd: int, size: int, path: Path) -> tuple[array, int, bytes, int]:
    """Read and verify every record from the start of the file.

    Returns (offsets, last IDEvt, last chain hash, offset of the first byte that does not begin a
    complete valid record, ``size`` when the file is clean). A complete record whose checksums
    hold but whose IDEvt or chain hash is wrong raises JournalCorrupted right away.
    """
    offsets = array("Q")
    previous = GENESIS
    expected = 1
    position = 0
    buffer = b""
    view = memoryview(buffer)
    base = 0  # file offset of buffer[0]
    unpack = _HEADER.unpack_from
    unpack_u32 = _U32.unpack_from
    append = offsets.append
    while position < size:
        relative = position - base
        if relative + HEADER_SIZE > len(buffer):
            buffer = _pread(fd, min(max(READ_CHUNK, HEADER_SIZE), size - position), position)
            view = memoryview(buffer)
            base, relative = position, 0
            if len(buffer) < HEADER_SIZE:
                break  # an incomplete header
        magic, version, flags, reserved, length, id_evt, claimed, head_crc = unpack(buffer, relative)
        if (
            magic != MAGIC
            or version != VERSION
            or flags
            or reserved
            or crc32(view[relative : relative + _HEAD_SIZE]) != head_crc
        ):
            break  # a bad header: its length cannot be trusted
        total = OVERHEAD + length
        if position + total > size:
            break  # an incomplete record
        if relative + total > len(buffer):
            buffer = _pread(fd, min(max(READ_CHUNK, total), size - position), position)
            view = memoryview(buffer)
            base, relative = position, 0
        end = relative + total - TRAILER_SIZE
        if crc32(view[relative:end]) != unpack_u32(buffer, end)[0]:
            break  # a bad record checksum
        if id_evt != expected:
            raise JournalCorrupted(
                f"{path}: IDEvt {id_evt} at offset {position} where IDEvt {expected} was expected",
                path=path,
                offset=position,
            )
        digest = sha256(previous + view[relative + HEADER_SIZE : end]).digest()
        if digest != claimed:
            raise JournalCorrupted(
                f"{path}: the chain hash of IDEvt {id_evt} at offset {position} does not recompute",
                path=path,
                offset=position,
            )
        append(position)
        previous = digest
        expected += 1
        position += total
    return offsets, expected - 1, previous, position


def _valid_record_at(fd: int, position: int, size: int) -> bool:
    """Whether a complete record with a good header CRC and a good record CRC starts at ``position``."""
    if position + OVERHEAD > size:
        return False
    header = _pread(fd, HEADER_SIZE, position)
    magic, version, flags, reserved, length, _, _, head_crc = _HEADER.unpack(header)
    if magic != MAGIC or version != VERSION or flags or reserved or crc32(header[:_HEAD_SIZE]) != head_crc:
        return False
    total = OVERHEAD + length
    if position + total > size:
        return False
    record = _pread(fd, total, position)
    return crc32(record[:-TRAILER_SIZE]) == _U32.unpack_from(record, total - TRAILER_SIZE)[0]


def _find_valid_record(fd: int, start: int, size: int) -> int | None:
    """The offset of the first valid record starting at or after ``start``, or None."""
    position = start
    while position < size:
        chunk = _pread(fd, min(READ_CHUNK, size - position), position)
        hit = chunk.find(MAGIC)
        while hit != -1:
            if _valid_record_at(fd, position + hit, size):
                return position + hit
            hit = chunk.find(MAGIC, hit + 1)
        if position + len(chunk) >= size:
            break
        position += len(chunk) - (len(MAGIC) - 1)  # a magic across the chunk boundary is found next time
    return None


def _decode(
    view: memoryview, position: int, id_evt: int, path: Path, offset: int
) -> tuple[JournalRecord, int]:
    """The record of ``id_evt`` at ``view[position:]`` (file offset ``offset``), checked again, and
    the position after it. The file was verified at open: a failure here means it changed since."""
    try:
        magic, version, flags, reserved, length, found, claimed, head_crc = _HEADER.unpack_from(
            view, position
        )
        end = position + HEADER_SIZE + length
        (record_crc,) = _U32.unpack_from(view, end)
    except struct.error:
        raise JournalCorrupted(
            f"{path}: IDEvt {id_evt} at offset {offset} is cut short", path=path, offset=offset
        ) from None
    if (
        magic != MAGIC
        or version != VERSION
        or flags
        or reserved
        or found != id_evt
        or crc32(view[position : position + _HEAD_SIZE]) != head_crc
        or crc32(view[position:end]) != record_crc
    ):
        raise JournalCorrupted(
            f"{path}: IDEvt {id_evt} at offset {offset} changed on disk since the journal was opened",
            path=path,
            offset=offset,
        )
    return JournalRecord(id_evt, claimed, bytes(view[position + HEADER_SIZE : end])), end + TRAILER_SIZE


# -- files -------------------------------------------------------------------------------------


def _pread(fd: int, count: int, offset: int) -> bytes:
    data = os.pread(fd, count, offset)
    if len(data) == count:
        return data
    parts = [data]
    got = len(data)
    while got < count:
        more = os.pread(fd, count - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directories(directory: Path) -> None:
    """mkdir -p, fsyncing the parent of every directory it creates."""
    missing = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        _fsync_directory(path.parent)


def _coffre_key(id_oper: str, id_coffre: int) -> tuple[str, int]:
    if not (isinstance(id_oper, str) and _OPER.fullmatch(id_oper)):
        raise ValueError(f"IDOper is 4 digits, not {id_oper!r}")
    if isinstance(id_coffre, bool) or not isinstance(id_coffre, int) or not 0 <= id_coffre <= MAX_ID:
        raise ValueError(f"IDCoffre is an integer from 0 to {MAX_ID}, not {id_coffre!r}")
    return id_oper, id_coffre
