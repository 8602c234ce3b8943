"""Records are sent again while the cluster mends a failure, ingest's snapshots as every output.

A three-broker run with one broker paused stopped ingest with exit 70: its periodic snapshot of a
partition's IDEvt counters was sent once, without the retries the batch outputs had, and a request
timed out while the paused broker's partitions moved (``RequestTimedOutError``, retriable). The
snapshot now goes through :meth:`Publisher.deliver` as the outputs do. A producer whose sends fail
as a paused broker makes them fail stands in for the cluster here: the failure is Kafka's own
error class, raised where aiokafka raises it.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import RequestTimedOutError, TopicAuthorizationFailedError
from coffre_ingest.app import StateTopic
from coffre_ingest.step import PartitionState

from coffre.adapters import stream
from coffre.adapters.stream import Publisher, Record
from coffre.config import Settings

from ingest_fold import TEST_KEYS_TEXT


class FailingFirst(Publisher):
    """A publisher whose first ``failures`` sends raise ``error``; then it keeps what it is sent."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__(producer=None)  # type: ignore[arg-type]
        self.failures = failures
        self.error = error
        self.attempts = 0
        self.sent: list[list[Record]] = []

    async def send_records(self, records, *, ordered: bool = False) -> None:  # type: ignore[override]
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        self.sent.append(list(records))


def snapshot_topic(publisher: Publisher, tmp_path) -> StateTopic:
    settings = Settings(data_dir=tmp_path, record_keys=TEST_KEYS_TEXT)
    return StateTopic(settings, publisher, reader=None)  # type: ignore[arg-type]


def state() -> PartitionState:
    return PartitionState(partition=2, partitions=6, position=41, counters={("0099", 7): 12})


def test_a_snapshot_is_sent_again_while_a_paused_broker_s_partitions_move(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(stream.asyncio, "sleep", _no_wait)
    publisher = FailingFirst(3, RequestTimedOutError())
    asyncio.run(snapshot_topic(publisher, tmp_path).write([state()]))
    assert publisher.attempts == 4
    [[(topic, _key, value, _headers, partition)]] = publisher.sent
    assert (topic, partition) == ("coffre.ingest.state", 2)
    assert b'"position":41' in value.replace(b" ", b"")


def test_a_failure_the_cluster_does_not_mend_is_raised_at_once(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(stream.asyncio, "sleep", _no_wait)
    publisher = FailingFirst(1, TopicAuthorizationFailedError())
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(snapshot_topic(publisher, tmp_path).write([state()]))
    assert publisher.attempts == 1


def test_retries_end_after_send_retry_seconds(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(stream, "SEND_RETRY_SECONDS", 0.3)
    publisher = FailingFirst(10**6, RequestTimedOutError())
    with pytest.raises(RequestTimedOutError):
        asyncio.run(publisher.deliver([("t", None, b"v", [], 0)]))
    assert 1 < publisher.attempts < 10


async def _no_wait(_seconds: float) -> None:
    return None
