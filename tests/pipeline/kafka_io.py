"""Reading and writing the services' topics from tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from coffre_ingest.step import InputMessage, Output

from coffre.adapters.kafka import PRODUCER_TUNING, partitions_for
from coffre.config import Topics
from coffre.domain.codec import Limits
from coffre.domain.messages import Receipt

from ingest_fold import IngestFold, ingest_batch

T = TypeVar("T")


def normalized_rows(
    fold: IngestFold, topics: Topics, events: list[bytes], start_offset: int = 0
) -> list[Output]:
    """What ingest would publish for ``events`` (IDEvt assigned by ``fold``), after what it published."""
    batch = [InputMessage(0, start_offset + i, raw, [], timestamp=i) for i, raw in enumerate(events)]
    before = len(fold.outputs)
    ingest_batch(batch, fold, topics, Limits())
    return fold.outputs[before:]


async def publish_rows(bootstrap: str, rows: list[Output]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await producer.start()
    try:
        sent = [await producer.send(r.topic, r.value, key=r.key, headers=r.headers) for r in rows]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def read_topic(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout: float,
    decode: Callable[[ConsumerRecord], T],
    settle: float = 0.5,
) -> list[T]:
    """The records on ``topic`` from its beginning, each ``decode``-d, once ``expected`` arrived or
    ``timeout`` passed (then whatever arrived), and ``settle`` seconds more to catch any surplus."""
    partitions = await partitions_for(bootstrap, topic)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await consumer.start()
    decoded: list[T] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        until: float | None = None
        while time.monotonic() < (until or deadline):
            for records in (await consumer.getmany(timeout_ms=100)).values():
                decoded += [decode(r) for r in records]
            if until is None and len(decoded) >= expected:
                until = time.monotonic() + settle
    finally:
        await consumer.stop()
    return decoded


async def read_receipts(bootstrap: str, topic: str, expected: int, timeout: float) -> list[Receipt]:
    """The receipts on ``topic`` (:func:`read_topic`)."""
    return await read_topic(bootstrap, topic, expected, timeout, lambda r: Receipt.decode(r.value))
