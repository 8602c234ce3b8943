"""How every coffre client reaches a secured Kafka: TLS and SASL from the ``COFFRE_KAFKA_*`` settings.

One factory for all of them (the services, the auditor's faust app, the admin client that creates
the topics, ``coffre publish``, the client helper, the benches): :func:`client_options` gives the
keyword arguments of an aiokafka client, :func:`faust_credentials` the same for faust. Nothing here
opens a connection. The settings are checked for consistency by :class:`coffre.config.Settings`
(a TLS file with a plaintext protocol, say, is refused at start-up rather than ignored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from pathlib import Path
from typing import Any

from aiokafka import errors as kafka_errors
from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import create_conn
from aiokafka.protocol.metadata import MetadataRequest

from coffre.config import Settings, configuration_error

from .kafka import host_port

__all__ = [
    "TokenFile",
    "check_kafka_access",
    "client_options",
    "faust_credentials",
    "principal_of",
    "ssl_context",
]

log = logging.getLogger(__name__)


def _read_secret(path: Path, variable: str) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        configuration_error(f"{variable}: cannot read {path}: {exc.strerror or exc}")


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of a client (``SSL`` and ``SASL_SSL``), None for the plaintext protocols.

    The brokers' certificates are verified (against ``COFFRE_KAFKA_SSL_CA_FILE`` or the system's
    trust store), their host names checked unless ``COFFRE_KAFKA_SSL_CHECK_HOSTNAME=false``; a client
    certificate is presented when one is configured (mutual TLS). TLS 1.2 at least."""
    if settings.kafka_security_protocol not in ("SSL", "SASL_SSL"):
        return None
    ca = settings.kafka_ssl_ca_file
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca) if ca else None)
    except (OSError, ssl.SSLError) as exc:
        configuration_error(f"COFFRE_KAFKA_SSL_CA_FILE: cannot load {ca}: {exc}")
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = settings.kafka_ssl_check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if settings.kafka_ssl_cert_file is not None and settings.kafka_ssl_key_file is not None:
        password_file = settings.kafka_ssl_key_password_file
        password = (
            _read_secret(password_file, "COFFRE_KAFKA_SSL_KEY_PASSWORD_FILE") if password_file else None
        )
        try:
            context.load_cert_chain(
                str(settings.kafka_ssl_cert_file), str(settings.kafka_ssl_key_file), password=password
            )
        except (OSError, ssl.SSLError) as exc:
            configuration_error(
                f"COFFRE_KAFKA_SSL_CERT_FILE, COFFRE_KAFKA_SSL_KEY_FILE: cannot load "
                f"{settings.kafka_ssl_cert_file} with {settings.kafka_ssl_key_file}: {exc}"
            )
    return context


class TokenFile(AbstractTokenProvider):
    """OAUTHBEARER: the token is the content of a file, read again at every login (a projected
    service-account token or a sidecar keeps the file fresh)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def token(self) -> str:
        return self.path.read_text().strip()


def _sasl_password(settings: Settings) -> str:
    if settings.kafka_sasl_password_file is not None:
        return _read_secret(settings.kafka_sasl_password_file, "COFFRE_KAFKA_SASL_PASSWORD_FILE")
    return settings.kafka_sasl_password.get_secret_value()


def client_options(settings: Settings) -> dict[str, Any]:
    """The security keyword arguments of any aiokafka client (consumer, producer, admin, client):
    ``security_protocol`` always, the TLS context and the SASL mechanism and credentials as set."""
    options: dict[str, Any] = {"security_protocol": settings.kafka_security_protocol}
    context = ssl_context(settings)
    if context is not None:
        options["ssl_context"] = context
    mechanism = settings.kafka_sasl_mechanism
    if mechanism is not None:
        options["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            assert settings.kafka_sasl_oauth_token_file is not None  # Settings checked it
            options["sasl_oauth_token_provider"] = TokenFile(settings.kafka_sasl_oauth_token_file)
        else:
            options["sasl_plain_username"] = settings.kafka_sasl_username
            options["sasl_plain_password"] = _sasl_password(settings)
    return options


def faust_credentials(settings: Settings) -> Any:
    """The same for the auditor's faust app (its ``broker_credentials``), or None for PLAINTEXT."""
    import faust

    context = ssl_context(settings)
    mechanism = settings.kafka_sasl_mechanism
    if mechanism == "OAUTHBEARER":
        assert settings.kafka_sasl_oauth_token_file is not None
        return faust.OAuthCredentials(
            oauth_cb=TokenFile(settings.kafka_sasl_oauth_token_file), ssl_context=context
        )
    if mechanism is not None:
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=_sasl_password(settings),
            mechanism=mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def principal_of(settings: Settings) -> str | None:
    """Who this client logs in as, for a message: the SASL user name, the subject of the client
    certificate (mutual TLS; the broker's ``ssl.principal.mapping.rules`` may shorten it), or None."""
    mechanism = settings.kafka_sasl_mechanism
    if mechanism == "OAUTHBEARER":
        return "(the OAUTHBEARER token's, COFFRE_KAFKA_SASL_OAUTH_TOKEN_FILE)"
    if mechanism is not None:
        return repr(settings.kafka_sasl_username)
    if settings.kafka_ssl_cert_file is not None and settings.kafka_security_protocol == "SSL":
        subject = _subject(settings.kafka_ssl_cert_file)
        return f"{subject!r} (COFFRE_KAFKA_SSL_CERT_FILE's subject)" if subject else None
    return None


def _subject(certificate: Path) -> str | None:
    """The subject of a PEM certificate (RFC 4514), None when it cannot be read."""
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(certificate.read_bytes()).subject.rfc4514_string()
    except (OSError, ValueError):
        return None


ACCESS_CHECK_SECONDS = 20.0
"""How long :func:`check_kafka_access` tries to reach a broker before leaving it to the clients."""

_AUTHENTICATION_ERRORS = (
    kafka_errors.AuthenticationFailedError,
    kafka_errors.SaslAuthenticationFailed,
    kafka_errors.UnsupportedSaslMechanismError,
    kafka_errors.IllegalSaslStateError,
)


async def check_kafka_access(settings: Settings, timeout: float = ACCESS_CHECK_SECONDS) -> None:
    """Log in to the cluster once, as every client of this service will, before any of them starts.

    What a retry cannot mend is a configuration error (exit 2, the variables named, the broker's own
    words): a refused credential (SASL), a certificate the client does not trust or the broker refuses,
    a client that speaks plaintext to a TLS listener or TLS to a plaintext one, a listener that wants a
    client certificate or SASL the settings do not give. A broker that does not answer at all (not
    started yet, a network partition) is not: after ``timeout`` the check logs it and leaves the
    clients to their own retries.
    """
    options = client_options(settings)
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        timeout = 0.0  # no credential to refuse: one try, for a TLS listener named by mistake
    servers = [s.strip() for s in settings.bootstrap_servers.split(",") if s.strip()]
    deadline = time.monotonic() + timeout
    last = "no bootstrap server"
    while True:
        for server in servers:
            try:
                host, port = host_port(server)
            except ValueError:
                configuration_error(f"COFFRE_BOOTSTRAP_SERVERS: {server!r} is not HOST:PORT")
            # one silent server (paused, cut off) must not hold the start when others can answer
            refusal = await _log_in(host, port, options, settings, 10.0 if len(servers) == 1 else 4.0)
            if refusal is None:
                return
            fatal, reason = refusal
            if fatal:
                configuration_error(f"Kafka at {server} ({protocol}): {reason}")
            last = f"{server}: {reason}"
        if time.monotonic() >= deadline:
            log.warning(
                "no Kafka broker answered within %.0f s (%s): the clients will go on trying", timeout, last
            )
            return
        await asyncio.sleep(1.0)


async def _log_in(
    host: str, port: int, options: dict[str, Any], settings: Settings, seconds: float = 10.0
) -> tuple[bool, str] | None:
    """None when a metadata request succeeds after the log-in; else (fatal, reason)."""
    protocol = settings.kafka_security_protocol
    tls = protocol in ("SSL", "SASL_SSL")
    conn = None
    stage = "connecting"
    try:
        async with asyncio.timeout(seconds):
            conn = await create_conn(host, port, request_timeout_ms=int(seconds * 1000), **options)
            stage = "authenticated" if settings.kafka_sasl_mechanism else "connected"
            await conn.send(MetadataRequest([]))
        return None
    except _AUTHENTICATION_ERRORS as exc:
        variables = (
            "COFFRE_KAFKA_SASL_OAUTH_TOKEN_FILE"
            if settings.kafka_sasl_mechanism == "OAUTHBEARER"
            else "COFFRE_KAFKA_SASL_USERNAME, COFFRE_KAFKA_SASL_PASSWORD(_FILE)"
        )
        who = f" as {settings.kafka_sasl_username!r}" if settings.kafka_sasl_username else ""
        return True, (
            f"SASL {settings.kafka_sasl_mechanism} authentication{who} refused ({variables}): {_words(exc)}"
        )
    except ssl.SSLCertVerificationError as exc:
        return True, (
            f"the broker's certificate is not trusted (COFFRE_KAFKA_SSL_CA_FILE, "
            f"COFFRE_KAFKA_SSL_CHECK_HOSTNAME): {exc.verify_message or exc}"
        )
    except ConnectionRefusedError as exc:
        return False, f"connection refused ({exc.strerror or exc})"
    except (OSError, TimeoutError, kafka_errors.KafkaError) as exc:
        probe = await _probe_tls(host, port)
        if probe == "silent":
            return False, f"no answer ({_words(exc) or type(exc).__name__})"
        if not tls and probe in ("tls", "tls-wants-certificate"):
            return True, (
                "this listener speaks TLS and COFFRE_KAFKA_SECURITY_PROTOCOL is "
                f"{protocol}: set it to SSL or SASL_SSL with COFFRE_KAFKA_SSL_CA_FILE"
            )
        if tls and probe == "plain":
            return True, (
                f"this listener does not speak TLS and COFFRE_KAFKA_SECURITY_PROTOCOL is {protocol}: "
                "use the cluster's TLS listener, or PLAINTEXT / SASL_PLAINTEXT"
            )
        if tls and probe == "tls-wants-certificate" and settings.kafka_ssl_cert_file is None:
            return True, (
                "this listener requires a client certificate (mutual TLS): set COFFRE_KAFKA_SSL_CERT_FILE "
                "and COFFRE_KAFKA_SSL_KEY_FILE, or use its SASL listener"
            )
        if tls and settings.kafka_ssl_cert_file is not None and "ssl_context" in options:
            alert = await _client_certificate_refused(host, port, options["ssl_context"])
            if alert is not None:
                subject = _subject(settings.kafka_ssl_cert_file)
                return True, (
                    f"the broker refuses the client certificate of COFFRE_KAFKA_SSL_CERT_FILE "
                    f"({settings.kafka_ssl_cert_file}{f', {subject}' if subject else ''}): it must chain "
                    f"to a CA the broker trusts (its ssl.truststore), be valid today and allow client "
                    f"authentication; the broker said {alert}"
                )
        if isinstance(exc, ssl.SSLError):
            return True, f"TLS handshake refused (COFFRE_KAFKA_SSL_*): {exc}"
        if stage == "connected" and settings.kafka_sasl_mechanism is None:
            return True, (
                "the broker closed the connection after the first request: this listener probably "
                "requires SASL (COFFRE_KAFKA_SASL_MECHANISM and credentials) or a client certificate"
            )
        return False, _words(exc) or type(exc).__name__
    finally:
        if conn is not None:
            conn.close()


_CERTIFICATE_ALERTS = (
    "CERTIFICATE_UNKNOWN",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "UNSUPPORTED_CERTIFICATE",
)


async def _client_certificate_refused(host: str, port: int, context: ssl.SSLContext) -> str | None:
    """The broker's TLS alert when it refuses the client certificate of ``context``, else None.

    With TLS 1.3 the client's side of the handshake ends before the server has judged its certificate:
    the refusal comes as an alert at the first read, which Kafka clients report only as a closed
    connection (retried for ever). With TLS 1.2 it ends the handshake itself."""
    writer = None
    try:
        async with asyncio.timeout(5.0):
            reader, writer = await asyncio.open_connection(host, port, ssl=context)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await reader.read(1)
        return None
    except ssl.SSLCertVerificationError:
        return None  # the broker's certificate, not ours: said elsewhere
    except ssl.SSLError as exc:
        text = str(exc)
        return text if any(alert in text.upper() for alert in _CERTIFICATE_ALERTS) else None
    except (OSError, TimeoutError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _probe_tls(host: str, port: int) -> str:
    """What the listener speaks: ``tls``, ``tls-wants-certificate`` (a TLS listener that refuses a
    client without a certificate), ``plain`` (a TLS hello answered by anything but TLS) or ``silent``
    (no connection)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    writer = None
    try:
        async with asyncio.timeout(5.0):
            reader, writer = await asyncio.open_connection(host, port, ssl=context)
            # TLS 1.3: a server that wants a certificate says so after the handshake, at the first read
            writer.write(b"\x00\x00\x00\x00")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await reader.read(1)
        return "tls"
    except ssl.SSLError as exc:
        text = str(exc).upper()
        if "CERTIFICATE_REQUIRED" in text or "HANDSHAKE_FAILURE" in text or "CERTIFICATE" in text:
            return "tls-wants-certificate"
        if "ALERT" in text:
            return "tls"
        return "plain"
    except (ConnectionRefusedError, TimeoutError):
        return "silent"
    except OSError:
        return "plain"  # the connection was closed on the hello: not a TLS listener
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _words(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__
