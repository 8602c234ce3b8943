"""Writes the known-answer archive of docs/archive-format.md and its expected values. TEST ONLY.

    .venv/bin/python tests/known_answer/make.py [--out DIR]

One coffre (0099/7), three events in two lots (IDEvt 1-2, then 3), a checkpoint after each,
sealed by coffre's own sealer at fixed times and signed with the committed TEST ONLY key
(``test-only-signing-key.pem``, made on the first run if absent, with a self-signed certificate
valid 2000-2099). ``expected.json`` is computed with coffre's own code; tests/test_known_answer.py
recomputes every value from the documentation alone and never runs this script: the committed
bytes are the known answer.

Beside each checkpoint, its evidence (docs/archive-format.md, "Evidence beside a checkpoint"):
- a time-stamp token from a real TSA, Debian's ``openssl ts -reply`` (tests/tsa.py), whose
  TEST ONLY certificate (``test-only-tsa-cert.pem``, key ``test-only-tsa-key.pem``) is issued by
  a TEST ONLY root (``test-only-tsa-root.pem``; its key is not kept), all valid 2000-2099;
- a cosignature by a TEST ONLY witness key (``test-only-witness-key.pem``, its public key
  ``test-only-witness-pub.pem``) at a fixed time, one second after the checkpoint's ``Date``.

Run again with the committed keys, it writes the same bytes but for the tokens: the ECDSA
signatures are made deterministic (RFC 6979) here, Ed25519 is deterministic, so anyone can check
that the fixture is what this script makes. coffre's vault signs with random nonces; a verifier
cannot tell the two apart. A TSA dates its tokens by its own clock (and draws their serial
numbers), so ``openssl ts`` runs under ``faketime`` (Debian's package), its clock set one second
after each checkpoint's ``Date``, as a TSA answering at once would; each run still draws new
serial numbers and signatures: ``expected.json`` records the committed ones' ``genTime``, serial
number, SHA-256 and imprint.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from coffre_vault.sealer import Sealer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from lxml import etree

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.domain.chain import GENESIS
from coffre.domain.codec import canonical_bytes
from coffre.domain.evidence import cosignature_key, timestamp_key
from coffre.domain.lot import digest, event_leaf, format_time, parse_document, read_checkpoint, read_lot
from coffre.domain.merkle import EMPTY_ROOT, MerkleAccumulator
from coffre.domain.merkle import root as merkle_root
from coffre.domain.normalize import normalize
from coffre.domain.signing import DS_NS, Signer, generate_key_and_certificate, key_id
from coffre.domain.timestamp import build_request, load_trust, verify_response
from coffre.domain.witness import WitnessKey, note_body

HERE = Path(__file__).resolve().parent
KEY = "test-only-signing-key.pem"
CERT = "test-only-signing-cert.pem"
COMMON_NAME = "coffre known answer - TEST ONLY, NOT FOR PRODUCTION"
NOT_BEFORE = datetime(2000, 1, 1, tzinfo=UTC)
DAYS = 36_500  # to 2099-12-07
WARNING = b"TEST ONLY - NOT FOR PRODUCTION: the known-answer %s of coffre's docs/archive-format.md\n"
"""Text before a PEM block is allowed (RFC 7468) and ignored by OpenSSL, xmlsec1 and cryptography."""

TSA_ROOT = "test-only-tsa-root.pem"
TSA_CERT = "test-only-tsa-cert.pem"
TSA_KEY = "test-only-tsa-key.pem"
TSA_NAME = "test-tsa"
"""The TSA's name in the token files' names."""
WITNESS_KEY = "test-only-witness-key.pem"
WITNESS_PUB = "test-only-witness-pub.pem"
WITNESS_NAME = "coffre-test-witness"
"""The witness's name, in its signature lines and in the cosignature files' names."""
NOT_AFTER = datetime(2099, 12, 7, tzinfo=UTC)

ID_OPER, ID_COFFRE = "0099", 7
TIMES = [  # the sealer asks its clock for a lot's seal time, then for its checkpoint's date
    datetime(2026, 11, 22, 17, 0, 0, tzinfo=UTC),
    datetime(2026, 11, 22, 17, 0, 0, 250_000, tzinfo=UTC),
    datetime(2026, 11, 23, 8, 30, 0, tzinfo=UTC),
    datetime(2026, 11, 23, 8, 30, 0, 250_000, tzinfo=UTC),
]

EVENT = """<POINSCRIT><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><DateEvt>{date}</DateEvt>
<IDEvt>0</IDEvt><IDJoueur>{player}</IDJoueur><HashJoueur>a94a8fe5ccb19ba61c4c0873d391e987982fbbd3</HashJoueur>
<IPJoueur>2001:0DB8:0000:0000:0000:0000:0000:000{n}</IPJoueur><IDSession>s-{n}</IDSession>
<Inscription>ins-{n}</Inscription><Tech>T-1</Tech><Description>{description}</Description>
<Format>T/AS</Format><SoldeAvant>100.00</SoldeAvant><SoldeMouvement>{stake}</SoldeMouvement>
<SoldeAprès>{after}</SoldeAprès></POINSCRIT>"""
EVENTS = [
    EVENT.format(
        n=1, date="2026-11-22T16:58:01+01:00", player="p-1", description="Tournoi du dimanche",
        stake="10.00", after="90.00",
    ),
    EVENT.format(
        n=2, date="2026-11-22T16:58:02+01:00", player="p-2", description="Tournoi d'été — « Deauville »",
        stake="5.50", after="94.50",
    ),
    EVENT.format(
        n=3, date="2026-11-23T09:29:59+01:00", player="p-3", description="Sit &amp; Go",
        stake="2.00", after="98.00",
    ),
]  # fmt: skip


class DeterministicKey(ec.EllipticCurvePrivateKey):
    """A P-256 key whose ECDSA signatures are deterministic (RFC 6979), so that this script
    writes the same bytes on every run. Everything else is the wrapped key's."""

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self._key = key

    def sign(self, data: bytes, signature_algorithm: ec.EllipticCurveSignatureAlgorithm) -> bytes:
        assert isinstance(signature_algorithm, ec.ECDSA)
        return self._key.sign(data, ec.ECDSA(signature_algorithm.algorithm, deterministic_signing=True))

    def exchange(self, algorithm: ec.ECDH, peer_public_key: ec.EllipticCurvePublicKey) -> bytes:
        return self._key.exchange(algorithm, peer_public_key)

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self._key.public_key()

    @property
    def curve(self) -> ec.EllipticCurve:
        return self._key.curve

    @property
    def key_size(self) -> int:
        return self._key.key_size

    def private_numbers(self) -> ec.EllipticCurvePrivateNumbers:
        return self._key.private_numbers()

    def private_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        return self._key.private_bytes(*args, **kwargs)

    def __copy__(self) -> DeterministicKey:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> DeterministicKey:
        return self


def signer(folder: Path) -> Signer:
    """The TEST ONLY signer, its key and certificate made in ``folder`` on the first run."""
    if not (folder / KEY).exists():
        key_pem, cert_pem = generate_key_and_certificate(COMMON_NAME, "ecdsa", DAYS, NOT_BEFORE)
        (folder / KEY).write_bytes(WARNING % b"key" + key_pem)
        (folder / CERT).write_bytes(WARNING % b"certificate" + cert_pem)
    plain = Signer.from_files(folder / KEY, folder / CERT)
    key = serialization.load_pem_private_key((folder / KEY).read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return Signer(DeterministicKey(key), plain.certificate)


def seal(archive: Path, sign: Signer) -> None:
    """The three events through coffre's journal and sealer, in lots of at most two."""
    archive.mkdir(parents=True)
    clock: Iterator[datetime] = iter(TIMES)
    with tempfile.TemporaryDirectory() as scratch, JournalSet(Path(scratch)) as journals:
        sealer = Sealer(
            LocalStorage(archive), sign, journals, max_events=2, max_age=3600, clock=lambda: next(clock)
        )
        journal = journals.journal(ID_OPER, ID_COFFRE)
        for id_evt, raw in enumerate(EVENTS, start=1):
            journal.append(id_evt, canonical_bytes(normalize(raw.encode(), id_evt=id_evt)))
        journal.sync()
        sealer.recorded(ID_OPER, ID_COFFRE)
        sealer.seal_due()
        sealer.seal_all()
    for path in archive.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the sealer makes them read-only


def _tsa_certificate(
    subject: str,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey,
    signing: ec.EllipticCurvePrivateKey,
    ca: bool,
) -> x509.Certificate:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, subject),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "coffre tests"),
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer if not ca else name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    else:
        usage = x509.KeyUsage(True, True, False, False, False, False, False, False, False)
        builder = builder.add_extension(usage, critical=True)
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True
        )
    return builder.sign(signing, hashes.SHA256())


def tsa_identity(folder: Path) -> Any:
    """The TEST ONLY TSA (its certificate and key) and its root, made on the first run."""
    sys.path.insert(0, str(HERE.parent))
    from tsa import Identity  # tests/tsa.py: the real openssl TSA of the tests

    if not (folder / TSA_CERT).exists():
        root_key = ec.generate_private_key(ec.SECP256R1())
        root = _tsa_certificate(
            "coffre known answer TSA root - TEST ONLY", x509.Name([]), root_key.public_key(), root_key, True
        )
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = _tsa_certificate(
            "coffre known answer TSA - TEST ONLY", root.subject, key.public_key(), root_key, False
        )
        (folder / TSA_ROOT).write_bytes(WARNING % b"TSA root" + root.public_bytes(serialization.Encoding.PEM))
        (folder / TSA_CERT).write_bytes(
            WARNING % b"TSA certificate" + leaf.public_bytes(serialization.Encoding.PEM)
        )
        (folder / TSA_KEY).write_bytes(
            WARNING % b"TSA key"
            + key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    (certificate,) = load_trust((folder / TSA_CERT).read_bytes())
    return Identity(certificate, folder / TSA_CERT, folder / TSA_KEY)


def witness_key(folder: Path) -> WitnessKey:
    if not (folder / WITNESS_KEY).exists():
        key = WitnessKey.generate(WITNESS_NAME)
        (folder / WITNESS_KEY).write_bytes(WARNING % b"witness key" + key.private_pem())
        (folder / WITNESS_PUB).write_bytes(WARNING % b"witness public key" + key.public.pem())
    return WitnessKey.from_pem(WITNESS_NAME, (folder / WITNESS_KEY).read_bytes())


def add_evidence(out: Path) -> None:
    """A token from the openssl TSA and a cosignature beside each checkpoint."""
    sys.path.insert(0, str(HERE.parent))
    from tsa import Tsa, fetch

    archive = out / "archive"
    identity = tsa_identity(out)
    roots = load_trust((out / TSA_ROOT).read_bytes())
    witness = witness_key(out)
    faketime = shutil.which("faketime")
    if faketime is None:
        raise SystemExit("make.py needs faketime (Debian's faketime) to date the tokens at their checkpoints")
    with tempfile.TemporaryDirectory() as scratch, Tsa(Path(scratch), identity, None).serving() as tsa:  # type: ignore[arg-type]
        # The TSA dates a token by its clock: openssl runs under faketime, one second after the
        # checkpoint's Date, as a TSA answering at once would.
        wrapper = Path(scratch) / "openssl-at"
        wrapper.write_text(f'#!/bin/sh\nexec {faketime} -f "@$KNOWN_ANSWER_TSA_TIME" {tsa.openssl} "$@"\n')
        wrapper.chmod(0o755)
        tsa.openssl = str(wrapper)
        for path in sorted((archive / ID_OPER / str(ID_COFFRE) / "checkpoints").glob("*.xml")):
            document = path.read_bytes()
            checkpoint = read_checkpoint(parse_document(document))
            os.environ["KNOWN_ANSWER_TSA_TIME"] = f"{checkpoint.at + timedelta(seconds=1):%Y-%m-%d %H:%M:%S}"
            request = build_request(document)
            stamp = verify_response(fetch(tsa.url, request.der), document, request.nonce, roots)
            number = checkpoint.lot_number
            (archive / timestamp_key(ID_OPER, ID_COFFRE, number, TSA_NAME)).write_bytes(stamp.token)
            body = note_body(checkpoint)
            at = int(checkpoint.at.timestamp()) + 1
            note = body + b"\n" + witness.cosign(body, at)
            (archive / cosignature_key(ID_OPER, ID_COFFRE, number, WITNESS_NAME)).write_bytes(note)


def evidence_values(out: Path) -> dict[str, Any]:
    """What a verifier computes from the tokens and cosignatures."""
    archive = out / "archive"
    roots = load_trust((out / TSA_ROOT).read_bytes())
    witness = witness_key(out)
    tokens, cosignatures = [], []
    from coffre.domain.timestamp import verify_token

    for path in sorted((archive / ID_OPER / str(ID_COFFRE) / "checkpoints").glob("*.xml")):
        document = path.read_bytes()
        checkpoint = read_checkpoint(parse_document(document))
        number = checkpoint.lot_number
        token_file = archive / timestamp_key(ID_OPER, ID_COFFRE, number, TSA_NAME)
        token = token_file.read_bytes()
        stamp = verify_token(token, document, roots)
        tokens.append(
            {
                "file": token_file.relative_to(out).as_posix(),
                "checkpoint": path.relative_to(out).as_posix(),
                "imprint": digest(document).hex(),
                "gen_time": f"{stamp.gen_time:%Y-%m-%dT%H:%M:%SZ}",  # as coffre reads it: to the second
                "serial_number": stamp.serial_number,
                "tsa_subject": stamp.tsa_certificate.subject.rfc4514_string(),
                "sha256": digest(token).hex(),
                "delay_seconds": int((stamp.gen_time - checkpoint.at).total_seconds()),
            }
        )
        cosig_file = archive / cosignature_key(ID_OPER, ID_COFFRE, number, WITNESS_NAME)
        note = cosig_file.read_bytes()
        body = note_body(checkpoint)
        line = note[len(body) + 1 :].decode()
        blob = base64.b64decode(line.split(" ")[2])
        at = int.from_bytes(blob[4:12], "big")
        cosignatures.append(
            {
                "file": cosig_file.relative_to(out).as_posix(),
                "checkpoint": path.relative_to(out).as_posix(),
                "note_body": body.decode(),
                "time": at,
                "signed_message": f"cosignature/v1\ntime {at}\n" + body.decode(),
                "signature_line": line,
                "signature": blob[12:].hex(),
                "sha256": digest(note).hex(),
            }
        )
    return {
        "tsa": {"name": TSA_NAME, "root": TSA_ROOT, "certificate": TSA_CERT, "tokens": tokens},
        "witness": {
            "name": WITNESS_NAME,
            "public_key": WITNESS_PUB,
            "public_key_raw": witness.public.key.public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            ).hex(),
            "key_id": witness.public.key_id.hex(),
            "vkey": witness.public.vkey,
            "cosignatures": cosignatures,
        },
    }


def signed_digest(document: bytes) -> str:
    """The SHA-256 (hex) of what the signature's Reference covers: the exclusive C14N, without
    comments, of the document without its ds:Signature (the DigestValue, in hex)."""
    root = parse_document(document)
    signature = root.find(f"{{{DS_NS}}}Signature")
    assert signature is not None
    root.remove(signature)
    return digest(etree.tostring(root, method="c14n", exclusive=True, with_comments=False)).hex()


def expected(out: Path, sign: Signer) -> dict[str, Any]:
    """Every value a verifier computes, from coffre's own reading of the archive."""
    archive = out / "archive"
    files = sorted(p for p in archive.rglob("*.xml"))
    lot_files = [p for p in files if p.parent.name != "checkpoints"]
    checkpoint_files = [p for p in files if p.parent.name == "checkpoints"]
    events, lots, leaves = [], [], []
    tree = MerkleAccumulator()
    chain = GENESIS
    for path in sorted(lot_files, key=lambda p: p.name):
        document = path.read_bytes()
        lot = read_lot(parse_document(document))
        h = lot.header
        lot_leaves = []
        for event in lot.events:
            leaf = event_leaf(event.canonical)
            lot_leaves.append(leaf)
            tree.append(leaf)
            chain = event.chain_hash
            events.append(
                {
                    "id_evt": event.id_evt,
                    "lot": h.number,
                    "canonical_bytes": len(event.canonical),
                    "canonical_sha256": digest(event.canonical).hex(),
                    "leaf_hash": leaf.hex(),
                    "chain_hash": event.chain_hash.hex(),
                }
            )
        leaves += lot_leaves
        lots.append(
            {
                "file": path.relative_to(out).as_posix(),
                "number": h.number,
                "first_id_evt": h.first_id_evt,
                "last_id_evt": h.last_id_evt,
                "previous_chain_hash": h.previous_chain_hash.hex(),
                "last_chain_hash": h.last_chain_hash.hex(),
                "previous_lot_digest": h.previous_lot_digest.hex(),
                "merkle_root": merkle_root(lot_leaves).hex(),
                "tree_size": tree.size,
                "tree_root": tree.root().hex(),
                "sealed_at": format_time(h.sealed_at),
                "signed_content_sha256": signed_digest(document),
                "file_sha256": digest(document).hex(),
            }
        )
    checkpoints = []
    for path in checkpoint_files:
        document = path.read_bytes()
        checkpoint = read_checkpoint(parse_document(document))
        checkpoints.append(
            {
                "file": path.relative_to(out).as_posix(),
                "lot_number": checkpoint.lot_number,
                "tree_size": checkpoint.tree_size,
                "last_id_evt": checkpoint.last_id_evt,
                "chain_hash": checkpoint.chain_hash.hex(),
                "tree_root": checkpoint.tree_root.hex(),
                "lot_digest": checkpoint.lot_digest.hex(),
                "date": format_time(checkpoint.at),
                "signed_content_sha256": signed_digest(document),
                "file_sha256": digest(document).hex(),
            }
        )
    assert chain == bytes.fromhex(lots[-1]["last_chain_hash"])
    return {
        "about": "The known answer of docs/archive-format.md: TEST ONLY, signed with a test key.",
        "certificate": CERT,
        "key_id": key_id(sign.certificate),
        "id_oper": ID_OPER,
        "id_coffre": ID_COFFRE,
        "genesis": GENESIS.hex(),
        "empty_tree_root": EMPTY_ROOT.hex(),
        "events": events,
        "lots": lots,
        "checkpoints": checkpoints,
        **evidence_values(out),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: beside this script)")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    if (out / "archive").exists():
        shutil.rmtree(out / "archive")
    if out != HERE and (HERE / KEY).exists():
        for name in (KEY, CERT, TSA_ROOT, TSA_CERT, TSA_KEY, WITNESS_KEY, WITNESS_PUB):
            if (HERE / name).exists():
                shutil.copy(HERE / name, out / name)
    sign = signer(out)
    seal(out / "archive", sign)
    add_evidence(out)
    for path in (out / "archive").rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (out / "expected.json").write_text(json.dumps(expected(out, sign), indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {out / 'archive'} and {out / 'expected.json'}")


if __name__ == "__main__":
    main()
