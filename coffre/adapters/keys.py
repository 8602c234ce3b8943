"""The vault's signing key on disk: ``signing-key.pem`` (0600) and ``signing-cert.pem`` (0644).

:func:`write_key_pair` never overwrites a key: losing the key that signed archived lots is
recoverable (the certificate still verifies them), silently replacing it is not.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from coffre.config import Settings, configuration_error
from coffre.domain.authenticity import RecordKeyError, RecordKeys
from coffre.domain.signing import Signer, generate_key_and_certificate

from .files import fsync_directory, write_new

KEY_NAME = "signing-key.pem"
CERT_NAME = "signing-cert.pem"
DEVELOPMENT_SUFFIX = " (DEVELOPMENT KEY - NOT FOR PRODUCTION)"


class KeyFileError(ValueError):
    """A signing key or certificate file is missing, unreadable, or does not fit its pair."""


def write_key_pair(
    directory: Path, common_name: str, algorithm: str, days: int, development: bool = False
) -> tuple[Path, Path]:
    """Generate a signing key and its self-signed certificate into ``directory`` (created if needed).

    Returns (key path, certificate path). Refuses (FileExistsError) when either file exists.
    A ``development`` certificate says so in its common name.
    """
    directory = Path(directory)
    if development:
        if len(common_name) + len(DEVELOPMENT_SUFFIX) > 64:
            raise ValueError(
                f"common name {common_name!r} too long for the development suffix "
                f"(at most {64 - len(DEVELOPMENT_SUFFIX)} characters)"
            )
        common_name += DEVELOPMENT_SUFFIX
    key_path, cert_path = directory / KEY_NAME, directory / CERT_NAME
    for path in (key_path, cert_path):
        if path.exists():
            raise FileExistsError(f"{path} already exists: refusing to replace a signing key or certificate")
    key_pem, cert_pem = generate_key_and_certificate(common_name, algorithm, days)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        write_new(key_path, key_pem, 0o600)
    except FileExistsError:
        raise FileExistsError(f"{key_path} already exists: refusing to replace a signing key") from None
    try:
        write_new(cert_path, cert_pem, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            key_path.unlink()
        raise
    with contextlib.suppress(OSError):  # make the new entries durable too
        fsync_directory(directory)
    return key_path, cert_path


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise KeyFileError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise KeyFileError(f"{what} {path}: is a directory") from None
    except OSError as exc:
        raise KeyFileError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None


def load_signer(key_path: str | os.PathLike[str], cert_path: str | os.PathLike[str]) -> Signer:
    """The :class:`Signer` for a PEM key file and its PEM certificate file, or :class:`KeyFileError`."""
    key_path, cert_path = Path(key_path), Path(cert_path)
    key_pem = _read(key_path, "signing key")
    cert_pem = _read(cert_path, "signing certificate")
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise KeyFileError(f"signing key {key_path}: not an unencrypted PEM private key") from None
    try:
        certificate = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise KeyFileError(f"signing certificate {cert_path}: not a PEM certificate") from None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != certificate.public_key().public_bytes(*spki):
        raise KeyFileError(f"signing key {key_path} does not match certificate {cert_path}")
    try:
        return Signer(key, certificate)  # type: ignore[arg-type]  # Signer rejects other key types
    except ValueError as exc:
        raise KeyFileError(f"signing key {key_path}: {exc}") from None


RECORD_KEYS_NAME = "record-keys"
_log = logging.getLogger("coffre.keys")


def record_keys(settings: Settings, *, warn: bool = True) -> RecordKeys:
    """The keys that authenticate coffre's own Kafka records (:mod:`coffre.domain.authenticity`):
    ``COFFRE_RECORD_KEYS``, else ``COFFRE_RECORD_KEYS_FILE``, else a development key generated once
    in ``<data dir>/keys/record-keys`` (0600; every process of ``coffre up`` shares that folder).
    A configuration that cannot be read stops the process (exit 2, the variable named)."""
    inline = settings.record_keys.get_secret_value()
    try:
        if inline:
            return RecordKeys.parse(inline)
        if settings.record_keys_file is not None:
            return RecordKeys.parse(_read(settings.record_keys_file, "record keys file").decode())
    except (RecordKeyError, KeyFileError, UnicodeDecodeError) as exc:
        variable = "COFFRE_RECORD_KEYS" if inline else "COFFRE_RECORD_KEYS_FILE"
        configuration_error(f"{variable}: {exc}")
    path = Path(settings.data_dir) / "keys" / RECORD_KEYS_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        line = "# DEVELOPMENT record key, generated by coffre - NOT FOR PRODUCTION\n"
        with contextlib.suppress(FileExistsError):  # another process made it first: read theirs
            write_new(path, (line + RecordKeys.new_key_line("dev") + "\n").encode(), 0o600)
    try:
        keys = RecordKeys.parse(path.read_text())
    except (OSError, RecordKeyError) as exc:
        configuration_error(f"COFFRE_RECORD_KEYS_FILE (unset; the development key {path}): {exc}")
    if warn:
        _log.warning(
            "coffre's records are authenticated with the development key %s: set COFFRE_RECORD_KEYS_FILE "
            "(a Secret every service shares) in production",
            path,
        )
    return keys
