"""OffsetCommitter: commits in order, one in flight, and what is handed over meanwhile merged
into the next one (the newest offset of each partition)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from coffre.adapters.kafka import OffsetCommitter

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class SlowConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, int]] = []
        self.release = asyncio.Event()

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        await self.release.wait()
        self.commits.append(dict(offsets))


def test_commits_handed_over_during_one_in_flight_are_merged_into_the_next():
    async def scenario() -> list[dict[TopicPartition, int]]:
        consumer = SlowConsumer()
        committer = OffsetCommitter(consumer)  # type: ignore[arg-type]
        committer.commit({A: 10})
        await asyncio.sleep(0)  # the first commit is in flight
        committer.commit({A: 20, B: 5})
        committer.commit({A: 30})
        committer.commit({})
        consumer.release.set()
        await committer.flush()
        committer.commit({B: 7})
        await committer.flush()
        return consumer.commits

    assert asyncio.run(scenario()) == [{A: 10}, {A: 30, B: 5}, {B: 7}]


def test_with_an_interval_commits_are_spaced_and_flush_commits_at_once():
    async def scenario() -> tuple[list[dict[TopicPartition, int]], float]:
        consumer = SlowConsumer()
        consumer.release.set()
        committer = OffsetCommitter(consumer, interval=30.0)  # type: ignore[arg-type]
        committer.commit({A: 1})
        await asyncio.sleep(0.05)  # the first commit goes at once
        for n in range(2, 50):
            committer.commit({A: n})
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        assert consumer.commits == [{A: 1}], "a commit did not wait for the interval"
        started = time.monotonic()
        await committer.flush()
        return consumer.commits, time.monotonic() - started

    commits, flushed_in = asyncio.run(scenario())
    assert commits == [{A: 1}, {A: 49}] and flushed_in < 5


def test_an_offset_keeps_its_metadata_and_the_newest_wins_with_its_own():
    """The vault's commits carry their acknowledged position (OffsetAndMetadata): merged, a partition's
    newest offset keeps the metadata handed over with it, never an older one's."""

    async def scenario() -> list[dict[TopicPartition, object]]:
        consumer = SlowConsumer()
        committer = OffsetCommitter(consumer)  # type: ignore[arg-type]
        committer.commit({A: OffsetAndMetadata(10, "ack:12:x")})
        await asyncio.sleep(0)  # in flight
        committer.commit({A: OffsetAndMetadata(10, "ack:40:y"), B: OffsetAndMetadata(3, "ack:3:z")})
        committer.commit({A: OffsetAndMetadata(11, "ack:55:w")})
        consumer.release.set()
        await committer.flush()
        return consumer.commits  # type: ignore[return-value]

    assert asyncio.run(scenario()) == [
        {A: OffsetAndMetadata(10, "ack:12:x")},
        {A: OffsetAndMetadata(11, "ack:55:w"), B: OffsetAndMetadata(3, "ack:3:z")},
    ]
