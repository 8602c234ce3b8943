"""The vault service: aiokafka, manual commits. Per batch: append -> fsync -> receipts
(awaited) -> commit offsets. SIGTERM finishes the batch in hand, then exits."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import (
    CONSUMER_TUNING,
    PRODUCER_TUNING,
    OffsetCommitter,
    ensure_topics,
    stop_consumer,
)
from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID

from .recorder import RecordCounts, Recorder, VaultHalt

log = logging.getLogger("coffre.vault")
FATAL_EXIT = 70


async def serve(settings: Settings, stop: asyncio.Event | None = None) -> RecordCounts:
    topics = settings.topics
    await ensure_topics(
        settings.bootstrap_servers, settings.topic_partitions, replication=settings.replication_factor
    )
    recorder = Recorder(JournalSet(Path(settings.data_dir) / "vault" / "journal"))
    counts = recorder.counts
    consumer = AIOKafkaConsumer(
        topics.normalized,
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{settings.topic_prefix}vault",
        **{**CONSUMER_TUNING, "max_poll_records": settings.batch_max},
    )
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers, **PRODUCER_TUNING)
    stop = stop or asyncio.Event()
    await producer.start()
    await consumer.start()
    committer = OffsetCommitter(consumer)
    log.info("vault ready: recording %s", topics.normalized)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100, max_records=settings.batch_max)
            if not batches:
                continue
            receipts = recorder.append(
                [
                    (record.value or b"", list(record.headers or ()))
                    for records in batches.values()
                    for record in records
                ]
            )
            await asyncio.to_thread(recorder.sync)  # durable: only now may receipts exist
            deliveries = [
                await producer.send(
                    topics.receipts,
                    value=receipt.encode(),
                    key=str(receipt.id_coffre).encode(),
                    headers=[(CORRELATION_ID, receipt.correlation_id.encode())]
                    if receipt.correlation_id
                    else None,
                )
                for receipt in receipts
            ]
            await asyncio.gather(*deliveries)
            committer.commit({tp: records[-1].offset + 1 for tp, records in batches.items()})
    finally:
        await committer.flush()
        await stop_consumer(consumer)
        await producer.stop()
        recorder.journals.close()
    return counts


def run(settings: Settings) -> None:
    """``coffre vault``: until SIGTERM or SIGINT."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    try:
        asyncio.run(main())
    except VaultHalt:
        log.critical("vault halted: the chain's invariants would break; nothing committed", exc_info=True)
        raise SystemExit(FATAL_EXIT) from None


__all__ = ["TopicPartition", "run", "serve"]
