"""What the aiokafka services (vault, acquittal) share around their own step: topics created,
a consumer with manual commits and a producer, sending a batch's outputs, running until a signal."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coffre.config import Settings, configuration_error
from coffre.domain.messages import CORRELATION_ID

from .kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    OffsetCommitter,
    TopicMismatchError,
    ensure_topics,
    stop_consumer,
)

Output = tuple[bytes | None, bytes, str | None]
"""(key, value, correlation id) of a record to publish."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    committer: OffsetCommitter

    async def send_all(self, topic: str, outputs: Iterable[Output]) -> None:
        """Publish ``outputs`` to ``topic`` (the correlation id also as a header) and wait until
        the broker acknowledged every one."""
        deliveries = [
            await self.producer.send(
                topic,
                value=value,
                key=key,
                headers=[(CORRELATION_ID, correlation_id.encode())] if correlation_id else None,
            )
            for key, value, correlation_id in outputs
        ]
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
    settings: Settings, group: str, *topics: str, owns: Callable[[int], bool] | None = None
) -> AsyncIterator[Endpoints]:
    """Create coffre's topics if missing, then a consumer of ``topics`` in the group
    ``<prefix><group>`` (offsets committed by the caller through the committer) and a producer;
    on exit, pending commits are flushed, the group left and the producer flushed.

    With ``owns``, the consumer is assigned the partitions it owns instead of joining the
    group's rebalancing (the group still keeps its committed offsets)."""
    await ensure_coffre_topics(settings)
    consumer = AIOKafkaConsumer(
        *(() if owns else topics),
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}{group}",
        **{**CONSUMER_TUNING, "max_poll_records": settings.batch_max},
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, **PRODUCER_TUNING)
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
        committer = OffsetCommitter(consumer)
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
