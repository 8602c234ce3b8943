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
  one *skeleton* (:func:`_fragment`) of the coffre's regular expression: a sequence of start, end
  and empty-element tags (``<a/>``, as lxml writes an empty element) with neither attribute nor
  prefix, which libxml2 parsed once as a single element no deeper than
  :data:`~coffre.domain.limits.MAX_DEPTH`, with text between any two tags made only of characters
  XML allows and that need no escaping, and the references ``&amp;`` ``&lt;`` ``&gt;`` ``&#xD;``
  (or ``&#13;``, as lxml writes it). Such an ``E`` is a well-formed element whose exclusive C14N
  is ``E`` with each ``<a/>`` written ``<a></a>`` and ``&#13;`` written ``&#xD;`` (C14N escapes
  exactly those four characters in text, and an element with no attribute nor namespace inherits
  nothing; :func:`_canonical`); the body is valid UTF-8 without U+FFFE or U+FFFF. Its own ``IDOper``,
  ``IDCoffre`` and ``IDEvt`` are its root's only children of those names, text only, and the
  expression spells them as the lot's header and the Evenement's ``N``: the identity is proven.
- So the file's tree is the tree of ``PREFIX REST`` (the *shell*, parsed by
  :func:`~coffre.domain.lot.parse_document` with all its checks) with those ``Evenement``
  elements inserted in ``Evenements`` after its text ``\\n``, each followed by ``\\n``; the
  document is as deep as the deeper of the two. Its exclusive C14N without the signature is the
  shell's with, right after ``<Evenements>\\n``, each line canonical: ``HashChaine`` before
  ``IDEvt`` (C14N sorts attributes), ``E`` in its canonical form. That is what the signature's
  digest is checked against (``splice``), with every other check of the signature made on the shell.

Anything else (a tag with attributes or a space, an event holding a line feed or a character
reference other than those, a comment, a CDATA section, an unknown shape beyond
:data:`MAX_SKELETONS`, a signature that does not hold) declines: the slow path then reads the
lot and reports.
"""

from __future__ import annotations

import binascii
import logging
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
log = logging.getLogger("coffre.verify")
MAX_SKELETONS = 256
"""Distinct event shapes one coffre's expression holds (the most recent ones); a lot with more is
read the slow way, and the next lots of its coffre too for a while (:data:`_resting`)."""
MAX_REST = 64
MAX_NEW_SKELETONS = 128
"""New shapes one lot may bring (learning costs about what reading it the slow way does)."""
MAX_TAGS = 4096
"""Tags in a coffre's shapes, all told: bounds the expression's size and its compilation (Python
compiles about 5,000 tags a second: learning big shapes pays only when they come back)."""
MAX_LEARNT_IN_A_ROW = 2
"""Lots in a row that may bring new shapes: a coffre whose shapes keep changing (a poker coffre's
hands) rests instead of compiling its expression again for every lot."""
MAX_BRANCHES = 48
"""Nested branches of the expression (shapes that part, meet no more, part again...)."""
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
_NAME = rb"[A-Za-z_][A-Za-z0-9._-]*"
_ATTRIBUTES = rb"(?: " + _NAME + rb'="[^"<>&\x00-\x1f]*")*'
_SKELETON = re.compile(rb"(?:</" + _NAME + rb">|<" + _NAME + _ATTRIBUTES + rb"/?>)+")
_TAG = re.compile(rb"<(/?)(" + _NAME + rb")(" + _ATTRIBUTES + rb")(/?)>")
"""A tag of a skeleton: end mark, name, attributes, empty-element mark."""
_EMPTY = re.compile(rb"<(" + _NAME + rb")(" + _ATTRIBUTES + rb")/>")
_FILE_CR = b"&#13;"
"""How lxml writes a carriage return in text (the sealer's serializer); C14N writes ``&#xD;``."""
_PLAIN = rb"[^<>&\x00-\x08\x0a-\x1f]*+"
_TEXT = _PLAIN + rb"(?:&(?:amp|lt|gt|#xD|#13);" + _PLAIN + rb")*+"
"""Text on one line as C14N or lxml's serializer writes it: no character C14N escapes nor any XML
refuses (tab is the only control character left; line feed is left out, the line is the event),
the four references C14N writes, and ``&#13;`` as lxml writes ``&#xD;``."""
_IDENTITY = (b"IDOper", b"IDCoffre", b"IDEvt")
_NONCHARACTERS = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")

_skeletons: dict[bytes, bool] = {}
"""Each skeleton met, and whether it holds (parsed once by libxml2)."""
_resting: dict[tuple[str, int], tuple[int, int]] = {}
"""A coffre whose last lot had too many shapes: (lots still to read the slow way, the next rest),
doubled up to :data:`MAX_REST` while its lots keep having too many (a lot that does not hold is
otherwise read twice)."""
_learnt: dict[tuple[str, int], int] = {}
"""Lots in a row of each coffre that brought new shapes."""
_patterns: dict[tuple[str, int], tuple[list[bytes], re.Pattern[bytes], re.Pattern[bytes]]] = {}
_has_empty: dict[tuple[str, int], bool] = {}
"""Whether a coffre's shapes hold an empty-element tag ``<a/>``."""
"""Each coffre's skeletons and its line expressions: with text as :data:`_TEXT`, and as
:data:`_PLAIN` for a body without ``&`` (the same lines, matched about a sixth faster)."""


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
    except Exception:  # an accelerator: whatever goes wrong, the slow path decides
        log.warning("a lot read from its bytes failed; read it the slow way", exc_info=True)
        return None


def _read(document: bytes, trust: TrustStore) -> SignedLot:
    check_document_size(len(document))
    prefix = _PREFIX.match(document)
    if prefix is None:
        raise _Decline
    start = prefix.end()
    end = document.rfind(_BODY_END, start)  # any cut whose body the lines tile will do (below)
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
    canonical_events = _canonical(body, events, _has_empty.get((header.id_oper, header.id_coffre), True))
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
        parts[1::7], parts[3::7], parts[5::7] = hashes, ids_text, canonical_events
        return canonical[:cut] + b"".join(parts) + canonical[cut:]

    at = parse_time(root.findtext("Entete/DateScellement") or "", "DateScellement")
    verify_canonical(shell, trust, at, parsed=root, take=True, splice=splice)
    packed = binascii.unhexlify(b"".join(hashes))
    return SignedLot(
        header,
        list(map(int, ids_text)),
        [packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)],
        canonical_events,
    )


def _canonical(body: bytes, events: list[bytes], empty: bool) -> list[bytes]:
    """Each event's exclusive C14N from its bytes in the file, which differ only where lxml's
    serializer writes an empty element ``<a/>`` (C14N: ``<a></a>``) and a carriage return
    ``&#13;`` (C14N: ``&#xD;``); any ``<`` in an event is a tag, so every ``<a/>`` is one, and
    only the coffre's shapes with one (``empty``) can hold one."""
    if not empty and (b"&" not in body or _FILE_CR not in body):  # not "/>" in body: 1 µs an event
        return events
    return [
        _EMPTY.sub(rb"<\1\2></\1>", event).replace(_FILE_CR, b"&#xD;")
        if b"/>" in event or _FILE_CR in event
        else event
        for event in events
    ]


def _events(header: LotHeader, body: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """(IDEvt, HashChaine, event) of each line the coffre's expression matches; the coffre's
    skeletons are learnt from ``body`` when its lines do not all match (then matched again)."""
    key = (header.id_oper, header.id_coffre)
    resting = _resting.get(key)
    if resting is not None and resting[0] > 0:
        _resting[key] = (resting[0] - 1, resting[1])
        raise _Decline
    known = _patterns.get(key)
    plain = b"&" not in body
    if known is not None:
        found = known[2 if plain else 1].findall(body)
        if len(found) == header.count:  # the caller checks that they tile the body
            _learnt.pop(key, None)
            return found
    in_a_row = _learnt.get(key, 0)
    events = _ANY_LINE.findall(body)
    mine = list(dict.fromkeys(_TEXT_RUN.sub(b"><", b"\n".join(events)).split(b"\n")))
    before = set(known[0]) if known is not None else set()
    tags = [shape.count(b"<") for shape in mine]
    if (
        len(mine) > MAX_SKELETONS
        or sum(tags) > MAX_TAGS
        or sum(1 for shape in mine if shape not in before) > MAX_NEW_SKELETONS
        or in_a_row >= MAX_LEARNT_IN_A_ROW
    ):
        rest = min(2 * resting[1], MAX_REST) if resting is not None else 1
        _resting[key] = (rest, rest)
        _learnt.pop(key, None)
        raise _Decline
    _resting.pop(key, None)
    if not all(_holds(shape) for shape in mine):
        raise _Decline
    if set(mine) <= before:
        raise _Decline  # no new shape: the lines that did not match do not hold
    shapes, room = list(mine), MAX_TAGS - sum(tags)
    for shape in reversed(known[0] if known is not None else []):  # then the most recent others
        if shape not in mine and len(shapes) < MAX_SKELETONS and shape.count(b"<") <= room:
            shapes.insert(0, shape)
            room -= shape.count(b"<")
    if len(_patterns) > 1024:
        _patterns.clear()
        _has_empty.clear()
    patterns = [_expression(shapes, header, text) for text in (_TEXT, _PLAIN)]
    _patterns[key] = (shapes, *patterns)
    _has_empty[key] = any(b"/>" in shape for shape in shapes)
    _learnt[key] = in_a_row + 1
    return patterns[1 if plain else 0].findall(body)


def _holds(shape: bytes) -> bool:
    """Whether a skeleton is one element of tags alone, as libxml2 parses it, no deeper than
    MAX_DEPTH, in canonical form but for ``<a/>`` (its exclusive C14N is itself with each ``<a/>``
    written ``<a></a>``: attributes sorted, quoted and escaped as C14N does, no namespace), whose
    root has exactly one child of each identity name, text only and written ``<IDOper>``."""
    held = _skeletons.get(shape)
    if held is None:
        held = False
        if _SKELETON.fullmatch(shape):
            try:
                element = etree.fromstring(shape, hardened_parser(keep_pis=True))
            except etree.XMLSyntaxError:
                element = None
            held = (
                element is not None
                and _depth(shape) <= MAX_DEPTH
                and _identity_held(element)
                and _identity_written(shape)
                and etree.tostring(element, method="c14n", exclusive=True, with_comments=False)
                == _EMPTY.sub(rb"<\1\2></\1>", shape)
            )
        if len(_skeletons) > 4096:
            _skeletons.clear()
        _skeletons[shape] = held
    return held


def _identity_held(element: etree._Element) -> bool:
    """The root has exactly one child of each identity name, without children nor attributes
    (and, checked by the caller, written ``<IDOper>``, not ``<IDOper/>``: its start tag is then
    followed by its end tag, where :func:`_expression` spells its text)."""
    for name in _IDENTITY:
        children = [child for child in element if child.tag == name.decode()]
        if len(children) != 1 or len(children[0]) or children[0].attrib:
            return False
    return True


def _identity_written(shape: bytes) -> bool:
    """The root's children of an identity name are written with a start and an end tag (an
    empty-element tag ``<IDOper/>`` would not be spelt by :func:`_expression`)."""
    depth = 0
    for tag in _TAG.finditer(shape):
        if tag[4]:
            if depth == 1 and tag[2] in _IDENTITY:
                return False
            continue
        depth += -1 if tag[1] else 1
    return True


def _depth(shape: bytes) -> int:
    depth = deepest = 0
    for tag in _TAG.finditer(shape):
        if tag[4]:  # <a/>
            deepest = max(deepest, depth + 1)
            continue
        depth += -1 if tag[1] else 1
        deepest = max(deepest, depth)
    return deepest


def _expression(shapes: list[bytes], header: LotHeader, text: bytes) -> re.Pattern[bytes]:
    """The coffre's line expression: the Evenement's start tag (IDEvt: group 1, HashChaine:
    group 2), one of ``shapes`` (group 3) and the Evenement's end tag. Each shape is its tags with
    ``text`` between any two, the root's IDOper, IDCoffre and IDEvt spelt as the lot's and the
    Evenement's (group 1); the shapes are merged tag by tag into a tree (a trie), so that what
    they share is matched once and a branch is taken on its first tag."""
    spelt = {
        b"IDOper": re.escape(header.id_oper.encode()),
        b"IDCoffre": str(header.id_coffre).encode(),
        b"IDEvt": rb"\1",
    }
    trie: dict[bytes, dict] = {}
    for shape in shapes:
        tags = list(_TAG.finditer(shape))
        node = trie
        depth = 0
        for index, tag in enumerate(tags):
            token = re.escape(tag[0])
            if not tag[4]:
                depth += -1 if tag[1] else 1
            if index + 1 < len(tags):
                identity = not tag[1] and not tag[4] and depth == 2 and tag[2] in spelt
                token += spelt[tag[2]] if identity else text
            node = node.setdefault(token, {})

    # the trie written children first (no recursion: a shape may have thousands of tags)
    order, stack = [], [trie]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.values())
    written: dict[int, tuple[bytes, int]] = {}
    for node in reversed(order):
        if not node:
            written[id(node)] = (b"", 0)
            continue
        branches = [(token + written[id(child)][0], written[id(child)][1]) for token, child in node.items()]
        nested = max(depth for _, depth in branches)
        if len(branches) == 1:
            written[id(node)] = branches[0]
        else:
            joined = b"(?:" + b"|".join(branch for branch, _ in branches) + b")"
            written[id(node)] = (joined, nested + 1)
    expression, nested = written[id(trie)]
    if nested > MAX_BRANCHES:
        raise _Decline
    return re.compile(
        rb'<Evenement IDEvt="([1-9][0-9]{0,18})" HashChaine="([0-9a-f]{64})">('
        + expression
        + rb")</Evenement>\n"
    )


__all__ = ["MAX_SKELETONS", "SignedLot", "read_signed_lot"]
