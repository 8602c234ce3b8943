"""A read-only view of the vault's archive for the regulator API (docs/regulator-api.md).

Everything is read through an :class:`~coffre.adapters.storage.ArchiveStorage`; nothing is
written there. Inputs (IDOper, IDCoffre, dates, numbers) are parsed into numbers and dates
before any key is built from them, so no request can name a key outside the archive's layout
(``<IDOper>/<IDCoffre>/<YYYY>/<MM>/<DD>/<IDOper>-<IDCoffre>-<lot 10 digits>.xml``).

Keeping it cheap on a large archive:

* folders are listed one level at a time (a delimiter listing on S3, a directory scan on a
  local folder), so finding a coffre's newest lot or the lots of a date range touches only the
  years, months and days concerned;
* listings of days that are over (older than yesterday, UTC) never change again and are
  cached, like everything read from a lot (its digest, its header, its leaves): sealed lots
  are immutable. Every cache is bounded.

Inclusion proofs are computed only from lots that pass every check ``coffre verify`` makes
(:class:`coffre.domain.verify.CoffreWalk`: signatures against the trust store, links, the file
digests the checkpoints signed, IDEvt continuity and each event's identity, chain hashes, Merkle
roots and the coffre's tree), from lot 1 on, each with its checkpoint. The walk of a coffre is
kept and extended as new lots appear; it moves past a lot only when that lot holds. Consistency
proofs come from the same walk.

Beside each checkpoint, the archive may hold its evidence (docs/archive-format.md): RFC 3161
time-stamp tokens (``<checkpoint>.tsa-<name>.tsr``) and witnesses' cosignatures
(``<checkpoint>.witness-<name>.cosig``). They are served as stored; a TSA's or witness's name is
checked against ``[a-z0-9][a-z0-9.-]{0,62}`` before a key is built from it.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import logging
import re
import tarfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from io import BytesIO
from typing import IO, Any, Generic, TypeVar

from cryptography.hazmat.primitives import hashes, serialization
from lxml import etree

from coffre.adapters.storage import (
    ArchiveStorage,
    ObjectMissing,
    validate_key,
)
from coffre.domain.evidence import NAME_RE, cosignature_key, parse_evidence_name, timestamp_key
from coffre.domain.limits import ID_COFFRE_RE, MAX_ID, MAX_ID_DIGITS
from coffre.domain.lot import (
    Checkpoint,
    LotFormatError,
    checkpoint_key,
    format_time,
    parse_document,
    parse_time,
    read_checkpoint,
)
from coffre.domain.proofs import prove_consistency, prove_inclusion
from coffre.domain.signing import Signer, TrustStore, key_id, verify
from coffre.domain.verify import CoffreReport, CoffreWalk, Failure

log = logging.getLogger("coffre.api")

__all__ = [
    "BUNDLE_ROOT",
    "MANIFEST_NAME",
    "MANIFEST_TAG",
    "MAX_PAGE_SIZE",
    "ArchiveIndex",
    "ArchiveInvalid",
    "ArchiveQueryError",
    "CheckpointInfo",
    "CheckpointPage",
    "CoffreSummary",
    "EvidenceFile",
    "ExportInfo",
    "InvalidRequest",
    "LotInfo",
    "LotPage",
    "Manifest",
    "ManifestEntry",
    "NotFound",
    "StorageUnavailable",
    "StoredDocument",
    "build_manifest",
    "parse_coffre",
    "parse_day",
    "parse_evidence_label",
    "parse_number",
    "parse_oper",
    "read_manifest",
]

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100
MAX_LOT_NUMBER = 9_999_999_999  # ten digits in the file name
MANIFEST_NAME = "manifest.xml"
MANIFEST_TAG = "ManifesteExport"
BUNDLE_ROOT = "archive"
"""Where the archive's files sit in an export bundle: ``archive/<their key>``."""

# -- errors ----------------------------------------------------------------------------------------


class ArchiveQueryError(Exception):
    """A request the archive cannot answer; ``status`` and ``code`` are what the API returns."""

    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(ArchiveQueryError):
    status, code = 400, "bad_request"


class NotFound(ArchiveQueryError):
    status, code = 404, "not_found"


class StorageUnavailable(ArchiveQueryError):
    status, code = 503, "storage_unavailable"


class ArchiveInvalid(ArchiveQueryError):
    """The archive does not verify where a proof needs it: nothing is proven from it."""

    status, code = 500, "archive_invalid"


# -- inputs ----------------------------------------------------------------------------------------

_OPER = re.compile(r"[0-9]{4}")
_COFFRE = ID_COFFRE_RE
_NUMBER = re.compile(r"[1-9][0-9]{0,18}")
_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_YEAR = re.compile(r"(?!0000)[0-9]{4}")
"""A year folder of the archive: 0001 to 9999, the years a ``date`` holds."""


def parse_oper(text: str) -> str:
    """An IDOper: exactly 4 digits."""
    if not isinstance(text, str) or not _OPER.fullmatch(text):
        raise InvalidRequest(f"IDOper must be 4 digits, not {_shown(text)}")
    return text


def parse_coffre(text: str) -> int:
    """An IDCoffre: a decimal number without leading zeros."""
    if not isinstance(text, str) or not _COFFRE.fullmatch(text):
        raise InvalidRequest(
            f"IDCoffre must be a decimal number of at most {MAX_ID_DIGITS} digits without leading zeros, "
            f"not {_shown(text)}"
        )
    return int(text)


def parse_number(text: str, what: str, maximum: int = MAX_ID) -> int:
    """A positive decimal integer (no sign, no leading zero) at most ``maximum``."""
    if not isinstance(text, str) or not _NUMBER.fullmatch(text) or int(text) > maximum:
        raise InvalidRequest(f"{what} must be an integer from 1 to {maximum}, not {_shown(text)}")
    return int(text)


def parse_day(text: str, what: str = "date") -> date:
    """A calendar day written ``YYYY-MM-DD``."""
    found = _DAY.fullmatch(text) if isinstance(text, str) else None
    try:
        if found is None:
            raise ValueError
        return date(int(found[1]), int(found[2]), int(found[3]))
    except ValueError:
        raise InvalidRequest(f"{what} must be a day written YYYY-MM-DD, not {_shown(text)}") from None


EVIDENCE_KINDS = ("tsa", "witness")


def parse_evidence_label(text: str, what: str) -> str:
    """A TSA's or witness's name as the archive's file names hold it (``NAME_RE`` of
    :mod:`coffre.domain.evidence`: ``[a-z0-9][a-z0-9.-]{0,62}``), and no ``..`` (no key of the
    archive holds one)."""
    if not isinstance(text, str) or not NAME_RE.fullmatch(text) or ".." in text:
        raise InvalidRequest(
            f"{what} must match [a-z0-9][a-z0-9.-]{{0,62}} (without '..'), not {_shown(text)}"
        )
    return text


def _evidence_key(oper: str, coffre: int, number: int, kind: str, name: str) -> str:
    """Where the evidence file sits: beside the checkpoint of lot ``number``."""
    return (timestamp_key if kind == "tsa" else cosignature_key)(oper, coffre, number, name)


def _shifted(day: date, days: int, given: str, missing: str) -> date:
    """``day`` plus ``days`` (negative: minus): the default end of a range of which only ``given``
    was given. A 400 when that end would fall outside the calendar (years 1 to 9999)."""
    try:
        return day + timedelta(days=days)
    except OverflowError:
        beyond = "end after 9999-12-31" if days > 0 else "start before 0001-01-01"
        raise InvalidRequest(
            f"{given} {day} without {missing}: the default range of {abs(days) + 1} days would {beyond}; "
            f"give {missing} as well"
        ) from None


def _unknown_coffre(oper: str, coffre: int) -> NotFound:
    """The one answer for a coffre (or IDOper) with nothing in the archive, whatever was asked of it."""
    return NotFound(f"coffre {oper}/{coffre} is not in the archive: it has no sealed lot")


def _shown(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "...'"


# -- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoffreSummary:
    id_oper: str
    id_coffre: int
    lots: int
    """Lots are numbered 1, 2, 3, … without gaps: the number of the newest one."""
    last_lot: int
    last_sealed_day: date
    events: int | None
    """Events sealed (the newest checkpoint's tree size, else the newest lot's last IDEvt)."""
    last_checkpoint_at: datetime | None

    def to_dict(self) -> dict[str, object]:
        return {
            "id_oper": self.id_oper,
            "id_coffre": self.id_coffre,
            "lots": self.lots,
            "last_lot": self.last_lot,
            "last_sealed_day": self.last_sealed_day.isoformat(),
            "events": self.events,
            "last_checkpoint_at": format_time(self.last_checkpoint_at) if self.last_checkpoint_at else None,
        }


@dataclass(frozen=True, slots=True)
class LotInfo:
    id_oper: str
    id_coffre: int
    number: int
    key: str
    sealed_day: date
    sealed_at: datetime | None
    first_id_evt: int | None
    last_id_evt: int | None
    size: int
    sha256: str

    def to_dict(self) -> dict[str, object]:
        return {
            "lot": self.number,
            "path": self.key,
            "sealed_day": self.sealed_day.isoformat(),
            "sealed_at": format_time(self.sealed_at) if self.sealed_at else None,
            "first_id_evt": self.first_id_evt,
            "last_id_evt": self.last_id_evt,
            "size": self.size,
            "sha256": self.sha256,
        }


@dataclass(frozen=True, slots=True)
class LotPage:
    lots: list[LotInfo]
    next_page_token: str | None


@dataclass(frozen=True, slots=True)
class EvidenceFile:
    """A time-stamp token (``kind`` tsa) or a cosignature (``kind`` witness) beside a checkpoint."""

    kind: str
    name: str
    key: str


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    id_oper: str
    id_coffre: int
    number: int
    key: str
    size: int
    sha256: str
    checkpoint: Checkpoint | None
    """As read from the stored file (its signature not checked); None when it cannot be read."""
    evidence: tuple[EvidenceFile, ...]

    def to_dict(self) -> dict[str, object]:
        base = f"/v1/coffres/{self.id_oper}/{self.id_coffre}/checkpoints/{self.number}"
        read = self.checkpoint

        def files(kind: str, plural: str, field: str) -> list[dict[str, str]]:
            return [
                {field: e.name, "path": e.key, "url": f"{base}/{plural}/{e.name}"}
                for e in self.evidence
                if e.kind == kind
            ]

        return {
            "lot": self.number,
            "path": self.key,
            "url": base,
            "size": self.size,
            "sha256": self.sha256,
            "tree_size": read.tree_size if read else None,
            "root": read.tree_root.hex() if read else None,
            "date": format_time(read.at) if read else None,
            "timestamps": files("tsa", "timestamps", "tsa"),
            "cosignatures": files("witness", "cosignatures", "witness"),
        }


@dataclass(frozen=True, slots=True)
class CheckpointPage:
    checkpoints: list[CheckpointInfo]
    next_page_token: str | None


@dataclass(frozen=True, slots=True)
class _CheckpointFiles:
    """What a listing of the checkpoints folder found for one lot number."""

    checkpoint: bool = False
    evidence: tuple[EvidenceFile, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A lot or checkpoint, exactly as stored."""

    key: str
    data: bytes
    sha256: bytes

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ExportInfo:
    day: date
    id_oper: str | None
    generated_at: datetime
    files: int
    """Lots, checkpoints and their evidence in the bundle (the manifest not counted)."""


# -- small bounded caches ----------------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A thread-safe LRU bounded by total weight (entries by default)."""

    def __init__(self, capacity: int, weight: Callable[[V], int] = lambda _: 1) -> None:
        self.capacity = capacity
        self._weight = weight
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V) -> None:
        weight = self._weight(value)
        if weight > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._items[key] = (value, weight)
            self._total += weight
            while self._total > self.capacity:
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped

    def pop(self, key: K) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]


# -- listing ---------------------------------------------------------------------------------------


# -- the index -----------------------------------------------------------------------------------------


@dataclass
class _VerifiedCoffre:
    """One coffre's walk, from lot 1 to the last lot that verified, and the day that lot is filed
    under (where listing resumes)."""

    walk: CoffreWalk
    last_day: date | None = None

    @property
    def events(self) -> int:
        return len(self.walk.report.leaves)


class _CoffreLock:
    """A lock that can be weakly referenced: the index's per-coffre locks live only while a
    request holds or waits for them, so a scan of many coffres leaves none behind."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *_: object) -> None:
        self._lock.release()


@dataclass(frozen=True, slots=True)
class _LotMeta:
    size: int
    sha256: bytes
    first_id_evt: int | None
    last_id_evt: int | None
    sealed_at: datetime | None


_HEADER_FIELD = {
    name: re.compile(rb"<" + name + rb">\s*([^<]{1,64}?)\s*</" + name + rb">")
    for name in (b"PremierIDEvt", b"DernierIDEvt", b"DateScellement")
}


def _peek_header(document: bytes) -> tuple[int | None, int | None, datetime | None]:
    """First/last IDEvt and seal time from a lot's header as stored (informative, not verified)."""
    end = document.find(b"<Evenements")
    head = document[: end if end >= 0 else 4096]
    values: list[Any] = []
    for name, pattern in _HEADER_FIELD.items():
        found = pattern.search(head)
        text = found[1].decode("ascii", "replace") if found else ""
        if name == b"DateScellement":
            try:
                values.append(parse_time(text))
            except LotFormatError:
                values.append(None)
        else:
            values.append(int(text) if re.fullmatch(r"[1-9][0-9]{0,18}", text) else None)
    return values[0], values[1], values[2]


class ArchiveIndex:
    """Read-only queries on an archive. Methods block: call them from a thread in async code.

    ``trust`` verifies lots before an inclusion proof; ``signer`` signs export manifests. At
    most ``max_cached_events`` events of verified coffres are kept in memory (64 bytes each: a
    leaf and a chain hash); a coffre larger than that is verified again for each proof.
    """

    def __init__(
        self,
        storage: ArchiveStorage,
        trust: TrustStore,
        signer: Signer,
        *,
        max_range_days: int = 366,
        workers: int = 8,
        max_cached_events: int = 4_000_000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.storage = storage
        self.trust = trust
        self.signer = signer
        self.max_range_days = max_range_days
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="coffre-api-read")
        self._listings: _Lru[tuple[str, str], tuple[str, ...]] = _Lru(500_000, lambda v: len(v) + 1)
        self._meta: _Lru[str, _LotMeta] = _Lru(200_000)
        self._checkpoints: _Lru[str, tuple[Checkpoint | None, bytes]] = _Lru(10_000)
        self._lot_keys: _Lru[tuple[str, int, int], str] = _Lru(200_000)
        self._verified: _Lru[tuple[str, int], _VerifiedCoffre] = _Lru(
            max_cached_events, lambda state: state.events + 1
        )
        self._coffre_locks: weakref.WeakValueDictionary[tuple[str, int], _CoffreLock] = (
            weakref.WeakValueDictionary()
        )
        self._locks_lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- storage access, errors mapped -------------------------------------------------------------

    def _storage(self, what: str, call: Callable[[], V]) -> V:
        try:
            return call()
        except ObjectMissing:
            raise
        except ArchiveQueryError:
            raise
        except Exception as exc:
            log.warning("archive storage failed while %s", what, exc_info=True)
            raise StorageUnavailable(
                f"the archive storage failed while {what}: {type(exc).__name__}: {str(exc)[:200]}"
            ) from None

    def _read(self, key: str) -> bytes:
        validate_key(key)
        return self._storage(f"reading {key}", lambda: self.storage.read(key))

    def _today(self) -> date:
        return self.clock().astimezone(UTC).date()

    def _final(self, last_day: date) -> bool:
        """Whether nothing can be sealed any more on or before ``last_day`` (a day of margin for
        clocks slightly off between replicas)."""
        return last_day < self._today() - timedelta(days=1)

    def _children(self, prefix: str, final: bool = False, *, files: bool = False) -> tuple[str, ...]:
        cached = self._listings.get((prefix, "f" if files else "d")) if final else None
        if cached is not None:
            return cached
        folders, names = self._storage(f"listing {prefix or '/'}", lambda: self.storage.children(prefix))
        result = tuple(names if files else folders)
        if final:
            self._listings.put((prefix, "f" if files else "d"), result)
        return result

    def _keys(self, prefix: str, final: bool) -> tuple[str, ...]:
        cached = self._listings.get((prefix, "k")) if final else None
        if cached is not None:
            return cached
        result = tuple(self._storage(f"listing {prefix}", lambda: self.storage.list(prefix)))
        if final:
            self._listings.put((prefix, "k"), result)
        return result

    # -- the layout ----------------------------------------------------------------------------------

    def _opers(self) -> list[str]:
        return [name for name in self._children("") if _OPER.fullmatch(name)]

    def _coffres(self, oper: str) -> list[int]:
        return sorted(int(name) for name in self._children(f"{oper}/") if _COFFRE.fullmatch(name))

    def _days(
        self,
        oper: str,
        coffre: int,
        lo: date | None = None,
        hi: date | None = None,
        *,
        newest_first: bool = False,
    ) -> Iterator[date]:
        """The day folders of a coffre between ``lo`` and ``hi`` (inclusive), listed lazily."""
        base = f"{oper}/{coffre}/"
        years = sorted((int(n) for n in self._children(base) if _YEAR.fullmatch(n)), reverse=newest_first)
        for year in years:
            if (lo and year < lo.year) or (hi and year > hi.year):
                continue
            months = sorted(
                (
                    int(n)
                    for n in self._children(f"{base}{year:04d}/", self._final(date(year, 12, 31)))
                    if re.fullmatch(r"0[1-9]|1[0-2]", n)
                ),
                reverse=newest_first,
            )
            for month in months:
                last = date(year, month, calendar.monthrange(year, month)[1])
                if (lo and last < lo) or (hi and date(year, month, 1) > hi):
                    continue
                days = []
                for n in self._children(f"{base}{year:04d}/{month:02d}/", self._final(last)):
                    if re.fullmatch(r"[0-9]{2}", n) and 1 <= int(n) <= last.day:
                        day = date(year, month, int(n))
                        if (lo is None or day >= lo) and (hi is None or day <= hi):
                            days.append(day)
                yield from sorted(days, reverse=newest_first)

    def _lot_pattern(self, oper: str, coffre: int) -> re.Pattern[str]:
        return re.compile(
            rf"{oper}/{coffre}/([0-9]{{4}})/([0-9]{{2}})/([0-9]{{2}})/{oper}-{coffre}-([0-9]{{10}})\.xml"
        )

    def _parse_keys(
        self, oper: str, coffre: int, keys: Sequence[str], lo: date, hi: date
    ) -> list[tuple[int, str, date]]:
        pattern = self._lot_pattern(oper, coffre)
        found = []
        for key in keys:
            match = pattern.fullmatch(key)
            if match is None:
                continue
            try:
                day = date(int(match[1]), int(match[2]), int(match[3]))
            except ValueError:
                continue
            number = int(match[4])
            if lo <= day <= hi and number >= 1:
                found.append((number, key, day))
        return found

    def _day_lots(self, oper: str, coffre: int, day: date) -> list[tuple[int, str, date]]:
        """(number, key, day) of the lots filed under one day folder, by number."""
        prefix = f"{oper}/{coffre}/{day:%Y/%m/%d}/"
        keys = [prefix + name for name in self._children(prefix, self._final(day), files=True)]
        return sorted(self._parse_keys(oper, coffre, keys, day, day))

    def _lots_between(self, oper: str, coffre: int, lo: date, hi: date) -> list[tuple[int, str, date]]:
        """Every lot filed between ``lo`` and ``hi``: a whole month covered is listed at once,
        otherwise only the day folders of the range that exist."""
        base = f"{oper}/{coffre}/"
        found: list[tuple[int, str, date]] = []
        years = [int(n) for n in self._children(base) if _YEAR.fullmatch(n)]
        for year in sorted(y for y in years if lo.year <= y <= hi.year):
            months = [
                int(n)
                for n in self._children(f"{base}{year:04d}/", self._final(date(year, 12, 31)))
                if re.fullmatch(r"0[1-9]|1[0-2]", n)
            ]
            for month in sorted(months):
                first = date(year, month, 1)
                last = date(year, month, calendar.monthrange(year, month)[1])
                if last < lo or first > hi:
                    continue
                prefix = f"{base}{year:04d}/{month:02d}/"
                if lo <= first and last <= hi:
                    found += self._parse_keys(oper, coffre, self._keys(prefix, self._final(last)), lo, hi)
                else:
                    for day in self._days(oper, coffre, max(lo, first), min(hi, last)):
                        found += self._day_lots(oper, coffre, day)
        return sorted(found)

    def _newest_lot(self, oper: str, coffre: int) -> tuple[int, str, date] | None:
        for day in self._days(oper, coffre, newest_first=True):
            lots = self._day_lots(oper, coffre, day)
            if lots:
                return lots[-1]
        return None

    def _locate(self, oper: str, coffre: int, number: int) -> str:
        """The key of lot ``number``: a binary search over the coffre's days (lots are numbered in
        the order they are sealed), then a full scan if that misses."""
        cached = self._lot_keys.get((oper, coffre, number))
        if cached is not None:
            return cached
        newest = self._newest_lot(oper, coffre)
        if newest is None:
            raise _unknown_coffre(oper, coffre)
        missing = NotFound(f"coffre {oper}/{coffre} has no lot {number}")
        if number > newest[0]:
            raise missing
        days = list(self._days(oper, coffre))
        low, high = 0, len(days) - 1
        while low <= high:
            middle = (low + high) // 2
            lots = self._day_lots(oper, coffre, days[middle])
            if not lots:
                del days[middle]
                high -= 1
                continue
            if number < lots[0][0]:
                high = middle - 1
            elif number > lots[-1][0]:
                low = middle + 1
            else:
                for found, key, _ in lots:
                    if found == number:
                        self._lot_keys.put((oper, coffre, number), key)
                        return key
                break
        for day in days:  # not where the order says: an archive whose days are out of order
            for found, key, _ in self._day_lots(oper, coffre, day):
                if found == number:
                    self._lot_keys.put((oper, coffre, number), key)
                    return key
        raise missing

    # -- documents -------------------------------------------------------------------------------------

    def _lot_meta(self, key: str) -> _LotMeta:
        cached = self._meta.get(key)
        if cached is not None:
            return cached
        document = self._read(key)
        first, last, sealed_at = _peek_header(document)
        meta = _LotMeta(len(document), hashlib.sha256(document).digest(), first, last, sealed_at)
        self._meta.put(key, meta)
        return meta

    def _checkpoint(self, key: str) -> tuple[Checkpoint | None, bytes]:
        """A checkpoint as stored, and as read (unverified; None when it cannot be read)."""
        cached = self._checkpoints.get(key)
        if cached is not None:
            return cached
        document = self._read(key)
        try:
            checkpoint = read_checkpoint(parse_document(document))
        except LotFormatError:
            checkpoint = None
        self._checkpoints.put(key, (checkpoint, document))
        return checkpoint, document

    def _info(self, oper: str, coffre: int, number: int, key: str, day: date) -> LotInfo:
        try:
            meta = self._lot_meta(key)
        except ObjectMissing:
            raise NotFound(f"lot {number} of coffre {oper}/{coffre} vanished while listed") from None
        return LotInfo(
            oper,
            coffre,
            number,
            key,
            day,
            meta.sealed_at,
            meta.first_id_evt,
            meta.last_id_evt,
            meta.size,
            meta.sha256.hex(),
        )

    # -- queries -------------------------------------------------------------------------------------

    def coffres(self) -> list[CoffreSummary]:
        """Every coffre that has at least one lot."""
        pairs = [(oper, coffre) for oper in self._opers() for coffre in self._coffres(oper)]
        summaries = list(self._pool.map(lambda pair: self._summary(*pair), pairs))
        return [s for s in summaries if s is not None]

    def _summary(self, oper: str, coffre: int) -> CoffreSummary | None:
        newest = self._newest_lot(oper, coffre)
        if newest is None:
            return None
        number, key, day = newest
        events: int | None = None
        at: datetime | None = None
        for candidate in (number, number - 1):
            if candidate < 1:
                break
            try:
                checkpoint, _ = self._checkpoint(checkpoint_key(oper, coffre, candidate))
            except ObjectMissing:
                continue
            if checkpoint is not None:
                at = checkpoint.at
                if candidate == number:
                    events = checkpoint.tree_size
                break
        if events is None:
            try:
                events = self._lot_meta(key).last_id_evt
            except ObjectMissing:
                events = None
        return CoffreSummary(oper, coffre, number, number, day, events, at)

    def lots(
        self,
        oper: str,
        coffre: int,
        first_day: date | None,
        last_day: date | None,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str | None = None,
    ) -> LotPage:
        """The lots of a coffre filed from ``first_day`` to ``last_day`` (seal days, UTC,
        inclusive), by lot number, one page at a time. Without days: the last
        ``max_range_days`` days up to today; with one day only, ``max_range_days`` days from or
        up to it. A coffre with no lot at all is a :class:`NotFound`."""
        if last_day is None:
            last_day = (
                self._today()
                if first_day is None
                else _shifted(first_day, self.max_range_days - 1, "'from'", "'to'")
            )
        if first_day is None:
            first_day = _shifted(last_day, 1 - self.max_range_days, "'to'", "'from'")
        if first_day > last_day:
            raise InvalidRequest(f"'from' ({first_day}) is after 'to' ({last_day})")
        span = (last_day - first_day).days + 1
        if span > self.max_range_days:
            raise InvalidRequest(
                f"the range {first_day}..{last_day} covers {span} days; at most {self.max_range_days} "
                "days per request: ask for several ranges"
            )
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"page_size must be from 1 to {MAX_PAGE_SIZE}, not {page_size}")
        after = _read_token(page_token, first_day, last_day) if page_token else 0
        between = self._lots_between(oper, coffre, first_day, last_day)
        if not between and self._newest_lot(oper, coffre) is None:
            raise _unknown_coffre(oper, coffre)
        found = [lot for lot in between if lot[0] > after]
        page = found[:page_size]
        infos = list(self._pool.map(lambda lot: self._info(oper, coffre, *lot), page))
        token = _make_token(page[-1][0], first_day, last_day) if len(found) > page_size else None
        return LotPage(infos, token)

    def lot(self, oper: str, coffre: int, number: int) -> StoredDocument:
        """Lot ``number`` of the coffre, byte for byte."""
        if number > MAX_LOT_NUMBER:
            raise NotFound(f"coffre {oper}/{coffre} has no lot {number}")
        key = self._locate(oper, coffre, number)
        try:
            document = self._read(key)
        except ObjectMissing:
            raise NotFound(f"coffre {oper}/{coffre} has no lot {number}") from None
        sha = hashlib.sha256(document).digest()
        if self._meta.get(key) is None:
            first, last, sealed_at = _peek_header(document)
            self._meta.put(key, _LotMeta(len(document), sha, first, last, sealed_at))
        return StoredDocument(key, document, sha)

    def checkpoint(self, oper: str, coffre: int) -> StoredDocument:
        """The coffre's newest signed checkpoint, byte for byte."""
        newest = self._newest_lot(oper, coffre)
        if newest is None:
            raise _unknown_coffre(oper, coffre)
        for number in range(newest[0], max(newest[0] - 2, 0), -1):
            key = checkpoint_key(oper, coffre, number)
            try:
                _, document = self._checkpoint(key)
            except ObjectMissing:
                continue  # the vault writes it right after the lot: it may be on its way
            return StoredDocument(key, document, hashlib.sha256(document).digest())
        raise NotFound(f"coffre {oper}/{coffre} has no checkpoint")

    def _checkpoint_files(self, oper: str, coffre: int, lo: int, hi: int) -> dict[int, _CheckpointFiles]:
        """The checkpoints of lots ``lo`` to ``hi`` in the archive, and the evidence files beside
        each. Listed by prefix, in blocks of lot numbers (``…-000000012`` holds lots 120 to
        129): a few listings of about as many lots as asked for, never the whole folder on S3."""
        if lo > hi:
            return {}
        folder = f"{oper}/{coffre}/checkpoints/"
        found: dict[int, tuple[bool, list[EvidenceFile]]] = {}
        for prefix in _number_blocks(lo, hi):
            listed = f"{folder}{oper}-{coffre}-{prefix}"
            for key in self._storage(f"listing {listed}", lambda listed=listed: self.storage.list(listed)):
                if key.rsplit("/", 1)[0] + "/" != folder:
                    continue
                parsed = parse_evidence_name(key)
                if parsed is not None:
                    number, kind, name = parsed.lot_number, parsed.kind, parsed.name
                    if (parsed.id_oper, parsed.id_coffre) != (oper, coffre) or not lo <= number <= hi:
                        continue
                    if ".." in name:  # not a key the archive can hold
                        continue
                    found.setdefault(number, (False, []))[1].append(EvidenceFile(kind, name, key))
                    continue
                match = re.fullmatch(rf"{re.escape(folder)}{oper}-{coffre}-([0-9]{{10}})\.xml", key)
                if match is not None and lo <= int(match[1]) <= hi:
                    number = int(match[1])
                    found[number] = (True, found.get(number, (False, []))[1])
        return {
            number: _CheckpointFiles(present, tuple(sorted(files, key=lambda e: (e.kind, e.name))))
            for number, (present, files) in found.items()
        }

    def checkpoints(
        self,
        oper: str,
        coffre: int,
        from_lot: int = 1,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str | None = None,
    ) -> CheckpointPage:
        """The coffre's checkpoints from lot ``from_lot`` on, by lot number, each with the
        evidence files beside it, one page at a time (a page covers ``page_size`` lot numbers).
        A coffre with no lot at all is a :class:`NotFound`."""
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"page_size must be from 1 to {MAX_PAGE_SIZE}, not {page_size}")
        after = _read_lot_token(page_token, from_lot) if page_token else from_lot - 1
        newest = self._newest_lot(oper, coffre)
        if newest is None:
            raise _unknown_coffre(oper, coffre)
        last = min(after + page_size, newest[0])
        files = self._checkpoint_files(oper, coffre, after + 1, last)
        numbers = sorted(number for number, listed in files.items() if listed.checkpoint)
        infos = list(
            self._pool.map(lambda number: self._checkpoint_info(oper, coffre, number, files[number]), numbers)
        )
        token = _make_lot_token(last, from_lot) if last < newest[0] else None
        return CheckpointPage(infos, token)

    def _checkpoint_info(
        self, oper: str, coffre: int, number: int, listed: _CheckpointFiles
    ) -> CheckpointInfo:
        key = checkpoint_key(oper, coffre, number)
        try:
            read, document = self._checkpoint(key)
        except ObjectMissing:
            raise NotFound(f"checkpoint {number} of coffre {oper}/{coffre} vanished while listed") from None
        sha = hashlib.sha256(document).hexdigest()
        return CheckpointInfo(oper, coffre, number, key, len(document), sha, read, listed.evidence)

    def checkpoint_at(self, oper: str, coffre: int, number: int) -> StoredDocument:
        """The checkpoint of lot ``number``, byte for byte."""
        try:
            if number > MAX_LOT_NUMBER:
                raise ObjectMissing(str(number))
            key = checkpoint_key(oper, coffre, number)
            _, document = self._checkpoint(key)
        except ObjectMissing:
            if self._newest_lot(oper, coffre) is None:
                raise _unknown_coffre(oper, coffre) from None
            raise NotFound(f"coffre {oper}/{coffre} has no checkpoint {number}") from None
        return StoredDocument(key, document, hashlib.sha256(document).digest())

    def evidence(self, oper: str, coffre: int, number: int, kind: str, name: str) -> StoredDocument:
        """The time-stamp token (``kind`` tsa) or cosignature (``kind`` witness) ``name`` of the
        checkpoint of lot ``number``, byte for byte. ``name`` must have passed
        :func:`parse_evidence_label`."""
        if kind not in EVIDENCE_KINDS:
            raise ValueError(f"unknown evidence kind {kind!r}")
        parse_evidence_label(name, "the name")
        what = f"time-stamp token from TSA {name}" if kind == "tsa" else f"cosignature from witness {name}"
        try:
            if number > MAX_LOT_NUMBER:
                raise ObjectMissing(str(number))
            key = _evidence_key(oper, coffre, number, kind, name)
            data = self._read(key)
        except ObjectMissing:
            if self._newest_lot(oper, coffre) is None:
                raise _unknown_coffre(oper, coffre) from None
            raise NotFound(f"checkpoint {number} of coffre {oper}/{coffre} has no {what}") from None
        return StoredDocument(key, data, hashlib.sha256(data).digest())

    def certificates(self) -> list[dict[str, object]]:
        """The certificates whose keys sign (or signed) the archive."""
        out = []
        for certificate in sorted(self.trust, key=lambda c: c.not_valid_before_utc):
            kid = key_id(certificate)
            out.append(
                {
                    "key_id": kid,
                    "subject": certificate.subject.rfc4514_string(),
                    "issuer": certificate.issuer.rfc4514_string(),
                    "serial": format(certificate.serial_number, "x"),
                    "not_before": format_time(certificate.not_valid_before_utc),
                    "not_after": format_time(certificate.not_valid_after_utc),
                    "sha256_fingerprint": certificate.fingerprint(hashes.SHA256()).hex(),
                    "signing": kid == self.signer.key_id,
                    "pem": certificate.public_bytes(serialization.Encoding.PEM).decode("ascii"),
                }
            )
        return out

    # -- proofs ------------------------------------------------------------------------------------

    def _coffre_lock(self, oper: str, coffre: int) -> _CoffreLock:
        with self._locks_lock:
            lock = self._coffre_locks.get((oper, coffre))
            if lock is None:
                lock = self._coffre_locks[(oper, coffre)] = _CoffreLock()
            return lock

    def _verified_leaves(self, oper: str, coffre: int) -> tuple[int, list[tuple[int, int, int]], Any]:
        """The coffre's sealed events as verified, from lot 1 to the newest lot with its
        checkpoint: (events, spans (lot, first IDEvt, last IDEvt), their leaf hashes)."""
        with self._coffre_lock(oper, coffre):
            state = self._verified.get((oper, coffre))
            if state is None:
                state = _VerifiedCoffre(CoffreWalk(CoffreReport(oper, coffre), self.trust))
            # Every proof is against the coffre's newest tree (the newest checkpoint's): the lots
            # sealed since the last proof are walked first (a listing of the days since then).
            try:
                self._extend(oper, coffre, state)
            finally:  # what verified is kept, even when a later lot fails
                self._verified.put((oper, coffre), state)
            report = state.walk.report
            events, spans = state.events, list(report.spans)
            # The walk only moves on (under the lock): its first ``events`` leaves stay as they are.
            leaves = report.leaves.prefix(events)
        if not spans:
            raise _unknown_coffre(oper, coffre)
        return events, spans, leaves

    def inclusion_proof(self, oper: str, coffre: int, id_evt: int) -> dict[str, object]:
        """The inclusion proof of one sealed event against its lot and the coffre's whole tree
        (the tree the newest checkpoint signs), computed from verified lots only."""
        events, spans, leaves = self._verified_leaves(oper, coffre)
        if id_evt > events:
            raise NotFound(
                f"IDEvt {id_evt} of coffre {oper}/{coffre} is not sealed: lots hold IDEvt 1..{events}"
            )
        for number, first, last in spans:
            if first <= id_evt <= last:
                return prove_inclusion(
                    oper, coffre, id_evt, number, first, leaves[first - 1 : last], leaves
                ).to_dict()
        raise NotFound(f"IDEvt {id_evt} of coffre {oper}/{coffre} is in no lot")  # pragma: no cover

    def consistency_proof(
        self, oper: str, coffre: int, old: int, new: int | None = None
    ) -> dict[str, object]:
        """The RFC 9162 consistency proof from the coffre's tree of ``old`` events to its tree of
        ``new`` (default: every sealed event, the newest checkpoint's tree), computed from
        verified lots only. Any two sizes with 1 <= old <= new <= sealed events."""
        if new is not None and old > new:
            raise InvalidRequest(f"old ({old}) must not be larger than new ({new})")
        events, _, leaves = self._verified_leaves(oper, coffre)
        size = events if new is None else new
        for asked, what in ((size, "new"), (old, "old")):
            if asked > events:
                raise NotFound(
                    f"the tree of size {asked} ({what}) of coffre {oper}/{coffre} is not sealed: "
                    f"its lots hold IDEvt 1..{events}"
                )
        return prove_consistency(oper, coffre, old, leaves[:size] if size < events else leaves).to_dict()

    def _extend(self, oper: str, coffre: int, state: _VerifiedCoffre) -> None:
        """Walk, in order, the lots sealed after those ``state`` covers, each with its checkpoint.
        The newest lot without its checkpoint yet (the vault writes it right after the lot) is
        left for later: its events are not sealed until then."""
        walk = state.walk
        pending = [
            lot
            for day in self._days(oper, coffre, state.last_day)
            for lot in self._day_lots(oper, coffre, day)
            if lot[0] > walk.last_number
        ]
        for position, (number, key, day) in enumerate(pending):
            try:
                document = self._read(key)
            except ObjectMissing:
                raise ArchiveInvalid(f"{key} vanished while being verified") from None
            checkpoint = checkpoint_key(oper, coffre, number)
            try:
                checkpoints = [(checkpoint, self._checkpoint(checkpoint)[1])]
            except ObjectMissing:
                if position == len(pending) - 1:
                    return
                checkpoints = []  # a lot in the middle without one: the walk reports it
            failures = walk.extend(number, key, document, checkpoints)
            if failures:
                raise _does_not_verify(oper, coffre, failures)
            state.last_day = day

    # -- daily export ------------------------------------------------------------------------------------

    def export_day(self, day: date, oper: str | None, out: IO[bytes], *, gzip: bool = False) -> ExportInfo:
        """Write to ``out`` a tar (gzip-compressed when asked) of every lot sealed on ``day`` (UTC),
        of every coffre or of one operator's, each followed by its checkpoint and the evidence
        files beside that checkpoint (time-stamp tokens, then cosignatures), under
        ``archive/<their key>``, and last ``manifest.xml``: the signed list of those files."""
        if day > self._today():
            raise NotFound(f"{day} has not begun (UTC): nothing is sealed on it yet")
        if oper is not None and not any(self._newest_lot(oper, coffre) for coffre in self._coffres(oper)):
            raise NotFound(f"operator {oper} is not in the archive: it has no sealed lot")
        opers = [oper] if oper is not None else self._opers()
        keys: list[str] = []
        for id_oper in opers:
            for coffre in self._coffres(id_oper):
                lots = self._day_lots(id_oper, coffre, day)
                if not lots:
                    continue
                listed = self._checkpoint_files(id_oper, coffre, lots[0][0], lots[-1][0])
                for number, key, _ in lots:
                    keys += [key, checkpoint_key(id_oper, coffre, number)]
                    found = listed.get(number, _CheckpointFiles())
                    if found.checkpoint:  # its evidence, as far as it has come
                        keys += [evidence.key for evidence in found.evidence]
        generated_at = self.clock().astimezone(UTC)
        entries: list[ManifestEntry] = []
        mtime = int(generated_at.timestamp())
        with tarfile.open(fileobj=out, mode="w:gz" if gzip else "w", format=tarfile.PAX_FORMAT) as tar:
            for key in keys:
                try:
                    document = self._read(key)
                except ObjectMissing:
                    if "/checkpoints/" in key:
                        continue  # written right after its lot: not there yet
                    raise StorageUnavailable(f"{key} vanished while being exported") from None
                path = f"{BUNDLE_ROOT}/{key}"
                _add(tar, path, document, mtime)
                entries.append(ManifestEntry(path, len(document), hashlib.sha256(document).hexdigest()))
            manifest = self.signer.sign_bytes(
                etree.tostring(build_manifest(day, oper, generated_at, entries), encoding="UTF-8")
            )
            _add(tar, MANIFEST_NAME, manifest, mtime)
        return ExportInfo(day, oper, generated_at, len(entries))


def _does_not_verify(oper: str, coffre: int, failures: Sequence[Failure]) -> ArchiveInvalid:
    """The answer when a lot fails the walk: its first failure, as ``coffre verify`` reports it."""
    log.error(
        "coffre %s/%s does not verify, no proof is given from it: %s",
        oper,
        coffre,
        "; ".join(str(failure) for failure in failures[:10]),
    )
    first = failures[0]
    event = f" IDEvt {first.id_evt}:" if first.id_evt is not None else ""
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return ArchiveInvalid(
        f"{first.where} does not verify:{event} {first.check}: {first.message}{more}; "
        "no proof is given from this coffre"
    )


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    info.mode = 0o444
    info.uname = info.gname = "coffre"
    tar.addfile(info, BytesIO(data))


def _number_blocks(lo: int, hi: int) -> list[str]:
    """Prefixes of ten-digit lot numbers covering ``lo`` to ``hi`` (and a few more): blocks of
    10**k numbers, 10**k the largest power of ten not above the count, so at most 11 of them."""
    k = len(str(hi - lo + 1)) - 1
    return [f"{block:0{10 - k}d}" for block in range(lo // 10**k, hi // 10**k + 1)]


def _make_lot_token(after: int, from_lot: int) -> str:
    raw = f"c1:{after}:{from_lot}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _read_lot_token(token: str, from_lot: int) -> int:
    invalid = InvalidRequest("page_token is not one this listing returned (same 'from_lot' needed)")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,200}", token):
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid from None
    found = re.fullmatch(r"c1:([0-9]{1,10}):([0-9]{1,10})", raw)
    if found is None or int(found[2]) != from_lot or int(found[1]) < from_lot - 1:
        raise invalid
    return int(found[1])


def _make_token(after: int, first_day: date, last_day: date) -> str:
    raw = f"1:{after}:{first_day.isoformat()}:{last_day.isoformat()}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _read_token(token: str, first_day: date, last_day: date) -> int:
    invalid = InvalidRequest("page_token is not one this listing returned (same 'from' and 'to' needed)")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,200}", token):
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid from None
    found = re.fullmatch(r"1:([0-9]{1,10}):([0-9-]{10}):([0-9-]{10})", raw)
    if found is None or (found[2], found[3]) != (first_day.isoformat(), last_day.isoformat()):
        raise invalid
    return int(found[1])


# -- the manifest ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    day: date
    id_oper: str | None
    generated_at: datetime
    entries: list[ManifestEntry]


def build_manifest(
    day: date, oper: str | None, generated_at: datetime, entries: Sequence[ManifestEntry]
) -> etree._Element:
    """The unsigned ``ManifesteExport`` of a bundle (format: docs/regulator-api.md)."""
    root = etree.Element(MANIFEST_TAG, version="1")
    root.text = "\n"

    def child(parent: etree._Element, tag: str, text: str | None = None, **attributes: str) -> etree._Element:
        element = etree.SubElement(parent, tag, attributes)
        element.text = text
        element.tail = "\n"
        return element

    child(root, "Jour", day.isoformat())
    if oper is not None:
        child(root, "IDOper", oper)
    child(root, "DateGeneration", format_time(generated_at))
    child(root, "NombreFichiers", str(len(entries)))
    files = child(root, "Fichiers")
    files.text = "\n"
    for entry in entries:
        child(files, "Fichier", SHA256=entry.sha256, Taille=str(entry.size), Chemin=entry.path)
    return root


def read_manifest(document: bytes, trust: TrustStore) -> Manifest:
    """A bundle's manifest, its signature checked against ``trust`` at its generation time;
    :class:`~coffre.domain.signing.SignatureInvalid` or :class:`LotFormatError` otherwise."""
    unverified = parse_document(document)
    at = parse_time((unverified.findtext("DateGeneration") or "").strip(), "DateGeneration")
    root = verify(document, trust, at)
    if root.tag != MANIFEST_TAG or root.get("version") != "1":
        raise LotFormatError(f"not a version 1 {MANIFEST_TAG}")
    day = date.fromisoformat((root.findtext("Jour") or "").strip())
    oper = root.findtext("IDOper")
    entries = [
        ManifestEntry(f.get("Chemin", ""), int(f.get("Taille", "-1")), f.get("SHA256", ""))
        for f in root.iterfind("Fichiers/Fichier")
    ]
    if int(root.findtext("NombreFichiers") or -1) != len(entries):
        raise LotFormatError("NombreFichiers does not match the files listed")
    return Manifest(day, oper.strip() if oper else None, at, entries)
