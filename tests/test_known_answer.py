"""The known answer of docs/archive-format.md: a committed archive (tests/known_answer, TEST ONLY
key) whose every value is recomputed here by a reader written from the documentation alone
(hashlib, lxml's C14N and cryptography; nothing of coffre's chain, Merkle or lot code), then
checked by ``coffre verify`` and xmlsec1, then tampered with, each time with the exact report.

The fixture is never regenerated here: its committed bytes are the known answer
(tests/known_answer/make.py wrote them).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from lxml import etree

from coffre.commands.verify import verify_archive
from coffre.domain.signing import Signer
from coffre.domain.witness import WitnessKey

from xmlsec_tool import xmlsec1_verify

KNOWN = Path(__file__).resolve().parent / "known_answer"
EXPECTED = json.loads((KNOWN / "expected.json").read_text(encoding="utf-8"))
CERT = KNOWN / EXPECTED["certificate"]
LOTS = EXPECTED["lots"]
CHECKPOINTS = EXPECTED["checkpoints"]
DS = "{http://www.w3.org/2000/09/xmldsig#}"
COUNTS = "coffre 0099/7: 2 lot(s), 3 event(s), 2 checkpoint(s)"
SUMMARY = f"{COUNTS}, 2 token(s) not checked, 2 cosignature(s) not checked"
"""Without --tsa-cert and --witness-key the evidence is counted, and said not checked."""

# -- an independent reader, from docs/archive-format.md alone ---------------------------------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def parse(document: bytes) -> etree._Element:
    """No DTD, no entities, no network; comments dropped, as the canonical form drops them."""
    if b"<!DOCTYPE" in document:
        raise ValueError("a DTD")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True)
    return etree.fromstring(document, parser)


def c14n(element: etree._Element) -> bytes:
    """Exclusive XML Canonicalization 1.0, without comments, no InclusiveNamespaces prefixes."""
    return etree.tostring(element, method="c14n", exclusive=True, with_comments=False)


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 §2.1.1 over leaf hashes: split at the largest power of two smaller than n."""
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def values(parent: etree._Element) -> dict[str, str]:
    """Every element child's text, signature aside (the whole text of the canonical form)."""
    return {child.tag: child.text or "" for child in parent if child.tag != f"{DS}Signature"}


def signed_content(root: etree._Element) -> bytes:
    """What the Reference (URI="", enveloped-signature, exc-c14n) covers."""
    document = copy.deepcopy(root)
    document.remove(document.find(f"{DS}Signature"))
    return c14n(document)


def check_signature(root: etree._Element, certificate: x509.Certificate) -> None:
    """The digest, then ECDSA-SHA256 (r ‖ s) over the canonical SignedInfo, with the trusted key."""
    signature = root.find(f"{DS}Signature")
    signed_info = signature.find(f"{DS}SignedInfo")
    claimed = base64.b64decode(signed_info.findtext(f"{DS}Reference/{DS}DigestValue"))
    assert sha256(signed_content(root)) == claimed
    value = base64.b64decode(signature.findtext(f"{DS}SignatureValue"))
    r, s = int.from_bytes(value[:32], "big"), int.from_bytes(value[32:], "big")
    public_key = certificate.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    public_key.verify(encode_dss_signature(r, s), c14n(signed_info), ec.ECDSA(hashes.SHA256()))
    embedded = "".join(signature.findtext(f"{DS}KeyInfo/{DS}X509Data/{DS}X509Certificate").split())
    assert base64.b64decode(embedded) == certificate.public_bytes(serialization.Encoding.DER)


def key_id(certificate: x509.Certificate) -> str:
    spki = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return sha256(spki).hex()


# -- (a) every expected value, recomputed --------------------------------------------------------------


def test_every_value_recomputes_from_the_documentation_alone():
    certificate = x509.load_pem_x509_certificate(CERT.read_bytes())
    assert key_id(certificate) == EXPECTED["key_id"]
    assert EXPECTED["empty_tree_root"] == sha256(b"").hex()
    assert EXPECTED["genesis"] == bytes(32).hex()
    chain, previous_file, leaves, events = bytes(32), bytes(32), [], iter(EXPECTED["events"])
    chain_at, file_digests = {}, {}
    for expected in LOTS:
        document = (KNOWN / expected["file"]).read_bytes()
        root = parse(document)
        assert root.tag == "LotCoffre" and root.get("version") == "1"
        check_signature(root, certificate)
        assert root.findtext(f"{DS}Signature/{DS}KeyInfo/{DS}KeyName") == EXPECTED["key_id"]
        assert sha256(signed_content(root)).hex() == expected["signed_content_sha256"]
        head = values(root.find("Entete"))
        assert (head["IDOper"], head["IDCoffre"], head["NumeroLot"]) == ("0099", "7", str(expected["number"]))
        assert head["PremierIDEvt"] == str(expected["first_id_evt"]) == str(len(leaves) + 1)
        assert head["HashChainePrecedent"] == chain.hex() == expected["previous_chain_hash"]
        assert head["EmpreinteLotPrecedent"] == previous_file.hex() == expected["previous_lot_digest"]
        lot_leaves = []
        for holder in root.find("Evenements"):
            want = next(events)
            (event,) = holder
            canonical = c14n(event)  # the event element on its own
            assert (len(canonical), sha256(canonical).hex()) == (
                want["canonical_bytes"],
                want["canonical_sha256"],
            )
            leaf = sha256(b"\x00" + canonical)
            chain = sha256(chain + canonical)  # the previous hash's 32 raw bytes, then E(n)
            assert leaf.hex() == want["leaf_hash"]
            assert chain.hex() == want["chain_hash"] == holder.get("HashChaine")
            assert holder.get("IDEvt") == event.findtext("IDEvt") == str(want["id_evt"])
            assert (event.findtext("IDOper"), event.findtext("IDCoffre")) == ("0099", "7")
            lot_leaves.append(leaf)
            leaves.append(leaf)
            chain_at[len(leaves)] = chain
        assert head["DernierIDEvt"] == str(expected["last_id_evt"]) == str(len(leaves))
        assert head["NombreEvt"] == str(len(lot_leaves))
        assert head["HashChaineDernier"] == chain.hex() == expected["last_chain_hash"]
        assert head["RacineMerkle"] == mth(lot_leaves).hex() == expected["merkle_root"]
        assert head["TailleArbreCoffre"] == str(len(leaves)) == str(expected["tree_size"])
        assert head["RacineArbreCoffre"] == mth(leaves).hex() == expected["tree_root"]
        assert head["DateScellement"] == expected["sealed_at"]
        sealed = datetime.fromisoformat(head["DateScellement"].replace("Z", "+00:00"))
        assert certificate.not_valid_before_utc <= sealed <= certificate.not_valid_after_utc
        assert expected["file"].split("/")[-4:-1] == [f"{sealed:%Y}", f"{sealed:%m}", f"{sealed:%d}"]
        previous_file = sha256(document)
        assert previous_file.hex() == expected["file_sha256"]
        file_digests[expected["number"]] = previous_file
    assert next(events, None) is None
    assert mth(leaves[:2]) == sha256(b"\x01" + leaves[0] + leaves[1])
    assert mth(leaves) == sha256(b"\x01" + mth(leaves[:2]) + leaves[2])

    assert [c["lot_number"] for c in CHECKPOINTS] == [1, 2]
    for expected in CHECKPOINTS:
        document = (KNOWN / expected["file"]).read_bytes()
        root = parse(document)
        assert root.tag == "PointDeControle" and root.get("version") == "1"
        check_signature(root, certificate)
        assert sha256(signed_content(root)).hex() == expected["signed_content_sha256"]
        assert sha256(document).hex() == expected["file_sha256"]
        fields = values(root)
        size = int(fields["TailleArbre"])
        assert size == expected["tree_size"] == int(fields["DernierIDEvt"]) == expected["last_id_evt"]
        assert fields["NumeroLot"] == str(expected["lot_number"])
        assert fields["HashChaine"] == chain_at[size].hex() == expected["chain_hash"]
        assert fields["RacineArbre"] == mth(leaves[:size]).hex() == expected["tree_root"]
        assert fields["EmpreinteLot"] == file_digests[expected["lot_number"]].hex() == expected["lot_digest"]
        assert fields["Date"] == expected["date"]


# -- (b) coffre verify, (c) xmlsec1 ----------------------------------------------------------------------


def cli_verify(archive: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffre.cli", "verify", str(archive), "--cert", str(CERT), *options],
        capture_output=True,
        text=True,
        check=False,
    )


def test_coffre_verify_accepts_the_known_answer():
    run = cli_verify(KNOWN / "archive")
    assert (run.returncode, run.stdout) == (0, f"{SUMMARY}: OK\n"), run.stderr


@pytest.mark.parametrize("document", [e["file"] for e in LOTS + CHECKPOINTS])
def test_xmlsec1_accepts_every_file_at_its_own_time(document):
    at = next(e.get("sealed_at") or e["date"] for e in LOTS + CHECKPOINTS if e["file"] == document)
    run = xmlsec1_verify(KNOWN / document, CERT, "--verification-gmt-time", at[:19].replace("T", " "))
    assert run.returncode == 0, run.stderr


# -- (d) tampering, each with its exact report ---------------------------------------------------------

LOT1, LOT2 = (e["file"].removeprefix("archive/") for e in LOTS)
CP1, CP2 = (e["file"].removeprefix("archive/") for e in CHECKPOINTS)


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    target = tmp_path / "archive"
    shutil.copytree(KNOWN / "archive", target)
    return target


def report(archive: Path, **options: object) -> list[str]:
    return verify_archive(archive, [CERT], **options).lines()  # type: ignore[arg-type]


def test_the_copy_verifies(archive):
    assert report(archive) == [f"{SUMMARY}: OK"]


def resign(path: Path, change=lambda root: None) -> None:
    """Change a document and sign it again with the (TEST ONLY) key its certificate trusts."""
    signer = Signer.from_files(KNOWN / "test-only-signing-key.pem", CERT)
    root = parse(path.read_bytes())
    root.remove(root.find(f"{DS}Signature"))
    change(root)
    path.write_bytes(etree.tostring(signer.sign(root), xml_declaration=True, encoding="UTF-8"))


def test_a_middle_lot_resigned_is_reported_on_itself(archive):
    """Re-signed as it was by whoever holds the key: its own signature holds, its file is not the
    one sealed. The next lot's link, which its checkpoint confirms, is not blamed."""
    resign(archive / LOT1)
    assert report(archive) == [
        f"{LOT1}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of {CP1}",
        f"{SUMMARY}: 1 failure(s)",
    ]


def test_a_middle_lot_rewritten_and_resigned_is_reported_on_itself_and_its_checkpoint(archive):
    """An event changed, the lot's chain hashes and roots recomputed and signed with the key."""

    def rewrite(root: etree._Element) -> None:
        root.find("Evenements")[1][0].find("IDJoueur").text = "someone-else"
        chain, leaves = bytes(32), []
        for holder in root.find("Evenements"):
            canonical = c14n(holder[0])
            chain = sha256(chain + canonical)
            holder.set("HashChaine", chain.hex())
            leaves.append(sha256(b"\x00" + canonical))
        head = root.find("Entete")
        head.find("HashChaineDernier").text = chain.hex()
        head.find("RacineMerkle").text = head.find("RacineArbreCoffre").text = mth(leaves).hex()

    resign(archive / LOT1, rewrite)
    assert report(archive) == [
        f"{LOT1}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of {CP1}",
        f"{CP1}: rewriting: the archive's first 2 events are not those the checkpoint signed; "
        "later trees are not compared",
        f"{SUMMARY}: 2 failure(s)",
    ]


def test_a_comment_splitting_a_header_value_is_read_from_the_canonical_form(archive):
    """The signature holds (comments are outside the signed content) and xmlsec1 accepts the file;
    the value is the canonical form's, 0099, not the text before the comment; the file is no
    longer the one sealed."""
    path = archive / LOT1
    path.write_bytes(
        path.read_bytes().replace(b"<IDOper>0099</IDOper>", b"<IDOper>00<!-- 12 -->99</IDOper>", 1)
    )
    naive = etree.fromstring(path.read_bytes())  # lxml keeps comments by default
    assert naive.findtext("Entete/IDOper") == "00"
    assert parse(path.read_bytes()).findtext("Entete/IDOper") == "0099"
    if shutil.which("xmlsec1"):
        assert xmlsec1_verify(path, CERT, "--verification-gmt-time", "2026-11-22 17:00:00").returncode == 0
    assert report(archive) == [
        f"{LOT1}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of {CP1}",
        f"{SUMMARY}: 1 failure(s)",
    ]


def test_a_byte_order_mark_and_whitespace_outside_the_root(archive):
    path = archive / LOT2
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes() + b"\n\n")
    assert report(archive) == [
        f"{LOT2}: lot digest: the file is not the one sealed: its SHA-256 is not the EmpreinteLot of {CP2}",
        f"{SUMMARY}: 1 failure(s)",
    ]


def test_a_comment_in_a_checkpoint_changes_nothing(archive):
    """No document records a checkpoint's file digest: only its canonical form counts."""
    path = archive / CP1
    path.write_bytes(path.read_bytes().replace(b"<TailleArbre>2<", b"<TailleArbre><!-- x -->2<"))
    assert report(archive) == [f"{SUMMARY}: OK"]


@pytest.mark.parametrize("number", [1, 2])
def test_a_missing_checkpoint(archive, number):
    """Removed with its evidence (left alone, each of its evidence files is a ``location``
    failure: evidence beside no checkpoint)."""
    checkpoint = archive / (CP1, CP2)[number - 1]
    for path in checkpoint.parent.glob(checkpoint.stem + ".*"):
        path.unlink()
    lot = (LOT1, LOT2)[number - 1]
    assert report(archive) == [
        f"{lot}: checkpoint: no checkpoint in the archive for lot {number}",
        "coffre 0099/7: 2 lot(s), 3 event(s), 1 checkpoint(s), 1 token(s) not checked, "
        "1 cosignature(s) not checked: 1 failure(s)",
    ]


def test_a_leftover_temporary_file_is_listed_and_ignored(archive):
    folder = (archive / LOT2).parent
    (folder / ".tmp-3f9a2c1e").write_bytes((archive / LOT2).read_bytes()[:200])  # a crash mid-write
    run = cli_verify(archive)
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines() == [
        f"{folder.relative_to(archive).as_posix()}/.tmp-3f9a2c1e: ignored: a temporary file an interrupted write left",
        f"{SUMMARY}: OK",
    ]


def test_a_kept_checkpoint_of_a_coffre_missing_from_the_archive(archive, tmp_path):
    kept = tmp_path / "kept.xml"
    shutil.copy(archive / CP2, kept)
    shutil.rmtree(archive / "0099" / "7")
    run = cli_verify(archive, "--checkpoint", str(kept))
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        f"{kept}: truncation: the checkpoint holds 3 events of coffre 0099/7, of which the archive holds no lot: "
        "events were removed",
        "coffre 0099/7: 0 lot(s), 0 event(s), 1 checkpoint(s): 1 failure(s)",
    ]


def test_a_forged_kept_checkpoint_of_a_missing_coffre_is_no_evidence(archive, tmp_path):
    kept = tmp_path / "kept.xml"
    kept.write_bytes((archive / CP2).read_bytes().replace(b"<TailleArbre>3<", b"<TailleArbre>9<"))
    shutil.rmtree(archive / "0099" / "7")
    assert report(archive, older_checkpoint=kept) == [
        f"{kept}: signature: the content does not match its signature (digest mismatch)",
        "coffre 0099/7: 0 lot(s), 0 event(s), 1 checkpoint(s): 1 failure(s)",
    ]


# -- (e) the evidence beside each checkpoint: tokens and cosignatures, from the documentation alone ----

TSA = EXPECTED["tsa"]
WITNESS = EXPECTED["witness"]
TSA_ROOT = KNOWN / TSA["root"]
WITNESS_PUB = KNOWN / WITNESS["public_key"]
EM_DASH = "\u2014"


def openssl_ts_verify(binary: str, token: Path, data: Path) -> subprocess.CompletedProcess[str]:
    """``openssl ts -verify`` of a kept token over a file, against the test TSA's root."""
    return subprocess.run(
        [
            binary,
            "ts",
            "-verify",
            "-token_in",
            "-in",
            str(token),
            "-data",
            str(data),
            "-CAfile",
            str(TSA_ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def openssl() -> str:
    binary = shutil.which("openssl")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is not installed, and CI needs it to check the tokens")
        pytest.skip("openssl is not installed (openssl ts -verify checks the tokens)")
    return binary


@pytest.mark.parametrize("index", [0, 1])
def test_every_token_checks_with_openssl_ts(index):
    """``openssl ts -verify`` (an independent implementation of RFC 3161): the signature, the
    TSA's certificate (carried in the token) chaining to the TEST ONLY root, its critical
    timeStamping EKU, and the imprint over the checkpoint file's bytes exactly as stored."""
    binary = openssl()
    want = TSA["tokens"][index]
    token, checkpoint = KNOWN / want["file"], KNOWN / want["checkpoint"]
    assert want["file"] == want["checkpoint"].replace(".xml", f".tsa-{TSA['name']}.tsr")
    assert sha256(token.read_bytes()).hex() == want["sha256"]
    assert sha256(checkpoint.read_bytes()).hex() == want["imprint"] == CHECKPOINTS[index]["file_sha256"]
    run = openssl_ts_verify(binary, token, checkpoint)
    assert run.returncode == 0 and "Verification: OK" in run.stdout, run.stdout + run.stderr
    text = subprocess.run(
        [binary, "ts", "-reply", "-token_in", "-in", str(token), "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    fields = dict(
        line.split(": ", 1) for line in text.splitlines() if ": " in line and not line.startswith(" ")
    )
    assert int(fields["Serial number"], 16) == want["serial_number"]
    assert fields["Hash Algorithm"] == "sha256"
    imprint = "".join(
        line.split(" - ", 1)[1][:47].replace("-", " ").replace(" ", "")
        for line in text.splitlines()
        if line.startswith("    00")
    )
    assert imprint == want["imprint"]
    stamped = datetime.strptime(
        fields["Time stamp"].rsplit(" ", 1)[0].split(".")[0] + fields["Time stamp"][-9:-4],
        "%b %d %H:%M:%S %Y",
    )
    assert f"{stamped:%Y-%m-%dT%H:%M:%SZ}" == want["gen_time"]
    date = datetime.fromisoformat(CHECKPOINTS[index]["date"].replace("Z", "+00:00"))
    delay = stamped.replace(tzinfo=UTC) - date
    assert int(delay.total_seconds()) in (want["delay_seconds"], want["delay_seconds"] + 1)
    assert timedelta(0) < delay <= timedelta(seconds=1)  # the TSA answered at once (make.py)
    # and the token with the other checkpoint's bytes is refused: its imprint names this one
    other = KNOWN / TSA["tokens"][1 - index]["checkpoint"]
    moved = openssl_ts_verify(binary, token, other)
    assert moved.returncode != 0


def witness_public() -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(WITNESS_PUB.read_bytes())
    assert isinstance(key, Ed25519PublicKey)
    return key


def raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@pytest.mark.parametrize("index", [0, 1])
def test_every_cosignature_recomputes_from_the_documentation_alone(index):
    """The note body from the checkpoint's values, the key id, the signed message and the Ed25519
    signature (C2SP tlog-checkpoint and tlog-cosignature), with hashlib, base64 and cryptography."""
    want = WITNESS["cosignatures"][index]
    expected = CHECKPOINTS[index]
    name = WITNESS["name"]
    assert want["file"] == want["checkpoint"].replace(".xml", f".witness-{name}.cosig")
    note = (KNOWN / want["file"]).read_bytes()
    assert sha256(note).hex() == want["sha256"]
    fields = values(parse((KNOWN / want["checkpoint"]).read_bytes()))
    root = bytes.fromhex(fields["RacineArbre"])
    body = f"coffre/{fields['IDOper']}/{fields['IDCoffre']}\n{fields['TailleArbre']}\n{base64.b64encode(root).decode()}\n"
    assert body == want["note_body"] and expected["tree_root"] == root.hex()
    text = note.decode("utf-8")
    assert text.startswith(body + "\n") and text.endswith("\n")
    (line,) = text[len(body) + 1 : -1].split("\n")
    assert line + "\n" == want["signature_line"]
    dash, signer, encoded = line.split(" ")
    assert (dash, signer) == (EM_DASH, name)
    blob = base64.b64decode(encoded, validate=True)
    assert len(blob) == 4 + 8 + 64
    key = witness_public()
    key_id = sha256(name.encode() + b"\n" + b"\x04" + raw(key))[:4]
    assert raw(key).hex() == WITNESS["public_key_raw"]
    assert blob[:4] == key_id and key_id.hex() == WITNESS["key_id"]
    vkey_key = base64.b64encode(b"\x04" + raw(key)).decode()
    assert WITNESS["vkey"] == f"{name}+{key_id.hex()}+{vkey_key}"
    at = int.from_bytes(blob[4:12], "big")
    date = datetime.fromisoformat(expected["date"].replace("Z", "+00:00"))
    assert at == want["time"] == int(date.timestamp()) + 1
    message = f"cosignature/v1\ntime {at}\n{body}"
    assert message == want["signed_message"] and blob[12:].hex() == want["signature"]
    key.verify(blob[12:], message.encode())


def evidence_report(archive: Path, **options: object) -> list[str]:
    return report(archive, tsa_certs=[TSA_ROOT], witness_keys=[WITNESS_PUB], **options)


EVIDENCE_SUMMARY = f"{COUNTS}, 2 token(s), 2 cosignature(s)"
TOKEN1, TOKEN2 = (e["file"].removeprefix("archive/") for e in TSA["tokens"])
COSIG1, COSIG2 = (e["file"].removeprefix("archive/") for e in WITNESS["cosignatures"])


def fingerprint(key: Ed25519PublicKey) -> str:
    """How coffre verify names a witness key: the first 16 hex digits of SHA-256 of its 32 bytes."""
    return sha256(raw(key)).hex()[:16]


def test_coffre_verify_checks_the_tokens_and_cosignatures():
    run = cli_verify(
        KNOWN / "archive",
        "--tsa-cert",
        str(TSA_ROOT),
        "--witness-key",
        str(WITNESS_PUB),
    )
    assert (run.returncode, run.stdout) == (0, f"{EVIDENCE_SUMMARY}: OK\n"), run.stderr
    run = cli_verify(KNOWN / "archive")
    assert run.stdout == f"{SUMMARY}: OK\n"


def test_tokens_later_than_the_bound_are_too_late(archive):
    """The fixture's tokens came within a second of their checkpoints; with a bound of 0 s they
    are late, as the tokens of an archive rebuilt later are under the default bound (a day;
    tests/test_verify_evidence.py rebuilds one)."""
    lines = report(archive, tsa_certs=[TSA_ROOT], tsa_max_delay=timedelta(0))
    expected = []
    for token, checkpoint, cp in zip(TSA["tokens"], CHECKPOINTS, (CP1, CP2), strict=True):
        expected += [
            f"{token['file'].removeprefix('archive/')}: timestamp: too late: genTime {token['gen_time']} is "
            f"{token['delay_seconds']} s after the checkpoint's Date {checkpoint['date']}, more than 0 s: "
            "an archive rebuilt later gets tokens of that day",
            f"{cp}: timestamp: none of its 1 time-stamp token(s) holds: nothing dates the checkpoint",
        ]
    assert lines == [*expected, f"{COUNTS}, 2 token(s), 2 cosignature(s) not checked: 4 failure(s)"]


def test_a_token_moved_to_another_checkpoint(archive):
    shutil.copy(archive / TOKEN1, archive / TOKEN2)
    assert evidence_report(archive) == [
        f"{TOKEN2}: timestamp: imprint: the token's message imprint is not the SHA-256 of this checkpoint's "
        "file (a token moved from another checkpoint, or the checkpoint changed)",
        f"{CP2}: timestamp: none of its 1 time-stamp token(s) holds: nothing dates the checkpoint",
        f"{EVIDENCE_SUMMARY}: 2 failure(s)",
    ]


def test_a_token_from_an_untrusted_tsa(archive, tmp_path):
    """A real TSA (openssl ts, tests/tsa.py) of another root time-stamps the very checkpoint. The
    line ends with the library's own words in parentheses (OpenSSL's error stack, whose codes and
    source lines vary with the OpenSSL build): checked up to them, and for the reason."""
    from coffre.domain.timestamp import build_request

    from tsa import Pki, Tsa, fetch

    pki = Pki(tmp_path, "another TSA root")
    document = (archive / CP1).read_bytes()
    request = build_request(document)
    with Tsa(tmp_path, pki.issue("another TSA"), pki).serving() as tsa:
        response = fetch(tsa.url, request.der)
    token = subprocess.run(
        [openssl(), "ts", "-reply", "-in", "/dev/stdin", "-token_out", "-out", "/dev/stdout"],
        input=response,
        capture_output=True,
        check=True,
    ).stdout
    (archive / TOKEN1).write_bytes(token)
    lines = evidence_report(archive)
    assert lines[0].startswith(
        f"{TOKEN1}: timestamp: the TSA's certificate does not chain to a trusted certificate ("
    ), lines
    assert lines[0].endswith('unable to get local issuer certificate" }]))')
    assert lines[1:] == [
        f"{CP1}: timestamp: none of its 1 time-stamp token(s) holds: nothing dates the checkpoint",
        f"{EVIDENCE_SUMMARY}: 2 failure(s)",
    ]


def newest_uncosigned(key: Ed25519PublicKey) -> str:
    return (
        f"{CP2}: cosignature: the newest checkpoint of coffre 0099/7 has no valid cosignature by witness key "
        f"{fingerprint(key)}: no witness vouches that the archive ends here"
    )


def test_a_cosignature_by_another_key(archive):
    other = WitnessKey(WITNESS["name"], Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
    body = WITNESS["cosignatures"][1]["note_body"].encode()
    (archive / COSIG2).write_bytes(body + b"\n" + other.cosign(body, WITNESS["cosignatures"][1]["time"]))
    other_id = sha256(WITNESS["name"].encode() + b"\n\x04" + raw(other.public.key))[:4].hex()
    assert evidence_report(archive) == [
        f"{COSIG2}: cosignature: no cosignature by a given witness key (it holds one by {WITNESS['name']} key id "
        f"{other_id}): a cosignature by another key",
        newest_uncosigned(witness_public()),
        f"{EVIDENCE_SUMMARY}: 2 failure(s)",
    ]


def test_a_cosignature_moved_to_another_checkpoint(archive):
    shutil.copy(archive / COSIG1, archive / COSIG2)
    assert evidence_report(archive) == [
        f"{COSIG2}: cosignature: the note is about another checkpoint (its origin, size or root differs from "
        "this one's): a cosignature moved from another checkpoint",
        newest_uncosigned(witness_public()),
        f"{EVIDENCE_SUMMARY}: 2 failure(s)",
    ]


def test_the_newest_checkpoint_s_cosignature_removed(archive):
    (archive / COSIG2).unlink()
    assert evidence_report(archive) == [
        newest_uncosigned(witness_public()),
        f"{COUNTS}, 2 token(s), 1 cosignature(s): 1 failure(s)",
    ]
    assert report(archive) == [f"{COUNTS}, 2 token(s) not checked, 1 cosignature(s) not checked: OK"]


def test_a_forged_cosignature(archive):
    """The signature's last bytes changed (the note and key id as they were)."""
    note = (archive / COSIG1).read_bytes()
    body, line = note.split(b"\n\n")
    dash, name, encoded = line.decode().rstrip("\n").split(" ")
    blob = bytearray(base64.b64decode(encoded))
    blob[-1] ^= 1
    (archive / COSIG1).write_bytes(
        body + b"\n\n" + f"{dash} {name} {base64.b64encode(bytes(blob)).decode()}\n".encode()
    )
    assert evidence_report(archive) == [
        f"{COSIG1}: cosignature: the cosignature by witness key {fingerprint(witness_public())} does not verify: "
        "forged or altered",
        f"{EVIDENCE_SUMMARY}: 1 failure(s)",
    ]


def test_evidence_misplaced_or_beside_no_checkpoint(archive):
    shutil.copy(archive / TOKEN1, archive / "0099" / "7" / "2026" / TOKEN1.rsplit("/", 1)[1])
    shutil.copy(archive / COSIG1, archive / COSIG1.replace("0000000001", "0000000009"))
    assert evidence_report(archive) == [
        f"0099/7/checkpoints/0099-7-0000000009.witness-{WITNESS['name']}.cosig: location: evidence beside no "
        "checkpoint: the archive has no 0099/7/checkpoints/0099-7-0000000009.xml",
        f"0099/7/2026/0099-7-0000000001.tsa-{TSA['name']}.tsr: location: evidence of coffre 0099/7 filed under "
        "0099/7/2026, not 0099/7/checkpoints",
        f"{EVIDENCE_SUMMARY}: 2 failure(s)",
    ]
