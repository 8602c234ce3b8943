"""A fold of one partition of events.in in memory, for tests that need ingest's outputs without
its Kafka loop (the loop only publishes these outputs and snapshots the state)."""

from __future__ import annotations

from coffre_ingest.step import IngestStep, InputMessage, Output, PartitionState, StepCounts

from coffre.config import Topics
from coffre.domain.authenticity import RecordKeys
from coffre.domain.codec import Limits
from coffre.domain.messages import DEFAULT_MAX_MESSAGE_BYTES

TEST_KEYS = RecordKeys.parse("test:" + "dGVzdC1rZXktb2YtY29mZnJlLXRlc3RzLTMyLWJ5dGVzISE=")
"""The record keys of the tests' folds (32 bytes): the copies one fold forwards verify at another."""


class IngestFold:
    """Partition ``partition`` of ``partitions`` folded so far, and every output it produced."""

    def __init__(self, partition: int = 0, partitions: int = 1):
        self.state = PartitionState(partition, partitions)
        self.outputs: list[Output] = []

    def unpublished(self) -> list[Output]:
        return list(self.outputs)

    def last_id_evt(self, id_oper: str, id_coffre: int) -> int:
        return self.state.counters.get((id_oper, id_coffre), 0)


def ingest_batch(
    batch: list[InputMessage],
    fold: IngestFold,
    topics: Topics,
    limits: Limits,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    published_below: int = 0,
) -> StepCounts:
    result = IngestStep(topics, limits, max_message_bytes, keys=TEST_KEYS).run(
        fold.state, batch, published_below
    )
    fold.outputs += result.outputs
    result.counts.publish_metrics()
    return result.counts
