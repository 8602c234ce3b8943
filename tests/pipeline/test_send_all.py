"""The services' batched publication (``Publisher.send_records``) on a real broker:
every record lands where ``producer.send`` would have put it (the partitioner's choice for its
key), in order within its partition, with its headers, however many batches it takes."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from aiokafka.partitioner import DefaultPartitioner

from coffre.adapters.kafka import drain, ensure_topics
from coffre.adapters.stream import publisher
from coffre.config import Settings
from coffre.domain.messages import CORRELATION_ID, header


def test_send_all_batches_by_partition_and_keeps_order_and_headers(kafka_bootstrap, topic_prefix):
    settings = Settings(bootstrap_servers=kafka_bootstrap, topic_prefix=topic_prefix, partitions=3)
    topic = settings.topics.receipts
    keys = [str(7 + n % 5).encode() for n in range(3000)]
    padding = b"x" * 300  # 3,000 records of ~300 bytes: more than one 256 KiB batch per partition
    outputs = [(key, b"%d:" % n + padding, f"c-{n}" if n % 3 else None) for n, key in enumerate(keys)]

    records = [(topic, k, v, [(CORRELATION_ID, c.encode())] if c else [], None) for k, v, c in outputs]

    async def publish() -> None:
        async with publisher(settings) as out:
            await out.send_records(records[:10])
            await out.send_records(records[10:], ordered=True)
            await out.send_records([])
            await out.send_records([(topic, None, b"keyless", [("h", b"v")], None)])

    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_partitions))
    asyncio.run(publish())
    records = asyncio.run(drain(kafka_bootstrap, topic))
    assert len(records) == len(outputs) + 1
    keyless = [r for r in records if r.key is None]
    assert [(r.value, list(r.headers)) for r in keyless] == [(b"keyless", [("h", b"v")])]
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in records:
        if r.key is None:
            continue
        n = int(r.value.split(b":")[0])
        assert r.key == keys[n]
        assert r.partition == DefaultPartitioner()(keys[n], [0, 1, 2], [0, 1, 2])
        assert header(list(r.headers), CORRELATION_ID) == outputs[n][2]
        by_partition[r.partition].append(n)
    assert sorted(n for ns in by_partition.values() for n in ns) == list(range(len(outputs)))
    assert all(ns == sorted(ns) for ns in by_partition.values()), "order within a partition was lost"
