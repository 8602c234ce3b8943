"""The lot written as text and parsed once (:func:`coffre.domain.lot.build_lot`, issue 34) is the
tree coffre built element by element before, byte for byte once serialized; bytes that are not one
element are refused, never read into the lot's structure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from lxml import etree

from coffre.domain.codec import canonical_bytes, hardened_parser
from coffre.domain.lot import _HEADER_FIELDS, FORMAT_VERSION, LOT_TAG, LotEvent, _text, build_lot
from coffre.domain.lot import lot_header_from_events as header_of
from coffre.domain.normalize import normalize

from events import POINSCRIT, pojeu


def _by_elements(header, events: list[LotEvent]) -> etree._Element:
    """The lot as coffre built it before issue 34: element by element, each event parsed alone."""
    root = etree.Element(LOT_TAG, version=FORMAT_VERSION)
    root.text = "\n"
    head = etree.SubElement(root, "Entete")
    head.text = head.tail = "\n"
    for tag, name in _HEADER_FIELDS:
        field = etree.SubElement(head, tag)
        field.text = str(header.count) if name is None else _text(getattr(header, name))
        field.tail = "\n"
    body = etree.SubElement(root, "Evenements")
    body.text = "\n"
    body.tail = "\n"
    for event in events:
        holder = etree.SubElement(
            body, "Evenement", IDEvt=str(event.id_evt), HashChaine=event.chain_hash.hex()
        )
        holder.append(etree.fromstring(event.canonical, hardened_parser(keep_pis=True)))
        holder.tail = "\n"
    return root


def _events(canonicals: list[bytes]) -> list[LotEvent]:
    return [LotEvent(i + 1, bytes([i % 256]) * 32, c) for i, c in enumerate(canonicals)]


def _header(events: list[LotEvent], id_oper: str = "0099"):
    return header_of(
        id_oper=id_oper,
        id_coffre=7,
        number=3,
        events=events,
        previous_chain_hash=bytes(32),
        previous_lot_digest=b"\x01" * 32,
        tree_root=b"\x02" * 32,
        sealed_at=datetime(2026, 11, 29, 12, 0, 0, 123000, tzinfo=UTC),
    )


def test_the_lot_is_the_tree_built_element_by_element():
    tricky = normalize(POINSCRIT).model_copy(update={"Description": "a&b<c>\"d'\r\n\tf é 😀"})
    canonicals = [
        canonical_bytes(normalize(POINSCRIT), id_evt=1),
        canonical_bytes(tricky, id_evt=2),
        canonical_bytes(normalize(pojeu()), id_evt=3),
    ]
    events = _events(canonicals)
    for id_oper in ("0099", "a&b<c>"):  # header texts escaped too
        header = _header(events, id_oper)
        assert etree.tostring(build_lot(header, events)) == etree.tostring(_by_elements(header, events))


@pytest.mark.parametrize(
    "canonical",
    [
        b"<A></A><B></B>",  # two elements
        b'<A></A></Evenement><Evenement IDEvt="9" HashChaine="00"><B></B>',  # breaking out of its holder
        b"text only",
        b"<A></A>tail",
        b"<A>",  # not well formed
        b"<?pi x?><A></A>",
    ],
)
def test_bytes_that_are_not_one_element_are_refused(canonical):
    events = _events([canonical_bytes(normalize(POINSCRIT), id_evt=1), canonical])
    with pytest.raises(ValueError):
        build_lot(_header(events), events)
