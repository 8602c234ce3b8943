"""The vault's durable per-coffre journal: append-only segment files of recorded events.

One directory per coffre, ``<root>/<IDOper>/<IDCoffre>/``, holding the coffre's records in
*segments*: ``journal.log`` (IDEvt 1 onwards, no header: the single file of earlier versions)
and ``journal-<first IDEvt, 20 digits>.log`` (a 52-byte header naming its first IDEvt and the
chain hash before it). Each record carries its chain hash (``SHA-256(previous ‖ canonical
bytes)``, see :mod:`coffre.domain.chain`). The byte format, and how a reader tells a torn tail
from corruption, are in ``docs/journal-format.md``; this module is one implementation of it.

Why segments: the vault seals its records into the archive, then has no use for them. The sealer
calls :meth:`Journal.cut` on the journal after each lot (the next sync starts a new segment) and
then :meth:`Journal.release` for what the archive holds (whole segments are deleted), so a journal holds
the unsealed window, and opening it reads that window only, whatever the coffre's history.
:meth:`Journal.rebase` starts an empty journal after a given IDEvt and chain hash (the archive's
newest lot), when the journal has nothing the archive does not (a new volume, a take-over).

Durability: :meth:`Journal.append` only buffers; :meth:`Journal.sync` writes and fsyncs, so an
event is "recorded" (invariant 4 of the product contract) once a ``sync`` that started after its
``append`` has returned. Several appends then one sync is the group commit;
:meth:`JournalSet.sync` does it across coffres. A segment is complete and durable before the next
one is created (the roll happens inside ``sync``), so only the last segment can have a torn tail.

Threads: one thread may append (the event loop) while another runs ``sync`` (for instance
through ``asyncio.to_thread``): appends go on while the fsync runs and are picked up by the
next sync. Reading (:meth:`Journal.get`, :meth:`Journal.records`, ``synced_id_evt``) is safe from
any thread while the appending thread goes on: each read takes the journal's lock for its
in-memory state and reads the file with ``pread`` (no shared file position); a read after
:meth:`Journal.close` fails, it never reads another file. The vault's sealer thread reads this
way (and cuts and releases). Appending stays with one thread.
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

from .files import fsync_directory, write_all, write_new

JOURNAL_NAME = "journal.log"
"""The first segment, from IDEvt 1, without a header (the whole journal of earlier versions)."""
LOCK_NAME = "journal.lock"
"""Held (flock) by the process that has the journal open."""
SEGMENT_NAME = re.compile(r"journal-(?P<first>[0-9]{20})\.log")
MAGIC = b"CFJR"
VERSION = 1
HEADER_SIZE = 56
"""magic 4, version 1, flags 1, reserved 2, payload length 4, IDEvt 8, chain hash 32, header CRC 4."""
TRAILER_SIZE = 4
"""The record CRC-32, over the header and the payload."""
OVERHEAD = HEADER_SIZE + TRAILER_SIZE
MAX_EVENT_BYTES = 0xFFFF_FFFF
"""The payload length is a u32."""
SEGMENT_MAGIC = b"CFJS"
SEGMENT_VERSION = 1
SEGMENT_HEADER_SIZE = 52
"""magic 4, version 1, flags 1, reserved 2, first IDEvt 8, previous chain hash 32, header CRC 4."""

READ_CHUNK = 4 << 20
"""Scans and iteration read this many bytes at a time (a record larger than this is read whole)."""
FLUSH_THRESHOLD = 1 << 20
"""Appended bytes are handed to the OS (without fsync) once this many are buffered."""

_HEAD = struct.Struct(">4sBBHIQ32s")  # the header without its CRC: 52 bytes
_HEADER = struct.Struct(">4sBBHIQ32sI")  # the whole header: 56 bytes
_SEGMENT = struct.Struct(">4sBBHQ32sI")  # a segment's header: 52 bytes
_U32 = struct.Struct(">I")
_HEAD_SIZE = _HEAD.size
assert _HEADER.size == HEADER_SIZE
assert _SEGMENT.size == SEGMENT_HEADER_SIZE

_OPER = re.compile(r"[0-9]{4}")
_COFFRE = ID_COFFRE_RE


class JournalCorrupted(Exception):
    """A complete record fails its checksum or the chain, or IDEvt is not consecutive, or a bad
    record is followed by a valid one, or segments do not follow each other. Never repaired: an
    operator must look."""

    def __init__(self, message: str, *, path: Path | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class JournalLocked(Exception):
    """Another open journal (in this or another process) holds the coffre's lock."""


class JournalFailed(Exception):
    """A write or fsync of this journal failed: what reached the disk is unknown (after a failed
    fsync the kernel may have dropped the dirty pages). The journal refuses further use; close it
    and open it again, which re-reads the files and repairs a torn tail."""


@dataclass(frozen=True, slots=True)
class JournalRecord:
    id_evt: int
    chain_hash: bytes
    """32 bytes."""
    event: bytes
    """The event's canonical bytes, exactly as given to :meth:`Journal.append`."""


@dataclass(slots=True)
class _Segment:
    first_id: int
    previous: bytes
    """The chain hash of IDEvt ``first_id - 1`` (GENESIS for IDEvt 1)."""
    path: Path
    fd: int
    start: int
    """The offset of its first record (the header's size)."""
    end: int
    """The offset after its last record handed to the OS (the active segment: see Journal._end)."""


def segment_name(first_id: int) -> str:
    """The file name of the segment that starts at ``first_id``."""
    return JOURNAL_NAME if first_id == 1 else f"journal-{first_id:020d}.log"


def segment_header(first_id: int, previous: bytes) -> bytes:
    head = _SEGMENT.pack(SEGMENT_MAGIC, SEGMENT_VERSION, 0, 0, first_id, previous, 0)[:-4]
    return head + _U32.pack(crc32(head))


class Journal:
    """One coffre's append-only journal: the segments in <directory>"""

    def __init__(
        self,
        directory: Path,
        lock_fd: int,
        segments: list[_Segment],
        offsets: array,
        base: int,
        base_hash: bytes,
        last_id: int,
        last_hash: bytes,
        repaired: int,
    ) -> None:
        # Use Journal.open(directory).
        self._directory = directory
        self._lock_fd = lock_fd
        self._segments = segments  # oldest first; the last one is where appends go
        self._firsts = [s.first_id for s in segments]
        self._offsets = offsets  # offsets[i] = offset of IDEvt base + 1 + i in its segment
        self._base = base  # the IDEvt before the first record held (released or rebased)
        self._base_hash = base_hash  # its chain hash
        self._end = (
            segments[-1].end if segments else 0
        )  # active segment: offset after the last appended record
        self._pending = bytearray()  # appended records not yet handed to the OS
        self._last_id = last_id
        self._last_hash = last_hash
        self._synced_id = last_id
        self._dirty = False  # appended since the last sync started
        self._cut = False  # the next sync starts a new segment
        self._repaired = repaired
        self._failed: BaseException | None = None
        self._lock = threading.Lock()  # the in-memory state and the writes
        self._sync_lock = threading.Lock()  # one sync at a time, so a sync returns only once durable
        self._on_dirty: Callable[[Journal], None] | None = None  # set by JournalSet

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path) -> Journal:
        """Open (creating if absent) the journal in ``directory``, repair a torn tail, verify
        every record held and the chain across segments.

        Raises :class:`JournalCorrupted` when a segment is damaged anywhere but the last one's
        tail, and :class:`JournalLocked` when another open journal holds the coffre.
        """
        directory = Path(directory)
        _make_directories(directory)
        lock_fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        segments: list[_Segment] = []
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalLocked(f"{directory} is already open (by this or another process)") from None
            names = _segment_files(directory)
            if not names:  # a new journal: its first segment, from IDEvt 1
                _create_segment(directory, 1, GENESIS)
                names = [(1, directory / JOURNAL_NAME)]
            repaired = 0
            offsets = array("Q")
            base = names[0][0] - 1
            base_hash = last_hash = GENESIS
            last_id = base
            for index, (first_id, path) in enumerate(names):
                is_last = index == len(names) - 1
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        raise JournalCorrupted(f"{path} is not a regular file", path=path)
                    size = info.st_size
                    start, previous = _read_segment_header(fd, size, first_id, path)
                    if start < 0:  # a header cut by a crash while the segment was created
                        if not is_last:
                            raise JournalCorrupted(f"{path}: its header is cut short", path=path, offset=0)
                        os.close(fd)
                        os.unlink(path)
                        fsync_directory(directory)
                        repaired += size
                        continue
                    if index == 0:
                        base_hash = last_hash = previous
                    elif first_id != last_id + 1 or previous != last_hash:
                        raise JournalCorrupted(
                            f"{path} starts at IDEvt {first_id} after chain hash {previous.hex()[:16]}…, "
                            f"where the segment before it ends at IDEvt {last_id}, {last_hash.hex()[:16]}…",
                            path=path,
                        )
                    found, last_id, last_hash, good = _scan(fd, start, size, path, first_id, previous)
                    if good < size:
                        later = _find_valid_record(fd, good + 1, size)
                        if later is not None or not is_last:
                            raise JournalCorrupted(
                                f"{path}: the record at offset {good} (IDEvt {last_id + 1}) is damaged and "
                                + (
                                    f"followed by a valid record at offset {later}"
                                    if later is not None
                                    else "followed by another segment"
                                ),
                                path=path,
                                offset=good,
                            )
                        os.ftruncate(fd, good)
                        repaired += size - good
                    if is_last:
                        # Always: what a killed predecessor wrote may still be only in the page cache,
                        # and it is about to be treated as recorded.
                        os.fsync(fd)
                    offsets.extend(found)
                    segments.append(_Segment(first_id, previous, path, fd, start, good))
                except BaseException:
                    os.close(fd)
                    raise
        except BaseException:
            for segment in segments:
                os.close(segment.fd)
            os.close(lock_fd)
            raise
        if not segments:  # only a torn header was there: the journal is where the segment began
            first_id = names[-1][0]
            base = last_id = first_id - 1
        return cls(directory, lock_fd, segments, offsets, base, base_hash, last_id, last_hash, repaired)

    # -- state -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The coffre's journal directory."""
        return self._directory

    @property
    def last_id_evt(self) -> int:
        """The last appended IDEvt (synced or not); 0 when empty."""
        return self._last_id

    @property
    def last_hash(self) -> bytes:
        """The chain hash of the last appended record; GENESIS when empty."""
        return self._last_hash

    @property
    def first_id_evt(self) -> int:
        """The first IDEvt held (released or rebased ones are not): ``last_id_evt + 1`` when none is."""
        return self._base + 1

    @property
    def synced_id_evt(self) -> int:
        """The last IDEvt known to be durable (everything found at open is)."""
        return self._synced_id

    @property
    def repaired_bytes(self) -> int:
        """How many bytes of torn tail :meth:`open` removed (0 normally)."""
        return self._repaired

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def closed(self) -> bool:
        return self._lock_fd < 0

    def chain_hash_at(self, id_evt: int) -> bytes | None:
        """The chain hash of ``id_evt`` when the journal knows it (held, or the one before the
        first held), else None."""
        if id_evt == self._base:
            return self._base_hash
        record = self.get(id_evt)
        return None if record is None else record.chain_hash

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
                raise ValueError(f"{self._directory}: IDEvt {id_evt!r} appended after {self._last_id}")
            if not self._segments:  # rebased: the segment after the archive's last lot
                self._new_segment()
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
        sync. When it returns, every record appended before the call is durable. After a
        :meth:`cut`, the records appended from now on go to a new segment."""
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
                fd = self._segments[-1].fd
                if self._cut:
                    # the segment is made complete and durable before the next one exists: only the
                    # last segment can ever have a torn tail (a few ms of appends wait, once per lot)
                    self._cut = False
                    self._fsync(fd, holding_lock=True)
                    self._new_segment()
                    fd = -1
            if fd >= 0:
                self._fsync(fd)
            with self._lock:
                self._synced_id = target

    def cut(self) -> None:
        """Start a new segment at the next :meth:`sync` that writes something (the sealer calls it
        after each lot, so that segments end near lot boundaries and can be released whole)."""
        with self._lock:
            self._cut = True

    def release(self, sealed_id_evt: int) -> int:
        """Delete the segments whose every record is at most ``sealed_id_evt`` (durably in the
        archive), never the last one; returns how many were deleted. Reading a released IDEvt
        then finds nothing (:meth:`get` returns None)."""
        with self._sync_lock, self._lock:
            self._check_usable()
            segments = self._segments
            count = 0
            while len(segments) > count + 1 and segments[count + 1].first_id - 1 <= sealed_id_evt:
                count += 1
            if not count:
                return 0
            dropped = segments[:count]
            nxt = segments[count]
            del segments[:count]
            del self._firsts[:count]
            self._offsets = self._offsets[nxt.first_id - 1 - self._base :]
            self._base = nxt.first_id - 1
            self._base_hash = nxt.previous
            for segment in dropped:
                os.close(segment.fd)
                os.unlink(segment.path)
        fsync_directory(self._directory)
        return count

    def rebase(self, id_evt: int, chain_hash: bytes) -> None:
        """Forget every record and continue after ``id_evt`` with ``chain_hash``: the archive's
        newest lot ends there and this journal holds nothing past it (``last_id_evt <= id_evt``).
        The segments are deleted and an empty one starting after ``id_evt`` is created."""
        if len(chain_hash) != 32:
            raise ValueError("a chain hash is 32 bytes")
        with self._sync_lock, self._lock:
            self._check_usable()
            if self._last_id > id_evt:
                raise ValueError(
                    f"{self._directory}: rebased at IDEvt {id_evt} but holds up to {self._last_id}"
                )
            if self._pending:
                raise ValueError(f"{self._directory}: rebased with unsynced records")
            for segment in self._segments:
                os.close(segment.fd)
                os.unlink(segment.path)
            self._segments.clear()
            self._firsts.clear()
            self._offsets = array("Q")
            self._base = self._last_id = self._synced_id = id_evt
            self._base_hash = self._last_hash = chain_hash
            self._end = 0
            self._cut = False
            self._new_segment()  # empty, but it says where the journal continues, across restarts

    def _new_segment(self) -> None:
        """Create the segment that starts after the last record, durable before any record goes in.
        Holds ``_lock``."""
        first = self._last_id + 1
        previous = self._last_hash
        try:
            start = _create_segment(self._directory, first, previous)
            fd = os.open(self._directory / segment_name(first), os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except BaseException as exc:
            self._failed = exc
            if isinstance(exc, OSError):
                raise JournalFailed(f"{self._directory}: a new segment could not be created: {exc}") from exc
            raise
        if self._segments:
            self._segments[-1].end = self._end
        self._segments.append(
            _Segment(first, previous, self._directory / segment_name(first), fd, start, start)
        )
        self._firsts.append(first)
        self._end = start

    def _fsync(self, fd: int, *, holding_lock: bool = False) -> None:
        try:
            os.fsync(fd)
        except BaseException as exc:
            if holding_lock:
                self._failed = exc
            else:
                with self._lock:
                    self._failed = exc
            if isinstance(exc, OSError):
                raise JournalFailed(f"{self._directory}: fsync failed: {exc}") from exc
            raise

    def _write_pending(self) -> None:
        """Hand the pending records to the OS (no fsync). Holds ``_lock``."""
        data = self._pending
        if not data:
            return
        self._pending = bytearray()
        segment = self._segments[-1]
        try:
            write_all(segment.fd, data)
        except BaseException as exc:
            self._failed = exc
            if isinstance(exc, OSError):
                raise JournalFailed(f"{self._directory}: write failed: {exc}") from exc
            raise
        segment.end += len(data)

    # -- reading ---------------------------------------------------------------------------

    def get(self, id_evt: int) -> JournalRecord | None:
        """The record of ``id_evt`` (synced or not), or None when the journal does not hold it."""
        with self._lock:
            self._check_usable()
            if not self._base < id_evt <= self._last_id:
                return None
            index = bisect_right(self._firsts, id_evt) - 1
            segment = self._segments[index]
            start = self._offsets[id_evt - 1 - self._base]
            end = self._record_end(index, id_evt)
            data = self._read(index, start, end)
        record, _ = _decode(memoryview(data), 0, id_evt, segment.path, start)
        return record

    def _record_end(self, index: int, id_evt: int) -> int:
        """The offset after ``id_evt`` in segment ``index``. Holds ``_lock``."""
        last_of_segment = self._firsts[index + 1] - 1 if index + 1 < len(self._firsts) else self._last_id
        if id_evt < last_of_segment:
            return self._offsets[id_evt - self._base]
        return self._end if index == len(self._segments) - 1 else self._segments[index].end

    def records(self, start: int = 1) -> Iterator[JournalRecord]:
        """The records from IDEvt ``start`` to the last one appended when this is called. A
        ``start`` before the first record held raises ValueError (those were released)."""
        with self._lock:
            self._check_usable()
            last = self._last_id
            if start <= self._base and start <= last:
                raise ValueError(
                    f"{self._directory}: IDEvt {start} was released (the journal holds {self._base + 1}..{last})"
                )
        return self._iter_records(max(start, 1), last)

    def _iter_records(self, first: int, last: int) -> Iterator[JournalRecord]:
        id_evt = first
        while id_evt <= last:
            with self._lock:
                self._check_usable()
                if id_evt <= self._base:
                    raise ValueError(f"{self._directory}: IDEvt {id_evt} was released while being read")
                index = bisect_right(self._firsts, id_evt) - 1
                segment = self._segments[index]
                segment_last = min(
                    last, self._firsts[index + 1] - 1 if index + 1 < len(self._firsts) else last
                )
                base = self._base
                offsets = self._offsets
                low = offsets[id_evt - 1 - base]
                # the records of this segment that fit in one chunk (at least one)
                stop = max(
                    bisect_right(offsets, low + READ_CHUNK, id_evt - base, segment_last - base) + base,
                    id_evt,
                )
                high = self._record_end(index, stop)
                data = self._read(index, low, high)
            view = memoryview(data)
            position = 0
            for number in range(id_evt, stop + 1):
                record, position = _decode(view, position, number, segment.path, low + position)
                yield record
            id_evt = stop + 1

    def _read(self, index: int, start: int, end: int) -> bytes:
        """Bytes [start, end) of segment ``index``, from the file and (the last segment) the
        pending buffer. Holds ``_lock``."""
        segment = self._segments[index]
        if index < len(self._segments) - 1:
            return _pread(segment.fd, end - start, start)
        written = segment.end
        parts = []
        if start < written:
            parts.append(_pread(segment.fd, min(end, written) - start, start))
        if end > written:
            parts.append(bytes(self._pending[max(start, written) - written : end - written]))
        return b"".join(parts) if len(parts) > 1 else parts[0]

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Sync what was appended, then release the files. Closing twice is harmless."""
        try:
            if self._lock_fd >= 0 and self._failed is None:
                self.sync()
        finally:
            with self._sync_lock, self._lock:
                if self._lock_fd >= 0:
                    for segment in self._segments:
                        os.close(segment.fd)
                    os.close(self._lock_fd)  # also releases the lock
                    self._lock_fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Journal {self._directory} IDEvt {self._base + 1}..{self._last_id} "
            f"synced_id_evt={self._synced_id} segments={len(self._segments)}>"
        )

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise JournalFailed(f"{self._directory}: an earlier write or fsync failed; reopen the journal")
        if self._lock_fd < 0:
            raise ValueError(f"{self._directory}: the journal is closed")


class JournalSet:
    """All coffres under a root: <root>/<IDOper>/<IDCoffre>/ (the segments); IDOper is 4 digits, IDCoffre an int.

    ``on_open`` is called with each journal as it is opened, before anyone appends to it: the
    vault aligns it with the archive there (:meth:`Journal.rebase` when the archive is ahead)."""

    def __init__(self, root: Path, on_open: Callable[[str, int, Journal], None] | None = None):
        self._root = Path(root)
        self.on_open = on_open
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
                if self.on_open is not None:
                    try:
                        self.on_open(key[0], key[1], journal)
                    except BaseException:
                        journal.close()
                        raise
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
                if _COFFRE.fullmatch(coffre.name) and coffre.is_dir() and _has_segments(coffre.path):
                    found.add((operator.name, int(coffre.name)))
        return sorted(found)

    def opened(self) -> list[tuple[str, int]]:
        """The coffres whose journal is open."""
        with self._lock:
            return list(self._journals)

    def close_coffres(self, coffres: list[tuple[str, int]]) -> None:
        """Sync and close these coffres' journals (opened again on next use, aligned again)."""
        with self._lock:
            journals = [j for c in coffres if (j := self._journals.pop(c, None)) is not None]
            for journal in journals:
                self._dirty.pop(journal, None)
        for journal in journals:
            journal.close()

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


def _scan(
    fd: int, start: int, size: int, path: Path, first_id: int, previous: bytes
) -> tuple[array, int, bytes, int]:
    """Read and verify every record of a segment from ``start`` (after its header), expecting
    IDEvt ``first_id`` chained to ``previous`` first.

    Returns (offsets, last IDEvt, last chain hash, offset of the first byte that does not begin a
    complete valid record, ``size`` when the file is clean). A complete record whose checksums
    hold but whose IDEvt or chain hash is wrong raises JournalCorrupted right away.
    """
    offsets = array("Q")
    expected = first_id
    position = start
    buffer = b""
    view = memoryview(buffer)
    base = start  # file offset of buffer[0]
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


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    """(first IDEvt, path) of every segment in ``directory``, oldest first."""
    found = []
    for entry in os.scandir(directory):
        if entry.name == JOURNAL_NAME:
            found.append((1, Path(entry.path)))
        elif (match := SEGMENT_NAME.fullmatch(entry.name)) is not None:
            first = int(match["first"])
            if first < 2:
                raise JournalCorrupted(
                    f"{entry.path}: a segment cannot start at IDEvt {first}", path=Path(entry.path)
                )
            found.append((first, Path(entry.path)))
    found.sort()
    return found


def _read_segment_header(fd: int, size: int, first_id: int, path: Path) -> tuple[int, bytes]:
    """(offset of the first record, chain hash before it) of a segment; (-1, b"") when the header
    is cut short (a crash while the segment was created: nothing was ever recorded in it)."""
    if first_id == 1:
        return 0, GENESIS
    if size < SEGMENT_HEADER_SIZE:
        return -1, b""
    header = _pread(fd, SEGMENT_HEADER_SIZE, 0)
    magic, version, flags, reserved, first, previous, crc = _SEGMENT.unpack(header)
    if (
        magic != SEGMENT_MAGIC
        or version != SEGMENT_VERSION
        or flags
        or reserved
        or crc32(header[:-4]) != crc
        or first != first_id
    ):
        raise JournalCorrupted(
            f"{path}: its segment header is damaged or names another IDEvt", path=path, offset=0
        )
    return SEGMENT_HEADER_SIZE, previous


def _create_segment(directory: Path, first_id: int, previous: bytes) -> int:
    """Create the segment starting at ``first_id`` (its header written and fsynced, then the
    directory); returns the offset of its first record."""
    header = b"" if first_id == 1 else segment_header(first_id, previous)
    write_new(directory / segment_name(first_id), header, 0o644)
    fsync_directory(directory)
    return len(header)


def _has_segments(directory: str) -> bool:
    return any(
        entry.name == JOURNAL_NAME or SEGMENT_NAME.fullmatch(entry.name) for entry in os.scandir(directory)
    )


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
        fsync_directory(path.parent)


def _coffre_key(id_oper: str, id_coffre: int) -> tuple[str, int]:
    if not (isinstance(id_oper, str) and _OPER.fullmatch(id_oper)):
        raise ValueError(f"IDOper is 4 digits, not {id_oper!r}")
    if isinstance(id_coffre, bool) or not isinstance(id_coffre, int) or not 0 <= id_coffre <= MAX_ID:
        raise ValueError(f"IDCoffre is an integer from 0 to {MAX_ID}, not {id_coffre!r}")
    return id_oper, id_coffre
