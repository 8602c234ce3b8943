"""Seal notes: what the vault writes, create-only, into the archive just before each lot.

``<IDOper>/<IDCoffre>/seals/<IDOper>-<IDCoffre>-<lot 10 digits>.json`` says which events lot N
holds (IDEvt range, chain hashes), when it is sealed (the lot's key depends on that date), and
the coffre's Merkle tree after it as its *frontier* (the roots of its perfect subtrees). It
serves two purposes:

* **A bounded start.** A vault that starts (or takes a coffre over from another replica) reads
  the newest note and lot, not the coffre's history: the frontier gives it the tree, the lot its
  digest and chain head. The note is not signed and need not be: its frontier must fold to the
  signed lot's ``RacineArbre`` and its range and chain hash must equal the lot's header, which
  the reader checks (:meth:`SealNote.tree`), so a note cannot make a vault continue a false tree.
* **Fencing.** A lot number is claimed once: the note is created with a create-only write
  before the lot. A second vault (a replica paused past its session and resumed) that claims
  the same number gets ``ObjectExists`` and stops; and since the lot's key is derived from the
  note, a lot whose note exists can only be written under one name.

A note whose lot is missing (the vault stopped between the two writes) is completed by whoever
seals that coffre next, with exactly the note's events and date.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .chain import HASH_SIZE
from .lot import LotHeader, format_time, lot_file_name, lot_key, parse_time
from .merkle import MerkleAccumulator

NOTE_FORMAT = "coffre-seal-note/1"
MAX_NOTE_BYTES = 16 << 10
"""A note is a few hundred bytes plus 65 per subtree root (at most 64): anything larger is refused."""


class SealNoteError(ValueError):
    """A seal note that cannot be read, or that does not match its lot."""


def seal_note_key(id_oper: str, id_coffre: int, number: int) -> str:
    """``<IDOper>/<IDCoffre>/seals/<IDOper>-<IDCoffre>-<lot 10 digits>.json``."""
    return f"{id_oper}/{id_coffre}/seals/{lot_file_name(id_oper, id_coffre, number)[:-4]}.json"


def newest_note_number(exists: Callable[[str], bool], id_oper: str, id_coffre: int) -> int:
    """The highest N with a seal note, given the archive's ``exists(key)`` (notes are 1..N without
    a gap): O(log N) calls, whatever the history."""

    def has(number: int) -> bool:
        return exists(seal_note_key(id_oper, id_coffre, number))

    if not has(1):
        return 0
    low, high = 1, 2
    while has(high):
        low, high = high, high * 2
    while high - low > 1:  # has(low), not has(high)
        middle = (low + high) // 2
        if has(middle):
            low = middle
        else:
            high = middle
    return low


def find_note(
    read: Callable[[str], bytes], exists: Callable[[str], bool], id_oper: str, id_coffre: int, id_evt: int
) -> SealNote | None:
    """The seal note whose lot holds ``id_evt``, given the archive's ``read(key)`` and
    ``exists(key)``: a binary search over the notes (their ranges follow each other), O(log n)
    reads; None when no note covers it. A note that cannot be read raises SealNoteError."""
    low, high = 1, newest_note_number(exists, id_oper, id_coffre)
    while low <= high:
        middle = (low + high) // 2
        key = seal_note_key(id_oper, id_coffre, middle)
        note = SealNote.decode(read(key), key)
        if id_evt < note.first_id_evt:
            high = middle - 1
        elif id_evt > note.last_id_evt:
            low = middle + 1
        else:
            return note
    return None


@dataclass(frozen=True, slots=True)
class SealNote:
    id_oper: str
    id_coffre: int
    number: int
    first_id_evt: int
    last_id_evt: int
    previous_chain_hash: bytes
    last_chain_hash: bytes
    tree_root: bytes
    frontier: tuple[bytes, ...]
    """The coffre's tree after this lot (size ``last_id_evt``), its subtree roots largest first."""
    sealed_at: datetime

    @property
    def key(self) -> str:
        return seal_note_key(self.id_oper, self.id_coffre, self.number)

    @property
    def lot_key(self) -> str:
        """The only key lot ``number`` may be written under."""
        return lot_key(self.id_oper, self.id_coffre, self.number, self.sealed_at)

    def tree(self) -> MerkleAccumulator:
        """The coffre's tree after this lot; SealNoteError unless its frontier folds to ``tree_root``."""
        try:
            tree = MerkleAccumulator.from_frontier(self.last_id_evt, self.frontier)
        except ValueError as exc:
            raise SealNoteError(f"{self.key}: {exc}") from None
        if tree.root() != self.tree_root:
            raise SealNoteError(f"{self.key}: its frontier does not fold to its tree root")
        return tree

    def check_lot(self, header: LotHeader) -> None:
        """SealNoteError unless ``header`` (the signed lot's) is the lot this note announced."""
        mine = (
            self.id_oper,
            self.id_coffre,
            self.number,
            self.first_id_evt,
            self.last_id_evt,
            self.previous_chain_hash,
            self.last_chain_hash,
            self.tree_root,
        )
        theirs = (
            header.id_oper,
            header.id_coffre,
            header.number,
            header.first_id_evt,
            header.last_id_evt,
            header.previous_chain_hash,
            header.last_chain_hash,
            header.tree_root,
        )
        if mine != theirs:
            raise SealNoteError(f"{self.key} does not describe the lot written under its number")

    def encode(self) -> bytes:
        return (
            json.dumps(
                {
                    "format": NOTE_FORMAT,
                    "IDOper": self.id_oper,
                    "IDCoffre": self.id_coffre,
                    "lot": self.number,
                    "first_IDEvt": self.first_id_evt,
                    "last_IDEvt": self.last_id_evt,
                    "previous_chain_hash": self.previous_chain_hash.hex(),
                    "last_chain_hash": self.last_chain_hash.hex(),
                    "tree_size": self.last_id_evt,
                    "tree_root": self.tree_root.hex(),
                    "frontier": [h.hex() for h in self.frontier],
                    "sealed_at": format_time(self.sealed_at),
                },
                indent=1,
            ).encode()
            + b"\n"
        )

    @classmethod
    def decode(cls, data: bytes, key: str | None = None) -> SealNote:
        where = key or "a seal note"
        if len(data) > MAX_NOTE_BYTES:
            raise SealNoteError(f"{where} is {len(data)} bytes, more than {MAX_NOTE_BYTES}")
        try:
            doc = json.loads(data)
            if doc.get("format") != NOTE_FORMAT:
                raise SealNoteError(f"{where}: format {doc.get('format')!r}, not {NOTE_FORMAT}")
            note = cls(
                id_oper=_text(doc["IDOper"]),
                id_coffre=_natural(doc["IDCoffre"]),
                number=_natural(doc["lot"], 1),
                first_id_evt=_natural(doc["first_IDEvt"], 1),
                last_id_evt=_natural(doc["last_IDEvt"], 1),
                previous_chain_hash=_hash(doc["previous_chain_hash"]),
                last_chain_hash=_hash(doc["last_chain_hash"]),
                tree_root=_hash(doc["tree_root"]),
                frontier=tuple(_hash(h) for h in _list(doc["frontier"])),
                sealed_at=parse_time(_text(doc["sealed_at"]), "sealed_at"),
            )
            if doc.get("tree_size") != note.last_id_evt or note.first_id_evt > note.last_id_evt:
                raise SealNoteError(f"{where}: its IDEvt range or tree size does not hold together")
        except SealNoteError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SealNoteError(f"{where} cannot be read: {exc}") from None
        if key is not None and key != note.key:
            raise SealNoteError(
                f"{key} holds the note of lot {note.number} of {note.id_oper}/{note.id_coffre}"
            )
        return note

    @classmethod
    def after(cls, header: LotHeader, tree: MerkleAccumulator) -> SealNote:
        """The note announcing the lot ``header`` describes, with the tree after it."""
        if tree.size != header.last_id_evt or tree.root() != header.tree_root:
            raise ValueError("the tree is not the one after this lot")
        return cls(
            header.id_oper,
            header.id_coffre,
            header.number,
            header.first_id_evt,
            header.last_id_evt,
            header.previous_chain_hash,
            header.last_chain_hash,
            header.tree_root,
            tree.frontier,
            header.sealed_at,
        )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _natural(value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{value!r} is not an integer of at least {minimum}")
    return value


def _hash(value: object) -> bytes:
    raw = bytes.fromhex(_text(value))
    if len(raw) != HASH_SIZE:
        raise ValueError(f"a hash is {HASH_SIZE} bytes, not {len(raw)}")
    return raw


def _list(value: object) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list")
    return value
