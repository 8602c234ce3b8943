"""What the aiokafka services (vault, acquittal) share around their own step: topics created,
a consumer with manual commits and a producer, sending a batch's outputs, running until a signal."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID

from .kafka import CONSUMER_TUNING, PRODUCER_TUNING, OffsetCommitter, ensure_topics, stop_consumer

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


@asynccontextmanager
async def kafka_endpoints(settings: Settings, group: str, *topics: str) -> AsyncIterator[Endpoints]:
    """Create coffre's topics if missing, then a consumer of ``topics`` in the group
    ``<prefix><group>`` (offsets committed by the caller through the committer) and a producer;
    on exit, pending commits are flushed, the group left and the producer flushed."""
    await ensure_topics(
        settings.bootstrap_servers, settings.topic_partitions, replication=settings.replication_factor
    )
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}{group}",
        **{**CONSUMER_TUNING, "max_poll_records": settings.batch_max},
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, **PRODUCER_TUNING)
    await producer.start()
    try:
        await consumer.start()
        committer = OffsetCommitter(consumer)
        try:
            yield Endpoints(consumer, producer, committer)
        finally:
            await committer.flush()
            await stop_consumer(consumer)
    finally:
        await producer.stop()


def run_until_signalled(
    serve: Callable[[Settings, asyncio.Event], Awaitable[object]], settings: Settings
) -> None:
    """Run ``serve(settings, stop)`` until SIGTERM or SIGINT sets ``stop``."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    asyncio.run(main())
