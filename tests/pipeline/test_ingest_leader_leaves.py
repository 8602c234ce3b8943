"""An ingest replica that leads its group leaves it at SIGTERM on Apache Kafka (issue 30, point 6).

``stop_consumer(leave_as_leader=False)`` keeps the leader from leaving, for Tansu 0.6.0's defect (a
leader that leaves a forming group stays its leader and the group never forms again). It was asked on
every broker: on Apache Kafka the leader of ingest's group let its session expire at every SIGTERM, so
each rolling update lost one session of normalization (measured: the survivor got the partitions 5.6 s
after the SIGTERM with a 6 s session, the broker logging "has failed, removing it from the group"). Now
it is asked only on the embedded broker (:func:`coffre.adapters.kafka.on_embedded_broker`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from coffre.adapters.broker import free_port_block
from coffre.adapters.kafka import PRODUCER_TUNING, drain, on_embedded_broker
from coffre.commands.stack import Stack
from coffre.domain.messages import CORRELATION_ID, ID_COFFRE, ID_EVT, header

from events import POINSCRIT
from pipeline.ops_http import metric
from pipeline.stack_settings import stack_settings

SESSION = 12.0
"""ingest's session: a leader that let it expire would hand its partitions over after about this."""
PARTITIONS = 3
COFFRES = (41, 42, 43, 44, 45, 46)


def event(n: int) -> tuple[int, bytes]:
    coffre = COFFRES[n % len(COFFRES)]
    raw = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())
    return coffre, raw.replace(b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>ll-{n}</IDJoueur>".encode())


async def publish(bootstrap: str, topic: str, numbers: range) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await producer.start()
    try:
        for n in numbers:
            coffre, raw = event(n)
            await producer.send_and_wait(
                topic, raw, key=str(coffre).encode(), headers=[(CORRELATION_ID, f"ll-{n}".encode())]
            )
    finally:
        await producer.stop()


def log_lines(path: Path) -> list[dict]:
    lines = []
    for text in path.read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


def last_election(path: Path) -> str:
    """When the service logging to ``path`` last performed the group's assignment, as its logs write time
    (ISO 8601 UTC; "" if never): aiokafka's leader does, at every rebalance it leads."""
    return max(
        (
            line.get("time", "")
            for line in log_lines(path)
            if "Elected group leader" in line.get("message", "")
        ),
        default="",
    )


def owned(stack: Stack, name: str) -> float:
    try:
        return metric(stack, name, "coffre_ingest_partitions")
    except AssertionError:  # not serving yet
        return -1.0


def wait_for(condition, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, what
        time.sleep(0.05)
    return time.monotonic() - started


def test_the_leader_of_ingests_group_leaves_it_at_sigterm_on_apache_kafka(
    kafka_bootstrap, topic_prefix, tmp_path
):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        partitions=PARTITIONS,
        ops_port=free_port_block(8),
        ingest_session_seconds=SESSION,
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap, ingest_replicas=2)
    logs = tmp_path / "logs"
    try:
        stack.start(services=("ingest",))
        wait_for(
            lambda: (
                owned(stack, "ingest") + owned(stack, "ingest-2") == PARTITIONS
                and min(owned(stack, "ingest"), owned(stack, "ingest-2")) > 0
            ),
            90,
            f"the two replicas never shared the partitions (logs in {logs})",
        )
        asyncio.run(publish(kafka_bootstrap, settings.topics.events_in, range(30)))
        # the leader: the member that performed the last assignment, which gave both replicas their share
        leader = max(("ingest", "ingest-2"), key=lambda name: last_election(logs / f"{name}.log"))
        survivor = "ingest-2" if leader == "ingest" else "ingest"

        stack.children[leader].send_signal(signal.SIGTERM)
        took = wait_for(
            lambda: owned(stack, survivor) == PARTITIONS,
            2 * SESSION,
            f"{survivor} never got every partition (logs in {logs})",
        )
        code = stack.children[leader].wait(timeout=30)
        asyncio.run(publish(kafka_bootstrap, settings.topics.events_in, range(30, 60)))
        normalized = asyncio.run(wait_normalized(kafka_bootstrap, settings.topics.normalized, 60))
    finally:
        codes = stack.stop()
    print(
        f"\nthe survivor held every partition {took:.2f} s after the leader's SIGTERM (session {SESSION:g} s)"
    )
    assert code == 0, f"the leader exited {code} (logs in {logs})"
    leader_log = (logs / f"{leader}.log").read_text()
    assert "not leaving the group as its leader" not in leader_log
    assert "LeaveGroup request succeeded" in leader_log, f"no LeaveGroup (logs in {logs})"
    assert took < SESSION / 2, f"{took:.1f} s: the leader's session expired instead (logs in {logs})"
    assert all(c == 0 for c in codes.values()), codes
    # nothing lost, nothing numbered twice: each coffre IDEvt 1..n, a copy published again identical
    numbered: dict[int, dict[int, bytes]] = defaultdict(dict)
    for record in normalized:
        headers = list(record.headers)
        coffre, id_evt = int(header(headers, ID_COFFRE)), int(header(headers, ID_EVT))
        assert numbered[coffre].setdefault(id_evt, record.value) == record.value, (coffre, id_evt)
    assert {c: sorted(ids) for c, ids in numbered.items()} == {c: list(range(1, 11)) for c in COFFRES}


async def wait_normalized(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    while True:
        records = await drain(bootstrap, topic)
        ids = {(header(list(r.headers), ID_COFFRE), header(list(r.headers), ID_EVT)) for r in records}
        if len(ids) >= expected or time.monotonic() > deadline:
            return records
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("broker", ["kafka_bootstrap", "tansu_bootstrap"])
def test_which_broker_the_services_talk_to_is_told_by_its_cluster_id(broker, request):
    bootstrap = request.getfixturevalue(broker)

    async def tell() -> bool:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            return await on_embedded_broker(consumer)
        finally:
            await consumer.stop()

    assert asyncio.run(tell()) is (broker == "tansu_bootstrap")
