"""Enveloped XML-DSig of coffre documents: signing, xmlsec1 interoperability, and a verifier
that rejects tampering, untrusted or expired keys, signature wrapping, DTDs and garbage."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
import re
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from lxml import etree
from signxml import XMLSigner

from coffre.adapters.keys import DEVELOPMENT_SUFFIX, KeyFileError, load_signer, write_key_pair
from coffre.domain.signing import (
    DS_NS,
    ECDSA_SHA256,
    ENVELOPED_SIGNATURE,
    EXC_C14N,
    RSA_SHA256,
    SHA256,
    SignatureInvalid,
    Signer,
    TrustStore,
    generate_key_and_certificate,
    key_id,
    verify,
)

from xmlsec_tool import xmlsec1_verify as xmlsec1_tool

DOC = (
    b'<LotCoffre version="1"><Entete><IDOper>0099</IDOper></Entete><Evenements>'
    b'<Evenement IDEvt="1"><POINSCRIT><IDOper>0099</IDOper></POINSCRIT></Evenement>'
    b'<Evenement IDEvt="2"><POINSCRIT><IDOper>0099</IDOper></POINSCRIT></Evenement>'
    b"</Evenements></LotCoffre>"
)
NS = {"ds": DS_NS}


class Pair:
    """A signing key, its certificate and a signer built from them."""

    def __init__(self, algorithm: str = "ecdsa", not_before: datetime | None = None, days: int = 365) -> None:
        self.key_pem, self.cert_pem = generate_key_and_certificate("coffre test", algorithm, days, not_before)
        self.cert = x509.load_pem_x509_certificate(self.cert_pem)
        self.signer = Signer.from_pem(self.key_pem, self.cert_pem)
        self.trust = TrustStore([self.cert])
        self.now = self.cert.not_valid_before_utc + timedelta(hours=1)


@pytest.fixture(scope="module")
def ec() -> Pair:
    return Pair("ecdsa")


@pytest.fixture(scope="module")
def rsa() -> Pair:
    return Pair("rsa")


@pytest.fixture(scope="module")
def other() -> Pair:
    return Pair("ecdsa")


@pytest.fixture(params=["ecdsa", "rsa"])
def pair(request: pytest.FixtureRequest, ec: Pair, rsa: Pair) -> Pair:
    return ec if request.param == "ecdsa" else rsa


def tree(document: bytes) -> etree._Element:
    return etree.fromstring(document)


def dump(root: etree._Element) -> bytes:
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def rejected(document: bytes, pair: Pair, at: datetime | None = None, match: str | None = None) -> str:
    with pytest.raises(SignatureInvalid, match=match) as info:
        verify(document, pair.trust, at or pair.now)
    return str(info.value)


# --- signing ----------------------------------------------------------------------------------


def test_signature_shape(pair: Pair) -> None:
    signed = tree(pair.signer.sign_bytes(DOC))
    assert etree.QName(signed).localname == "LotCoffre"
    signatures = signed.findall(".//ds:Signature", NS)
    assert len(signatures) == 1 and signatures[0] is signed[-1]
    sig = signatures[0]
    assert sig.find("ds:SignedInfo/ds:CanonicalizationMethod", NS).get("Algorithm") == EXC_C14N
    assert sig.find("ds:SignedInfo/ds:SignatureMethod", NS).get("Algorithm") == pair.signer.algorithm
    (reference,) = sig.findall("ds:SignedInfo/ds:Reference", NS)
    assert reference.get("URI") == ""
    assert [t.get("Algorithm") for t in reference.findall("ds:Transforms/ds:Transform", NS)] == [
        ENVELOPED_SIGNATURE,
        EXC_C14N,
    ]
    assert reference.find("ds:DigestMethod", NS).get("Algorithm") == SHA256
    assert sig.findtext("ds:KeyInfo/ds:KeyName", namespaces=NS) == key_id(pair.cert) == pair.signer.key_id
    assert sig.find("ds:KeyInfo/ds:X509Data/ds:X509Certificate", NS) is not None
    assert sig.find("ds:KeyInfo/ds:KeyValue", NS) is None


def test_algorithm_follows_key_type(ec: Pair, rsa: Pair) -> None:
    assert ec.signer.algorithm == ECDSA_SHA256
    assert rsa.signer.algorithm == RSA_SHA256
    assert rsa.cert.public_key().key_size == 3072


def test_key_id_is_sha256_of_spki(ec: Pair) -> None:
    kid = key_id(ec.cert)
    assert len(kid) == 64 and kid == kid.lower()
    assert int(kid, 16) >= 0


def test_certificate_profile(ec: Pair) -> None:
    cert = ec.cert
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "coffre test"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "coffre"
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca is False
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical and usage.value.digital_signature and not usage.value.key_cert_sign
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)


def test_sign_does_not_touch_its_input(ec: Pair) -> None:
    root = tree(DOC)
    signed = ec.signer.sign(root)
    assert etree.tostring(root) == DOC
    assert signed[-1].tag == f"{{{DS_NS}}}Signature"


@pytest.mark.parametrize(
    "document",
    [
        b'<x:LotCoffre xmlns:x="urn:x"/>',
        b'<LotCoffre Id="a"/>',
        b'<LotCoffre><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"/></LotCoffre>',
        b'<!DOCTYPE LotCoffre [<!ENTITY e "x">]><LotCoffre>&e;</LotCoffre>',
    ],
)
def test_sign_refuses(ec: Pair, document: bytes) -> None:
    with pytest.raises(ValueError):
        ec.signer.sign_bytes(document)


def test_sign_with_entity_left_by_dtd_is_refused(ec: Pair) -> None:
    parser = etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True)
    root = etree.fromstring(b'<!DOCTYPE LotCoffre [<!ENTITY e "x">]><LotCoffre>&e;</LotCoffre>', parser)
    with pytest.raises(ValueError, match="cannot sign"):
        ec.signer.sign(root)


def test_signer_rejects_mismatched_key(ec: Pair, other: Pair) -> None:
    with pytest.raises(ValueError, match="does not match"):
        Signer.from_pem(ec.key_pem, other.cert_pem)


def test_signer_from_files(tmp_path: Path, ec: Pair) -> None:
    (tmp_path / "k.pem").write_bytes(ec.key_pem)
    (tmp_path / "c.pem").write_bytes(ec.cert_pem)
    signer = Signer.from_files(tmp_path / "k.pem", tmp_path / "c.pem")
    verify(signer.sign_bytes(DOC), ec.trust, ec.now)


# --- verification: the genuine document ---------------------------------------------------------


def test_verify_accepts_genuine(pair: Pair) -> None:
    verified = verify(pair.signer.sign_bytes(DOC), pair.trust, pair.now)
    assert etree.tostring(verified) == DOC  # the signed content, without the signature


def test_verify_accepts_reserialized_and_bytearray(ec: Pair) -> None:
    signed = ec.signer.sign_bytes(DOC)
    verify(etree.tostring(tree(signed), encoding="ISO-8859-1"), ec.trust, ec.now)
    verify(bytearray(signed), ec.trust, ec.now)


# --- verification: tampering -------------------------------------------------------------------


def test_rejects_flipped_byte(pair: Pair) -> None:
    signed = pair.signer.sign_bytes(DOC)
    tampered = signed.replace(b"<IDOper>0099</IDOper></Entete>", b"<IDOper>0098</IDOper></Entete>")
    assert tampered != signed
    rejected(tampered, pair, match="digest mismatch")


def test_rejects_flipped_attribute(ec: Pair) -> None:
    signed = ec.signer.sign_bytes(DOC)
    rejected(signed.replace(b'IDEvt="2"', b'IDEvt="3"'), ec, match="digest mismatch")


def test_rejects_removed_event(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    evenements = root.find("Evenements")
    evenements.remove(evenements[1])
    rejected(dump(root), ec, match="digest mismatch")


def test_rejects_altered_signature_value(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    value = root.find("ds:Signature/ds:SignatureValue", NS)
    value.text = ("B" if value.text[0] == "A" else "A") + value.text[1:]
    rejected(dump(root), ec, match="signature value does not verify")


def test_rejects_altered_signed_info(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    digest = root.find(".//ds:DigestValue", NS)
    root.find("Entete/IDOper").text = "0098"
    canonical = etree.tostring(_strip_signature(root), method="c14n", exclusive=True)
    digest.text = base64.b64encode(hashlib.sha256(canonical).digest()).decode()
    rejected(dump(root), ec, match="signature value does not verify")


def _strip_signature(root: etree._Element) -> etree._Element:
    copied = copy.deepcopy(root)
    copied.remove(copied[-1])
    return copied


def _b64(cert: x509.Certificate) -> str:
    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()


# --- verification: keys and time ---------------------------------------------------------------


def test_rejects_untrusted_key(ec: Pair, other: Pair) -> None:
    resigned = other.signer.sign(_strip_signature(tree(ec.signer.sign_bytes(DOC))))
    rejected(dump(resigned), ec, match="untrusted or expired key")


def test_rejects_untrusted_key_posing_as_trusted(ec: Pair, other: Pair) -> None:
    """Re-signed by another key, but naming the trusted key id and embedding the trusted certificate."""
    forged = other.signer.sign(tree(DOC))
    forged.find(".//ds:KeyName", NS).text = key_id(ec.cert)
    forged.find(".//ds:X509Certificate", NS).text = _b64(ec.cert)
    rejected(dump(forged), ec, match="signature value does not verify")


def test_rejects_outside_validity_window(ec: Pair) -> None:
    signed = ec.signer.sign_bytes(DOC)
    rejected(
        signed, ec, ec.cert.not_valid_before_utc - timedelta(seconds=1), match="untrusted or expired key"
    )
    rejected(signed, ec, ec.cert.not_valid_after_utc + timedelta(seconds=1), match="untrusted or expired key")
    verify(signed, ec.trust, ec.cert.not_valid_after_utc)


def test_rejects_other_certificate_in_key_info(ec: Pair, other: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:X509Certificate", NS).text = _b64(other.cert)
    rejected(dump(root), ec, match="not the trusted certificate")


def test_rejects_same_key_other_certificate_in_key_info(ec: Pair) -> None:
    """Even a certificate for the same key, if it is not the trusted one, is refused."""
    key = serialization.load_pem_private_key(ec.key_pem, None)
    reissued = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "impostor")]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "impostor")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(ec.cert.not_valid_before_utc)
        .not_valid_after(ec.cert.not_valid_after_utc)
        .sign(key, hashes.SHA256())
    )
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:X509Certificate", NS).text = _b64(reissued)
    rejected(dump(root), ec, match="not the trusted certificate")


def test_untrusted_and_expired_keys_are_told_apart(ec: Pair, other: Pair) -> None:
    resigned = dump(other.signer.sign(_strip_signature(tree(ec.signer.sign_bytes(DOC)))))
    rejected(resigned, ec, match=f"no trusted certificate has key id {key_id(other.cert)}")
    late = ec.cert.not_valid_after_utc + timedelta(days=1)
    rejected(
        ec.signer.sign_bytes(DOC),
        ec,
        late,
        match=f"no trusted certificate of key id {key_id(ec.cert)} is valid at",
    )


def _renewed(pair: Pair, not_before: datetime, days: int) -> x509.Certificate:
    """Another certificate of the same key (a renewal)."""
    key = serialization.load_pem_private_key(pair.key_pem, None)
    name = pair.cert.subject
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + timedelta(days=days))
        .sign(key, hashes.SHA256())
    )


def test_a_certificate_renewed_on_the_same_key() -> None:
    """Both certificates trusted and valid at the signing time: the document is checked with the
    one it embeds, not with the most recent one (which it does not embed)."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    first = Pair("ecdsa", not_before=start, days=365)
    renewal = _renewed(first, start + timedelta(days=300), 365)
    trust = TrustStore([first.cert, renewal])
    at = start + timedelta(days=330)
    verify(first.signer.sign_bytes(DOC), trust, at)  # embeds the first certificate
    key = serialization.load_pem_private_key(first.key_pem, None)
    verify(Signer(key, renewal).sign_bytes(DOC), trust, at)  # embeds the renewal
    with pytest.raises(SignatureInvalid, match="not the trusted certificate"):  # renewal not yet valid
        verify(Signer(key, renewal).sign_bytes(DOC), trust, start + timedelta(days=10))


def test_key_name_and_embedded_certificate_that_disagree(ec: Pair, other: Pair) -> None:
    """Both keys trusted: KeyName selects the certificates, the embedded one must be among them."""
    trust = TrustStore([ec.cert, other.cert])
    at = max(ec.now, other.now)
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:KeyName", NS).text = key_id(other.cert)
    with pytest.raises(SignatureInvalid, match="not the trusted certificate for its key id"):
        verify(dump(root), trust, at)
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:X509Certificate", NS).text = _b64(other.cert)
    with pytest.raises(SignatureInvalid, match="not the trusted certificate for its key id"):
        verify(dump(root), trust, at)


def test_key_rotation() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    old = Pair("ecdsa", not_before=start, days=365)
    new = Pair("ecdsa", not_before=start + timedelta(days=300), days=3650)
    trust = TrustStore([old.cert, new.cert])
    assert len(trust) == 2 and trust.key_ids() == {key_id(old.cert), key_id(new.cert)}

    by_old, by_new = old.signer.sign_bytes(DOC), new.signer.sign_bytes(DOC)
    verify(by_old, trust, start + timedelta(days=10))
    verify(by_old, trust, start + timedelta(days=330))  # overlap: both keys valid
    verify(by_new, trust, start + timedelta(days=330))
    with pytest.raises(SignatureInvalid, match="untrusted or expired key"):
        verify(by_old, trust, start + timedelta(days=400))
    with pytest.raises(SignatureInvalid, match="untrusted or expired key"):
        verify(by_new, trust, start + timedelta(days=10))

    at = start + timedelta(days=10)
    assert trust.pick(key_id(old.cert), at) == old.cert
    assert trust.pick(key_id(new.cert), at) is None
    assert trust.pick(key_id(new.cert), start + timedelta(days=330)) == new.cert
    assert trust.pick("0" * 64, at) is None


def test_trust_store_from_pem_files(tmp_path: Path, ec: Pair, other: Pair) -> None:
    (tmp_path / "a.pem").write_bytes(ec.cert_pem + other.cert_pem)
    trust = TrustStore.from_pem_files([tmp_path / "a.pem"])
    assert trust.key_ids() == {key_id(ec.cert), key_id(other.cert)}
    (tmp_path / "bad.pem").write_bytes(b"nope")
    with pytest.raises(ValueError, match=r"bad\.pem"):
        TrustStore.from_pem_files([tmp_path / "bad.pem"])


def test_naive_time_is_refused(ec: Pair) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        verify(ec.signer.sign_bytes(DOC), ec.trust, datetime(2030, 1, 1))


# --- verification: signature wrapping ----------------------------------------------------------

EVIL = b'<Evenement IDEvt="1"><POINSCRIT><IDOper>6666</IDOper></POINSCRIT></Evenement>'


def test_rejects_wrapped_original_under_forged_root(ec: Pair) -> None:
    """The signed original moved into a wrapper; forged content where a reader looks first."""
    original = tree(ec.signer.sign_bytes(DOC))
    signature = original[-1]
    original.remove(signature)
    forged = tree(b'<LotCoffre version="1"><Entete><IDOper>0099</IDOper></Entete><Evenements/></LotCoffre>')
    forged.find("Evenements").append(tree(EVIL))
    wrapper = etree.SubElement(forged, "Wrapper")
    wrapper.append(original)
    forged.append(signature)  # the signature stays the root's last child
    rejected(dump(forged), ec, match="digest mismatch")


def test_rejects_signed_original_nested_inside_forged_root(ec: Pair) -> None:
    original = tree(ec.signer.sign_bytes(DOC))
    forged = tree(b'<LotCoffre version="1"><Evenements/></LotCoffre>')
    forged.find("Evenements").append(tree(EVIL))
    forged.append(original)
    rejected(dump(forged), ec, match="not the last child")


def test_rejects_content_after_signature(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    root.append(tree(EVIL))
    rejected(dump(root), ec, match="not the last child")


def test_rejects_unsigned_content_inside_signature(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    obj = etree.SubElement(root[-1], f"{{{DS_NS}}}Object")
    obj.append(tree(EVIL))
    rejected(dump(root), ec, match="unexpected content in Signature")


def test_rejects_second_signature(ec: Pair, other: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    root.find("Evenements").append(tree(ec.signer.sign_bytes(EVIL))[-1])
    rejected(dump(root), ec, match="exactly one ds:Signature")
    root = tree(ec.signer.sign_bytes(DOC))
    root.insert(0, tree(other.signer.sign_bytes(DOC))[-1])
    rejected(dump(root), ec, match="exactly one ds:Signature")


def test_rejects_reference_to_an_id(ec: Pair) -> None:
    """The trusted key signed only the element with Id="x"; unsigned content slipped around it."""
    root = tree(DOC)
    root.find("Evenements")[0].set("Id", "x")
    signer = XMLSigner(signature_algorithm=ECDSA_SHA256, digest_algorithm=SHA256, c14n_algorithm=EXC_C14N)
    signed = signer.sign(root, key=ec.key_pem, cert=[ec.cert], key_name=key_id(ec.cert), reference_uri="x")
    assert signed.find(".//ds:Reference", NS).get("URI") == "#x"
    signed.find("Evenements").append(tree(EVIL))
    rejected(dump(signed), ec, match='URI=""')


def test_rejects_extra_reference_or_transform(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    signed_info = root.find(".//ds:SignedInfo", NS)
    signed_info.append(etree.fromstring(etree.tostring(signed_info.find("ds:Reference", NS))))
    rejected(dump(root), ec, match="unexpected content in SignedInfo")
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:Transforms", NS)[1].set("Algorithm", "http://www.w3.org/TR/1999/REC-xpath-19991116")
    rejected(dump(root), ec, match="unsupported second transform")


def test_rejects_sha1(ec: Pair) -> None:
    root = tree(ec.signer.sign_bytes(DOC))
    root.find(".//ds:DigestMethod", NS).set("Algorithm", "http://www.w3.org/2000/09/xmldsig#sha1")
    rejected(dump(root), ec, match="unsupported digest method")


# --- verification: hostile input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        b"",
        b"\x00\xff\xfe garbage",
        b"<LotCoffre>",
        b"not xml at all",
        b"<a/><b/>",
        DOC,
        b"<?pi x?><LotCoffre/>",
    ],
)
def test_rejects_garbage(ec: Pair, document: bytes) -> None:
    rejected(document, ec)


def test_rejects_non_bytes(ec: Pair) -> None:
    rejected(DOC.decode(), ec)  # type: ignore[arg-type]


def test_rejects_dtd_and_entities(ec: Pair, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    signed = ec.signer.sign_bytes(DOC)
    body = signed.split(b"?>", 1)[1]
    xxe = (
        f'<!DOCTYPE LotCoffre [<!ENTITY x SYSTEM "file://{secret}"><!ENTITY y "boom">]>'.encode()
        + body.replace(b"<IDOper>0099</IDOper></Entete>", b"<IDOper>&x;&y;</IDOper></Entete>")
    )
    message = rejected(xxe, ec, match="DTD")
    assert "TOP-SECRET" not in message
    rejected(b'<!DOCTYPE LotCoffre [<!ENTITY y "boom">]>' + body, ec, match="DTD")
    # Hidden from a byte search by UTF-16: still refused.
    utf16 = (
        '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE LotCoffre [<!ENTITY y "b">]>' + body.decode()
    ).encode("utf-16")
    message = rejected(utf16, ec)
    assert "DTD" in message or "entit" in message


def test_rejects_comment_smuggling_only_if_content_changes(ec: Pair) -> None:
    """Comments are not signed (exclusive C14N without comments) and never reach the caller."""
    signed = ec.signer.sign_bytes(DOC)
    commented = signed.replace(b"<Entete>", b"<Entete><!-- hello -->")
    verified = verify(commented, ec.trust, ec.now)
    assert b"hello" not in etree.tostring(verified)


# --- xmlsec1, the regulator's verifier ---------------------------------------------------------


def xmlsec1_verify(
    document: bytes, cert_pem: bytes, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "file.xml").write_bytes(document)
    return xmlsec1_tool(tmp_path / "file.xml", tmp_path / "cert.pem", *extra)


def test_xmlsec1_accepts_genuine(pair: Pair, tmp_path: Path) -> None:
    result = xmlsec1_verify(pair.signer.sign_bytes(DOC), pair.cert_pem, tmp_path)
    assert result.returncode == 0, result.stderr


def test_xmlsec1_rejects_tampered(pair: Pair, tmp_path: Path) -> None:
    tampered = pair.signer.sign_bytes(DOC).replace(
        b"<IDOper>0099</IDOper></Entete>", b"<IDOper>0098</IDOper></Entete>"
    )
    result = xmlsec1_verify(tampered, pair.cert_pem, tmp_path)
    assert result.returncode != 0


def test_xmlsec1_archived_lot_at_signing_time(tmp_path: Path) -> None:
    """After the certificate expires, xmlsec1 verifies at the signing time with --verification-gmt-time."""
    old = Pair("ecdsa", not_before=datetime(2020, 1, 1, tzinfo=UTC), days=30)
    signed = old.signer.sign_bytes(DOC)
    assert xmlsec1_verify(signed, old.cert_pem, tmp_path).returncode != 0
    result = xmlsec1_verify(signed, old.cert_pem, tmp_path, "--verification-gmt-time", "2020-01-10 00:00:00")
    assert result.returncode == 0, result.stderr
    verify(signed, old.trust, datetime(2020, 1, 10, tzinfo=UTC))


def test_xmlsec1_rejects_untrusted_certificate(ec: Pair, other: Pair, tmp_path: Path) -> None:
    result = xmlsec1_verify(other.signer.sign_bytes(DOC), ec.cert_pem, tmp_path)
    assert result.returncode != 0


# --- keys on disk -------------------------------------------------------------------------------


def test_write_key_pair(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "keys"
    old_umask = os.umask(0o077)
    try:
        key_path, cert_path = write_key_pair(directory, "coffre 0099", "ecdsa", 30)
    finally:
        os.umask(old_umask)
    assert key_path == directory / "signing-key.pem" and cert_path == directory / "signing-cert.pem"
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cert_path.stat().st_mode) == 0o644
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "coffre 0099"
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=30)
    signer = load_signer(key_path, cert_path)
    verify(signer.sign_bytes(DOC), TrustStore([cert]), datetime.now(UTC))


def test_write_key_pair_refuses_to_overwrite(tmp_path: Path) -> None:
    key_path, cert_path = write_key_pair(tmp_path, "coffre 0099", "ecdsa", 30)
    before = key_path.read_bytes(), cert_path.read_bytes()
    with pytest.raises(FileExistsError, match=r"signing-key\.pem"):
        write_key_pair(tmp_path, "coffre 0099", "ecdsa", 30)
    cert_path.unlink()
    with pytest.raises(FileExistsError):
        write_key_pair(tmp_path, "coffre 0099", "ecdsa", 30)
    assert key_path.read_bytes() == before[0]


def test_write_key_pair_development_suffix(tmp_path: Path) -> None:
    _, cert_path = write_key_pair(tmp_path, "coffre dev", "ecdsa", 30, development=True)
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert cn == "coffre dev" + DEVELOPMENT_SUFFIX
    assert cn.endswith(" (DEVELOPMENT KEY - NOT FOR PRODUCTION)")
    with pytest.raises(ValueError, match="too long"):
        write_key_pair(tmp_path / "x", "c" * 40, "ecdsa", 30, development=True)


def test_write_key_pair_unknown_algorithm(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown key algorithm"):
        write_key_pair(tmp_path, "coffre", "dsa", 30)
    assert not (tmp_path / "signing-key.pem").exists()


def test_load_signer_errors(tmp_path: Path, ec: Pair, other: Pair) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    with pytest.raises(KeyFileError, match=re.escape(f"signing key {key}: no such file")):
        load_signer(key, cert)
    key.write_bytes(ec.key_pem)
    with pytest.raises(KeyFileError, match=re.escape(f"signing certificate {cert}: no such file")):
        load_signer(key, cert)
    cert.write_bytes(other.cert_pem)
    with pytest.raises(KeyFileError, match=re.escape(f"signing key {key} does not match certificate {cert}")):
        load_signer(key, cert)
    cert.write_bytes(b"garbage")
    with pytest.raises(KeyFileError, match=re.escape(f"signing certificate {cert}: not a PEM certificate")):
        load_signer(key, cert)
    key.write_bytes(b"garbage")
    with pytest.raises(
        KeyFileError, match=re.escape(f"signing key {key}: not an unencrypted PEM private key")
    ):
        load_signer(key, cert)
    with pytest.raises(KeyFileError, match=re.escape(f"signing key {tmp_path}: is a directory")):
        load_signer(tmp_path, cert)
    cert.write_bytes(ec.cert_pem)
    key.write_bytes(ec.key_pem)
    assert load_signer(key, cert).key_id == key_id(ec.cert)


def test_sign_built_signs_the_tree_itself_as_sign_signs_a_copy(pair: Pair, tmp_path: Path) -> None:
    """sign_built (the sealer's: a tree built to be signed) appends the signature to its input and
    signs exactly what sign() signs: the same SignedInfo (digest, algorithms, key name); coffre's
    verifier and xmlsec1 accept it, and a change to the content is caught."""
    root = tree(DOC)
    signed = pair.signer.sign_built(root)
    assert signed is root and root[-1].tag == f"{{{DS_NS}}}Signature"
    by_copy = pair.signer.sign(tree(DOC))
    info = f"{{{DS_NS}}}SignedInfo"
    assert etree.tostring(signed.find(f".//{info}"), method="c14n", exclusive=True) == etree.tostring(
        by_copy.find(f".//{info}"), method="c14n", exclusive=True
    )
    document = dump(signed)
    assert etree.tostring(verify(document, pair.trust, pair.now)) == DOC
    result = xmlsec1_verify(document, pair.cert_pem, tmp_path)
    assert result.returncode == 0, result.stderr
    tampered = document.replace(b'IDEvt="2"', b'IDEvt="3"')
    with pytest.raises(SignatureInvalid):
        verify(tampered, pair.trust, pair.now)
    assert xmlsec1_verify(tampered, pair.cert_pem, tmp_path).returncode != 0
