"""Waiting for the services' consumer groups, asked of the broker, instead of sleeping for as long as
a join might take."""

from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient


def wait_for_group(bootstrap: str, group: str, members: int, timeout: float = 60.0) -> float:
    """Seconds until the consumer group ``group`` is stable with ``members`` members, each assigned
    at least one partition (``timeout`` if it is not by then: the test goes on, as it did after its
    sleep)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            described = admin.describe_consumer_groups([group], request_timeout=5)[group].result()
        except KafkaException:
            described = None
        if (
            described is not None
            and described.state == ConsumerGroupState.STABLE
            and len(described.members) == members
            and all(m.assignment is not None and m.assignment.topic_partitions for m in described.members)
        ):
            return round(time.monotonic() - started, 1)
        time.sleep(0.2)
    return timeout
