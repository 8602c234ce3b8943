"""The archive, opened read-only: the regulator API lists and reads it, and never writes to it.

:func:`coffre.adapters.archive.archive_storage` is the vault's way in: it creates the local root,
removes the temporary files a crashed seal left (which would be a vault's sealing in progress,
seen from another process) and creates the S3 bucket. None of that is done here: the storage is
opened as it is, and every write is refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from coffre.adapters.storage import LocalStorage, S3ObjectLockStorage
from coffre.config import Settings

__all__ = ["ArchiveReadOnly", "ReadOnlyArchive", "open_archive"]


class ArchiveReadOnly(PermissionError):
    """A write was asked of the read-only archive."""


class ReadOnlyArchive:
    """An :class:`~coffre.adapters.storage.ArchiveStorage` that reads, lists and probes (with a
    listing, never a write), and refuses :meth:`create`."""

    def __init__(
        self, storage: LocalStorage | S3ObjectLockStorage, probe: Callable[[], None], where: str
    ) -> None:
        self.storage = storage
        self.where = where
        """The folder or the ``s3://bucket/prefix``, for the logs."""
        self._probe = probe

    def __repr__(self) -> str:
        return f"ReadOnlyArchive({self.where})"

    def create(self, key: str, data: bytes) -> str:
        raise ArchiveReadOnly(f"the regulator API never writes to the archive (asked to create {key!r})")

    def read(self, key: str) -> bytes:
        return self.storage.read(key)

    def exists(self, key: str) -> bool:
        return self.storage.exists(key)

    def list(self, prefix: str) -> list[str]:
        return self.storage.list(prefix)

    def children(self, prefix: str) -> tuple[list[str], list[str]]:
        return self.storage.children(prefix)

    def probe(self) -> None:
        """Raise unless the archive can be listed now (readiness)."""
        self._probe()


def open_archive(settings: Settings) -> ReadOnlyArchive:
    """The configured archive (``COFFRE_ARCHIVE_BACKEND``), read-only. Nothing is created: a local
    root that does not exist yet (the vault has not started) fails the probe until it does."""
    if settings.archive_backend == "s3":
        bucket = S3ObjectLockStorage(
            settings.s3_bucket,
            prefix=settings.s3_prefix,
            retention_days=settings.s3_retention_days,
            endpoint_url=settings.s3_endpoint_url or None,
            region=settings.s3_region,
        )

        def probe_bucket() -> None:
            bucket.client.list_objects_v2(Bucket=bucket.bucket, Prefix=bucket.prefix, MaxKeys=1)

        return ReadOnlyArchive(bucket, probe_bucket, f"s3://{bucket.bucket}/{bucket.prefix}")

    root = settings.archive_root

    def probe_folder() -> None:
        with os.scandir(root) as entries:
            next(entries, None)

    return ReadOnlyArchive(LocalStorage(root), probe_folder, str(root))
