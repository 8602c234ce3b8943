"""Ingest replicas that die, stop and come back as zombies, under load (issue 11).

3 ingest replicas share the partitions of events.in; a platform (librdkafka, through
confluent-kafka, whose default partitioner is not Kafka's murmur2: most events land on a
partition that does not own their coffre and are forwarded) publishes at RATE over 5 coffres,
at least 3,000 events and until the last failure is over, while replicas are SIGKILLed and
SIGTERMed at random, 10 times, and one is paused with SIGSTOP past its session and resumed
(the zombie). Each failure is timed from the signal to the moment every coffre has an
acquittal again for an event published after the signal. At the end every event has its
acquittal, each coffre's journal holds IDEvt 1..n, each event exactly once, and the chain
recomputes (PRODUCT.md invariant 1, "a replica that comes back after its work moved included").
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time

import pytest
from coffre_vault.history import recorded_events
from confluent_kafka import Producer

from coffre.adapters.storage import LocalStorage
from coffre.commands.stack import Stack
from coffre.config import Settings
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.messages import CORRELATION_ID, Acquittal

from events import POINSCRIT
from pipeline.acquittals import read_acquittals
from pipeline.groups import wait_for_group
from pipeline.stack_settings import stack_settings

EVENTS = 3000  # at least; the platform goes on publishing until the last failure is over
COFFRES = (21, 22, 23, 24, 25)
RATE = 100  # events/s: the kills and the zombie all land mid-stream
KILLS = 6
"""Replicas killed and started again in turn, every replica by SIGKILL then by SIGTERM (with 2 or 3
replicas, six kills cover each with both; ten drawn at random left one never killed), the zombie
paused after the fifth."""
RESUME_WITHIN = 10.0  # seconds: the bound on how long a coffre waits after a failure
SLACK = 2.0  # a loaded machine: the test runs 3 ingest replicas, the vault, the acquittal, the broker and a platform on 2 cores


def event(n: int) -> bytes:
    coffre = COFFRES[n % len(COFFRES)]
    return POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode()).replace(
        b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>fo-{n}</IDJoueur>".encode()
    )


class Platform:
    """Publishes at RATE and reads the acquittals back, noting when each was sent and answered."""

    def __init__(self, bootstrap: str, settings: Settings):
        self.bootstrap = bootstrap
        self.settings = settings
        self.sent: dict[str, float] = {}
        self.answered: dict[str, tuple[float, Acquittal]] = {}
        self.done = threading.Event()
        self.enough = threading.Event()  # set when the failures are over
        self.stop = threading.Event()

    def publish(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})
        start = time.monotonic()
        n = 0
        while (n < EVENTS or not self.enough.is_set()) and not self.stop.is_set():
            delay = start + n / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            correlation = f"fo-{n}"
            # half keyed by IDCoffre (librdkafka hashes it with CRC32, not murmur2), half by request
            key = str(COFFRES[n % len(COFFRES)]) if n % 2 else correlation
            producer.produce(
                self.settings.topics.events_in,
                value=event(n),
                key=key.encode(),
                headers=[(CORRELATION_ID, correlation.encode())],
            )
            self.sent[correlation] = time.monotonic()
            producer.poll(0)
            n += 1
        assert producer.flush(60) == 0
        self.done.set()

    def resumed_after(self, moment: float, failure: str, timeout: float = 60.0) -> tuple[str, float]:
        """How long after ``moment`` every coffre had an acquittal again for an event sent after it.

        The platform is still publishing (``enough`` is set only after the last failure), so a
        coffre without a fresh acquittal is one whose events wait on the failure.
        """
        deadline = moment + timeout
        while time.monotonic() < deadline:
            fresh = {
                acquittal.id_coffre
                for correlation, (
                    _,
                    acquittal,
                ) in self.answered.copy().items()  # the reader thread adds to it
                if self.sent.get(correlation, 0.0) > moment
            }
            if fresh >= set(COFFRES):
                return failure, round(time.monotonic() - moment, 1)
            time.sleep(0.05)
        return failure, timeout

    def read(self) -> None:
        config = {"bootstrap.servers": self.bootstrap, "group.id": "platform"}
        read_acquittals(
            config, self.settings.topics.acquittals, self.settings.partitions, self.answered, self.stop
        )


# 3 replicas: more rebalances and zombies than 2; two replicas hit by every kind of signal are the chaos
# soak's (tests/pipeline/test_chaos_soak.py), which checks the same invariants from outside
@pytest.mark.parametrize("replicas", [3])
def test_ingest_replicas_fail_over_without_a_gap_a_reuse_or_a_loss(
    kafka_bootstrap, topic_prefix, tmp_path, replicas
):
    settings = stack_settings(
        kafka_bootstrap, topic_prefix, tmp_path, partitions=6, ingest_snapshot_seconds=1.0
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap, ingest_replicas=replicas)
    stack.start()
    names = ["ingest"] + [f"ingest-{n}" for n in range(2, replicas + 1)]
    platform = Platform(kafka_bootstrap, settings)
    # daemons: a test that fails midway must not leave a thread that keeps the interpreter alive
    reader = threading.Thread(target=platform.read, daemon=True)
    reader.start()
    rng = random.Random(20261123 + replicas)
    resumes: list[tuple[str, float]] = []
    try:
        wait_for_group(kafka_bootstrap, f"{settings.topic_prefix}ingest", replicas)  # each has partitions
        publisher = threading.Thread(target=platform.publish, daemon=True)
        publisher.start()
        time.sleep(2)
        for n in range(KILLS):
            # every replica in turn, each killed once by SIGKILL and once by SIGTERM
            victim = names[n % len(names)]
            sig = signal.SIGKILL if (n // len(names)) % 2 == 0 else signal.SIGTERM
            killed = time.monotonic()
            stack.kill(victim, sig)
            time.sleep(rng.uniform(0.2, 1.0))
            stack.spawn(victim)
            resumes.append(platform.resumed_after(killed, f"{sig.name} {victim}"))
            if n == 4:  # the zombie: paused past its session (6 s), then resumed after its work moved
                zombie = rng.choice(names)
                stack.children[zombie].send_signal(signal.SIGSTOP)
                paused = time.monotonic()
                resumes.append(platform.resumed_after(paused, f"SIGSTOP {zombie}"))
                time.sleep(max(0.0, paused + 10 - time.monotonic()))
                stack.children[zombie].send_signal(signal.SIGCONT)
                resumes.append(platform.resumed_after(time.monotonic(), f"SIGCONT {zombie}"))
            time.sleep(rng.uniform(0.2, 1.0))
        platform.enough.set()
        publisher.join(timeout=120)
        deadline = time.monotonic() + 120
        while len(platform.answered) < len(platform.sent) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        platform.enough.set()
        platform.stop.set()
        reader.join()
        codes = stack.stop()
    assert platform.done.is_set(), "the platform could not publish"
    missing = sorted(set(platform.sent) - set(platform.answered), key=lambda c: int(c[3:]))
    assert not missing, f"{len(missing)} events without acquittal, first {missing[:5]} (logs in {tmp_path})"
    assert {a.status for _, a in platform.answered.values()} == {"recorded"}, codes

    waits = sorted(platform.answered[c][0] - platform.sent[c] for c in platform.sent)
    print(f"\n{replicas} replicas: acquittal wait max {waits[-1]:.1f} s; resumed after {resumes}", end="")
    for failure, seconds in resumes:
        assert seconds <= RESUME_WITHIN + SLACK, f"acquittals resumed {seconds:.1f} s after {failure}"

    players: list[int] = []
    archive = LocalStorage(tmp_path / "archive")  # opening each journal verifies its chain
    for coffre in COFFRES:
        records = recorded_events(archive, tmp_path / "vault" / "journal", "0099", coffre)
        assert [r.id_evt for r in records] == list(range(1, len(records) + 1)), "a gap or a reuse"
        previous = GENESIS
        for r in records:
            assert chain_hash(previous, r.event) == r.chain_hash
            previous = r.chain_hash
            assert f"<IDCoffre>{coffre}</IDCoffre>".encode() in r.event
            players.append(int(re.search(rb"<IDJoueur>fo-(\d+)</IDJoueur>", r.event).group(1)))
    assert len(platform.sent) >= EVENTS
    assert sorted(players) == list(range(len(platform.sent))), "an event is missing or recorded twice"
    for correlation, (_, acquittal) in platform.answered.items():  # each acquittal names its own event
        n = int(correlation[3:])
        assert acquittal.id_coffre == COFFRES[n % len(COFFRES)]
