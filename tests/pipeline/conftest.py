"""Fixtures for tests against a real Kafka broker.

``kafka_bootstrap`` (session-scoped) picks the broker in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set: a broker someone already runs (nothing is started or
   stopped here);
2. Apache Kafka, the broker users run: ``coffre up``'s own (one KRaft node from the pinned release's
   jars, :class:`coffre.adapters.apache_kafka.LocalKafka`) on free ports of 127.0.0.1, stopped at the
   end of the session (its log kept in pytest's temporary directory for a failed run); where no JVM
   runs, testcontainers' Kafka when a Docker daemon answers, else a skip (a failure under CI).

The memory-only embedded broker (Tansu) serves only the tests of ``coffre up``'s fallback to it
(``tansu_bootstrap``). ``topic_prefix`` gives each test its own topic names, so tests never share a
topic (the broker is shared by the whole session).

The brokers these fixtures start hold only the tests' throwaway topics: at the end they get SIGTERM
and :data:`TEARDOWN_GRACE` seconds before SIGKILL, not a controlled shutdown's (three nodes stopping
at once wait for a quorum that is leaving: 6-7 s).
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator

import pytest

from coffre.adapters.broker import EmbeddedBroker
from coffre.commands.stack import Stack

from pipeline.stack_settings import stack_settings

TEARDOWN_GRACE = 1.0
"""Seconds a test broker gets after SIGTERM at the end, before SIGKILL."""


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _kafka_container():  # pragma: no cover - needs a Docker daemon
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from testcontainers.kafka import KafkaContainer
    return KafkaContainer()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        yield configured
        return
    if not _java_runs() and _docker_answers():  # pragma: no cover - the project's machines have a JVM
        container = _kafka_container()
        container.start()
        try:
            yield container.get_bootstrap_server()
        finally:
            container.stop()
        return
    from apache_kafka import single_broker

    broker = single_broker(tmp_path_factory.mktemp("apache-kafka"))
    try:
        yield broker.bootstrap
    finally:
        broker.stop(TEARDOWN_GRACE)


def _java_runs() -> bool:
    import shutil

    return bool(shutil.which("java"))


@pytest.fixture(scope="session")
def tansu_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The memory-only embedded broker, for the tests of ``coffre up``'s fallback to it."""
    broker = EmbeddedBroker(log_path=tmp_path_factory.mktemp("tansu") / "tansu.log")
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def topic_prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}."


@pytest.fixture
def stack(kafka_bootstrap, topic_prefix, tmp_path):
    """The three services as child processes on the session broker, with their own topics and data."""
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        max_event_bytes=64 * 1024,
    )
    running = Stack(settings, bootstrap=kafka_bootstrap)
    running.start()
    yield running
    codes = running.stop()
    assert all(code == 0 for code in codes.values()), (
        f"services did not stop cleanly: {codes} (logs in {tmp_path}/logs)"
    )


@pytest.fixture(scope="session")
def apache_kafka_secured(tmp_path_factory: pytest.TempPathFactory):
    """One Apache Kafka broker, secured (``tests/apache_kafka.py``): SASL_SSL with SCRAM-SHA-512 and
    mutual TLS, ACLs enforced; every coffre principal, ``coffre-platform`` and ``admin`` have a
    password and a client certificate. Skipped without a JVM and Maven (failed under CI)."""
    from apache_kafka import PLATFORM, SERVICE_PRINCIPALS, require_java, secured_broker

    require_java()
    kafka = secured_broker(
        tmp_path_factory.mktemp("apache-kafka-secured"), [*SERVICE_PRINCIPALS.values(), PLATFORM]
    )
    try:
        yield kafka
    finally:
        kafka.stop(TEARDOWN_GRACE)


@pytest.fixture(scope="session")
def apache_kafka_cluster(tmp_path_factory: pytest.TempPathFactory):
    """Three Apache Kafka brokers (each a KRaft controller too), plaintext, replication factor 3,
    ``min.insync.replicas`` 2. Skipped without a JVM and Maven (failed under CI)."""
    from apache_kafka import cluster, require_java

    require_java()
    kafka = cluster(tmp_path_factory.mktemp("apache-kafka-cluster"))
    try:
        yield kafka
    finally:
        kafka.stop(TEARDOWN_GRACE)
