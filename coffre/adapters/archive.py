"""The vault's archive as configured: its storage backend, its signing key, the certificates it trusts."""

from __future__ import annotations

import contextlib
from pathlib import Path

from coffre.config import Settings
from coffre.domain.signing import Signer, TrustStore

from .keys import load_signer, write_key_pair
from .storage import ArchiveStorage, LocalStorage, S3ObjectLockStorage

DEVELOPMENT_NAME = "coffre vault"


def archive_storage(settings: Settings) -> ArchiveStorage:
    """Local folder by default; S3 with Object Lock (compliance) when ``COFFRE_ARCHIVE_BACKEND=s3``."""
    if settings.archive_backend == "s3":
        storage = S3ObjectLockStorage(
            settings.s3_bucket,
            prefix=settings.s3_prefix,
            retention_days=settings.s3_retention_days,
            endpoint_url=settings.s3_endpoint_url or None,
            region=settings.s3_region,
        )
        storage.ensure_bucket()
        return storage
    settings.archive_root.mkdir(parents=True, exist_ok=True)
    local = LocalStorage(settings.archive_root)
    local.cleanup_temporary()
    return local


def signing_files(settings: Settings) -> tuple[Path, Path]:
    """The key and certificate that sign lots; the development pair is generated on first use
    (its certificate says DEVELOPMENT KEY) when none is configured."""
    key, cert, development = settings.key_paths
    if development and not key.exists():
        with contextlib.suppress(FileExistsError):  # another process of the stack made it first
            write_key_pair(key.parent, DEVELOPMENT_NAME, "ecdsa", days=3650, development=True)
    return key, cert


def signer(settings: Settings) -> Signer:
    key, cert = signing_files(settings)
    return load_signer(key, cert)


def older_certs(settings: Settings) -> list[Path]:
    """The older signing certificates still trusted (``COFFRE_TRUSTED_CERTS``, comma-separated)."""
    return [Path(p.strip()) for p in settings.trusted_certs.split(",") if p.strip()]


def trust_store(settings: Settings) -> TrustStore:
    """The signing certificate and the older ones still trusted (``COFFRE_TRUSTED_CERTS``)."""
    _, cert = signing_files(settings)
    return TrustStore.from_pem_files([cert, *older_certs(settings)])
