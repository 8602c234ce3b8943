"""What a consumer's ``fetch_max_wait_ms`` costs on the embedded broker: its CPU, and delivery latency.

    .venv/bin/python bench/fetch_wait.py [--waits 5,50,200] [--consumers 5] [--rate 400]

For each wait, on a fresh embedded broker: ``--consumers`` aiokafka consumers (as many as a
running stack and its platform have) poll a 6-partition topic while a producer publishes
``--rate`` small records per second for ``--seconds``; the broker's CPU (a share of one core)
and the latency from each send to its arrival at the first consumer are printed side by side.

On Apache Kafka a fetch waits at most ``fetch_max_wait_ms`` and returns as soon as data arrives
(long polling): a long wait costs nothing. Tansu 0.6.0 answers after the whole wait when the
fetch starts empty, so the wait is a trade: a short one keeps the acquittal latency low and
makes every idle consumer poll the broker, which then burns CPU the services need on 2 cores.
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

from pipeline import CpuMeter, spread

PARTITIONS = 6


async def measure(wait_ms: int, consumers: int, rate: float, seconds: float) -> dict[str, float]:
    broker = EmbeddedBroker()
    bootstrap = broker.start()
    started: list[AIOKafkaConsumer] = []
    tasks: list[asyncio.Task[None]] = []
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        await ensure_topics(bootstrap, {"fetch-wait": PARTITIONS})
        tps = [TopicPartition("fetch-wait", p) for p in range(PARTITIONS)]
        latencies: list[float] = []
        for n in range(consumers):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                fetch_max_wait_ms=wait_ms,
                fetch_min_bytes=1,
                enable_auto_commit=False,
            )
            await consumer.start()
            consumer.assign(tps)
            started.append(consumer)

            async def poll(consumer: AIOKafkaConsumer = consumer, timed: bool = n == 0) -> None:
                while True:
                    batch = await consumer.getmany(timeout_ms=1000)
                    now = time.perf_counter()
                    if timed:
                        latencies.extend((now - float(r.value)) * 1000 for rs in batch.values() for r in rs)

            tasks.append(asyncio.create_task(poll()))
        await producer.start()
        await asyncio.sleep(2)  # every consumer polling
        meter = CpuMeter({"broker": broker.pid})
        meter.start()
        began = time.perf_counter()
        sent = 0
        while time.perf_counter() - began < seconds:
            await producer.send("fetch-wait", str(time.perf_counter()).encode(), partition=sent % PARTITIONS)
            sent += 1
            await asyncio.sleep(max(0.0, began + sent / rate - time.perf_counter()))
        meter.stop()
        await asyncio.sleep(1 + wait_ms / 1000)
        latency = spread(latencies) or {"p50": 0.0, "p99": 0.0}
        return {
            "wait_ms": wait_ms,
            "broker_cpu_percent": round(meter.percent().get("broker", 0.0)),
            "sent": sent,
            "p50_ms": round(latency["p50"], 1),
            "p99_ms": round(latency["p99"], 1),
        }
    finally:
        for task in tasks:
            task.cancel()
        await producer.stop()
        for consumer in started:
            await consumer.stop()
        broker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", default="5,50,200", help="fetch_max_wait_ms values, comma-separated")
    parser.add_argument("--consumers", type=int, default=5, help="polling consumers")
    parser.add_argument("--rate", type=float, default=400.0, help="records per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measure")
    args = parser.parse_args(argv)
    rows = [
        asyncio.run(measure(int(w), args.consumers, args.rate, args.seconds)) for w in args.waits.split(",")
    ]
    print(
        f"{args.consumers} consumers polling, {args.rate:g} records/s, embedded broker (Tansu), one run each"
    )
    print(f"{'fetch_max_wait_ms':>18} {'broker CPU':>11} {'latency p50':>12} {'p99':>8}")
    for row in rows:
        print(
            f"{row['wait_ms']:>18} {row['broker_cpu_percent']:>10}% {row['p50_ms']:>9.1f} ms {row['p99_ms']:>5.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
