"""The end offsets the auditor's table recovery reads up to: on the embedded broker, ListOffsets
stops at the last record batch's first record; :func:`true_end_offsets` reads past it."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from coffre_auditor.app import true_end_offsets
from faust.types import TP

from coffre.adapters.kafka import PRODUCER_TUNING, ensure_topics


async def _batches_then_ends(bootstrap: str, topic: str) -> tuple[int, dict[TP, int]]:
    await ensure_topics(bootstrap, {topic: 2})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PRODUCER_TUNING)
    await producer.start()
    try:
        for size in (5, 3):  # two record batches on partition 0, none on partition 1
            sent = [await producer.send(topic, b"v%d" % i, key=b"k", partition=0) for i in range(size)]
            await asyncio.gather(*sent)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        listed = await consumer.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    finally:
        await consumer.stop()
    reported = {TP(tp.topic, tp.partition): end for tp, end in listed.items()}
    return listed[TopicPartition(topic, 0)], await true_end_offsets(bootstrap, reported)


def test_the_end_offsets_count_every_record_of_the_last_batch(kafka_bootstrap, topic_prefix):
    topic = f"{topic_prefix}ends"
    listed, ends = asyncio.run(_batches_then_ends(kafka_bootstrap, topic))
    assert ends == {TP(topic, 0): 8, TP(topic, 1): 0}
    assert listed in (6, 8)  # 6 on Tansu 0.6.0 (5 + the last batch's first record), 8 on Kafka
