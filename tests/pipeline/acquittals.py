"""What a platform's thread does with coffre's answers in the pipeline tests: read every
acquittal with librdkafka (an independent client) and note when it came."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from coffre.domain.messages import Acquittal


def read_acquittals(
    config: dict[str, Any],
    topic: str,
    partitions: int,
    answered: dict[str, tuple[float, Acquittal]],
    stop: threading.Event,
) -> None:
    """Until ``stop``: each acquittal of ``topic`` (every partition, from the start) into
    ``answered`` by correlation id, with its arrival time (the first one of each, if twice)."""
    consumer = Consumer({**config, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        while not stop.is_set():
            record = consumer.poll(0.2)
            if record is None or record.error() is not None:
                continue
            acquittal = Acquittal.decode(record.value())
            answered.setdefault(acquittal.correlation_id or "", (time.monotonic(), acquittal))
    finally:
        consumer.close()
