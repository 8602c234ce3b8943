"""Seed ingest's IDEvt counters from the vault's journals, on a broker that starts empty.

ingest's counters are a fold of ``events.in`` snapshotted on ``<prefix>ingest.state``: both live
on the broker. ``coffre up``'s embedded broker keeps everything in memory, so each ``coffre up``
starts with empty topics while the data folder (the vault's journals) is still there: without a
seed, ingest would number each coffre from 1 again and the vault would stop at the first IDEvt
it already holds with other bytes. So, when the broker is fresh, each partition of ``events.in``
gets a first snapshot at offset 0 holding the last IDEvt of each coffre it owns, read from the
journals. A partition that already has a snapshot or inputs is left alone: its fold is the truth.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiokafka import TopicPartition

from coffre.adapters.journal import JournalSet
from coffre.adapters.kafka import span_reader, topic_partitions
from coffre.adapters.kafka_security import client_options
from coffre.adapters.keys import record_keys
from coffre.adapters.stream import publisher
from coffre.config import Settings
from coffre.domain.routing import coffre_partition

from .step import PartitionState

log = logging.getLogger("coffre.ingest.seed")


def journal_heads(journal_root: Path) -> dict[tuple[str, int], int]:
    """The last IDEvt of each coffre with a journal under ``journal_root`` (each chain verified)."""
    if not journal_root.is_dir():
        return {}
    journals = JournalSet(journal_root)
    try:
        heads = {key: journals.journal(*key).last_id_evt for key in journals.coffres()}
    finally:
        journals.close()
    return {key: last for key, last in heads.items() if last > 0}


def seed_states(heads: dict[tuple[str, int], int], partitions: int) -> list[PartitionState]:
    """One first snapshot per partition of ``events.in`` that owns a coffre of ``heads``."""
    states: dict[int, PartitionState] = {}
    for (id_oper, id_coffre), last in sorted(heads.items()):
        p = coffre_partition(id_coffre, partitions)
        state = states.setdefault(p, PartitionState(p, partitions))
        state.counters[(id_oper, id_coffre)] = last
        state.size += PartitionState.counter_bytes(id_oper, id_coffre)
    return [states[p] for p in sorted(states)]


async def seed_from_journals(settings: Settings, journal_root: Path) -> list[PartitionState]:
    """Write the seed snapshots of the fresh partitions; return those written."""
    heads = journal_heads(journal_root)
    if not heads:
        return []
    topics = settings.topics
    async with span_reader(settings.bootstrap_servers, client_options(settings)) as reader:
        partitions = len(await topic_partitions(reader, topics.events_in)) or settings.partitions
        candidates = seed_states(heads, partitions)
        tps = [
            tp
            for s in candidates
            for tp in (
                TopicPartition(topics.events_in, s.partition),
                TopicPartition(topics.ingest_state, s.partition),
            )
        ]
        ends = await reader.end_offsets(tps)
    fresh = [
        s
        for s in candidates
        if ends[TopicPartition(topics.events_in, s.partition)] == 0
        and ends[TopicPartition(topics.ingest_state, s.partition)] == 0
    ]
    for state in fresh:
        if state.size > state.budget(settings.max_message_bytes):
            raise ValueError(
                f"partition {state.partition}: the journals hold more coffres than one snapshot takes"
            )
    if not fresh:
        return []
    keys = record_keys(settings)
    async with publisher(settings) as out:
        await out.send_records((topics.ingest_state, *s.record(keys), s.partition) for s in fresh)
    log.info(
        "seeded the IDEvt counters of %d coffre(s) on %d partition(s) from %s",
        sum(len(s.counters) for s in fresh),
        len(fresh),
        journal_root,
    )
    return fresh


__all__ = ["journal_heads", "seed_from_journals", "seed_states"]
