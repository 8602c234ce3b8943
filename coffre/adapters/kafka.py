"""Kafka plumbing shared by the services: client tuning, topic creation, reading a partition span,
offset commits, consumer lag.

Written for aiokafka against both Apache Kafka and the embedded Tansu broker
(:mod:`coffre.adapters.broker`). What Tansu 0.6.0 does differently, and how this module copes:

* No idempotent or transactional producers (InitProducerId fails): ``enable_idempotence=False``.
* ``end_offsets()`` can under-report when the last batch holds several records, so
  :func:`read_span` (every reader of a span, :func:`drain` among them) reads until a fetch returns
  nothing for ``idle_ms`` instead of trusting it, and :func:`read_end_offsets` reads the last batch.
* A produce hands out its batch's offsets (moves the high watermark) before it stores the batch:
  with several producers on one partition, a fetch made in between skips a batch stored after a
  later one, and a fetch a moment later returns it. A gap in a fetch is no hole of the log:
  ingest reads again from it, and passes over offsets only when two fetches a second apart agree
  (``services/ingest/app.py``, ``HOLE_SETTLE_SECONDS``).
* A metadata request naming a missing topic creates it with 4 partitions (auto-creation), so
  this module only ever asks for *all* topics and filters, and creates topics explicitly.
* A consumer-group join waits about half the session timeout, hence the short session timeout.
* Tansu numbers a group's first generation 0 (Kafka starts at 1) and aiokafka sends LeaveGroup
  only for generation > 0: the first member of a fresh group leaves silently and the next
  consumer of that group waits for its session to expire (~11 s instead of ~3 s). Stop
  consumers with :func:`stop_consumer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.conn import create_conn
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from aiokafka.protocol.group import LeaveGroupRequest
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.structs import ConsumerRecord, OffsetAndMetadata

from coffre import metrics

log = logging.getLogger("coffre.kafka")
T = TypeVar("T")


def _offsets_refresh_a_stale_leader() -> None:
    """aiokafka (0.14) asks a partition's leader for its offsets when a consumer's position must be
    reset (a new assignment with no committed offset, a seek to the end). When that broker is no
    longer the leader (it was paused or killed and leadership moved), the answer is
    NotLeaderForPartition, and aiokafka logs "Failed fetch offsets", waits its retry backoff and
    asks the same broker again, with the same metadata, until the periodic refresh
    (``metadata_max_age_ms``, 5 minutes): a chaos soak's acquittal service got none of its partitions
    for 4.5 minutes after one broker of three was paused for 5 s. Every other path of the fetcher asks
    for fresh metadata on such an error; this makes the offset request do the same."""
    from aiokafka.consumer.fetcher import Fetcher

    request = Fetcher._proc_offset_request
    if getattr(request, "_coffre_refreshes_metadata", False):
        return

    async def _proc_offset_request(self: Fetcher, node_id: int, topic_data: Any) -> Any:
        try:
            return await request(self, node_id, topic_data)
        except KafkaError as error:
            if error.invalid_metadata:
                self._client.force_metadata_update()
            raise

    _proc_offset_request._coffre_refreshes_metadata = True  # type: ignore[attr-defined]
    Fetcher._proc_offset_request = _proc_offset_request  # type: ignore[method-assign]


_offsets_refresh_a_stale_leader()

__all__ = [
    "COMMIT_INTERVAL",
    "CONSUMER_TUNING",
    "LINGER_VARIABLE",
    "PRODUCER_TUNING",
    "CommitOffsets",
    "LagMeter",
    "OffsetCommitter",
    "TopicMismatchError",
    "TopicsNotCreatable",
    "committed_offsets",
    "drain",
    "ensure_topics",
    "kafka_available",
    "on_embedded_broker",
    "partitions_for",
    "read_end_offsets",
    "read_span",
    "span_reader",
    "stop_consumer",
    "track_leadership",
]

REQUEST_TIMEOUT_MS = 5_000
"""How long every coffre client waits for a broker's answer before it asks another (a silent broker:
paused, frozen, cut off). Measured on three brokers, one paused: acquittals back after 16.7 s with 5 s,
61-91 s with 15 s (tests/pipeline/test_apache_kafka.py)."""

#: aiokafka consumer keyword arguments for latency on these brokers. Offsets are committed by the
#: caller, after its own durable write; a fresh group starts at the beginning of the topic.
CONSUMER_TUNING: dict[str, Any] = {
    "fetch_max_wait_ms": 5,
    "fetch_min_bytes": 1,
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 1000,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "max_poll_records": 500,
    # a broker that stops answering (paused, cut off) holds a fetch, a metadata request at start or a
    # join this long before the client tries another: aiokafka's 40 s kept a restarted service from
    # its partitions for most of a minute when a bootstrap server was the paused one, and 15 s cost
    # 60-90 s after a broker of three was paused (each request and metadata refresh that met it waited
    # it out in turn). A group join waits at most a dead member's session (3 s), well within it
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
}

LINGER_VARIABLE = "COFFRE_PRODUCER_LINGER_MS"
"""The producers' linger (ms) when set: ``coffre up`` sets it for its children on the embedded broker
(:data:`coffre.commands.stack.EMBEDDED_LINGER_MS`), where every record batch a partition holds costs every
later fetch of it; unset, 0 (Apache Kafka: the acquittal latency first)."""


def _linger_ms() -> int:
    value = os.environ.get(LINGER_VARIABLE, "").strip()
    if not value:
        return 0
    try:
        return max(0, min(int(value), 1000))
    except ValueError:
        log.warning("%s=%r is not a number of milliseconds: ignored", LINGER_VARIABLE, value)
        return 0


#: aiokafka producer keyword arguments: every write acknowledged by all in-sync replicas, no
#: batching wait unless ``COFFRE_PRODUCER_LINGER_MS`` asks for one, no idempotence (Tansu cannot:
#: InitProducerId fails there).
PRODUCER_TUNING: dict[str, Any] = {
    "acks": "all",
    "linger_ms": _linger_ms(),
    "enable_idempotence": False,
    "max_batch_size": 256 * 1024,
    # a leader that stops answering (a broker paused, a host cut off) holds a send this long before
    # the producer asks for the new leader: aiokafka's 40 s stalled every acquittal as long. A send
    # that times out on a live but slow broker is sent again: a redelivery every reader handles
    "request_timeout_ms": REQUEST_TIMEOUT_MS,
}

_ADMIN_TIMEOUT_MS = 10_000
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
"""Kafka's default ``max.message.bytes`` for a topic (the largest record batch it takes)."""


class TopicMismatchError(RuntimeError):
    """A topic exists with another partition count than the one asked for."""


class TopicsNotCreatable(TopicMismatchError):
    """Topics are missing and the broker refused to create them: this principal has no Create right
    (coffre's least-privilege ACLs give it none, docs/operations.md, "Who may do what")."""


_AUTHORIZATION_ERRORS = {
    TopicAuthorizationFailedError.errno: "TOPIC_AUTHORIZATION_FAILED",
    ClusterAuthorizationFailedError.errno: "CLUSTER_AUTHORIZATION_FAILED",
}


async def _all_topics(admin: AIOKafkaAdminClient) -> dict[str, dict[str, Any]]:
    # describe_topics(None) asks for *all* topics: naming one would auto-create it on Tansu.
    return {t["topic"]: t for t in await admin.describe_topics(None)}


def _ready(description: dict[str, Any] | None, partitions: int) -> bool:
    if description is None or description.get("error_code", 0) != 0:
        return False
    parts = description.get("partitions", [])
    return len(parts) == partitions and all(p["error_code"] == 0 and p["leader"] >= 0 for p in parts)


Security = Mapping[str, Any]
"""A client's security keyword arguments (:func:`coffre.adapters.kafka_security.client_options`);
every function here that makes a client takes them as ``security``."""


async def _admin(bootstrap: str, security: Security | None = None) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=_ADMIN_TIMEOUT_MS, **(security or {})
    )
    await admin.start()
    return admin


async def ensure_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    timeout: float = 30.0,
    *,
    replication: int = 1,
    max_message_bytes: int | None = None,
    security: Security | None = None,
    create: bool = True,
    configs: Mapping[str, str] | None = None,
    topic_configs: Mapping[str, Mapping[str, str]] | None = None,
    principal: str | None = None,
) -> None:
    """Create every missing topic with exactly its partition count, then wait until metadata shows them.

    "Already exists" is fine (another process may create the same topic concurrently); an existing
    topic with a different partition count raises :class:`TopicMismatchError`. Never relies on
    the broker's auto-creation.

    With ``max_message_bytes`` (the largest record coffre will publish), the topics created take
    records that large, and a topic whose ``max.message.bytes`` is smaller raises
    :class:`TopicMismatchError`: a record the broker refuses would stop ingest's partition at every retry.
    A broker that does not report the setting (Tansu takes any size) is not checked.

    ``configs``: more settings of the topics created (``cleanup.policy``, say); ``topic_configs``:
    settings of one topic created, over those (``events.in``'s larger ``max.message.bytes``).

    ``create=False`` (``COFFRE_KAFKA_CREATE_TOPICS=false``: an admin or Strimzi creates them and
    coffre's principals may not): a missing topic raises :class:`TopicMismatchError`, nothing is created.
    A creation the broker refuses for want of the right raises :class:`TopicsNotCreatable`, which says
    so (naming ``principal``, who the client logs in as, when given).
    """
    for name, count in topics.items():
        if not name or not isinstance(count, int) or count < 1:
            raise ValueError(f"topic {name!r}: a non-empty name and a partition count >= 1 are needed")
    if not topics:
        return
    deadline = time.monotonic() + timeout
    admin = await _admin(bootstrap, security)
    try:
        existing = await retried(lambda: _all_topics(admin), timeout)  # a broker down at a start
        absent = sorted(n for n in topics if n not in existing)
        if absent and not create:
            raise TopicMismatchError(
                f"topics {', '.join(absent)} do not exist (or this principal may not describe them), and "
                "COFFRE_KAFKA_CREATE_TOPICS=false: create them first (docs/operations.md)"
            )
        created = dict(configs or {})
        if max_message_bytes is not None:
            created["max.message.bytes"] = str(max(max_message_bytes, KAFKA_DEFAULT_MAX_MESSAGE_BYTES))
        missing = [
            NewTopic(n, c, replication, topic_configs={**created, **(topic_configs or {}).get(n, {})} or None)
            for n, c in topics.items()
            if n not in existing
        ]
        if missing:
            response = await admin.create_topics(missing, timeout_ms=_ADMIN_TIMEOUT_MS)
            refused: dict[str, str] = {}
            for entry in response.topic_errors:
                name, code = entry[0], entry[1]
                if code == 0 or code == TopicAlreadyExistsError.errno:
                    continue
                if code in _AUTHORIZATION_ERRORS:
                    refused[name] = _AUTHORIZATION_ERRORS[code]
                    continue
                message = entry[2] if len(entry) > 2 else ""
                raise RuntimeError(f"could not create topic {name!r}: error {code} {message or ''}".strip())
            if refused:
                who = f"principal {principal}" if principal else "this principal"
                raise TopicsNotCreatable(
                    f"COFFRE_KAFKA_CREATE_TOPICS is true and {who} may not create topics (the broker "
                    f"refused {', '.join(sorted(refused))}: {', '.join(sorted(set(refused.values())))}): "
                    "create coffre's topics first (an admin with kafka-topics.sh, or Strimzi's KafkaTopics; "
                    'docs/operations.md, "Who may do what") and set COFFRE_KAFKA_CREATE_TOPICS=false'
                )
        while True:
            described = await retried(lambda: _all_topics(admin), max(0.0, deadline - time.monotonic()))
            for name, count in topics.items():
                found = described.get(name)
                if found is not None and found.get("error_code", 0) == 0:
                    have = len(found.get("partitions", []))
                    if have and have != count:
                        raise TopicMismatchError(f"topic {name!r} has {have} partitions, not {count}")
            if all(_ready(described.get(n), c) for n, c in topics.items()):
                if max_message_bytes is not None:
                    await _check_message_limit(admin, list(topics), max_message_bytes)
                return
            if time.monotonic() >= deadline:
                pending = sorted(n for n, c in topics.items() if not _ready(described.get(n), c))
                raise TimeoutError(f"topics not ready after {timeout}s: {pending}")
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


async def _check_message_limit(admin: AIOKafkaAdminClient, names: list[str], wanted: int) -> None:
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        )
    except KafkaError as exc:
        log.warning("could not read the topics' max.message.bytes (%s): not checked", exc)
        return
    for response in responses:
        for resource in response.resources:
            name, entries = resource[3], resource[4]
            for entry in entries:
                if entry[0] == "max.message.bytes" and entry[1] is not None and int(entry[1]) < wanted:
                    raise TopicMismatchError(
                        f"topic {name!r} takes records of at most {entry[1]} bytes (max.message.bytes), "
                        f"less than COFFRE_MAX_MESSAGE_BYTES={wanted}: raise the topic's "
                        "max.message.bytes or lower COFFRE_MAX_MESSAGE_BYTES"
                    )


async def topic_retention(
    bootstrap: str, topic: str, security: Security | None = None
) -> tuple[int | None, int | None]:
    """(``retention.ms``, ``retention.bytes``) of ``topic``, each None when unlimited (-1) or not
    reported (Tansu's memory storage keeps everything and reports nothing)."""
    admin = await _admin(bootstrap, security)
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    except KafkaError as exc:
        log.warning("could not read the retention of %s (%s): not checked", topic, exc)
        return None, None
    finally:
        await admin.close()
    found: dict[str, int | None] = {"retention.ms": None, "retention.bytes": None}
    for response in responses:
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] in found and entry[1] is not None and int(entry[1]) >= 0:
                    found[entry[0]] = int(entry[1])
    return found["retention.ms"], found["retention.bytes"]


async def partitions_for(bootstrap: str, topic: str, security: Security | None = None) -> int:
    """The partition count of ``topic`` (never creates it); ``KeyError`` if it does not exist."""
    admin = await _admin(bootstrap, security)
    try:
        found = (await _all_topics(admin)).get(topic)
    finally:
        await admin.close()
    if found is None or found.get("error_code", 0) != 0:
        raise KeyError(f"no topic {topic!r} on {bootstrap}")
    return len(found["partitions"])


@contextlib.asynccontextmanager
async def span_reader(
    bootstrap: str, security: Security | None = None, **options: Any
) -> AsyncIterator[AIOKafkaConsumer]:
    """A started consumer for :func:`read_span` (no group unless ``options`` name one, nothing
    committed, 5 ms fetch waits), stopped on exit."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **{
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": 5,
            "request_timeout_ms": CONSUMER_TUNING["request_timeout_ms"],
            **options,
        },
        **(security or {}),
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def read_span(
    consumer: AIOKafkaConsumer,
    spans: Mapping[TopicPartition, tuple[int, int | None]],
    *,
    idle_ms: int = 500,
    timeout: float | None = None,
) -> AsyncIterator[tuple[TopicPartition, list[ConsumerRecord]]]:
    """The records of each partition of ``spans`` from its start, as fetched: at least up to its end
    (exclusive) when one is given, however slow the fetches (an empty fetch on a busy machine is not
    the end), then on until a fetch has returned nothing for ``idle_ms``: an end from
    ``end_offsets()`` is only a floor, Tansu can under-report it. A caller that has what it wants
    stops iterating. ``TimeoutError`` once ``timeout`` seconds have passed.

    ``consumer`` (:func:`span_reader`) is assigned the partitions of ``spans`` and nothing else."""
    tps = list(spans)
    if not tps:
        return
    consumer.assign(tps)
    for tp, (start, _) in spans.items():
        consumer.seek(tp, start)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        batch = await consumer.getmany(*tps, timeout_ms=idle_ms)
        for tp, records in batch.items():
            if records:
                yield tp, records
        if not batch:
            for tp, (_, end) in spans.items():
                if end is not None and await consumer.position(tp) < end:
                    break
            else:
                return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(
                f"{', '.join(f'{tp.topic}[{tp.partition}]' for tp in tps)}: not read within {timeout:g}s"
            )


async def retried(call: Callable[[], Awaitable[T]], seconds: float) -> T:
    """``await call()``, again every 0.2 s while it fails as the cluster fails for a while (a leader
    moving, a broker paused: a retriable error or a timeout), for at most ``seconds``; then, or at
    once for any other failure, its error is raised."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except KafkaError as exc:
            if not (exc.retriable or isinstance(exc, KafkaTimeoutError)) or time.monotonic() > deadline:
                raise
            log.warning("%r: asking again", exc)
            await asyncio.sleep(0.2)


async def read_end_offsets(
    consumer: AIOKafkaConsumer, reported: Mapping[TopicPartition, int], timeout: float = 10.0
) -> dict[TopicPartition, int]:
    """Each partition's end offset, read rather than asked: ``reported`` (ListOffsets) with the
    records of the last batch beyond it.

    Tansu 0.6.0 answers ListOffsets with the last record batch's base offset + 1: when that batch
    holds several records, a reader up to the end offset stops short of the newest writes. A fetch
    from ``reported - 1`` returns that last batch whole. On Kafka the answer is exact and the fetch
    confirms it. ``TimeoutError`` when the last records cannot be read within ``timeout``."""
    ends = dict(reported)  # keys may be faust's TP: equal, as tuples, to aiokafka's TopicPartition
    pending = {TopicPartition(tp.topic, tp.partition) for tp, end in reported.items() if end > 0}
    if pending:
        spans = {tp: (reported[tp] - 1, reported[tp]) for tp in pending}
        async for tp, records in read_span(consumer, spans, idle_ms=100, timeout=timeout):
            ends[tp] = max(ends[tp], records[-1].offset + 1)
            pending.discard(tp)
            if not pending:
                break
    return ends


async def drain(
    bootstrap: str,
    topic: str,
    *,
    idle_ms: int = 500,
    group_id: str | None = None,
    security: Security | None = None,
) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the beginning, until a fetch has returned nothing for ``idle_ms``.

    Partitions are assigned by hand (no group join, nothing committed; ``group_id`` only names
    the reading consumer). Records come back partition by partition, each in offset order.
    ``end_offsets()`` serves only as a lower bound (:func:`read_span`). ``KeyError`` when the topic
    does not exist (it is never created).
    """
    count = await partitions_for(bootstrap, topic, security)
    tps = [TopicPartition(topic, p) for p in range(count)]
    records: dict[int, list[ConsumerRecord]] = {p: [] for p in range(count)}
    options = {**CONSUMER_TUNING, "max_poll_records": 10_000, "group_id": group_id}
    async with span_reader(bootstrap, security, **options) as consumer:
        floor = await consumer.end_offsets(tps)
        # If the floor is never reached (it should be), give up after a bounded wait.
        with contextlib.suppress(TimeoutError):
            spans = {tp: (0, floor[tp]) for tp in tps}
            async for tp, recs in read_span(
                consumer, spans, idle_ms=idle_ms, timeout=max(10.0, 20 * idle_ms / 1000)
            ):
                records[tp.partition].extend(recs)
    return [r for p in range(count) for r in records[p]]


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    """The partitions of ``topic`` in the cluster's metadata now (empty when it does not exist; never
    created: the request names no topic). Not ``consumer.topics()`` then ``partitions_for_topic``, which
    reads the consumer's own metadata: on Apache Kafka it holds only the topics the consumer subscribed
    or was assigned (Tansu answered with every topic)."""
    cluster = await consumer._client.fetch_all_metadata()
    return set(cluster.partitions_for_topic(topic) or ())


EMBEDDED_CLUSTER_ID = "tansu_cluster"
"""The cluster id the embedded broker (Tansu) reports in its metadata (Tansu's default, which
:class:`coffre.adapters.broker.EmbeddedBroker` passes it); Apache Kafka's is a random id."""


async def on_embedded_broker(consumer: AIOKafkaConsumer, timeout: float = 10.0) -> bool:
    """Whether ``consumer`` (started) talks to the embedded broker (Tansu), told by the cluster id of
    one metadata answer. When it cannot be told (no answer within ``timeout``) it says True: the side
    that only costs a session on Apache Kafka (see ``leave_as_leader`` in :func:`stop_consumer`)."""
    client = getattr(consumer, "_client", None)
    try:
        node = client.get_random_node() if client is not None else None
        if node is None:
            raise KafkaError("no broker known yet")
        async with asyncio.timeout(timeout):
            response = await client.send(node, MetadataRequest([]))
    except (KafkaError, OSError, TimeoutError) as exc:
        log.warning("could not tell which broker this is (%r): taken for the embedded broker", exc)
        return True
    cluster = getattr(response, "cluster_id", None) or ""
    return cluster == EMBEDDED_CLUSTER_ID or cluster.lower().startswith("tansu")


def track_leadership(consumer: AIOKafkaConsumer) -> None:
    """Note, on ``consumer`` (started, not yet subscribed), the generation it last led the group in.

    :func:`stop_consumer` reads it: see ``leave_as_leader`` there. Best effort, through aiokafka
    internals when present (the leader is the member that runs ``_perform_assignment``).
    """
    coordinator = getattr(consumer, "_coordinator", None)
    perform = getattr(coordinator, "_perform_assignment", None)
    if coordinator is None or perform is None:
        return

    async def perform_assignment(response: Any) -> Any:
        coordinator._coffre_led_generation = coordinator.generation
        return await perform(response)

    coordinator._perform_assignment = perform_assignment


def _led_current_generation(consumer: AIOKafkaConsumer) -> bool:
    """Whether ``consumer`` (under :func:`track_leadership`) led the generation it is in."""
    coordinator = getattr(consumer, "_coordinator", None)
    led = getattr(coordinator, "_coffre_led_generation", None)
    return led is not None and led == getattr(coordinator, "generation", None)


async def stop_consumer(consumer: AIOKafkaConsumer, *, leave_as_leader: bool = True) -> None:
    """``consumer.stop()``, leaving its group even at generation 0, or not at all as its leader.

    aiokafka skips LeaveGroup at generation 0, the first generation on Tansu, which leaves a
    ghost member the group's next consumer waits on until its session expires. Changes nothing
    on Apache Kafka (first generation 1). Best effort, through aiokafka internals when present:
    the LeaveGroup is sent at the point aiokafka sends its own (heartbeat stopped, final
    commits done).

    ``leave_as_leader=False`` (a group of several members, such as ingest's replicas, on the embedded
    broker: :func:`coffre.adapters.stream.stream` asks for it only there, :func:`on_embedded_broker`):
    when the consumer led its generation (:func:`track_leadership`) it does not leave; the broker drops
    it when its session expires. Tansu 0.6.0, when the leader of a group that is forming leaves,
    removes the member but keeps it as the leader: every other member's SyncGroup is then
    refused (RebalanceInProgress) until the group is rebuilt by chance, measured at 2.5 minutes
    without any partition assigned. A session expiry clears the leader properly. A member that
    was not the leader leaves as usual. Apache Kafka has no such defect: there a leader that leaves
    costs a rebalance like any member's leave, where waiting out its session cost the group that
    session (measured: 5.6 s with a 6 s session, before this was asked only of Tansu).
    """
    coordinator = getattr(consumer, "_coordinator", None)
    original = getattr(coordinator, "_maybe_leave_group", None)
    if coordinator is not None and original is not None:

        async def leave_group() -> None:
            if not leave_as_leader and _led_current_generation(consumer):
                log.info(
                    "not leaving the group as its leader: the broker drops this member when its session expires"
                )
                coordinator.reset_generation()
                return
            if (
                getattr(coordinator, "generation", None) == 0
                and getattr(coordinator, "member_id", None)
                and getattr(coordinator, "_group_instance_id", None) is None
            ):
                with contextlib.suppress(Exception):
                    request = LeaveGroupRequest(coordinator.group_id, coordinator.member_id)
                    async with asyncio.timeout(5):
                        await coordinator._send_req(request)
            await original()

        coordinator._maybe_leave_group = leave_group
    await consumer.stop()


def host_port(server: str) -> tuple[str, int]:
    """The host and port of one bootstrap server, ``HOST:PORT`` (``[v6]:PORT`` too); ``ValueError``
    when the port is not a number."""
    host, _, port = server.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


async def _metadata_ok(bootstrap: str, timeout: float, security: Security | None = None) -> bool:
    conn = None
    try:
        host, port = host_port(bootstrap)
        async with asyncio.timeout(timeout):
            conn = await create_conn(host, port, request_timeout_ms=int(timeout * 1000), **(security or {}))
            response = await conn.send(MetadataRequest([]))
            return len(response.brokers) > 0
    except Exception:
        return False
    finally:
        if conn is not None:
            conn.close()


def kafka_available(bootstrap: str, timeout: float = 3.0, security: Security | None = None) -> bool:
    """Whether a Kafka metadata request to the first bootstrap address succeeds within ``timeout``.

    Synchronous and safe to call from inside a running event loop (it uses its own, in a thread).
    """
    first = bootstrap.split(",")[0].strip()
    if not first or ":" not in first:
        return False
    result: list[bool] = [False]

    def run() -> None:
        result[0] = asyncio.run(_metadata_ok(first, timeout, security))

    thread = threading.Thread(target=run, name="kafka-available", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return result[0]


COMMIT_INTERVAL = 0.1
"""Seconds between two offset commits of the vault and the acquittal service. A commit is a
request (and a broker write) of its own: one per small batch cost more CPU than the batch.
What a crash then reads again (at most this much more) is a redelivery they handle."""


CommitOffsets = Mapping[TopicPartition, int | OffsetAndMetadata]
"""Offsets to commit: the next offset to read of each partition, alone or with its metadata (a string,
at most ``offset.metadata.max.bytes``, 4096 by default; the vault's acknowledged position)."""


class OffsetCommitter:
    """Commits a consumer's offsets off the critical path, in order, one commit in flight.

    The caller hands it the offsets of a batch once that batch's effects are on Kafka (its
    receipts or acquittals acknowledged); the next batch is read meanwhile. Offsets handed over
    while a commit is in flight, or less than ``interval`` seconds after the last one began, are
    merged (the newest offset of each partition wins, with its metadata) into the one commit that follows. A commit
    that fails (a rebalance took the partition) is logged and dropped: those records are read
    again, which every consumer here handles as a redelivery. :meth:`flush` commits what waits
    at once.
    """

    def __init__(self, consumer: AIOKafkaConsumer, interval: float = 0.0):
        self._consumer = consumer
        self._interval = interval
        self._last: asyncio.Task[None] | None = None
        # for the commit after the one in flight
        self._waiting: dict[TopicPartition, int | OffsetAndMetadata] | None = None
        self._began = -float("inf")  # monotonic time the last commit began
        self._hurry = asyncio.Event()  # flush: no more waiting for the interval

    def commit(self, offsets: CommitOffsets) -> None:
        if not offsets:
            return
        if self._waiting is not None:
            self._waiting.update(offsets)
            return
        self._waiting = dict(offsets)
        self._last = asyncio.create_task(self._commit_after(self._last))

    async def _commit_after(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous
        pause = self._began + self._interval - time.monotonic()
        if pause > 0 and not self._hurry.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), pause)
        self._began = time.monotonic()
        offsets, self._waiting = self._waiting, None
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("offset commit failed (the records will be read again): %s", exc)

    async def flush(self) -> None:
        """Commit what waits now, and wait for every commit handed over so far."""
        self._hurry.set()
        try:
            while self._last is not None and not self._last.done():
                await self._last  # a commit handed over meanwhile makes a newer last one
        finally:
            self._hurry.clear()


async def committed_offsets(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], timeout: float
) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets ``consumer``'s group committed on ``partitions``, each with its metadata (those with
    none committed left out). aiokafka's ``committed()`` gives the offset only: this asks through its
    group coordinator (an internal, present since aiokafka 0.5), which retries what the cluster mends;
    ``TimeoutError`` past ``timeout`` seconds, ``KafkaError`` for what it does not retry."""
    coordinator = getattr(consumer, "_coordinator", None)
    fetch = getattr(coordinator, "fetch_committed_offsets", None)
    if fetch is None:
        raise KafkaError("this aiokafka cannot read committed offsets' metadata")
    async with asyncio.timeout(timeout):
        return dict(await fetch(list(partitions)))


class LagMeter:
    """``coffre_consumer_lag`` for an aiokafka consumer, refreshed at most every ``period`` s."""

    def __init__(self, consumer: AIOKafkaConsumer, period: float = 1.0) -> None:
        self.consumer = consumer
        self.period = period
        self._last = 0.0

    async def update(self) -> None:
        now = time.monotonic()
        if now - self._last < self.period:
            return
        self._last = now
        for tp in self.consumer.assignment():
            highwater = self.consumer.highwater(tp)
            if highwater is None:
                continue
            with contextlib.suppress(Exception):  # a partition revoked meanwhile
                position = await self.consumer.position(tp)
                metrics.CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(max(0, highwater - position))
