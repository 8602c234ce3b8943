"""The archive's documents: lots and checkpoints (byte-level description: docs/archive-format.md).

A **lot** holds consecutive recorded events of one coffre, each exactly as recorded (its
canonical bytes, exclusive C14N) with its chain hash, under a header that ties it to the
lot before (its digest, the chain hash before its first event) and to the coffre's whole
history (the RFC 9162 tree over every event of the coffre so far). A **checkpoint** is the
signed head of a coffre after a seal. Both are signed (enveloped XML-DSig) by
:mod:`coffre.domain.signing`; this module builds and reads the unsigned structure, no I/O.

Why the events are embedded as XML rather than as text or base64: an auditor reads them as
the regulator's events and can validate them against the schema set; the exclusive C14N of an
embedded event element gives back exactly the recorded bytes, since nothing around it in
the lot declares a namespace it would inherit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from lxml import etree

from .chain import GENESIS, HASH_SIZE
from .codec import hardened_parser
from .limits import ID_COFFRE_PATTERN, MAX_DEPTH
from .merkle import leaf_hash
from .merkle import root as merkle_root

FORMAT_VERSION = "1"
LOT_TAG = "LotCoffre"
CHECKPOINT_TAG = "PointDeControle"
MAX_DOCUMENT_BYTES = 512 << 20
"""The largest lot or checkpoint a reader accepts (a lot of 10,000 POJEU is about 30 MB)."""
MAX_LOT_EVENT_BYTES = MAX_DOCUMENT_BYTES // 2
"""The most canonical event bytes the sealer puts in one lot: the rest of
:data:`MAX_DOCUMENT_BYTES` is room for each event's ``Evenement`` wrapper (under 130 bytes), the
header and the signature, so a lot the vault writes is never one a reader refuses."""
MAX_LOT_EVENTS = 1_000_000
"""The most events one lot may hold (``COFFRE_LOT_MAX_EVENTS`` goes up to this)."""
MAX_DOCUMENT_DEPTH = 3 + MAX_DEPTH
"""Nesting of elements in a lot or checkpoint: ``LotCoffre/Evenements/Evenement`` and an event
of at most :data:`~coffre.domain.limits.MAX_DEPTH` levels (the signature needs 6)."""
_SIGNATURE = "{http://www.w3.org/2000/09/xmldsig#}Signature"
_TOO_DEEP = "boolean(" + "/*" * (MAX_DOCUMENT_DEPTH + 1) + ")"

NO_DIGEST = bytes(HASH_SIZE)
"""The previous-lot digest of lot 1."""

_LOT_NAME = re.compile(rf"(?P<oper>[0-9]{{4}})-(?P<coffre>{ID_COFFRE_PATTERN})-(?P<number>[0-9]{{10}})\.xml")


class LotFormatError(ValueError):
    """A lot or checkpoint that is not in the format of docs/archive-format.md."""


# -- names ---------------------------------------------------------------------------------


def lot_key(id_oper: str, id_coffre: int, number: int, sealed_at: datetime) -> str:
    """``<IDOper>/<IDCoffre>/<YYYY>/<MM>/<DD>/<IDOper>-<IDCoffre>-<lot 10 digits>.xml`` (UTC seal date)."""
    day = sealed_at.astimezone(UTC)
    return f"{id_oper}/{id_coffre}/{day:%Y/%m/%d}/{lot_file_name(id_oper, id_coffre, number)}"


def lot_file_name(id_oper: str, id_coffre: int, number: int) -> str:
    return f"{id_oper}-{id_coffre}-{number:010d}.xml"


def checkpoint_key(id_oper: str, id_coffre: int, number: int) -> str:
    """``<IDOper>/<IDCoffre>/checkpoints/<IDOper>-<IDCoffre>-<lot 10 digits>.xml``: one per seal, never replaced."""
    return f"{id_oper}/{id_coffre}/checkpoints/{lot_file_name(id_oper, id_coffre, number)}"


def parse_lot_name(name: str) -> tuple[str, int, int] | None:
    """(IDOper, IDCoffre, lot number) from a lot's or checkpoint's file name, or None."""
    found = _LOT_NAME.fullmatch(name.rsplit("/", 1)[-1])
    if found is None:
        return None
    return found["oper"], int(found["coffre"]), int(found["number"])


def numbered_lots(keys: Iterable[str]) -> list[tuple[int, str]]:
    """(lot number, key) of the lots among a listing of one coffre's archive keys, by number
    (its checkpoints, evidence and seal notes left out)."""
    return sorted(
        (parsed[2], key)
        for key in keys
        if "/checkpoints/" not in key and (parsed := parse_lot_name(key)) is not None
    )


def digest(document: bytes) -> bytes:
    """SHA-256 of a lot file's bytes, as the next lot's header names it."""
    return hashlib.sha256(document).digest()


def event_leaf(canonical: bytes) -> bytes:
    """The RFC 9162 leaf hash of an event: the leaf input is the event's canonical bytes."""
    return leaf_hash(canonical)


# -- lots ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LotEvent:
    id_evt: int
    chain_hash: bytes
    canonical: bytes
    stated: tuple[str | None, str | None, str | None] | None = None
    """When read from a lot: the texts of the event element's own ``IDOper``, ``IDCoffre`` and
    ``IDEvt`` children (None for one that is missing, repeated or holds more than text)."""


@dataclass(frozen=True, slots=True)
class LotHeader:
    id_oper: str
    id_coffre: int
    number: int
    first_id_evt: int
    last_id_evt: int
    previous_chain_hash: bytes
    """The chain hash of IDEvt ``first_id_evt - 1`` (GENESIS for the coffre's first lot)."""
    last_chain_hash: bytes
    previous_lot_digest: bytes
    """SHA-256 of the previous lot file (zeros for lot 1)."""
    merkle_root: bytes
    """RFC 9162 root over this lot's events."""
    tree_size: int
    """Events of the coffre from IDEvt 1 to this lot's last: equals ``last_id_evt``."""
    tree_root: bytes
    """RFC 9162 root over every event of the coffre up to this lot's last."""
    sealed_at: datetime

    @property
    def count(self) -> int:
        return self.last_id_evt - self.first_id_evt + 1


@dataclass(frozen=True, slots=True)
class Lot:
    header: LotHeader
    events: list[LotEvent]


_HEADER_FIELDS = (
    ("IDOper", "id_oper"),
    ("IDCoffre", "id_coffre"),
    ("NumeroLot", "number"),
    ("PremierIDEvt", "first_id_evt"),
    ("DernierIDEvt", "last_id_evt"),
    ("NombreEvt", None),
    ("HashChainePrecedent", "previous_chain_hash"),
    ("HashChaineDernier", "last_chain_hash"),
    ("EmpreinteLotPrecedent", "previous_lot_digest"),
    ("RacineMerkle", "merkle_root"),
    ("TailleArbreCoffre", "tree_size"),
    ("RacineArbreCoffre", "tree_root"),
    ("DateScellement", "sealed_at"),
)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


def format_time(moment: datetime) -> str:
    """UTC, millisecond precision, ``Z``: ``2026-11-22T16:00:00.123Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_lot(header: LotHeader, events: list[LotEvent]) -> etree._Element:
    """The unsigned lot element. The caller signs it (the signature is appended as the last child).

    Written as text and parsed once: the events are canonical bytes already, and a tree built
    element by element, each event parsed on its own, cost three times as much (17.7 ms a lot of
    1,000 POINSCRIT). Each event must be one element: the parsed tree is checked to hold one
    ``Evenement`` per event, each with its one element and nothing else, so that bytes that are not
    one element are refused (ValueError) rather than read into the lot's structure."""
    head = "".join(
        f"<{tag}>{_escaped(str(header.count) if name is None else _text(getattr(header, name)))}</{tag}>\n"
        for tag, name in _HEADER_FIELDS
    )
    parts = [f'<{LOT_TAG} version="{FORMAT_VERSION}">\n<Entete>\n{head}</Entete>\n<Evenements>\n'.encode()]
    for event in events:
        parts.append(
            b'<Evenement IDEvt="%d" HashChaine="%s">' % (event.id_evt, event.chain_hash.hex().encode())
        )
        parts.append(event.canonical)
        parts.append(b"</Evenement>\n")
    parts.append(f"</Evenements>\n</{LOT_TAG}>".encode())
    try:
        root = etree.fromstring(b"".join(parts), hardened_parser(keep_pis=True, huge_tree=True))
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"an event of the lot is not well-formed XML: {exc}") from exc
    body = root[1]
    if len(body) != len(events) or any(
        holder.tag != "Evenement" or len(holder) != 1 or holder.text is not None or holder[0].tail is not None
        for holder in body
    ):
        raise ValueError("an event of the lot is not one element")
    return root


_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _escaped(text: str) -> str:
    return text.translate(_ESCAPES)


def lot_header_from_events(
    *,
    id_oper: str,
    id_coffre: int,
    number: int,
    events: list[LotEvent],
    previous_chain_hash: bytes,
    previous_lot_digest: bytes,
    tree_root: bytes,
    sealed_at: datetime,
    leaves: list[bytes] | None = None,
) -> LotHeader:
    """The header of a lot holding ``events`` (consecutive, at least one); ``leaves``, their leaf
    hashes when the caller already has them."""
    if not events:
        raise ValueError("a lot holds at least one event")
    if leaves is None:
        leaves = [event_leaf(e.canonical) for e in events]
    return LotHeader(
        id_oper,
        id_coffre,
        number,
        events[0].id_evt,
        events[-1].id_evt,
        previous_chain_hash,
        events[-1].chain_hash,
        previous_lot_digest,
        merkle_root(leaves),
        events[-1].id_evt,
        tree_root,
        sealed_at,
    )


def read_lot(root: etree._Element) -> Lot:
    """The header and events of a (verified) lot element; :class:`LotFormatError` when malformed."""
    if root.tag != LOT_TAG or root.get("version") != FORMAT_VERSION:
        raise LotFormatError(f"not a version {FORMAT_VERSION} {LOT_TAG} (root is {root.tag!r})")
    parts = [child.tag for child in root if isinstance(child.tag, str) and child.tag != _SIGNATURE]
    if parts != ["Entete", "Evenements"]:
        raise LotFormatError(f"{LOT_TAG} holds {parts}, expected ['Entete', 'Evenements'] and the signature")
    head = _only(root, "Entete")
    values = _header_values(head, _HEADER_FIELDS)
    header = LotHeader(
        _oper(values["IDOper"]),
        _int(values["IDCoffre"], "IDCoffre", minimum=0),
        _int(values["NumeroLot"], "NumeroLot"),
        _int(values["PremierIDEvt"], "PremierIDEvt"),
        _int(values["DernierIDEvt"], "DernierIDEvt"),
        _hash(values["HashChainePrecedent"], "HashChainePrecedent"),
        _hash(values["HashChaineDernier"], "HashChaineDernier"),
        _hash(values["EmpreinteLotPrecedent"], "EmpreinteLotPrecedent"),
        _hash(values["RacineMerkle"], "RacineMerkle"),
        _int(values["TailleArbreCoffre"], "TailleArbreCoffre"),
        _hash(values["RacineArbreCoffre"], "RacineArbreCoffre"),
        parse_time(values["DateScellement"], "DateScellement"),
    )
    count = _int(values["NombreEvt"], "NombreEvt")
    if count > MAX_LOT_EVENTS:
        raise LotFormatError(f"NombreEvt {count}: a lot holds at most {MAX_LOT_EVENTS} events")
    if count != header.count:
        raise LotFormatError("NombreEvt does not match PremierIDEvt and DernierIDEvt")
    body = _only(root, "Evenements")
    if len(body) > MAX_LOT_EVENTS:
        raise LotFormatError(f"Evenements holds more than {MAX_LOT_EVENTS} children")
    return Lot(header, [_read_event(holder) for holder in body])


def _read_event(holder: etree._Element) -> LotEvent:
    """One ``Evenement``: its attributes, and the exclusive C14N (no comments, no inclusive
    prefixes) of the one event element it holds, taken on its own."""
    if holder.tag != "Evenement" or len(holder.attrib) != 2 or len(holder) != 1:
        raise LotFormatError(
            "Evenements holds Evenement elements with IDEvt and HashChaine, of one event each"
        )
    event = holder[0]
    if not isinstance(event.tag, str) or (holder.text or "").strip() or (event.tail or "").strip():
        raise LotFormatError("an Evenement holds its event element and nothing else")
    return LotEvent(
        _int(holder.get("IDEvt", ""), "IDEvt"),
        _hash(holder.get("HashChaine", ""), "HashChaine"),
        etree.tostring(event, method="c14n", exclusive=True, with_comments=False),
        _stated_identity(event),
    )


_IDENTITY = ("IDOper", "IDCoffre", "IDEvt")


def _stated_identity(event: etree._Element) -> tuple[str | None, str | None, str | None]:
    """The texts of the event's own ``IDOper``, ``IDCoffre`` and ``IDEvt`` (direct children only:
    a POJEU's players have an IDOper of their own); None for one that is missing, repeated or
    holds more than text."""
    found: dict[str, etree._Element | None] = {}
    for child in event:
        tag = child.tag
        if tag in _IDENTITY:
            found[tag] = None if tag in found else child
    return (
        _identity_text(found.get("IDOper")),
        _identity_text(found.get("IDCoffre")),
        _identity_text(found.get("IDEvt")),
    )


def _identity_text(element: etree._Element | None) -> str | None:
    if element is None or len(element):
        return None
    return element.text or ""


# -- checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id_oper: str
    id_coffre: int
    lot_number: int
    tree_size: int
    last_id_evt: int
    chain_hash: bytes
    tree_root: bytes
    lot_digest: bytes
    at: datetime


_CHECKPOINT_FIELDS = (
    ("IDOper", "id_oper"),
    ("IDCoffre", "id_coffre"),
    ("NumeroLot", "lot_number"),
    ("TailleArbre", "tree_size"),
    ("DernierIDEvt", "last_id_evt"),
    ("HashChaine", "chain_hash"),
    ("RacineArbre", "tree_root"),
    ("EmpreinteLot", "lot_digest"),
    ("Date", "at"),
)


def build_checkpoint(checkpoint: Checkpoint) -> etree._Element:
    root = etree.Element(CHECKPOINT_TAG, version=FORMAT_VERSION)
    root.text = "\n"
    for tag, name in _CHECKPOINT_FIELDS:
        etree.SubElement(root, tag).text = _text(getattr(checkpoint, name))
        root[-1].tail = "\n"
    return root


def checkpoint_after(header: LotHeader, lot_digest: bytes, at: datetime) -> Checkpoint:
    """The coffre's head once the lot of ``header`` (whose file has ``lot_digest``) is sealed."""
    return Checkpoint(
        header.id_oper,
        header.id_coffre,
        header.number,
        header.tree_size,
        header.last_id_evt,
        header.last_chain_hash,
        header.tree_root,
        lot_digest,
        at,
    )


def read_checkpoint(root: etree._Element) -> Checkpoint:
    if root.tag != CHECKPOINT_TAG or root.get("version") != FORMAT_VERSION:
        raise LotFormatError(f"not a version {FORMAT_VERSION} {CHECKPOINT_TAG} (root is {root.tag!r})")
    values = _header_values(root, _CHECKPOINT_FIELDS)
    return Checkpoint(
        _oper(values["IDOper"]),
        _int(values["IDCoffre"], "IDCoffre", minimum=0),
        _int(values["NumeroLot"], "NumeroLot"),
        _int(values["TailleArbre"], "TailleArbre"),
        _int(values["DernierIDEvt"], "DernierIDEvt"),
        _hash(values["HashChaine"], "HashChaine"),
        _hash(values["RacineArbre"], "RacineArbre"),
        _hash(values["EmpreinteLot"], "EmpreinteLot"),
        parse_time(values["Date"], "Date"),
    )


# -- reading helpers -------------------------------------------------------------------------


def check_document_size(size: int) -> None:
    """:class:`LotFormatError` for a file larger than any lot or checkpoint may be (checked
    before the file is read)."""
    if size > MAX_DOCUMENT_BYTES:
        raise LotFormatError(f"{size} bytes, more than the {MAX_DOCUMENT_BYTES} a lot may hold")


def parse_document(document: bytes) -> etree._Element:
    """Hardened parse of a lot or checkpoint: no DTD, no entity, no network, comments dropped
    (as the canonical form drops them), within :data:`MAX_DOCUMENT_BYTES` and
    :data:`MAX_DOCUMENT_DEPTH`. The parser is the one the signature check uses, so both see the
    same document and the same libxml2 limits."""
    check_document_size(len(document))
    if b"<!DOCTYPE" in document or b"<!ENTITY" in document:
        raise LotFormatError("a DTD or entity declaration")
    try:
        root = etree.fromstring(document, _parser())
    except etree.XMLSyntaxError as exc:
        raise LotFormatError(f"not well-formed XML: {exc}") from None
    if root.xpath(_TOO_DEEP):
        raise LotFormatError(f"elements nested more than {MAX_DOCUMENT_DEPTH} deep")
    return root


def _parser() -> etree.XMLParser:
    return hardened_parser(keep_pis=True)


def _only(parent: etree._Element, tag: str) -> etree._Element:
    found = [child for child in parent if child.tag == tag]
    if len(found) != 1:
        raise LotFormatError(f"{parent.tag} must hold exactly one {tag}")
    return found[0]


def _header_values(parent: etree._Element, fields: tuple[tuple[str, str | None], ...]) -> dict[str, str]:
    """Each field's value: the whole text of its element, as the canonical form has it (a comment
    inside it is already gone, its two sides joined). An attribute, a child element or a
    processing instruction inside a field would let readers disagree on its value: refused."""
    elements = [child for child in parent if isinstance(child.tag, str) and child.tag != _SIGNATURE]
    tags = [child.tag for child in elements]
    expected = [tag for tag, _ in fields]
    if tags != expected:
        raise LotFormatError(f"{parent.tag} holds {tags}, expected {expected}")
    for child in elements:
        if len(child) or child.attrib:
            raise LotFormatError(f"{child.tag} holds more than text")
    return {child.tag: child.text or "" for child in elements}


_INT = re.compile(r"0|[1-9][0-9]{0,18}").fullmatch
_HEX_HASH = re.compile(r"[0-9a-f]{64}").fullmatch


def _int(text: str, name: str, minimum: int = 1) -> int:
    if not _INT(text) or int(text) < minimum:
        raise LotFormatError(f"{name} is not an integer >= {minimum}: {text!r}")
    return int(text)


def _hash(text: str, name: str) -> bytes:
    if not _HEX_HASH(text):
        raise LotFormatError(f"{name} is not 64 lower-case hex digits: {text!r}")
    return bytes.fromhex(text)


def _oper(text: str) -> str:
    if not re.fullmatch(r"[0-9]{4}", text):
        raise LotFormatError(f"IDOper is not 4 digits: {text!r}")
    return text


def parse_time(text: str, name: str = "date") -> datetime:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z", text):
        raise LotFormatError(f"{name} is not a UTC time like 2026-11-22T16:00:00.123Z: {text!r}")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


__all__ = [
    "GENESIS",
    "NO_DIGEST",
    "Checkpoint",
    "Lot",
    "LotEvent",
    "LotFormatError",
    "LotHeader",
    "build_checkpoint",
    "build_lot",
    "check_document_size",
    "checkpoint_after",
    "checkpoint_key",
    "digest",
    "event_leaf",
    "lot_header_from_events",
    "lot_key",
    "parse_document",
    "parse_lot_name",
    "read_checkpoint",
    "read_lot",
]
