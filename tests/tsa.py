"""A real time-stamp authority for the tests: Debian's ``openssl ts -reply`` behind a loopback
HTTP handler (``http.server`` in a thread), answering ``application/timestamp-query`` POSTs
as an RFC 3161 TSA does over HTTP (RFC 3161 §3.4).

:class:`Pki` makes, in a temporary folder, a test CA and TSA certificates signed by it with
``cryptography``; :class:`Tsa` writes an ``openssl ts`` configuration for one of them and
serves. ``openssl ts -reply`` refuses to sign with a certificate that is not for time-stamping
(critical EKU ``timeStamping`` only), so a token from such a certificate, needed to show that
the verifier refuses it, is made as a real TSA would, then its ``TSTInfo`` signed again with
``openssl cms -sign`` by that certificate (``Tsa(..., resign=True)``).

Without ``openssl`` the tests skip, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.request import Request, urlopen

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

POLICY = "1.3.6.1.4.1.99999.21.1"
"""The test TSA's policy (a private arc: a test policy, nothing real)."""


def openssl_or_skip() -> str:
    binary = shutil.which("openssl")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is not installed, and CI needs the real TSA tests")
        pytest.skip("openssl is not installed (Debian's openssl runs the test TSA)")
    return binary


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "coffre tests"),
        ]
    )


def _pem(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


@dataclass(frozen=True)
class Identity:
    """A certificate and its key, written as PEM files."""

    certificate: x509.Certificate
    cert_path: Path
    key_path: Path


class Pki:
    """A test CA and the certificates it issues, in ``folder``."""

    def __init__(self, folder: Path, name: str = "coffre test TSA root") -> None:
        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC) - timedelta(minutes=5)
        self.name = _name(name)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        slug = name.replace(" ", "-")
        self.cert_path = _pem(folder / f"{slug}.pem", self.certificate)

    def issue(self, common_name: str, *, time_stamping: bool = True, critical: bool = True) -> Identity:
        """A leaf certificate: EKU ``timeStamping`` (critical unless told) when ``time_stamping``,
        else EKU ``codeSigning``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC) - timedelta(minutes=5)
        usage = ExtendedKeyUsageOID.TIME_STAMPING if time_stamping else ExtendedKeyUsageOID.CODE_SIGNING
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=True,
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
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=critical)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        slug = common_name.replace(" ", "-")
        key_path = self.folder / f"{slug}.key"
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return Identity(certificate, _pem(self.folder / f"{slug}.pem", certificate), key_path)


_CONFIG = """\
[ tsa ]
default_tsa = tsa_config

[ tsa_config ]
dir = {folder}
serial = $dir/serial
crypto_device = builtin
signer_cert = {signer_cert}
{certs}signer_key = {signer_key}
signer_digest = sha256
default_policy = {policy}
other_policies = {policy}
digests = sha256, sha384, sha512
accuracy = secs:1
clock_precision_digits = 3
ordering = no
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""


class Tsa:
    """``openssl ts -reply`` over HTTP on 127.0.0.1; :attr:`url` takes the POSTs.

    ``signer`` signs the tokens; with ``chain`` they also hold the CA's certificate, which
    OpenSSL writes after the signer's, out of DER order (a TSA sending its chain). With ``resign`` the token ``openssl ts`` made with ``genuine``
    (a proper TSA identity) has its ``TSTInfo`` signed again by ``signer`` with ``openssl cms``.
    """

    def __init__(
        self,
        folder: Path,
        signer: Identity,
        ca: Pki,
        *,
        resign: bool = False,
        genuine: Identity | None = None,
        chain: bool = False,
    ) -> None:
        self.openssl = openssl_or_skip()
        self.folder = folder
        self.signer = signer
        self.resign = resign
        tsa_identity = genuine if resign else signer
        if tsa_identity is None:
            raise ValueError("resign needs a genuine TSA identity for openssl ts -reply")
        (folder / "serial").write_text("01\n")
        self.config = folder / f"tsa-{signer.cert_path.stem}.cnf"
        self.config.write_text(
            _CONFIG.format(
                folder=folder,
                signer_cert=tsa_identity.cert_path,
                certs=f"certs = {ca.cert_path}\n" if chain else "",
                signer_key=tsa_identity.key_path,
                policy=POLICY,
            )
        )
        self._lock = threading.Lock()
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the TSA is not serving"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/tsa"

    def _run(self, *args: str) -> bytes:
        done = subprocess.run([self.openssl, *args], capture_output=True, timeout=30, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.decode(errors='replace')}")
        return done.stdout

    def reply(self, query: bytes) -> bytes:
        """The TimeStampResp to a DER TimeStampReq (one request at a time: openssl ts keeps a
        serial file)."""
        with self._lock, tempfile.TemporaryDirectory(dir=self.folder) as tmp:
            work = Path(tmp)
            (work / "query.tsq").write_bytes(query)
            self._run(
                "ts",
                "-reply",
                "-config",
                str(self.config),
                "-queryfile",
                str(work / "query.tsq"),
                "-out",
                str(work / "reply.tsr"),
            )
            self.requests += 1
            response = (work / "reply.tsr").read_bytes()
            if not self.resign:
                return response
            # The token alone, its TSTInfo, then that TSTInfo signed by ``signer``.
            self._run(
                "ts",
                "-reply",
                "-in",
                str(work / "reply.tsr"),
                "-token_out",
                "-out",
                str(work / "token.der"),
            )
            self._run(
                "cms",
                "-verify",
                "-noverify",
                "-inform",
                "DER",
                "-in",
                str(work / "token.der"),
                "-out",
                str(work / "tstinfo.der"),
            )
            self._run(
                "cms",
                "-sign",
                "-binary",
                "-nodetach",
                "-nosmimecap",
                "-md",
                "sha256",
                "-econtent_type",
                "id-smime-ct-TSTInfo",
                "-signer",
                str(self.signer.cert_path),
                "-inkey",
                str(self.signer.key_path),
                "-in",
                str(work / "tstinfo.der"),
                "-outform",
                "DER",
                "-out",
                str(work / "token2.der"),
            )
            token = (work / "token2.der").read_bytes()
            body = b"\x30\x03\x02\x01\x00" + token
            return b"\x30" + _der_length(len(body)) + body

    @contextmanager
    def serving(self) -> Iterator[Tsa]:
        tsa = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.headers.get("Content-Type") != "application/timestamp-query":
                    self.send_error(415, "expected application/timestamp-query")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                query = self.rfile.read(length)
                try:
                    body = tsa.reply(query)
                except RuntimeError as exc:
                    self.send_error(400, str(exc)[:200])
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="test-tsa", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    octets = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def fetch(url: str, query: bytes, timeout: float = 10.0) -> bytes:
    """POST a TimeStampReq to a TSA and return its TimeStampResp (RFC 3161 §3.4)."""
    request = Request(url, data=query, headers={"Content-Type": "application/timestamp-query"}, method="POST")
    with urlopen(request, timeout=timeout) as answer:
        if answer.headers.get("Content-Type") != "application/timestamp-reply":
            raise RuntimeError(f"the TSA answered {answer.headers.get('Content-Type')}")
        return answer.read()
