"""How the embedded broker's fetch cost grows with the size of a partition.

    .venv/bin/python bench/broker_fetch_size.py [--sizes 100,1000,3000,6000,10000,15000]

On a fresh embedded broker (Tansu, memory storage), one partition is filled with records of 500
bytes, one record batch each, up to each size in turn; at each size one aiokafka consumer fetches
the partition's last record again and again for 2 s. Printed: fetches answered per second and
the broker's CPU (a share of one core). On Apache Kafka a fetch at the tail costs the same
whatever the partition holds (an offset index); here it grows with it, which is why the embedded
broker stalls a pipeline once its partitions hold several thousand records each (measured:
``bench/failover.py`` at 300 events/s stalls at about 6,500 records per partition of events.in,
the baseline's single ingest as much as the replicas).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coffre.adapters.broker import EmbeddedBroker
from coffre.adapters.kafka import ensure_topics

from pipeline import CpuMeter

TOPIC = "fetch-size"
SECONDS = 2.0


async def measure(sizes: Sequence[int]) -> list[tuple[int, float, float]]:
    broker = EmbeddedBroker()
    bootstrap = broker.start()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=5, enable_auto_commit=False)
    rows = []
    try:
        await ensure_topics(bootstrap, {TOPIC: 1})
        await producer.start()
        await consumer.start()
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        held = 0
        for size in sizes:
            while held < size:
                await producer.send_and_wait(TOPIC, b"x" * 500, partition=0)  # one batch each
                held += 1
            meter = CpuMeter({"broker": broker.pid})
            meter.start()
            fetches = 0
            began = time.perf_counter()
            while time.perf_counter() - began < SECONDS:
                consumer.seek(tp, held - 1)
                await consumer.getmany(tp, timeout_ms=50)
                fetches += 1
            meter.stop()
            rows.append((held, fetches / meter.wall, meter.percent().get("broker", 0.0)))
    finally:
        await producer.stop()
        await consumer.stop()
        broker.stop()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,3000,6000,10000,15000", help="records in the partition")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print("records in the partition   fetches/s   broker CPU (one consumer at the tail, embedded broker)")
    for held, rate, cpu in asyncio.run(measure(sizes)):
        print(f"{held:>24,} {rate:>11,.0f} {cpu:>11.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
