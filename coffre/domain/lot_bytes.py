"""A signed lot checked from its file's bytes, without libxml2's tree of its events.

``coffre verify`` spends most of its time in libxml2: parsing a whole lot, then canonicalizing
it for the signature's digest (about 9 µs an event of 480 bytes on a loaded machine, where
the target is 10 µs an event for everything). A lot as the sealer writes it does not need that:
its events are already in their canonical form, one per line. :func:`read_signed_lot` checks the
lot the way :func:`coffre.domain.signing.verify_canonical` and :func:`coffre.domain.lot.read_lot`
do, with the same outcome, or declines (returns None) and the caller reads the lot the usual way.

The proof that it is the same outcome, for a lot it accepts:

- The file is ``PREFIX BODY REST``. ``PREFIX`` (:data:`_PREFIX`) is the XML declaration, the root's
  start tag, the header (each field one element of plain text: digits, letters, ``:.-``) and
  ``<Evenements>\\n``: no comment, CDATA, processing instruction, reference or namespace, so it is
  its own canonical form and the point after it is inside the content of ``Evenements``.
- ``BODY`` is tiled by lines ``<Evenement IDEvt="N" HashChaine="H">E</Evenement>\\n`` (the match
  lengths sum to its length), ``N`` and ``H`` as :func:`read_lot` accepts them. Each ``E`` matches
  one *skeleton* (:func:`_fragment`) of the coffre's regular expression: a sequence of start and
  end tags with neither attribute nor prefix, which libxml2 parsed once as a single element no
  deeper than :data:`~coffre.domain.limits.MAX_DEPTH`, with text between any two tags made only of
  characters XML allows and that need no escaping, and the references ``&amp;`` ``&lt;`` ``&gt;``
  ``&#xD;``. Such an ``E`` is a well-formed element whose exclusive C14N is ``E`` itself (C14N
  escapes exactly those four characters in text, and an element with no attribute nor namespace
  inherits nothing); the body is valid UTF-8 without U+FFFE or U+FFFF. Its own ``IDOper``,
  ``IDCoffre`` and ``IDEvt`` are its root's only children of those names, text only, and the
  expression spells them as the lot's header and the Evenement's ``N``: the identity is proven.
- So the file's tree is the tree of ``PREFIX REST`` (the *shell*, parsed by
  :func:`~coffre.domain.lot.parse_document` with all its checks) with those ``Evenement``
  elements inserted in ``Evenements`` after its text ``\\n``, each followed by ``\\n``; the
  document is as deep as the deeper of the two. Its exclusive C14N without the signature is the
  shell's with, right after ``<Evenements>\\n``, each line canonical: ``HashChaine`` before
  ``IDEvt`` (C14N sorts attributes), ``E`` as it is. That is what the signature's digest is
  checked against (``splice``), with every other check of the signature made on the shell.

Anything else (a tag with attributes, an empty-element tag ``<a/>`` as lxml writes it, an event
holding a line feed or ``&#13;``, a comment, an unknown shape beyond :data:`MAX_SKELETONS`, a
signature that does not hold) declines: the slow path then reads the lot and reports.
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass

from lxml import etree

from .codec import hardened_parser
from .limits import MAX_DEPTH
from .lot import (
    MAX_LOT_EVENTS,
    LotFormatError,
    LotHeader,
    check_document_size,
    parse_document,
    parse_time,
    read_lot,
)
from .signing import SignatureInvalid, TrustStore, verify_canonical

HASH_SIZE = 32
MAX_SKELETONS = 64
"""Distinct event shapes one coffre's expression holds; a lot with more is read the slow way."""
MAX_EVENT_BYTES = 1 << 20
"""An event longer than this is read the slow way (libxml2's limits on a text node are far above)."""

_DECLARATION = b"<?xml version='1.0' encoding='UTF-8'?>\n"
_PREFIX = re.compile(
    rb"(?:<\?xml version='1\.0' encoding='UTF-8'\?>\n)?"
    rb'(<LotCoffre version="1">\n<Entete>\n(?:<([A-Za-z]+)>[0-9A-Za-z:.-]*</\2>\n){1,32}</Entete>\n'
    rb"<Evenements>\n)"
)
_BODY_END = b"</Evenements>"
_LINE_START = b'<Evenement IDEvt="'
_LINE_FIXED = len(b'<Evenement IDEvt="" HashChaine="">') + 64 + len(b"</Evenement>\n")
_ANY_LINE = re.compile(
    rb'<Evenement IDEvt="[1-9][0-9]{0,18}" HashChaine="[0-9a-f]{64}">([^\n]*)</Evenement>\n'
)
_TEXT_RUN = re.compile(rb">[^<\n]+<")
_SKELETON = re.compile(rb"(?:</?[A-Za-z_][A-Za-z0-9._-]*>)+")
_TAG = re.compile(rb"</?([A-Za-z_][A-Za-z0-9._-]*)>")
_PLAIN = rb"[^<>&\x00-\x08\x0a-\x1f]*+"
_TEXT = _PLAIN + rb"(?:&(?:amp|lt|gt|#xD);" + _PLAIN + rb")*+"
"""Text in canonical form on one line: no character C14N escapes nor any XML refuses (tab is the
only control character left; line feed is left out, the line is the event), the four references
C14N writes."""
_IDENTITY = (b"IDOper", b"IDCoffre", b"IDEvt")
_NONCHARACTERS = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")

_skeletons: dict[bytes, bool] = {}
"""Each skeleton met, and whether it holds (parsed once by libxml2)."""
_patterns: dict[tuple[str, int], tuple[list[bytes], re.Pattern[bytes]]] = {}
"""Each coffre's skeletons and its line expression."""


class _Decline(Exception):
    """The lot is not one this reader can prove it reads as the slow path does."""


@dataclass(frozen=True, slots=True)
class SignedLot:
    """A lot whose signature holds, read from its bytes: its header and its events as parallel
    lists (IDEvt, chain hash as the lot gives it, canonical bytes), each event's own identity the
    lot's and the Evenement's."""

    header: LotHeader
    ids: list[int]
    claimed: list[bytes]
    canonical: list[bytes]


def read_signed_lot(document: bytes, trust: TrustStore) -> SignedLot | None:
    """The lot in ``document`` when its signature holds and it is proven to read as
    :func:`read_lot` reads it (see the module's docstring); None otherwise, the caller then reads
    it the slow way (which also reports what is wrong with it)."""
    try:
        return _read(document, trust)
    except (_Decline, LotFormatError, SignatureInvalid):
        return None


def _read(document: bytes, trust: TrustStore) -> SignedLot:
    check_document_size(len(document))
    prefix = _PREFIX.match(document)
    if prefix is None:
        raise _Decline
    start = prefix.end()
    end = document.find(_BODY_END, start)
    if end < 0:
        raise _Decline
    body = document[start:end]
    shell = document[:start] + document[end:]
    root = parse_document(shell)
    header = read_lot(root).header
    found = _events(header, body)
    ids_text = [event[0] for event in found]
    hashes = [event[1] for event in found]
    events = [event[2] for event in found]
    if len(found) > MAX_LOT_EVENTS:
        raise _Decline
    if _LINE_FIXED * len(found) + sum(map(len, ids_text)) + sum(map(len, events)) != len(body):
        raise _Decline  # the lines do not tile the body
    if events and max(map(len, events)) > MAX_EVENT_BYTES:
        raise _Decline
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise _Decline from None
        if any(sequence in body for sequence in _NONCHARACTERS):
            raise _Decline
    canonical_prefix = prefix[1]

    def splice(canonical: bytes) -> bytes:
        cut = len(canonical_prefix)
        if canonical[:cut] != canonical_prefix or not canonical.startswith(_BODY_END, cut):
            raise _Decline
        parts = [b'<Evenement HashChaine="', b"", b'" IDEvt="', b"", b'">', b"", b"</Evenement>\n"]
        parts *= len(found)
        parts[1::7], parts[3::7], parts[5::7] = hashes, ids_text, events
        return canonical[:cut] + b"".join(parts) + canonical[cut:]

    at = parse_time(root.findtext("Entete/DateScellement") or "", "DateScellement")
    verify_canonical(shell, trust, at, parsed=root, take=True, splice=splice)
    packed = binascii.unhexlify(b"".join(hashes))
    return SignedLot(
        header,
        list(map(int, ids_text)),
        [packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)],
        events,
    )


def _events(header: LotHeader, body: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """(IDEvt, HashChaine, event) of each line the coffre's expression matches; the coffre's
    skeletons are learnt from ``body`` when its lines do not all match (then matched again)."""
    key = (header.id_oper, header.id_coffre)
    known = _patterns.get(key)
    if known is not None:
        found = known[1].findall(body)
        if len(found) == body.count(b"\n"):
            return found
    shapes = list(known[0]) if known is not None else []
    events = _ANY_LINE.findall(body)
    for shape in dict.fromkeys(_TEXT_RUN.sub(b"><", b"\n".join(events)).split(b"\n")):
        if shape not in shapes:
            if not _holds(shape):
                raise _Decline
            shapes.append(shape)
    if known is not None and len(shapes) == len(known[0]):
        raise _Decline  # no new shape: the lines that did not match do not hold
    if not shapes or len(shapes) > MAX_SKELETONS:
        raise _Decline
    if len(_patterns) > 1024:
        _patterns.clear()
    pattern = re.compile(
        rb'<Evenement IDEvt="([1-9][0-9]{0,18})" HashChaine="([0-9a-f]{64})">((?:'
        + b"|".join(_fragment(shape, header) for shape in shapes)
        + rb"))</Evenement>\n"
    )
    _patterns[key] = (shapes, pattern)
    return pattern.findall(body)


def _holds(shape: bytes) -> bool:
    """Whether a skeleton is one element of tags alone, as libxml2 parses it, no deeper than
    MAX_DEPTH, whose root has exactly one child of each identity name, text only."""
    held = _skeletons.get(shape)
    if held is None:
        held = False
        if _SKELETON.fullmatch(shape):
            try:
                element = etree.fromstring(shape, hardened_parser(keep_pis=True))
            except etree.XMLSyntaxError:
                element = None
            held = element is not None and _depth(shape) <= MAX_DEPTH and _identity_held(element)
        if len(_skeletons) > 4096:
            _skeletons.clear()
        _skeletons[shape] = held
    return held


def _identity_held(element: etree._Element) -> bool:
    for name in _IDENTITY:
        children = [child for child in element if child.tag == name.decode()]
        if len(children) != 1 or len(children[0]):
            return False
    return True


def _depth(shape: bytes) -> int:
    depth = deepest = 0
    for tag in _TAG.finditer(shape):
        depth += -1 if tag[0][1:2] == b"/" else 1
        deepest = max(deepest, depth)
    return deepest


def _fragment(shape: bytes, header: LotHeader) -> bytes:
    """The expression of one skeleton: its tags, canonical text between any two of them, the
    root's IDOper, IDCoffre and IDEvt spelt as the lot's and the Evenement's (group 1)."""
    spelt = {
        b"IDOper": re.escape(header.id_oper.encode()),
        b"IDCoffre": str(header.id_coffre).encode(),
        b"IDEvt": rb"\1",
    }
    tags = _TAG.findall(shape)
    tokens = [token[0] for token in _TAG.finditer(shape)]
    out = []
    depth = 0
    for index, token in enumerate(tokens):
        out.append(re.escape(token))
        closing = token[1:2] == b"/"
        depth += -1 if closing else 1
        if index + 1 == len(tokens):
            break
        identity = (
            not closing
            and depth == 2
            and tags[index] in spelt
            and tokens[index + 1] == b"</" + tags[index] + b">"
        )
        out.append(spelt[tags[index]] if identity else _TEXT)
    return b"".join(out)


__all__ = ["MAX_SKELETONS", "SignedLot", "read_signed_lot"]
