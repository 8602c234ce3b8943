"""A small client for operator platforms: publish an event, ``await`` its outcome.

    async with CoffreClient("kafka:9092") as client:       # TLS, SASL: the COFFRE_KAFKA_* settings
        outcome = await client.submit(event_bytes)          # publish and wait
        if outcome.status == "recorded": ...                 # the player may be told

The outcome is the acquittal (``recorded`` or ``rejected``), or for an event that gets
no acquittal (a synthesis event such as POJEU, or one carrying ``Supervision``) the
vault's receipt (``recorded-without-acquittal``). The client normalizes the event
locally only to know which of the two to wait for; ingest remains the judge.

What is not given reads the same ``COFFRE_*`` environment as coffre's services
(:class:`coffre.config.Settings`): the bootstrap servers, the topic prefix, the synthesis events, and
TLS and SASL from the ``COFFRE_KAFKA_*`` settings (a platform logs in as its own principal, say
``COFFRE_KAFKA_SASL_USERNAME=coffre-platform``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .adapters.kafka import PRODUCER_TUNING, REQUEST_TIMEOUT_MS, topic_partitions
from .config import Topics
from .domain.errors import Rejected
from .domain.messages import CORRELATION_ID, SOURCE_ID, Acquittal, Receipt, header
from .domain.normalize import normalize
from .domain.routing import coffre_key

log = logging.getLogger("coffre.client")


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # "recorded" | "rejected" | "recorded-without-acquittal"
    correlation_id: str
    acquittal: Acquittal | None = None
    receipt: Receipt | None = None


class CoffreClient:
    def __init__(
        self,
        bootstrap: str | None = None,
        topics: Topics | None = None,
        synthesis_events: set[str] | None = None,
        security: Mapping[str, Any] | None = None,
    ):
        """Each argument left out is taken from the ``COFFRE_*`` environment, as the services take it:
        ``bootstrap`` from ``COFFRE_BOOTSTRAP_SERVERS``, ``topics`` from ``COFFRE_TOPIC_PREFIX``,
        ``synthesis_events`` from ``COFFRE_SYNTHESIS_EVENTS`` (POJEU by default), and ``security``, the
        clients' TLS and SASL options, from the ``COFFRE_KAFKA_*`` settings
        (:func:`coffre.adapters.kafka_security.client_options`; none set: plaintext). An argument given
        wins over the environment (``security={}``: plaintext whatever it says). A ``COFFRE_*`` value
        that is not valid raises pydantic's ``ValidationError`` naming it."""
        from .adapters.kafka_security import client_options
        from .config import Settings

        settings = Settings(bootstrap_servers=bootstrap) if bootstrap else Settings()
        self.bootstrap = settings.bootstrap_servers
        self.security = dict(security) if security is not None else client_options(settings)
        self.topics = topics or settings.topics
        self.synthesis_events = (
            set(synthesis_events) if synthesis_events is not None else set(settings.synthesis_events)
        )
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[str, tuple[asyncio.Future[Outcome], bool]] = {}
        self._early: dict[str, Outcome] = {}

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, **PRODUCER_TUNING, **self.security
        )
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=5,
            request_timeout_ms=REQUEST_TIMEOUT_MS,  # a silent broker waited out as coffre's services do
            **self.security,
        )
        await self._consumer.start()
        partitions = []
        for topic in (self.topics.acquittals, self.topics.receipts):
            found: set[int] | None = None
            for _ in range(100):  # the topic may be brand new: wait for its metadata
                found = await topic_partitions(self._consumer, topic)
                if found:
                    break
                await asyncio.sleep(0.1)
            if not found:
                raise RuntimeError(f"topic {topic} does not exist: is coffre running?")
            partitions += [TopicPartition(topic, p) for p in sorted(found)]
        self._consumer.assign(partitions)
        await self._consumer.seek_to_end(*partitions)
        self._reader = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self._reader:
            self._reader.cancel()
        if self._consumer:
            await self._consumer.stop()
        if self._producer:
            await self._producer.stop()

    async def __aenter__(self) -> CoffreClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def expects_acquittal(self, event: bytes) -> bool:
        """True unless the event normalizes to a synthesis or supervised event."""
        return self._inspect(event)[0]

    def _inspect(self, event: bytes) -> tuple[bool, bytes | None]:
        """Whether an acquittal is due, and the record key: ``str(IDCoffre)``, which puts the
        event on the partition of events.in whose ingest numbers its coffre (otherwise ingest
        forwards it there, one more hop). An event ingest will refuse needs no key."""
        try:
            normalized = normalize(event, id_evt=0)
        except Rejected:
            return True, None  # ingest will refuse it: a rejected acquittal comes
        acquittal = normalized.xml_tag not in self.synthesis_events and not normalized.supervised
        return acquittal, coffre_key(normalized.id_coffre)

    async def publish(
        self,
        event: bytes,
        *,
        correlation_id: str | None = None,
        source_id: str | None = None,
        key: bytes | None = None,
    ) -> str:
        """Publish ``event`` keyed by its IDCoffre (``key``, when the caller knows it already)."""
        assert self._producer, "start() the client first"
        correlation_id = correlation_id or str(uuid.uuid4())
        headers = [(CORRELATION_ID, correlation_id.encode())]
        if source_id:
            headers.append((SOURCE_ID, source_id.encode()))
        if key is None:
            key = self._inspect(event)[1] or correlation_id.encode()
        await self._producer.send_and_wait(self.topics.events_in, event, key=key, headers=headers)
        return correlation_id

    async def submit(
        self,
        event: bytes,
        *,
        timeout: float = 30.0,
        correlation_id: str | None = None,
        source_id: str | None = None,
    ) -> Outcome:
        """Publish ``event`` and wait for its acquittal (or its receipt, when none is due)."""
        correlation_id = correlation_id or str(uuid.uuid4())
        acquittal, key = self._inspect(event)
        future = self.expect(correlation_id, acquittal=acquittal)
        await self.publish(
            event, correlation_id=correlation_id, source_id=source_id, key=key or correlation_id.encode()
        )
        return await asyncio.wait_for(future, timeout)

    def expect(self, correlation_id: str, *, acquittal: bool = True) -> asyncio.Future[Outcome]:
        """A future for the outcome of ``correlation_id`` (register before publishing)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        early = self._early.pop(correlation_id, None)
        if early and (early.acquittal or not acquittal):
            future.set_result(early)
        else:
            self._waiting[correlation_id] = (future, acquittal)
        return future

    async def _read(self) -> None:
        assert self._consumer
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=100)
                for tp, records in batches.items():
                    for record in records:
                        self._on_record(tp.topic, record.value or b"", list(record.headers or ()))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the reader is gone: nobody would ever be answered
            for future, _ in self._waiting.values():
                if not future.done():
                    future.set_exception(exc)
            self._waiting.clear()
            raise

    def _on_record(self, topic: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        correlation_id = header(headers, CORRELATION_ID)
        if not correlation_id:
            return
        try:
            if topic == self.topics.acquittals:
                a = Acquittal.decode(value)
                outcome, is_acquittal = Outcome(a.status, correlation_id, acquittal=a), True
            else:
                r = Receipt.decode(value)
                outcome, is_acquittal = (
                    Outcome("recorded-without-acquittal", correlation_id, receipt=r),
                    False,
                )
        except (ValueError, TypeError, KeyError):  # not ours to judge: skip it, keep reading
            log.warning("unreadable record on %s for correlation-id %s", topic, correlation_id, exc_info=True)
            return
        self._resolve(correlation_id, outcome, is_acquittal=is_acquittal)

    def _resolve(self, correlation_id: str, outcome: Outcome, *, is_acquittal: bool) -> None:
        waiting = self._waiting.get(correlation_id)
        if waiting is None:
            if is_acquittal or correlation_id not in self._early:
                self._early[correlation_id] = outcome
                if len(self._early) > 100_000:
                    self._early.pop(next(iter(self._early)))
            return
        future, wants_acquittal = waiting
        if is_acquittal or not wants_acquittal:
            del self._waiting[correlation_id]
            if not future.done():
                future.set_result(outcome)
