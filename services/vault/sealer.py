"""Sealing: the vault's journals become signed lots and checkpoints in the archive.

Per coffre, consecutive *durable* records (fsynced: IDEvt at most the position the vault said is
durable, never past the journal's ``synced_id_evt``) are sealed into a lot when
``lot_max_events`` are waiting or the oldest waiting one has waited ``lot_max_age_seconds``;
then a checkpoint is written for that lot.

The vault runs its :class:`Sealer` in a :class:`SealerThread`, off the receipt path: its loop
only hands over which coffres grew and up to which durable IDEvt, and never waits for a seal
or a storage call (see :class:`SealerThread` for what happens when one fails).

Crash safety without any state of its own: where sealing stands is read back from the
archive at start (the newest lot of each coffre), and a lot is written create-only and
atomically (:mod:`coffre.adapters.storage`), so a crash at any moment leaves either no lot or
the whole lot, never a second copy. A crash between a lot and its checkpoint is mended at
start: the newest lot gets its missing checkpoint. Before anything new is written for a
coffre, the archive's newest lot is checked against the journal (the same chain hash and
the same RFC 9162 tree at its last IDEvt): a vault never extends an archive that is not the
one its journal describes.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lxml import etree

from coffre import metrics
from coffre.adapters.journal import Journal, JournalCorrupted, JournalSet
from coffre.adapters.storage import ArchiveStorage
from coffre.domain.chain import GENESIS
from coffre.domain.lot import (
    MAX_LOT_EVENT_BYTES,
    NO_DIGEST,
    LotEvent,
    LotHeader,
    build_checkpoint,
    build_lot,
    checkpoint_after,
    checkpoint_key,
    digest,
    event_leaf,
    lot_header_from_events,
    lot_key,
    parse_document,
    parse_lot_name,
    read_lot,
)
from coffre.domain.merkle import MerkleAccumulator
from coffre.domain.signing import Signer
from coffre.logs import log_context

log = logging.getLogger("coffre.vault")


class ArchiveMismatch(Exception):
    """The archive's newest lot is not what the journal says: the vault writes nothing more."""


def serialize(root: etree._Element) -> bytes:
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


@dataclass
class CoffreSeal:
    """Where sealing stands for one coffre."""

    id_oper: str
    id_coffre: int
    next_number: int = 1
    sealed_id_evt: int = 0
    last_chain: bytes = GENESIS
    last_digest: bytes = NO_DIGEST
    tree: MerkleAccumulator = field(default_factory=MerkleAccumulator)
    durable_id_evt: int = 0
    """The last IDEvt known to be durable: nothing past it is sealed."""
    waiting_since: float | None = None
    """Monotonic time when the oldest unsealed record was seen (None: nothing waits)."""


@dataclass
class SealCounts:
    lots: int = 0
    events: int = 0
    checkpoints_mended: int = 0


class Sealer:
    def __init__(
        self,
        storage: ArchiveStorage,
        signer: Signer,
        journals: JournalSet,
        *,
        max_events: int = 1000,
        max_age: float = 60.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        on_checkpoint: Callable[[str, int, int], None] | None = None,
    ):
        self.storage = storage
        self.on_checkpoint = on_checkpoint
        """Told (IDOper, IDCoffre, lot) after each checkpoint is stored; must not wait (the
        evidence collector's nudge, :mod:`coffre_vault.evidence`)."""
        self.signer = signer
        self.journals = journals
        self.max_events = max_events
        self.max_age = max_age
        self.clock = clock
        self.monotonic = monotonic
        self.counts = SealCounts()
        self._coffres: dict[tuple[str, int], CoffreSeal] = {}

    # -- state --------------------------------------------------------------------------------

    def coffre(self, id_oper: str, id_coffre: int) -> CoffreSeal:
        key = (id_oper, id_coffre)
        state = self._coffres.get(key)
        if state is None:
            state = self._load(id_oper, id_coffre)
            self._coffres[key] = state
        return state

    def _load(self, id_oper: str, id_coffre: int) -> CoffreSeal:
        """Read where sealing stands from the archive and check it against the journal."""
        state = CoffreSeal(id_oper, id_coffre)
        journal = self.journals.journal(id_oper, id_coffre)
        state.durable_id_evt = journal.synced_id_evt
        lots = sorted(
            (parsed[2], key)
            for key in self.storage.list(f"{id_oper}/{id_coffre}/")
            if "/checkpoints/" not in key and (parsed := parse_lot_name(key)) is not None
        )
        if not lots:
            return state
        number, key = lots[-1]
        document = self.storage.read(key)
        header = read_lot(parse_document(document)).header
        if header.last_id_evt > journal.synced_id_evt:
            raise ArchiveMismatch(
                f"{key} holds IDEvt up to {header.last_id_evt}, the journal {journal.synced_id_evt}"
            )
        for record in journal.records():
            if record.id_evt > header.last_id_evt:
                break
            state.tree.append(event_leaf(record.event))
            state.last_chain = record.chain_hash
        if state.last_chain != header.last_chain_hash or state.tree.root() != header.tree_root:
            raise ArchiveMismatch(
                f"{key} does not end where the journal says IDEvt {header.last_id_evt} ends"
            )
        state.next_number = number + 1
        state.sealed_id_evt = header.last_id_evt
        state.last_digest = digest(document)
        if not self.storage.exists(checkpoint_key(id_oper, id_coffre, number)):
            self._write_checkpoint(header, state.last_digest)  # a crash came between the lot and it
            self.counts.checkpoints_mended += 1
        return state

    def start(self) -> None:
        """Load every coffre that has a journal (mending missing checkpoints), and start the age
        clock of those whose durable records a previous run left unsealed."""
        for id_oper, id_coffre in self.journals.coffres():
            state = self.coffre(id_oper, id_coffre)
            if state.durable_id_evt > state.sealed_id_evt:
                state.waiting_since = self.monotonic()

    def reload(self) -> None:
        """Forget where sealing stands and read it again from the archive, as at start: after a
        failed storage call, whether the lot or checkpoint it wrote is there is known only from
        the archive itself."""
        self._coffres.clear()
        self.start()

    # -- sealing ------------------------------------------------------------------------------

    def recorded(self, id_oper: str, id_coffre: int, durable_id_evt: int | None = None) -> None:
        """Records of this coffre are durable up to ``durable_id_evt`` (default: the journal's
        ``synced_id_evt`` now): start its lot's age clock if it is not running."""
        state = self.coffre(id_oper, id_coffre)
        synced = self.journals.journal(id_oper, id_coffre).synced_id_evt
        durable = synced if durable_id_evt is None else min(durable_id_evt, synced)
        state.durable_id_evt = max(state.durable_id_evt, durable)
        if state.waiting_since is None:
            state.waiting_since = self.monotonic()

    def seal_due(self) -> int:
        """Seal every lot that is full or old enough; returns the number of lots written."""
        now = self.monotonic()
        written = 0
        for state in list(self._coffres.values()):
            waiting = state.durable_id_evt - state.sealed_id_evt
            if waiting <= 0:
                state.waiting_since = None
                continue
            journal = self.journals.journal(state.id_oper, state.id_coffre)
            while waiting >= self.max_events:
                written += self._seal(state, journal, self.max_events)
                waiting = state.durable_id_evt - state.sealed_id_evt
            if waiting > 0 and state.waiting_since is not None and now - state.waiting_since >= self.max_age:
                written += self._seal(state, journal, waiting)
            if state.durable_id_evt == state.sealed_id_evt:
                state.waiting_since = None
        return written

    def seal_all(self) -> int:
        """Seal whatever durable record waits, in every coffre seen (at shutdown, or for the demo)."""
        written = 0
        for state in list(self._coffres.values()):
            journal = self.journals.journal(state.id_oper, state.id_coffre)
            while state.durable_id_evt > state.sealed_id_evt:
                written += self._seal(
                    state, journal, min(self.max_events, state.durable_id_evt - state.sealed_id_evt)
                )
            state.waiting_since = None
        return written

    def _seal(self, state: CoffreSeal, journal: Journal, count: int) -> int:
        """Seal the next ``count`` durable records, or fewer when their bytes pass
        :data:`~coffre.domain.lot.MAX_LOT_EVENT_BYTES` (what is left is sealed next)."""
        started = time.perf_counter()
        events: list[LotEvent] = []
        size = 0
        for record in journal.records(state.sealed_id_evt + 1):
            size += len(record.event)
            if events and size > MAX_LOT_EVENT_BYTES:
                break  # the rest waits for the next lot: a reader refuses a lot past MAX_DOCUMENT_BYTES
            events.append(LotEvent(record.id_evt, record.chain_hash, record.event))
            if len(events) == count:
                break
        tree = state.tree.copy()
        leaves = [event_leaf(event.canonical) for event in events]
        for leaf in leaves:
            tree.append(leaf)
        sealed_at = self.clock()
        header = lot_header_from_events(
            id_oper=state.id_oper,
            id_coffre=state.id_coffre,
            number=state.next_number,
            events=events,
            previous_chain_hash=state.last_chain,
            previous_lot_digest=state.last_digest,
            tree_root=tree.root(),
            sealed_at=sealed_at,
            leaves=leaves,
        )
        document = serialize(self.signer.sign(build_lot(header, events)))
        key = lot_key(state.id_oper, state.id_coffre, header.number, sealed_at)
        self.storage.create(key, document)
        lot_digest = digest(document)
        self._write_checkpoint(header, lot_digest)
        state.tree = tree
        state.next_number += 1
        state.sealed_id_evt = header.last_id_evt
        state.last_chain = header.last_chain_hash
        state.last_digest = lot_digest
        self.counts.lots += 1
        self.counts.events += len(events)
        metrics.LOTS_SEALED.inc()
        metrics.LOT_SEAL_SECONDS.observe(time.perf_counter() - started)
        with log_context(id_oper=state.id_oper, id_coffre=state.id_coffre, lot=header.number):
            log.info("sealed %s: IDEvt %d..%d", key, header.first_id_evt, header.last_id_evt)
        return 1

    def _write_checkpoint(self, header: LotHeader, lot_digest: bytes) -> None:
        checkpoint = checkpoint_after(header, lot_digest, self.clock())
        document = serialize(self.signer.sign(build_checkpoint(checkpoint)))
        self.storage.create(checkpoint_key(header.id_oper, header.id_coffre, header.number), document)
        if self.on_checkpoint is not None:
            self.on_checkpoint(header.id_oper, header.id_coffre, header.number)


FATAL = (ArchiveMismatch, JournalCorrupted)
"""Failures no retry mends: the archive or the journal is not what the vault wrote. The vault stops."""

Coffre = tuple[str, int]


class SealerThread:
    """A :class:`Sealer` in its own thread, so that no seal (signing a lot of 10,000 events, a slow
    S3 put) ever stalls a receipt.

    The vault's loop calls :meth:`recorded` after each group commit with the coffres that grew
    and the IDEvt up to which each is durable: a dict update under a lock, nothing more. The
    thread takes what was handed over every ``period`` seconds and seals what is due. It reads
    only durable records, through the journals' own locks (appends go on meanwhile).

    Failures:

    * :data:`FATAL` (``ArchiveMismatch``, ``JournalCorrupted``): the thread stops and keeps the
      exception; the loop's :meth:`check` raises it, so the vault halts as it did when it sealed
      in its own loop.
    * anything else (storage unreachable, a put that timed out): logged and counted
      (``coffre_lot_seal_failures_total``); the thread waits ``retry_delay`` (doubling up to
      ``max_retry_delay``), then reads where sealing stands from the archive again
      (:meth:`Sealer.reload`, the start-up recovery) and goes on. Receipts are not held meanwhile:
      the records wait, durable, in the journals.

    :meth:`finish` (at shutdown) seals everything handed over, then ends the thread.
    """

    def __init__(
        self,
        sealer: Sealer,
        *,
        period: float = 0.05,
        retry_delay: float = 0.5,
        max_retry_delay: float = 30.0,
    ) -> None:
        self.sealer = sealer
        self.period = period
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.fatal: BaseException | None = None
        """The failure that stopped sealing for good (one of :data:`FATAL`)."""
        self.final_error: BaseException | None = None
        """What made the final seal of :meth:`finish` fail."""
        self._lock = threading.Lock()
        self._grown: dict[Coffre, int] = {}
        self._stop = False
        self._seal_waiting = False
        self._wake = threading.Event()
        context = contextvars.copy_context()  # the service's log fields go with the thread
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="coffre-sealer", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def recorded(self, grown: Mapping[Coffre, int]) -> None:
        """These coffres are durable up to these IDEvt. Thread-safe; never waits for a seal."""
        if not grown:
            return
        with self._lock:
            known = self._grown
            for coffre, durable in grown.items():
                if durable > known.get(coffre, 0):
                    known[coffre] = durable

    def check(self) -> None:
        """Raise the failure that stopped sealing for good, if any."""
        if self.fatal is not None:
            raise self.fatal

    def stop(self, *, seal_waiting: bool = False) -> None:
        """Ask the thread to end, after sealing what waits when ``seal_waiting``; returns at once."""
        with self._lock:
            self._stop = True
            self._seal_waiting = self._seal_waiting or seal_waiting
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; whether it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def finish(self) -> None:
        """Seal every durable record handed over, then end the thread (blocking). Raises what
        stopped sealing for good, or what made this last seal fail."""
        self.stop(seal_waiting=True)
        self.join()
        self.check()
        if self.final_error is not None:
            raise self.final_error

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _take(self) -> tuple[dict[Coffre, int], bool, bool]:
        with self._lock:
            grown, self._grown = self._grown, {}
            return grown, self._stop, self._seal_waiting

    def _run(self) -> None:
        sealer = self.sealer
        delay = self.retry_delay
        reload = False
        while True:
            grown, stopping, seal_waiting = self._take()
            if stopping and not seal_waiting:
                return
            try:
                if reload:
                    sealer.reload()
                    reload = False
                for (id_oper, id_coffre), durable in grown.items():
                    sealer.recorded(id_oper, id_coffre, durable)
                if stopping:
                    sealer.seal_all()
                    return
                sealer.seal_due()
                delay = self.retry_delay
                pause = self.period
            except FATAL as exc:
                log.critical("sealing stopped: %s", exc)
                self.fatal = exc
                return
            except Exception as exc:
                metrics.SEAL_FAILURES.inc()
                if stopping:
                    log.error("the last seal before stopping failed: %s", exc, exc_info=True)
                    self.final_error = exc
                    return
                log.error("sealing failed (retried in %gs, nothing is lost): %s", delay, exc, exc_info=True)
                self.recorded(grown)  # handed over again: the reload may not see them otherwise
                reload = True
                pause, delay = delay, min(delay * 2, self.max_retry_delay)
            self._wake.wait(pause)
