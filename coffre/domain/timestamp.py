"""RFC 3161 time-stamp tokens, the client side: a request over some bytes, and the checks of a
TSA's answer (groundwork for issue 21; nothing in the archive uses it yet).

:func:`build_request` makes a ``TimeStampReq`` over given bytes (a checkpoint's file, once
integrated): a SHA-256 message imprint, a random nonce, ``certReq`` true, so that the TSA puts
its certificate in the token. :func:`verify_response` checks the ``TimeStampResp`` that comes
back and :func:`verify_token` a token kept without its response (there is no nonce to check
then). Both return a :class:`Timestamp` or raise :class:`TimestampInvalid`, whose message says
which check failed. They check:

- the status is ``granted`` (a response only; ``grantedWithMods`` is refused too);
- the token is CMS SignedData over a ``TSTInfo`` whose signature verifies with the TSA's
  certificate, and that certificate chains to one of the trusted certificates (``--tsa-cert``
  PEM, once integrated), every certificate of the chain valid at the token's ``genTime``;
- the TSA's certificate carries the extended key usage ``timeStamping`` and that extension is
  critical (RFC 3161 §2.3);
- the message imprint is SHA-256 and equals the SHA-256 of the bytes;
- the nonce is the request's (a response only).

The CMS and X.509 work is done by ``rfc3161-client`` (the time-stamp library of Sigstore, on
``cryptography``); this module fixes coffre's choices (SHA-256 only, a nonce and ``certReq``
always) and turns the library's answers into one error type with clear messages.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from rfc3161_client import (
    HashAlgorithm,
    PKIStatus,
    TimestampRequestBuilder,
    TimeStampResponse,
    VerificationError,
    VerifierBuilder,
    decode_timestamp_response,
)

SHA256_OID = x509.ObjectIdentifier("2.16.840.1.101.3.4.2.1")
MAX_RESPONSE_BYTES = 64 * 1024
"""The largest TimeStampResp or token read (a token with its TSA's chain is a few KiB)."""


class TimestampInvalid(Exception):
    """A time-stamp response or token that is not a valid RFC 3161 token over the given bytes
    from a trusted TSA."""


class ImprintMismatch(TimestampInvalid):
    """A valid token over other bytes: its message imprint is not the SHA-256 of the bytes given
    (a token moved from one document to another, or the document changed)."""


@dataclass(frozen=True, slots=True)
class TimestampRequest:
    """A ``TimeStampReq`` (DER, to POST as ``application/timestamp-query``) and what its
    response must echo."""

    der: bytes
    nonce: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class Timestamp:
    """A verified token: its DER ``TimeStampToken`` (the ContentInfo, what the archive keeps;
    the TSA's bytes but for its certificates put in DER order, which the signature does not
    cover), its ``genTime`` (timezone-aware, UTC), its serial number and the TSA's certificate."""

    token: bytes
    gen_time: datetime
    serial_number: int
    tsa_certificate: x509.Certificate


def build_request(data: bytes) -> TimestampRequest:
    """A ``TimeStampReq`` over ``data``: SHA-256 imprint, a random nonce, ``certReq`` true."""
    if not isinstance(data, bytes | bytearray) or not data:
        raise ValueError("a time-stamp request covers non-empty bytes")
    request = (
        TimestampRequestBuilder()
        .data(bytes(data))
        .hash_algorithm(HashAlgorithm.SHA256)
        .nonce(nonce=True)
        .cert_request(cert_request=True)
        .build()
    )
    digest = hashlib.sha256(data).digest()
    assert request.message_imprint.message == digest and request.cert_req
    assert request.nonce is not None
    return TimestampRequest(request.as_bytes(), request.nonce, digest)


def load_trust(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle (the TSA's root, or its own certificate)."""
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise ValueError(f"no readable PEM certificate ({exc})") from None


def load_trust_files(paths: Iterable[str | PathLike[str]]) -> list[x509.Certificate]:
    """Every certificate in the given PEM files."""
    certificates: list[x509.Certificate] = []
    for path in paths:
        try:
            certificates.extend(load_trust(Path(path).read_bytes()))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return certificates


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    octets = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def _granted_response(token: bytes) -> bytes:
    """``TimeStampResp { status { granted }, token }``: the library reads tokens inside a response."""
    status = b"\x30\x03\x02\x01\x00"
    body = status + token
    return b"\x30" + _der_length(len(body)) + body


def _tlv(der: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``at``; ValueError for
    a multi-byte tag, an indefinite or overlong length."""
    if at + 2 > len(der):
        raise ValueError("truncated")
    tag, first = der[at], der[at + 1]
    if tag & 0x1F == 0x1F:
        raise ValueError("multi-byte tag")
    if first < 0x80:
        start, length = at + 2, first
    else:
        count = first & 0x7F
        if count == 0 or count > 4:
            raise ValueError("indefinite or overlong length")
        start = at + 2 + count
        length = int.from_bytes(der[at + 2 : start], "big")
    end = start + length
    if end > len(der):
        raise ValueError("truncated")
    return tag, start, end


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, value start, value end) of each element in ``der[start:end]``."""
    found = []
    at = start
    while at < end:
        tag, value_start, value_end = _tlv(der, at)
        found.append((tag, at, value_start, value_end))
        at = value_end
    if at != end:
        raise ValueError("elements overrun their container")
    return found


def _certificates_in_der_order(token: bytes) -> bytes:
    """``token`` with the certificates of its SignedData in DER order (X.690 §11.6).

    OpenSSL, hence many TSAs, writes ``SignedData.certificates`` (a SET OF) in the order it
    was given (the TSA's certificate, then its chain), and ``rfc3161-client`` refuses a SET OF
    out of DER order. The certificates are outside the signature and reordering keeps every
    length, so they are sorted in place; anything unexpected leaves the token as it is (the
    parser then says what is wrong)."""
    try:
        _, info_start, info_end = _tlv(token, 0)
        content = _children(token, info_start, info_end)  # contentType, [0] content
        if len(content) != 2 or content[1][0] != 0xA0:
            return token
        (signed,) = _children(token, content[1][2], content[1][3])
        fields = _children(token, signed[2], signed[3])
        certificates = next((f for f in fields if f[0] == 0xA0), None)
        if certificates is None:
            return token
        _, _, start, end = certificates
        encodings = [token[element:value_end] for _, element, _, value_end in _children(token, start, end)]
    except ValueError:
        return token
    longest = max((len(e) for e in encodings), default=0)
    ordered = b"".join(sorted(encodings, key=lambda e: e.ljust(longest, b"\0")))
    return token[:start] + ordered + token[end:]


def _response_in_der_order(response: bytes) -> bytes:
    """``response`` with its token's certificates in DER order (see above)."""
    try:
        _, start, end = _tlv(response, 0)
        parts = _children(response, start, end)  # status, timeStampToken
    except ValueError:
        return response
    if len(parts) != 2:
        return response
    _, token_start, _, token_end = parts[1]
    token = response[token_start:token_end]
    return response[:token_start] + _certificates_in_der_order(token) + response[token_end:]


def _decode(response: bytes, what: str) -> TimeStampResponse:
    if not isinstance(response, bytes | bytearray):
        raise TimestampInvalid(f"the {what} must be bytes")
    if len(response) > MAX_RESPONSE_BYTES:
        raise TimestampInvalid(f"the {what} has {len(response)} bytes, more than {MAX_RESPONSE_BYTES}")
    try:
        return decode_timestamp_response(_response_in_der_order(bytes(response)))
    except Exception as exc:  # the Rust parser raises ValueError and others for bad DER
        raise TimestampInvalid(f"the {what} is not a DER RFC 3161 {what}: {exc}") from None


def _check(
    response: TimeStampResponse,
    data: bytes,
    nonce: int | None,
    trusted: Sequence[x509.Certificate],
) -> Timestamp:
    if not trusted:
        raise ValueError("no trusted TSA certificate given")
    info = response.tst_info
    imprint = info.message_imprint
    if imprint.hash_algorithm != SHA256_OID:
        raise TimestampInvalid(
            f"the token's message imprint is not SHA-256 (hash algorithm {imprint.hash_algorithm.dotted_string})"
        )
    if not hmac.compare_digest(imprint.message, hashlib.sha256(data).digest()):
        raise ImprintMismatch("the token's message imprint is not the SHA-256 of these bytes")
    if nonce is not None and info.nonce != nonce:
        raise TimestampInvalid(f"the token's nonce {info.nonce} is not the request's {nonce}")
    tsa = _tsa_certificate(response)
    builder = VerifierBuilder()
    for certificate in trusted:
        builder = builder.add_root_certificate(certificate)
    if nonce is not None:
        builder = builder.nonce(nonce)
    try:
        builder.build().verify_message(response, bytes(data))
    except VerificationError as exc:
        raise TimestampInvalid(_explain(str(exc))) from None
    except Exception as exc:  # a malformed certificate or signature inside the token
        raise TimestampInvalid(f"the token does not verify: {exc}") from None
    gen_time = info.gen_time
    gen_time = gen_time.replace(tzinfo=UTC) if gen_time.tzinfo is None else gen_time.astimezone(UTC)
    return Timestamp(response.time_stamp_token(), gen_time, info.serial_number, tsa)


def _tsa_certificate(response: TimeStampResponse) -> x509.Certificate:
    """The certificate the token's one SignerInfo names, which must be for time-stamping.

    Checked here before the library does (it checks it too, after the signature) so that the
    error says so: OpenSSL's own purpose check would otherwise report it as a chain failure."""
    signed = response.signed_data
    signers = list(signed.signer_infos)
    if len(signers) != 1:
        raise TimestampInvalid(f"the token has {len(signers)} signers, not one")
    (signer,) = signers
    try:
        certificates = [x509.load_der_x509_certificate(der) for der in signed.certificates]
    except ValueError as exc:
        raise TimestampInvalid(f"the token holds an unreadable certificate: {exc}") from None
    tsa = next(
        (c for c in certificates if c.issuer == signer.issuer and c.serial_number == signer.serial_number),
        None,
    )
    if tsa is None:
        raise TimestampInvalid(
            "the token does not hold its TSA's certificate (the request asked for it: certReq)"
        )
    subject = tsa.subject.rfc4514_string()
    try:
        usage = tsa.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        raise TimestampInvalid(
            f"the TSA's certificate ({subject}) has no extended key usage: timeStamping, critical, is required"
        ) from None
    except ValueError as exc:
        raise TimestampInvalid(
            f"the TSA's certificate ({subject}) has unreadable extensions: {exc}"
        ) from None
    if ExtendedKeyUsageOID.TIME_STAMPING not in usage.value:
        raise TimestampInvalid(
            f"the TSA's certificate ({subject}) is not for time-stamping: its extended key usage lacks timeStamping"
        )
    if not usage.critical:
        raise TimestampInvalid(
            f"the TSA's certificate ({subject}) has a non-critical extended key usage: RFC 3161 requires it critical"
        )
    return tsa


def _explain(message: str) -> str:
    """The library's message, said for coffre's operators."""
    if message.startswith("Error while verifying certificates"):
        if "unable to get local issuer certificate" in message or "self-signed certificate" in message:
            reason = "the TSA's certificate does not chain to a trusted certificate"
        elif "expired" in message or "not yet valid" in message:
            reason = "a certificate of the TSA's chain is not valid at the token's genTime"
        elif "digest failure" in message or "signature failure" in message or "signature" in message:
            reason = "the token's signature does not verify (the token was altered)"
        else:
            reason = "the token's signature or the TSA's certificate chain does not verify"
        return f"{reason} ({message})"
    if "EKU" in message:
        return f"the TSA's certificate is not for time-stamping: critical extended key usage timeStamping required ({message})"
    return f"the token does not verify: {message}"


def verify_response(
    response: bytes, data: bytes, nonce: int, trusted: Sequence[x509.Certificate]
) -> Timestamp:
    """The token of a TSA's ``TimeStampResp`` to the request with ``nonce`` over ``data``,
    checked (see the module's doc), or :class:`TimestampInvalid`."""
    decoded = _decode(response, "response")
    status = decoded.status
    if status != PKIStatus.GRANTED:
        try:
            name = PKIStatus(status).name.lower()
        except ValueError:
            name = str(status)
        text = "; ".join(decoded.status_string)
        raise TimestampInvalid(
            f"the TSA did not grant the time-stamp: status {name}{f' ({text})' if text else ''}"
        )
    return _check(decoded, data, nonce, trusted)


def verify_token(token: bytes, data: bytes, trusted: Sequence[x509.Certificate]) -> Timestamp:
    """A ``TimeStampToken`` (DER ContentInfo) over ``data``, checked (see the module's doc; no
    nonce: a kept token has no request beside it), or :class:`TimestampInvalid`."""
    if not isinstance(token, bytes | bytearray):
        raise TimestampInvalid("the token must be bytes")
    return _check(_decode(_granted_response(bytes(token)), "token"), data, None, trusted)


__all__ = [
    "MAX_RESPONSE_BYTES",
    "Timestamp",
    "TimestampInvalid",
    "TimestampRequest",
    "build_request",
    "load_trust",
    "load_trust_files",
    "verify_response",
    "verify_token",
]
