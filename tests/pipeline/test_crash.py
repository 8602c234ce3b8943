"""kill -9 (and SIGTERM) of ingest and of the vault, at random moments, several times, under load.

At the end, for each of 3 coffres: every accepted event is in the journal exactly once,
IDEvt runs 1..n without a gap, and the chain recomputes (PRODUCT.md invariants 1-4)."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import threading
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from coffre_vault.history import recorded_events

from coffre.adapters.kafka import PRODUCER_TUNING
from coffre.adapters.storage import LocalStorage
from coffre.commands.stack import Stack
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.messages import CORRELATION_ID, Receipt

from events import POINSCRIT
from pipeline.stack_settings import stack_settings

EVENTS = 2000
COFFRES = (11, 12, 13)


def event(n: int) -> bytes:
    coffre = COFFRES[n % len(COFFRES)]
    return POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode()).replace(
        b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>crash-{n}</IDJoueur>".encode()
    )


async def publish(
    bootstrap: str,
    topic: str,
    done: threading.Event,
    events: int = EVENTS,
    burst: int = 50,
    pause: float = 0.05,
) -> None:
    """``events`` events with correlation ids ``c-<n>``, ``burst`` at a time every ``pause`` seconds
    (by default about 1,000 events/s, so that kills land mid-stream); ``done`` is set at the end."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await producer.start()
    try:
        for n in range(events):
            await producer.send(
                topic, event(n), key=str(n).encode(), headers=[(CORRELATION_ID, f"c-{n}".encode())]
            )
            if n % burst == 0:
                await producer.flush()
                await asyncio.sleep(pause)
        await producer.flush()
    finally:
        await producer.stop()
        done.set()


async def wait_for_receipts(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float
) -> set[tuple[int, int]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await consumer.start()
    seen: set[tuple[int, int]] = set()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while len(seen) < expected and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    receipt = Receipt.decode(r.value)
                    seen.add((receipt.id_coffre, receipt.id_evt))
    finally:
        await consumer.stop()
    return seen


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_killing_ingest_and_vault_under_load_loses_nothing(kafka_bootstrap, topic_prefix, tmp_path, sig):
    """SIGKILL at random moments; SIGTERM too, which faust answers by acking the batch in hand
    (so ingest must finish its durable write first)."""
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()
    rng = random.Random(20261122)
    done = threading.Event()
    publisher = threading.Thread(
        target=lambda: asyncio.run(publish(kafka_bootstrap, settings.topics.events_in, done))
    )
    publisher.start()
    kills = 0
    try:
        time.sleep(6)  # let the services join their groups
        while not done.is_set() or kills < 6:
            victim = ("ingest", "vault")[kills % 2]
            time.sleep(rng.uniform(0.3, 2.5))
            stack.kill(victim, sig)
            kills += 1
            stack.spawn(victim)
            if kills >= 10:
                break
        publisher.join(timeout=120)
        seen = asyncio.run(
            wait_for_receipts(kafka_bootstrap, settings.topics.receipts, 3, EVENTS, timeout=180)
        )
    finally:
        codes = stack.stop()
    assert kills >= 6
    assert len(seen) == EVENTS, f"{len(seen)} receipts of {EVENTS} (logs in {tmp_path}/logs, exits {codes})"

    archive = LocalStorage(tmp_path / "archive")
    players: list[int] = []
    for coffre in COFFRES:  # opening the journal verifies its chain
        records = recorded_events(archive, tmp_path / "vault" / "journal", "0099", coffre)
        assert [r.id_evt for r in records] == list(range(1, len(records) + 1))
        previous = GENESIS
        for r in records:
            assert chain_hash(previous, r.event) == r.chain_hash
            previous = r.chain_hash
            assert f"<IDCoffre>{coffre}</IDCoffre>".encode() in r.event
            players.append(int(re.search(rb"<IDJoueur>crash-(\d+)</IDJoueur>", r.event).group(1)))
    assert sorted(players) == list(range(EVENTS)), "an event is missing or recorded twice"
