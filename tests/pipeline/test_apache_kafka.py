"""coffre on Apache Kafka itself (issue 19, point 3): what the embedded broker cannot show.

* On one secured broker (SASL_SSL with SCRAM-SHA-512, mutual TLS, the ``StandardAuthorizer``, no ACL
  meaning no access): the whole pipeline, each service its own principal with least-privilege ACLs
  (the vault over mutual TLS, the others over SCRAM), a librdkafka platform with its own; clients
  and services with a wrong or missing credential, without TLS, or writing a topic they may not, refused
  with a clear error, the services at their start with exit 2.
* On three brokers (replication factor 3, ``min.insync.replicas`` 2): the pipeline under load while
  a broker is SIGKILLed (and started again), then another SIGSTOPped past its session and resumed:
  every event acknowledged, each once in the archive, IDEvt 1..n per coffre.

The brokers are fetched and run by ``tests/apache_kafka.py``; these tests skip without a JVM and
Maven, except under CI. Select them with ``pytest -m apache_kafka``.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError
from coffre_vault.history import recorded_events
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from coffre.adapters.archive import signing_files
from coffre.adapters.kafka_security import check_kafka_access, client_options
from coffre.adapters.storage import LocalStorage
from coffre.adapters.stream import ensure_coffre_topics
from coffre.commands.stack import Stack
from coffre.commands.verify import verify_archive
from coffre.config import Settings
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.messages import CORRELATION_ID, Acquittal

from apache_kafka import (
    PLATFORM,
    SERVICE_PRINCIPALS,
    SUPER_USER,
    SecuredKafka,
    TlsMaterial,
    coffre_acls,
    create_acls,
    wait_until_granted,
)
from events import POINSCRIT
from pipeline.acquittals import read_acquittals
from pipeline.stack_settings import stack_settings

pytestmark = pytest.mark.apache_kafka


def event(n: int, coffre: int = 7) -> bytes:
    return POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode()).replace(
        b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>ak-{n}</IDJoueur>".encode()
    )


def sasl_env(kafka: SecuredKafka, principal: str, password_file: Path | None = None) -> dict[str, str | None]:
    """A service's environment as ``principal`` over SASL_SSL (the password inline, or in a file)."""
    env: dict[str, str | None] = {
        "COFFRE_BOOTSTRAP_SERVERS": kafka.sasl_bootstrap,
        "COFFRE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "COFFRE_KAFKA_SSL_CA_FILE": str(kafka.tls.ca),
        "COFFRE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "COFFRE_KAFKA_SASL_USERNAME": principal,
        "COFFRE_KAFKA_SASL_PASSWORD": kafka.passwords[principal],
        "COFFRE_KAFKA_SASL_PASSWORD_FILE": None,
    }
    if password_file is not None:
        password_file.write_text(kafka.passwords[principal] + "\n")
        env.update(COFFRE_KAFKA_SASL_PASSWORD=None, COFFRE_KAFKA_SASL_PASSWORD_FILE=str(password_file))
    return env


def mtls_env(kafka: SecuredKafka, principal: str) -> dict[str, str | None]:
    """A service's environment as ``principal`` over mutual TLS (its certificate's CN)."""
    return {
        "COFFRE_BOOTSTRAP_SERVERS": kafka.ssl_bootstrap,
        "COFFRE_KAFKA_SECURITY_PROTOCOL": "SSL",
        "COFFRE_KAFKA_SSL_CA_FILE": str(kafka.tls.ca),
        "COFFRE_KAFKA_SSL_CERT_FILE": str(kafka.tls.cert(principal)),
        "COFFRE_KAFKA_SSL_KEY_FILE": str(kafka.tls.key(principal)),
        "COFFRE_KAFKA_SASL_MECHANISM": None,
        "COFFRE_KAFKA_SASL_USERNAME": None,
        "COFFRE_KAFKA_SASL_PASSWORD": None,
        "COFFRE_KAFKA_SASL_PASSWORD_FILE": None,
    }


@pytest.fixture
def secured_coffre(apache_kafka_secured: SecuredKafka, topic_prefix: str, tmp_path: Path) -> Settings:
    """This test's topics, created by the admin (coffre's principals may not), and the ACLs of every
    principal on them; the stack's settings as the admin, topics only checked."""
    kafka = apache_kafka_secured
    admin = stack_settings(
        kafka.sasl_bootstrap,
        topic_prefix,
        tmp_path,
        kafka_security_protocol="SASL_SSL",
        kafka_ssl_ca_file=kafka.tls.ca,
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username=SUPER_USER,
        kafka_sasl_password=kafka.passwords[SUPER_USER],
        lot_max_events=10,
        # Apache Kafka refuses a session under its group.min.session.timeout.ms (6 s by default):
        # ingest's default (3 s) cannot join a group on a default broker
        ingest_session_seconds=6,
    )
    asyncio.run(ensure_coffre_topics(admin))
    create_acls(kafka.librdkafka_sasl(SUPER_USER), coffre_acls(topic_prefix))
    for principal in (*SERVICE_PRINCIPALS.values(), PLATFORM):
        wait_until_granted(
            kafka, principal, admin.topics.events_in if principal == PLATFORM else admin.topics.receipts
        )
    return admin.model_copy(update={"kafka_create_topics": False})


def secured_stack(kafka: SecuredKafka, settings: Settings, tmp_path: Path) -> Stack:
    return Stack(
        settings,
        bootstrap=kafka.sasl_bootstrap,
        service_env={
            "ingest": sasl_env(kafka, "coffre-ingest"),
            "vault": mtls_env(kafka, "coffre-vault"),
            "acquittal": sasl_env(kafka, "coffre-acquittal", password_file=tmp_path / "acquittal.password"),
        },
    )


def platform_round(
    config: dict[str, str], settings: Settings, events: list[bytes], timeout: float = 90.0
) -> dict[str, Acquittal]:
    """A librdkafka platform publishes ``events`` and reads their acquittals (by correlation id)."""
    failures: list[str] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    consumer = Consumer({**config, "group.id": "platform-e2e", "enable.auto.commit": False})
    consumer.assign(
        [TopicPartition(settings.topics.acquittals, p, OFFSET_BEGINNING) for p in range(settings.partitions)]
    )
    producer = Producer({**config, "linger.ms": 5, "enable.idempotence": True})
    for n, raw in enumerate(events):
        producer.produce(
            settings.topics.events_in,
            raw,
            key=f"e2e-{n}".encode(),
            headers=[(CORRELATION_ID, f"e2e-{n}".encode())],
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0 and not failures, failures
    answered: dict[str, Acquittal] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(answered) < len(events) and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is None or record.error() is not None:
                continue
            acquittal = Acquittal.decode(record.value())
            answered.setdefault(acquittal.correlation_id or "", acquittal)
    finally:
        consumer.close()
    return answered


EVENTS_E2E = 40


def test_the_pipeline_with_a_principal_per_service(apache_kafka_secured, secured_coffre, tmp_path):
    kafka, settings = apache_kafka_secured, secured_coffre
    stack = secured_stack(kafka, settings, tmp_path)
    stack.start()
    try:
        answered = platform_round(
            kafka.librdkafka_sasl(PLATFORM), settings, [event(n) for n in range(EVENTS_E2E)]
        )
    finally:
        codes = stack.stop()
    assert len(answered) == EVENTS_E2E, (
        f"{len(answered)} acquittals of {EVENTS_E2E} (logs in {tmp_path}/logs)"
    )
    assert {a.status for a in answered.values()} == {"recorded"}
    assert sorted(a.id_evt for a in answered.values()) == list(range(1, EVENTS_E2E + 1))
    assert codes == {"ingest": 0, "vault": 0, "acquittal": 0}, f"logs in {tmp_path}/logs"

    records = {
        r.id_evt: r
        for r in recorded_events(LocalStorage(settings.archive_root), settings.journal_root, "0099", 7)
    }
    assert sorted(records) == list(range(1, EVENTS_E2E + 1))
    for a in answered.values():  # each acquittal names its record, with its chain hash
        record = records[a.id_evt]
        assert record.chain_hash.hex() == a.chain_hash
        assert f"<IDJoueur>ak-{a.correlation_id[4:]}</IDJoueur>".encode() in record.event
    _, cert = signing_files(settings)
    report = verify_archive(settings.archive_root, [cert])
    assert report.ok, report.lines()
    assert [c.events for c in report.coffres] == [EVENTS_E2E]


def test_a_platform_using_coffre_client_takes_its_principal_from_the_environment(
    apache_kafka_secured, secured_coffre, tmp_path, monkeypatch
):
    """A platform's process with only the ``COFFRE_*`` variables set (SASL_SSL, SCRAM as
    ``coffre-platform``, the brokers' CA, the topic prefix) and ``CoffreClient(bootstrap)``: it publishes
    and gets its acquittal, through the docs' ACLs. The client took no TLS or SASL from the environment
    before (it spoke plaintext to the TLS listener and never started)."""
    from coffre.client import CoffreClient

    kafka, settings = apache_kafka_secured, secured_coffre
    stack = secured_stack(kafka, settings, tmp_path)
    stack.start()
    try:
        for name, value in {
            **sasl_env(kafka, PLATFORM),
            "COFFRE_TOPIC_PREFIX": settings.topic_prefix,
        }.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        monkeypatch.delenv("COFFRE_KAFKA_SSL_CERT_FILE", raising=False)

        async def platform() -> list:
            async with CoffreClient(kafka.sasl_bootstrap) as client:
                assert client.security["sasl_plain_username"] == PLATFORM
                return [await client.submit(event(n), timeout=60) for n in range(2)]

        outcomes = asyncio.run(platform())
    finally:
        codes = stack.stop()
    assert [o.status for o in outcomes] == ["recorded", "recorded"], outcomes
    assert [o.acquittal.id_evt for o in outcomes] == [1, 2]
    assert all(o.acquittal.chain_hash for o in outcomes)
    assert codes == {"ingest": 0, "vault": 0, "acquittal": 0}, f"logs in {tmp_path}/logs"


def _refusal(settings: Settings, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        asyncio.run(check_kafka_access(settings, timeout=5))
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_clients_without_the_right_credentials_are_refused_clearly(
    apache_kafka_secured, secured_coffre, capsys
):
    kafka, admin = apache_kafka_secured, secured_coffre
    platform = {
        "kafka_sasl_username": PLATFORM,
        "kafka_sasl_password": kafka.passwords[PLATFORM],
    }
    plain = {
        "kafka_security_protocol": "PLAINTEXT",
        "kafka_ssl_ca_file": None,
        "kafka_sasl_mechanism": None,
        "kafka_sasl_username": "",
        "kafka_sasl_password": "",
    }

    def settings(**changes) -> Settings:
        return Settings(**{**admin.model_dump(), **platform, **changes})

    assert asyncio.run(check_kafka_access(settings(), timeout=5)) is None  # the right ones pass
    # no credentials, no TLS: a plaintext client on the TLS listeners
    assert "speaks TLS" in _refusal(settings(**plain), capsys)
    assert "speaks TLS" in _refusal(settings(**plain, bootstrap_servers=kafka.ssl_bootstrap), capsys)
    # TLS without SASL on the SCRAM listener; TLS without a certificate on the mutual-TLS listener
    no_sasl = {**plain, "kafka_security_protocol": "SSL", "kafka_ssl_ca_file": kafka.tls.ca}
    assert "requires SASL" in _refusal(settings(**no_sasl), capsys)
    assert "requires a client certificate" in _refusal(
        settings(**no_sasl, bootstrap_servers=kafka.ssl_bootstrap), capsys
    )
    # a wrong password; a broker certificate not trusted
    wrong = _refusal(settings(kafka_sasl_password="not-the-password"), capsys)
    assert f"authentication as '{PLATFORM}' refused" in wrong and "invalid credentials" in wrong
    assert "not trusted" in _refusal(settings(kafka_ssl_ca_file=None), capsys)

    # librdkafka, the platform's client, says so in its own words for a wrong password (plaintext to
    # a TLS listener it reports only as "brokers are down", and logs the hint about security.protocol)
    for config, words in (
        ({**kafka.librdkafka_sasl(PLATFORM), "sasl.password": "not-the-password"}, "invalid credentials"),
        ({"bootstrap.servers": kafka.sasl_bootstrap}, "brokers are down"),
    ):
        errors: list[str] = []
        client = Producer(
            {**config, "log_level": 0, "error_cb": lambda e, errors=errors: errors.append(str(e))}
        )
        deadline = time.monotonic() + 10
        while not any(words in e for e in errors) and time.monotonic() < deadline:
            client.poll(0.2)  # serves error_cb
        assert any(words in e for e in errors), errors
        with pytest.raises(KafkaException):
            client.list_topics(timeout=1)
        del client


def test_a_principal_cannot_write_a_topic_its_acls_forbid(apache_kafka_secured, secured_coffre):
    kafka, admin = apache_kafka_secured, secured_coffre
    topics = admin.topics
    # the platform forges an acquittal, a normalized event, a receipt: refused by the broker
    for topic in (topics.acquittals, topics.normalized, topics.receipts):
        failures: list[str] = []
        producer = Producer({**kafka.librdkafka_sasl(PLATFORM), "message.timeout.ms": 10_000})
        producer.produce(topic, b"forged", on_delivery=lambda err, _m, f=failures: f.append(str(err)))
        producer.flush(15)
        assert failures and "TOPIC_AUTHORIZATION_FAILED" in failures[0], (topic, failures)

    # coffre's own client, as ingest: it may write the normalized events, never a receipt
    ingest = admin.model_copy(
        update={
            "kafka_sasl_username": "coffre-ingest",
            "kafka_sasl_password": kafka.passwords["coffre-ingest"],
        }
    )
    ingest = Settings(**ingest.model_dump())

    async def write(topic: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka.sasl_bootstrap, **client_options(ingest))
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"x")
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(write(topics.receipts))


def test_a_service_with_a_wrong_credential_or_no_tls_exits_2_at_start(
    apache_kafka_secured, secured_coffre, tmp_path
):
    kafka, settings = apache_kafka_secured, secured_coffre
    stack = secured_stack(kafka, settings, tmp_path)
    cases = {
        "ingest": (
            {"COFFRE_KAFKA_SASL_PASSWORD": "not-the-password"},
            "authentication as 'coffre-ingest' refused",
        ),
        "vault": (
            {"COFFRE_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT", "COFFRE_KAFKA_SSL_CA_FILE": None}
            | dict.fromkeys(("COFFRE_KAFKA_SSL_CERT_FILE", "COFFRE_KAFKA_SSL_KEY_FILE")),
            "speaks TLS",
        ),
        "acquittal": ({"COFFRE_KAFKA_SSL_CA_FILE": None}, "not trusted"),
    }
    for service, (changes, words) in cases.items():
        stack.service_env[service] = {**stack.service_env[service], **changes}
        (tmp_path / "logs").mkdir(exist_ok=True)
        line, took = refused_at_start(stack, service)  # exit 2, one line, no traceback
        assert words in line, (service, line)
        assert took < 30, f"{service} took {took:.0f} s to give up"


def test_a_client_certificate_the_broker_does_not_trust_stops_a_service_at_once_with_exit_2(
    apache_kafka_secured, topic_prefix, tmp_path
):
    """Mutual TLS with a client certificate of another CA (the broker's certificate trusted): with TLS 1.3
    the broker refuses it after the handshake and the client sees a closed connection; every service
    retried for about 20 s and stopped with a traceback. Now: exit 2 within seconds, one line naming
    COFFRE_KAFKA_SSL_CERT_FILE and the broker's refusal."""
    kafka = apache_kafka_secured
    rogue = TlsMaterial(tmp_path / "another-ca", clients=tuple(SERVICE_PRINCIPALS.values()))
    settings = stack_settings(kafka.ssl_bootstrap, topic_prefix, tmp_path)
    stack = Stack(
        settings,
        bootstrap=kafka.ssl_bootstrap,
        service_env={
            service: {
                **mtls_env(kafka, principal),
                "COFFRE_KAFKA_SSL_CERT_FILE": str(rogue.cert(principal)),
                "COFFRE_KAFKA_SSL_KEY_FILE": str(rogue.key(principal)),
            }
            for service, principal in SERVICE_PRINCIPALS.items()
        },
    )
    for service, principal in SERVICE_PRINCIPALS.items():
        line, took = refused_at_start(stack, service)
        assert "the broker refuses the client certificate of COFFRE_KAFKA_SSL_CERT_FILE" in line, line
        assert str(rogue.cert(principal)) in line and "certificate unknown" in line, line
        assert took < 15, f"{service} took {took:.0f} s to give up"


def refused_at_start(stack: Stack, service: str) -> tuple[str, float]:
    """Run ``service`` with the stack's environment for it: it must stop with exit 2 and one
    ``coffre: …`` line, never a traceback; that line, and the seconds it took."""
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "coffre.cli", service],
        env=stack.env(service),
        capture_output=True,
        text=True,
        timeout=90,
    )
    took = time.monotonic() - started
    output = run.stdout + run.stderr
    assert run.returncode == 2, (service, run.returncode, output[-3000:])
    (line,) = [entry for entry in run.stderr.splitlines() if entry.startswith("coffre: ")]
    assert "Traceback" not in output, (service, output[-3000:])
    return line, took


def test_a_service_that_may_not_create_absent_topics_exits_2_saying_so(
    apache_kafka_secured, topic_prefix, tmp_path
):
    """The docs' ACLs (no Create right), ``COFFRE_KAFKA_CREATE_TOPICS`` left at true and the topics not
    created yet: each service stops at once with exit 2 and one line saying its principal may not create
    topics and what to do, never a traceback (ingest exited 70, the others 1)."""
    from confluent_kafka.admin import AdminClient

    kafka = apache_kafka_secured
    create_acls(kafka.librdkafka_sasl(SUPER_USER), coffre_acls(topic_prefix))
    settings = stack_settings(
        kafka.sasl_bootstrap,
        topic_prefix,
        tmp_path,
        kafka_security_protocol="SASL_SSL",
        kafka_ssl_ca_file=kafka.tls.ca,
        kafka_sasl_mechanism="SCRAM-SHA-512",
        kafka_sasl_username=SUPER_USER,
        kafka_sasl_password=kafka.passwords[SUPER_USER],
        ingest_session_seconds=6,
    )
    assert settings.kafka_create_topics
    stack = secured_stack(kafka, settings, tmp_path)
    stack.service_env["auditor"] = sasl_env(kafka, "coffre-auditor")
    principals = {
        "ingest": "'coffre-ingest'",
        "vault": "'CN=coffre-vault,O=coffre tests'",  # mutual TLS: its certificate's subject
        "acquittal": "'coffre-acquittal'",
        "auditor": "'coffre-auditor'",
    }
    for service, principal in principals.items():
        line, took = refused_at_start(stack, service)
        assert f"principal {principal}" in line and "may not create topics" in line, (service, line)
        assert "TOPIC_AUTHORIZATION_FAILED" in line and "set COFFRE_KAFKA_CREATE_TOPICS=false" in line, line
        assert took < 30, f"{service} took {took:.0f} s to give up"
    listed = AdminClient(kafka.librdkafka_sasl(SUPER_USER)).list_topics(timeout=10).topics
    assert not [t for t in listed if t.startswith(topic_prefix)], "a topic was created"


# ------------------------------------------------------------------------------- three brokers

CLUSTER_RATE = 100  # events/s, until the failures are over (at most CLUSTER_SECONDS)
CLUSTER_SECONDS = 360
RESUME_LIMIT = 150.0
"""Seconds within which every coffre's acquittals must resume after a broker is killed, paused or resumed.
Measured here: 4-9 s after a SIGKILL (the connection is refused at once), 17-21 s after a SIGSTOP (the
broker accepts connections and answers nothing: each request and metadata refresh that meets it waits
out coffre's 5 s request timeout, the platform's too, before the client settles on the new leaders;
61-91 s with 15 s), 1-4 s after the SIGCONT."""
COFFRES = (31, 32, 33, 34, 35)


class Platform:
    """Publishes at CLUSTER_RATE (idempotent librdkafka producer, acks=all) and reads the acquittals."""

    def __init__(self, bootstrap: str, settings: Settings):
        # a platform tuned to route around a silent broker as coffre is (librdkafka waits 60 s by default)
        self.config = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000}
        self.settings = settings
        self.sent: dict[str, float] = {}
        self.answered: dict[str, tuple[float, Acquittal]] = {}
        self.failures: list[str] = []
        self.enough = threading.Event()
        self.stop = threading.Event()
        self.done = threading.Event()

    def publish(self) -> None:
        producer = Producer({**self.config, "linger.ms": 2, "enable.idempotence": True})
        start, n = time.monotonic(), 0
        while not self.enough.is_set() and not self.stop.is_set() and n < CLUSTER_RATE * CLUSTER_SECONDS:
            delay = start + n / CLUSTER_RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            correlation = f"ak-{n}"
            producer.produce(
                self.settings.topics.events_in,
                value=event(n, COFFRES[n % len(COFFRES)]),
                key=correlation.encode(),
                headers=[(CORRELATION_ID, correlation.encode())],
                on_delivery=lambda err, _m: err is None or self.failures.append(str(err)),
            )
            self.sent[correlation] = time.monotonic()
            producer.poll(0)
            n += 1
        producer.flush(120)
        self.done.set()

    def read(self) -> None:
        config = {**self.config, "group.id": "platform-cluster"}
        read_acquittals(
            config, self.settings.topics.acquittals, self.settings.partitions, self.answered, self.stop
        )

    def resumed_after(self, moment: float, timeout: float = RESUME_LIMIT) -> float:
        """Seconds from ``moment`` until every coffre has an acquittal for an event sent after it."""
        deadline = moment + timeout
        while time.monotonic() < deadline:
            fresh = {
                a.id_coffre for c, (_, a) in self.answered.copy().items() if self.sent.get(c, 0.0) > moment
            }
            if fresh >= set(COFFRES):
                return round(time.monotonic() - moment, 1)
            time.sleep(0.05)
        return timeout


def test_three_brokers_one_killed_one_paused_lose_nothing(
    apache_kafka_cluster, topic_prefix, tmp_path, capsys
):
    cluster = apache_kafka_cluster
    settings = stack_settings(
        cluster.bootstrap,
        topic_prefix,
        tmp_path,
        partitions=6,
        replication_factor=3,
        ingest_session_seconds=6,
    )
    stack = Stack(settings, bootstrap=cluster.bootstrap)
    stack.start()
    platform = Platform(cluster.bootstrap, settings)
    reader = threading.Thread(target=platform.read, daemon=True)
    publisher = threading.Thread(target=platform.publish, daemon=True)
    figures: dict[str, float] = {}
    killed, paused = cluster.brokers[0], cluster.brokers[1]
    restarts: list[str] = []
    supervising = threading.Event()

    def supervise() -> None:  # as Kubernetes would: a service that exits is started again
        while not supervising.is_set():
            for name, child in list(stack.children.items()):
                if child.poll() is not None and not supervising.is_set():
                    restarts.append(f"{name} (exit {child.returncode})")
                    stack.spawn(name)
            time.sleep(0.5)

    supervisor = threading.Thread(target=supervise, daemon=True)
    try:
        supervisor.start()
        reader.start()
        time.sleep(3)  # the services join their groups
        began = time.monotonic()
        publisher.start()
        time.sleep(5)
        starts = killed.starts()
        moment = time.monotonic()
        killed.signal(signal.SIGKILL)
        figures["SIGKILL broker 1: resumed after s"] = platform.resumed_after(moment)
        killed.start()  # back with its data: it catches up and rejoins the ISR
        killed.wait_started(since=starts)
        figures["broker 1 back after s"] = round(time.monotonic() - moment, 1)
        time.sleep(3)
        moment = time.monotonic()
        paused.signal(signal.SIGSTOP)  # past its session (4 s): fenced, its leaderships move
        figures["SIGSTOP broker 2: resumed after s"] = platform.resumed_after(moment)
        time.sleep(max(0.0, moment + 10 - time.monotonic()))
        moment = time.monotonic()
        paused.signal(signal.SIGCONT)
        figures["SIGCONT broker 2: resumed after s"] = platform.resumed_after(moment)
        platform.enough.set()
        publisher.join(timeout=180)
        deadline = time.monotonic() + 120
        while len(platform.answered) < len(platform.sent) and time.monotonic() < deadline:
            time.sleep(0.5)
        figures["events"] = len(platform.sent)
        figures["acknowledged"] = len(platform.answered)
        figures["seconds"] = round(time.monotonic() - began, 1)
    finally:
        supervising.set()
        supervisor.join(timeout=5)
        figures["service restarts"] = restarts  # type: ignore[assignment]
        platform.enough.set()
        platform.stop.set()
        reader.join(timeout=30)
        for broker in cluster.brokers:  # whatever happened, the next test finds three brokers
            if broker.process is not None and broker.process.poll() is None:
                broker.signal(signal.SIGCONT)
        codes = stack.stop()
    with capsys.disabled():  # the figures, in CI's output too
        print(f"\nthree brokers: {figures}", flush=True)
    assert platform.done.is_set() and not platform.failures, platform.failures[:5]
    missing = sorted(set(platform.sent) - set(platform.answered), key=lambda c: int(c[3:]))
    assert not missing, f"{len(missing)} events without acquittal, first {missing[:5]} (logs in {tmp_path})"
    assert {a.status for _, a in platform.answered.values()} == {"recorded"}
    assert all(code == 0 for code in codes.values()), codes

    players: list[int] = []
    archive = LocalStorage(settings.archive_root)  # opening each journal verifies its chain
    for coffre in COFFRES:
        records = recorded_events(archive, settings.journal_root, "0099", coffre)
        assert [r.id_evt for r in records] == list(range(1, len(records) + 1)), "a gap or a reuse"
        previous = GENESIS
        for r in records:
            assert chain_hash(previous, r.event) == r.chain_hash
            previous = r.chain_hash
            players.append(int(re.search(rb"<IDJoueur>ak-(\d+)</IDJoueur>", r.event).group(1)))
    for phase in ("SIGKILL broker 1", "SIGSTOP broker 2", "SIGCONT broker 2"):
        assert figures[f"{phase}: resumed after s"] < RESUME_LIMIT, f"acquittals did not resume: {figures}"
    assert sorted(players) == list(range(len(platform.sent))), "an event is missing or recorded twice"
    for correlation, (_, acquittal) in platform.answered.items():
        assert acquittal.id_coffre == COFFRES[int(correlation[3:]) % len(COFFRES)]


def test_a_vault_refuses_a_normalized_topic_that_forgets_before_it_seals(
    apache_kafka_cluster, topic_prefix, tmp_path
):
    """A replica taking a coffre over reads its unsealed events again from the normalized topic:
    a retention shorter than twice the lot age cannot hold, and the vault says so (exit 2) before
    recording anything; a retention under a day is a warning."""
    from coffre_vault.service import check_retention

    from coffre.adapters.kafka import ensure_topics

    cluster = apache_kafka_cluster
    settings = stack_settings(
        cluster.bootstrap, topic_prefix, tmp_path, replication_factor=3, lot_max_age_seconds=60
    )
    topic = settings.topics.normalized
    asyncio.run(
        ensure_topics(cluster.bootstrap, {topic: 3}, replication=3, configs={"retention.ms": "100000"})
    )
    with pytest.raises(SystemExit) as stopped:
        asyncio.run(check_retention(settings))
    assert stopped.value.code == 2
    longer = settings.model_copy(update={"topic_prefix": f"{topic_prefix}long-"})
    asyncio.run(
        ensure_topics(
            cluster.bootstrap,
            {longer.topics.normalized: 3},
            replication=3,
            configs={"retention.ms": "3600000"},
        )
    )
    asyncio.run(check_retention(longer))  # an hour: a warning, no refusal
