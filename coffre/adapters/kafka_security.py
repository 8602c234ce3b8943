"""How every coffre client reaches a secured Kafka: TLS and SASL from the ``COFFRE_KAFKA_*`` settings.

One factory for all of them (the services, the auditor's faust app, the admin client that creates
the topics, ``coffre publish``, the client helper, the benches): :func:`client_options` gives the
keyword arguments of an aiokafka client, :func:`faust_credentials` the same for faust. Nothing here
opens a connection. The settings are checked for consistency by :class:`coffre.config.Settings`
(a TLS file with a plaintext protocol, say, is refused at start-up rather than ignored).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from aiokafka.abc import AbstractTokenProvider

from coffre.config import Settings, configuration_error

__all__ = ["TokenFile", "client_options", "faust_credentials", "ssl_context"]


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
