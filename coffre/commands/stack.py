"""``coffre up``: the whole stack on one machine, for development and demonstration.

Its own Apache Kafka (:class:`~coffre.adapters.apache_kafka.LocalKafka`, its log under the data
folder) unless ``--bootstrap`` names a Kafka; the memory-only embedded broker (Tansu) only when asked
(``--broker tansu``) or where no Java runtime can run Kafka, with a warning that says what it cannot
do. Then the topics, and the services as child processes (ingest, vault, acquittal, the regulator
API and the auditor, as they run in Kubernetes, one process each), their logs under
``<data>/logs``. Every child dies with ``coffre up``, even when it is SIGKILLed
(:mod:`coffre.adapters.lifeline`). Before any of them starts, :meth:`Stack.check` refuses the
settings a service would refuse at its own start (exit 2, the variable named).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from coffre.adapters.apache_kafka import JavaMissing, KafkaUnavailable, LocalKafka
from coffre.adapters.archive import signer, trust_store
from coffre.adapters.broker import EmbeddedBroker, port_free
from coffre.adapters.kafka import LINGER_VARIABLE
from coffre.adapters.keys import KeyFileError, development_record_keys
from coffre.adapters.lifeline import popen
from coffre.adapters.stream import ensure_coffre_topics
from coffre.adapters.tls import DevelopmentTls, api_tls_material, server_ssl_context
from coffre.config import Settings, configuration_error

SERVICES = ("ingest", "vault", "acquittal")
"""The recording path's services, each a child of ``coffre up``."""
REGULATOR = "regulator"
"""The regulator API's child (``coffre regulator-api``), started when ``COFFRE_API_PORT`` is set."""
AUDITOR = "auditor"
"""The auditor's child (``coffre auditor``): beside the recording path, in its own consumer group."""
WITNESS = "witness"
"""A development witness's child (``coffre witness``): ``coffre up`` runs one, its key under
``<data>/keys``, when ``COFFRE_WITNESS_URLS`` names none, so the demo's archive is cosigned."""
DEV_WITNESS_NAME = "coffre-dev-witness"
COMMANDS = {REGULATOR: "regulator-api"}
EMBEDDED_LINGER_MS = 5
"""The services' producer linger on the embedded broker when ``COFFRE_PRODUCER_LINGER_MS`` is not
set: fewer, larger record batches for a few milliseconds per hop."""
EMBEDDED_FETCH_BYTES = 64 * 1024
"""The services' per-partition fetch size on the embedded broker when ``COFFRE_CONSUMER_FETCH_BYTES``
is not set: Tansu answers a fetch slower the more bytes it is asked for (bench/README.md, soak)."""
EMBEDDED_FETCH_WAIT_MS = 100
"""The services' fetch wait on the embedded broker when ``COFFRE_CONSUMER_FETCH_WAIT_MS`` is not set:
with 5 ms a consumer that fell behind on Tansu read nothing more, for good (docs/operations.md)."""
BROKERS = ("kafka", "tansu")
"""``coffre up --broker``: its own Apache Kafka (the default), or the memory-only embedded broker."""
TANSU_LIMITS = (
    "the embedded broker (Tansu) keeps everything in memory: all of it is lost when coffre up stops, "
    "nothing is ever trimmed, and a pipeline on it stalls for good within minutes at a few hundred "
    'events/s; for a quick look only (docs/operations.md, "The embedded broker\'s limits")'
)


@dataclass(frozen=True)
class DevWitness:
    """The development witness ``coffre up`` runs: where it answers and what checks its cosignatures."""

    url: str
    public_key: Path
    ca_cert: Path


@dataclass
class Stack:
    settings: Settings
    bootstrap: str | None = None
    broker_kind: str = "kafka"
    """Without ``bootstrap``: ``kafka`` (its own Apache Kafka) or ``tansu`` (the embedded broker)."""
    broker: LocalKafka | EmbeddedBroker | None = None
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_tls: DevelopmentTls | None = None
    """The regulator API's development certificates and token, when none is configured."""
    ingest_replicas: int = 1
    """Ingest processes sharing the partitions of events.in: ``ingest``, ``ingest-2``, …"""
    auditor: bool = False
    """Whether the whole stack includes the auditor (``coffre up`` does; the tests and benches that
    do not audit leave it out)."""
    witness: bool = False
    """Whether the stack runs a development witness when ``COFFRE_WITNESS_URLS`` names none
    (``coffre up`` does; the tests and benches start their own)."""
    dev_witness: DevWitness | None = None
    static_members: bool = False
    """Whether each service joins its groups as a static member named after its child (``ingest-2``…,
    the same at every restart): on ``coffre up``'s own Apache Kafka, where a restarted member then
    takes its partitions back at once instead of waiting out its predecessor's session."""
    service_env: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """Extra environment per service (``ingest``, ``vault``, ``acquittal``, ``auditor``, ``regulator``;
    an ingest replica ``ingest-2`` takes ``ingest``'s): each its own Kafka principal, say. ``None``
    removes a variable the settings would give."""

    def start(self, services: tuple[str, ...] = SERVICES) -> str:
        self.check()
        if self.bootstrap is None:
            self.bootstrap = self._start_broker()
        settings = self.settings.model_copy(update={"bootstrap_servers": self.bootstrap})
        asyncio.run(ensure_coffre_topics(settings))
        if self.broker is not None and (not isinstance(self.broker, LocalKafka) or self.broker.fresh):
            # a broker that holds nothing (Tansu, or a new log): ingest's counters start from the journals
            from coffre_ingest.seed import seed_from_journals

            asyncio.run(seed_from_journals(settings, settings.journal_root))
        if self.dev_witness is not None and services == SERVICES:
            self.spawn(WITNESS)  # before the vault: its first checkpoints are cosigned at once
        for name in services:
            self.spawn(name)
            if name == "ingest":
                for replica in range(2, self.ingest_replicas + 1):
                    self.spawn(f"ingest-{replica}")
        if services == SERVICES and self.settings.api_port:
            self.spawn(REGULATOR)
        if services == SERVICES and self.auditor:
            self.spawn(AUDITOR)
        return self.bootstrap

    def _start_broker(self) -> str:
        """``coffre up``'s own broker: Apache Kafka, or Tansu when asked or when no JVM can run Kafka
        (one line saying how to get one, and one saying what Tansu cannot do)."""
        logs = Path(self.settings.data_dir) / "logs"
        if self.broker_kind == "kafka":
            kafka = LocalKafka(Path(self.settings.data_dir), self.settings.broker_port, logs / "broker.log")
            try:
                bootstrap = kafka.start()
            except JavaMissing as exc:
                print(f"coffre up: {exc}", file=sys.stderr, flush=True)
                print(f"coffre up: warning: falling back to {TANSU_LIMITS}", file=sys.stderr, flush=True)
            except KafkaUnavailable as exc:
                raise SystemExit(
                    f"coffre up: Apache Kafka did not start ({logs / 'broker.log'}): {exc}"
                ) from None
            else:
                self.broker = kafka
                self.static_members = self.settings.kafka_group_instance_id is None
                return bootstrap
        elif self.broker_kind == "tansu":
            print(f"coffre up: warning: {TANSU_LIMITS}", file=sys.stderr, flush=True)
        else:
            raise ValueError(f"unknown broker {self.broker_kind!r}: one of {', '.join(BROKERS)}")
        self._embedded_defaults()
        self.broker = EmbeddedBroker(log_path=logs / "broker.log")
        return self.broker.start()

    def _embedded_defaults(self) -> None:
        """On the embedded broker, unless ``COFFRE_PRODUCER_LINGER_MS`` is set: the services' producers
        linger :data:`EMBEDDED_LINGER_MS`, for fewer, larger record batches (Tansu lists every batch
        of a partition at each fetch; see docs/operations.md, "The embedded broker's limits")."""
        if LINGER_VARIABLE not in os.environ:
            for name in SERVICES:
                self.service_env.setdefault(name, {}).setdefault(LINGER_VARIABLE, str(EMBEDDED_LINGER_MS))
        for variable, setting, value in (
            ("COFFRE_CONSUMER_FETCH_BYTES", "consumer_fetch_bytes", EMBEDDED_FETCH_BYTES),
            ("COFFRE_CONSUMER_FETCH_WAIT_MS", "consumer_fetch_wait_ms", EMBEDDED_FETCH_WAIT_MS),
        ):
            if getattr(self.settings, setting) is None and variable not in os.environ:
                for name in SERVICES:
                    self.service_env.setdefault(name, {}).setdefault(variable, str(value))

    def check(self) -> None:
        """What the services would refuse at their start, refused before anything starts: one
        line naming the variable, exit 2 (as :func:`coffre.config.load_settings`). It also makes,
        once, the development signing key and TLS material the children would race for."""
        s = self.settings
        if s.vault_replicas != 1:
            configuration_error(
                f"COFFRE_VAULT_REPLICAS: coffre up runs one vault, which would record only its share "
                f"of the partitions: leave it at 1 (it is {s.vault_replicas})"
            )
        ports = len(SERVICES) + 2 + self.ingest_replicas - 1
        if s.ops_port and s.ops_port + ports - 1 > 65535:
            configuration_error(f"COFFRE_OPS_PORT: coffre up needs it and the next {ports - 1} ports")
        _folder("COFFRE_DATA_DIR", Path(s.data_dir) / "logs")
        if self.bootstrap is None and self.broker_kind == "kafka":
            for port in (s.broker_port, s.broker_port + 1):
                if not port_free(port):
                    configuration_error(
                        f"COFFRE_BROKER_PORT: coffre up runs its Apache Kafka on 127.0.0.1:{s.broker_port} "
                        f"and its controller on {s.broker_port + 1}, and {port} is taken: set another port, "
                        "or name a running Kafka with --bootstrap"
                    )
        if s.archive_backend == "local":
            _folder("COFFRE_ARCHIVE_DIR" if s.archive_dir else "COFFRE_DATA_DIR", s.archive_root)
        try:
            signer(s)
        except KeyFileError as exc:
            configuration_error(f"COFFRE_SIGNING_KEY, COFFRE_SIGNING_CERT: {exc}")
        try:
            trust_store(s)
        except (OSError, ValueError) as exc:
            configuration_error(f"COFFRE_TRUSTED_CERTS: {exc}")
        # without keys of the operator's, one development key, made here and named to every child (a
        # service started alone without one refuses to start: it would pass over its peers' records)
        if s.record_keys_file is None and not s.record_keys.get_secret_value():
            self.settings = s = s.model_copy(update={"record_keys_file": development_record_keys(s)})
        if s.api_port:
            from coffre_regulator.api import SubjectAllowList

            for variable, path in (
                ("COFFRE_API_TLS_CERT", s.api_tls_cert),
                ("COFFRE_API_TLS_KEY", s.api_tls_key),
                ("COFFRE_API_CLIENT_CA", s.api_client_ca),
                ("COFFRE_API_TOKENS_FILE", s.api_tokens_file),
            ):
                _readable(variable, path)
            material = api_tls_material(s)
            try:
                server_ssl_context(material.server_cert, material.server_key, material.client_ca)
            except ValueError as exc:
                configuration_error(f"COFFRE_API_TLS_CERT, COFFRE_API_TLS_KEY, COFFRE_API_CLIENT_CA: {exc}")
            try:
                SubjectAllowList(material.allowed_subjects)
            except ValueError as exc:
                configuration_error(f"COFFRE_API_ALLOWED_SUBJECTS: {exc}")
            self.api_tls = material.development  # for the demo's curl line
        if self.witness and not s.witness_urls:
            self.dev_witness = self._development_witness()

    def _development_witness(self) -> DevWitness:
        """Make, once, the development witness's key; point the vault at it (its TLS from the
        development CA, its public key checking every cosignature) and it at the vault's
        certificates."""
        import socket

        from coffre.adapters.archive import older_certs, signing_files
        from coffre.adapters.files import write_new
        from coffre.adapters.tls import development_tls
        from coffre.domain.witness import WitnessKey

        s = self.settings
        try:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((s.witness_host, s.witness_port))
        except OSError as exc:
            configuration_error(
                f"COFFRE_WITNESS_PORT: coffre up runs a development witness on {s.witness_host}:"
                f"{s.witness_port}, which is taken ({exc.strerror or exc}): set another port, or name "
                "your witness with COFFRE_WITNESS_URLS"
            )
        keys = Path(s.data_dir) / "keys"
        keys.mkdir(parents=True, exist_ok=True)
        private, public = keys / "dev-witness-key.pem", keys / "dev-witness-key.pub.pem"
        if not private.exists():
            key = WitnessKey.generate(DEV_WITNESS_NAME)
            write_new(public, key.public.pem(), 0o644)
            write_new(private, key.private_pem(), 0o600)
        tls = development_tls(Path(s.data_dir) / "tls")
        _, cert = signing_files(s)
        trusted = ",".join(str(path) for path in [cert, *older_certs(s)])
        url = f"https://127.0.0.1:{s.witness_port}"
        self.service_env.setdefault("vault", {}).update(
            {
                "COFFRE_WITNESS_URLS": f"{DEV_WITNESS_NAME}={url}",
                "COFFRE_WITNESS_CA": str(tls.ca_cert),
                "COFFRE_WITNESS_KEYS": str(public),
            }
        )
        self.service_env.setdefault(WITNESS, {}).update(
            {
                "COFFRE_WITNESS_NAME": DEV_WITNESS_NAME,
                "COFFRE_WITNESS_KEY": str(private),
                "COFFRE_WITNESS_OPERATOR_CERTS": trusted,
                "COFFRE_WITNESS_HOST": "127.0.0.1",
                "COFFRE_WITNESS_TLS_CERT": str(tls.server_cert),
                "COFFRE_WITNESS_TLS_KEY": str(tls.server_key),
            }
        )
        return DevWitness(url, public, tls.ca_cert)

    def ops_port(self, name: str) -> int:
        """Each child's /healthz, /readyz and /metrics port: COFFRE_OPS_PORT, + 1, + 2 in the order
        of SERVICES, + 3 for the regulator API, + 4 for the auditor, then the extra ingest replicas
        (0: off)."""
        base = self.settings.ops_port
        if not base or name == WITNESS:  # the witness serves /healthz and /metrics on its own port
            return 0
        if name == REGULATOR:
            return base + len(SERVICES)
        if name == AUDITOR:
            return base + len(SERVICES) + 1
        service, _, replica = name.partition("-")
        if replica:
            return base + len(SERVICES) + 2 + int(replica) - 2
        return base + SERVICES.index(service)

    def env(self, name: str | None = None) -> dict[str, str]:
        """The children's environment: this process's, with every setting as its COFFRE_ variable."""
        env = dict(os.environ)
        for setting in type(self.settings).model_fields:
            value = getattr(self.settings, setting)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
                if not value:
                    continue
            if isinstance(value, set):
                value = ",".join(sorted(value))
            elif isinstance(value, tuple):
                value = ";".join(value)
            env[f"COFFRE_{setting.upper()}"] = str(value)
        env["COFFRE_BOOTSTRAP_SERVERS"] = self.bootstrap or ""
        if name is not None:
            env["COFFRE_OPS_PORT"] = str(self.ops_port(name))
            if self.static_members and name.partition("-")[0] in SERVICES:
                env["COFFRE_KAFKA_GROUP_INSTANCE_ID"] = f"{self.settings.topic_prefix}{name}"
            for variable, value in self.service_env.get(name.partition("-")[0], {}).items():
                if value is None:
                    env.pop(variable, None)
                else:
                    env[variable] = value
        return env

    def spawn(self, name: str) -> subprocess.Popen[bytes]:
        log = open(Path(self.settings.data_dir) / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        child = popen(
            [sys.executable, "-m", "coffre.cli", COMMANDS.get(name, name.partition("-")[0])],
            env=self.env(name),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.children[name] = child
        return child

    def wait_ready(self, timeout: float = 90.0) -> dict[str, str]:
        """Wait until every child with an ops port answers ``/readyz`` 200 (at most ``timeout``); the
        children still not ready then, each with its last answer (none when ``COFFRE_OPS_PORT`` is 0)."""
        import urllib.error
        import urllib.request

        pending = {name: "no answer yet" for name in self.children if self.ops_port(name)}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for name in list(pending):
                child = self.children[name]
                if child.poll() is not None:
                    pending[name] = f"exited with {child.returncode}"
                    continue
                url = f"http://{self.settings.http_host}:{self.ops_port(name)}/readyz"
                try:
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        if answer.status == 200:
                            del pending[name]
                except urllib.error.HTTPError as exc:
                    pending[name] = f"/readyz {exc.code}: {exc.read()[:300].decode(errors='replace')}"
                except OSError as exc:
                    pending[name] = f"no answer ({exc})"
            if pending:
                time.sleep(0.2)
        return pending

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        child = self.children[name]
        if child.poll() is None:
            child.send_signal(sig)
        child.wait(timeout=30)

    def stop(self, timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM every service (they drain and commit), then the witness (the vault's last
        checkpoints are cosigned as it stops), then stop the broker."""
        codes: dict[str, int | None] = {}
        services = {name: child for name, child in self.children.items() if name != WITNESS}
        witness = {name: child for name, child in self.children.items() if name == WITNESS}
        for group in (services, witness):
            for child in group.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for name, child in group.items():
                try:
                    codes[name] = child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
                    codes[name] = child.wait()
        if self.broker:
            self.broker.stop()
        return codes


def _folder(variable: str, path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        configuration_error(f"{variable}: cannot create {path}: {exc.strerror or exc}")


def _readable(variable: str, path: Path | None) -> None:
    if path is None:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        configuration_error(f"{variable}: cannot read {path}: {exc.strerror or exc}")
