"""Fixtures for tests against a real Kafka broker.

``kafka_bootstrap`` (one for the package's tests) picks the broker in this order:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set: a broker someone already runs (nothing is started or
   stopped here);
2. Apache Kafka, the broker users run: ``coffre up``'s own (one KRaft node from the pinned release's
   jars, :class:`coffre.adapters.apache_kafka.LocalKafka`) on free ports of 127.0.0.1, stopped after
   the package's last test (its log kept in pytest's temporary directory for a failed run); where no JVM
   runs, testcontainers' Kafka when a Docker daemon answers, else a skip (a failure under CI).

The memory-only embedded broker (Tansu) serves only the tests of ``coffre up``'s fallback to it
(``tansu_bootstrap``). ``topic_prefix`` gives each test its own topic names, so tests never share a
topic (the broker is shared by the package's tests).

The brokers these fixtures start hold only the tests' throwaway topics: at the end they get SIGTERM
and :data:`TEARDOWN_GRACE` seconds before SIGKILL, not a controlled shutdown's (three nodes stopping
at once wait for a quorum that is leaving: 6-7 s). They are package-scoped, not session-scoped: the
tests after tests/pipeline do not run beside idle JVMs (each takes 2-3 % of a core doing nothing).
The secured broker and the three-node cluster stop even sooner, right after the last collected test
that uses them (:data:`STOP_AFTER_LAST_USER`): the cluster's users are test_apache_kafka.py and
test_stale_leader.py, and the package's other tests run between them.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Callable, Iterator

import pytest

from coffre.adapters.broker import EmbeddedBroker
from coffre.commands.stack import Stack

from pipeline.stack_settings import stack_settings

TEARDOWN_GRACE = 1.0
"""Seconds a test broker gets after SIGTERM at the end, before SIGKILL."""
STOP_AFTER_LAST_USER = ("apache_kafka_secured", "apache_kafka_cluster")
"""Fixtures stopped right after the teardown of the last collected test that uses them (their own
teardown, at the package's end, then finds them stopped)."""
_last_user: dict[str, str] = {}
"""Fixture name -> node id of the last selected test that uses it."""
_stops: dict[str, Callable[[], None]] = {}
"""Fixture name -> how to stop what it started, once started."""


@pytest.hookimpl(trylast=True)  # after -k / -m deselected what they deselect
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in STOP_AFTER_LAST_USER:
            if name in getattr(item, "fixturenames", ()):
                _last_user[name] = item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        for name, nodeid in _last_user.items():
            if nodeid == item.nodeid and name in _stops:
                _stops.pop(name)()


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


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
def apache_kafka_secured(tmp_path_factory: pytest.TempPathFactory):
    """One Apache Kafka broker, secured (``tests/apache_kafka.py``): SASL_SSL with SCRAM-SHA-512 and
    mutual TLS, ACLs enforced; every coffre principal, ``coffre-platform`` and ``admin`` have a
    password and a client certificate. Skipped without a JVM and Maven (failed under CI)."""
    from apache_kafka import PLATFORM, SERVICE_PRINCIPALS, require_java, secured_broker

    require_java()
    kafka = secured_broker(
        tmp_path_factory.mktemp("apache-kafka-secured"), [*SERVICE_PRINCIPALS.values(), PLATFORM]
    )
    _stops["apache_kafka_secured"] = lambda: kafka.stop(TEARDOWN_GRACE)
    try:
        yield kafka
    finally:
        _stops.pop("apache_kafka_secured", lambda: None)()


@pytest.fixture(scope="package")
def apache_kafka_cluster(tmp_path_factory: pytest.TempPathFactory):
    """Three Apache Kafka brokers (each a KRaft controller too), plaintext, replication factor 3,
    ``min.insync.replicas`` 2. Skipped without a JVM and Maven (failed under CI)."""
    from apache_kafka import cluster, require_java

    require_java()
    kafka = cluster(tmp_path_factory.mktemp("apache-kafka-cluster"))
    _stops["apache_kafka_cluster"] = lambda: kafka.stop(TEARDOWN_GRACE)
    try:
        yield kafka
    finally:
        _stops.pop("apache_kafka_cluster", lambda: None)()
