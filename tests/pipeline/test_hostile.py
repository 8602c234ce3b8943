"""Nothing jams it: each class of input that once stopped the pipeline is published by a platform
(librdkafka, through confluent-kafka), then valid events; every valid event is acknowledged, every
hostile one answered ``rejected``, the valid extremes ``recorded``, and no service stops or restarts.
An event whose own balance does not add up is recorded all the same, and its acquittal carries the
finding (the correct ones carry none)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from coffre.adapters.broker import free_port_block
from coffre.adapters.kafka import ensure_topics
from coffre.adapters.stream import ensure_coffre_topics
from coffre.commands.stack import SERVICES, Stack
from coffre.domain.messages import CORRELATION_ID, Rejection

from events import POINSCRIT
from hostile import extreme_valid_cases, hostile_cases
from pipeline.ops_http import get, metric, wait_ready
from pipeline.stack_settings import stack_settings

VALID = 20
WRONG_BALANCE = POINSCRIT.replace(b"<SoldeApr\xc3\xa8s>90.05<", b"<SoldeApr\xc3\xa8s>90.50<")
"""A POINSCRIT whose SoldeApres is not SoldeAvant − SoldeMouvement: a finding, not a refusal."""


def publish(bootstrap: str, topic: str, messages: list[tuple[bytes, list[tuple[str, bytes]]]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "linger.ms": 0})
    for value, headers in messages:
        producer.produce(topic, value=value, headers=headers)
        producer.poll(0)
    assert producer.flush(30) == 0, "the platform could not publish every message"


def read_all(bootstrap: str, topic: str, partitions: int, wanted: int, timeout: float) -> list:
    """Every record of ``topic`` until ``wanted`` were read (or the timeout), by assignment."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "platform", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < wanted and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is not None and record.error() is None:
                records.append(record)
    finally:
        consumer.close()
    return records


def test_no_input_stops_the_acquittals_of_the_others(kafka_bootstrap, topic_prefix, tmp_path):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        ops_port=free_port_block(len(SERVICES)),
    )
    assert settings.max_event_bytes == 1024 * 1024 and settings.max_message_bytes == 1_000_000
    # events.in made by an operator to take larger records than coffre's own topic would (1 MiB + 64
    # KiB): the inputs over COFFRE_MAX_EVENT_BYTES reach ingest, which must refuse them itself
    asyncio.run(
        ensure_topics(
            kafka_bootstrap,
            {settings.topics.events_in: settings.partitions},
            configs={"max.message.bytes": str(4 * settings.max_event_bytes)},
        )
    )
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()
    try:
        for name in SERVICES:
            wait_ready(stack, name)
        started = {name: child.pid for name, child in stack.children.items()}
        hostile = hostile_cases(settings.max_event_bytes)
        extremes = extreme_valid_cases()
        messages = [
            (case.value, case.headers or [(CORRELATION_ID, f"hostile-{i}".encode())])
            for i, case in enumerate(hostile)
        ]
        messages += [
            (case.value, [(CORRELATION_ID, f"extreme-{i}".encode())]) for i, case in enumerate(extremes)
        ]
        messages += [(POINSCRIT, [(CORRELATION_ID, f"valid-{i}".encode())]) for i in range(VALID)]
        messages.append((WRONG_BALANCE, [(CORRELATION_ID, b"wrong-balance")]))
        publish(kafka_bootstrap, settings.topics.events_in, messages)

        expected = len(messages)
        records = read_all(
            kafka_bootstrap, settings.topics.acquittals, settings.partitions, expected, timeout=120
        )
        acquittals = {}
        for record in records:
            body = json.loads(record.value())
            acquittals[body["correlation_id"]] = body
        for i in range(VALID):
            assert acquittals.get(f"valid-{i}", {}).get("status") == "recorded", (
                f"valid-{i}: {acquittals.get(f'valid-{i}')}"
            )
            assert "findings" not in acquittals[f"valid-{i}"]
        wrong = acquittals.get("wrong-balance")
        assert wrong is not None and wrong["status"] == "recorded", wrong
        assert [f["code"] for f in wrong["findings"]] == ["BALANCE_ARITHMETIC"], wrong
        assert (
            "SoldeApres 90.50" in wrong["findings"][0]["message"] and wrong["findings"][0]["player"] == "p-1"
        )
        for i, case in enumerate(extremes):
            assert acquittals[f"extreme-{i}"]["status"] == "recorded", (case.name, acquittals[f"extreme-{i}"])
        for i, case in enumerate(hostile):
            key = (
                f"hostile-{i}"
                if not case.headers
                else next(c for c in acquittals if c.startswith("ccccccccccccccccccccc"))
            )
            answer = acquittals.get(key)
            assert answer is not None, f"{case.name}: no answer"
            assert answer["status"] == "rejected", (case.name, answer)
            codes = [reason["code"] for reason in answer["reasons"]]
            assert case.code is None or case.code in codes, (case.name, codes)
            assert "INTERNAL_ERROR" not in codes, (case.name, answer)
        assert len(records) == expected  # one answer each, nothing twice

        rejections = read_all(
            kafka_bootstrap, settings.topics.rejected, settings.partitions, len(hostile), 30
        )
        assert len(rejections) == len(hostile)
        for record in rejections:
            assert len(record.value()) <= settings.max_message_bytes
            rejection = Rejection.decode(record.value())
            assert rejection.original_sha256 and rejection.original_size

        # nothing crashed, nothing restarted, every service still answers
        assert {name: child.pid for name, child in stack.children.items()} == started
        assert all(child.poll() is None for child in stack.children.values())
        for name in SERVICES:
            assert get(f"http://127.0.0.1:{stack.ops_port(name)}/healthz")[0] == 200
        assert metric(stack, "ingest", "coffre_internal_errors_total") == 0
        assert (
            metric(stack, "ingest", "coffre_findings_total", 'code="BALANCE_ARITHMETIC",source="ingest"') >= 1
        )
    finally:
        codes = stack.stop()
    assert all(code == 0 for code in codes.values()), f"{codes} (logs in {tmp_path}/logs)"


def test_an_input_larger_than_coffres_events_in_takes_is_refused_to_the_platform_at_once(
    kafka_bootstrap, topic_prefix
):
    """On the topic coffre creates, the broker itself refuses to the platform an input over
    COFFRE_MAX_EVENT_BYTES and its headroom (MSG_SIZE_TOO_LARGE, at once, nothing written), and takes
    one of the largest size ingest reads."""
    settings = stack_settings(kafka_bootstrap, topic_prefix, Path("unused"))
    asyncio.run(ensure_coffre_topics(settings))
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 10_000_000})
    outcomes: dict[str, object] = {}

    def delivered(err, msg) -> None:
        outcomes["largest" if len(msg.value()) <= settings.max_event_bytes else "over"] = err

    largest = b"<POINSCRIT>" + b"a" * (settings.max_event_bytes - 32) + b"</POINSCRIT>"
    producer.produce(
        settings.topics.events_in, largest, headers=[(CORRELATION_ID, b"largest")], on_delivery=delivered
    )
    producer.produce(
        settings.topics.events_in,
        largest + largest,
        headers=[(CORRELATION_ID, b"over")],
        on_delivery=delivered,
    )
    assert producer.flush(30) == 0
    assert outcomes["largest"] is None
    assert outcomes["over"] is not None and outcomes["over"].code() == KafkaError.MSG_SIZE_TOO_LARGE
