"""Which partition of ``events.in`` holds a coffre's events: the one whose owner numbers them.

IDEvt is a pure fold over one partition of ``events.in`` (see ``services/ingest``), so every
event of a coffre must reach the same partition. The rule is Kafka's default partitioner on
the key ``str(IDCoffre)`` (murmur2, as the Java client, aiokafka and librdkafka's
``murmur2_random`` partitioner compute it): a platform that keys its records by IDCoffre lands
them there directly, and ingest forwards any other record to that partition once.
"""

from __future__ import annotations

from functools import lru_cache

from aiokafka.partitioner import murmur2

FORWARDED_FROM = "coffre-forwarded-from"
"""Header of a copy ingest forwarded to its coffre's partition: ``<partition>:<offset>`` of the
original. Headers named ``coffre-…`` are coffre's own; a platform must not set them."""


def coffre_key(id_coffre: int) -> bytes:
    """The record key of a coffre's events, on ``events.in`` and ``events.normalized`` alike."""
    return str(id_coffre).encode()


@lru_cache(maxsize=4096)
def partition_of(key: bytes, partitions: int) -> int:
    """Kafka's default partition of ``key`` among ``partitions`` (murmur2, positive, modulo).
    Remembered for the last 4,096 keys: murmur2 in Python cost ingest 2 % of its time, for a few
    coffres' keys asked again and again."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def coffre_partition(id_coffre: int, partitions: int) -> int:
    return partition_of(coffre_key(id_coffre), partitions)


def forwarded_from(value: bytes | None) -> tuple[int, int] | None:
    """The (partition, offset) a ``coffre-forwarded-from`` header names, or None when malformed."""
    if not value:
        return None
    head, sep, tail = value.partition(b":")
    if not sep or not head.isdigit() or not tail.isdigit() or len(head) > 6 or len(tail) > 19:
        return None
    return int(head), int(tail)
