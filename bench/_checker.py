"""The outside world's check of a run: what a platform and a regulator see, read with their own tools.

* :class:`AcquittalLog`: the acquittals, read as a platform reads them, with librdkafka
  (confluent-kafka) and ``assign()`` on every partition from the beginning (no consumer group): when
  each correlation id's first acquittal came, what it said (status, IDCoffre, IDEvt, chain hash),
  and whether a later one for the same id said anything else (delivery is at least once: a repeat
  must be identical).
* :func:`check_archive`: the archive read back lot by lot (``coffre.domain.lot.read_lot``, as a
  regulator's script would), then what each vault's journal holds past it (durable, not sealed yet
  when the vaults stopped: their next start seals it), against the acquittals: every event published
  acknowledged ``recorded`` or ``rejected``; each recorded one in the archive exactly once, under
  IDEvt 1..n of its coffre (no gap, no duplicate), with the IDEvt and chain hash its acquittal
  carried, its bytes the ones that chain hash covers (``SHA-256(previous ‖ canonical bytes)``
  recomputed from the first event). ``coffre verify`` is run on the archive as a subprocess
  beside it (:func:`failover.verify_archive_command`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failover import PLAYER

from coffre.adapters.journal import Journal
from coffre.domain.chain import GENESIS, chain_hash
from coffre.domain.lot import numbered_lots, parse_document, read_lot
from coffre.domain.messages import Acquittal

Answer = tuple[str, int | None, int | None, str | None]
"""What an acquittal said: status, IDCoffre, IDEvt, chain hash (hex)."""


class AcquittalLog:
    """Every acquittal of ``topic`` (all ``partitions``, from the start), in a thread of its own."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.arrived: dict[str, float] = {}
        """Correlation id -> perf_counter when its first acquittal was read."""
        self.answers: dict[str, Answer] = {}
        self.times: list[float] = []
        """The arrival of each first acquittal, in the order read (ascending)."""
        self.repeats = 0
        """Acquittals read again for a correlation id, identical."""
        self.conflicts: list[str] = []
        """Acquittals read again for a correlation id that said something else."""
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="acquittals", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _read(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": "outside-checker",  # librdkafka wants one; nothing is committed
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 20,
                    "socket.timeout.ms": 5000,  # a silent broker waited out as the platform's producer does
                }
            )
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            try:
                while not self._stop.is_set():
                    record = consumer.poll(0.1)
                    if record is None or record.error() is not None:
                        continue
                    self._note(Acquittal.decode(record.value()), time.perf_counter())
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def _note(self, acquittal: Acquittal, now: float) -> None:
        cid = acquittal.correlation_id or ""
        answer = (acquittal.status, acquittal.id_coffre, acquittal.id_evt, acquittal.chain_hash)
        first = self.answers.get(cid)
        if first is None:
            self.answers[cid] = answer
            self.arrived[cid] = now
            self.times.append(now)
        elif first == answer:
            self.repeats += 1
        else:
            self.conflicts.append(f"{cid}: {first} then {answer}")

    def check(self) -> None:
        """Raise if the reader stopped."""
        if self.error is not None:
            raise RuntimeError(f"the acquittal reader failed: {self.error!r}")


@dataclass
class Recorded:
    id_evt: int
    chain_hash: bytes
    canonical: bytes
    sealed: bool
    """In a sealed lot (else durable in a vault's journal past the archive)."""


@dataclass
class Verdict:
    """The outside world's verdict; ``ok`` only when nothing is missing, doubled or different."""

    published: int = 0
    acknowledged: int = 0
    recorded: int = 0
    rejected: int = 0
    lost: int = 0
    """Published events without an acquittal, or acknowledged ``recorded`` and absent from the
    archive and the journals."""
    duplicates: int = 0
    """Events held more than once (under two IDEvt)."""
    in_archive: int = 0
    in_journals_only: int = 0
    """Acknowledged events durable in a vault's journal past the archive when the vaults stopped."""
    idevt_gapless: bool = True
    chains_as_acknowledged: bool = True
    repeated_acquittals: int = 0
    verified: bool | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.verified is True

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items()}, "ok": self.ok}

    def line(self) -> str:
        verify = {True: "passes", False: "FAILS", None: "not run"}[self.verified]
        return (
            f"{self.published:,} published, {self.acknowledged:,} acknowledged ({self.recorded:,} recorded, "
            f"{self.rejected:,} rejected); lost {self.lost}, duplicates {self.duplicates}; "
            f"{self.in_archive:,} sealed in the archive, {self.in_journals_only:,} durable in a journal past it; "
            f"IDEvt 1..n {'yes' if self.idevt_gapless else 'NO'}, chain hashes as acknowledged "
            f"{'yes' if self.chains_as_acknowledged else 'NO'}; {self.repeated_acquittals:,} acquittals "
            f"repeated identically; coffre verify {verify}"
        )


def coffre_history(
    archive: Path, journals: Sequence[Path], id_oper: str, id_coffre: int, problems: list[str]
) -> list[Recorded]:
    """One coffre's events: those of its sealed lots (numbered 1..k, read in order), then those the
    journals hold past them (two journals holding one IDEvt must hold the same event)."""
    keys = (str(path.relative_to(archive)) for path in (archive / id_oper / str(id_coffre)).rglob("*.xml"))
    lots = numbered_lots(keys)
    if [number for number, _ in lots] != list(range(1, len(lots) + 1)):
        problems.append(
            f"coffre {id_coffre}: lot numbers {[n for n, _ in lots][:10]}… are not 1..{len(lots)}"
        )
    events = [
        Recorded(e.id_evt, e.chain_hash, e.canonical, True)
        for _, key in lots
        for e in read_lot(parse_document((archive / key).read_bytes())).events
    ]
    tail: dict[int, Recorded] = {}
    for root in journals:
        folder = root / id_oper / str(id_coffre)
        if not folder.is_dir():
            continue
        with Journal.open(folder) as journal:  # opening verifies its chain
            start = max(len(events) + 1, journal.first_id_evt)
            for record in journal.records(start):
                found = Recorded(record.id_evt, record.chain_hash, record.event, False)
                held = tail.setdefault(record.id_evt, found)
                if (held.chain_hash, held.canonical) != (found.chain_hash, found.canonical):
                    problems.append(
                        f"coffre {id_coffre}: two journals hold two events under IDEvt {record.id_evt}"
                    )
    return events + [tail[id_evt] for id_evt in sorted(tail)]


def check_archive(
    archive: Path,
    journals: Sequence[Path],
    id_oper: str,
    coffres: Iterable[int],
    published: Sequence[str],
    log: AcquittalLog,
    correlation_of: Callable[[bytes], str | None],
) -> Verdict:
    """The verdict on ``published`` (correlation ids, in order) given what ``log`` read and what
    ``archive`` and the vaults' ``journals`` hold; ``correlation_of`` names the published event an
    archived one is (None: not one of the run's)."""
    verdict = Verdict(published=len(published), repeated_acquittals=log.repeats)
    problems = verdict.problems
    problems += [f"acquittals that disagree: {c}" for c in log.conflicts[:5]]
    answers = log.answers
    held: dict[str, list[tuple[int, Recorded]]] = {}
    strangers = 0
    for coffre in coffres:
        history = coffre_history(archive, journals, id_oper, coffre, problems)
        ids = [r.id_evt for r in history]
        if ids != list(range(1, len(ids) + 1)):
            verdict.idevt_gapless = False
            gaps = [(a, b) for a, b in zip([0, *ids], ids, strict=False) if b != a + 1]
            problems.append(f"coffre {coffre}: IDEvt not 1..{len(ids)}: after/then {gaps[:5]}")
        previous = GENESIS
        for record in history:
            previous = chain_hash(previous, record.canonical)
            if previous != record.chain_hash:
                verdict.chains_as_acknowledged = False
                problems.append(
                    f"coffre {coffre}: IDEvt {record.id_evt}'s chain hash does not cover its bytes"
                )
                previous = record.chain_hash
            cid = correlation_of(record.canonical)
            if cid is None:
                strangers += 1
            else:
                held.setdefault(cid, []).append((coffre, record))
    if strangers:
        problems.append(f"{strangers} archived event(s) that no one published in this run")
    missing, unheld, different = [], [], []
    for cid in published:
        answer = answers.get(cid)
        if answer is None:
            missing.append(cid)
            continue
        status, id_coffre, id_evt, chained = answer
        copies = held.get(cid, [])
        if status == "rejected":
            verdict.rejected += 1
            if copies:
                problems.append(f"{cid}: acknowledged rejected, yet recorded")
            continue
        verdict.recorded += 1
        if not copies:
            unheld.append(cid)
            continue
        coffre, record = copies[0]
        if record.sealed:
            verdict.in_archive += 1
        else:
            verdict.in_journals_only += 1
        if (coffre, record.id_evt, record.chain_hash.hex()) != (id_coffre, id_evt, chained):
            different.append(
                f"{cid}: acknowledged {id_coffre}/{id_evt} {chained}, held {coffre}/{record.id_evt}"
            )
    verdict.acknowledged = verdict.recorded + verdict.rejected
    verdict.duplicates = sum(len(copies) - 1 for copies in held.values())
    verdict.lost = len(missing) + len(unheld)
    if missing:
        problems.append(f"{len(missing)} published event(s) never acknowledged, first {missing[:5]}")
    if unheld:
        problems.append(
            f"{len(unheld)} acknowledged event(s) neither in the archive nor a journal: {unheld[:5]}"
        )
    if verdict.duplicates:
        doubled = [cid for cid, copies in held.items() if len(copies) > 1]
        problems.append(f"{verdict.duplicates} event(s) held twice or more, first {doubled[:5]}")
    if different:
        verdict.chains_as_acknowledged = False
        problems.append(f"{len(different)} event(s) held under another IDEvt or chain hash: {different[:3]}")
    if verdict.rejected:
        problems.append(f"{verdict.rejected} valid event(s) rejected")
    return verdict


def player_correlation(prefix: str) -> Callable[[bytes], str | None]:
    """The correlation id (``<prefix>-<n>``) of an event of ``pipeline.event(n, …)``, from its player."""

    def correlation(canonical: bytes) -> str | None:
        found = PLAYER.search(canonical)
        return f"{prefix}-{int(found.group(1))}" if found else None

    return correlation
