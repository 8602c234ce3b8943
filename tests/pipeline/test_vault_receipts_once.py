"""No second receipt after a vault restart for what was acknowledged before it (issue 34 item 5).

Ingest and the vault as processes on Apache Kafka, lots sealed only after an hour: a platform
(librdkafka) publishes events over coffres on every partition and waits for all their receipts; the
vault is stopped (kill -9, and SIGTERM) with nothing sealed, so its committed offsets are still where
it began (never past an unsealed event) and it reads every event again when it starts. The platform
then publishes a few more. The receipts topic must hold exactly one receipt per event: none twice
for what was acknowledged before the restart (the acknowledged position carried in the committed
offset's metadata), and the new events answered.

On main 7bf8649 the kill -9 case fails: every event acknowledged before the restart gets a second
receipt. SIGTERM seals what waits before the vault stops, so the restart reads nothing again there:
that case guards the clean stop's commit (its metadata included)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from coffre_vault.acknowledged import decode
from confluent_kafka import Consumer, Producer, TopicPartition

from coffre.adapters.kafka import committed_offsets
from coffre.commands.stack import Stack
from coffre.domain.messages import CORRELATION_ID, Receipt

from events import POINSCRIT
from ingest_fold import TEST_KEYS
from pipeline.groups import wait_for_group
from pipeline.stack_settings import stack_settings, two_coffres_per_partition

PARTITIONS = 2
BEFORE = 40  # events acknowledged before the restart
AFTER = 6  # events published after it


COFFRES = two_coffres_per_partition(PARTITIONS)


def publish(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(first, first + count):
        coffre = COFFRES[n % len(COFFRES)]
        value = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())
        producer.produce(
            topic,
            value=value.replace(b"<IDJoueur>p-1</IDJoueur>", f"<IDJoueur>once-{n}</IDJoueur>".encode()),
            key=str(coffre).encode(),
            headers=[(CORRELATION_ID, f"once-{n}".encode())],
        )
    assert producer.flush(30) == 0


class Receipts:
    """Every receipt of the topic, read from its beginning by a platform's consumer."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "platform", "enable.auto.commit": False}
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.seen: Counter[tuple[str, int, int]] = Counter()

    def until(self, distinct: int, timeout: float) -> None:
        """Read until ``distinct`` events have a receipt (at most ``timeout`` s), then 1 s more: a second
        receipt of anything read again comes in the same or an earlier batch than the last new one's."""
        deadline = time.monotonic() + timeout
        settle: float | None = None
        while settle is None or time.monotonic() < settle:
            if time.monotonic() > deadline:
                break
            record = self.consumer.poll(0.1)
            if record is not None and record.error() is None:
                receipt = Receipt.decode(record.value())
                self.seen[(receipt.id_oper, receipt.id_coffre, receipt.id_evt)] += 1
            if settle is None and len(self.seen) >= distinct:
                settle = time.monotonic() + 1.0

    def close(self) -> None:
        self.consumer.close()


async def acknowledged_through(
    bootstrap: str, group: str, topic: str, timeout: float = 10.0
) -> dict[int, int]:
    """Wait until the vault's committed metadata acknowledges each partition of ``topic`` to its end (at
    most ``timeout`` s); the positions it verifies to at the end. Read with aiokafka, the vault's
    client: confluent-kafka 2.16.1 hands back a committed offset's metadata with bytes from past its
    end (read as a C string), which no reader could verify."""
    tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await reader.start()  # never subscribed: no member of the vault's group
    try:
        ends = {tp.partition: end for tp, end in (await reader.end_offsets(tps)).items()}
        deadline = time.monotonic() + timeout
        while True:
            committed = await committed_offsets(reader, tps, timeout=5)
            found = {tp.partition: decode(TEST_KEYS, topic, tp.partition, *c) for tp, c in committed.items()}
            if found == ends or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.1)
    finally:
        await reader.stop()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_restarted_vault_sends_no_receipt_twice(kafka_bootstrap, topic_prefix, tmp_path, sig):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        partitions=PARTITIONS,
        lot_max_age_seconds=3600.0,  # nothing is sealed before the stop
        lot_max_events=100_000,
    )
    topics = settings.topics
    group = f"{topic_prefix}vault"
    stack = Stack(
        settings, bootstrap=kafka_bootstrap, static_members=True
    )  # a restart takes its partitions back
    stack.start(("ingest", "vault"))
    receipts = Receipts(kafka_bootstrap, topics.receipts)
    try:
        publish(kafka_bootstrap, topics.events_in, 0, BEFORE)
        receipts.until(BEFORE, timeout=60)
        assert len(receipts.seen) == BEFORE, (
            f"{len(receipts.seen)} receipts of {BEFORE} (logs in {tmp_path}/logs)"
        )
        positions = asyncio.run(acknowledged_through(kafka_bootstrap, group, topics.normalized))
        lots = [p for p in settings.archive_root.rglob("*.xml") if "checkpoints" not in p.parts]
        assert lots == [], "a lot was sealed before the stop: the restart would read nothing again"

        stack.kill("vault", sig)
        stack.spawn("vault")
        wait_for_group(kafka_bootstrap, group, 1)
        publish(kafka_bootstrap, topics.events_in, BEFORE, AFTER)
        receipts.until(BEFORE + AFTER, timeout=60)
    finally:
        receipts.close()
        codes = stack.stop()
    assert codes == {"ingest": 0, "vault": 0}, f"logs in {tmp_path}/logs"
    twice = sorted(key for key, count in receipts.seen.items() if count > 1)
    assert not twice, f"{len(twice)} events got a second receipt after the restart, first {twice[:3]}"
    per_coffre = Counter(COFFRES[n % len(COFFRES)] for n in range(BEFORE + AFTER))
    expected = {("0099", c, id_evt) for c, count in per_coffre.items() for id_evt in range(1, count + 1)}
    assert set(receipts.seen) == expected, "an event without its receipt, or a receipt of no event"
    log = (tmp_path / "logs" / "vault.log").read_text()
    if sig == signal.SIGKILL:  # the restart read every event again, and passed their receipts over
        assert positions and "not sent again" in log, f"the positions {positions} were not used"
