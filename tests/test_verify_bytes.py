"""coffre verify's lot read from its file's bytes (:mod:`coffre.domain.lot_bytes`): no libxml2 tree of
the events, no C14N of the lot. It must read exactly what the signature check and
:func:`coffre.domain.lot.read_lot` read from the parsed file, or decline (the walk then parses).

Checked here on the lots of tests/test_verify_fast.py shaped to make slicing go wrong, and on
files whose bytes were changed without changing what they mean (the signature still holds over
them: an empty-element tag, a character reference, a comment, a CDATA section, attributes in
another order or quoted otherwise...), on an event nested deeper than a lot may be, on shapes
learnt across lots and coffres, and on whole archives tampered with then signed again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import test_verify_fast as fast_tests
from lxml import etree
from test_archive import lots, resign
from test_verify_fast import CASES, SEALED, TAMPERS, c14n, lot_of, poinscrit, reports, signed_bytes

from coffre.domain import lot_bytes
from coffre.domain.codec import split_documents
from coffre.domain.limits import MAX_DEPTH
from coffre.domain.lot import parse_document, read_lot
from coffre.domain.signing import SignatureInvalid, TrustStore, verify_canonical

signer, pristine, archive = fast_tests.signer, fast_tests.pristine, fast_tests.archive
"""The fixtures of tests/test_verify_fast.py: the same key, the same archive."""


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test learns its coffre's shapes from nothing (they are kept per process)."""
    monkeypatch.setattr(lot_bytes, "_has_empty", {})
    monkeypatch.setattr(lot_bytes, "_patterns", {})
    monkeypatch.setattr(lot_bytes, "_resting", {})
    monkeypatch.setattr(lot_bytes, "_learnt", {})


def trust_of(signer) -> TrustStore:
    return TrustStore.from_pem_files([signer[1]])


def as_parsed(signer, document: bytes):
    """What the signature check and read_lot read from the parsed file (SignatureInvalid or
    LotFormatError when they refuse it)."""
    root, _ = verify_canonical(document, trust_of(signer), SEALED, parsed=parse_document(document), take=True)
    return read_lot(root)


def assert_reads_the_same(signer, document: bytes) -> bool:
    """The bytes reader declines, or reads what the parsed file holds; True when it read it."""
    lot = lot_bytes.read_signed_lot(document, trust_of(signer))
    try:
        slow = as_parsed(signer, document)
    except Exception as exc:  # refused when parsed: the bytes reader must have declined
        assert lot is None, exc
        return False
    if lot is None:
        return False
    assert lot.header == slow.header
    assert lot.ids == [e.id_evt for e in slow.events]
    assert lot.claimed == [e.chain_hash for e in slow.events]
    assert lot.canonical == [e.canonical for e in slow.events]
    h = slow.header
    # read: each event's own identity is the lot's and its Evenement's
    assert [e.stated for e in slow.events] == [
        (h.id_oper, str(h.id_coffre), str(e.id_evt)) for e in slow.events
    ]
    return True


def test_a_lot_as_the_sealer_writes_it_is_read_from_its_bytes(signer):
    assert assert_reads_the_same(signer, signed_bytes(signer, lot_of([poinscrit(i) for i in range(1, 6)])))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_bytes_reader_reads_what_read_lot_reads_or_declines(signer, case):
    canonicals, change, raw = CASES[case]
    document = signed_bytes(
        signer, lot_of(canonicals), change or (lambda root: None), raw or (lambda data: data)
    )
    assert_reads_the_same(signer, document)


def _event_text(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


# Changes to a lot file's bytes that leave its meaning (hence its C14N, hence the signature) as it
# was, or that make it another document: the bytes reader reads what the parsed file holds, or
# declines.
SAME_MEANING = {
    "an empty-element tag (as lxml writes it)": (b"<Vide></Vide>", b"", b""),
    "an empty-element tag with a space": (b"<Vide></Vide>", b"<Vide/>", b"<Vide />"),
    "an empty element as start and end tags": (b"<Vide></Vide>", b"<Vide/>", b"<Vide></Vide>"),
    "a character reference": (b"", b"<IDJoueur>p-2</IDJoueur>", b"<IDJoueur>&#112;-2</IDJoueur>"),
    "a hex character reference": (b"", b"<IDJoueur>p-2</IDJoueur>", b"<IDJoueur>&#x70;-2</IDJoueur>"),
    "a raw greater-than sign": (b"<T>a&gt;b</T>", b"a&gt;b", b"a>b"),
    "a raw quote as a reference": (b'<T>a"b</T>', b'a"b', b"a&quot;b"),
    "an apostrophe reference": (b"<T>a'b</T>", b"a'b", b"a&apos;b"),
    "a comment in an event": (b"", b"<IDJoueur>p-2</IDJoueur>", b"<IDJoueur>p-<!-- x -->2</IDJoueur>"),
    "a CDATA section": (b"", b"<IDJoueur>p-2</IDJoueur>", b"<IDJoueur><![CDATA[p-2]]></IDJoueur>"),
    "a processing instruction in an event": (
        b"",
        b"<IDJoueur>p-2</IDJoueur>",
        b"<IDJoueur>p-2<?pi x?></IDJoueur>",
    ),
    "a space in an end tag": (b"", b"</IDJoueur><", b"</IDJoueur ><"),
    "the holder's attributes in C14N order": (
        b"",
        b'<Evenement IDEvt="2" HashChaine="',
        b'<Evenement HashChaine="',
    ),
    "the holder's attributes in single quotes": (b"", b'<Evenement IDEvt="2"', b"<Evenement IDEvt='2'"),
    "a carriage return before a line feed": (
        b"",
        b'</Evenement>\n<Evenement IDEvt="3"',
        b'</Evenement>\r\n<Evenement IDEvt="3"',
    ),
    "a tab between two events": (
        b"",
        b'</Evenement>\n<Evenement IDEvt="3"',
        b'</Evenement>\n\t<Evenement IDEvt="3"',
    ),
    "a carriage return as lxml writes it": (b"<T>a&#xD;b</T>", b"", b""),
    "a carriage return as C14N writes it": (b"<T>a&#xD;b</T>", b"a&#13;b", b"a&#xD;b"),
    "a line feed in an event": (b"<T>a\nb</T>", b"", b""),
    "a tab in an event": (b"<T>a\tb</T>", b"", b""),
    "text with every escape": (b"<T>&lt;/Evenement&gt; &amp; &#xD; \xc3\xa9</T>", b"", b""),
    "whitespace between an event's elements": (b"<A> <B>1</B> </A>", b"", b""),
    "an XML declaration in double quotes": (
        b"",
        b"<?xml version='1.0' encoding='UTF-8'?>",
        b'<?xml version="1.0" encoding="UTF-8"?>',
    ),
    "attributes in C14N order": (b'<T a="1" b="2">x</T>', b"", b""),
    "attributes in another order": (b'<T a="1" b="2">x</T>', b'<T a="1" b="2">', b'<T b="2" a="1">'),
    "an attribute in single quotes": (b'<T a="1">x</T>', b'<T a="1">', b"<T a='1'>"),
    "a greater-than sign in an attribute (lxml escapes it)": (b'<T a="1&gt;2">x</T>', b"", b""),
    "a greater-than sign in an attribute, raw": (b'<T a="1&gt;2">x</T>', b'a="1&gt;2"', b'a="1>2"'),
    "an attribute on the event": (b"", b"<POINSCRIT>", b'<POINSCRIT test="true">'),
    "no XML declaration": (b"", b"<?xml version='1.0' encoding='UTF-8'?>\n", b""),
}


@pytest.mark.parametrize("case", sorted(SAME_MEANING))
def test_bytes_changed_without_changing_the_meaning_read_the_same_or_decline(signer, case):
    extra, old, new = SAME_MEANING[case]
    document = signed_bytes(
        signer,
        lot_of([poinscrit(1), poinscrit(2, extra.decode()), poinscrit(3)]),
    )
    if old:
        document = _event_text(document, old, new)
    if case == "the holder's attributes in C14N order":  # move IDEvt after HashChaine
        start = document.index(b'<Evenement HashChaine="')
        end = document.index(b'">', start)
        document = document[:end] + b'" IDEvt="2' + document[end:]
    assert_reads_the_same(signer, document)


def test_a_changed_meaning_is_not_read(signer):
    """A byte changed after signing: the parsed file fails its signature, and the bytes reader
    declines (it never reads a lot whose signature does not hold)."""
    document = signed_bytes(signer, lot_of([poinscrit(i) for i in range(1, 4)]))
    forged = _event_text(document, b"<IDJoueur>p-2</IDJoueur>", b"<IDJoueur>p-9</IDJoueur>")
    with pytest.raises(SignatureInvalid):
        as_parsed(signer, forged)
    assert lot_bytes.read_signed_lot(forged, trust_of(signer)) is None


def test_an_event_too_deep_for_a_lot_is_declined(signer):
    """An event of MAX_DEPTH + 1 levels makes the lot deeper than parse_document allows."""
    deep = (
        "".join(f"<L{i}>" for i in range(MAX_DEPTH))
        + "x"
        + "".join(f"</L{i}>" for i in reversed(range(MAX_DEPTH)))
    )
    document = signed_bytes(signer, lot_of([poinscrit(1), poinscrit(2, deep), poinscrit(3)]))
    assert lot_bytes.read_signed_lot(document, trust_of(signer)) is None
    with pytest.raises(Exception, match="nested more than"):
        parse_document(document)
    shallow = (
        "".join(f"<L{i}>" for i in range(MAX_DEPTH - 2))
        + "x"
        + "".join(f"</L{i}>" for i in reversed(range(MAX_DEPTH - 2)))
    )
    assert assert_reads_the_same(
        signer, signed_bytes(signer, lot_of([poinscrit(1), poinscrit(2, shallow), poinscrit(3)]))
    )


def test_shapes_are_learnt_per_coffre_and_bounded(signer, monkeypatch):
    monkeypatch.setattr(lot_bytes, "_patterns", {})
    monkeypatch.setattr(lot_bytes, "_resting", {})
    monkeypatch.setattr(lot_bytes, "_learnt", {})
    shapes = [poinscrit(i, f"<X{i % 5}>v</X{i % 5}>") for i in range(1, 21)]
    assert assert_reads_the_same(signer, signed_bytes(signer, lot_of(shapes)))
    assert len(lot_bytes._patterns[("0099", 7)][0]) == 5
    # a lot with a new shape is learnt again, the old ones kept
    assert assert_reads_the_same(
        signer, signed_bytes(signer, lot_of([poinscrit(1, "<Y>1</Y>"), poinscrit(2)]))
    )
    assert len(lot_bytes._patterns[("0099", 7)][0]) == 7
    monkeypatch.setattr(lot_bytes, "MAX_SKELETONS", 7)
    assert assert_reads_the_same(signer, signed_bytes(signer, lot_of([poinscrit(1)])))  # nothing new
    # an eighth shape: the oldest is forgotten
    assert assert_reads_the_same(signer, signed_bytes(signer, lot_of([poinscrit(1, "<Z>1</Z>")])))
    assert lot_bytes._patterns[("0099", 7)][0][-1].endswith(b"<Z></Z></POINSCRIT>")
    assert len(lot_bytes._patterns[("0099", 7)][0]) == 7
    # a lot of more shapes than that is read the slow way, and the coffre's next lot too
    many = signed_bytes(signer, lot_of([poinscrit(i, f"<W{i}>1</W{i}>") for i in range(1, 9)]))
    assert lot_bytes.read_signed_lot(many, trust_of(signer)) is None
    assert as_parsed(signer, many).events  # the slow path reads it
    simple = signed_bytes(signer, lot_of([poinscrit(1)]))
    assert lot_bytes.read_signed_lot(simple, trust_of(signer)) is None  # resting
    assert assert_reads_the_same(signer, simple)


def test_a_coffre_whose_shapes_keep_changing_rests(signer, monkeypatch):
    """Compiling the coffre's expression costs more than a lot read the slow way: a third lot in a
    row bringing new shapes is read the slow way (and the next one), then learning resumes."""
    monkeypatch.setattr(lot_bytes, "_patterns", {})
    monkeypatch.setattr(lot_bytes, "_resting", {})
    monkeypatch.setattr(lot_bytes, "_learnt", {})
    new = [signed_bytes(signer, lot_of([poinscrit(1, f"<N{i}>1</N{i}>")])) for i in range(5)]
    assert assert_reads_the_same(signer, new[0])
    assert assert_reads_the_same(signer, new[1])
    assert lot_bytes.read_signed_lot(new[2], trust_of(signer)) is None
    assert lot_bytes.read_signed_lot(new[3], trust_of(signer)) is None  # resting
    assert assert_reads_the_same(signer, new[4])
    assert assert_reads_the_same(signer, new[0])  # known: read, and the count starts again


def test_a_genuine_archive_is_read_from_its_bytes(archive, signer, monkeypatch):
    fast, slow, taken = reports(archive, signer[1], monkeypatch)
    assert fast == slow
    assert taken == 6  # every lot of both coffres


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_tampered_event_is_reported_as_the_slow_path_reports_it(archive, signer, monkeypatch, tamper):
    resign(lots(archive)[1], signer[0], TAMPERS[tamper])
    fast, slow, _ = reports(archive, signer[1], monkeypatch)
    assert fast == slow
    assert any("0099-7-0000000002.xml" in line for line in fast), fast


def fixture_events() -> list[bytes]:
    """tests/fixtures/expected's events (every family of the schema set), each made event i of
    coffre 0099/7 (its own IDOper, IDCoffre and IDEvt set), in canonical form."""
    out = []
    documents = [
        document
        for path in sorted((Path(__file__).parent / "fixtures" / "expected").rglob("*.xml"))
        for document in split_documents(path.read_bytes())
    ]
    for document in documents:
        event = etree.fromstring(document)
        for name, value in (("IDOper", "0099"), ("IDCoffre", "7"), ("IDEvt", str(len(out) + 1))):
            found = event.find(name)
            if found is None:
                break
            found.text = value
        else:
            out.append(etree.tostring(event, method="c14n", exclusive=True, with_comments=False))
    return out


def test_every_family_of_event_is_read_from_its_bytes(signer):
    """The regulator's events as the vault seals them (empty elements written <a/> by lxml,
    nested players' IDOper, any order of the identity): read from the bytes, not declined."""
    events = fixture_events()
    assert len(events) > 50
    assert any(b"></" in e and re.search(rb"<(\w+)></\1>", e) for e in events)  # empty elements
    document = signed_bytes(signer, lot_of(events))
    assert b"/>" in document.split(b"<ds:Signature")[0]
    assert assert_reads_the_same(signer, document)


def test_an_empty_identity_is_not_vouched_for(signer):
    stranger = c14n("<P><IDOper></IDOper><IDCoffre>7</IDCoffre><IDEvt>2</IDEvt></P>")
    document = signed_bytes(signer, lot_of([poinscrit(1), stranger, poinscrit(3)]))
    assert b"<IDOper/>" in document
    assert lot_bytes.read_signed_lot(document, trust_of(signer)) is None
    assert as_parsed(signer, document).events[1].stated == ("", "7", "2")


def test_a_shape_of_thousands_of_tags_is_read(signer, caplog):
    """A long event (a poker hand has hundreds of tags): its expression is built without recursion."""
    long = "".join(f"<A{i % 7}>{i}</A{i % 7}>" for i in range(1500))
    document = signed_bytes(signer, lot_of([poinscrit(1), poinscrit(2, long), poinscrit(3, long)]))
    assert assert_reads_the_same(signer, document)
    assert "slow way" not in caplog.text
