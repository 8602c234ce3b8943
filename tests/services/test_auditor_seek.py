"""The auditor's consumer at the end of a table recovery, without Kafka: the records of a stream
partition past its committed offset all reach the agent after the recovery, none skipped.

Found by tests/pipeline/test_auditor.py (issue 30, on Apache Kafka): an auditor SIGKILLed and started
again never audited some records past its committed offsets (the last event of coffre 2, IDEvt 9, whose
finding never came). faust 0.15's recovery (``Recovery.on_recovery_completed``) resumes the stream
partitions, then seeks them to their committed offsets (``Consumer.perform_seek``: one OffsetFetch
after the other, each partition seeked as its answer comes), then resumes the flow control, which
empties every stream's queue. Its fetcher already runs (started to read the changelog), so what it
fetched past a partition's seek during those round trips went to a queue the resume emptied, while
the position moved on: those records were never handed out again, and the next one's offset jump
was taken for a gap of the log and committed past. :class:`~coffre_auditor.app._LowLatencyConsumer`
stops the flow for the seek: nothing is handed out until the recovery resumes it, after the
queues are emptied, from the offsets just seeked to."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from coffre_auditor.app import build_app
from faust.types import TP

from coffre.config import Settings

from ingest_fold import TEST_KEYS_TEXT

TOPIC = "t.events.normalized"
PARTITION = TP(TOPIC, 0)
COMMITTED, END = 9, 18


@dataclass
class Record:
    """What aiokafka hands faust for one record."""

    offset: int
    topic: str = TOPIC
    partition: int = 0
    key: bytes = b"1"
    value: bytes = b""
    timestamp: int = 0
    timestamp_type: int = 0
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    checksum: None = None
    serialized_key_size: int = 1
    serialized_value_size: int = 0


class Broker:
    """The consumer thread faust talks to (aiokafka's consumer), over one partition holding offsets
    0..17, committed: 9; three records a fetch; a seek moves the position, a fetch moves it on."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.position = COMMITTED
        self.fetched = asyncio.Event()

    def assignment(self) -> set[TP]:
        return {PARTITION}

    def highwater(self, tp: TP) -> int:
        return END

    async def getmany(self, active_partitions: Any, timeout: float) -> dict[TP, list[Record]]:
        await asyncio.sleep(0.001)
        if not self.consumer.flow_active or self.position >= END:  # as faust's _fetch_records
            return {}
        batch = [Record(o) for o in range(self.position, min(self.position + 3, END))]
        self.position += len(batch)
        self.fetched.set()
        return {PARTITION: batch}

    async def seek_to_committed(self) -> dict[TP, int]:
        """As aiokafka's: for each partition, its committed offset asked (a round trip) and
        seeked to; the next partition asked (a changelog partition: nothing committed)."""
        await self.round_trip()
        self.position = COMMITTED
        await self.round_trip()
        return {PARTITION: COMMITTED}

    async def round_trip(self) -> None:
        """Long enough for the fetcher to fetch, if it may."""
        self.fetched.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.fetched.wait(), 0.2)


def test_no_record_fetched_during_the_seek_after_a_recovery_is_lost():
    async def scenario() -> list[int]:
        settings = Settings(topic_prefix="t.", bootstrap_servers="127.0.0.1:1", record_keys=TEST_KEYS_TEXT)
        app = build_app(settings)
        consumer = app.consumer
        broker = Broker(consumer)
        consumer._thread = broker  # type: ignore[assignment]
        queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)  # a stream's (the agent's)

        async def deliver(message: Any) -> None:  # the conductor's, for the agent's channel
            queue.put_nowait(message.offset)

        consumer.callback = deliver
        # as the recovery left them, having read the changelog with the fetcher running
        app.flow_control.resume()
        consumer.resume_flow()
        fetcher = SimpleNamespace(_stopped=asyncio.Event())  # faust's Fetcher service
        drain = asyncio.create_task(consumer._drain_messages(fetcher))
        try:
            # Recovery.on_recovery_completed, in its order
            consumer.resume_partitions({PARTITION})
            await consumer.perform_seek()
            app.flow_control.resume()  # empties the streams' queues
            consumer.resume_flow()
            handed_out: list[int] = []
            for _ in range(500):
                while not queue.empty():
                    handed_out.append(queue.get_nowait())
                if handed_out and handed_out[-1] == END - 1:
                    break
                await asyncio.sleep(0.01)
            return handed_out
        finally:
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)

    handed_out = asyncio.run(scenario())
    assert handed_out == list(range(COMMITTED, END)), handed_out
