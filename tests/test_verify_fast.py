"""coffre verify's fast path: each event's canonical bytes sliced from the lot's signed bytes
(:func:`coffre.domain.verify._read_events_fast`) instead of canonicalized one by one.

It must read exactly what :func:`coffre.domain.lot.read_lot` reads, or decline (the walk then reads
the lot the slow way): checked here on lots shaped to make slicing go wrong (namespaces declared
around the events, an element named Evenement inside an event, processing instructions, text
around an event, two elements in one Evenement, identities nested or repeated). And an archive
tampered with, then signed again with the key, is reported line for line as the slow path
reports it.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from coffre_vault.sealer import serialize
from lxml import etree
from test_archive import T0, build, keypair, lots, resign

from coffre.commands.verify import verify_archive
from coffre.domain import verify as verify_module
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.lot import (
    NO_DIGEST,
    LotEvent,
    build_lot,
    lot_header_from_events,
    parse_document,
    read_lot,
)
from coffre.domain.merkle import MerkleAccumulator, leaf_hash
from coffre.domain.merkle import root as merkle_root
from coffre.domain.signing import TrustStore, verify_canonical

SEALED = T0 + timedelta(hours=1)


def c14n(xml: str) -> bytes:
    return etree.tostring(etree.fromstring(xml.encode()), method="c14n", exclusive=True, with_comments=False)


def poinscrit(id_evt: int, extra: str = "", oper: str = "0099", coffre: str = "7") -> bytes:
    return c14n(
        f"<POINSCRIT><IDOper>{oper}</IDOper><IDCoffre>{coffre}</IDCoffre><DateEvt>260301090000</DateEvt>"
        f"<IDEvt>{id_evt}</IDEvt><IDJoueur>p-{id_evt}</IDJoueur>{extra}</POINSCRIT>"
    )


def lot_of(canonicals: list[bytes]) -> etree._Element:
    """The unsigned lot of these events (IDEvt 1.., chained from GENESIS), as the sealer builds it."""
    events, chain = [], GENESIS
    for id_evt, canonical in enumerate(canonicals, 1):
        chain = chain_hash(chain, canonical)
        events.append(LotEvent(id_evt, chain, canonical))
    tree = MerkleAccumulator()
    for e in events:
        tree.append(leaf_hash(e.canonical))
    header = lot_header_from_events(
        id_oper="0099",
        id_coffre=7,
        number=1,
        events=events,
        previous_chain_hash=GENESIS,
        previous_lot_digest=NO_DIGEST,
        tree_root=tree.root(),
        sealed_at=SEALED,
    )
    return build_lot(header, events)


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    return keypair(tmp_path_factory.mktemp("keys"), "fast")


def signed_bytes(signer, root: etree._Element, change=lambda root: None, raw=lambda data: data) -> bytes:
    change(root)
    return raw(serialize(signer[0].sign(root)))


def both_ways(signer, document: bytes):
    """(what the fast path reads or None, what read_lot reads) from the verified document."""
    trust = TrustStore.from_pem_files([signer[1]])
    root, canonical = verify_canonical(document, trust, SEALED, parsed=parse_document(document), take=True)
    fast = verify_module._read_events_fast(root, canonical)
    slow = verify_module._Events.of(read_lot(root))
    return fast, slow


def assert_same(fast, slow) -> None:
    assert fast.header == slow.header
    assert fast.ids == slow.ids
    assert fast.claimed == slow.claimed
    assert fast.canonical == slow.canonical
    assert [fast.stated(i) for i in range(len(fast.ids))] == [slow.stated(i) for i in range(len(slow.ids))]
    assert fast.strangers(fast.header) == slow.strangers(slow.header)


def test_a_lot_as_the_sealer_writes_it_is_read_by_slicing(signer):
    fast, slow = both_ways(signer, signed_bytes(signer, lot_of([poinscrit(i) for i in range(1, 6)])))
    assert fast is not None, "the fast path declined the sealer's own lot"
    assert fast.holders is None  # the identities proven from the bytes
    assert_same(fast, slow)


def test_a_lot_s_root_and_the_coffre_s_tree_are_rfc9162s():
    """The lot's root is MTH over its leaves, and the coffre's tree extended by them is the one
    MerkleAccumulator.append gives, whatever the lot's size and where it starts."""
    leaves = [leaf_hash(i.to_bytes(2, "big")) for i in range(300)]
    for before in (0, 1, 2, 3, 7, 8, 24, 100, 128):
        for size in (1, 2, 3, 5, 8, 13, 64, 100, 171):
            tree, expected = MerkleAccumulator(), MerkleAccumulator()
            for leaf in leaves[:before]:
                tree.append(leaf)
                expected.append(leaf)
            lot = leaves[before : before + size]
            for leaf in lot:
                expected.append(leaf)
            assert verify_module._lot_root_and_extend(tree, lot) == merkle_root(lot)
            assert (tree.size, tree.root()) == (expected.size, expected.root()), (before, size)
            assert tree._frontier == expected._frontier


def nested(extra: str) -> list[bytes]:
    return [poinscrit(1), poinscrit(2, extra), poinscrit(3)]


def set_on_root(name: str, value: str):
    def change(root):
        root.set(name, value)

    return change


def on_holder(index: int, what):
    def change(root):
        what(root.find("Evenements")[index])

    return change


def declare_on(path: str, prefix: str, uri: str):
    """Declare a namespace on an ancestor of the events, by hand in the signed bytes."""

    def raw(data: bytes) -> bytes:
        tag = {"root": b"<LotCoffre ", "body": b"<Evenements>", "holder": b'<Evenement IDEvt="2"'}[path]
        declaration = f' xmlns:{prefix}="{uri}"'.encode()
        if tag.endswith(b">"):
            return data.replace(tag, tag[:-1] + declaration + b">", 1)
        if tag.endswith(b" "):
            return data.replace(tag, tag + declaration[1:] + b" ", 1)
        return data.replace(tag, tag + declaration, 1)

    return raw


CASES = {
    # an element named Evenement inside an event: its end tag would cut the event short
    "nested Evenement": (nested("<Evenement>x</Evenement>"), None, None),
    "nested Evenement with the holder's attributes": (
        nested('<Evenement HashChaine="' + "0" * 64 + '" IDEvt="3"><A></A></Evenement>'),
        None,
        None,
    ),
    # a processing instruction can hold any text, end tags included
    "processing instruction": (
        nested(""),
        on_holder(1, lambda h: h[0].append(etree.PI("x", "</Evenement>\n"))),
        None,
    ),
    # namespaces declared on the events' ancestors and used inside an event
    "prefix declared on the root": (
        nested("<p:X xmlns:p='urn:p'>1</p:X>"),
        None,
        declare_on("root", "p", "urn:p"),
    ),
    "prefix declared on Evenements": (
        nested("<p:X xmlns:p='urn:p'>1</p:X>"),
        None,
        declare_on("body", "p", "urn:p"),
    ),
    "prefix declared on an Evenement": (
        nested("<p:X xmlns:p='urn:p'>1</p:X>"),
        None,
        declare_on("holder", "p", "urn:p"),
    ),
    "an attribute with a prefix on the root": (
        nested("<p:X xmlns:p='urn:p'>1</p:X>"),
        lambda root: root.set("{urn:p}a", "1"),
        None,
    ),
    "an event in a default namespace": (
        [poinscrit(1), c14n("<POINSCRIT xmlns='urn:x'><IDOper>0099</IDOper></POINSCRIT>"), poinscrit(3)],
        None,
        None,
    ),
    "an event with an attribute": (
        [poinscrit(1), c14n("<POINSCRIT a='1'><IDOper>0099</IDOper></POINSCRIT>"), poinscrit(3)],
        None,
        None,
    ),
    "a prefixed event": (
        [
            poinscrit(1),
            c14n("<p:POINSCRIT xmlns:p='urn:p'><IDOper>0099</IDOper></p:POINSCRIT>"),
            poinscrit(3),
        ],
        None,
        None,
    ),
    # what an Evenement holds besides its event
    "text before the event": (nested(""), on_holder(1, lambda h: setattr(h, "text", "x")), None),
    "blank before the event": (nested(""), on_holder(1, lambda h: setattr(h, "text", "\n")), None),
    "text after the event": (nested(""), on_holder(1, lambda h: setattr(h[0], "tail", "x")), None),
    "two events in one Evenement": (nested(""), on_holder(1, lambda h: h.append(etree.Element("B"))), None),
    "a third attribute": (nested(""), on_holder(1, lambda h: h.set("Autre", "1")), None),
    "text between Evenements": (nested(""), on_holder(1, lambda h: setattr(h, "tail", "x\n")), None),
    "an attribute on Evenements": (nested(""), lambda root: root.find("Evenements").set("a", "1"), None),
    "another attribute on the root": (nested(""), set_on_root("autre", "1"), None),
    "an upper-case HashChaine": (
        nested(""),
        on_holder(1, lambda h: h.set("HashChaine", h.get("HashChaine").upper())),
        None,
    ),
    "IDEvt 0": (nested(""), on_holder(1, lambda h: h.set("IDEvt", "0")), None),
    # identities the slicing must not vouch for
    "an identity nested deeper": (
        [
            poinscrit(1),
            c14n("<POINSCRIT><A><IDOper>0099</IDOper></A><IDCoffre>7</IDCoffre></POINSCRIT>"),
            poinscrit(3),
        ],
        None,
        None,
    ),
    "an identity repeated": (nested("<IDEvt>2</IDEvt>"), None, None),
    "a player's IDOper (POJEU)": (nested("<Joueur><IDOper>0099</IDOper></Joueur>"), None, None),
    "an IDEvt that is not the Evenement's": ([poinscrit(1), poinscrit(9), poinscrit(3)], None, None),
    "another IDCoffre": ([poinscrit(1), poinscrit(2, coffre="8"), poinscrit(3)], None, None),
    "an identity with an attribute": (
        [poinscrit(1), c14n("<POINSCRIT><IDOper a='1'>0099</IDOper></POINSCRIT>"), poinscrit(3)],
        None,
        None,
    ),
    "identities in another order (CLOTUREPOINTDEVENTE)": (
        [
            poinscrit(1),
            c14n(
                "<CLOTUREPOINTDEVENTE><IDOper>0099</IDOper><DateEvt>261231160000</DateEvt><IDEvt>2</IDEvt>"
                "<IDCoffre>7</IDCoffre><Info>x</Info></CLOTUREPOINTDEVENTE>"
            ),
            poinscrit(3),
        ],
        None,
        None,
    ),
    "an identity after a child with children": (
        [
            poinscrit(1),
            c14n("<P><IDOper>0099</IDOper><A><B>1</B></A><IDCoffre>7</IDCoffre><IDEvt>2</IDEvt></P>"),
            poinscrit(3),
        ],
        None,
        None,
    ),
    "an identity twice, the second one right": (
        [
            poinscrit(1),
            c14n("<P><IDOper>0098</IDOper><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><IDEvt>2</IDEvt></P>"),
            poinscrit(3),
        ],
        None,
        None,
    ),
    "text escaped in an event": (nested("<T>&lt;/Evenement&gt;\n&amp;&#13;</T>"), None, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_slicing_reads_what_read_lot_reads_or_declines(signer, case):
    canonicals, change, raw = CASES[case]
    document = signed_bytes(
        signer, lot_of(canonicals), change or (lambda root: None), raw or (lambda data: data)
    )
    try:
        fast, slow = both_ways(signer, document)
    except Exception as exc:  # read_lot refuses the lot: the fast path must have declined it too
        trust = TrustStore.from_pem_files([signer[1]])
        root, canonical = verify_canonical(
            document, trust, SEALED, parsed=parse_document(document), take=True
        )
        assert verify_module._read_events_fast(root, canonical) is None, exc
        return
    if fast is not None:
        assert_same(fast, slow)


# -- whole archives, tampered with and signed again with the key -------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, signer) -> Path:
    return build(tmp_path_factory.mktemp("archive"), signer[0], events=12, max_events=4)


@pytest.fixture
def archive(pristine, tmp_path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(pristine, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def reports(archive: Path, cert: Path, monkeypatch) -> tuple[list[str], list[str], int]:
    """The report's lines with the fast paths (the lot read from its bytes, else its events sliced
    from the signed bytes), without either, and how many lots were read from their bytes alone."""
    taken = []
    original = verify_module._read_signed_lot

    def counting(document, trust):
        lot = original(document, trust)
        taken.append(lot is not None)
        return lot

    monkeypatch.setattr(verify_module, "_read_signed_lot", counting)
    fast = verify_archive(archive, [cert], jobs=1).lines()
    monkeypatch.setattr(verify_module, "_read_signed_lot", lambda document, trust: None)
    sliced = verify_archive(archive, [cert], jobs=1).lines()
    monkeypatch.setattr(verify_module, "_read_events_fast", lambda root, canonical: None)
    slow = verify_archive(archive, [cert], jobs=1).lines()
    assert sliced == slow
    return fast, slow, sum(taken)


def event_in(root: etree._Element, index: int) -> etree._Element:
    return root.find("Evenements")[index][0]


TAMPERS = {
    "a changed event": lambda root: setattr(event_in(root, 1).find("IDJoueur"), "text", "forged"),
    "a changed identity": lambda root: setattr(event_in(root, 1).find("IDEvt"), "text", "9"),
    "a changed HashChaine": lambda root: root.find("Evenements")[2].set("HashChaine", "ab" * 32),
    "two events swapped": lambda root: root.find("Evenements").insert(0, root.find("Evenements")[1]),
    "an event removed": lambda root: root.find("Evenements").remove(root.find("Evenements")[1]),
    "an element named Evenement slipped into an event": lambda root: event_in(root, 1).append(
        etree.fromstring(b'<Evenement HashChaine="' + b"0" * 64 + b'" IDEvt="3"><A/></Evenement>')
    ),
    "a player's IDOper slipped into an event": lambda root: event_in(root, 1).append(
        etree.fromstring(b"<Joueur><IDOper>0098</IDOper></Joueur>")
    ),
    "a second IDEvt": lambda root: event_in(root, 1).append(etree.fromstring(b"<IDEvt>6</IDEvt>")),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_tampered_event_is_caught_as_the_slow_path_catches_it(archive, signer, monkeypatch, tamper):
    resign(lots(archive)[1], signer[0], TAMPERS[tamper])
    fast, slow, _ = reports(archive, signer[1], monkeypatch)
    assert fast == slow
    assert not verify_archive(archive, [signer[1]], jobs=1).ok
    assert any("0099-7-0000000002.xml" in line for line in fast), fast
