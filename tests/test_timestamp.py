"""RFC 3161 time-stamp tokens (coffre/domain/timestamp.py) against a real TSA: Debian's
``openssl ts -reply`` over loopback HTTP (tests/tsa.py)."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from coffre.domain.timestamp import (
    Timestamp,
    TimestampInvalid,
    build_request,
    load_trust_files,
    verify_response,
    verify_token,
)

from tsa import Identity, Pki, Tsa, fetch, openssl_or_skip

CHECKPOINT = b"<?xml version='1.0' encoding='UTF-8'?>\n<PointDeControle version=\"1\">\n<IDOper>0099</IDOper>\n</PointDeControle>\n"
OTHER = CHECKPOINT.replace(b"0099", b"0098")


@dataclass
class World:
    folder: Path
    ca: Pki
    good: Identity
    tsa: Tsa


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    openssl_or_skip()
    folder = tmp_path_factory.mktemp("tsa")
    ca = Pki(folder)
    good = ca.issue("coffre test TSA")
    with Tsa(folder, good, ca).serving() as tsa:
        yield World(folder, ca, good, tsa)


def stamp(url: str, data: bytes = CHECKPOINT) -> tuple[bytes, int]:
    request = build_request(data)
    return fetch(url, request.der), request.nonce


def test_a_token_fetched_over_http_verifies_and_gives_its_time(world: World) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    request = build_request(CHECKPOINT)
    response = fetch(world.tsa.url, request.der)
    after = datetime.now(UTC)
    trusted = load_trust_files([world.ca.cert_path])
    stamped = verify_response(response, CHECKPOINT, request.nonce, trusted)
    assert isinstance(stamped, Timestamp)
    assert stamped.gen_time.tzinfo is not None
    assert before - timedelta(seconds=2) <= stamped.gen_time <= after + timedelta(seconds=2)
    assert stamped.tsa_certificate == world.good.certificate
    assert stamped.serial_number >= 1
    # The token alone (what the archive will keep) verifies too, to the same time.
    again = verify_token(stamped.token, CHECKPOINT, trusted)
    assert again.gen_time == stamped.gen_time
    assert again.token == stamped.token
    # The trusted PEM is the root the TSA's chain ends at: its own certificate alone is not
    # an anchor (OpenSSL's chain building, under rfc3161-client, wants a self-signed one).
    with pytest.raises(TimestampInvalid, match="does not chain to a trusted certificate"):
        verify_token(stamped.token, CHECKPOINT, [world.good.certificate])


def test_the_request_is_sha256_with_a_nonce_and_certreq(world: World) -> None:
    """OpenSSL reads the request back: the imprint, the nonce, certReq."""
    request = build_request(CHECKPOINT)
    assert request.digest == hashlib.sha256(CHECKPOINT).digest()
    assert build_request(CHECKPOINT).nonce != request.nonce
    query = world.folder / "query.tsq"
    query.write_bytes(request.der)
    text = subprocess.run(
        [openssl_or_skip(), "ts", "-query", "-in", str(query), "-text"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert "Hash Algorithm: sha256" in text
    assert "Certificate required: yes" in text
    (nonce_line,) = [line for line in text.splitlines() if line.startswith("Nonce: 0x")]
    assert int(nonce_line.removeprefix("Nonce: 0x"), 16) == request.nonce
    hex_lines = [line.split(" - ", 1)[1][:48] for line in text.splitlines() if " - " in line]
    assert "".join(hex_lines).replace(" ", "").replace("-", "") == request.digest.hex()
    with pytest.raises(ValueError):
        build_request(b"")


def test_a_token_over_other_bytes_fails(world: World) -> None:
    response, nonce = stamp(world.tsa.url, OTHER)
    with pytest.raises(TimestampInvalid, match="message imprint is not the SHA-256 of these bytes"):
        verify_response(response, CHECKPOINT, nonce, [world.ca.certificate])
    token = verify_response(response, OTHER, nonce, [world.ca.certificate]).token
    with pytest.raises(TimestampInvalid, match="message imprint"):
        verify_token(token, CHECKPOINT, [world.ca.certificate])


def test_a_wrong_nonce_fails(world: World) -> None:
    response, nonce = stamp(world.tsa.url)
    with pytest.raises(TimestampInvalid, match=f"nonce {nonce} is not the request's {nonce + 1}"):
        verify_response(response, CHECKPOINT, nonce + 1, [world.ca.certificate])


@pytest.mark.parametrize(
    ("time_stamping", "critical", "error"),
    [
        (False, True, "not for time-stamping: its extended key usage lacks timeStamping"),
        (True, False, "non-critical extended key usage"),
    ],
    ids=["code-signing EKU", "timeStamping not critical"],
)
def test_a_token_signed_by_a_certificate_not_for_time_stamping_fails(
    world: World, time_stamping: bool, critical: bool, error: str
) -> None:
    """Same CA, valid chain and signature; only the signer's extended key usage is wrong."""
    signer = world.ca.issue(
        f"signer {time_stamping} {critical}", time_stamping=time_stamping, critical=critical
    )
    with Tsa(world.folder, signer, world.ca, resign=True, genuine=world.good).serving() as forger:
        response, nonce = stamp(forger.url)
    with pytest.raises(TimestampInvalid, match=error):
        verify_response(response, CHECKPOINT, nonce, [world.ca.certificate])


def test_the_resigned_token_is_otherwise_sound(world: World) -> None:
    """The forger of the test above makes tokens that verify when its signer is for
    time-stamping: what fails there is the EKU, nothing else."""
    signer = world.ca.issue("second TSA")
    with Tsa(world.folder, signer, world.ca, resign=True, genuine=world.good).serving() as forger:
        response, nonce = stamp(forger.url)
    stamped = verify_response(response, CHECKPOINT, nonce, [world.ca.certificate])
    assert stamped.tsa_certificate == signer.certificate


def test_a_token_from_an_untrusted_tsa_fails(world: World) -> None:
    stranger_ca = Pki(world.folder, "stranger root")
    stranger = stranger_ca.issue("stranger TSA")
    with Tsa(world.folder, stranger, stranger_ca).serving() as other:
        response, nonce = stamp(other.url)
    with pytest.raises(TimestampInvalid, match="does not chain to a trusted certificate"):
        verify_response(response, CHECKPOINT, nonce, [world.ca.certificate])
    # A TSA certificate is trusted only through a given PEM, never because the token holds it.
    with pytest.raises(TimestampInvalid, match="does not chain to a trusted certificate"):
        verify_response(response, CHECKPOINT, nonce, [world.good.certificate])
    assert verify_response(response, CHECKPOINT, nonce, [stranger_ca.certificate]).gen_time


def test_a_tampered_token_fails(world: World) -> None:
    response, nonce = stamp(world.tsa.url)
    token = verify_response(response, CHECKPOINT, nonce, [world.ca.certificate]).token
    # The imprint changed to claim other bytes: the signed TSTInfo no longer matches.
    claims_other = token.replace(hashlib.sha256(CHECKPOINT).digest(), hashlib.sha256(OTHER).digest())
    assert claims_other != token
    with pytest.raises(TimestampInvalid, match="signature does not verify"):
        verify_token(claims_other, OTHER, [world.ca.certificate])
    # One bit of the signature value (the token's last bytes).
    flipped = token[:-1] + bytes([token[-1] ^ 1])
    with pytest.raises(TimestampInvalid, match="signature does not verify"):
        verify_token(flipped, CHECKPOINT, [world.ca.certificate])
    # Not DER at all.
    with pytest.raises(TimestampInvalid, match="not a DER RFC 3161"):
        verify_token(token[:40], CHECKPOINT, [world.ca.certificate])
    with pytest.raises(TimestampInvalid, match="not a DER RFC 3161 response"):
        verify_response(b"\x30\x00", CHECKPOINT, nonce, [world.ca.certificate])


def test_a_refusal_is_not_a_token(world: World) -> None:
    """A TSA that does not grant (here: SHA-1 asked, which it does not accept) is reported."""
    data = world.folder / "data"
    data.write_bytes(CHECKPOINT)
    query = subprocess.run(
        [openssl_or_skip(), "ts", "-query", "-data", str(data), "-sha1", "-cert"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    response = fetch(world.tsa.url, query)
    with pytest.raises(TimestampInvalid, match="did not grant the time-stamp: status rejection"):
        verify_response(response, CHECKPOINT, 1, [world.ca.certificate])


def test_a_token_holding_its_tsa_chain_verifies(world: World) -> None:
    """OpenSSL writes the certificates of a token in the order given (the TSA's, then its
    chain), not in DER order; the verifier sorts them (they are outside the signature), and the
    token it keeps still verifies with ``openssl ts -verify``."""
    with Tsa(world.folder, world.good, world.ca, chain=True).serving() as chained:
        request = build_request(CHECKPOINT)
        response = fetch(chained.url, request.der)
    stamped = verify_response(response, CHECKPOINT, request.nonce, [world.ca.certificate])
    assert verify_token(stamped.token, CHECKPOINT, [world.ca.certificate]).gen_time == stamped.gen_time
    data, token = world.folder / "chained.data", world.folder / "chained.tst"
    data.write_bytes(CHECKPOINT)
    token.write_bytes(stamped.token)
    command = [openssl_or_skip(), "ts", "-verify", "-token_in", "-in", str(token), "-data", str(data)]
    checked = subprocess.run(
        [*command, "-CAfile", str(world.ca.cert_path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0 and "Verification: OK" in checked.stdout, checked.stderr
