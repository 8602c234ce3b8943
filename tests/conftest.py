"""Shared fixtures. The regulator's reference set is read from ``$COFFRE_ARJEL_REFERENCE``
or ``../shared/arjel-reference``; tests that need it skip cleanly when it is absent."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from coffre.domain.codec import canonical_bytes, split_documents
from coffre.domain.normalize import normalize
from coffre.domain.schema import SchemaSet, default_reference_dir

# CI runs the property tests derandomized (the same examples every run: a red CI is a
# real regression, never luck); locally they explore anew each run. HYPOTHESIS_PROFILE=deep
# explores 20 times more.
settings.register_profile("dev", max_examples=250, deadline=None)
settings.register_profile("ci", max_examples=250, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

REFERENCE = default_reference_dir()


def reference_or_skip() -> Path:
    if not (REFERENCE / "xsd" / "PO.xsd").is_file():
        pytest.skip(f"the regulator's reference set is not at {REFERENCE} (set COFFRE_ARJEL_REFERENCE)")
    return REFERENCE


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return reference_or_skip()


@pytest.fixture(scope="session")
def schema_set(reference_dir: Path) -> SchemaSet:
    return SchemaSet(reference_dir / "xsd")


def sample_files(family: str) -> list[Path]:
    """The regulator's sample files of one family (empty when the reference set is absent)."""
    folder = REFERENCE / "samples" / family
    return sorted(folder.glob("*.xml")) if folder.is_dir() else []


def sample_params(family: str) -> list:
    files = sample_files(family)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {family} samples at {REFERENCE}"))]
    return [pytest.param(f, id=f.name) for f in files]


def assert_sample_normalizes(path: Path, schema_set: SchemaSet) -> list:
    """Every event of a sample file normalizes and its canonical bytes validate against the schema."""
    events = []
    for raw in split_documents(path.read_bytes()):
        event = normalize(raw)
        data = canonical_bytes(event)
        assert schema_set.errors(event.family, data) == [], data.decode()
        events.append(event)
    assert events
    return events


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 server (moto's) on loopback, for the Object Lock backend."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_client(s3_endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="eu-west-3",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        # No retries: a local server either answers or the test should fail fast.
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
