"""Nothing a platform writes can make coffre lose, forge or misnumber an event (issue 19), end to end.

The platform is librdkafka (confluent-kafka) on the embedded broker, which cannot be secured: any
client may write any topic, as on a cluster whose ACLs are too wide. It writes what a platform or a
stranger can: a record carrying ingest's ``coffre-forwarded-from`` header, a normalized event claiming
the IDEvt the next genuine event takes, a receipt and a rejection in the vault's and ingest's name,
and a snapshot of ingest's counters far ahead. Each is answered once or refused; every genuine event
is recorded once, IDEvt 1..n, and acknowledged; no service halts.
(The acquittal topic is protected by ACLs alone: see tests/pipeline/test_apache_kafka.py.) The same
test runs on Apache Kafka's own brokers, left open as the embedded one is: the tag does not depend on
the broker.
"""

from __future__ import annotations

import json
import signal
import time

from coffre_vault.history import recorded_events
from confluent_kafka import Consumer, Producer, TopicPartition

from coffre.adapters.broker import free_port_block
from coffre.adapters.storage import LocalStorage
from coffre.commands.stack import SERVICES, Stack
from coffre.domain.messages import (
    CORRELATION_ID,
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SUPERVISED,
    Receipt,
)
from coffre.domain.routing import FORWARDED_FROM, coffre_partition

from events import POINSCRIT
from pipeline.ops_http import get, metric, wait_ready
from pipeline.stack_settings import stack_settings

PARTITIONS = 3
EVENTS = 20


def coffre_owned_by(partition: int) -> int:
    return next(c for c in range(100, 10_000) if coffre_partition(c, PARTITIONS) == partition)


def event(coffre: int, player: str) -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre}</IDCoffre>".encode())
    return raw.replace(b"<IDJoueur>p-1<", f"<IDJoueur>{player}<".encode())


def produce(bootstrap: str, records: list[tuple[str, int | None, bytes | None, bytes, list]]) -> None:
    """(topic, partition, key, value, headers) each, as a platform publishes them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for topic, partition, key, value, headers in records:
        extra = {} if partition is None else {"partition": partition}
        producer.produce(topic, value=value, key=key, headers=headers, **extra)
    assert producer.flush(30) == 0


def acquittals(bootstrap: str, topic: str, wanted: set[str], timeout: float) -> dict[str, list[dict]]:
    """Every acquittal read until each correlation id in ``wanted`` has one (or the timeout), then 2 s more."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "platform-t", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    found: dict[str, list[dict]] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            record = consumer.poll(0.3)
            if record is not None and record.error() is None:
                body = json.loads(record.value())
                found.setdefault(body["correlation_id"], []).append(body)
            elif wanted <= set(found):
                deadline = min(deadline, time.monotonic() + 2.0)
    finally:
        consumer.close()
    return found


def test_forged_headers_and_records_lose_nothing_and_stop_nothing(kafka_bootstrap, topic_prefix, tmp_path):
    settings = stack_settings(
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        partitions=PARTITIONS,
        ops_port=free_port_block(len(SERVICES)),
    )
    topics = settings.topics
    owner = 1
    coffre = coffre_owned_by(owner)
    stack = Stack(settings, bootstrap=kafka_bootstrap)
    stack.start()
    try:
        for name in SERVICES:
            wait_ready(stack, name)
        # 1. a stranger's normalized event, claiming the IDEvt 1 the coffre's first event will take
        #    (on a519769 the vault recorded it, then halted at the genuine IDEvt 1)
        forged_event = event(coffre, "forger").replace(b"<IDEvt>12</IDEvt>", b"<IDEvt>1</IDEvt>")
        assert b"<IDEvt>1</IDEvt>" in forged_event
        forged_headers = [
            (EVENT_TYPE, b"POINSCRIT"),
            (ID_OPER, b"0099"),
            (ID_COFFRE, str(coffre).encode()),
            (ID_EVT, b"1"),
            (SUPERVISED, b"0"),
            (INGESTED_AT, repr(time.time()).encode()),
            (CORRELATION_ID, b"forged-normalized"),
        ]
        # 2. a receipt in the vault's name for an event never published, and a rejection in ingest's
        #    name for a genuine event (it would tell the platform its event was refused)
        ghost = Receipt("0099", coffre, 999, "POINSCRIT", "00" * 32, "ghost", False, time.time())
        forged_rejection = json.dumps(
            {
                "status": "rejected",
                "correlation_id": "e-3",
                "source_id": None,
                "event_type": "POINSCRIT",
                "problems": [{"code": "INVALID_VALUE", "path": "/", "message": "forged"}],
                "original": "",
                "input_topic": topics.events_in,
                "input_partition": 0,
                "input_offset": 0,
                "rejected_at": "2026-11-25T00:00:00.000+00:00",
                "problems_omitted": 0,
                "original_size": 0,
                "original_sha256": None,
            }
        ).encode()
        produce(
            kafka_bootstrap,
            [
                (topics.normalized, owner, str(coffre).encode(), forged_event, forged_headers),
                (topics.receipts, owner, str(coffre).encode(), ghost.encode(), [(CORRELATION_ID, b"ghost")]),
                (topics.rejected, 0, b"e-3", forged_rejection, [(CORRELATION_ID, b"e-3")]),
            ],
        )
        # 3. the case: one record on the coffre's partition claiming to be a copy of partition
        #    0's offset 10^12, then the coffre's events published to partition 0 (ingest forwards them)
        produce(
            kafka_bootstrap,
            [
                (
                    topics.events_in,
                    owner,
                    None,
                    event(coffre, "f"),
                    [(CORRELATION_ID, b"forged-copy"), (FORWARDED_FROM, b"0:1000000000000")],
                ),
                *(
                    (
                        topics.events_in,
                        0,
                        b"not-the-coffre",
                        event(coffre, f"p-{i}"),
                        [(CORRELATION_ID, f"e-{i}".encode())],
                    )
                    for i in range(EVENTS)
                ),
            ],
        )
        wanted = {f"e-{i}" for i in range(EVENTS)} | {"forged-copy"}
        answers = acquittals(kafka_bootstrap, topics.acquittals, wanted, timeout=90)
        assert {f"e-{i}" for i in range(EVENTS)} <= set(answers), sorted(wanted - set(answers))
        for i in range(EVENTS):
            assert [a["status"] for a in answers[f"e-{i}"]] == ["recorded"], answers[f"e-{i}"]
        assert [a["status"] for a in answers["forged-copy"]] == ["rejected"]
        assert [r["code"] for r in answers["forged-copy"][0]["reasons"]] == ["RESERVED_HEADER"]
        assert "ghost" not in answers and "forged-normalized" not in answers
        assert sorted(a["id_evt"] for i in range(EVENTS) for a in answers[f"e-{i}"]) == list(
            range(1, EVENTS + 1)
        )
        assert metric(stack, "vault", "coffre_foreign_records_total") == 1
        assert metric(stack, "acquittal", "coffre_foreign_records_total") == 2

        # 4. a stranger's snapshot of ingest's counters, far ahead, read at ingest's next take-over
        #    (on a519769 the restarted ingest folded from offset 10^12: every later event lost)
        stack.kill("ingest", signal.SIGKILL)
        far = json.dumps(
            {
                "v": 1,
                "partition": owner,
                "partitions": PARTITIONS,
                "position": 10**12,
                "counters": [["0099", coffre, 10**9]],
                "forwarded": [[0, 10**12]],
            }
        ).encode()
        produce(kafka_bootstrap, [(topics.ingest_state, owner, str(owner).encode(), far, [])])
        stack.spawn("ingest")
        wait_ready(stack, "ingest")
        produce(
            kafka_bootstrap,
            [
                (
                    topics.events_in,
                    owner,
                    str(coffre).encode(),
                    event(coffre, "after"),
                    [(CORRELATION_ID, b"after")],
                )
            ],
        )
        later = acquittals(kafka_bootstrap, topics.acquittals, wanted | {"after"}, timeout=90)
        assert [a["status"] for a in later.get("after", [])] == ["recorded"], later.get("after")
        assert later["after"][0]["id_evt"] == EVENTS + 1
        assert metric(stack, "ingest", "coffre_foreign_records_total") >= 1
        for name in ("vault", "acquittal"):
            assert (
                stack.children[name].poll() is None
                and get(f"http://127.0.0.1:{stack.ops_port(name)}/healthz")[0] == 200
            )
    finally:
        codes = stack.stop()
    assert all(code == 0 for code in codes.values()), f"{codes} (logs in {tmp_path}/logs)"
    records = recorded_events(LocalStorage(settings.archive_root), settings.journal_root, "0099", coffre)
    assert [r.id_evt for r in records] == list(range(1, EVENTS + 2))
    assert not any(b"forger" in r.event or b">f<" in r.event for r in records)
