"""Bytes in, bytes out: hardened XML and JSON parsing, schema-order serialization, and the
canonical bytes (exclusive XML C14N 1.0) that the vault hashes and archives."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lxml import etree

from .errors import Problem, ReasonCode, Rejected
from .limits import MAX_ATTRIBUTES, MAX_DEPTH, MAX_ELEMENTS
from .xmlmodel import XmlModel, canonical_text, to_data, to_element

DEFAULT_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """What one input may weigh. The default (1 MiB) holds a POJEU of a long hand many times over."""

    max_bytes: int = DEFAULT_MAX_BYTES


DEFAULT_LIMITS = Limits()

_local = threading.local()


def hardened_parser(*, keep_pis: bool = False, huge_tree: bool = False) -> etree.XMLParser:
    """One hardened lxml parser per thread and per kind (lxml parsers are not thread-safe).

    No DTD is loaded, no entity is substituted, nothing is fetched from the network, comments are
    dropped. Events drop processing instructions too; signed documents keep them
    (``keep_pis``: the canonical form, hence the digest, covers them). libxml2's limits on depth
    and text size stay on unless ``huge_tree`` (a lot of thousands of events).
    """
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get((keep_pis, huge_tree))
    if parser is None:
        parser = parsers[(keep_pis, huge_tree)] = etree.XMLParser(
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            dtd_validation=False,
            remove_comments=True,
            remove_pis=not keep_pis,
            huge_tree=huge_tree,
            collect_ids=False,
        )
    return parser


def _parser() -> etree.XMLParser:
    return hardened_parser()


def _reject(code: ReasonCode, message: str, path: str = "/") -> Rejected:
    return Rejected([Problem(code, path, message)])


def _over(what: str, limit: int, path: str = "/") -> Rejected:
    return _reject(ReasonCode.LIMIT_EXCEEDED, f"more than {limit} {what}: coffre's limit", path)


def check_size(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> None:
    if len(raw) > limits.max_bytes:
        raise _reject(ReasonCode.DOCUMENT_TOO_LARGE, f"{len(raw)} bytes, the limit is {limits.max_bytes}")


def parse_xml(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> etree._Element:
    """The root element of one XML document, or :class:`Rejected`."""
    root = read_xml(raw, limits)
    finish_xml(root)
    return root


def read_xml(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> etree._Element:
    """:func:`parse_xml`'s first half: the size, the DTD and the syntax checked, not yet coffre's
    structural limits. Whoever reads the tree calls :func:`finish_xml` first (or, as normalize's fast
    path, proves the limits kept by the way it reads)."""
    check_size(raw, limits)
    if b"<!" in raw and (b"<!DOCTYPE" in raw or b"<!ENTITY" in raw):
        raise _reject(ReasonCode.DTD_FORBIDDEN, "DTDs and entity declarations are not accepted")
    try:
        root = etree.fromstring(raw, _parser())
    except etree.XMLSyntaxError as exc:
        raise _reject(ReasonCode.MALFORMED_XML, str(exc)) from exc
    if root.getroottree().docinfo.doctype:
        raise _reject(ReasonCode.DTD_FORBIDDEN, "DTDs and entity declarations are not accepted")
    return root


def finish_xml(root: etree._Element) -> None:
    """:func:`parse_xml`'s second half: coffre's structural limits, then namespaces dropped."""
    _check_tree(root)
    if isinstance(root.tag, str) and root.tag.startswith("{"):
        _strip_namespaces(root)


_LT_IS_ONE_BYTE = frozenset({"UTF-8", "US-ASCII", "ASCII", "ISO-8859-1", "UTF-16", "UTF-16LE", "UTF-16BE"})
"""Encodings in which every ``<`` of the text is a byte 0x3C of the input (never, as in UTF-7, other
bytes)."""


def at_most_elements(root: etree._Element, raw: bytes, limit: int = MAX_ELEMENTS) -> bool:
    """Whether the document ``raw`` (parsed as ``root``) surely has at most ``limit`` elements, by
    counting its ``<`` bytes (each element starts with one), cheaper than the XPath count.
    False when unsure (an encoding where ``<`` may be written otherwise)."""
    encoding = (root.getroottree().docinfo.encoding or "").upper()
    return encoding in _LT_IS_ONE_BYTE and raw.count(b"<") <= limit


_TOO_MANY = f"count(//*) > {MAX_ELEMENTS}"
_TOO_DEEP = "/*" + "/*" * MAX_DEPTH  # an element at depth MAX_DEPTH + 1
_TOO_MANY_ATTRIBUTES = f"//@*[{MAX_ATTRIBUTES + 1}]"  # the attribute after the last allowed, on any element


def _tree_checks() -> dict[str, etree.XPath]:
    """The structural limits as XPath, evaluated in libxml2 (a tenth of a Python walk's time);
    compiled once per thread, as parsers are."""
    checks = getattr(_local, "tree_checks", None)
    if checks is None:
        checks = _local.tree_checks = {
            "any": etree.XPath(f"{_TOO_MANY} or boolean({_TOO_DEEP}) or boolean({_TOO_MANY_ATTRIBUTES})"),
            "elements": etree.XPath(_TOO_MANY),
            "depth": etree.XPath(f"boolean({_TOO_DEEP})"),
            "attributes": etree.XPath(f"({_TOO_MANY_ATTRIBUTES})[1]/.."),
        }
    return checks


def _check_tree(root: etree._Element) -> None:
    """coffre's structural limits (docs/input-contract.md), checked once over the parsed tree
    before anything is read from it: elements, depth, attributes per element. Names need no
    check of coffre's: libxml2 refuses one over 50,000 characters and problems cut what they quote."""
    checks = _tree_checks()
    if not checks["any"](root):
        return
    if checks["elements"](root):
        raise _over("elements", MAX_ELEMENTS)
    if checks["depth"](root):
        raise _over("levels of nesting", MAX_DEPTH)
    (crowded,) = checks["attributes"](root)
    raise _over("attributes on one element", MAX_ATTRIBUTES, root.getroottree().getpath(crowded))


def _check_json(value: Any) -> None:
    """The same limits for JSON: the members of objects and lists count as elements.

    Level by level (each level's containers gathered by C loops) for an input within the limits;
    one that is not is walked again depth first, as before, for the same refusal (a document over
    both limits is refused for whichever that walk meets first)."""
    if _within_json_limits(value):
        return
    _check_json_walk(value)


def _within_json_limits(value: Any) -> bool:
    level = [value] if isinstance(value, (dict, list)) else []
    nodes, depth = 0, 1
    while level:
        if depth > MAX_DEPTH:
            return False
        below: list[Any] = []
        for item in level:
            nodes += len(item)
            below += [
                child
                for child in (item.values() if item.__class__ is dict else item)
                if isinstance(child, (dict, list))
            ]
        if nodes > MAX_ELEMENTS:
            return False
        level = below
        depth += 1
    return True


def _check_json_walk(value: Any) -> None:
    nodes = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise _over("levels of nesting", MAX_DEPTH)
        nodes += len(item)
        if nodes > MAX_ELEMENTS:
            raise _over("elements", MAX_ELEMENTS)
        if isinstance(item, dict):
            item = item.values()
        stack.extend((child, depth + 1) for child in item)


def _strip_namespaces(root: etree._Element) -> None:
    """Events have no namespace in the schema set; a namespaced input is read by local names."""
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{"):
            el.tag = etree.QName(el).localname
    etree.cleanup_namespaces(root)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) == len(pairs):
        return result
    seen: set[str] = set()
    for key, _ in pairs:  # the first key met twice, as the object reads
        if key in seen:
            raise _reject(ReasonCode.DUPLICATE_KEY, f"key '{key}' appears twice in one object")
        seen.add(key)
    raise AssertionError("unreachable: a key repeats")


def _no_constant(name: str) -> Any:
    raise _reject(ReasonCode.MALFORMED_JSON, f"{name} is not a number an amount can hold")


def parse_json(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> Any:
    """JSON with exact decimals (numbers become ``Decimal``), refusing duplicate keys and NaN,
    within coffre's structural limits."""
    check_size(raw, limits)
    value = _load_json(raw)
    _check_json(value)
    return value


def _load_json(raw: bytes) -> Any:
    try:
        return json.loads(
            raw, parse_float=Decimal, parse_constant=_no_constant, object_pairs_hook=_no_duplicate_keys
        )
    except (ValueError, RecursionError) as exc:
        raise _reject(ReasonCode.MALFORMED_JSON, str(exc)) from exc


def sniff(raw: bytes) -> str:
    """``xml``, ``json`` or ``empty``/``unknown``: by the first significant byte."""
    head = raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if not head:
        return "empty"
    if head == b"<" or raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "xml"
    if head in (b"{", b"["):
        return "json"
    return "unknown"


# --------------------------------------------------------------------------- output


def canonical_bytes(model: XmlModel, *, id_evt: int | None = None) -> bytes:
    """Exclusive C14N 1.0 of the event in schema order: what the vault hashes and stores.

    ``id_evt`` writes that IDEvt in place of the model's (ingest's number, without copying the
    model). Written directly (:func:`~coffre.domain.xmlmodel.canonical_text`, a third of the time of
    building the tree and canonicalizing it); a text holding a character XML cannot carry takes
    lxml's path, which refuses it as it always did."""
    replace = None
    if id_evt is not None:
        if id_evt < 0:
            raise ValueError("IDEvt is a non-negative integer")
        replace = {"IDEvt": id_evt}
    text = canonical_text(model, replace)
    if _NOT_XML.search(text):
        return canonical_bytes_by_tree(model if replace is None else model.model_copy(update=replace))
    return text.encode()


def canonical_bytes_by_tree(model: XmlModel) -> bytes:
    """:func:`canonical_bytes` by lxml: the tree built, then canonicalized (the reference the tests
    hold the direct writer to)."""
    return etree.tostring(to_element(model), method="c14n", exclusive=True)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters no XML 1.0 document may hold (lxml refuses them in a tree)."""


def pretty_xml(model: XmlModel) -> bytes:
    """Indented, with an XML declaration: for people, never for hashing."""
    return etree.tostring(to_element(model), pretty_print=True, xml_declaration=True, encoding="UTF-8")


def to_json(model: XmlModel) -> bytes:
    """The canonical JSON form: ``{"POJEU": {...}}``, amounts as strings."""
    return json.dumps({model.xml_tag: to_data(model)}, ensure_ascii=False, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- files holding several events

_XML_DECLARATION = re.compile(rb"<\?xml[^>]*\?>")
_ENCODING = re.compile(rb"""encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_SPLIT_ROOT = "coffre-split"


def _lines_at_most_one(raw: bytes) -> bool:
    """Whether ``raw`` has at most one line that is not blank (as :func:`_split_json` counts them:
    ``bytes.splitlines`` cuts at CR and LF only): the text between its first and last non-blank
    bytes holds no line break."""
    inner = raw.strip()
    return b"\n" not in inner and b"\r" not in inner


def split_documents(raw: bytes) -> list[bytes]:
    """The events of a file that holds one or several, one after another.

    XML: top-level elements (XML declarations between them allowed); JSON: one object,
    a list of objects, or one object per line. A file that cannot be split is returned
    whole, so that normalizing it reports why.
    """
    kind = sniff(raw)
    if kind == "json":
        return _split_json(raw)
    if kind != "xml" or b"<!DOCTYPE" in raw or b"<!ENTITY" in raw:
        return [raw]
    declared = _ENCODING.search(raw[:200])
    try:
        text = _XML_DECLARATION.sub(b"", raw).decode(declared.group(1).decode() if declared else "utf-8")
        wrapper = etree.fromstring(f"<{_SPLIT_ROOT}>{text.lstrip(chr(0xFEFF))}</{_SPLIT_ROOT}>", _parser())
    except (etree.XMLSyntaxError, LookupError, UnicodeDecodeError):
        return [raw]
    events = [etree.tostring(child, encoding="UTF-8") for child in wrapper if isinstance(child.tag, str)]
    return events or [raw]


def _split_json(raw: bytes) -> list[bytes]:
    if raw.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" and _lines_at_most_one(raw):
        return [raw]  # one object, or one unreadable line: whole either way, without parsing it
    return _split_parsed_json(raw)


def _split_parsed_json(raw: bytes) -> list[bytes]:
    """:func:`_split_json` by parsing the file: a list's items, the lines of a file that is not one
    JSON document, else the file whole."""
    try:
        value = _load_json(raw)  # a file of many events: each is checked when normalized
    except Rejected:
        lines = [line for line in raw.splitlines() if line.strip()]
        return lines if len(lines) > 1 else [raw]
    if isinstance(value, list):
        return [json.dumps(item, default=str, ensure_ascii=False).encode() for item in value]
    return [raw]
