"""What the aiokafka services (vault, acquittal) share around their own step: topics created,
a consumer with manual commits and a producer, sending a batch's outputs, running until a signal."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.producer.message_accumulator import BatchBuilder

from coffre.config import Settings, configuration_error
from coffre.domain.messages import CORRELATION_ID, Headers

from .kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    OffsetCommitter,
    TopicMismatchError,
    ensure_topics,
    stop_consumer,
)
from .kafka_security import client_options

Output = tuple[bytes | None, bytes, str | None]
"""(key, value, correlation id) of a record to publish."""
Record = tuple[bytes | None, bytes, Headers]
"""(key, value, headers) of a record to publish."""

_PARTITION_CACHE = 4096
"""Keys whose partition is remembered per topic and partition count (the vault's keys are its
IDCoffre, few and repeated; murmur2 in Python costs more than the rest of a record's sending)."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    committer: OffsetCommitter
    _partitions: dict[tuple[str, int], dict[bytes, int]] = field(default_factory=dict)

    async def send_all(self, topic: str, outputs: Iterable[Output]) -> None:
        """Publish ``outputs`` to ``topic`` (the correlation id also as a header) and wait until
        the broker acknowledged every one."""
        await self.send_records(
            topic,
            (
                (key, value, [(CORRELATION_ID, correlation_id.encode())] if correlation_id else [])
                for key, value, correlation_id in outputs
            ),
        )

    async def send_records(self, topic: str, records: Iterable[Record]) -> None:
        """Publish ``records`` to ``topic`` and wait until the broker acknowledged every one.

        Each goes to the partition the producer's own partitioner gives its key (a random one
        without a key), in order within a partition, in one record batch per partition (as
        many as its size needs): far less work per record than one ``producer.send`` each,
        which builds a future, a partition lookup and a callback per record."""
        producer = self.producer
        partitions = sorted(await producer.partitions_for(topic))
        if not partitions:
            raise KafkaError(f"no partitions known for {topic!r}")
        partitioner = getattr(producer, "_partitioner", None) or DefaultPartitioner()
        known = self._partitions.get((topic, len(partitions)))
        if known is None or len(known) > _PARTITION_CACHE:
            known = self._partitions[(topic, len(partitions))] = {}
        now = int(time.time() * 1000)
        batches: dict[int, BatchBuilder] = {}
        deliveries: list[asyncio.Future] = []
        for key, value, headers in records:
            if key is None:
                partition = random.choice(partitions)
            else:
                partition = known.get(key)
                if partition is None:
                    partition = known[key] = partitioner(key, partitions, partitions)
            batch = batches.get(partition)
            if batch is None:
                batch = batches[partition] = producer.create_batch()
            if batch.append(timestamp=now, key=key, value=value, headers=headers) is None:
                # full: send it, and begin the next one (a first record always fits)
                deliveries.append(await producer.send_batch(batch, topic, partition=partition))
                batch = batches[partition] = producer.create_batch()
                batch.append(timestamp=now, key=key, value=value, headers=headers)
        for partition, batch in batches.items():
            deliveries.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*deliveries)


log = logging.getLogger("coffre.service")


async def ensure_coffre_topics(settings: Settings) -> None:
    """coffre's topics, created with their partitions if missing and checked to take the largest
    record coffre publishes; a topic that does not fit is a configuration error (exit 2)."""
    try:
        await ensure_topics(
            settings.bootstrap_servers,
            settings.topic_partitions,
            replication=settings.replication_factor,
            max_message_bytes=settings.max_message_bytes,
            security=client_options(settings),
            create=settings.kafka_create_topics,
        )
    except TopicMismatchError as exc:
        configuration_error(str(exc))


def owned_partitions(replicas: int, ordinal: int) -> Callable[[int], bool]:
    """Static assignment: replica ``ordinal`` of ``replicas`` owns the partitions p with
    p % replicas == ordinal, whatever the other replicas do (no rebalance can move a coffre's
    partition, hence its journal, to another volume)."""
    return lambda partition: partition % replicas == ordinal


def host_ordinal(hostname: str | None = None) -> int | None:
    """The number ending a StatefulSet pod's host name (``coffre-vault-2`` → 2)."""
    match = re.search(r"-(\d+)$", hostname or socket.gethostname())
    return int(match.group(1)) if match else None


@asynccontextmanager
async def kafka_endpoints(
    settings: Settings,
    group: str,
    *topics: str,
    owns: Callable[[int], bool] | None = None,
    commit_interval: float = 0.0,
) -> AsyncIterator[Endpoints]:
    """Create coffre's topics if missing, then a consumer of ``topics`` in the group
    ``<prefix><group>`` (offsets committed by the caller through the committer) and a producer;
    on exit, pending commits are flushed, the group left and the producer flushed.

    With ``owns``, the consumer is assigned the partitions it owns instead of joining the
    group's rebalancing (the group still keeps its committed offsets). ``commit_interval``: the
    least time between two offset commits (see :class:`~coffre.adapters.kafka.OffsetCommitter`)."""
    await ensure_coffre_topics(settings)
    consumer = AIOKafkaConsumer(
        *(() if owns else topics),
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}{group}",
        **{**CONSUMER_TUNING, "max_poll_records": settings.batch_max},
        **client_options(settings),
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap_servers, **PRODUCER_TUNING, **client_options(settings)
    )
    await producer.start()
    try:
        await consumer.start()
        if owns:
            await consumer.topics()  # fetches the metadata partitions_for_topic reads
            assigned = [
                TopicPartition(topic, p)
                for topic in topics
                for p in sorted(consumer.partitions_for_topic(topic) or ())
                if owns(p)
            ]
            consumer.assign(assigned)
            log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in assigned) or "nothing")
        committer = OffsetCommitter(consumer, commit_interval)
        try:
            yield Endpoints(consumer, producer, committer)
        finally:
            await committer.flush()
            await stop_consumer(consumer)
    finally:
        await producer.stop()


SHUTDOWN_OVERRUN_EXIT = 75


def run_until_signalled(
    serve: Callable[[Settings, asyncio.Event], Awaitable[object]], settings: Settings
) -> None:
    """Run ``serve(settings, stop)`` until SIGTERM or SIGINT sets ``stop``.

    ``serve`` then drains: it finishes the batch in hand (durable, published, committed) and
    returns. Should that take longer than ``COFFRE_SHUTDOWN_TIMEOUT_SECONDS`` (a broker gone,
    a disk hung), the process exits anyway with 75: what was fsynced stays, the rest is read
    again from Kafka after the restart, since its offsets were not committed."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping() -> None:
            if not stop.is_set():
                log.info("signal received: draining (at most %gs)", settings.shutdown_timeout_seconds)
                loop.call_later(settings.shutdown_timeout_seconds, overrun)
            stop.set()

        def overrun() -> None:
            log.error("shutdown took longer than %gs: exiting now", settings.shutdown_timeout_seconds)
            logging.shutdown()
            os._exit(SHUTDOWN_OVERRUN_EXIT)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping)
        await serve(settings, stop)

    asyncio.run(main())
