"""Offline verification of a coffre's archive: what ``coffre verify`` runs, on bytes only.

Every check of docs/archive-format.md ("Verifying an archive"), each failure named by its
file, its IDEvt when it concerns one event, and the check that failed. A lot whose signature
does not hold is still read, so that the report also says what in it was changed; a checkpoint
whose signature does not hold is reported and otherwise ignored (its content is no evidence).

A failure is reported on the file that changed, not on the files that merely point at it: a
lot's file digest is checked against the checkpoints that name it (``EmpreinteLot``), and the
next lot's links are blamed only when they agree neither with that lot as read nor with what
its checkpoints signed. Once the coffre's tree as read differs from a signed one, later trees
are not compared (each would repeat that one difference).

The evidence beside each checkpoint (its RFC 3161 tokens, its witnesses' cosignatures) is
checked as it is read, as :class:`EvidencePolicy` asks; its failures come after the
checkpoint's own. Whether the archive extends what a witness cosigned is checked afterwards, on
the coffre's leaves (:func:`coffre.commands.verify.check_witnessed`).

:class:`CoffreWalk` is that walk, one lot at a time: ``coffre verify`` runs it over a whole
coffre, the regulator API extends it lot by lot before it gives a proof (one verifier for both).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from copy import deepcopy
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from hashlib import sha256 as _sha256
from typing import overload

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from lxml import etree

from .chain import GENESIS
from .evidence import parse_evidence_name
from .lot import (
    MAX_LOT_EVENTS,
    NO_DIGEST,
    Checkpoint,
    Lot,
    LotFormatError,
    LotHeader,
    _stated_identity,
    digest,
    format_time,
    parse_document,
    parse_lot_name,
    parse_time,
    read_checkpoint,
    read_lot,
)
from .lot_bytes import read_signed_lot as _read_signed_lot
from .merkle import HASH_SIZE, MerkleAccumulator
from .merkle import root as merkle_root
from .signing import SignatureInvalid, TrustStore, verify_canonical
from .timestamp import MAX_RESPONSE_BYTES, ImprintMismatch, TimestampInvalid, verify_token
from .witness import CosignatureInvalid, cosigned_by, fingerprint, note_body, split_note
from .witness import key_id as witness_key_id

_LEAF = b"\x00"
"""RFC 9162's leaf prefix (:func:`coffre.domain.merkle.leaf_hash`), inlined in the walk."""
_NODE = b"\x01"
"""RFC 9162's interior node prefix (:func:`coffre.domain.merkle.node_hash`), inlined likewise."""

SchemaCheck = Callable[[bytes], list[str]]
"""Schema errors of one event's canonical bytes (empty when it validates)."""

Source = bytes | Callable[[], bytes]
"""A file's bytes, or a function that reads them (raising :class:`LotFormatError` for a file too
large to read), so that an archive is read one lot at a time."""


@dataclass(frozen=True, slots=True)
class Failure:
    where: str
    check: str
    message: str
    id_evt: int | None = None

    def __str__(self) -> str:
        event = f" IDEvt {self.id_evt}:" if self.id_evt is not None else ""
        return f"{self.where}:{event} {self.check}: {self.message}"


class Hashes(Sequence[bytes]):
    """32-byte hashes packed in one bytearray, in order: a third of the memory of a list of
    ``bytes`` (a coffre holds one leaf and one chain hash per event). Slices are copies, as a
    list's; :meth:`prefix` is a view without copy."""

    __slots__ = ("_data",)

    def __init__(self, hashes: Iterable[bytes] = ()) -> None:
        self._data = bytearray()
        self.extend(hashes)

    def __len__(self) -> int:
        return len(self._data) // HASH_SIZE

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            copy = Hashes()
            copy._data = self._data[start * HASH_SIZE : max(start, stop) * HASH_SIZE]
            return copy
        return _hash_at(self._data, len(self), index)

    def append(self, value: bytes) -> None:
        if len(value) != HASH_SIZE:
            raise ValueError(f"a hash is {HASH_SIZE} bytes, not {len(value)}")
        self._data += value

    def extend(self, values: Iterable[bytes]) -> None:
        for value in values:
            self.append(value)

    def extend_packed(self, packed: bytes | bytearray) -> None:
        """Append hashes given end to end in one buffer (a multiple of 32 bytes)."""
        if len(packed) % HASH_SIZE:
            raise ValueError(f"{len(packed)} bytes are not whole {HASH_SIZE}-byte hashes")
        self._data += packed

    def truncate(self, size: int) -> None:
        """Keep the first ``size`` hashes only."""
        del self._data[size * HASH_SIZE :]

    def prefix(self, size: int) -> Sequence[bytes]:
        """The first ``size`` hashes, read from this list as they are (no copy): valid while
        they stay (appending is fine, truncating below ``size`` is not)."""
        return _HashesPrefix(self._data, min(size, len(self)))


class _HashesPrefix(Sequence[bytes]):
    __slots__ = ("_data", "_size")

    def __init__(self, data: bytearray, size: int) -> None:
        self._data, self._size = data, size

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        return _hash_at(self._data, self._size, index)


def _hash_at(data: bytearray, size: int, index: int) -> bytes:
    if index < 0:
        index += size
    if not 0 <= index < size:
        raise IndexError(index)
    return bytes(data[index * HASH_SIZE : (index + 1) * HASH_SIZE])


@dataclass
class CoffreReport:
    id_oper: str
    id_coffre: int
    lots: int = 0
    events: int = 0
    checkpoints: int = 0
    failures: list[Failure] = field(default_factory=list)
    leaves: Hashes = field(default_factory=Hashes)
    """The coffre's RFC 9162 leaf hashes in IDEvt order, as read (for proofs), when :attr:`keep`."""
    chain: Hashes = field(default_factory=Hashes)
    """The chain hash of each IDEvt, as the lots give it, when :attr:`keep`."""
    keep: bool = True
    """Whether every event's leaf and chain hash is kept (:attr:`leaves`, :attr:`chain`: 64 bytes
    an event, for proofs and the regulator API). ``coffre verify`` keeps none: only the roots and
    chain hashes at the sizes in :attr:`wanted` and the spans and roots of the lots in
    :attr:`wanted_lots` (and of the newest lot), so that its memory does not grow with the coffre."""
    wanted: set[int] = field(default_factory=set)
    """Tree sizes whose root (:attr:`roots`) and chain hash (:attr:`chains`) are kept whatever
    :attr:`keep` says: those of the checkpoints, of a witness's checkpoint."""
    wanted_lots: set[int] = field(default_factory=set)
    """Lot numbers whose span and root are kept whatever :attr:`keep` says (the seal notes')."""
    chains: dict[int, bytes] = field(default_factory=dict)
    """The chain hash of the last event of the tree of each size in :attr:`wanted`."""
    walked: int = 0
    """Events whose leaves this walk put in the coffre's tree (after :attr:`forgotten`)."""
    forgotten: int = 0
    """Events walked before the first of ``leaves`` and ``chain`` (a walk resumed by
    :meth:`CoffreWalk.resume` holds none of the events before it)."""
    roots: dict[int, bytes] = field(default_factory=dict)
    """The coffre tree's root at the end of each lot read, by tree size (only at the sizes in
    :attr:`wanted` and the ends of :attr:`wanted_lots` when not :attr:`keep`)."""
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    """(lot number, first IDEvt, last IDEvt) of each lot read, in order (only those of
    :attr:`wanted_lots` and the newest when not :attr:`keep`)."""
    complete: bool = True
    """False once a lot could not be read: the coffre's tree is then unknown past it."""
    tree_agrees: bool = True
    """False once the coffre tree as read differed from a signed one (a lot's or a checkpoint's)."""
    tokens: int = 0
    """Time-stamp token files read (``.tsa-<name>.tsr``)."""
    cosignatures: int = 0
    """Cosignature files read (``.witness-<name>.cosig``)."""

    def fail(self, where: str, check: str, message: str, id_evt: int | None = None) -> None:
        self.failures.append(Failure(where, check, message, id_evt))

    @property
    def held(self) -> int:
        """The size of the coffre's tree as walked."""
        return self.forgotten + self.walked

    def record_span(self, span: tuple[int, int, int]) -> None:
        """A lot's span, after the lots before it: the newest one is always kept."""
        spans = self.spans
        if not self.keep and spans and spans[-1][0] not in self.wanted_lots:
            spans.pop()
        spans.append(span)

    def chain_at(self, size: int) -> bytes | None:
        """The chain hash of IDEvt ``size`` as the lots give it, when it is kept."""
        if size in self.chains:
            return self.chains[size]
        if self.keep and self.forgotten < size <= self.held:
            return self.chain[size - 1 - self.forgotten]
        return None


# -- reading signed documents ---------------------------------------------------------------------


@dataclass(slots=True)
class _Opened:
    """One lot or checkpoint file as read: its root as the signature covers it (or as parsed when
    the signature does not hold; None when it cannot be parsed), and what went wrong reading it."""

    path: str
    digest: bytes
    root: etree._Element | None
    signed: bool
    failures: list[Failure]
    canonical: bytes | None = None
    """The exclusive C14N of ``root`` the signature covers, when it holds."""


def _open_signed(
    path: str, source: Source, trust: TrustStore, read_at: Callable[[etree._Element], datetime]
) -> _Opened:
    """Read and parse a document, then check its signature. The signing certificate must be valid
    at the document's own time (a lot's seal time); when that cannot be read, at the time of the
    check (the document then fails ``format`` anyway)."""
    try:
        document = source() if callable(source) else source
        unverified = parse_document(document)
    except LotFormatError as exc:
        return _Opened(path, b"", None, False, [Failure(path, "format", str(exc))])
    try:
        at = read_at(unverified)
    except LotFormatError:
        at = datetime.now(UTC)
    try:
        root, canonical = verify_canonical(document, trust, at, parsed=unverified, take=True)
        return _Opened(path, digest(document), root, True, [], canonical)
    except SignatureInvalid as exc:
        return _Opened(path, digest(document), unverified, False, [Failure(path, "signature", str(exc))])


def _open_lot(path: str, source: Source, trust: TrustStore) -> tuple[_Opened, _Events | None]:
    """A lot file as read: from its bytes alone when :func:`read_signed_lot` proves that reads
    as the tree does (its events then come with it), else parsed (:func:`_open_signed`)."""
    try:
        document = source() if callable(source) else source
    except LotFormatError as exc:
        return _Opened(path, b"", None, False, [Failure(path, "format", str(exc))]), None
    lot = _read_signed_lot(document, trust)
    if lot is None:
        return _open_signed(path, document, trust, _lot_time), None
    opened = _Opened(path, digest(document), None, True, [])
    return opened, _Events(lot.header, lot.ids, lot.claimed, lot.canonical)


def _lot_time(root: etree._Element) -> datetime:
    """The seal time alone: the lot is read whole only once its signature holds."""
    return parse_time(root.findtext("Entete/DateScellement") or "", "DateScellement")


def _checkpoint_time(root: etree._Element) -> datetime:
    return parse_time(root.findtext("Date") or "", "Date")


TSA_SKEW = timedelta(minutes=5)
"""How far a token's ``genTime`` may precede its checkpoint's ``Date``: the vault's clock and the
TSA's differ a little (NTP keeps both well within it)."""
TSA_MAX_DELAY = timedelta(days=1)
"""How long after its checkpoint's ``Date`` a token may be dated, by default (``--tsa-max-delay``).
The vault asks for a token as soon as the checkpoint is written and retries a TSA that is down
(docs/operations.md), so a token is normally seconds late; a day leaves room for a TSA outage
over a night while an archive rebuilt later (whose tokens are of the day it was rebuilt) is
reported once it is more than a day old."""
MAX_COSIGNATURE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class EvidencePolicy:
    """What ``coffre verify`` checks of the evidence beside each checkpoint (docs/archive-format.md,
    "Evidence beside a checkpoint"). Without TSA roots the tokens are counted, not checked; without
    witness keys the cosignatures are counted, not checked."""

    tsa_roots: Sequence[x509.Certificate] = ()
    tsa_max_delay: timedelta = TSA_MAX_DELAY
    """How long after a checkpoint's ``Date`` its token's ``genTime`` may be (``--tsa-max-delay``)."""
    tsa_skew: timedelta = TSA_SKEW
    """How long before a checkpoint's ``Date`` its token's ``genTime`` may be (clocks differ)."""
    witness_keys: Sequence[Ed25519PublicKey] = ()


@dataclass(frozen=True, slots=True)
class _Evidence:
    path: str
    kind: str
    source: Source


@dataclass(slots=True)
class _ReadCheckpoint:
    opened: _Opened
    checkpoint: Checkpoint | None
    file_number: int | None
    """The lot number in the file's name (None for a checkpoint given with ``--checkpoint``)."""
    checked: bool = False
    evidence_failures: list[Failure] = field(default_factory=list)
    """Failures of the evidence beside it, reported after its own."""
    cosigned: set[int] = field(default_factory=set)
    """The indices of the witness keys that cosigned it validly."""

    @property
    def lot_number(self) -> int | None:
        return self.checkpoint.lot_number if self.checkpoint is not None else self.file_number

    @property
    def evidence(self) -> Checkpoint | None:
        """The checkpoint when its signature holds: only then does what it says count."""
        return self.checkpoint if self.opened.signed else None


def _read_checkpoint(
    report: CoffreReport,
    path: str,
    source: Source,
    trust: TrustStore,
    *,
    in_archive: bool,
    evidence: Sequence[_Evidence] = (),
    policy: EvidencePolicy | None = None,
) -> _ReadCheckpoint:
    report.checkpoints += 1
    document: Source = source
    if callable(source):
        with suppress(LotFormatError):  # read again, and reported, by _open_signed
            document = source()
    opened = _open_signed(path, document, trust, _checkpoint_time)
    parsed = parse_lot_name(path) if in_archive else None
    checkpoint = None
    if opened.root is not None:
        try:
            checkpoint = read_checkpoint(opened.root)
        except LotFormatError as exc:
            opened.failures.append(Failure(path, "format", str(exc)))
        opened.root = opened.canonical = (
            None  # what it says is kept, not its tree: a coffre may have many checkpoints
        )
    read = _ReadCheckpoint(opened, checkpoint, parsed[2] if parsed else None)
    if checkpoint is not None and (checkpoint.id_oper, checkpoint.id_coffre) != (
        report.id_oper,
        report.id_coffre,
    ):
        opened.failures.append(
            Failure(
                path,
                "location",
                f"a checkpoint of coffre {checkpoint.id_oper}/{checkpoint.id_coffre} "
                f"among those of {report.id_oper}/{report.id_coffre}",
            )
        )
        read.checkpoint = None
    elif checkpoint is not None and in_archive:
        _check_checkpoint_location(opened, checkpoint)
    if in_archive:
        _check_evidence(report, read, document if isinstance(document, bytes) else None, evidence, policy)
    return read


# -- the evidence beside a checkpoint: time-stamp tokens and cosignatures ----------------------------


def _read_evidence(item: _Evidence, limit: int) -> bytes:
    data = item.source() if callable(item.source) else item.source
    if len(data) > limit:
        raise LotFormatError(f"{len(data)} bytes, more than the {limit} such a file may hold")
    return data


def _check_evidence(
    report: CoffreReport,
    read: _ReadCheckpoint,
    document: bytes | None,
    evidence: Sequence[_Evidence],
    policy: EvidencePolicy | None,
) -> None:
    """Count the tokens and cosignatures beside a checkpoint and, as ``policy`` asks, check them.
    Only a checkpoint whose signature holds is checked: the others are already failures, and what
    they say (their ``Date``, their tree) is no evidence."""
    tokens = [item for item in evidence if item.kind == "tsa"]
    notes = [item for item in evidence if item.kind == "witness"]
    report.tokens += len(tokens)
    report.cosignatures += len(notes)
    checkpoint = read.evidence
    if policy is None or checkpoint is None or document is None:
        return
    fail = read.evidence_failures.append
    if policy.tsa_roots:
        held = 0
        for item in tokens:
            held += _check_token(item, document, checkpoint, policy, fail)
        if not tokens:
            fail(
                Failure(
                    read.opened.path,
                    "timestamp",
                    "no time-stamp token (.tsa-<name>.tsr) beside the checkpoint",
                )
            )
        elif not held:
            fail(
                Failure(
                    read.opened.path,
                    "timestamp",
                    f"none of its {len(tokens)} time-stamp token(s) holds: nothing dates the checkpoint",
                )
            )
    if policy.witness_keys:
        body = note_body(checkpoint)
        for item in notes:
            read.cosigned |= _check_cosignature(item, body, policy.witness_keys, fail)


def _check_token(
    item: _Evidence,
    document: bytes,
    checkpoint: Checkpoint,
    policy: EvidencePolicy,
    fail: Callable[[Failure], None],
) -> bool:
    """One token: RFC 3161 checks over the checkpoint file's bytes, then its time against the
    checkpoint's ``Date``. True when it holds."""
    try:
        stamp = verify_token(_read_evidence(item, MAX_RESPONSE_BYTES), document, policy.tsa_roots)
    except LotFormatError as exc:
        fail(Failure(item.path, "timestamp", f"not a token: {exc}"))
        return False
    except ImprintMismatch:
        message = (
            "imprint: the token's message imprint is not the SHA-256 of this checkpoint's file "
            "(a token moved from another checkpoint, or the checkpoint changed)"
        )
        fail(Failure(item.path, "timestamp", message))
        return False
    except TimestampInvalid as exc:
        fail(Failure(item.path, "timestamp", str(exc)))
        return False
    date, gen_time = checkpoint.at, stamp.gen_time
    if gen_time < date - policy.tsa_skew:
        fail(
            Failure(
                item.path,
                "timestamp",
                f"too early: genTime {_when(gen_time)} is before the checkpoint's Date {_when(date)} "
                f"by more than {_seconds(policy.tsa_skew)} s: the checkpoint's Date is not its time",
            )
        )
        return False
    if gen_time > date + policy.tsa_max_delay:
        late = int((gen_time - date).total_seconds())
        fail(
            Failure(
                item.path,
                "timestamp",
                f"too late: genTime {_when(gen_time)} is {late} s after the checkpoint's Date {_when(date)}, "
                f"more than {_seconds(policy.tsa_max_delay)} s: an archive rebuilt later gets tokens of that day",
            )
        )
        return False
    return True


def _check_cosignature(
    item: _Evidence, body: bytes, keys: Sequence[Ed25519PublicKey], fail: Callable[[Failure], None]
) -> set[int]:
    """One ``.cosig`` file: the indices of the keys whose cosignature in it holds over ``body``;
    none is a failure, saying why."""
    try:
        note = _read_evidence(item, MAX_COSIGNATURE_BYTES)
        found, lines = split_note(note)
    except (LotFormatError, CosignatureInvalid) as exc:
        fail(Failure(item.path, "cosignature", f"not a cosigned note: {exc}"))
        return set()
    held = set()
    for index, key in enumerate(keys):
        try:
            cosigned_by(note, body, key)
        except CosignatureInvalid:
            continue
        held.add(index)
    if held:
        return held
    if found != body:
        message = (
            "the note is about another checkpoint (its origin, size or root differs from this one's): "
            "a cosignature moved from another checkpoint"
        )
    elif not any(line.key_id == witness_key_id(line.name, key) for line in lines for key in keys):
        by = ", ".join(f"{line.name} key id {line.key_id.hex()}" for line in lines) or "nobody"
        message = (
            f"no cosignature by a given witness key (it holds one by {by}): a cosignature by another key"
        )
    else:
        named = ", ".join(fingerprint(key) for key in keys)
        message = f"the cosignature by witness key {named} does not verify: forged or altered"
    fail(Failure(item.path, "cosignature", message))
    return set()


def _check_newest_cosigned(
    report: CoffreReport, read: Sequence[_ReadCheckpoint], keys: Sequence[Ed25519PublicKey]
) -> None:
    """The coffre's newest checkpoint (the largest tree among those of the archive whose signature
    holds) must carry a valid cosignature by every given witness key."""
    signed = [c for c in read if c.file_number is not None and c.evidence is not None]
    if not signed:
        return
    newest = max(signed, key=lambda c: (c.evidence.tree_size, c.evidence.lot_number))  # type: ignore[union-attr]
    for index, key in enumerate(keys):
        if index not in newest.cosigned:
            newest.evidence_failures.append(
                Failure(
                    newest.opened.path,
                    "cosignature",
                    f"the newest checkpoint of coffre {report.id_oper}/{report.id_coffre} has no valid "
                    f"cosignature by witness key {fingerprint(key)}: no witness vouches that the archive "
                    "ends here",
                )
            )


def _when(at: datetime) -> str:
    """A time as the archive writes it; to the second when it has no fraction (a token's genTime
    as read)."""
    at = at.astimezone(UTC)
    return format_time(at) if at.microsecond else f"{at:%Y-%m-%dT%H:%M:%SZ}"


def _seconds(span: timedelta) -> int:
    return int(span.total_seconds())


def _check_checkpoint_location(opened: _Opened, checkpoint: Checkpoint) -> None:
    path = opened.path
    parts = path.replace("\\", "/").split("/")
    parsed = parse_lot_name(path)
    if parsed is not None and parsed[2] != checkpoint.lot_number:
        opened.failures.append(
            Failure(
                path,
                "location",
                f"the file is named for lot {parsed[2]}, the checkpoint says lot {checkpoint.lot_number}",
            )
        )
    if len(parts) >= 4 and parts[-4:-1] != [checkpoint.id_oper, str(checkpoint.id_coffre), "checkpoints"]:
        opened.failures.append(
            Failure(
                path,
                "location",
                f"filed under {'/'.join(parts[-4:-1])}, not {checkpoint.id_oper}/{checkpoint.id_coffre}/checkpoints",
            )
        )


# -- the walk over a coffre's lots ------------------------------------------------------------------


@dataclass(slots=True)
class _Previous:
    """What the next lot must link to: the previous lot as read, and what its checkpoints signed."""

    digest: bytes = NO_DIGEST
    chain: bytes = GENESIS
    sealed_digests: frozenset[bytes] = frozenset()
    sealed_chains: frozenset[bytes] = frozenset()


# -- a lot's events, read from the signed bytes ----------------------------------------------------


@dataclass(slots=True)
class _Events:
    """A lot's header and events as parallel lists (IDEvt, chain hash as the lot gives it,
    canonical bytes), however they were read."""

    header: LotHeader
    ids: list[int]
    claimed: list[bytes]
    canonical: list[bytes]
    identities: list[tuple[str | None, str | None, str | None] | None] | None = None
    """Each event's own IDOper/IDCoffre/IDEvt (:attr:`LotEvent.stated`); None when they were
    proven, all of them, to be the lot's and the Evenement's (:func:`_read_events_fast`)."""
    holders: etree._Element | None = None
    """The lot's ``Evenements`` element, to read the identities from when they were not proven."""
    lot_root: bytes = b""
    """The RFC 9162 root of the lot's events, once hashed (:func:`_check_events`)."""
    levels: list[list[bytes]] = field(default_factory=list)
    """The lot's tree, level by level, while it is summarized (:func:`_levels`)."""

    @classmethod
    def of(cls, lot: Lot) -> _Events:
        events = lot.events
        return cls(
            lot.header,
            [e.id_evt for e in events],
            [e.chain_hash for e in events],
            [e.canonical for e in events],
            [e.stated for e in events],
        )

    def stated(self, index: int) -> tuple[str | None, str | None, str | None] | None:
        if self.identities is None:
            if self.holders is None:  # proven: the lot's and the Evenement's
                return self.header.id_oper, str(self.header.id_coffre), str(self.ids[index])
            self.identities = [_stated_identity(holder[0]) for holder in self.holders]
        return self.identities[index]

    def strangers(self, h: LotHeader) -> list[int]:
        """The indices of the events whose own identity is not their lot's and Evenement's."""
        if self.identities is None and self.holders is None:
            return []
        oper, coffre = h.id_oper, str(h.id_coffre)
        return [
            index
            for index, id_evt in enumerate(self.ids)
            if self.stated(index) != (oper, coffre, str(id_evt))
        ]


_LOT_START = b'<LotCoffre version="1">'
_BODY_START = b"</Entete>\n<Evenements>\n"
_BODY_END = b"</Evenements>\n</LotCoffre>"
_HOLDER_START = b'<Evenement HashChaine="'
_HOLDER_END = b"</Evenement>"
_HOLDER_FIXED = len(b'<Evenement HashChaine="" IDEvt=""></Evenement>\n') + 64
"""The bytes of an Evenement but its IDEvt's digits and its event."""
_IDENTITY_TAGS = re.compile(rb"<ID(?:Oper|Coffre|Evt)[ >]")
_HOLDER_NODES = etree.XPath("count(Evenement/node())")
_event_patterns: dict[tuple[str, int], re.Pattern[bytes]] = {}


def _event_pattern(id_oper: str, id_coffre: int) -> re.Pattern[bytes]:
    """One ``Evenement`` on one line of a lot's canonical bytes, as the sealer writes it: its
    start tag (HashChaine: group 1, IDEvt: group 2), its event (group 8) whose start tag has no
    attribute nor namespace, then its end tag and a line feed. Group 3 or 7 is ``<`` when the event's
    IDOper and IDCoffre are the lot's and its IDEvt the Evenement's, each a child of the event
    among a first run of children that hold text only (whatever their order)."""
    key = (id_oper, id_coffre)
    pattern = _event_patterns.get(key)
    if pattern is None:
        if len(_event_patterns) > 1024:
            _event_patterns.clear()
        start = rb"<[^\s:/>?!<]+>"

        def child(group: int, tag: bytes, text: bytes) -> bytes:
            run = rb"(?:<(\w+)>[^<]*</\%d>)*?" % group
            return rb"(?=" + start + run + b"<" + tag + b">" + text + b"</" + tag + b">)"

        oper, coffre = re.escape(id_oper.encode()), str(id_coffre).encode()
        pattern = _event_patterns[key] = re.compile(
            re.escape(_HOLDER_START) + rb'([0-9a-f]{64})" IDEvt="([1-9][0-9]{0,18})">'
            rb"(?=" + start + rb")"
            # the order of most events, first (one look), then any order
            rb"(?:(?=" + start + rb"<IDOper>" + oper + rb"</IDOper><IDCoffre>" + coffre + rb"</IDCoffre>"
            rb"<DateEvt>[^<]*</DateEvt><IDEvt>\2</IDEvt>)(?=(<))"
            rb"|"
            + child(4, b"IDOper", oper)
            + child(5, b"IDCoffre", coffre)
            + child(6, b"IDEvt", rb"\2")
            + rb"(?=(<)))?"
            rb"([^\n]*)</Evenement>\n"
        )
    return pattern


def _read_events_fast(root: etree._Element, canonical: bytes) -> _Events | None:
    """The lot's events read from ``canonical`` (the signed bytes: the exclusive C14N of ``root``)
    by slicing, when that is provably what :func:`read_lot` reads from ``root`` event by event;
    None otherwise (the caller then reads the lot with :func:`read_lot`).

    The proof, for a lot as the sealer writes it: without processing instructions (none in the
    tree), every ``<`` of canonical XML is a start or an end tag (text and attribute values escape
    it). ``root`` and ``Evenements`` render with no attribute or namespace declaration beyond
    ``version``, so an event inherits nothing from them. ``</Evenement>`` appears exactly once per
    child of ``Evenements``, and the body is, from its first byte to its last, as many matches of
    the pattern one after the other: so the body is those children, each an ``Evenement`` (none
    nests in another) whose start tag has exactly HashChaine and IDEvt, holding one node (counted
    in the tree) that is an element with no attribute nor namespace of its own; its bytes between
    the tags are its exclusive C14N, the bytes :func:`read_lot` computes for it alone. The header
    is read by :func:`read_lot` itself (on a copy of the root without the events). The events'
    own IDOper, IDCoffre and IDEvt are proven the lot's and the Evenement's when each event has
    them among its first children (the pattern) and the body holds no other element of those
    names; otherwise
    they are read from the tree (:attr:`_Events.identities`). An event whose bytes hold a line
    feed makes the lot decline (read the slow way)."""
    if (
        not canonical.startswith(_LOT_START)
        or not canonical.endswith(_BODY_END)
        or len(root) != 2
        or next(root.iter(etree.PI), None) is not None
    ):
        return None
    start = canonical.find(_BODY_START)
    if start < 0 or canonical.find(b"</Entete>") != start:
        return None
    holders = root[1]
    if holders.tag != "Evenements" or len(holders) > MAX_LOT_EVENTS:
        return None
    # The header as read_lot reads it: the same root, its first child as it is, no events.
    alone = etree.Element(root.tag, dict(root.attrib))
    alone.append(deepcopy(root[0]))
    etree.SubElement(alone, "Evenements")
    try:
        header = read_lot(alone).header
    except LotFormatError:
        return None
    body = canonical[start + len(_BODY_START) : len(canonical) - len(_BODY_END)]
    count = len(holders)
    if body.count(_HOLDER_END) != count or _HOLDER_NODES(holders) != count:
        return None
    found = _event_pattern(header.id_oper, header.id_coffre).findall(body)
    if len(found) != count:
        return None
    events = [event[7] for event in found]
    if _HOLDER_FIXED * count + sum(len(event[1]) for event in found) + sum(map(len, events)) != len(body):
        return None  # the matches do not tile the body
    proven = all(event[2] or event[6] for event in found) and len(_IDENTITY_TAGS.findall(body)) == 3 * count
    packed = binascii.unhexlify(b"".join(event[0] for event in found))
    return _Events(
        header,
        [int(event[1]) for event in found],
        [packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)],
        events,
        None,
        None if proven else holders,
    )


_digest = type(_sha256()).digest


def _hashes(data: Iterable[bytes]) -> list[bytes]:
    """The SHA-256 of each, in C loops (no bytecode an item: this is most of a lot's hashing)."""
    return list(map(_digest, map(_sha256, data)))


def _nodes(lefts: list[bytes], rights: list[bytes]) -> list[bytes]:
    """RFC 9162's interior node of each pair (``rights`` may be one shorter: the last left alone
    is left out, as ``zip`` does)."""
    return _hashes(map(bytes.__add__, map(_NODE.__add__, lefts), rights))


def _lot_root_and_extend(tree: MerkleAccumulator, leaves: list[bytes]) -> bytes:
    """RFC 9162's MTH over ``leaves`` (the lot's root), and ``tree`` (the coffre's) extended by
    them, as :meth:`MerkleAccumulator.append` of each would (:func:`_levels`, :func:`_blocks`,
    :func:`_fold_blocks`)."""
    if not leaves:
        return merkle_root(leaves)
    levels = _levels(leaves)
    _fold_blocks(tree, _blocks(levels, tree.size))
    return levels[-1][0]


def _levels(leaves: list[bytes]) -> list[list[bytes]]:
    """The lot's tree level by level, leaves first, its root alone last (an odd last node goes up
    as it is: the same root as :func:`coffre.domain.merkle.root`); [] for no leaf."""
    if not leaves:
        return []
    levels = [leaves]
    level = leaves
    while len(level) > 1:
        up = _nodes(level[::2], level[1::2])
        if len(level) & 1:
            up.append(level[-1])
        levels.append(up)
        level = up
    return levels


def _blocks(levels: list[list[bytes]], start: int) -> list[tuple[int, bytes]]:
    """The lot's leaves as a coffre's tree of ``start`` leaves takes them: the largest aligned
    perfect blocks, as (log2 of its size, its root), each root taken from the lot's levels where
    the lot's and the coffre's alignments agree (lots of 1,000 start on multiples of 8: seven
    hashes in eight are shared), else folded from the largest level where they do. Depends on
    ``start`` only, not on the tree: a ``--jobs`` worker computes them."""
    if not levels or start < 0:
        return []
    blocks = []
    position, end = start, start + len(levels[0])
    while position < end:
        j = (position & -position).bit_length() - 1 if position else len(levels) - 1
        while position + (1 << j) > end:
            j -= 1
        offset = position - start
        shared = min(j, (offset & -offset).bit_length() - 1) if offset else j
        block = levels[shared][offset >> shared : (offset >> shared) + (1 << (j - shared))]
        while len(block) > 1:
            block = _nodes(block[::2], block[1::2])
        blocks.append((j, block[0]))
        position += 1 << j
    return blocks


def _fold_blocks(tree: MerkleAccumulator, blocks: list[tuple[int, bytes]]) -> None:
    """``tree`` extended by aligned perfect blocks (:func:`_blocks` for the tree's size)."""
    frontier, size = tree._frontier, tree._size
    for j, node in blocks:
        carry = size >> j
        while carry & 1:
            node = _sha256(_NODE + frontier.pop() + node).digest()
            carry >>= 1
        frontier.append(node)
        size += 1 << j
    tree._size = size


def verify_coffre(
    id_oper: str,
    id_coffre: int,
    lots: Iterable[tuple[str, Source]],
    checkpoints: Iterable[tuple[str, Source]],
    trust: TrustStore,
    *,
    older_checkpoint: tuple[str, Source] | None = None,
    schema: SchemaCheck | None = None,
    evidence: Iterable[tuple[str, Source]] = (),
    policy: EvidencePolicy | None = None,
    keep: bool = True,
    wanted: Iterable[int] = (),
    wanted_lots: Iterable[int] = (),
    summaries: Callable[[list[tuple[int, str, Source]]], Iterator[LotSummary]] | None = None,
    checkpoints_read: Callable[[list[CheckpointItem]], Iterator[CheckpointRead]] | None = None,
) -> CoffreReport:
    """Verify one coffre from its lot files and checkpoint files, given as (path, bytes or reader).

    Paths are relative to the archive's root (``0099/1/2026/11/22/0099-1-0000000001.xml``) or
    at least end with ``YYYY/MM/DD/<file>``; they locate failures and are checked against the
    headers (a lot moved to another coffre, another number or another day is caught).
    ``older_checkpoint`` is one the regulator kept from before (``--checkpoint``). ``evidence``
    are the time-stamp tokens and cosignatures of the coffre's checkpoints (their file names
    say which), checked as ``policy`` asks.

    ``keep`` False keeps no event's hashes in the report (:attr:`CoffreReport.keep`), only what
    the checks need: the trees of its checkpoints and of ``wanted`` sizes, the spans of
    ``wanted_lots``. ``summaries`` reads the lots on their own (:func:`summarize_lot`), in the
    order given (:func:`numbered_lots`), e.g. in ``--jobs`` workers; by default they are read
    here one after the other. ``checkpoints_read`` likewise reads the archive's checkpoints, each
    with the evidence beside it (:func:`read_checkpoint_alone`), in path order.
    """
    report = CoffreReport(id_oper, id_coffre, keep=keep, wanted=set(wanted), wanted_lots=set(wanted_lots))
    walk = CoffreWalk(report, trust, schema, policy=policy)
    numbered, misnamed = numbered_lots(lots)
    report.failures += misnamed

    beside, misplaced = _evidence_by_checkpoint(id_oper, id_coffre, evidence)
    items = [
        (path, source, tuple(beside.pop(path, ())))
        for path, source in sorted(checkpoints, key=lambda entry: entry[0])
    ]
    if checkpoints_read is None:
        read = [walk.checkpoint(path, source, evidence=near) for path, source, near in items]
    else:
        read = []
        for one, tokens, cosignatures in checkpoints_read(items):
            report.checkpoints += 1
            report.tokens += tokens
            report.cosignatures += cosignatures
            read.append(one)
    if policy is not None and policy.witness_keys:
        _check_newest_cosigned(report, read, policy.witness_keys)
    if older_checkpoint is not None:
        read.append(walk.checkpoint(*older_checkpoint, in_archive=False))
    by_lot: dict[int | None, list[_ReadCheckpoint]] = {}
    for checkpoint in read:
        by_lot.setdefault(checkpoint.lot_number, []).append(checkpoint)
        if checkpoint.evidence is not None:
            report.wanted.add(checkpoint.evidence.tree_size)

    if summaries is None:
        read_here = (walk.summarize(number, path, source) for number, path, source in numbered)
    else:
        read_here = summaries(numbered)
    for summary in read_here:
        walk.link(summary, by_lot.get(summary.number, []))
    walk.finish(read)
    for checkpoint_path, items in sorted(beside.items()):
        for item in items:
            report.fail(
                item.path, "location", f"evidence beside no checkpoint: the archive has no {checkpoint_path}"
            )
    report.failures += misplaced
    return report


CheckpointItem = tuple[str, Source, tuple["_Evidence", ...]]
"""A checkpoint file of the archive (its path, its bytes or reader) and the evidence beside it."""
CheckpointRead = tuple["_ReadCheckpoint", int, int]
"""A checkpoint as read (:func:`read_checkpoint_alone`), with the tokens and cosignatures counted."""


def read_checkpoint_alone(
    id_oper: str,
    id_coffre: int,
    item: CheckpointItem,
    trust: TrustStore,
    policy: EvidencePolicy | None,
) -> CheckpointRead:
    """A checkpoint of the archive read and checked with the evidence beside it, as
    :meth:`CoffreWalk.checkpoint` does, outside any walk (a ``--jobs`` worker)."""
    counted = CoffreReport(id_oper, id_coffre)
    path, source, evidence = item
    read = _read_checkpoint(counted, path, source, trust, in_archive=True, evidence=evidence, policy=policy)
    return read, counted.tokens, counted.cosignatures


def checkpoint_items(
    id_oper: str,
    id_coffre: int,
    checkpoints: Iterable[tuple[str, Source]],
    evidence: Iterable[tuple[str, Source]],
) -> list[CheckpointItem]:
    """A coffre's checkpoint files in the order :func:`verify_coffre` reads them, each with the
    evidence beside it."""
    beside, _ = _evidence_by_checkpoint(id_oper, id_coffre, evidence)
    return [
        (path, source, tuple(beside.get(path, ())))
        for path, source in sorted(checkpoints, key=lambda entry: entry[0])
    ]


def numbered_lots(
    lots: Iterable[tuple[str, Source]],
) -> tuple[list[tuple[int, str, Source]], list[Failure]]:
    """A coffre's lot files as (number, path, source) in the order they are checked (by number,
    then path), and a ``location`` failure for each file not named like a lot."""
    numbered: list[tuple[int, str, Source]] = []
    misnamed = []
    for path, source in lots:
        parsed = parse_lot_name(path)
        if parsed is None:
            misnamed.append(
                Failure(path, "location", "not a lot file name (<IDOper>-<IDCoffre>-<10 digits>.xml)")
            )
            continue
        numbered.append((parsed[2], path, source))
    numbered.sort(key=lambda entry: (entry[0], entry[1]))
    return numbered, misnamed


def _evidence_by_checkpoint(
    id_oper: str, id_coffre: int, evidence: Iterable[tuple[str, Source]]
) -> tuple[dict[str, list[_Evidence]], list[Failure]]:
    """The evidence files by the path of the checkpoint they are about (the same folder, the same
    ``<IDOper>-<IDCoffre>-<lot>`` stem), and a ``location`` failure for each one elsewhere."""
    beside: dict[str, list[_Evidence]] = {}
    misplaced = []
    for path, source in sorted(evidence, key=lambda entry: entry[0]):
        name = parse_evidence_name(path)
        folder, _, _ = path.replace("\\", "/").rpartition("/")
        parts = folder.split("/")
        if name is None:
            misplaced.append(Failure(path, "location", "not an evidence file name"))
            continue
        want = [name.id_oper, str(name.id_coffre), "checkpoints"]
        if (name.id_oper, name.id_coffre) != (id_oper, id_coffre) or (len(parts) >= 3 and parts[-3:] != want):
            misplaced.append(
                Failure(
                    path,
                    "location",
                    f"evidence of coffre {name.id_oper}/{name.id_coffre} filed under {folder or '.'}, "
                    f"not {'/'.join(want)}",
                )
            )
            continue
        checkpoint = (
            f"{folder + '/' if folder else ''}{name.id_oper}-{name.id_coffre}-{name.lot_number:010d}.xml"
        )
        beside.setdefault(checkpoint, []).append(_Evidence(path, name.kind, source))
    return beside, misplaced


@dataclass(slots=True)
class LotSummary:
    """One lot as read and checked on its own (:func:`summarize_lot`): what :meth:`CoffreWalk.link`
    needs to check it against the lots before it and its checkpoints, small enough to come back
    from a ``--jobs`` worker (64 bytes an event: its leaf and its chain hash, packed)."""

    number: int
    path: str
    digest: bytes
    opened: list[Failure]
    """Reading and signature failures."""
    header: LotHeader | None
    """None when the lot could not be read (its failure then in :attr:`inner`)."""
    location: list[Failure] = field(default_factory=list)
    inner: list[Failure] = field(default_factory=list)
    """The lot's own checks: IDEvt continuity inside it, each event, its last chain hash, its root."""
    count: int = 0
    leaves: bytes = b""
    claimed: bytes = b""
    start: int = -1
    """The tree size the lot's header says it follows (``PremierIDEvt - 1``), :attr:`blocks`'s."""
    blocks: list[tuple[int, bytes]] = field(default_factory=list)
    """The lot's leaves as the coffre's tree takes them after :attr:`start` leaves (:func:`_blocks`)."""
    events: _Events | None = None
    """The lot's events (in the process that read it; not sent from a worker)."""


def summarize_lot(
    number: int,
    path: str,
    source: Source,
    trust: TrustStore,
    schema: SchemaCheck | None,
    id_oper: str,
    id_coffre: int,
    *,
    keep_events: bool = True,
) -> LotSummary:
    """Read lot ``number`` (from its file name) and check what needs no other lot: its signature,
    its format, where it is filed, its IDEvt, each event's identity, chain hash and schema, its
    last chain hash and its Merkle root; hash its leaves for the coffre's tree."""
    opened, events = _open_lot(path, source, trust)
    try:
        if events is None:
            if opened.root is None:
                raise LotFormatError("unreadable")
            events = _read_events_fast(opened.root, opened.canonical) if opened.canonical else None
        if events is None:
            events = _Events.of(read_lot(opened.root))
    except LotFormatError as exc:
        unreadable = [Failure(path, "format", str(exc))] if opened.root is not None else []
        return LotSummary(number, path, opened.digest, opened.failures, None, inner=unreadable)
    opened.root = opened.canonical = None
    h = events.header
    summary = LotSummary(number, path, opened.digest, opened.failures, h)
    location = CoffreReport(id_oper, id_coffre)
    _check_location(location, path, h, number, id_oper, id_coffre)
    summary.location = location.failures
    inner = CoffreReport(id_oper, id_coffre)
    _check_ids(inner, path, h, events.ids)
    leaves = _check_events(inner, path, h, events, schema)
    if events.ids and h.last_chain_hash != events.claimed[-1]:
        inner.fail(path, "chain", "HashChaineDernier is not the last event's chain hash", h.last_id_evt)
    if events.lot_root != h.merkle_root:
        inner.fail(path, "merkle root", "RacineMerkle does not recompute from the lot's events")
    summary.inner = inner.failures
    summary.count = len(events.ids)
    summary.leaves = b"".join(leaves)
    summary.claimed = b"".join(events.claimed)
    summary.start = h.first_id_evt - 1
    summary.blocks = _blocks(events.levels, summary.start)
    events.levels = []
    if keep_events:
        summary.events = events
    return summary


def _check_events(
    report: CoffreReport, path: str, h: LotHeader, events: _Events, schema: SchemaCheck | None
) -> list[bytes]:
    """Each event's identity, chain hash and schema (its failures in that order, event after
    event); the lot's leaves returned, its tree's levels and root put in ``events``.

    The chain hash recomputed for an event always starts from the chain hash the lot gives the
    event before it (the lot's HashChainePrecedent for the first): where that one did not
    recompute, it is reported and the chain goes on from it, so that each broken link is
    reported once. Hence each event's link is checked on its own, and the report's chain is
    the lot's own."""
    canon, claimed = events.canonical, events.claimed
    links = [h.previous_chain_hash, *claimed[:-1]]
    computed = _hashes(map(bytes.__add__, links, canon))
    found: dict[int, list[Failure]] = {}
    for index in events.strangers(h):
        oper, coffre, id_evt = (
            value if value is not None else "?" for value in events.stated(index) or (None,) * 3
        )
        found.setdefault(index, []).append(
            Failure(
                path,
                "event identity",
                f"the event's own IDOper/IDCoffre/IDEvt are {oper}/{coffre}/{id_evt}, "
                f"its lot's and Evenement's {h.id_oper}/{h.id_coffre}/{events.ids[index]}",
                events.ids[index],
            )
        )
    if computed != claimed:
        for index, (again, given) in enumerate(zip(computed, claimed, strict=True)):
            if again != given:
                found.setdefault(index, []).append(
                    Failure(
                        path,
                        "chain",
                        "the chain hash does not recompute from the event's bytes",
                        events.ids[index],
                    )
                )
    if schema is not None:
        for index, event in enumerate(canon):
            for error in schema(event)[:3]:
                found.setdefault(index, []).append(Failure(path, "schema", error, events.ids[index]))
    for index in sorted(found):
        report.failures += found[index]
    leaves = _hashes(map(_LEAF.__add__, canon))
    events.levels = _levels(leaves)
    events.lot_root = events.levels[-1][0] if leaves else merkle_root(leaves)
    return leaves


def _unpack(packed: bytes) -> list[bytes]:
    return [packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)]


@dataclass
class CoffreWalk:
    """The walk over one coffre's lots, one lot at a time in lot order, and where it stands.

    :func:`verify_coffre` runs it over a whole coffre and reports everything. The regulator API
    keeps one per coffre and extends it (:meth:`extend`) as new lots are sealed, moving on only
    past the lots that hold: its proofs come from the very checks ``coffre verify`` makes."""

    report: CoffreReport
    trust: TrustStore
    schema: SchemaCheck | None = None
    tree: MerkleAccumulator = field(default_factory=MerkleAccumulator)
    previous: _Previous = field(default_factory=_Previous)
    expected_number: int = 1
    expected_id: int = 1
    rebase: bool = False
    last_number: int = 0
    policy: EvidencePolicy | None = None
    last_events: _Events | None = field(default=None, repr=False, compare=False)
    """The header and events of the last lot :meth:`lot` read (the console's index writes their rows
    without parsing the lot again)."""

    @classmethod
    def resume(
        cls,
        report: CoffreReport,
        trust: TrustStore,
        *,
        lots: int,
        tree: MerkleAccumulator,
        lot_digest: bytes,
        chain_hash: bytes,
    ) -> CoffreWalk:
        """A walk that goes on after lot ``lots``, from what an earlier walk left: the coffre's tree
        (its frontier, checked by the next lot's ``RacineArbreCoffre``), the SHA-256 of lot ``lots``
        and its last chain hash."""
        report.forgotten = tree.size
        return cls(
            report,
            trust,
            tree=tree,
            previous=_Previous(lot_digest, chain_hash),
            expected_number=lots + 1,
            expected_id=tree.size + 1,
            last_number=lots,
        )

    def checkpoint(
        self, path: str, source: Source, *, in_archive: bool = True, evidence: Sequence[_Evidence] = ()
    ) -> _ReadCheckpoint:
        """Read a checkpoint file (counted in the report) and check the evidence beside it; its
        failures are reported with its lot."""
        return _read_checkpoint(
            self.report,
            path,
            source,
            self.trust,
            in_archive=in_archive,
            evidence=evidence,
            policy=self.policy,
        )

    def lot(self, number: int, path: str, source: Source, own: Sequence[_ReadCheckpoint]) -> None:
        """Check lot ``number`` (from its file name) against the lots before it, and against
        ``own``, its checkpoints; report what fails and move on past it whatever happens."""
        self.link(self.summarize(number, path, source), own)

    def summarize(self, number: int, path: str, source: Source) -> LotSummary:
        """What lot ``number`` says and how it holds on its own (:func:`summarize_lot`); the lot's
        events are kept in :attr:`last_events`."""
        summary = summarize_lot(
            number, path, source, self.trust, self.schema, self.report.id_oper, self.report.id_coffre
        )
        if summary.events is not None:
            self.last_events = summary.events
            summary.events = None
        return summary

    def link(self, summary: LotSummary, own: Sequence[_ReadCheckpoint]) -> None:
        """Check a lot's summary against the lots before it (in lot order) and against ``own``,
        its checkpoints; report its failures and move on past it whatever happens. The failures
        come in the order of a lot's checks, those of the lot on its own among them."""
        report, number, path = self.report, summary.number, summary.path
        report.lots += 1
        report.failures += summary.opened
        h = summary.header
        if h is None:
            report.failures += summary.inner
            # What follows cannot be linked to this lot: the next lot is checked on its own header,
            # and the coffre's tree (hence the checkpoints) can no longer be recomputed.
            self.expected_number, self.rebase = number + 1, True
            report.complete = False
            return
        self.last_number = max(self.last_number, number)
        if self.rebase:
            self.previous = _Previous(h.previous_lot_digest, h.previous_chain_hash)
            self.expected_id = h.first_id_evt
            self.rebase = False
        report.failures += summary.location
        if number != self.expected_number:
            expected = self.expected_number
            missing = "" if number < expected else f"; lot(s) {expected}..{number - 1} missing"
            report.fail(path, "lot sequence", f"lot {number} where lot {expected} was expected{missing}")
        self.expected_number = number + 1
        _check_links(report, path, h, self.previous)
        if h.first_id_evt != self.expected_id:
            report.fail(
                path,
                "IDEvt continuity",
                f"the lot starts at IDEvt {h.first_id_evt}, expected {self.expected_id}",
            )
        report.failures += summary.inner
        tree = self.tree
        before = tree.size
        self._record_within(summary, before)
        if before == summary.start:
            _fold_blocks(tree, summary.blocks)
        else:  # the lot is not where its header says: its blocks are not the tree's
            _lot_root_and_extend(tree, _unpack(summary.leaves))
        report.walked += summary.count
        if report.keep:
            report.leaves.extend_packed(summary.leaves)
            report.chain.extend_packed(summary.claimed)
        report.events += summary.count
        report.record_span((h.number, h.first_id_evt, h.last_id_evt))
        root = tree.root()
        if report.keep or tree.size in report.wanted or number in report.wanted_lots:
            report.roots[tree.size] = root
        if summary.count and tree.size in report.wanted:
            report.chains[tree.size] = summary.claimed[-HASH_SIZE:]
        if report.complete and report.tree_agrees and (h.tree_size != tree.size or h.tree_root != root):
            report.fail(
                path,
                "coffre tree",
                f"RacineArbreCoffre/TailleArbreCoffre do not recompute (size {tree.size} read); "
                "later trees are not compared",
            )
            report.tree_agrees = False

        # This lot's checkpoints: one must be in the archive, each must name this very file, and
        # agree with the archive.
        if not any(c.file_number is not None for c in own):
            report.fail(path, "checkpoint", f"no checkpoint in the archive for lot {number}")
        sealed = [c.evidence for c in own if c.evidence is not None]
        disagree = [
            c.opened.path for c in own if c.evidence is not None and c.evidence.lot_digest != summary.digest
        ]
        if disagree:
            report.fail(
                path,
                "lot digest",
                f"the file is not the one sealed: its SHA-256 is not the EmpreinteLot of {', '.join(disagree)}",
            )
        for checkpoint in own:
            if not checkpoint.checked:  # a second file for the same lot number is only compared
                _check_against_archive(report, checkpoint, h)
        self.previous = _Previous(
            summary.digest,
            h.last_chain_hash,
            frozenset(c.lot_digest for c in sealed),
            frozenset(c.chain_hash for c in sealed),
        )
        self.expected_id = max(self.expected_id, h.last_id_evt) + 1

    def _record_within(self, summary: LotSummary, before: int) -> None:
        """The tree's root and the chain hash at each wanted size inside this lot (not at its
        end: that one is recorded after it) when the report keeps only those (rare: checkpoints
        and witnesses name lot ends)."""
        report = self.report
        inside = [size for size in report.wanted if before < size < before + summary.count]
        if report.keep or not inside:
            return
        leaves = _unpack(summary.leaves)
        for size in inside:
            partial = self.tree.copy()
            _lot_root_and_extend(partial, leaves[: size - before])
            report.roots[size] = partial.root()
            at = (size - before - 1) * HASH_SIZE
            report.chains[size] = summary.claimed[at : at + HASH_SIZE]

    def finish(self, checkpoints: Iterable[_ReadCheckpoint]) -> None:
        """Check the checkpoints no lot checked: an older one, or one whose lot is not there."""
        for checkpoint in checkpoints:
            if not checkpoint.checked:
                _check_against_archive(self.report, checkpoint, None, self.last_number)

    def extend(
        self, number: int, path: str, source: Source, checkpoints: Iterable[tuple[str, Source]]
    ) -> list[Failure]:
        """Check the next lot with its checkpoint files, as :meth:`lot`, and move on past it only
        when nothing fails; otherwise the walk stays where it was (asking again checks the lot
        again) and the failures are returned."""
        report = self.report
        saved = (
            replace(self, tree=self.tree.copy()),
            (report.lots, report.events, report.checkpoints, report.complete, report.tree_agrees),
            (len(report.failures), len(report.leaves), len(report.chain), len(report.spans), report.walked),
        )
        try:
            self.lot(number, path, source, [self.checkpoint(p, s) for p, s in checkpoints])
            failures = report.failures[saved[2][0] :]
        except BaseException:
            self._restore(*saved)
            raise
        if failures:
            self._restore(*saved)
        return failures

    def _restore(
        self,
        walk: CoffreWalk,
        counts: tuple[int, int, int, bool, bool],
        sizes: tuple[int, int, int, int, int],
    ) -> None:
        report = self.report
        self.tree, self.previous = walk.tree, walk.previous
        self.expected_number, self.expected_id = walk.expected_number, walk.expected_id
        self.rebase, self.last_number = walk.rebase, walk.last_number
        report.lots, report.events, report.checkpoints, report.complete, report.tree_agrees = counts
        del report.failures[sizes[0] :]
        report.leaves.truncate(sizes[1])
        report.chain.truncate(sizes[2])
        del report.spans[sizes[3] :]
        report.walked = sizes[4]
        for size in [size for size in report.roots if size > walk.tree.size]:
            del report.roots[size]
        for size in [size for size in report.chains if size > walk.tree.size]:
            del report.chains[size]


def _check_location(
    report: CoffreReport, path: str, h: LotHeader, file_number: int, id_oper: str, id_coffre: int
) -> None:
    parts = path.replace("\\", "/").split("/")
    sealed_at = h.sealed_at
    if (h.id_oper, h.id_coffre) != (id_oper, id_coffre):
        report.fail(
            path,
            "location",
            f"a lot of coffre {h.id_oper}/{h.id_coffre} among the lots of {id_oper}/{id_coffre}",
        )
    if h.number != file_number:
        report.fail(path, "location", f"the file is named lot {file_number}, its header says lot {h.number}")
    if len(parts) >= 4 and parts[-4:-1] != [f"{sealed_at:%Y}", f"{sealed_at:%m}", f"{sealed_at:%d}"]:
        report.fail(
            path, "location", f"sealed on {sealed_at:%Y-%m-%d} but filed under {'/'.join(parts[-4:-1])}"
        )
    if len(parts) >= 6 and parts[-6:-4] != [h.id_oper, str(h.id_coffre)]:
        report.fail(
            path,
            "location",
            f"filed under {'/'.join(parts[-6:-4])}, its header says {h.id_oper}/{h.id_coffre}",
        )


def _check_links(report: CoffreReport, path: str, h: LotHeader, previous: _Previous) -> None:
    """The links to the previous lot. One that agrees with what the previous lot's checkpoints
    signed is sound even when the previous lot's file does not: that lot changed, and is reported."""
    if h.previous_lot_digest != previous.digest and h.previous_lot_digest not in previous.sealed_digests:
        report.fail(path, "lot link", "EmpreinteLotPrecedent is not the SHA-256 of the previous lot file")
    if h.previous_chain_hash != previous.chain and h.previous_chain_hash not in previous.sealed_chains:
        report.fail(
            path, "chain link", "HashChainePrecedent is not the chain hash the previous lot ends with"
        )


def _check_ids(report: CoffreReport, path: str, h: LotHeader, ids: list[int]) -> None:
    """The events are exactly PremierIDEvt..DernierIDEvt, each once, in order."""
    declared = range(h.first_id_evt, h.last_id_evt + 1)
    if ids == list(declared):
        return
    missing = sorted(set(declared) - set(ids))
    if missing:
        report.fail(path, "IDEvt continuity", f"missing from the lot ({len(missing)} missing)", missing[0])
        return
    at = next((found for want, found in zip(declared, ids, strict=False) if want != found), ids[-1])
    report.fail(
        path, "IDEvt continuity", f"events {_span(ids)} where {_span(list(declared))} were declared", at
    )


def _check_against_archive(
    report: CoffreReport, read: _ReadCheckpoint, lot: LotHeader | None, last_number: int = 0
) -> None:
    """A checkpoint's failures, then those of the evidence beside it."""
    _compare_with_archive(report, read, lot, last_number)
    report.failures += read.evidence_failures


def _compare_with_archive(
    report: CoffreReport, read: _ReadCheckpoint, lot: LotHeader | None, last_number: int = 0
) -> None:
    """A checkpoint must describe a prefix of the archive as read: the lot it names (``lot``, when
    the archive holds it), the same size, root and chain hash. Checked only when its signature
    holds; its own reading failures are reported here, so that they come with its lot."""
    read.checked = True
    report.failures += read.opened.failures
    checkpoint, path = read.evidence, read.opened.path
    if checkpoint is None or not report.complete:
        return  # no evidence, or already reported: a lot that cannot be read
    size = checkpoint.tree_size
    if checkpoint.last_id_evt != size:
        report.fail(
            path, "checkpoint", f"TailleArbre {size} and DernierIDEvt {checkpoint.last_id_evt} differ"
        )
        return
    held_events = report.held
    if size > held_events:
        of = "" if report.lots else f" of coffre {report.id_oper}/{report.id_coffre}"
        held = "of which the archive holds no lot" if not report.lots else f"the archive {held_events}"
        report.fail(
            path, "truncation", f"the checkpoint holds {size} events{of}, {held}: events were removed"
        )
        return
    if lot is None and checkpoint.lot_number > last_number:
        report.fail(
            path,
            "truncation",
            f"the checkpoint names lot {checkpoint.lot_number}, the archive ends at lot {last_number}: "
            "lots were removed",
        )
        return
    if lot is not None and size != lot.last_id_evt:
        report.fail(
            path,
            "checkpoint",
            f"the checkpoint of lot {lot.number} holds {size} events, lot {lot.number} ends at IDEvt {lot.last_id_evt}",
        )
        return
    if not report.tree_agrees:
        return  # the tree as read already differs from a signed one: that is reported
    root = report.roots.get(size)
    if root is None and (report.forgotten or not report.keep):  # leaves not (or no longer) held
        report.fail(path, "checkpoint", f"the tree of {size} events cannot be recomputed here")
        return
    if root is None:
        root = merkle_root(report.leaves[:size])
    if root != checkpoint.tree_root:
        report.fail(
            path,
            "rewriting",
            f"the archive's first {size} events are not those the checkpoint signed; later trees are not compared",
        )
        report.tree_agrees = False
    elif report.chain_at(size) != checkpoint.chain_hash:
        report.fail(
            path, "rewriting", f"the chain hash of IDEvt {size} is not the one the checkpoint signed", size
        )


def _span(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]} ({len(ids)})" if ids else "none"


__all__ = [
    "TSA_MAX_DELAY",
    "TSA_SKEW",
    "CheckpointItem",
    "CheckpointRead",
    "CoffreReport",
    "CoffreWalk",
    "EvidencePolicy",
    "Failure",
    "Hashes",
    "LotSummary",
    "SchemaCheck",
    "Source",
    "checkpoint_items",
    "numbered_lots",
    "read_checkpoint_alone",
    "summarize_lot",
    "verify_coffre",
]
