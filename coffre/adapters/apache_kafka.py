"""Apache Kafka from its released jars: ``coffre up``'s broker, and the tests'.

The jars of one pinned release (:data:`KAFKA_VERSION`: ``org.apache.kafka:kafka_2.13`` and what it
depends on) are fetched once with Maven into a cache (``$COFFRE_KAFKA_CACHE``, else
``$XDG_CACHE_HOME/coffre`` or ``~/.cache/coffre``, then ``kafka-<version>/libs``), Maven checking each
download against the repository's checksums (``--strict-checksums``) and coffre checking every jar
against the SHA-256 it ships (``apache-kafka-<version>.sha256`` beside this module) before any runs.
``$COFFRE_KAFKA_HOME`` names an unpacked Apache Kafka release instead (its ``libs/``; the operator
vouches for it, nothing is fetched or checked).

A node is ``java -cp 'libs/*' kafka.Kafka server.properties`` after ``kafka.tools.StorageTool
format`` (KRaft: each node a broker and a controller), started tied to its parent
(:mod:`coffre.adapters.lifeline`): it dies with the process that started it, even on SIGKILL.

* :class:`KafkaNode`: one node, any configuration (the tests build secured brokers and a three-node
  cluster from it).
* :class:`LocalKafka`: ``coffre up``'s broker, one plaintext node on 127.0.0.1 whose log lives under
  the data folder (started again on the same folder, it goes on from what it holds), sized for a
  small machine: a few hundred MB of memory, each partition trimmed to its newest
  :data:`RETENTION_BYTES` (docs/operations.md, "coffre up's broker").
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .broker import port_free
from .lifeline import popen, tied

log = logging.getLogger("coffre.kafka")

__all__ = [
    "HOST",
    "KAFKA_VERSION",
    "JavaMissing",
    "KafkaNode",
    "KafkaUnavailable",
    "LocalKafka",
    "cluster_id",
    "common_config",
    "java",
    "kafka_libs",
]

KAFKA_VERSION = "4.4.0"
"""The Apache Kafka release coffre runs: the newest Maven Central serves whole."""
LOG4J_VERSION = "2.25.5"
"""The log4j 2 that kafka_2.13 4.4.0 depends on; its slf4j 1 binding routes the broker's logs."""
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
HOST = "127.0.0.1"
HEAP_MB = 256
"""``coffre up``'s broker heap (``-Xmx``): with the serial collector and the C1 compiler only, the
whole JVM stays at about 300 MB resident (docs/operations.md)."""
JVM_OPTIONS = (
    "-Xms32m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
START_TIMEOUT = 120.0
"""The most a node may take to start (well under 20 s on a quiet machine; 50 s at a load of 30)."""
STOP_GRACE = 30.0
"""A node's controlled shutdown (it flushes and closes its logs) before it is killed."""
SEGMENT_BYTES = 16 * 1024 * 1024
RETENTION_BYTES = 128 * 1024 * 1024
"""``coffre up``'s broker keeps the newest 128 MiB of each partition (about 45 minutes of inputs of
one partition at 300 events/s over 6 partitions), with no time limit: a partition that gets nothing
keeps what it holds, ingest's snapshots among them (a time limit would one day delete a quiet
partition's only snapshot)."""
HOW_TO_GET_JAVA = (
    "install a Java runtime (17 or newer) and Maven, for example `apt-get install "
    "openjdk-17-jre-headless maven` or `brew install openjdk maven`, or set JAVA_HOME"
)

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>coffre</groupId>
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


class KafkaUnavailable(RuntimeError):
    """Apache Kafka cannot run here, or a node did not start: the message says why."""


class JavaMissing(KafkaUnavailable):
    """No Java runtime (or no Maven to fetch the jars the first time)."""


# ---------------------------------------------------------------------------------------------- jars


def java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JavaMissing(f"Apache Kafka needs a Java runtime, and none is installed: {HOW_TO_GET_JAVA}")
    return found


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    root = os.environ.get("COFFRE_KAFKA_CACHE")
    if root:
        return Path(root) / f"kafka-{version}"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "coffre" / f"kafka-{version}"


def pinned_checksums(version: str = KAFKA_VERSION) -> dict[str, str]:
    """Jar name → SHA-256 of every jar of ``version``, as shipped with coffre."""
    lock = Path(__file__).with_name(f"apache-kafka-{version}.sha256")
    sums: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


def checksum_problems(libs: Path, pinned: Mapping[str, str]) -> list[str]:
    """What differs between the jars of ``libs`` and ``pinned`` (empty: they are exactly those)."""
    have = {p.name for p in libs.glob("*.jar")}
    problems = [f"{name}: missing" for name in sorted(set(pinned) - have)]
    problems += [f"{name}: not one of the release's jars" for name in sorted(have - set(pinned))]
    for name in sorted(have & set(pinned)):
        digest = hashlib.sha256((libs / name).read_bytes()).hexdigest()
        if digest != pinned[name]:
            problems.append(f"{name}: SHA-256 {digest}, not {pinned[name]}")
    return problems


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The folder of Apache Kafka's jars: ``$COFFRE_KAFKA_HOME/libs``, or the cache's, fetched with
    Maven the first time and checked against the pinned checksums every time (under a lock: two
    processes never fetch at once, the second finds the first's jars)."""
    release = os.environ.get("COFFRE_KAFKA_HOME", "").strip()
    if release:
        libs = Path(release) / "libs"
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise KafkaUnavailable(
                f"COFFRE_KAFKA_HOME={release}: no libs/kafka_2.13-*.jar there; point it at an unpacked "
                "Apache Kafka release (the folder kafka_2.13-<version>/ of its .tgz)"
            )
        return libs
    home = cache_dir(version)
    libs, done = home / "libs", home / "libs.complete"
    pinned = pinned_checksums(version)
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            problems = checksum_problems(libs, pinned)
            if not problems:
                return libs
            log.warning(
                "the cached Apache Kafka jars in %s differ from the release's: %s; fetching them again",
                libs,
                "; ".join(problems),
            )
            done.unlink()
        _fetch(home, version, pinned)
        return libs


def _fetch(home: Path, version: str, pinned: Mapping[str, str]) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaMissing(
            f"Apache Kafka {version}'s jars are fetched once with Maven, and mvn is not installed: "
            f"{HOW_TO_GET_JAVA}; or set COFFRE_KAFKA_HOME to an unpacked Apache Kafka release"
        )
    log.warning("fetching Apache Kafka %s's jars with Maven into %s (once)", version, home)
    (home / "pom.xml").write_text(POM.format(kafka=version, log4j=LOG4J_VERSION))
    partial = home / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    run = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "--strict-checksums",
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={partial}",
        ],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if run.returncode != 0:
        raise KafkaUnavailable(
            f"mvn could not fetch org.apache.kafka:kafka_2.13:{version} (exit {run.returncode}), in "
            f"{home}:\n{(run.stdout + run.stderr)[-3000:]}"
        )
    problems = checksum_problems(partial, pinned)
    if problems:
        shutil.rmtree(partial, ignore_errors=True)
        raise KafkaUnavailable(
            f"the jars Maven fetched for Apache Kafka {version} are not the release's: {'; '.join(problems)}"
        )
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    (home / "libs.complete").write_text(f"{version}\n")


def log4j_config(libs: Path) -> Path:
    """The brokers' log4j 2 configuration (to standard output, which goes to the node's log)."""
    config = libs.parent / "log4j2.properties"
    if not config.is_file() or config.read_text() != LOG4J2:
        with contextlib.suppress(OSError):  # a release's folder may be read-only: then a copy of ours
            config.write_text(LOG4J2)
            return config
        config = cache_dir() / "log4j2.properties"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(LOG4J2)
    return config


# ------------------------------------------------------------------------------------------- nodes


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as ``random-uuid``)."""
    while True:  # one in 64 begins with '-', which the storage tool takes for an option (seen once)
        ident = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not ident.startswith("-"):
            return ident


def common_config(node_id: int) -> dict[str, object]:
    """What every node coffre runs shares: broker and controller at once, no topic auto-creation,
    groups joined without the initial delay, few threads, segments of :data:`SEGMENT_BYTES`."""
    return {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.listener.names": "CONTROLLER",
        "num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 6,
        "transaction.state.log.num.partitions": 3,
        "auto.create.topics.enable": "false",
        "log.segment.bytes": SEGMENT_BYTES,
        "num.io.threads": 2,
        "num.network.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        "share.coordinator.state.topic.num.partitions": 1,
    }


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


@dataclass
class KafkaNode:
    """One KRaft node (broker and controller) run by ``java kafka.Kafka``, tied to its parent."""

    node_id: int
    folder: Path
    libs: Path
    config: dict[str, object]
    listeners: dict[str, int]
    """Listener name → port (the controller's included)."""
    heap_mb: int = 512
    log_path: Path | None = None
    """Where its output goes (default: ``server.log`` in its folder), appended to across starts."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log(self) -> Path:
        return self.log_path or self.folder / "server.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            java(),
            f"-Xmx{self.heap_mb}m",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j_config(self.libs)}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    @property
    def formatted(self) -> bool:
        """Whether its log folder was formatted already (it holds a cluster's data)."""
        return any(
            (Path(str(d)) / "meta.properties").is_file() for d in str(self.config["log.dirs"]).split(",")
        )

    def format(self, cluster: str, scram: Iterable[tuple[str, str]] = ()) -> None:
        """Write its configuration and format its log folder (kept as it is when already formatted)."""
        self.write_config()
        extra: list[str] = []
        for name, password in scram:
            extra += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
        run = subprocess.run(
            tied(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    cluster,
                    "--config",
                    str(self.folder / "server.properties"),
                    "--ignore-formatted",
                    *extra,
                )
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
        if run.returncode != 0:
            raise KafkaUnavailable(
                f"StorageTool format failed (exit {run.returncode}):\n{run.stdout}{run.stderr}"
            )

    def write_config(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "server.properties").write_text(_properties(self.config))

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = popen(
                self._java("kafka.Kafka", str(self.folder / "server.properties")),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a Ctrl-C to the parent is not its
            )

    def starts(self) -> int:
        """How many times its log says it started (a restart waits for one more)."""
        with contextlib.suppress(OSError):
            return self.log.read_bytes().count(b"Kafka Server started")
        return 0

    def wait_started(self, timeout: float = START_TIMEOUT, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise KafkaUnavailable(
                    f"broker {self.node_id} exited {self.process.returncode}:\n{self.tail()}"
                )
            if self.starts() > since:
                return
            time.sleep(0.2)
        raise KafkaUnavailable(f"broker {self.node_id} not started within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        if sig == signal.SIGKILL:
            self.process.wait(timeout=30)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """A controlled shutdown (SIGTERM; a paused node is resumed first), SIGKILL after ``grace``."""
        self.terminate()
        return self.reap(grace)

    def terminate(self) -> None:
        """Ask for a controlled shutdown (a paused node is resumed first), without waiting."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGCONT)
                os.killpg(self.process.pid, signal.SIGTERM)

    def reap(self, grace: float = STOP_GRACE) -> int | None:
        """Wait ``grace`` for the node to stop after :meth:`terminate`, then SIGKILL it."""
        if self.process is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        return self.process.returncode


class LocalKafka:
    """``coffre up``'s broker: one plaintext KRaft node on 127.0.0.1:``port`` (its controller on
    ``port`` + 1), its log in ``<data>/kafka``, its output in ``log_path``. Started again on the same
    folder it goes on from what it holds; :attr:`fresh` says whether this start formatted a new log
    (the IDEvt counters it held, if any, are gone: ``coffre up`` seeds them from the vault's
    journals)."""

    def __init__(self, data_dir: Path, port: int, log_path: Path, heap_mb: int = HEAP_MB):
        self.folder = Path(data_dir) / "kafka"
        self.port = port
        self.log_path = log_path
        self.heap_mb = heap_mb
        self.node: KafkaNode | None = None
        self.fresh = False

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.node.pid if self.node is not None else None

    @property
    def running(self) -> bool:
        return self.node is not None and self.node.running

    def config(self) -> dict[str, object]:
        controller = self.port + 1
        return {
            **common_config(1),
            "controller.quorum.voters": f"1@{HOST}:{controller}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self.folder / "data",
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            # coffre's services keep sessions of a few seconds (a dead member's partitions move sooner);
            # Apache Kafka's default minimum is 6 s
            "group.min.session.timeout.ms": 1000,
            # bounded disk: each partition's newest RETENTION_BYTES, no time limit
            "log.retention.ms": -1,
            "log.retention.bytes": RETENTION_BYTES,
            "log.retention.check.interval.ms": 60_000,
        }

    def start(self, timeout: float = START_TIMEOUT) -> str:
        """Start the node (fetching the jars the first time) and wait until it serves; its address.
        Raises :class:`KafkaUnavailable` (:class:`JavaMissing` without a JVM) with the reason."""
        java()  # no JVM: said before anything is fetched or written
        libs = kafka_libs()
        for port in (self.port, self.port + 1):
            if not port_free(port):
                raise KafkaUnavailable(f"{HOST}:{port} is taken")
        node = KafkaNode(
            1,
            self.folder,
            libs,
            self.config(),
            {"PLAINTEXT": self.port, "CONTROLLER": self.port + 1},
            heap_mb=self.heap_mb,
            log_path=self.log_path,
        )
        self.fresh = not node.formatted
        if self.fresh:
            node.format(cluster_id())
        else:
            node.write_config()
        since = node.starts()
        node.start()
        self.node = node
        try:
            node.wait_started(timeout, since=since)
        except BaseException:
            self.stop()
            raise
        return self.bootstrap

    def stop(self, grace: float = STOP_GRACE) -> None:
        node, self.node = self.node, None
        if node is not None:
            node.stop(grace)
