"""Graceful shutdown, service by service (PRODUCT.md, Operations): SIGTERM under load drains,
fsyncs, commits and exits 0 within 10 s, and nothing is lost or done twice.

"Committed" is checked from the outside: after the restart, the service reads nothing it
had already handled (its redelivery counter on /metrics stays 0), and every event gets
exactly one acquittal."""

from __future__ import annotations

import asyncio
import re
import signal
import threading
import time
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from coffre_vault.history import recorded_events

from coffre.adapters.broker import free_port_block
from coffre.adapters.storage import LocalStorage
from coffre.commands.stack import SERVICES, Stack
from coffre.domain.messages import Acquittal

from .ops_http import metric, wait_ready
from .test_crash import COFFRES, publish
from pipeline.stack_settings import stack_settings

EVENTS = 800
DEADLINE = 10.0


async def read_acquittals(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float
) -> Counter:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await consumer.start()
    seen: Counter[str] = Counter()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        quiet_until = None
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    acquittal = Acquittal.decode(r.value)
                    assert acquittal.status == "recorded", acquittal
                    seen[acquittal.correlation_id] += 1
            if len(seen) >= expected:  # then read on a little: a duplicate would show now
                quiet_until = quiet_until or time.monotonic() + 2
                if time.monotonic() > quiet_until:
                    break
    finally:
        await consumer.stop()
    return seen


@pytest.mark.parametrize("victim", SERVICES)
def test_sigterm_under_load_drains_commits_and_exits_within_10s(
    kafka_bootstrap, topic_prefix, tmp_path, victim
):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        ops_port=free_port_block(len(SERVICES)),
        lot_max_events=100,
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()
    done = threading.Event()
    publisher = threading.Thread(
        # about 200 events/s for 4 s: the signal lands mid-stream, 1.5 s in
        target=lambda: asyncio.run(
            publish(kafka_bootstrap, settings.topics.events_in, done, events=EVENTS, burst=40, pause=0.2)
        )
    )
    try:
        for name in SERVICES:
            checks = wait_ready(stack, name)["checks"]
            assert checks["broker"] == "ok"
        publisher.start()
        time.sleep(1.5)
        child = stack.children[victim]
        assert child.poll() is None
        started = time.monotonic()
        child.send_signal(signal.SIGTERM)
        assert not done.is_set(), "the load ended before the signal: the test proves nothing"
        code = child.wait(timeout=30)
        elapsed = time.monotonic() - started
        assert code == 0, f"{victim} exited with {code} (logs in {tmp_path}/logs)"
        assert elapsed < DEADLINE, f"{victim} took {elapsed:.1f}s to stop"
        stack.spawn(victim)
        wait_ready(stack, victim)
        publisher.join(timeout=60)
        acquittals = asyncio.run(
            read_acquittals(kafka_bootstrap, settings.topics.acquittals, 3, EVENTS, timeout=120)
        )
        redelivered = {
            "ingest": "coffre_inputs_redelivered_total",
            "vault": "coffre_events_redelivered_total",
            "acquittal": None,
        }[victim]
        if redelivered:
            assert metric(stack, victim, redelivered) == 0, f"{victim} read again what it had committed"
        work = {
            "ingest": "coffre_events_normalized_total",
            "vault": "coffre_events_recorded_total",
            "acquittal": "coffre_acquittals_total",
        }[victim]
        assert metric(stack, victim, work) > 0, f"the restarted {victim} did no work: the test proves nothing"
    finally:
        done.set()
        codes = stack.stop()
    assert all(c == 0 for c in codes.values()), codes
    missing = EVENTS - len(acquittals)
    assert missing == 0, f"{missing} events without an acquittal (logs in {tmp_path}/logs)"
    twice = [c for c, n in acquittals.items() if n > 1]
    assert not twice, f"{len(twice)} events acquitted twice, e.g. {twice[:3]}"

    players = []
    for coffre in COFFRES:
        records = recorded_events(
            LocalStorage(tmp_path / "archive"), tmp_path / "vault" / "journal", "0099", coffre
        )
        assert [r.id_evt for r in records] == list(range(1, len(records) + 1))
        players += [int(re.search(rb"<IDJoueur>crash-(\d+)</IDJoueur>", r.event).group(1)) for r in records]
    assert sorted(players) == list(range(EVENTS)), "an event is missing or recorded twice"
