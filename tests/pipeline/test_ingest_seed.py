"""ingest's counters seeded from the vault's journals on a fresh broker (``coffre up`` restarted)."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from coffre_ingest.seed import seed_from_journals, seed_states
from coffre_ingest.step import PartitionState

from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import ensure_topics
from coffre.domain.routing import coffre_partition

from pipeline.stack_settings import stack_settings


def write_journals(root, heads):
    with JournalSet(root) as journals:
        for (oper, coffre), last in heads.items():
            journal = journals.journal(oper, coffre)
            for n in range(1, last + 1):
                journal.append(n, f"<E>{coffre}-{n}</E>".encode())
        journals.sync()


def test_each_partition_gets_the_heads_of_the_coffres_it_owns():
    heads = {("0099", c): c * 10 for c in range(1, 9)}
    states = seed_states(heads, 3)
    assert sorted(p.partition for p in states) == sorted({coffre_partition(c, 3) for c in range(1, 9)})
    for state in states:
        assert state.position == 0 and not state.forwarded
        assert state.counters == {
            k: v for k, v in heads.items() if coffre_partition(k[1], 3) == state.partition
        }
        assert state.size == sum(PartitionState.counter_bytes(*k) for k in state.counters)


def test_a_fresh_broker_is_seeded_and_a_folded_partition_is_left_alone(
    kafka_bootstrap, topic_prefix, tmp_path
):
    settings = stack_settings(kafka_bootstrap, topic_prefix, tmp_path)
    heads = {("0099", 1): 6, ("0099", 2): 21, ("0042", 3): 2}
    write_journals(tmp_path / "journal", heads)
    partitions = settings.partitions
    taken = coffre_partition(2, partitions)  # this partition already has a fold of its own

    async def scenario() -> dict[int, list[PartitionState]]:
        await ensure_topics(kafka_bootstrap, settings.topic_partitions)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            own = PartitionState(taken, partitions, position=5, counters={("0099", 2): 30})
            await producer.send_and_wait(settings.topics.ingest_state, own.encode(), partition=taken)
        finally:
            await producer.stop()
        written = await seed_from_journals(settings, tmp_path / "journal")
        assert await seed_from_journals(settings, tmp_path / "journal") == []  # never twice
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(settings.topics.ingest_state, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            found: dict[int, list[PartitionState]] = {p: [] for p in range(partitions)}
            while batch := await consumer.getmany(timeout_ms=500):
                for tp, records in batch.items():
                    found[tp.partition] += [
                        PartitionState.decode(r.value, tp.partition, partitions) for r in records
                    ]
        finally:
            await consumer.stop()
        assert {s.partition for s in written} == {coffre_partition(c, partitions) for _, c in heads} - {taken}
        return found

    found = asyncio.run(scenario())
    assert [s.counters for s in found[taken]] == [{("0099", 2): 30}]
    for (oper, coffre), last in heads.items():
        p = coffre_partition(coffre, partitions)
        if p != taken:
            assert len(found[p]) == 1 and found[p][0].counters[(oper, coffre)] == last
