"""Enveloped W3C XML-DSig for coffre's documents, and a verifier that resists signature wrapping.

A signed document carries exactly one ``ds:Signature``, the last child of its root element:
one Reference with ``URI=""`` (the whole document), the transforms enveloped-signature then
exclusive C14N 1.0, a SHA-256 digest, RSA-SHA256 or ECDSA-SHA256 (P-256) over the SignedInfo
canonicalized with exclusive C14N 1.0, and a KeyInfo holding ``KeyName`` (the key id: SHA-256 of
the certificate's SubjectPublicKeyInfo, see :func:`key_id`) and the signing certificate in
``X509Data/X509Certificate``. The regulator checks it with ``xmlsec1 --verify``.

:func:`verify` never trusts the document's own certificate: it looks the ``KeyName`` up in a
:class:`TrustStore`, keeps the certificates of that key id valid at the document's own time, and
demands that the embedded certificate be one of them, byte for byte; it insists on
the exact shape above (so no second Signature, no ``#id`` Reference, no wrapper element can
smuggle unsigned content), and returns only what the signature covers.

Signing goes through signxml. Verifying does not: with the profile fixed and checked, the
signed data can only be the exclusive C14N of the document minus its signature, so the digest
and the signature are checked here directly with ``cryptography``. signxml's general verifier
parsed each lot about six times and made ``coffre verify`` run at 12,800 events/s; this runs
at about 29,000 (bench/vault.py). xmlsec1 checks the same documents in the tests.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from os import PathLike
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.x509.oid import NameOID
from lxml import etree
from signxml import (
    XMLSigner,
)

from .codec import hardened_parser

DS_NS = "http://www.w3.org/2000/09/xmldsig#"
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
ENVELOPED_SIGNATURE = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
ECDSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"
SIGNATURE_METHODS = frozenset({RSA_SHA256, ECDSA_SHA256})

MIN_RSA_BITS = 2048
RSA_BITS = 3072
DEFAULT_DAYS = 365 * 7
ALGORITHMS = ("ecdsa", "rsa")

_KEY_ID = re.compile(r"[0-9a-f]{64}")
_WHITESPACE = re.compile(rb"\s+")


def _ds(local: str) -> str:
    return f"{{{DS_NS}}}{local}"


class SignatureInvalid(Exception):
    """The document is not a well-formed, correctly signed coffre document from a trusted key."""


# ---------------------------------------------------------------------------------------------
# Parsing


def _parser() -> etree.XMLParser:
    """Hardened (see :func:`coffre.domain.codec.hardened_parser`); processing instructions stay,
    because the canonical form, hence the digest, covers them."""
    return hardened_parser(keep_pis=True)


def _parse(document: bytes) -> etree._Element:
    """The root element of ``document``; ValueError for malformed XML, a DTD or entities."""
    if not isinstance(document, bytes | bytearray):
        raise ValueError("the document must be bytes")
    if b"<!DOCTYPE" in document or b"<!ENTITY" in document:
        raise ValueError("DTDs and entity declarations are not accepted")
    try:
        root = etree.fromstring(bytes(document), _parser())
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not well-formed XML: {exc}") from exc
    return _check_parsed(root)


def _check_parsed(root: etree._Element) -> etree._Element:
    """``root`` as :func:`_parse` returns it: ValueError for a DTD or an entity reference."""
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise ValueError("DTDs and entity declarations are not accepted")
    if any(True for _ in root.iter(etree.Entity)):
        raise ValueError("entity references are not accepted")
    return root


# ---------------------------------------------------------------------------------------------
# Keys and certificates


def key_id(certificate: x509.Certificate) -> str:
    """Lowercase hex SHA-256 of the certificate's SubjectPublicKeyInfo (DER): the ``KeyName``."""
    spki = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()


def _public_key_der(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def generate_key_and_certificate(
    common_name: str,
    algorithm: str = "ecdsa",
    days: int = DEFAULT_DAYS,
    not_before: datetime | None = None,
) -> tuple[bytes, bytes]:
    """A new signing key and its self-signed certificate: (PKCS#8 PEM, unencrypted; X.509 PEM).

    ``algorithm`` is ``"ecdsa"`` (P-256) or ``"rsa"`` (3072 bits). The certificate names
    ``CN=common_name, O=coffre``, is valid ``days`` days from ``not_before`` (default: now),
    and is an end-entity signing certificate (CA:FALSE, keyUsage digitalSignature, both critical).
    """
    if algorithm == "ecdsa":
        key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = ec.generate_private_key(ec.SECP256R1())
    elif algorithm == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    else:
        raise ValueError(f"unknown key algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
    if days < 1:
        raise ValueError(f"a certificate is valid at least one day, not {days}")
    if not common_name or len(common_name) > 64:
        raise ValueError(f"a common name has 1 to 64 characters, not {len(common_name)}: {common_name!r}")
    start = (not_before or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "coffre"),
        ]
    )
    public_key = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM)


# ---------------------------------------------------------------------------------------------
# Signing


class _InPlaceSigner(XMLSigner):
    """signxml's signer whose first copy of the document is the document itself (:meth:`Signer.sign_built`);
    the copy canonicalized for the digest stays signxml's own."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._root_given = False

    def get_root(self, data: object) -> etree._Element:
        if not self._root_given and isinstance(data, etree._Element):
            self._root_given = True
            return data
        return super().get_root(data)  # type: ignore[no-any-return]


class Signer:
    """Signs coffre documents with one private key and its certificate. Build it once per process.

    The key is parsed here, once; :meth:`sign` is safe to call from several threads.
    """

    def __init__(
        self,
        private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
        certificate: x509.Certificate,
    ) -> None:
        if isinstance(private_key, rsa.RSAPrivateKey):
            if private_key.key_size < MIN_RSA_BITS:
                raise ValueError(
                    f"an RSA signing key has at least {MIN_RSA_BITS} bits, not {private_key.key_size}"
                )
            self.algorithm = RSA_SHA256
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            if not isinstance(private_key.curve, ec.SECP256R1):
                raise ValueError(f"an ECDSA signing key is on P-256, not {private_key.curve.name}")
            self.algorithm = ECDSA_SHA256
        else:
            raise ValueError(
                f"unsupported signing key type {type(private_key).__name__}: use RSA or EC P-256"
            )
        if _public_key_der(private_key.public_key()) != _public_key_der(certificate.public_key()):
            raise ValueError("the private key does not match the certificate")
        self._key = private_key
        self.certificate = certificate
        self.key_id = key_id(certificate)
        self._cert_pem = certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")

    @classmethod
    def from_pem(cls, key_pem: bytes, cert_pem: bytes) -> Signer:
        """A signer from an unencrypted PEM private key and its PEM certificate."""
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a readable unencrypted PEM private key: {exc}") from exc
        try:
            certificate = x509.load_pem_x509_certificate(cert_pem)
        except ValueError as exc:
            raise ValueError(f"not a readable PEM certificate: {exc}") from exc
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError(f"unsupported signing key type {type(key).__name__}: use RSA or EC P-256")
        return cls(key, certificate)

    @classmethod
    def from_files(cls, key_path: str | PathLike[str], cert_path: str | PathLike[str]) -> Signer:
        """A signer from a PEM private key file and a PEM certificate file."""
        return cls.from_pem(Path(key_path).read_bytes(), Path(cert_path).read_bytes())

    def sign(self, root: etree._Element, *, _signer: type[XMLSigner] = XMLSigner) -> etree._Element:
        """A signed copy of the document ``root``: one enveloped ``ds:Signature`` as its last child.

        ``root`` must have no namespace, no ``Id``/``ID`` attribute and no signature yet.
        """
        if not isinstance(root, etree._Element) or not isinstance(root.tag, str):
            raise ValueError("sign() takes an XML element")
        if etree.QName(root).namespace is not None:
            raise ValueError("the root element of a signed document has no namespace")
        if "Id" in root.attrib or "ID" in root.attrib:
            raise ValueError("the root element of a signed document has no Id attribute")
        if any(True for _ in root.iter(_ds("Signature"))):
            raise ValueError("the document is already signed")
        signer = _signer(
            signature_algorithm=self.algorithm,
            digest_algorithm=SHA256,
            c14n_algorithm=EXC_C14N,
        )
        signer._parser = _parser()  # signxml signs a copy of ``root`` made through this parser
        try:
            signed = signer.sign(root, key=self._key, cert=[self.certificate], key_name=self.key_id)
        except etree.XMLSyntaxError as exc:  # e.g. an entity reference left by a DTD
            raise ValueError(f"cannot sign this document: {exc}") from exc
        assert signed[-1].tag == _ds("Signature")
        return signed

    def sign_built(self, root: etree._Element) -> etree._Element:
        """:meth:`sign` for a tree coffre built to be signed and never reads again (a lot, a
        checkpoint): the signature is appended to ``root`` itself, which is returned. signxml copies
        an enveloped document twice (serialized, then parsed), one copy to take the signature, the
        other to be canonicalized for the digest; here the first copy is ``root``, the second
        signxml's own. Same signature, same checks; a third less of signing's time on a lot."""
        return self.sign(root, _signer=_InPlaceSigner)

    def sign_bytes(self, document: bytes) -> bytes:
        """Parse ``document`` (hardened: no DTD, no entities), sign it and serialize it in UTF-8."""
        root = _parse(document)
        return etree.tostring(self.sign(root), xml_declaration=True, encoding="UTF-8")


# ---------------------------------------------------------------------------------------------
# Trust


class TrustStore:
    """The certificates whose keys may sign, indexed by key id (several during a key rotation)."""

    def __init__(self, certs: Iterable[x509.Certificate]) -> None:
        self._by_key_id: dict[str, list[x509.Certificate]] = {}
        for certificate in certs:
            if not isinstance(certificate, x509.Certificate):
                raise TypeError(f"a trust store holds X.509 certificates, not {type(certificate).__name__}")
            self._by_key_id.setdefault(key_id(certificate), []).append(certificate)

    @classmethod
    def from_pem_files(cls, paths: Iterable[str | PathLike[str]]) -> TrustStore:
        """Every certificate in the given PEM files (a file may hold several)."""
        certs: list[x509.Certificate] = []
        for path in paths:
            try:
                certs.extend(x509.load_pem_x509_certificates(Path(path).read_bytes()))
            except ValueError as exc:
                raise ValueError(f"{path}: no readable PEM certificate ({exc})") from exc
        return cls(certs)

    def __iter__(self) -> Iterator[x509.Certificate]:
        for certs in self._by_key_id.values():
            yield from certs

    def __len__(self) -> int:
        return sum(len(certs) for certs in self._by_key_id.values())

    def key_ids(self) -> frozenset[str]:
        """The key ids of the trusted certificates."""
        return frozenset(self._by_key_id)

    def certificates(self, key_id: str) -> list[x509.Certificate]:
        """Every trusted certificate of ``key_id`` (several when one key's certificate was renewed)."""
        return list(self._by_key_id.get(key_id, ()))

    def valid(self, key_id: str, at: datetime) -> list[x509.Certificate]:
        """The trusted certificates of ``key_id`` valid at ``at`` (timezone-aware):
        ``notBefore <= at <= notAfter``, both ends included."""
        if at.tzinfo is None:
            raise ValueError("the verification time must be timezone-aware")
        return [c for c in self.certificates(key_id) if c.not_valid_before_utc <= at <= c.not_valid_after_utc]

    def pick(self, key_id: str, at: datetime) -> x509.Certificate | None:
        """The trusted certificate for ``key_id`` valid at ``at`` (timezone-aware), or None.

        When several are (a certificate renewed on the same key), the most recently issued wins.
        :func:`verify` does not use this: it takes the valid one the document embeds.
        """
        return max(self.valid(key_id, at), key=lambda c: c.not_valid_before_utc, default=None)


# ---------------------------------------------------------------------------------------------
# Verification


def _children(element: etree._Element, *expected: str, what: str) -> list[etree._Element]:
    """The children of ``element``, which must be exactly the ds: elements ``expected``, in order."""
    children = list(element)
    if [child.tag for child in children] != [_ds(local) for local in expected]:
        raise SignatureInvalid(f"unexpected content in {what}: expected {', '.join(expected)}")
    return children


def _algorithm(element: etree._Element, allowed: Iterable[str], what: str) -> str:
    algorithm = element.get("Algorithm")
    if algorithm not in allowed or len(element):
        raise SignatureInvalid(f"unsupported {what}: {algorithm}")
    return algorithm


def _b64(text: str | None) -> bytes:
    try:
        return base64.b64decode(_WHITESPACE.sub(b"", (text or "").encode("ascii")), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValueError("not base64") from None


def _without_signature(root: etree._Element) -> etree._Element:
    """A copy of ``root`` without its last child (the signature), keeping the text around it."""
    document = copy.deepcopy(root)
    signature = document[-1]
    tail = signature.tail or ""
    previous = signature.getprevious()
    if previous is not None:
        previous.tail = (previous.tail or "") + tail
    else:
        document.text = (document.text or "") + tail
    document.remove(signature)
    return document


def _take_signature(root: etree._Element) -> Callable[[], None]:
    """Take the last child of ``root`` (the signature) out of it in place, keeping the text around
    it, as :func:`_without_signature` does on a copy; the function returned puts it back."""
    signature = root[-1]
    tail = signature.tail or ""
    previous = signature.getprevious()
    before = previous.tail if previous is not None else root.text
    if previous is not None:
        previous.tail = (previous.tail or "") + tail
    else:
        root.text = (root.text or "") + tail
    root.remove(signature)  # lxml keeps the removed element's tail with it

    def put_back() -> None:
        if previous is not None:
            previous.tail = before
        else:
            root.text = before
        root.append(signature)

    return put_back


def verify(
    document: bytes, trust: TrustStore, at: datetime, *, parsed: etree._Element | None = None
) -> etree._Element:
    """The root element of ``document`` as covered by its signature, or :class:`SignatureInvalid`.

    ``at`` (timezone-aware) is when the document was signed: the signing certificate must be
    in ``trust`` and valid then. The returned element is rebuilt from the signed bytes (without
    the signature), never from an unsigned part of the input.

    ``parsed`` is ``document`` already parsed by the caller with the same hardened parser
    (:func:`coffre.domain.lot.parse_document`: ``coffre verify`` reads each lot's time before
    its signature): it is not parsed again, and is not changed.
    """
    return verify_canonical(document, trust, at, parsed=parsed)[0]


def verify_canonical(
    document: bytes,
    trust: TrustStore,
    at: datetime,
    *,
    parsed: etree._Element | None = None,
    take: bool = False,
    splice: Callable[[bytes], bytes] | None = None,
) -> tuple[etree._Element, bytes]:
    """:func:`verify`, and the signed bytes: the exclusive C14N of the returned element, which
    the signature's DigestValue covers (``coffre verify`` takes each event's canonical bytes from
    them instead of canonicalizing each event again).

    ``take`` (with ``parsed``): the caller gives its parsed tree up, so the signature is taken
    out of it in place instead of a copy being made; the returned element is then ``parsed``
    itself. When the signature does not hold, ``parsed`` is given back as it was.

    ``splice``: the document was parsed without a part the caller proved to be in canonical form
    already (:mod:`coffre.domain.lot_bytes`: a lot's events); it puts that part back into the
    exclusive C14N of the rest, and the digest is checked over what it returns (every other check
    is made on ``document`` as given). What it raises goes through.
    """
    if at.tzinfo is None:
        raise ValueError("the verification time must be timezone-aware")
    try:
        root = _parse(document) if parsed is None else _check_parsed(parsed)
    except ValueError as exc:
        raise SignatureInvalid(str(exc)) from None

    # The shape: one signature, the root's last child, exactly as coffre writes it.
    if root.getprevious() is not None or root.getnext() is not None:
        raise SignatureInvalid("content outside the root element")
    signatures = list(root.iter(_ds("Signature")))
    if len(signatures) != 1:
        raise SignatureInvalid(f"expected exactly one ds:Signature, found {len(signatures)}")
    signature = signatures[0]
    if signature.getparent() is not root or signature.getnext() is not None:
        raise SignatureInvalid("the ds:Signature is not the last child of the root element")
    signed_info, signature_value, key_info = _children(
        signature, "SignedInfo", "SignatureValue", "KeyInfo", what="Signature"
    )
    c14n_method, signature_method, reference = _children(
        signed_info, "CanonicalizationMethod", "SignatureMethod", "Reference", what="SignedInfo"
    )
    _algorithm(c14n_method, {EXC_C14N}, "canonicalization method")
    method = _algorithm(signature_method, SIGNATURE_METHODS, "signature method")
    if reference.get("URI") != "":
        raise SignatureInvalid('the signature must reference the whole document (URI="")')
    transforms, digest_method, _digest_value = _children(
        reference, "Transforms", "DigestMethod", "DigestValue", what="Reference"
    )
    enveloped, c14n = _children(transforms, "Transform", "Transform", what="Transforms")
    _algorithm(enveloped, {ENVELOPED_SIGNATURE}, "first transform")
    _algorithm(c14n, {EXC_C14N}, "second transform")
    _algorithm(digest_method, {SHA256}, "digest method")
    if len(signature_value):
        raise SignatureInvalid("unexpected content in SignatureValue")
    key_name, x509_data = _children(key_info, "KeyName", "X509Data", what="KeyInfo")
    (embedded,) = _children(x509_data, "X509Certificate", what="X509Data")
    if len(key_name) or len(embedded):
        raise SignatureInvalid("unexpected content in KeyInfo")

    # The key: chosen by key id among the trusted certificates, never taken from the document.
    # The embedded certificate must be one of them, byte for byte: KeyName only selects, and a
    # KeyName that disagrees with the embedded certificate is refused.
    kid = (key_name.text or "").strip()
    if not _KEY_ID.fullmatch(kid):
        raise SignatureInvalid("KeyName is not a key id")
    if not trust.certificates(kid):
        raise SignatureInvalid(f"untrusted or expired key: no trusted certificate has key id {kid}")
    valid = trust.valid(kid, at)
    if not valid:
        raise SignatureInvalid(
            f"untrusted or expired key: no trusted certificate of key id {kid} is valid at {at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
        )
    try:
        embedded_der = base64.b64decode(
            _WHITESPACE.sub(b"", (embedded.text or "").encode("ascii")), validate=True
        )
    except (binascii.Error, UnicodeEncodeError):
        raise SignatureInvalid("X509Certificate is not base64") from None
    certificate = next((c for c in valid if c.public_bytes(serialization.Encoding.DER) == embedded_der), None)
    if certificate is None:
        raise SignatureInvalid(
            "the certificate in KeyInfo is not the trusted certificate for its key id (KeyName) valid then"
        )
    if (method == RSA_SHA256) != isinstance(certificate.public_key(), rsa.RSAPublicKey):
        raise SignatureInvalid("the signature method does not match the key type")

    # The cryptography, with the trusted certificate only. The reference's transforms are fixed
    # (checked above): the signed data is the exclusive C14N of the document minus its signature.
    # SignedInfo is canonicalized where it stands, before the signature is taken out of the tree.
    signed_info_bytes = etree.tostring(signed_info, method="c14n", exclusive=True, with_comments=False)
    if take and parsed is not None:
        signed, put_back = root, _take_signature(root)
    else:
        signed, put_back = _without_signature(root), None
    try:
        expected = etree.tostring(signed, method="c14n", exclusive=True, with_comments=False)
        if splice is not None:
            expected = splice(expected)
        _check_digest_and_value(
            expected, signed_info_bytes, signature_value, _digest_value, method, certificate
        )
    except BaseException:
        if put_back is not None:
            put_back()
        raise
    return signed, expected


def _check_digest_and_value(
    expected: bytes,
    signed_info_bytes: bytes,
    signature_value: etree._Element,
    _digest_value: etree._Element,
    method: str,
    certificate: x509.Certificate,
) -> None:
    """The reference's digest over ``expected`` (the signed bytes), then the signature value over
    the canonical SignedInfo, with the trusted certificate's key."""
    try:
        claimed_digest = _b64(_digest_value.text)
        value = _b64(signature_value.text)
    except ValueError:
        raise SignatureInvalid("DigestValue or SignatureValue is not base64") from None
    if len(_digest_value) or not hmac.compare_digest(hashlib.sha256(expected).digest(), claimed_digest):
        raise SignatureInvalid("the content does not match its signature (digest mismatch)")
    public_key = certificate.public_key()
    try:
        if isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(value, signed_info_bytes, padding.PKCS1v15(), hashes.SHA256())
        elif isinstance(public_key, ec.EllipticCurvePublicKey) and len(value) == 64:
            r, s_ = int.from_bytes(value[:32], "big"), int.from_bytes(value[32:], "big")
            public_key.verify(encode_dss_signature(r, s_), signed_info_bytes, ec.ECDSA(hashes.SHA256()))
        else:
            raise SignatureInvalid("the signature value does not verify")
    except InvalidSignature:
        raise SignatureInvalid("the signature value does not verify") from None
