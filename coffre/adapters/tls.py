"""TLS for the regulator API: the server's context, and development material when none is configured.

Production deployments give the API a server certificate and key (``COFFRE_API_TLS_CERT`` /
``COFFRE_API_TLS_KEY``), the CA bundle client certificates must chain to
(``COFFRE_API_CLIENT_CA``), the subjects allowed (``COFFRE_API_ALLOWED_SUBJECTS``) and a tokens
file (``COFFRE_API_TOKENS_FILE``). Without a server certificate, :func:`development_tls` makes,
once, under ``<data dir>/tls``: a development CA, a server certificate for localhost signed by
it, a client certificate for the regulator and a bearer token. Every common name says
DEVELOPMENT, so such material is recognisable wherever it ends up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import os
import secrets
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coffre.config import Settings

from .files import fsync_directory, write_new

__all__ = [
    "DEVELOPMENT_CLIENT_SUBJECT",
    "ApiTls",
    "DevelopmentTls",
    "TlsSite",
    "api_tls_material",
    "development_tls",
    "server_ssl_context",
]

DEVELOPMENT_CLIENT_SUBJECT = "CN=regulator (DEVELOPMENT),O=coffre"
"""The development client certificate's subject, as ``x509.Name.rfc4514_string()`` writes it."""

DEVELOPMENT_TOKEN_NAME = "regulator-dev"
_DAYS = 3650


def server_ssl_context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """The API's server context: TLS 1.2 or newer, with the given certificate chain and key.

    With ``client_ca``, a client *may* present a certificate (``CERT_OPTIONAL``, so that a
    client with a bearer token only can still connect); one that does not chain to the CA
    fails the handshake. Whether a request needs one is the API's authentication's business.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION | ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        context.load_cert_chain(certfile=str(cert), keyfile=str(key))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"regulator API: cannot load the server certificate {cert} and key {key}: {exc}"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"regulator API: cannot load the client CA bundle {client_ca}: {exc}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


# -- development material ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DevelopmentTls:
    """Paths of the development material (see :func:`development_tls`)."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    tokens_file: Path
    client_subject: str = DEVELOPMENT_CLIENT_SUBJECT

    def token(self) -> str:
        """The development bearer token (the first ``regulator-dev`` line of the tokens file)."""
        for line in self.tokens_file.read_text(encoding="utf-8").splitlines():
            name, _, token = line.partition(":")
            if name.strip() == DEVELOPMENT_TOKEN_NAME and token.strip():
                return token.strip()
        raise ValueError(f"{self.tokens_file}: no {DEVELOPMENT_TOKEN_NAME} token")


def _files(directory: Path) -> DevelopmentTls:
    return DevelopmentTls(
        directory,
        directory / "ca-cert.pem",
        directory / "ca-key.pem",
        directory / "server-cert.pem",
        directory / "server-key.pem",
        directory / "client-cert.pem",
        directory / "client-key.pem",
        directory / "tokens",
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _name(*attributes: tuple[x509.ObjectIdentifier, str]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])


def _usage(*, signing: bool, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=signing,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
    usage: x509.ObjectIdentifier | None = None,
    names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(_usage(signing=True, ca=ca), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if not ca:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Several processes of one stack may start at once: one generates, the others wait and reuse."""
    fd = os.open(directory / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def development_tls(directory: Path) -> DevelopmentTls:
    """The development CA, server and client certificates and token under ``directory``.

    Generated on first use and reused afterwards; nothing is ever overwritten (a directory
    holding only part of the material is refused: remove it to start again). Keys and the
    tokens file are 0600.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    files = _files(directory)
    pairs = [
        (files.ca_cert, files.ca_key),
        (files.server_cert, files.server_key),
        (files.client_cert, files.client_key),
    ]
    with _locked(directory):
        present = {p for pair in pairs for p in pair if p.exists()} | (
            {files.tokens_file} if files.tokens_file.exists() else set()
        )
        if len(present) == 7:
            return files
        if files.ca_cert not in present or files.ca_key not in present:
            if present:
                raise ValueError(
                    f"{directory} holds part of the development TLS material but not its CA "
                    f"({', '.join(sorted(p.name for p in present))}): remove the directory to regenerate it"
                )
            ca_key = ec.generate_private_key(ec.SECP256R1())
            ca_name = _name(
                (NameOID.ORGANIZATION_NAME, "coffre"), (NameOID.COMMON_NAME, "coffre API CA (DEVELOPMENT)")
            )
            ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
            write_new(files.ca_key, _key_pem(ca_key), 0o600)
            write_new(files.ca_cert, _cert_pem(ca_cert), 0o644)
        else:
            ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
            loaded = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
            if not isinstance(loaded, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{files.ca_key} is not the development CA's EC key")
            ca_key = loaded
        for (cert_path, key_path), subject, usage, names in (
            (
                pairs[1],
                _name(
                    (NameOID.ORGANIZATION_NAME, "coffre"),
                    (NameOID.COMMON_NAME, "coffre API server (DEVELOPMENT)"),
                ),
                ExtendedKeyUsageOID.SERVER_AUTH,
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ],
            ),
            (
                pairs[2],
                x509.Name.from_rfc4514_string(DEVELOPMENT_CLIENT_SUBJECT),
                ExtendedKeyUsageOID.CLIENT_AUTH,
                None,
            ),
        ):
            if cert_path in present and key_path in present:
                continue
            if cert_path in present or key_path in present:
                raise ValueError(
                    f"{directory} holds {cert_path.name} or {key_path.name} without the other: "
                    "remove the directory to regenerate the development TLS material"
                )
            key = ec.generate_private_key(ec.SECP256R1())
            certificate = _issue(subject, key, ca_cert.subject, ca_key, ca=False, usage=usage, names=names)
            write_new(key_path, _key_pem(key), 0o600)
            write_new(cert_path, _cert_pem(certificate), 0o644)
        if files.tokens_file not in present:
            token = secrets.token_urlsafe(32)
            write_new(
                files.tokens_file,
                f"# DEVELOPMENT token of the regulator API - not for production\n"
                f"{DEVELOPMENT_TOKEN_NAME}:{token}\n".encode(),
                0o600,
            )
        fsync_directory(directory)
    return files


# -- what the API serves with ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiTls:
    """The effective TLS and credentials material of the regulator API."""

    server_cert: Path
    server_key: Path
    client_ca: Path | None
    allowed_subjects: tuple[str, ...]
    tokens_file: Path | None
    development: DevelopmentTls | None
    """The development material in use, if any (server certificate not configured)."""


def api_tls_material(settings: Settings) -> ApiTls:
    """The configured material; when no server certificate is configured, the development one,
    whose CA, client subject and tokens file stand in only for what is not configured."""
    if settings.api_tls_cert is not None and settings.api_tls_key is not None:
        return ApiTls(
            settings.api_tls_cert,
            settings.api_tls_key,
            settings.api_client_ca,
            tuple(settings.api_allowed_subjects),
            settings.api_tokens_file,
            None,
        )
    development = development_tls(Path(settings.data_dir) / "tls")
    return ApiTls(
        development.server_cert,
        development.server_key,
        settings.api_client_ca or development.ca_cert,
        tuple(settings.api_allowed_subjects) or (development.client_subject,),
        settings.api_tokens_file or development.tokens_file,
        development,
    )


class TlsSite(web.BaseSite):
    """An HTTPS listening socket for aiohttp, like ``web.TCPSite`` but with the connection
    handler given (``connection()`` makes one ``web.RequestHandler`` per connection, e.g. with
    deadlines of its own) and the TLS handshakes and closes bounded by ``handshake_timeout``.
    The regulator API and the witness serve through it."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext,
        connection: Callable[[], web.RequestHandler],
        handshake_timeout: float,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host, self._port = host, port
        self._connection = connection
        self._handshake_timeout = handshake_timeout

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            self._connection,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self._handshake_timeout,
            ssl_shutdown_timeout=self._handshake_timeout,
        )
