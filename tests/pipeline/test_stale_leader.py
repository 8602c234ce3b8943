"""A consumer whose partition's leader moved while it was not looking (a broker paused past its
session, then resumed) finds the new leader when its position is reset, on three Apache Kafka brokers.

aiokafka 0.14 asks the leader it knows for the offsets and, answered NotLeaderForPartition, asked the
same broker again with the same metadata until the periodic refresh, 5 minutes later: a chaos soak's
acquittal service got none of its partitions for 4.5 minutes after a broker was paused for 5 s
(bench/README.md, "Chaos soak"). ``coffre.adapters.kafka`` makes that request ask for fresh metadata,
as aiokafka's other paths do; this test fails without it (the position is not there in 20 s)."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from coffre.adapters.kafka import CONSUMER_TUNING


def leader(admin: AdminClient, topic: str) -> int | None:
    try:
        described = admin.describe_topics(TopicCollection([topic]), request_timeout=5)[topic].result(10)
    except Exception:  # a broker of the bootstrap list paused: ask again
        return None
    return described.partitions[0].leader.id if described.partitions[0].leader is not None else None


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_consumer_whose_partition_leader_moved_finds_the_new_one_at_a_reset(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    first = cluster.brokers[0]
    topic = f"stale-leader-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 5000})
    admin.create_topics([NewTopic(topic, replica_assignment=[[first.node_id, 2, 3]], num_partitions=1)])[
        topic
    ].result(30)
    wait_for(lambda: leader(admin, topic) == first.node_id, 30, "the topic's partition has its leader")

    async def scenario() -> float:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, **CONSUMER_TUNING)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.pause(tp)  # no fetch: nothing refreshes its metadata while the leader moves
            await asyncio.wait_for(consumer.position(tp), 20)
            assert consumer._client.cluster.leader_for_partition(tp) == first.node_id
            first.signal(signal.SIGSTOP)  # past its session (4 s): fenced, the leadership moves
            try:
                await asyncio.sleep(10)  # (a client asking while it is paused may be stuck on it)
            finally:
                first.signal(signal.SIGCONT)
            await asyncio.to_thread(
                wait_for, lambda: leader(admin, topic) not in (None, first.node_id), 60, "a new leader"
            )
            await asyncio.sleep(2)  # broker 1 answers again, as a follower: NotLeaderForPartition
            assert (
                consumer._client.cluster.leader_for_partition(tp) == first.node_id
            )  # what it knows is stale
            started = time.monotonic()
            await asyncio.wait_for(consumer.seek_to_end(tp), 20)  # a reset: the offsets asked of the leader
            await asyncio.wait_for(consumer.position(tp), 20)
            return time.monotonic() - started
        finally:
            await consumer.stop()

    took = asyncio.run(scenario())
    assert took < 20
    admin.delete_topics([topic])
