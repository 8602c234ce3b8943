"""Shared fixtures. The regulator's reference set is read from ``$COFFRE_ARJEL_REFERENCE``
or ``../shared/arjel-reference``; tests that need it skip cleanly when it is absent.

Tests of coffre's behaviour start from coffre's own events (``events.py``, ``tests/fixtures``)
and run without it; where they also validate their output against the regulator's XSDs, they
take ``optional_schema_set`` and do so only when the schemas are at hand. Only the cross-checks
of the regulator's own files (its samples, its schemas' declarations) need ``reference_dir``,
``schema_set`` or ``sample_params`` and skip without them."""

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

from events import fixture_inputs

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


def reference_present() -> bool:
    return (REFERENCE / "xsd" / "PO.xsd").is_file()


@pytest.fixture(scope="session")
def optional_schema_set() -> SchemaSet | None:
    """The regulator's schemas when they are at hand, else None (the XSD cross-check is then left out)."""
    return SchemaSet(REFERENCE / "xsd") if reference_present() else None


def assert_schema_valid(schemas: SchemaSet | None, family: str, data: bytes) -> None:
    """Cross-check: ``data`` validates against the regulator's XSD of ``family``, when present."""
    if schemas is not None:
        assert schemas.errors(family, data) == [], data.decode()


def sample_files(family: str) -> list[Path]:
    """The regulator's sample files of one family (empty when the reference set is absent)."""
    folder = REFERENCE / "samples" / family
    return sorted(folder.glob("*.xml")) if folder.is_dir() else []


def sample_params(family: str) -> list:
    files = sample_files(family)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {family} samples at {REFERENCE}"))]
    return [pytest.param(f, id=f.name) for f in files]


def own_and_sample_params(*families: str, xml_only: bool = False) -> list:
    """coffre's fixture inputs of ``families``, then the regulator's samples when present (no skip
    when they are not: the fixtures alone carry the test)."""
    own = [
        pytest.param(p, id=f"own-{p.parent.name}-{p.name}")
        for family in families
        for p in fixture_inputs(family, xml_only=xml_only)
    ]
    samples = [
        pytest.param(p, id=f"sample-{family}-{p.name}") for family in families for p in sample_files(family)
    ]
    return own + samples


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server (tests/postgres.py) for the session, stopped at its end (and killed
    with the test process); a skip that says how to get PostgreSQL where it is missing (a failure
    under CI)."""
    from postgres import LocalPostgres, require_postgresql

    server = LocalPostgres(require_postgresql()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def index_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Where a test's console indexes go, on each backend in turn: ``index_at("name")`` is an SQLite
    file of ``tmp_path``, or the URL of a new database of the session's PostgreSQL server (dropped
    after the test). ``index_at.backend`` says which."""
    made: list[str] = []
    server = request.getfixturevalue("postgres_server") if request.param == "postgresql" else None

    def at(name: str = "index") -> Path | str:
        if server is None:
            return tmp_path / f"{name}.sqlite"
        made.append(server.create_database(name.replace("-", "_")))
        return made[-1]

    at.backend = request.param  # type: ignore[attr-defined]
    yield at
    for url in made:
        server.drop_database(url)
