"""The witness's domain: the checkpoint note, cosignatures (C2SP tlog-cosignature) and the
judgement of add-checkpoint requests, on the known-answer archive's signed checkpoints."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coffre.domain.evidence import cosignature_key, parse_evidence_name, timestamp_key
from coffre.domain.lot import build_checkpoint, parse_document, read_checkpoint
from coffre.domain.merkle import consistency_proof
from coffre.domain.signing import Signer, TrustStore
from coffre.domain.witness import (
    AddCheckpoint,
    CosignatureInvalid,
    ProtocolError,
    Refusal,
    WitnessKey,
    WitnessPublicKey,
    cosigned_by,
    judge,
    load_public_keys,
    note_body,
    open_checkpoint,
    parse_note_body,
)

KNOWN = Path(__file__).parent / "known_answer"
CERT = KNOWN / "test-only-signing-cert.pem"
TRUST = TrustStore.from_pem_files([CERT])
EXPECTED = json.loads((KNOWN / "expected.json").read_text())
LEAVES = [bytes.fromhex(e["leaf_hash"]) for e in EXPECTED["events"]]
CHECKPOINT_1 = (KNOWN / "archive/0099/7/checkpoints/0099-7-0000000001.xml").read_bytes()
CHECKPOINT_2 = (KNOWN / "archive/0099/7/checkpoints/0099-7-0000000002.xml").read_bytes()


def signed_variant(document: bytes, **changes: object) -> bytes:
    """The checkpoint with some values changed, signed again with the test key (what an operator
    holding its key can do)."""
    signer = Signer.from_files(KNOWN / "test-only-signing-key.pem", CERT)
    checkpoint = replace(read_checkpoint(parse_document(document)), **changes)
    from lxml import etree

    return etree.tostring(signer.sign(build_checkpoint(checkpoint)), xml_declaration=True, encoding="UTF-8")


def test_note_body_is_the_c2sp_checkpoint() -> None:
    checkpoint = read_checkpoint(parse_document(CHECKPOINT_2))
    body = note_body(checkpoint)
    root = bytes.fromhex(EXPECTED["checkpoints"][1]["tree_root"])
    assert body == b"coffre/0099/7\n3\n" + base64.b64encode(root) + b"\n"
    assert parse_note_body(body) == ("coffre/0099/7", 3, root)


def test_cosignature_is_the_c2sp_cosignature_v1_bytes() -> None:
    """The signature line recomputed byte by byte from the C2SP text, verified with the raw key."""
    key = WitnessKey.generate("witness.anj.example")
    body = note_body(read_checkpoint(parse_document(CHECKPOINT_1)))
    line = key.cosign(body, 1_790_000_000)
    raw = key.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    expected_id = hashlib.sha256(b"witness.anj.example\n\x04" + raw).digest()[:4]
    dash, name, blob_b64 = line.decode().rstrip("\n").split(" ")
    blob = base64.b64decode(blob_b64)
    assert dash == "\u2014" and name == "witness.anj.example"
    assert blob[:4] == expected_id and struct.unpack(">Q", blob[4:12])[0] == 1_790_000_000
    key.private.public_key().verify(blob[12:], b"cosignature/v1\ntime 1790000000\n" + body)
    assert key.public.vkey.startswith(f"witness.anj.example+{expected_id.hex()}+")
    assert WitnessPublicKey.from_vkey(key.public.vkey).key_id == expected_id


def test_cosigned_note_checks() -> None:
    key = WitnessKey.generate("w1")
    other = WitnessKey.generate("w1")
    body_1 = note_body(read_checkpoint(parse_document(CHECKPOINT_1)))
    body_2 = note_body(read_checkpoint(parse_document(CHECKPOINT_2)))
    note = body_1 + b"\n" + key.cosign(body_1, 100)
    cosignature = cosigned_by(note, body_1, key.private.public_key())
    assert (cosignature.name, cosignature.time) == ("w1", 100)
    with pytest.raises(CosignatureInvalid, match="about another checkpoint"):
        cosigned_by(note, body_2, key.private.public_key())  # moved to another checkpoint
    with pytest.raises(CosignatureInvalid, match="no cosignature by the witness key"):
        cosigned_by(note, body_1, other.private.public_key())  # by another key
    forged = body_1 + b"\n" + key.cosign(body_2, 100)[:-1] + b"\n"  # a signature over another body
    with pytest.raises(CosignatureInvalid, match="does not verify"):
        cosigned_by(forged, body_1, key.private.public_key())
    with pytest.raises(CosignatureInvalid, match="not a signed note"):
        cosigned_by(body_1, body_1, key.private.public_key())
    pem = key.public.pem() + other.public.pem()
    assert len(load_public_keys(pem)) == 2
    with pytest.raises(ValueError):
        load_public_keys(CERT.read_bytes())


def test_add_checkpoint_round_trip_and_malformed() -> None:
    request = AddCheckpoint(2, tuple(consistency_proof(2, LEAVES)), CHECKPOINT_2)
    assert AddCheckpoint.decode(request.encode()) == request
    assert request.encode().startswith(b"old 2\n")
    for bad in (b"old 02\n\n<x/>", b"old 1\nnotbase64\n\n<x/>", b"new 1\n\n<x/>", b"old 1\n", b"old 1\n\n"):
        with pytest.raises(ProtocolError):
            AddCheckpoint.decode(bad)


def _checkpoint(document: bytes):  # type: ignore[no-untyped-def]
    return open_checkpoint(document, TRUST)


def test_judge_accepts_an_extension_and_refuses_the_rest() -> None:
    first = judge(None, _checkpoint(CHECKPOINT_1), AddCheckpoint(0, (), CHECKPOINT_1))
    assert (first.size, first.root.hex()) == (2, EXPECTED["checkpoints"][0]["tree_root"])
    # the same checkpoint again: cosigned again, nothing changes
    assert judge(first, _checkpoint(CHECKPOINT_1), AddCheckpoint(2, (), CHECKPOINT_1)) == first
    proof = tuple(consistency_proof(2, LEAVES))
    second = judge(first, _checkpoint(CHECKPOINT_2), AddCheckpoint(2, proof, CHECKPOINT_2))
    assert second.size == 3

    with pytest.raises(Refusal) as refused:  # the sender thinks the witness has nothing
        judge(first, _checkpoint(CHECKPOINT_2), AddCheckpoint(0, (), CHECKPOINT_2))
    assert (refused.value.kind, refused.value.status, refused.value.size) == ("conflict", 409, 2)

    with pytest.raises(Refusal) as refused:  # the newest lot removed
        judge(second, _checkpoint(CHECKPOINT_1), AddCheckpoint(3, (), CHECKPOINT_1))
    assert (refused.value.kind, refused.value.status) == ("truncation", 409)

    fork = signed_variant(CHECKPOINT_1, tree_root=bytes(range(32)))
    with pytest.raises(Refusal) as refused:  # the same size, another root
        judge(first, _checkpoint(fork), AddCheckpoint(2, (), fork))
    assert (refused.value.kind, refused.value.status) == ("fork", 409)

    rewritten = signed_variant(CHECKPOINT_2, tree_root=bytes(range(32)))
    with pytest.raises(Refusal) as refused:  # a larger tree that does not extend the cosigned one
        judge(first, _checkpoint(rewritten), AddCheckpoint(2, proof, rewritten))
    assert (refused.value.kind, refused.value.status) == ("rewrite", 422)


def test_open_checkpoint_refuses_unsigned_and_untrusted() -> None:
    with pytest.raises(Refusal) as refused:
        open_checkpoint(CHECKPOINT_1.replace(b"<TailleArbre>2<", b"<TailleArbre>9<"), TRUST)
    assert refused.value.kind == "signature"
    with pytest.raises(Refusal) as refused:
        open_checkpoint(CHECKPOINT_1, TrustStore([]))
    assert refused.value.kind == "signature"
    with pytest.raises(Refusal) as refused:
        open_checkpoint(b"<not", TRUST)
    assert refused.value.kind == "malformed"


def test_evidence_names() -> None:
    assert (
        timestamp_key("0099", 7, 2, "tsa1.example")
        == "0099/7/checkpoints/0099-7-0000000002.tsa-tsa1.example.tsr"
    )
    key = cosignature_key("0099", 7, 2, "anj")
    assert key == "0099/7/checkpoints/0099-7-0000000002.witness-anj.cosig"
    parsed = parse_evidence_name(key)
    assert parsed is not None and (parsed.lot_number, parsed.kind, parsed.name) == (2, "witness", "anj")
    for bad in (
        "0099-7-0000000002.tsa-UP.tsr",
        "0099-7-0000000002.tsa-.tsr",
        "0099-7-2.tsa-a.tsr",
        "x.cosig",
    ):
        assert parse_evidence_name(bad) is None
    with pytest.raises(ValueError):
        timestamp_key("0099", 7, 2, "../x")


def test_key_pem_round_trip() -> None:
    key = WitnessKey.generate("w")
    again = WitnessKey.from_pem("w", key.private_pem())
    assert again.public.key_id == key.public.key_id
    with pytest.raises(ValueError):
        WitnessKey.from_pem(
            "w",
            Ed25519PrivateKey.generate()
            .private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            .replace(b"PRIVATE KEY", b"PUBLIC KEY"),
        )


def test_evidence_names_never_hold_two_dots() -> None:
    """A storage key never holds '..': neither may a TSA's or witness's name."""
    from coffre.domain.evidence import check_name

    for bad in ("a..b", "a.", "a" * 64, "-a", ".a"):
        with pytest.raises(ValueError):
            check_name(bad)
        assert parse_evidence_name(f"0099-7-0000000002.tsa-{bad}.tsr") is None
    for good in ("a.b", "tsa-1.example", "a" * 63, "0"):
        assert check_name(good) == good


def test_a_certificate_bound_to_one_operator_signs_no_other_s_checkpoints() -> None:
    """A witness serving several operators binds each certificate to its IDOper: an operator
    cannot have a checkpoint of another's coffre cosigned first (and so fork it)."""
    from coffre.domain.witness import OperatorTrust

    certificate = next(iter(TRUST))
    bound_elsewhere = OperatorTrust(by_oper={"0042": (certificate,)})
    with pytest.raises(Refusal) as refused:
        open_checkpoint(CHECKPOINT_1, bound_elsewhere)  # a checkpoint of 0099
    assert refused.value.kind == "signature" and "for IDOper '0099'" in refused.value.message
    assert open_checkpoint(CHECKPOINT_1, OperatorTrust(by_oper={"0099": (certificate,)})).id_oper == "0099"
    assert open_checkpoint(CHECKPOINT_1, OperatorTrust(anyone=(certificate,))).id_oper == "0099"
