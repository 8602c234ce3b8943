"""Apache Kafka brokers for the tests: secured ones and a three-broker cluster, built from
coffre's own nodes (:mod:`coffre.adapters.apache_kafka`: the pinned release's jars fetched once
with Maven and checked, each node tied to the test run that started it).

* :class:`TlsMaterial`: a CA, the broker's certificate (SAN 127.0.0.1 and localhost) and one client
  certificate per principal (CN = the principal), made with ``cryptography``; PEM for every side
  (the broker reads PEM key stores: no keytool).
* :func:`secured_broker`: one combined broker+controller with a SASL_SSL listener (SCRAM-SHA-512, the
  credentials written at format time), an SSL listener that requires a client certificate (the
  principal is the certificate's CN), and the ``StandardAuthorizer`` with no ACL meaning no access;
  ``admin`` is its super user.
* :func:`cluster`: three combined brokers+controllers (a KRaft quorum of 3), plaintext, replication
  factor 3, ``min.insync.replicas`` 2, no unclean leader election.
* :func:`single_broker`: ``coffre up``'s own broker (:class:`~coffre.adapters.apache_kafka.LocalKafka`)
  on free ports, the session's broker of the pipeline tests.

Where ``java`` or ``mvn`` is missing, :func:`require_java` skips the test with how to get them, except
under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coffre.adapters import apache_kafka
from coffre.adapters.apache_kafka import (
    HOST,
    KafkaNode,
    KafkaUnavailable,
    LocalKafka,
    cluster_id,
    common_config,
)
from coffre.adapters.broker import free_port_block

SUPER_USER = "admin"
BROKER_PRINCIPAL = "broker"
"""The CN of the broker's certificate: its own principal between listeners (a super user too)."""
__all__ = ["HOST", "KafkaUnavailable"]

HOW_TO_RUN = (
    "the Apache Kafka tests need a JVM and Maven (they fetch Kafka's jars from Maven Central once, "
    "into ~/.cache/coffre): install OpenJDK 17 and Maven (apt-get install openjdk-17-jre-headless maven) "
    "and run pytest -m apache_kafka"
)


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


def kafka_libs() -> Path:
    """The pinned release's jars (fetched the first time), or a skip without java and mvn."""
    require_java()
    return apache_kafka.kafka_libs()


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


@dataclass
class SecuredKafka:
    """One secured broker; what clients need to reach it."""

    broker: KafkaNode
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

    def stop(self, grace: float = apache_kafka.STOP_GRACE) -> None:
        self.broker.stop(grace)


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
        **common_config(1),
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
    broker = KafkaNode(
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

    brokers: list[KafkaNode]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.listeners['PLAINTEXT']}" for b in self.brokers)

    def stop(self, grace: float = 10.0) -> None:
        """All at once: stopped one after the other, the last ones wait for a quorum that is gone."""
        for b in self.brokers:
            b.terminate()
        deadline = time.monotonic() + grace
        for b in self.brokers:
            b.reap(max(0.1, deadline - time.monotonic()))


def cluster(folder: Path, size: int = 3, extra: dict[str, object] | None = None) -> KafkaCluster:
    """``size`` nodes started in ``folder``; ``extra``: more of each node's settings (the soak bench
    lowers ``group.min.session.timeout.ms`` to ``coffre up``'s broker's)."""
    libs = kafka_libs()
    base = free_port_block(2 * size)
    voters = ",".join(f"{n + 1}@{HOST}:{base + size + n}" for n in range(size))
    brokers = []
    for n in range(size):
        port, controller = base + n, base + size + n
        config = {
            **common_config(n + 1),
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
            **(extra or {}),
        }
        brokers.append(
            KafkaNode(
                n + 1, folder / f"node-{n + 1}", libs, config, {"PLAINTEXT": port, "CONTROLLER": controller}
            )
        )
    ident = cluster_id()
    with ThreadPoolExecutor(size) as formatting:  # a JVM each: side by side, sooner on two cores
        list(formatting.map(lambda b: b.format(ident), brokers))
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


def single_broker(folder: Path) -> LocalKafka:
    """``coffre up``'s own Apache Kafka, started in ``folder`` on free ports (the pipeline tests' broker)."""
    require_java()
    broker = LocalKafka(folder, free_port_block(2), folder / "broker.log")
    broker.start()
    return broker


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
