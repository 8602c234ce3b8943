"""Archive storage: where sealed lots live once written.

A lot is written exactly once and never changed, so the interface is create-only: there is no
update and no delete. Two backends:

* :class:`LocalStorage` — a directory on a local filesystem (development, small deployments,
  or a staging area in front of WORM media).
* :class:`S3ObjectLockStorage` — an S3 bucket with Object Lock in COMPLIANCE mode, the
  production WORM store: not even the account root can delete a locked version before its
  retain-until date.

Keys are ``/``-separated relative paths such as ``0099/1/2026/11/22/0099-1-0000000001.xml``.
They come from our own code, but are validated anyway so that a path traversal is impossible
whatever a caller passes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .files import fsync_directory, write_all

__all__ = [
    "ArchiveStorage",
    "LocalStorage",
    "ObjectExists",
    "ObjectMissing",
    "S3ObjectLockStorage",
    "StorageConfigurationError",
    "validate_key",
    "validate_prefix",
]

TMP_PREFIX = ".tmp-"
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_MAX_KEY_LENGTH = 1024  # S3's limit on key length (in bytes; our keys are ASCII)


class ObjectExists(Exception):
    """The key already holds *different* bytes: a lot can never be replaced."""

    def __init__(self, key: str) -> None:
        super().__init__(f"object already exists with different content: {key}")
        self.key = key


class ObjectMissing(Exception):
    """No object under this key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no such object: {key}")
        self.key = key


class StorageConfigurationError(RuntimeError):
    """The storage cannot give the guarantees we rely on (e.g. a bucket without Object Lock)."""


@runtime_checkable
class ArchiveStorage(Protocol):
    """Create-only object store for sealed lots."""

    def create(self, key: str, data: bytes) -> str:
        """Store ``data`` under ``key`` atomically and durably, never overwriting.

        Identical bytes already present → returns normally (an idempotent retry after a crash);
        different bytes → :class:`ObjectExists`. Returns a version string.
        """
        ...

    def read(self, key: str) -> bytes:
        """The stored bytes; :class:`ObjectMissing` when absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> list[str]:
        """All keys starting with ``prefix`` (a plain string prefix), sorted."""
        ...

    def children(self, prefix: str) -> tuple[list[str], list[str]]:
        """(sub-folder names, object names) right under ``prefix`` ("" or ending with '/'), sorted:
        one level of the layout, without listing everything below it."""
        ...

    def probe(self) -> None:
        """Raise unless the store can take a new object now (readiness)."""
        ...


def _check_segments(value: str, what: str, segments: list[str], partial_last: bool = False) -> None:
    for i, segment in enumerate(segments):
        if not _SEGMENT.fullmatch(segment):
            raise ValueError(f"invalid {what} {value!r}: empty segment or forbidden character")
        if partial_last and i == len(segments) - 1:
            continue  # a prefix may end in the middle of a segment: "0099/1/20"
        if segment == "." or segment.startswith(TMP_PREFIX):
            # '.tmp-*' names are our temporary files: a key named so would be hidden from
            # list() and removed by cleanup_temporary().
            raise ValueError(f"invalid {what} {value!r}: reserved segment {segment!r}")


def _check_common(value: str, what: str) -> None:
    if len(value) > _MAX_KEY_LENGTH:
        raise ValueError(f"invalid {what} {value[:40]!r}...: longer than {_MAX_KEY_LENGTH}")
    if value.startswith("/") or "\\" in value or ".." in value:
        raise ValueError(f"invalid {what} {value!r}: absolute, backslash or '..'")


def validate_key(key: str) -> str:
    """Reject anything that could escape the root or be ambiguous; return the key unchanged."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"invalid key {key!r}: must be a non-empty string")
    _check_common(key, "key")
    _check_segments(key, "key", key.split("/"))
    return key


def validate_prefix(prefix: str) -> str:
    """Like :func:`validate_key`, but may be empty, end with '/', or end mid-segment."""
    if not isinstance(prefix, str):
        raise ValueError(f"invalid prefix {prefix!r}: must be a string")
    if prefix == "":
        return prefix
    _check_common(prefix, "prefix")
    segments = prefix.split("/")
    if segments[-1] == "":
        _check_segments(prefix, "prefix", segments[:-1])
    else:
        _check_segments(prefix, "prefix", segments, partial_last=True)
    return prefix


def probe_directory(directory: Path) -> None:
    """Write, fsync and remove a temporary file in ``directory``: the disk takes writes now."""
    fd, name = tempfile.mkstemp(prefix=TMP_PREFIX + "probe-", dir=directory)
    try:
        os.write(fd, b"probe")
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


class LocalStorage:
    """Lots as read-only files under ``root``.

    Guarantees, on a POSIX filesystem that honours ``fsync`` (ext4, xfs, zfs...):

    * **Atomic create**: the bytes go to a ``.tmp-*`` file in the target directory, are
      fsynced, and only then hard-linked to the final name. ``link(2)`` fails if the name
      exists, so a final file is never partially written and never overwritten, even by two
      concurrent writers. A crash leaves at worst a ``.tmp-*`` file, which :meth:`list`
      ignores and :meth:`cleanup_temporary` removes.
    * **Durable after return**: the file, its directory, and every directory created on the
      way are fsynced before :meth:`create` returns, so the object survives a power loss.
    * **Immutable by mode only**: files are made ``0o444`` before they get their final name.
      That stops accidents, not an administrator: root (or the owner, after a chmod) can
      still change or delete them. What makes tampering *detectable* is the lots' signatures
      and hash chain, not this backend; use :class:`S3ObjectLockStorage` (or WORM media) for
      tamper *resistance*.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key).split("/"))

    def _make_parents(self, directory: Path) -> None:
        """mkdir -p, fsyncing the parent of each directory created so the new entries persist."""
        missing: list[Path] = []
        current = directory
        while current != self.root and not current.is_dir():
            missing.append(current)
            current = current.parent
        if not self.root.is_dir():
            raise StorageConfigurationError(f"storage root does not exist: {self.root}")
        for path in reversed(missing):
            with contextlib.suppress(FileExistsError):  # a concurrent writer made it
                os.mkdir(path)
        # Each new entry lives in its parent directory (root included): fsync those, or a power
        # loss could drop a directory, and the lot in it, after create() returned.
        for path in reversed(missing):
            fsync_directory(path.parent)

    @staticmethod
    def _same_as_existing(final: Path, data: bytes) -> bool:
        """Whether ``final`` holds exactly ``data``; makes it durable when it does."""
        if not final.is_file() or final.is_symlink():
            return False
        fd = os.open(final, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            with os.fdopen(os.dup(fd), "rb") as f:
                existing = f.read()
            if existing != data:
                return False
            # The previous attempt may have crashed before its fsyncs: redo them.
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(final.parent)
        return True

    def create(self, key: str, data: bytes) -> str:
        final = self._path(key)
        version = hashlib.sha256(data).hexdigest()
        if os.path.lexists(final):
            if self._same_as_existing(final, data):
                return version
            raise ObjectExists(key)
        self._make_parents(final.parent)
        fd, tmp_name = tempfile.mkstemp(prefix=TMP_PREFIX, dir=final.parent)
        tmp = Path(tmp_name)
        try:
            write_all(fd, data)
            # Read-only before the final name appears: the link shares this inode.
            os.fchmod(fd, 0o444)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            try:
                os.link(tmp, final)
            except FileExistsError:
                # Lost a race with another writer of the same key.
                if self._same_as_existing(final, data):
                    return version
                raise ObjectExists(key) from None
        finally:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        fsync_directory(final.parent)
        return version

    def read(self, key: str) -> bytes:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ObjectMissing(key) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a directory is not an object
            os.close(fd)
            raise ObjectMissing(key)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)
        # Only walk the deepest directory the prefix fully names.
        base_parts = prefix.split("/")[:-1]
        base = self.root.joinpath(*base_parts)
        if not base.is_dir():
            return []
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(TMP_PREFIX)]
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in filenames:
                if name.startswith(TMP_PREFIX):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def children(self, prefix: str) -> tuple[list[str], list[str]]:
        validate_prefix(prefix)
        base = self.root.joinpath(*[p for p in prefix.split("/") if p])
        folders: list[str] = []
        files: list[str] = []
        try:
            entries = list(base.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return [], []
        for entry in entries:
            if entry.name.startswith(TMP_PREFIX):
                continue
            if entry.is_dir() and not entry.is_symlink():
                folders.append(entry.name)
            elif entry.is_file() and not entry.is_symlink():
                files.append(entry.name)
        return sorted(folders), sorted(files)

    def probe(self) -> None:
        probe_directory(self.root)

    def cleanup_temporary(self) -> int:
        """Remove ``.tmp-*`` files left by a crash; returns how many.

        Run it at start-up, before any writer: a concurrent :meth:`create` would lose its
        temporary file (and then fail, never corrupt anything).
        """
        removed = 0
        for dirpath, _dirnames, filenames in os.walk(self.root):
            here = 0
            for name in filenames:
                if name.startswith(TMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(dirpath, name))
                        here += 1
            if here:
                fsync_directory(Path(dirpath))
                removed += here
        return removed


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _http_status(exc: Exception) -> int:
    response = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


_NOT_FOUND = {"404", "NoSuchKey", "NotFound", "NoSuchVersion"}
_CREATE_ATTEMPTS = 5


class S3ObjectLockStorage:
    """Lots as S3 objects under Object Lock (WORM).

    Every object is written with its own retention (``mode``, default COMPLIANCE, until
    now + ``retention_days``): in COMPLIANCE mode no one, not even the account root, can
    delete that object version or shorten its retention until the date passes. The default,
    6 × 365 + 2 days, is six calendar years whatever the leap days.

    Create-only uses a conditional write (``If-None-Match: *``), which S3 evaluates
    atomically against the current version of the key (moto checks it too, but not
    atomically). What Object Lock does *not* prevent: a new *version* written under an
    existing key without that condition, or a delete marker (a DELETE without VersionId is
    allowed) that hides the current version — after which a create of that key succeeds as
    a new version. Either way the locked version stays intact and retrievable
    (``list_object_versions``), and the lots' signatures and hash chain make the change
    visible.

    ``put_object`` returns once S3 has stored the object durably; the SHA-256 checksum makes
    S3 reject a body corrupted in transit.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any = None,
        retention_days: int = 6 * 365 + 2,
        mode: str = "COMPLIANCE",
        endpoint_url: str | None = None,
        region: str = "eu-west-3",
        page_size: int = 1000,
    ) -> None:
        if mode not in ("COMPLIANCE", "GOVERNANCE"):
            raise ValueError(f"Object Lock mode must be COMPLIANCE or GOVERNANCE, not {mode!r}")
        if retention_days < 1:
            raise ValueError("retention_days must be at least 1")
        if prefix:
            validate_prefix(prefix)
            if not prefix.endswith("/"):
                prefix += "/"
        if client is None:
            import boto3

            client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        self.bucket = bucket
        self.prefix = prefix
        self.client = client
        self.retention_days = retention_days
        self.mode = mode
        self.region = region
        self.page_size = page_size

    def _key(self, key: str) -> str:
        return self.prefix + validate_key(key)

    def children(self, prefix: str) -> tuple[list[str], list[str]]:
        validate_prefix(prefix)
        full = self.prefix + prefix
        folders: list[str] = []
        files: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(
            Bucket=self.bucket, Prefix=full, Delimiter="/", PaginationConfig={"PageSize": self.page_size}
        ):
            for common in page.get("CommonPrefixes", []):
                folders.append(common["Prefix"][len(full) :].rstrip("/"))
            for obj in page.get("Contents", []):
                files.append(obj["Key"][len(full) :])
        return sorted(folders), sorted(files)

    def probe(self) -> None:
        """The bucket answers with these credentials (readiness; writes nothing, objects are locked)."""
        self.client.head_bucket(Bucket=self.bucket)

    # -- bucket set-up ----------------------------------------------------------------------

    def ensure_bucket(self) -> None:
        """Create the bucket with Object Lock if missing; refuse an existing bucket without it.

        Every lot's retention depends on the bucket's Object Lock (and the versioning it
        implies): better a clear refusal at start-up than a failure on the first lot.
        """
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _error_code(exc) not in _NOT_FOUND | {"NoSuchBucket"}:
                raise
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "ObjectLockEnabledForBucket": True}
            if self.region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            try:
                self.client.create_bucket(**kwargs)
            except ClientError as create_exc:
                if _error_code(create_exc) != "BucketAlreadyOwnedByYou":
                    raise
        try:
            config = self.client.get_object_lock_configuration(Bucket=self.bucket)
        except ClientError as exc:
            if _error_code(exc) == "ObjectLockConfigurationNotFoundError":
                raise StorageConfigurationError(
                    f"bucket {self.bucket!r} exists but Object Lock is not enabled on it; "
                    "lots must go to a bucket created with Object Lock "
                    "(ObjectLockEnabledForBucket=True)"
                ) from None
            raise
        enabled = config.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled")
        if enabled != "Enabled":
            raise StorageConfigurationError(
                f"bucket {self.bucket!r}: Object Lock is {enabled!r}, expected 'Enabled'"
            )
        versioning = self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")
        if versioning != "Enabled":
            raise StorageConfigurationError(
                f"bucket {self.bucket!r}: versioning is {versioning!r}, Object Lock requires 'Enabled'"
            )

    # -- ArchiveStorage ---------------------------------------------------------------------

    def create(self, key: str, data: bytes) -> str:
        from botocore.exceptions import ClientError

        s3_key = self._key(key)
        retain_until = dt.datetime.now(dt.UTC) + dt.timedelta(days=self.retention_days)
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                response = self.client.put_object(
                    Bucket=self.bucket,
                    Key=s3_key,
                    Body=data,
                    IfNoneMatch="*",  # create-only, evaluated by S3 itself
                    ObjectLockMode=self.mode,
                    ObjectLockRetainUntilDate=retain_until,
                    # S3 verifies the body against this checksum before storing it, and Object
                    # Lock puts require an integrity checksum anyway.
                    ChecksumAlgorithm="SHA256",
                )
            except ClientError as exc:
                code, status = _error_code(exc), _http_status(exc)
                if code == "ConditionalRequestConflict" or status == 409:
                    # Another upload of this key is in flight (real S3): let it finish.
                    time.sleep(0.05 * 2**attempt)
                    continue
                if code != "PreconditionFailed" and status != 412:
                    raise
            else:
                version = response.get("VersionId")
                if not version or version == "null":
                    raise StorageConfigurationError(
                        f"bucket {self.bucket!r} returned no VersionId: versioning/Object Lock is off"
                    )
                return str(version)
            # The key exists: an idempotent retry if the bytes are identical.
            try:
                existing = self.client.get_object(Bucket=self.bucket, Key=s3_key)
            except ClientError as exc:
                if _error_code(exc) in _NOT_FOUND:
                    continue  # hidden by a delete marker meanwhile: try again
                raise
            if existing["Body"].read() == data:
                return str(existing["VersionId"])
            raise ObjectExists(key)
        raise RuntimeError(f"could not create {key!r}: {_CREATE_ATTEMPTS} conflicting attempts")

    def read(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                raise ObjectMissing(key) from None
            raise
        return bytes(response["Body"].read())

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                return False
            raise
        return True

    def list(self, prefix: str) -> list[str]:
        validate_prefix(prefix)
        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket,
            Prefix=self.prefix + prefix,
            PaginationConfig={"PageSize": self.page_size},
        )
        strip = len(self.prefix)
        keys = [obj["Key"][strip:] for page in pages for obj in page.get("Contents", [])]
        return sorted(keys)

    # -- audit ------------------------------------------------------------------------------

    def retention(self, key: str, version_id: str | None = None) -> tuple[str, dt.datetime]:
        """(mode, retain-until) of a version (default: the current one): what an auditor checks.

        Asks GetObjectRetention; if the server cannot answer it (moto 5 does not implement it
        and returns the object instead: a 5xx, or an empty parse), falls back to the
        ``x-amz-object-lock-*`` headers of HeadObject, which S3 fills from the same metadata.
        """
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if version_id is not None:
            kwargs["VersionId"] = version_id
        try:
            try:
                retention = self.client.get_object_retention(**kwargs).get("Retention", {})
                if "Mode" in retention and "RetainUntilDate" in retention:
                    return str(retention["Mode"]), retention["RetainUntilDate"]
                # moto answers with the object itself: an XML lot even parses, to nothing.
            except ClientError as exc:
                if _http_status(exc) < 500:
                    raise
            head = self.client.head_object(**kwargs)
        except ClientError as exc:
            code = _error_code(exc)
            if code in _NOT_FOUND:
                raise ObjectMissing(key) from None
            if code in ("NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError"):
                raise StorageConfigurationError(f"object {key!r} has no Object Lock retention") from None
            raise
        if "ObjectLockMode" not in head:
            raise StorageConfigurationError(f"object {key!r} has no Object Lock retention")
        return str(head["ObjectLockMode"]), head["ObjectLockRetainUntilDate"]
