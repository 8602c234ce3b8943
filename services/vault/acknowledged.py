"""The vault's acknowledged position, carried in its committed offsets' metadata (issue 34).

The vault commits a partition of the normalized topic never past the first unsealed event of its
coffres (:meth:`~coffre_vault.recorder.Recorder.commit_offsets`), so a vault that starts again, or
is given the partition again in a rebalance, reads up to a lot's age of events again. Their receipts
were published already: beside the committed offset, each commit carries the partition's
*acknowledged position*, the next offset to read once the receipts of every record before it were
published and acknowledged by the broker (:meth:`~coffre.adapters.stream.Stream.run` awaits a batch's
receipts before it hands its offsets over). A vault given the partition reads it back
(:func:`read_positions`), and the recorder passes over the receipts of redelivered events below it,
still checking each one byte for byte against the journal or the archive. Records at or past it get
their receipts as before: at most the batches in flight at a crash are answered twice.

The metadata lives in the vault's consumer group, which any principal allowed to write that group
may change (anyone, on an unsecured cluster). So it carries a tag under coffre's record keys
(:class:`~coffre.domain.authenticity.RecordKeys`, purpose
:meth:`~coffre.domain.authenticity.Purpose.acknowledged`) over the topic, the partition, the
committed offset and the position. A metadata that does not verify is ignored, logged and counted
(``coffre_vault_offset_metadata_refused_total``): every receipt is sent again, as before, never
fewer than needed. A genuine metadata replayed (an older commit of the same partition) names an
older position, below which the receipts were published all the same.

Written ``ack:<position>:<key id>:<base64 tag>``, ASCII, about 100 bytes (Kafka keeps at most
``offset.metadata.max.bytes``, 4096 by default).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

from coffre import metrics
from coffre.adapters.kafka import committed_offsets
from coffre.domain.authenticity import AUTH, Purpose, RecordKeys

log = logging.getLogger("coffre.vault")

PREFIX = "ack:"
_POSITION = re.compile(r"0|[1-9][0-9]{0,18}")  # an offset (int64), written one way only
READ_TIMEOUT = 10.0
"""Seconds a vault given partitions waits for their committed metadata; past that, every receipt is sent."""


class UnverifiedMetadata(ValueError):
    """A committed offset's metadata that is not the vault's: malformed, or without a valid tag."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _signed(topic: str, partition: int, offset: int, position: int) -> tuple[bytes, bytes, bytes]:
    """(purpose, key, value) the tag covers."""
    return Purpose.acknowledged(partition), topic.encode(), b"%d:%d" % (offset, position)


def encode(keys: RecordKeys, topic: str, partition: int, offset: int, position: int) -> str:
    """The metadata of a commit of ``offset`` on ``topic``/``partition``, acknowledged up to ``position``."""
    ((_, tag),) = keys.seal(*_signed(topic, partition, offset, position), [])
    return f"{PREFIX}{position}:{tag.decode('ascii')}"


def decode(keys: RecordKeys, topic: str, partition: int, offset: int, metadata: str) -> int | None:
    """The acknowledged position that the commit of ``offset`` on ``topic``/``partition`` carries in
    ``metadata``; None for none (empty: a commit of a vault from before, or of another client);
    :class:`UnverifiedMetadata` when it is not the vault's (another offset's, partition's, topic's or
    install's, or altered). A position below ``offset`` verifies: it passes nothing over."""
    if not metadata:
        return None
    if not metadata.startswith(PREFIX):
        raise UnverifiedMetadata("malformed", f"not {PREFIX}<position>:<tag>")
    position, sep, tag = metadata[len(PREFIX) :].partition(":")
    if not sep or not _POSITION.fullmatch(position):
        raise UnverifiedMetadata("malformed", f"not {PREFIX}<position>:<tag>")
    acknowledged = int(position)
    if not keys.authentic(*_signed(topic, partition, offset, acknowledged), [(AUTH, tag.encode())]):
        raise UnverifiedMetadata("not_authentic", "its tag does not verify under this vault's record keys")
    return acknowledged


def positions(keys: RecordKeys, committed: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[int, int]:
    """Partition -> acknowledged position, of the commits whose metadata verifies; the others are
    logged and counted, and left out (their receipts are all sent)."""
    found: dict[int, int] = {}
    for tp, (offset, metadata) in committed.items():
        try:
            position = decode(keys, tp.topic, tp.partition, offset, metadata)
        except UnverifiedMetadata as exc:
            metrics.OFFSET_METADATA_REFUSED.labels(exc.reason).inc()
            log.warning(
                "the committed offset %d of %s[%d] carries metadata that is not this vault's (%s): ignored, "
                "the receipts of every event read again are sent again; who else writes the vault's group?",
                offset,
                tp.topic,
                tp.partition,
                exc,
            )
            continue
        if position is not None:
            found[tp.partition] = position
    return found


async def read_positions(
    consumer: AIOKafkaConsumer,
    keys: RecordKeys,
    partitions: list[TopicPartition],
    timeout: float = READ_TIMEOUT,
) -> dict[int, int]:
    """:func:`positions` of what ``consumer``'s group committed on ``partitions``; none when that cannot
    be read (a warning: every receipt is sent again)."""
    if not partitions:
        return {}
    try:
        committed = await committed_offsets(consumer, partitions, timeout)
    except (KafkaError, TimeoutError) as exc:
        log.warning(
            "could not read the committed offsets' metadata (%r): the receipts of every event read again "
            "are sent again",
            exc,
        )
        return {}
    return positions(keys, committed)
