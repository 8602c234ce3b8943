"""The archive: the vault's sealer writes lots and checkpoints, `coffre verify` checks them, and
every kind of tampering the regulator's auditors care about is caught and named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from coffre_vault.sealer import ArchiveMismatch, Sealer, serialize
from lxml import etree

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.commands.verify import archive_proof, verify_archive
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.codec import canonical_bytes
from coffre.domain.lot import (
    NO_DIGEST,
    LotEvent,
    build_lot,
    event_leaf,
    lot_header_from_events,
    lot_key,
    parse_document,
    read_checkpoint,
    read_lot,
)
from coffre.domain.merkle import MerkleAccumulator
from coffre.domain.merkle import root as merkle_root
from coffre.domain.normalize import normalize
from coffre.domain.proofs import ConsistencyProof, InclusionProof, check_consistency, check_inclusion
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate, verify

from events import POINSCRIT
from xmlsec_tool import xmlsec1_verify

COFFRES = (7, 8)
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def event(coffre: int, id_evt: int) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode()).replace(
        b"<IDJoueur>p-1<", f"<IDJoueur>a-{coffre}-{id_evt}<".encode()
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(hours=7)  # lots land on several days
        return self.now


def keypair(tmp: Path, name: str) -> tuple[Signer, Path]:
    key, cert = generate_key_and_certificate(name, "ecdsa", not_before=T0 - timedelta(days=1))
    path = tmp / f"{name}.pem"
    path.write_bytes(cert)
    return Signer.from_pem(key, cert), path


def build(tmp: Path, signer: Signer, events: int = 10, max_events: int = 3) -> Path:
    """An archive of two coffres, ``events`` events each, in lots of ``max_events``."""
    root = tmp / "archive"
    root.mkdir(parents=True)
    with JournalSet(tmp / "journal") as journals:
        sealer = Sealer(
            LocalStorage(root), signer, journals, max_events=max_events, max_age=3600, clock=Clock()
        )
        for coffre in COFFRES:
            journal = journals.journal("0099", coffre)
            for n in range(1, events + 1):
                journal.append(n, event(coffre, n))
            journal.sync()
            sealer.recorded("0099", coffre)
        sealer.seal_due()
        sealer.seal_all()
    return root


@pytest.fixture(scope="module")
def trusted(tmp_path_factory) -> tuple[Signer, Path]:
    return keypair(tmp_path_factory.mktemp("keys"), "trusted")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, trusted) -> Path:
    return build(tmp_path_factory.mktemp("archive"), trusted[0])


@pytest.fixture
def archive(pristine, tmp_path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(pristine, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def lots(root: Path, coffre: int = 7) -> list[Path]:
    return sorted(
        (p for p in (root / "0099" / str(coffre)).rglob("*.xml") if p.parent.name != "checkpoints"),
        key=lambda p: p.name,
    )


def checkpoint_files(root: Path, coffre: int = 7) -> list[Path]:
    return sorted((root / "0099" / str(coffre) / "checkpoints").glob("*.xml"))


def failures(root: Path, cert: Path, **options) -> list[str]:
    report = verify_archive(root, [cert], **options)
    assert not report.ok
    return [line for line in report.lines() if not line.startswith("coffre ")]


def resign(path: Path, signer: Signer, change=lambda root: None) -> None:
    """Change a lot (or checkpoint) and sign it again with ``signer``."""
    root = parse_document(path.read_bytes())
    root.remove(root[-1])  # the old signature
    change(root)
    path.write_bytes(serialize(signer.sign(root)))


# -- the genuine archive --------------------------------------------------------------------------


def test_the_sealer_writes_the_documented_layout(pristine):
    """<IDOper>/<IDCoffre>/<YYYY>/<MM>/<DD>/<IDOper>-<IDCoffre>-<lot 10 digits>.xml, by seal day (UTC)."""
    headers = [read_lot(parse_document(p.read_bytes())).header for p in lots(pristine)]
    assert [p.relative_to(pristine).as_posix() for p in lots(pristine)] == [
        lot_key("0099", 7, h.number, h.sealed_at) for h in headers
    ]
    assert lot_key("0099", 7, 1, T0) == "0099/7/2026/11/22/0099-7-0000000001.xml"
    assert len({h.sealed_at.date() for h in headers}) > 1
    assert [(h.number, h.first_id_evt, h.last_id_evt) for h in headers] == [
        (1, 1, 3),
        (2, 4, 6),
        (3, 7, 9),
        (4, 10, 10),
    ]
    assert len(checkpoint_files(pristine)) == 4
    assert all(p.stat().st_mode & 0o777 == 0o444 for p in lots(pristine))


def test_a_genuine_archive_verifies(pristine, trusted):
    report = verify_archive(pristine, [trusted[1]])
    assert report.ok, report.lines()
    assert report.lines() == [
        "coffre 0099/7: 4 lot(s), 10 event(s), 4 checkpoint(s): OK",
        "coffre 0099/8: 4 lot(s), 10 event(s), 4 checkpoint(s): OK",
    ]


def test_every_lot_and_checkpoint_verifies_with_xmlsec1(pristine, trusted):
    """The regulator's own tool, not coffre's code, accepts every signature."""
    documents = sorted(pristine.rglob("*.xml"))
    assert len(documents) == 16
    for document in documents:
        run = xmlsec1_verify(document, trusted[1])
        assert run.returncode == 0, f"{document}: {run.stderr}"


def test_the_events_in_a_lot_are_the_recorded_bytes(pristine):
    lot = read_lot(parse_document(lots(pristine)[1].read_bytes()))
    assert [e.canonical for e in lot.events] == [event(7, n) for n in (4, 5, 6)]


# -- tampering --------------------------------------------------------------------------------------


def test_a_flipped_byte_inside_an_event(archive, trusted):
    """The lot whose signature fails is still read, so the report says what changed in it; the
    lots after it verify, and the coffre tree's difference is reported once, not on every later
    lot and checkpoint."""
    path = lots(archive)[1]
    path.write_bytes(path.read_bytes().replace(b"a-7-5<", b"a-7-X<"))
    name = path.relative_to(archive).as_posix()
    assert failures(archive, trusted[1]) == [
        f"{name}: signature: the content does not match its signature (digest mismatch)",
        f"{name}: IDEvt 5: chain: the chain hash does not recompute from the event's bytes",
        f"{name}: merkle root: RacineMerkle does not recompute from the lot's events",
        f"{name}: coffre tree: RacineArbreCoffre/TailleArbreCoffre do not recompute (size 6 read); "
        "later trees are not compared",
        f"{name}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of "
        "0099/7/checkpoints/0099-7-0000000002.xml",
    ]


def test_a_comment_splitting_a_header_number_is_read_as_the_signature_covers_it(archive, trusted):
    """``<TailleArbreCoffre>1<!-- -->0</TailleArbreCoffre>``: the signature holds and the value is
    10, as in the canonical form; the file is no longer the one its checkpoint names."""
    path = lots(archive)[-1]
    path.write_bytes(path.read_bytes().replace(b"<TailleArbreCoffre>10<", b"<TailleArbreCoffre>1<!-- -->0<"))
    header = read_lot(
        verify(path.read_bytes(), TrustStore.from_pem_files([trusted[1]]), T0 + timedelta(days=9))
    ).header
    assert header.tree_size == 10
    name = path.relative_to(archive).as_posix()
    assert failures(archive, trusted[1]) == [
        f"{name}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of "
        "0099/7/checkpoints/0099-7-0000000004.xml"
    ]


def test_a_checkpoint_whose_signature_fails_is_no_evidence(archive, trusted):
    """Reported, and otherwise ignored: what it says is not compared with the archive."""
    path = checkpoint_files(archive)[1]
    path.write_bytes(path.read_bytes().replace(b"<TailleArbre>6<", b"<TailleArbre>60<"))
    assert failures(archive, trusted[1]) == [
        "0099/7/checkpoints/0099-7-0000000002.xml: signature: the content does not match its signature "
        "(digest mismatch)"
    ]


def test_a_checkpoint_filed_under_another_lot_number(archive, trusted):
    second, third = checkpoint_files(archive)[1:3]
    third.write_bytes(second.read_bytes())
    lot = lots(archive)[2].relative_to(archive).as_posix()
    assert failures(archive, trusted[1]) == [  # reported with lot 2, the lot it names, then lot 3's
        "0099/7/checkpoints/0099-7-0000000003.xml: location: the file is named for lot 3, the checkpoint "
        "says lot 2",
        f"{lot}: checkpoint: no checkpoint in the archive for lot 3",
    ]


def test_an_event_whose_own_idevt_is_not_its_evenement_s(archive, trusted):
    def change(root):
        root.find("Evenements")[1][0].find("IDEvt").text = "9"

    resign(lots(archive)[0], trusted[0], change)
    assert any(
        line.endswith(
            "0099-7-0000000001.xml: IDEvt 2: event identity: the event's own IDOper/IDCoffre/IDEvt are "
            "0099/7/9, its lot's and Evenement's 0099/7/2"
        )
        for line in failures(archive, trusted[1])
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("NumeroLot", "2<?x 0?>", "NumeroLot holds more than text"),
        ("NumeroLot", " 2", "NumeroLot is not an integer >= 1: ' 2'"),
        ("DernierIDEvt", "<b>6</b>", "DernierIDEvt holds more than text"),
    ],
)
def test_a_header_value_is_its_whole_text_and_nothing_else(archive, trusted, field, value, message):
    """Signed with the key, but readers could disagree on the value: a format failure."""

    def change(root):
        element = root.find(f"Entete/{field}")
        element.text = None
        element.append(etree.fromstring(f"<v>{value}</v>"))
        for child in element[0]:  # unwrap <v>: its text and children go into the field
            element.append(child)
        element.text = element[0].text
        element.remove(element[0])

    resign(lots(archive)[1], trusted[0], change)
    found = failures(archive, trusted[1])
    assert found[0] == f"{lots(archive)[1].relative_to(archive).as_posix()}: format: {message}"


def test_the_size_and_depth_limits(archive, trusted, monkeypatch):
    """Past a limit a lot is a format failure and is not read; the next lot is checked on its own
    header, and the coffre's tree is no longer compared."""
    import coffre.domain.lot as lot_module

    second = lots(archive)[1]
    name = second.relative_to(archive).as_posix()
    second.write_bytes(second.read_bytes() + b"\n" * 100)
    size = second.stat().st_size
    monkeypatch.setattr(lot_module, "MAX_DOCUMENT_BYTES", size - 1)
    assert failures(archive, trusted[1]) == [
        f"{name}: format: {size} bytes, more than the {size - 1} a lot may hold"
    ]
    monkeypatch.undo()

    def nest(root):
        event = root.find("Evenements")[0][0]
        inner = event.find("Tech")
        for _ in range(32):  # LotCoffre/Evenements/Evenement/POINSCRIT/Tech: 5 levels already
            inner = etree.SubElement(inner, "x")

    resign(second, trusted[0], nest)
    assert failures(archive, trusted[1]) == [f"{name}: format: elements nested more than 35 deep"]


def test_the_number_of_events_in_a_lot_is_bounded(archive, trusted, monkeypatch):
    import coffre.domain.lot as lot_module

    monkeypatch.setattr(lot_module, "MAX_LOT_EVENTS", 2)
    found = failures(archive, trusted[1])
    assert found[0].endswith("0099-7-0000000001.xml: format: NombreEvt 3: a lot holds at most 2 events")


def test_the_sealer_keeps_a_lot_within_the_size_a_reader_accepts(tmp_path, trusted, monkeypatch):
    import coffre_vault.sealer as sealer_module

    monkeypatch.setattr(sealer_module, "MAX_LOT_EVENT_BYTES", 2 * len(event(7, 1)) + 10)
    root = build(tmp_path, trusted[0], events=5, max_events=10)
    spans = [
        (h.first_id_evt, h.last_id_evt)
        for h in (read_lot(parse_document(p.read_bytes())).header for p in lots(root))
    ]
    assert spans == [(1, 2), (3, 4), (5, 5)]
    assert verify_archive(root, [trusted[1]]).ok


def test_a_removed_event(archive, trusted):
    path = lots(archive)[1]
    root = parse_document(path.read_bytes())
    body = root.find("Evenements")
    body.remove(body[1])
    path.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    found = failures(archive, trusted[1])
    assert any("0000000002.xml: signature:" in line for line in found)
    assert any("0000000002.xml:" in line and "IDEvt continuity" in line for line in found)


def test_a_removed_lot(archive, trusted):
    lots(archive)[1].unlink()
    found = failures(archive, trusted[1])
    assert any(
        "0000000003.xml: lot sequence: lot 3 where lot 2 was expected; lot(s) 2..2 missing" in line
        for line in found
    )
    assert any("0000000003.xml: lot link:" in line for line in found)


def test_the_coffres_verified_in_workers_give_the_serial_report(archive, trusted):
    """``coffre verify --jobs N``: the lots read in worker processes, the report line for line the
    serial one, on an archive tampered in both coffres and around them (with and without every
    event's hashes kept)."""
    path = lots(archive)[1]
    path.write_bytes(path.read_bytes().replace(b"a-7-5<", b"a-7-X<"))
    lots(archive, 8)[2].unlink()
    checkpoint_files(archive, 8)[0].unlink()
    (archive / "0099" / "8" / "notes.txt").write_text("not part of the archive")
    (archive / "0099" / "9").mkdir()
    shutil.copy(lots(archive, 7)[0], archive / "0099" / "9" / "0099-9-0000000001.xml")
    serial = verify_archive(archive, [trusted[1]], keep=True)
    assert not serial.ok
    assert {c.id_coffre for c in serial.coffres} == {7, 8, 9}
    assert verify_archive(archive, [trusted[1]]).lines() == serial.lines()  # no hash kept: the same
    for jobs in (2, 3, 8):
        parallel = verify_archive(archive, [trusted[1]], jobs=jobs, keep=True)
        assert parallel.lines() == serial.lines()
        assert verify_archive(archive, [trusted[1]], jobs=jobs).lines() == serial.lines()
        for one, other in zip(serial.coffres, parallel.coffres, strict=True):
            assert (list(one.leaves), list(one.chain), one.roots, one.spans) == (
                list(other.leaves),
                list(other.chain),
                other.roots,
                other.spans,
            )
    run = [sys.executable, "-m", "coffre.cli", "verify", str(archive), "--cert", str(trusted[1])]
    one = subprocess.run([*run, "--jobs", "1"], capture_output=True, text=True, timeout=120)
    every = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert (
        (every.returncode, every.stdout)
        == (one.returncode, one.stdout)
        == (1, "\n".join(serial.lines()) + "\n")
    )


def test_two_lots_swapped(archive, trusted):
    second, third = lots(archive)[1:3]
    a, b = second.read_bytes(), third.read_bytes()
    second.write_bytes(b)
    third.write_bytes(a)
    found = failures(archive, trusted[1])
    assert any(
        "0000000002.xml: location: the file is named lot 2, its header says lot 3" in line for line in found
    )


def test_a_lot_from_another_coffre(archive, trusted):
    foreign = lots(archive, 8)[1]
    target = lots(archive, 7)[1]
    target.write_bytes(foreign.read_bytes())
    found = failures(archive, trusted[1])
    assert any(
        "0099/7/" in line and "location: a lot of coffre 0099/8 among the lots of 0099/7" in line
        for line in found
    )


def test_the_newest_lot_removed_against_an_older_checkpoint(archive, trusted, tmp_path):
    kept = tmp_path / "checkpoint-seen-by-the-regulator.xml"
    shutil.copy(checkpoint_files(archive)[-1], kept)
    lots(archive)[-1].unlink()
    checkpoint_files(archive)[-1].unlink()
    assert verify_archive(archive, [trusted[1]]).ok  # without the older checkpoint, nothing shows
    found = failures(archive, trusted[1], older_checkpoint=kept)
    assert any("truncation: the checkpoint holds 10 events, the archive 9" in line for line in found)


def test_a_history_rewritten_and_resigned_with_the_key_against_an_older_checkpoint(tmp_path, trusted):
    """Whoever holds the signing key can rebuild a consistent archive; a checkpoint the regulator
    kept from before shows it."""
    original = build(tmp_path / "a", trusted[0])
    kept = tmp_path / "kept.xml"
    shutil.copy(checkpoint_files(original)[-1], kept)
    root = tmp_path / "b" / "archive"  # the same key, with IDEvt 2 of coffre 7 changed before sealing
    root.mkdir(parents=True)
    with JournalSet(tmp_path / "b" / "journal") as journals:
        sealer = Sealer(LocalStorage(root), trusted[0], journals, max_events=3, max_age=3600, clock=Clock())
        journal = journals.journal("0099", 7)
        for n in range(1, 11):
            journal.append(n, event(7, n) if n != 2 else event(8, 2).replace(b">8<", b">7<"))
        journal.sync()
        sealer.recorded("0099", 7)
        sealer.seal_all()
    assert verify_archive(root, [trusted[1]]).ok
    found = failures(root, trusted[1], older_checkpoint=kept)
    assert any(
        "rewriting: the archive's first 10 events are not those the checkpoint signed" in line
        for line in found
    )


def test_a_lot_resigned_by_an_untrusted_key(archive, trusted, tmp_path):
    intruder, _ = keypair(tmp_path, "intruder")
    resign(lots(archive)[1], intruder)
    found = failures(archive, trusted[1])
    assert any("0000000002.xml: signature:" in line and "untrusted" in line for line in found)


def test_signature_wrapping_unsigned_content_slipped_in(archive, trusted):
    path = lots(archive)[1]
    root = parse_document(path.read_bytes())
    extra = etree.SubElement(root, "Evenements")  # after the signature: outside what it covers
    holder = etree.SubElement(extra, "Evenement", IDEvt="7", HashChaine="00" * 32)
    holder.append(etree.fromstring(event(7, 7)))
    path.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    found = failures(archive, trusted[1])
    assert any("0000000002.xml: signature:" in line for line in found)


def test_signature_wrapping_signed_content_moved(archive, trusted):
    """The genuine signed lot is hidden inside an element and a forged one takes its place."""
    path = lots(archive)[1]
    genuine = parse_document(path.read_bytes())
    forged = parse_document(path.read_bytes())
    signature = forged[-1]
    hidden = etree.SubElement(signature, "{http://www.w3.org/2000/09/xmldsig#}Object")
    hidden.append(genuine)
    forged.find("Evenements")[0][0].find("IDJoueur").text = "forged"
    path.write_bytes(etree.tostring(forged, xml_declaration=True, encoding="UTF-8"))
    found = failures(archive, trusted[1])
    assert any("0000000002.xml: signature:" in line for line in found)


def test_an_idevt_gap_in_a_lot_signed_with_the_key(archive, trusted):
    """Even a lot the vault's key signed is refused when an IDEvt is missing from it."""
    path = lots(archive)[1]
    lot = read_lot(parse_document(path.read_bytes()))
    kept = [lot.events[0], lot.events[2]]  # IDEvt 4 and 6, no 5
    header = replace(lot.header, merkle_root=merkle_root([event_leaf(e.canonical) for e in kept]))
    path.write_bytes(serialize(trusted[0].sign(build_lot(header, kept))))
    found = failures(archive, trusted[1])
    assert any("0000000002.xml: IDEvt 5: IDEvt continuity:" in line for line in found)


def test_a_schema_invalid_event_with_xsd(tmp_path, trusted, reference_dir):
    xsd = reference_dir / "xsd"
    bad = event(7, 1).replace(b"<Tech>T-1</Tech>", b"")  # Tech is required by the schema
    events = [LotEvent(1, chain_hash(GENESIS, bad), bad)]
    tree = MerkleAccumulator()
    tree.append(event_leaf(bad))
    header = lot_header_from_events(
        id_oper="0099",
        id_coffre=7,
        number=1,
        events=events,
        previous_chain_hash=GENESIS,
        previous_lot_digest=NO_DIGEST,
        tree_root=tree.root(),
        sealed_at=T0,
    )
    (tmp_path / "archive").mkdir()
    storage = LocalStorage(tmp_path / "archive")
    storage.create(lot_key("0099", 7, 1, T0), serialize(trusted[0].sign(build_lot(header, events))))
    without = verify_archive(tmp_path / "archive", [trusted[1]])
    assert not any("schema" in line for line in without.lines())
    found = failures(tmp_path / "archive", trusted[1], xsd_dir=xsd)
    assert any("0000000001.xml: IDEvt 1: schema:" in line for line in found)


# -- the sealer --------------------------------------------------------------------------------------


def test_a_restart_goes_on_from_the_archive_and_mends_a_missing_checkpoint(tmp_path, trusted):
    root = build(tmp_path, trusted[0], events=4, max_events=3)
    checkpoint_files(root)[-1].unlink()  # the crash came between the lot and its checkpoint
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(LocalStorage(root), trusted[0], journals, max_events=3, max_age=3600, clock=Clock())
        sealer.start()
        assert sealer.counts.checkpoints_mended == 1
        journal = journals.journal("0099", 7)
        for n in (5, 6, 7):
            journal.append(n, event(7, n))
        journal.sync()
        sealer.recorded("0099", 7)
        sealer.seal_all()
    report = verify_archive(root, [trusted[1]])
    assert report.ok, report.lines()
    assert [h.number for h in (read_lot(parse_document(p.read_bytes())).header for p in lots(root))] == [
        1,
        2,
        3,
    ]


def test_a_journal_that_disagrees_with_the_archive_stops_the_sealer(tmp_path, trusted):
    root = build(tmp_path, trusted[0], events=4, max_events=3)
    with JournalSet(tmp_path / "other-journal") as journals:
        journal = journals.journal("0099", 7)
        for n in range(1, 6):
            journal.append(n, event(8, n))
        journal.sync()
        sealer = Sealer(LocalStorage(root), trusted[0], journals, max_events=3, max_age=3600, clock=Clock())
        with pytest.raises(ArchiveMismatch):
            sealer.start()


def test_keygen_and_verify_commands(pristine, trusted, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "keygen", "--out", str(tmp_path / "k")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and (tmp_path / "k" / "signing-key.pem").stat().st_mode & 0o777 == 0o600
    again = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "keygen", "--out", str(tmp_path / "k")],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 1 and "never overwritten" in again.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "verify", str(pristine), "--cert", str(trusted[1])],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffre.cli",
            "verify",
            str(pristine),
            "--cert",
            str(tmp_path / "k" / "signing-cert.pem"),
        ],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode == 1 and "untrusted" in wrong.stdout


# -- proofs -------------------------------------------------------------------------------------------


def test_an_inclusion_proof_against_the_signed_lot_and_checkpoint(pristine, trusted):
    proof = InclusionProof.from_dict(archive_proof(pristine, [trusted[1]], "0099", 7, id_evt=5))
    assert check_inclusion(proof, event(7, 5)) == []
    lot = read_lot(parse_document(lots(pristine)[1].read_bytes())).header
    newest = read_checkpoint(parse_document(checkpoint_files(pristine)[-1].read_bytes()))
    assert (proof.lot, proof.lot_root, proof.tree_size) == (2, lot.merkle_root.hex(), 10)
    assert proof.tree_root == newest.tree_root.hex()  # what the signed checkpoint says
    assert check_inclusion(proof, event(7, 6)) == ["the event's leaf hash is not the proof's"]
    forged = replace(proof, tree_path=[("0" * 64), *proof.tree_path[1:]])
    assert check_inclusion(forged) and check_inclusion(replace(proof, id_evt=6))


def test_a_consistency_proof_between_two_checkpoints(pristine, trusted):
    old = read_checkpoint(parse_document(checkpoint_files(pristine)[1].read_bytes()))
    new = read_checkpoint(parse_document(checkpoint_files(pristine)[-1].read_bytes()))
    proof = ConsistencyProof.from_dict(
        archive_proof(pristine, [trusted[1]], "0099", 7, since_size=old.tree_size)
    )
    assert (proof.old_size, proof.old_root, proof.new_size, proof.new_root) == (
        6,
        old.tree_root.hex(),
        10,
        new.tree_root.hex(),
    )
    assert check_consistency(proof) == []
    assert check_consistency(replace(proof, old_root="00" * 32))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffre.cli",
            "proof",
            str(pristine),
            "--cert",
            str(trusted[1]),
            "--coffre",
            "0099/7",
            "--id-evt",
            "10",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert check_inclusion(InclusionProof.from_dict(json.loads(run.stdout)), event(7, 10)) == []


# -- crashes and rotation --------------------------------------------------------------------------------

SEAL_CHILD = """
import sys
from pathlib import Path
from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.domain.signing import Signer
from coffre_vault.sealer import Sealer
tmp = Path(sys.argv[1])
storage = LocalStorage(tmp / "archive")
storage.cleanup_temporary()
with JournalSet(tmp / "journal") as journals:
    sealer = Sealer(storage, Signer.from_files(tmp / "key.pem", tmp / "cert.pem"), journals, max_events=3, max_age=3600)
    sealer.start()
    print("sealing", flush=True)
    sealer.seal_all()
print("done")
"""


def test_kill_9_while_sealing_loses_doubles_and_tears_no_lot(tmp_path):
    import random
    import signal
    import time

    key, cert = generate_key_and_certificate(
        "crash", "ecdsa", not_before=datetime.now(UTC) - timedelta(days=1)
    )
    (tmp_path / "key.pem").write_bytes(key)
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "archive").mkdir()
    with JournalSet(tmp_path / "journal") as journals:
        journal = journals.journal("0099", 7)
        for n in range(1, 1501):
            journal.append(n, event(7, n))
    rng = random.Random(20261122)
    kills = 0
    for _ in range(12):
        child = subprocess.Popen([sys.executable, "-c", SEAL_CHILD, str(tmp_path)], stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"sealing\n"
        time.sleep(rng.uniform(0.0, 0.15))
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            kills += 1
        child.wait()
    final = subprocess.run([sys.executable, "-c", SEAL_CHILD, str(tmp_path)], capture_output=True, text=True)
    assert final.returncode == 0 and final.stdout.split() == ["sealing", "done"], final.stderr
    assert kills >= 6
    report = verify_archive(tmp_path / "archive", [tmp_path / "cert.pem"])
    assert report.ok, report.lines()
    assert report.lines() == ["coffre 0099/7: 500 lot(s), 1500 event(s), 500 checkpoint(s): OK"]
    assert not list((tmp_path / "archive").rglob(".tmp-*"))


def test_key_rotation_mid_stream(tmp_path):
    old, old_cert = keypair(tmp_path, "old")
    new, new_cert = keypair(tmp_path, "new")
    (tmp_path / "archive").mkdir()
    storage = LocalStorage(tmp_path / "archive")
    with JournalSet(tmp_path / "journal") as journals:
        journal = journals.journal("0099", 7)
        for signer, ids in ((old, range(1, 7)), (new, range(7, 11))):
            for n in ids:
                journal.append(n, event(7, n))
            journal.sync()
            sealer = Sealer(storage, signer, journals, max_events=3, max_age=3600, clock=Clock())
            sealer.start()
            sealer.seal_all()
    both = verify_archive(tmp_path / "archive", [old_cert, new_cert])
    assert both.ok, both.lines()
    only_new = failures(tmp_path / "archive", new_cert)
    assert {line.split(":")[0].rsplit("/", 1)[-1] for line in only_new if "signature" in line} == {
        "0099-7-0000000001.xml",
        "0099-7-0000000002.xml",
    }


# -- the S3 Object Lock backend, through the vault's configuration ------------------------------------


def test_sealing_into_s3_object_lock_and_verifying_what_is_downloaded(
    tmp_path, s3_endpoint, s3_client, monkeypatch, trusted
):
    from coffre.adapters.archive import archive_storage
    from coffre.config import Settings

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    bucket = "coffre-archive-test"
    settings = Settings(
        data_dir=tmp_path,
        archive_backend="s3",
        s3_bucket=bucket,
        s3_endpoint_url=s3_endpoint,
        s3_prefix="anj",
    )
    storage = archive_storage(settings)  # creates the bucket with Object Lock
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(storage, trusted[0], journals, max_events=4, max_age=3600, clock=Clock())
        journal = journals.journal("0099", 7)
        for n in range(1, 11):
            journal.append(n, event(7, n))
        journal.sync()
        sealer.recorded("0099", 7)
        sealer.seal_all()
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert len(keys) == 9 and all(
        k.startswith("anj/0099/7/") for k in keys
    )  # 3 lots, checkpoints, seal notes
    head = s3_client.head_object(Bucket=bucket, Key=keys[0])
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert head["ObjectLockRetainUntilDate"] > datetime.now(UTC) + timedelta(days=6 * 365)
    download = tmp_path / "download"
    for key in keys:
        target = download / key.removeprefix("anj/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read())
    report = verify_archive(download, [trusted[1]])
    assert report.lines() == ["coffre 0099/7: 3 lot(s), 10 event(s), 3 checkpoint(s): OK"]
    with pytest.raises(
        Exception, match="AccessDenied"
    ):  # compliance mode: a locked version cannot be deleted
        s3_client.delete_object(Bucket=bucket, Key=keys[0], VersionId=head["VersionId"])


def test_lots_are_sealed_by_age(tmp_path, trusted):
    (tmp_path / "archive").mkdir()
    now = [0.0]
    with JournalSet(tmp_path / "journal") as journals:
        sealer = Sealer(
            LocalStorage(tmp_path / "archive"),
            trusted[0],
            journals,
            max_events=100,
            max_age=5.0,
            clock=Clock(),
            monotonic=lambda: now[0],
        )
        journal = journals.journal("0099", 7)
        journal.append(1, event(7, 1))
        journal.sync()
        sealer.recorded("0099", 7)
        now[0] = 4.9
        assert sealer.seal_due() == 0
        now[0] = 5.0
        assert sealer.seal_due() == 1
        assert sealer.seal_due() == 0  # nothing waits any more
