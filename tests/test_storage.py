"""Archive storage: create-only, atomic, durable; S3 Object Lock against a real (moto) S3 server.

moto's S3 server (5.2.x) does NOT enforce every Object Lock guarantee; these tests only assert
what it does enforce. Verified gaps (each tried against the server): it lets a COMPLIANCE
retention be shortened, downgraded to GOVERNANCE or removed (PutObjectRetention), and then
deletes the version; accepts a retain-until date in the past on PutObject; lets versioning be
suspended on an Object Lock bucket; does not verify Content-MD5 or x-amz-checksum-sha256; does
not implement GetObjectRetention (hence the HEAD fallback in ``retention``); keeps everything in
memory. Those guarantees must be checked against real S3.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coffre.adapters.storage import (
    ArchiveStorage,
    LocalStorage,
    ObjectExists,
    ObjectMissing,
    S3ObjectLockStorage,
    StorageConfigurationError,
)

REPO = Path(__file__).resolve().parents[1]
KEY = "0099/1/2026/11/22/0099-1-0000000001.xml"

BAD_KEYS = [
    "",
    "/etc/passwd",
    "..",
    "../x.xml",
    "0099/../../x.xml",
    "0099/..hidden",
    "a\\b.xml",
    "a//b.xml",
    "a/",
    "/a",
    "a/./b.xml",
    ".",
    "a b.xml",
    "é.xml",
    "a?b.xml",
    "a\x00b",
    "a/.tmp-123",
]


# -- LocalStorage -----------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path) -> LocalStorage:
    root = tmp_path / "archive"
    root.mkdir()
    return LocalStorage(root)


def test_local_is_an_archive_storage(local: LocalStorage) -> None:
    assert isinstance(local, ArchiveStorage)


def test_local_create_read_exists_list(local: LocalStorage) -> None:
    keys = [
        "0099/1/2026/11/22/0099-1-0000000002.xml",
        KEY,
        "0099/1/2026/11/23/0099-1-0000000003.xml",
        "0099/2/2026/11/22/0099-2-0000000001.xml",
    ]
    for key in keys:
        version = local.create(key, key.encode())
        assert version == hashlib.sha256(key.encode()).hexdigest()
    for key in keys:
        assert local.read(key) == key.encode()
        assert local.exists(key)
    assert local.list("") == sorted(keys)
    assert local.list("0099/1/") == sorted(keys[:3])
    assert local.list("0099/1/2026/11/22/") == sorted(keys[:2])
    assert local.list("0099/1/2026/11/2") == sorted(keys[:3])  # prefix ending mid-segment
    assert local.list("0099/1/2026/11/22/0099-1-000000000") == sorted(keys[:2])
    assert local.list("0099/3/") == []
    assert local.list("nothing") == []
    assert not local.exists("0099/1/2026/11/22/0099-1-0000000009.xml")
    with pytest.raises(ObjectMissing):
        local.read("0099/1/2026/11/22/0099-1-0000000009.xml")


def test_local_directory_is_not_an_object(local: LocalStorage) -> None:
    local.create(KEY, b"x")
    assert not local.exists("0099/1")
    with pytest.raises(ObjectMissing):
        local.read("0099/1")
    with pytest.raises(ObjectExists):
        local.create("0099/1", b"x")


def test_local_create_only(local: LocalStorage) -> None:
    first = local.create(KEY, b"<lot>1</lot>")
    assert local.create(KEY, b"<lot>1</lot>") == first  # idempotent retry
    with pytest.raises(ObjectExists) as excinfo:
        local.create(KEY, b"<lot>2</lot>")
    assert excinfo.value.key == KEY
    assert local.read(KEY) == b"<lot>1</lot>"
    assert local.list("") == [KEY]


def test_local_file_is_read_only_and_no_temporary_left(local: LocalStorage) -> None:
    local.create(KEY, b"data")
    path = local.root / KEY
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert path.stat().st_nlink == 1  # the temporary link is gone
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_local_create_order_is_durable(local: LocalStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """File fsynced before it gets its name; its directory and every new directory fsynced after."""
    import coffre.adapters.storage as storage

    events: list[str] = []
    real_fsync, real_link, real_fsync_dir = os.fsync, os.link, storage.fsync_directory

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        events.append("link")
        real_link(src, dst, **kwargs)

    synced_dirs: list[Path] = []

    def fsync_dir(path: Path) -> None:
        synced_dirs.append(Path(path))
        real_fsync_dir(path)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(storage, "fsync_directory", fsync_dir)
    local.create("a/b/c.xml", b"data")
    assert events.index("fsync-file") < events.index("link")
    assert events[-1] == "fsync-dir"  # the final directory, after the link
    root = local.root
    assert {root, root / "a", root / "a" / "b"} <= set(synced_dirs)
    assert synced_dirs[-1] == root / "a" / "b"


@pytest.mark.parametrize("key", BAD_KEYS)
def test_local_rejects_bad_keys(local: LocalStorage, key: str) -> None:
    with pytest.raises(ValueError):
        local.create(key, b"x")
    with pytest.raises(ValueError):
        local.read(key)
    with pytest.raises(ValueError):
        local.exists(key)
    assert not any(local.root.parent.rglob("x.xml"))


@pytest.mark.parametrize("prefix", ["/", "/etc", "../", "a/../", "a\\", "a//", "a b"])
def test_local_rejects_bad_prefixes(local: LocalStorage, prefix: str) -> None:
    with pytest.raises(ValueError):
        local.list(prefix)


def test_local_temporary_files_ignored_and_cleaned(local: LocalStorage) -> None:
    local.create(KEY, b"kept")
    directory = (local.root / KEY).parent
    (directory / ".tmp-abc123").write_bytes(b"half a lo")
    (local.root / ".tmp-top").write_bytes(b"")
    assert local.list("") == [KEY]
    assert local.list("0099/1/2026/11/22/") == [KEY]
    assert local.cleanup_temporary() == 2
    assert local.cleanup_temporary() == 0
    assert sorted(p.name for p in directory.iterdir()) == [Path(KEY).name]
    assert local.read(KEY) == b"kept"


def test_local_concurrent_writers_of_one_key(local: LocalStorage) -> None:
    """link(2) is the arbiter: exactly one writer wins, the others see ObjectExists."""
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        try:
            local.create(KEY, f"writer {i}".encode() * 1000)
            outcomes.append(f"won {i}")
        except ObjectExists:
            outcomes.append("lost")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o for o in outcomes if o.startswith("won")]
    assert len(winners) == 1 and outcomes.count("lost") == 7
    assert local.read(KEY) == f"writer {winners[0].split()[1]}".encode() * 1000
    assert local.list("") == [KEY]


# -- crash simulation -------------------------------------------------------------------------

# Shared by the child process and the test: what the child intends to write.
CRASH_HELPERS = """
import hashlib

def crash_key(i):
    return f"0099/1/2026/11/{i % 7:02d}/0099-1-{i:010d}.xml"

def crash_content(key):
    seed = hashlib.sha256(key.encode()).digest()
    size = 1_000 + int.from_bytes(seed[:2], "big") % 60_000
    return (seed * (size // 32 + 1))[:size]
"""
CHILD = (
    CRASH_HELPERS
    + """
import os, signal, sys
from pathlib import Path
from coffre.adapters.storage import LocalStorage

root, start, count, point = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
real_link = os.link
if point == "before-link":
    os.link = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
elif point == "after-link":
    def _link(*a, **k):
        real_link(*a, **k)
        os.kill(os.getpid(), signal.SIGKILL)
    os.link = _link
storage = LocalStorage(root)
for i in range(start, count):
    key = crash_key(i)
    storage.create(key, crash_content(key))
"""
)
_helpers: dict[str, Any] = {}
exec(CRASH_HELPERS, _helpers)
crash_key, crash_content = _helpers["crash_key"], _helpers["crash_content"]


def _spawn(root: Path, count: int, point: str = "", start: int = 0) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(start), str(count), point or "-"],
        env=env,
        stderr=subprocess.PIPE,
    )


def _assert_consistent(storage: LocalStorage, intended: set[str]) -> None:
    """Every final file is an intended object, complete and read-only; only temporaries besides."""
    for key in storage.list(""):
        assert key in intended, key
        assert storage.read(key) == crash_content(key), f"half-written or wrong object {key}"
        assert stat.S_IMODE((storage.root / key).stat().st_mode) == 0o444
    for path in storage.root.rglob("*"):
        if path.is_file() and not path.name.startswith(".tmp-"):
            assert path.relative_to(storage.root).as_posix() in intended


def _recover(storage: LocalStorage, intended: list[str]) -> None:
    storage.cleanup_temporary()
    assert not [p for p in storage.root.rglob(".tmp-*")]
    for key in intended:
        assert storage.create(key, crash_content(key)) == hashlib.sha256(crash_content(key)).hexdigest()
    assert storage.list("") == sorted(intended)
    _assert_consistent(storage, set(intended))


@pytest.mark.parametrize("point", ["before-link", "after-link"])
def test_local_killed_at_the_worst_moments(local: LocalStorage, point: str) -> None:
    """Deterministic crashes: a full temporary without a name, and a name with its temporary."""
    child = _spawn(local.root, 3, point)
    child.wait(timeout=20)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    intended = [crash_key(i) for i in range(3)]
    _assert_consistent(local, set(intended))
    assert local.list("") == ([intended[0]] if point == "after-link" else [])
    assert len(list(local.root.rglob(".tmp-*"))) == 1
    _recover(local, intended)


def test_local_survives_random_sigkills(local: LocalStorage) -> None:
    """A writer SIGKILLed at random moments, restarted a little before where it stopped
    (as the vault would, re-creating its last objects), never leaves a half-written lot."""
    count = 3000  # more than the child can write in the rounds below: every round is a kill
    intended = [crash_key(i) for i in range(count)]
    rng = random.Random(20261122)
    killed = 0
    for _ in range(12):
        start = max(0, len(local.list("")) - 5)
        child = _spawn(local.root, count, start=start)
        time.sleep(rng.uniform(0.1, 0.4))
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=20)
        if child.returncode == -signal.SIGKILL:
            killed += 1
        else:
            assert child.returncode == 0, child.stderr.read() if child.stderr else ""
        _assert_consistent(local, set(intended))
    assert killed >= 6, "the child finished before being killed: the test exercised nothing"
    _recover(local, intended)


# -- S3 Object Lock (moto server on 127.0.0.1) ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def s3(s3_client: Any) -> S3ObjectLockStorage:
    storage = S3ObjectLockStorage(f"coffre-{uuid.uuid4().hex[:12]}", prefix="lots", client=s3_client)
    storage.ensure_bucket()
    return storage


def test_s3_is_an_archive_storage(s3: S3ObjectLockStorage) -> None:
    assert isinstance(s3, ArchiveStorage)


def test_s3_ensure_bucket_creates_an_object_lock_bucket(s3_client: Any) -> None:
    bucket = f"coffre-{uuid.uuid4().hex[:12]}"
    storage = S3ObjectLockStorage(bucket, client=s3_client)
    storage.ensure_bucket()
    config = s3_client.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
    assert config["ObjectLockEnabled"] == "Enabled"
    assert s3_client.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    location = s3_client.get_bucket_location(Bucket=bucket)["LocationConstraint"]
    assert location == "eu-west-3"
    storage.ensure_bucket()  # idempotent on an existing, correct bucket


def test_s3_ensure_bucket_refuses_a_bucket_without_object_lock(s3_client: Any) -> None:
    from botocore.exceptions import ClientError

    bucket = f"plain-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "eu-west-3"})
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    storage = S3ObjectLockStorage(bucket, client=s3_client)
    with pytest.raises(StorageConfigurationError, match="Object Lock is not enabled"):
        storage.ensure_bucket()
    # And writing there anyway fails rather than silently storing unlocked lots.
    with pytest.raises(ClientError) as excinfo:
        storage.create(KEY, b"x")
    assert "lock" in str(excinfo.value).lower()
    assert not storage.exists(KEY)


def test_s3_create_read_exists_and_retention(s3: S3ObjectLockStorage, s3_client: Any) -> None:
    before = dt.datetime.now(dt.UTC)
    version = s3.create(KEY, b"<lot>1</lot>")
    assert isinstance(version, str) and version and version != "null"
    assert s3.read(KEY) == b"<lot>1</lot>"
    assert s3.exists(KEY)
    assert not s3.exists("0099/1/2026/11/22/0099-1-0000000009.xml")
    with pytest.raises(ObjectMissing):
        s3.read("0099/1/2026/11/22/0099-1-0000000009.xml")
    head = s3_client.head_object(Bucket=s3.bucket, Key=f"lots/{KEY}")
    assert head["VersionId"] == version

    mode, until = s3.retention(KEY)
    assert mode == "COMPLIANCE"
    expected = before + dt.timedelta(days=6 * 365 + 2)
    assert abs(until - expected) < dt.timedelta(hours=1)
    assert until > before + dt.timedelta(days=6 * 365)
    assert s3.retention(KEY, version_id=version) == (mode, until)
    with pytest.raises(ObjectMissing):
        s3.retention("0099/1/2026/11/22/0099-1-0000000009.xml")


def test_s3_create_only(s3: S3ObjectLockStorage, s3_client: Any) -> None:
    version = s3.create(KEY, b"<lot>1</lot>")
    assert s3.create(KEY, b"<lot>1</lot>") == version  # idempotent retry: same version
    with pytest.raises(ObjectExists):
        s3.create(KEY, b"<lot>2</lot>")
    assert s3.read(KEY) == b"<lot>1</lot>"
    versions = s3_client.list_object_versions(Bucket=s3.bucket, Prefix=f"lots/{KEY}")["Versions"]
    assert [v["VersionId"] for v in versions] == [version]  # nothing was overwritten


def test_s3_list_with_prefix_and_pagination(s3: S3ObjectLockStorage, s3_client: Any) -> None:
    keys = [f"0099/1/2026/11/{day}/0099-1-{i:010d}.xml" for day in (22, 23) for i in range(5)]
    keys.append("0100/1/2026/11/22/0100-1-0000000001.xml")
    for key in keys:
        s3.create(key, key.encode())
    # Something outside our prefix is not ours.
    s3_client.put_object(Bucket=s3.bucket, Key="other/x.xml", Body=b"x")

    calls: list[int] = []
    s3_client.meta.events.register("before-call.s3.ListObjectsV2", lambda **kwargs: calls.append(1))
    s3.page_size = 3
    assert s3.list("") == sorted(keys)
    assert len(calls) == 4  # 11 keys, 3 per page
    assert s3.list("0099/") == sorted(keys[:10])
    assert s3.list("0099/1/2026/11/23/") == sorted(keys[5:10])
    assert s3.list("0099/1/2026/11/2") == sorted(keys[:10])
    assert s3.list("0101/") == []
    with pytest.raises(ValueError):
        s3.list("../")


def test_s3_locked_version_cannot_be_deleted(s3: S3ObjectLockStorage, s3_client: Any) -> None:
    from botocore.exceptions import ClientError

    version = s3.create(KEY, b"<lot>1</lot>")
    s3_key = f"lots/{KEY}"
    with pytest.raises(ClientError) as excinfo:
        s3_client.delete_object(Bucket=s3.bucket, Key=s3_key, VersionId=version)
    assert excinfo.value.response["Error"]["Code"] == "AccessDenied"
    # COMPLIANCE: the governance bypass changes nothing.
    with pytest.raises(ClientError):
        s3_client.delete_object(
            Bucket=s3.bucket, Key=s3_key, VersionId=version, BypassGovernanceRetention=True
        )
    batch = s3_client.delete_objects(
        Bucket=s3.bucket, Delete={"Objects": [{"Key": s3_key, "VersionId": version}]}
    )
    assert [e["Code"] for e in batch.get("Errors", [])] == ["AccessDenied"]
    assert s3.read(KEY) == b"<lot>1</lot>"

    # A delete marker (no VersionId) is allowed by S3 even under Object Lock: it hides the key
    # but the locked version stays, intact and retrievable.
    s3_client.delete_object(Bucket=s3.bucket, Key=s3_key)
    assert not s3.exists(KEY)
    kept = s3_client.get_object(Bucket=s3.bucket, Key=s3_key, VersionId=version)["Body"].read()
    assert kept == b"<lot>1</lot>"


def test_s3_rejects_bad_keys(s3: S3ObjectLockStorage) -> None:
    for key in BAD_KEYS:
        with pytest.raises(ValueError):
            s3.create(key, b"x")
        with pytest.raises(ValueError):
            s3.read(key)
    assert s3.list("") == []


# -- S3 paths moto cannot exercise (botocore Stubber: no network) ------------------------------


@pytest.fixture
def stubbed() -> Iterator[tuple[S3ObjectLockStorage, Any]]:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "s3", region_name="eu-west-3", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stub:
        yield S3ObjectLockStorage("bucket", prefix="lots/", client=client), stub
        stub.assert_no_pending_responses()


def test_s3_retention_from_get_object_retention(stubbed: tuple[S3ObjectLockStorage, Any]) -> None:
    storage, stub = stubbed
    until = dt.datetime(2032, 11, 24, tzinfo=dt.UTC)
    stub.add_response(
        "get_object_retention",
        {"Retention": {"Mode": "COMPLIANCE", "RetainUntilDate": until}},
        {"Bucket": "bucket", "Key": f"lots/{KEY}"},
    )
    assert storage.retention(KEY) == ("COMPLIANCE", until)


def test_s3_create_waits_out_a_conflicting_upload(stubbed: tuple[S3ObjectLockStorage, Any]) -> None:
    storage, stub = stubbed
    stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_response("put_object", {"VersionId": "v2"})
    assert storage.create(KEY, b"x") == "v2"


def test_s3_create_refuses_an_unversioned_answer(stubbed: tuple[S3ObjectLockStorage, Any]) -> None:
    storage, stub = stubbed
    stub.add_response("put_object", {"VersionId": "null"})
    with pytest.raises(StorageConfigurationError):
        storage.create(KEY, b"x")
