"""Apache Kafka itself, for the tests the embedded broker cannot serve (issue 19, point 3).

No Docker here: the jars of a released Apache Kafka (``org.apache.kafka:kafka_2.13`` and what it
depends on) are fetched once with Maven into a cache (``~/.cache/coffre/kafka-<version>/libs`` or
``$COFFRE_KAFKA_CACHE``), and KRaft brokers run as ``java -cp 'libs/*' kafka.Kafka`` after
``kafka.tools.StorageTool format``, each on free ports of 127.0.0.1, its logs in the test's folder,
its process group killed at the end.

* :class:`TlsMaterial`: a CA, the broker's certificate (SAN 127.0.0.1 and localhost) and one client
  certificate per principal (CN = the principal), made with ``cryptography``; PEM for every side
  (the broker reads PEM key stores: no keytool).
* :func:`secured_broker`: one combined broker+controller with a SASL_SSL listener (SCRAM-SHA-512, the
  credentials written at format time), an SSL listener that requires a client certificate (the
  principal is the certificate's CN), and the ``StandardAuthorizer`` with no ACL meaning no access;
  ``admin`` is its super user.
* :func:`cluster`: three combined brokers+controllers (a KRaft quorum of 3), plaintext, replication
  factor 3, ``min.insync.replicas`` 2, no unclean leader election.

Where ``java`` or ``mvn`` is missing, :func:`require_java` skips the test with how to get them, except
under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import fcntl
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coffre.adapters.broker import free_port_block

KAFKA_VERSION = "4.4.0"
"""The newest Apache Kafka that Maven Central serves whole (kafka_2.13 and its dependencies)."""
LOG4J_VERSION = "2.25.5"
"""The log4j 2 that kafka_2.13 4.4.0 depends on; its slf4j 1 binding routes the brokers' logs."""
HOST = "127.0.0.1"
SUPER_USER = "admin"
BROKER_PRINCIPAL = "broker"
"""The CN of the broker's certificate: its own principal between listeners (a super user too)."""
HEAP = "-Xmx512m"
START_TIMEOUT = 90.0

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>coffre.tests</groupId>
  <artifactId>apache-kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = info
"""

HOW_TO_RUN = (
    "the Apache Kafka tests need a JVM and Maven (they fetch Kafka's jars from Maven Central once, "
    "into ~/.cache/coffre): install OpenJDK 17 and Maven (apt-get install openjdk-17-jre-headless maven) "
    "and run pytest -m apache_kafka"
)


class KafkaUnavailable(RuntimeError):
    """Apache Kafka's jars could not be had, or a broker did not start (the message says why)."""


# ---------------------------------------------------------------------------------------------- jars


def require_java() -> tuple[str, str]:
    """``java`` and ``mvn``, or a skip that says how to get them (a failure under CI)."""
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if java and mvn:
        return java, mvn
    missing = " and ".join(name for name, path in (("java", java), ("mvn", mvn)) if not path)
    message = f"{missing} not found: {HOW_TO_RUN}"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the Apache Kafka tests, but {message}", pytrace=False)
    pytest.skip(message)


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    root = os.environ.get("COFFRE_KAFKA_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "coffre"
    return base / f"kafka-{version}"


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The folder of Kafka's jars, fetched with Maven the first time (under a lock: two pytest
    processes never fetch at once, the second finds the first's jars)."""
    _, mvn = require_java()
    home = cache_dir(version)
    libs = home / "libs"
    done = home / "libs.complete"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return libs
        (home / "pom.xml").write_text(POM.format(kafka=version, log4j=LOG4J_VERSION))
        partial = home / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        run = subprocess.run(
            [mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={partial}"],
            cwd=home,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if run.returncode != 0:
            raise KafkaUnavailable(
                f"mvn could not fetch org.apache.kafka:kafka_2.13:{version} (exit {run.returncode}), "
                f"in {home}:\n{(run.stdout + run.stderr)[-4000:]}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        (home / "log4j2.properties").write_text(LOG4J2)
        done.write_text(f"{version}\n")
        return libs


# ---------------------------------------------------------------------------------------- TLS


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "coffre tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass
class TlsMaterial:
    """PEM files in ``folder``: ``ca.pem``; ``broker.pem`` (key and certificate, the broker's key
    store) ; for each client ``<name>.crt`` and ``<name>.key``."""

    folder: Path
    clients: tuple[str, ...]
    _ca_key: ec.EllipticCurvePrivateKey = field(init=False, repr=False)
    _ca: x509.Certificate = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(_name("coffre tests CA"))
            .issuer_name(_name("coffre tests CA"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))
        key, cert = self._issue(BROKER_PRINCIPAL, server=True)
        self.broker_keystore.write_bytes(_pem_key(key) + cert)
        for client in self.clients:
            key, cert = self._issue(client, server=False)
            self.cert(client).write_bytes(cert)
            self.key(client).write_bytes(_pem_key(key))

    def _issue(self, cn: str, server: bool) -> tuple[ec.EllipticCurvePrivateKey, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                # the broker's certificate is also its client certificate between listeners
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                    if server
                    else [ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
                ),
                critical=False,
            )
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return key, cert.public_bytes(serialization.Encoding.PEM)

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.folder / "broker.pem"

    def cert(self, client: str) -> Path:
        return self.folder / f"{client}.crt"

    def key(self, client: str) -> Path:
        return self.folder / f"{client}.key"


# ------------------------------------------------------------------------------------- brokers


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as ``random-uuid``)."""
    while True:  # one in 64 begins with '-', which the storage tool takes for an option (seen once)
        ident = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not ident.startswith("-"):
            return ident


def _properties(values: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


@dataclass
class Broker:
    """One KRaft node (broker and controller) run by ``java kafka.Kafka``."""

    node_id: int
    folder: Path
    libs: Path
    config: dict[str, object]
    listeners: dict[str, int]
    """Listener name → port (the controller's included)."""
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def _java(self, main: str, *args: str) -> list[str]:
        java, _ = require_java()
        return [
            java,
            HEAP,
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.libs.parent / 'log4j2.properties'}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    def format(self, cluster: str, scram: Iterable[tuple[str, str]] = ()) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "server.properties").write_text(_properties(self.config))
        extra: list[str] = []
        for name, password in scram:
            extra += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
        run = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                cluster,
                "--config",
                str(self.folder / "server.properties"),
                "--ignore-formatted",
                *extra,
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if run.returncode != 0:
            raise KafkaUnavailable(
                f"StorageTool format failed (exit {run.returncode}):\n{run.stdout}{run.stderr}"
            )

    def start(self) -> None:
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(self.folder / "server.properties")),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole at the end
        )
        out.close()

    def started(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            return b"Kafka Server started" in self.log.read_bytes()
        return False

    def wait_started(self, timeout: float = START_TIMEOUT, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise KafkaUnavailable(
                    f"broker {self.node_id} exited {self.process.returncode}:\n{self.tail()}"
                )
            with contextlib.suppress(OSError):
                if self.log.read_bytes().count(b"Kafka Server started") > since:
                    return
            time.sleep(0.2)
        raise KafkaUnavailable(f"broker {self.node_id} not started within {timeout:.0f} s:\n{self.tail()}")

    def starts(self) -> int:
        """How many times this node's log says it started (a restart waits for one more)."""
        with contextlib.suppress(OSError):
            return self.log.read_bytes().count(b"Kafka Server started")
        return 0

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        if sig == signal.SIGKILL:
            self.process.wait(timeout=30)

    def stop(self, grace: float = 10.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGCONT)
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def _common(node_id: int) -> dict[str, object]:
    return {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.listener.names": "CONTROLLER",
        "num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 6,
        "transaction.state.log.num.partitions": 3,
        "auto.create.topics.enable": "false",
        "log.segment.bytes": 16 * 1024 * 1024,
        "num.io.threads": 2,
        "num.network.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.flush.interval.messages": 2**62,
        "share.coordinator.state.topic.num.partitions": 1,
    }


@dataclass
class SecuredKafka:
    """One secured broker; what clients need to reach it."""

    broker: Broker
    tls: TlsMaterial
    passwords: dict[str, str]
    sasl_port: int
    ssl_port: int

    @property
    def sasl_bootstrap(self) -> str:
        return f"{HOST}:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"{HOST}:{self.ssl_port}"

    def librdkafka_sasl(self, user: str, password: str | None = None) -> dict[str, str]:
        """confluent-kafka's settings for ``user`` over SASL_SSL."""
        return {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": self.passwords[user] if password is None else password,
            "ssl.ca.location": str(self.tls.ca),
        }

    def librdkafka_mtls(self, user: str) -> dict[str, str]:
        """confluent-kafka's settings for ``user`` over mutual TLS."""
        return {
            "bootstrap.servers": self.ssl_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.tls.ca),
            "ssl.certificate.location": str(self.tls.cert(user)),
            "ssl.key.location": str(self.tls.key(user)),
        }

    def stop(self) -> None:
        self.broker.stop()


def secured_broker(folder: Path, principals: Iterable[str]) -> SecuredKafka:
    """A secured broker started in ``folder``; every one of ``principals`` (and ``admin``) has a SCRAM
    password and a client certificate."""
    libs = kafka_libs()
    users = (SUPER_USER, *principals)
    tls = TlsMaterial(folder / "tls", clients=users)
    passwords = {user: secrets.token_urlsafe(18) for user in users}
    base = free_port_block(3)
    sasl_port, ssl_port, controller_port = base, base + 1, base + 2
    config = {
        **_common(1),
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"SASL_SSL://{HOST}:{sasl_port},SSL://{HOST}:{ssl_port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"SASL_SSL://{HOST}:{sasl_port},SSL://{HOST}:{ssl_port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "SSL",
        "log.dirs": folder / "data",
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        # TLS: PEM stores, mutual TLS on the SSL listeners (the SASL_SSL one authenticates by SCRAM)
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls.broker_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": tls.ca,
        "ssl.client.auth": "required",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/,DEFAULT",
        # SCRAM on the SASL_SSL listener (the credentials were written at format time)
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        # no ACL, no access; the admin and the broker itself are super users
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER};User:{BROKER_PRINCIPAL}",
    }
    broker = Broker(
        1,
        folder / "node-1",
        libs,
        config,
        {"SASL_SSL": sasl_port, "SSL": ssl_port, "CONTROLLER": controller_port},
    )
    broker.format(cluster_id(), scram=passwords.items())
    broker.start()
    try:
        broker.wait_started()
    except BaseException:
        broker.stop()
        raise
    return SecuredKafka(broker, tls, passwords, sasl_port, ssl_port)


@dataclass
class KafkaCluster:
    """Three plaintext KRaft nodes (brokers and controllers)."""

    brokers: list[Broker]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.listeners['PLAINTEXT']}" for b in self.brokers)

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()


def cluster(folder: Path, size: int = 3) -> KafkaCluster:
    libs = kafka_libs()
    base = free_port_block(2 * size)
    voters = ",".join(f"{n + 1}@{HOST}:{base + size + n}" for n in range(size))
    brokers = []
    for n in range(size):
        port, controller = base + n, base + size + n
        config = {
            **_common(n + 1),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": folder / f"node-{n + 1}" / "data",
            "default.replication.factor": size,
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": "false",
            "offsets.topic.replication.factor": size,
            "transaction.state.log.replication.factor": size,
            "transaction.state.log.min.isr": 2,
            "share.coordinator.state.topic.replication.factor": size,
            "share.coordinator.state.topic.min.isr": 2,
            # a dead broker is fenced after its session (default 9 s); shorter here, on loopback
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 1000,
            "replica.lag.time.max.ms": 5000,
        }
        brokers.append(
            Broker(
                n + 1, folder / f"node-{n + 1}", libs, config, {"PLAINTEXT": port, "CONTROLLER": controller}
            )
        )
    ident = cluster_id()
    for b in brokers:
        b.format(ident)
    running = KafkaCluster(brokers)
    try:
        for b in brokers:
            b.start()
        for b in brokers:
            b.wait_started()
    except BaseException:
        running.stop()
        raise
    return running


@contextlib.contextmanager
def running(kafka: SecuredKafka | KafkaCluster) -> Iterator[SecuredKafka | KafkaCluster]:
    try:
        yield kafka
    finally:
        kafka.stop()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


# ------------------------------------------------------------------------------------------- ACLs

Acl = tuple[str, str, str, str, str]
"""(principal, resource type ``topic``/``group``, name, pattern ``literal``/``prefixed``, operation)."""

SERVICE_PRINCIPALS = {
    "ingest": "coffre-ingest",
    "vault": "coffre-vault",
    "acquittal": "coffre-acquittal",
    "auditor": "coffre-auditor",
}
PLATFORM = "coffre-platform"


def coffre_acls(prefix: str) -> list[Acl]:
    """Least privilege for coffre's principals and a platform's, under topic prefix ``prefix``."""
    acls: list[Acl] = []

    def grant(principal: str, kind: str, name: str, operations: str, pattern: str = "literal") -> None:
        acls.extend((principal, kind, name, pattern, op) for op in operations.split(","))

    ingest, vault, acquittal, auditor = SERVICE_PRINCIPALS.values()
    for principal in SERVICE_PRINCIPALS.values():
        # every service checks at its start that all of coffre's topics exist with their partitions and
        # take its largest record (ensure_coffre_topics): metadata and configurations, never records
        grant(principal, "topic", prefix, "describe,describe_configs", "prefixed")
    grant(ingest, "topic", f"{prefix}events.in", "read,write")
    grant(ingest, "topic", f"{prefix}events.normalized", "write")
    grant(ingest, "topic", f"{prefix}events.rejected", "write")
    grant(ingest, "topic", f"{prefix}ingest.state", "read,write")
    grant(ingest, "group", f"{prefix}ingest", "read")
    grant(vault, "topic", f"{prefix}events.normalized", "read")
    grant(vault, "topic", f"{prefix}receipts", "write")
    grant(vault, "group", f"{prefix}vault", "read")
    grant(acquittal, "topic", f"{prefix}receipts", "read")
    grant(acquittal, "topic", f"{prefix}events.rejected", "read")
    grant(acquittal, "topic", f"{prefix}acquittals", "write")
    grant(acquittal, "group", f"{prefix}acquittal", "read")
    grant(auditor, "topic", f"{prefix}events.normalized", "read")
    grant(auditor, "topic", f"{prefix}receipts", "read")
    grant(auditor, "topic", f"{prefix}audit", "write")
    grant(auditor, "topic", f"{prefix}auditor-", "read,write,describe", "prefixed")
    grant(auditor, "group", f"{prefix}auditor", "read")
    grant(PLATFORM, "topic", f"{prefix}events.in", "write,describe")
    for topic in ("acquittals", "events.rejected", "receipts"):
        grant(PLATFORM, "topic", f"{prefix}{topic}", "read,describe")
    grant(PLATFORM, "group", "platform-", "read", "prefixed")
    return acls


def wait_until_granted(kafka: SecuredKafka, principal: str, topic: str, timeout: float = 30.0) -> None:
    """Wait until ``principal`` sees ``topic`` in its metadata: the ACLs just created apply on the
    broker once it replayed them (a platform that produced at once was refused, once in a full run)."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient(kafka.librdkafka_sasl(principal))
    deadline = time.monotonic() + timeout
    while True:
        found = client.list_topics(topic=topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{principal} still cannot describe {topic} after {timeout:.0f} s: {found}")
        time.sleep(0.2)


def create_acls(admin_config: dict[str, str], acls: Iterable[Acl]) -> None:
    """Create ``acls`` (ALLOW, any host) with confluent-kafka's admin client (aiokafka has none)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType[kind.upper()],
            name,
            ResourcePatternType[pattern.upper()],
            f"User:{principal}",
            "*",
            AclOperation[operation.upper()],
            AclPermissionType.ALLOW,
        )
        for principal, kind, name, pattern, operation in acls
    ]
    admin = AdminClient(admin_config)
    for binding, future in admin.create_acls(bindings, request_timeout=30).items():
        future.result(timeout=30)  # raises with the broker's error for a refused binding
        del binding
