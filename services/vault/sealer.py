"""Sealing: the vault's journals become signed lots and checkpoints in the archive.

Per coffre, consecutive *durable* records (fsynced: IDEvt at most the position the vault said is
durable, never past the journal's ``synced_id_evt``) are sealed into a lot when
``lot_max_events`` are waiting or the oldest waiting one has waited ``lot_max_age_seconds``.
Each seal writes, each create-only: the lot's **seal note** (:mod:`coffre.domain.seals`: its
range and the tree after it; it claims the lot number), the **lot**, then its **checkpoint**.
The journal is then cut, and its segments the archive now holds are released (deleted, or kept
``journal_keep_seconds``): the journal holds the unsealed window only.

The vault runs its :class:`Sealer` in a :class:`SealerThread`, off the receipt path: its loop
only hands over which coffres grew and up to which durable IDEvt, and never waits for a seal
or a storage call (see :class:`SealerThread` for what happens when one fails).

Where sealing stands is read back from the archive, never kept elsewhere: the newest seal note
(found with O(log n) existence checks), its lot and checkpoint. That is a bounded amount of
work whatever the coffre's history, and it needs no journal: a replica that takes a coffre over
without the previous one's volume starts from it (:meth:`Sealer.align` rebases the empty
journal there). Every crash leaves a state the next load mends:

* a note without its lot: the next seal of that coffre writes exactly the note's events, under
  the note's date (so under the one key the lot may have);
* a lot without its checkpoint: the checkpoint is written at load.

Before anything new is written for a coffre, the journal is checked against the archive (the
same chain hash at the archive's newest IDEvt): a vault never extends an archive that is not
the one its journal describes. An archive from before seal notes is migrated at the first load:
its lots are read once, the tree rebuilt and checked against each lot, and a note written for
each lot.

Fencing: two vaults may both believe they own a coffre for a moment (a replica paused past its
group session). A lot number is claimed by its note's create-only write; the loser reads the
archive again and goes on from there if its journal agrees with it, and stops the vault
(:class:`ArchiveMismatch`) if not. :class:`SealerThread` also seals only while ``may_seal``
says the vault's group membership is current, so a resumed zombie writes nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lxml import etree

from coffre import metrics
from coffre.adapters.journal import Journal, JournalCorrupted, JournalSet
from coffre.adapters.storage import ArchiveStorage, ObjectExists
from coffre.domain.chain import GENESIS
from coffre.domain.lot import (
    MAX_LOT_EVENT_BYTES,
    NO_DIGEST,
    LotEvent,
    LotFormatError,
    LotHeader,
    build_checkpoint,
    build_lot,
    checkpoint_after,
    checkpoint_key,
    digest,
    event_leaf,
    lot_header_from_events,
    numbered_lots,
    parse_document,
    read_lot,
)
from coffre.domain.merkle import MerkleAccumulator
from coffre.domain.seals import SealNote, SealNoteError, find_note, newest_note_number, seal_note_key
from coffre.domain.signing import Signer
from coffre.logs import log_context

log = logging.getLogger("coffre.vault")

Coffre = tuple[str, int]


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
    pending: SealNote | None = None
    """A note whose lot is missing (a crash between the two): the next lot is exactly this one."""
    journal: Journal | None = None
    durable_id_evt: int = 0
    """The last IDEvt known to be durable: nothing past it is sealed."""
    waiting_since: float | None = None
    """Monotonic time when the oldest unsealed record was seen (None: nothing waits)."""
    releases: deque[tuple[float, int]] = field(default_factory=deque)
    """(monotonic time sealed, IDEvt) of lots whose journal segments wait out the keep time."""


@dataclass
class SealCounts:
    lots: int = 0
    events: int = 0
    checkpoints_mended: int = 0
    notes_migrated: int = 0
    segments_released: int = 0
    claims_lost: int = 0


class Sealer:
    def __init__(
        self,
        storage: ArchiveStorage,
        signer: Signer,
        journals: JournalSet,
        *,
        max_events: int = 1000,
        max_age: float = 60.0,
        keep_seconds: float = 0.0,
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
        self.keep_seconds = keep_seconds
        """How long the journal keeps what the archive holds (0: released at once)."""
        self.clock = clock
        self.monotonic = monotonic
        self.counts = SealCounts()
        self._coffres: dict[Coffre, CoffreSeal] = {}
        self._lock = threading.RLock()  # _coffres and the loads: the loop's align and the sealer thread
        self._lot_cache: dict[Coffre, dict[int, tuple[bytes, bytes]]] = {}
        if journals.on_open is None:
            journals.on_open = self.align

    # -- state --------------------------------------------------------------------------------

    def sealed_id_evt(self, id_oper: str, id_coffre: int) -> int | None:
        """The newest IDEvt of this coffre in the archive, None before its state is loaded. Any thread
        (the vault's loop reads it for its commits)."""
        state = self._coffres.get((id_oper, id_coffre))
        return None if state is None else state.sealed_id_evt

    def coffre(self, id_oper: str, id_coffre: int) -> CoffreSeal:
        key = (id_oper, id_coffre)
        state = self._coffres.get(key)
        if state is None:
            self.journals.journal(id_oper, id_coffre)  # opening it aligns it (align, below)
            with self._lock:
                state = self._coffres.get(key)
                if state is None:  # a JournalSet without this sealer's align
                    state = self.align(id_oper, id_coffre, self.journals.journal(id_oper, id_coffre))
        return state

    def align(self, id_oper: str, id_coffre: int, journal: Journal) -> CoffreSeal:
        """Where sealing stands for this coffre, read from the archive, and ``journal`` made to
        continue it: rebased there when it holds nothing past it, checked against it otherwise.
        The JournalSet calls it as it opens the journal, before anything is appended."""
        with self._lock:
            state = self._load(id_oper, id_coffre)
            where = f"coffre {id_oper}/{id_coffre}"
            if journal.last_id_evt < state.sealed_id_evt:
                if journal.last_id_evt:
                    log.info(
                        "%s: the journal ends at IDEvt %d, the archive at %d: continuing from the archive",
                        where,
                        journal.last_id_evt,
                        state.sealed_id_evt,
                    )
                journal.rebase(state.sealed_id_evt, state.last_chain)
            else:
                known = journal.chain_hash_at(state.sealed_id_evt)
                if known is None:
                    raise ArchiveMismatch(
                        f"{where}: the archive ends at IDEvt {state.sealed_id_evt}, before what the journal "
                        f"holds ({journal.first_id_evt}..{journal.last_id_evt}): lots are missing"
                    )
                if known != state.last_chain:
                    raise ArchiveMismatch(
                        f"{where}: the archive's newest lot does not end where the journal says IDEvt "
                        f"{state.sealed_id_evt} ends"
                    )
                pending = state.pending
                if (
                    pending is not None
                    and journal.last_id_evt >= pending.last_id_evt
                    and journal.chain_hash_at(pending.last_id_evt) != pending.last_chain_hash
                ):
                    raise ArchiveMismatch(f"{pending.key} announces other events than the journal holds")
                if journal.first_id_evt <= state.sealed_id_evt:  # it holds records the archive holds
                    if journal.last_id_evt == state.sealed_id_evt and not self.keep_seconds:
                        journal.rebase(state.sealed_id_evt, state.last_chain)  # all of them: none needed
                    else:  # the next sync starts a segment; what the archive holds goes with the keep time
                        journal.cut()
                        state.releases.append((self.monotonic(), state.sealed_id_evt))
            state.journal = journal
            state.durable_id_evt = journal.synced_id_evt
            if state.durable_id_evt > state.sealed_id_evt and state.waiting_since is None:
                state.waiting_since = self.monotonic()
            self._coffres[(id_oper, id_coffre)] = state
            return state

    def _load(self, id_oper: str, id_coffre: int) -> CoffreSeal:
        """Where sealing stands, from the archive's newest seal note (and its lot and checkpoint)."""
        state = CoffreSeal(id_oper, id_coffre)
        number = newest_note_number(self.storage.exists, id_oper, id_coffre)
        if number == 0 or self.storage.exists(checkpoint_key(id_oper, id_coffre, number + 1)):
            number = self._migrate(id_oper, id_coffre)  # lots sealed before seal notes existed
            if number == 0:
                return state
        note = self._note(id_oper, id_coffre, number)
        if not self.storage.exists(note.lot_key):
            state.pending = note  # the vault stopped between the note and the lot
            if number == 1:
                return state
            number -= 1
            note = self._note(id_oper, id_coffre, number)
        document = self.storage.read(note.lot_key)
        try:
            header = read_lot(parse_document(document)).header
            note.check_lot(header)
            state.tree = note.tree()
        except (LotFormatError, SealNoteError) as exc:
            raise ArchiveMismatch(f"{note.lot_key}: {exc}") from None
        state.next_number = number + 1
        state.sealed_id_evt = header.last_id_evt
        state.last_chain = header.last_chain_hash
        state.last_digest = digest(document)
        if not self.storage.exists(checkpoint_key(id_oper, id_coffre, number)):
            self._write_checkpoint(header, state.last_digest)  # a crash came between the lot and it
            self.counts.checkpoints_mended += 1
        return state

    def _note(self, id_oper: str, id_coffre: int, number: int) -> SealNote:
        key = seal_note_key(id_oper, id_coffre, number)
        try:
            return SealNote.decode(self.storage.read(key), key)
        except SealNoteError as exc:
            raise ArchiveMismatch(str(exc)) from None

    def _migrate(self, id_oper: str, id_coffre: int) -> int:
        """Write the seal notes of lots sealed without them (an archive of an earlier version): each
        lot is read once, in order, its tree rebuilt and checked. Returns the newest lot's number."""
        lots = numbered_lots(self.storage.list(f"{id_oper}/{id_coffre}/"))
        if not lots:
            return 0
        log.info(
            "coffre %s/%s: writing the seal notes of %d lot(s) sealed before them",
            id_oper,
            id_coffre,
            len(lots),
        )
        tree = MerkleAccumulator()
        chain = GENESIS
        for expected, (number, key) in enumerate(lots, start=1):
            document = self.storage.read(key)
            try:
                lot = read_lot(parse_document(document))
            except LotFormatError as exc:
                raise ArchiveMismatch(f"{key}: {exc}") from None
            header = lot.header
            if number != expected or header.number != number or header.previous_chain_hash != chain:
                raise ArchiveMismatch(f"{key}: lot {expected} was expected, chained to the one before")
            for event in lot.events:
                tree.append(event_leaf(event.canonical))
            if tree.size != header.last_id_evt or tree.root() != header.tree_root:
                raise ArchiveMismatch(f"{key}: its tree root is not the tree of the events up to it")
            chain = header.last_chain_hash
            if number == len(lots) and not self.storage.exists(checkpoint_key(id_oper, id_coffre, number)):
                self._write_checkpoint(header, digest(document))  # before any note: see _load
                self.counts.checkpoints_mended += 1
            note = SealNote.after(header, tree)
            if note.lot_key != key:
                raise ArchiveMismatch(f"{key}: a lot sealed on {header.sealed_at:%Y-%m-%d} filed elsewhere")
            with contextlib.suppress(ObjectExists):  # an interrupted migration wrote it
                self.storage.create(note.key, note.encode())
            self.counts.notes_migrated += 1
        return len(lots)

    def start(self) -> None:
        """Load every coffre that has a journal (mending missing checkpoints), and start the age
        clock of those whose durable records a previous run left unsealed."""
        for id_oper, id_coffre in self.journals.coffres():
            self.coffre(id_oper, id_coffre)

    def reload(self) -> None:
        """Forget where sealing stands and read it again from the archive, as at start: after a
        failed storage call, whether the lot or checkpoint it wrote is there is known only from
        the archive itself."""
        with self._lock:  # each state replaced by align, never absent meanwhile (sealed_id_evt)
            for key, state in list(self._coffres.items()):
                if state.journal is not None and not state.journal.closed:
                    self.align(key[0], key[1], state.journal)
                else:
                    del self._coffres[key]
        self.start()

    def forget(self, coffres: Iterable[Coffre]) -> None:
        """Stop sealing these coffres (their partitions moved to another vault)."""
        with self._lock:
            for key in coffres:
                self._coffres.pop(key, None)
                self._lot_cache.pop(key, None)

    def sealed_event(self, id_oper: str, id_coffre: int, id_evt: int) -> tuple[bytes, bytes] | None:
        """(canonical bytes, chain hash) of a sealed IDEvt, from its lot (found through the seal
        notes, O(log n) reads); None when the archive does not hold it. The last lot read is kept
        per coffre: a redelivered run of events costs one lot read."""
        key = (id_oper, id_coffre)
        cached = self._lot_cache.get(key)
        if cached is None or id_evt not in cached:
            try:
                note = find_note(self.storage.read, self.storage.exists, id_oper, id_coffre, id_evt)
            except SealNoteError as exc:
                raise ArchiveMismatch(str(exc)) from None
            if note is None or not self.storage.exists(note.lot_key):
                return None
            lot = read_lot(parse_document(self.storage.read(note.lot_key)))
            cached = {event.id_evt: (event.canonical, event.chain_hash) for event in lot.events}
            self._lot_cache[key] = cached
        return cached.get(id_evt)

    # -- sealing ------------------------------------------------------------------------------

    def recorded(self, id_oper: str, id_coffre: int, durable_id_evt: int | None = None) -> None:
        """Records of this coffre are durable up to ``durable_id_evt`` (default: the journal's
        ``synced_id_evt`` now): start its lot's age clock if it is not running."""
        state = self.coffre(id_oper, id_coffre)
        journal = state.journal
        assert journal is not None
        synced = journal.synced_id_evt
        durable = synced if durable_id_evt is None else min(durable_id_evt, synced)
        state.durable_id_evt = max(state.durable_id_evt, durable)
        if state.waiting_since is None:
            state.waiting_since = self.monotonic()

    def seal_due(self) -> int:
        """Seal every lot that is full or old enough; returns the number of lots written."""
        now = self.monotonic()
        written = 0
        for state in list(self._coffres.values()):
            self._release(state, now)
            waiting = state.durable_id_evt - state.sealed_id_evt
            if waiting <= 0:
                state.waiting_since = None
                continue
            while waiting >= self._due_count(state, self.max_events):
                written += self._seal(state, self.max_events)
                waiting = state.durable_id_evt - state.sealed_id_evt
            if (
                waiting > 0
                and state.waiting_since is not None
                and now - state.waiting_since >= self.max_age
                and waiting >= self._due_count(state, waiting)
            ):
                written += self._seal(state, waiting)
            if state.durable_id_evt == state.sealed_id_evt:
                state.waiting_since = None
        return written

    def seal_all(self) -> int:
        """Seal whatever durable record waits, in every coffre seen (at shutdown, or for the demo)."""
        written = 0
        for state in list(self._coffres.values()):
            while state.durable_id_evt > state.sealed_id_evt:
                waiting = state.durable_id_evt - state.sealed_id_evt
                if waiting < self._due_count(state, waiting):
                    break  # a claimed lot whose events are not all here yet
                written += self._seal(state, min(self.max_events, waiting))
            state.waiting_since = None
            self._release(state, self.monotonic())
        return written

    @staticmethod
    def _due_count(state: CoffreSeal, count: int) -> int:
        """How many records the next lot needs: ``count``, or exactly a claimed lot's."""
        if state.pending is not None:
            return state.pending.last_id_evt - state.sealed_id_evt
        return count

    def _release(self, state: CoffreSeal, now: float) -> None:
        journal = state.journal
        if journal is None or journal.closed:
            return
        releases = state.releases
        upto = 0
        while releases and now - releases[0][0] >= self.keep_seconds:
            upto = releases.popleft()[1]
        if upto:
            self.counts.segments_released += journal.release(upto)

    def _seal(self, state: CoffreSeal, count: int) -> int:
        """Seal the next ``count`` durable records, or fewer when their bytes pass
        :data:`~coffre.domain.lot.MAX_LOT_EVENT_BYTES` (what is left is sealed next)."""
        started = time.perf_counter()
        journal = state.journal
        assert journal is not None
        claimed = state.pending
        if claimed is not None:
            count = claimed.last_id_evt - state.sealed_id_evt
        events: list[LotEvent] = []
        size = 0
        for record in journal.records(state.sealed_id_evt + 1):
            size += len(record.event)
            if events and size > MAX_LOT_EVENT_BYTES and claimed is None:
                break  # the rest waits for the next lot: a reader refuses a lot past MAX_DOCUMENT_BYTES
            events.append(LotEvent(record.id_evt, record.chain_hash, record.event))
            if len(events) == count:
                break
        tree = state.tree.copy()
        leaves = [event_leaf(event.canonical) for event in events]
        for leaf in leaves:
            tree.append(leaf)
        if claimed is not None:
            sealed_at = claimed.sealed_at
        else:
            now = self.clock().astimezone(UTC)
            sealed_at = now.replace(microsecond=now.microsecond // 1000 * 1000)  # as the lot says it
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
        note = SealNote.after(header, tree)
        if claimed is not None:
            try:
                claimed.check_lot(header)
            except SealNoteError as exc:
                raise ArchiveMismatch(str(exc)) from None
        else:
            try:
                self.storage.create(note.key, note.encode())  # the claim on this lot number
            except ObjectExists:
                return self._claim_lost(state, note.key)
        document = serialize(self.signer.sign_built(build_lot(header, events)))
        try:
            self.storage.create(note.lot_key, document)
        except ObjectExists:
            return self._claim_lost(state, note.lot_key)
        lot_digest = digest(document)
        self._write_checkpoint(header, lot_digest)
        state.pending = None
        state.tree = tree
        state.next_number += 1
        state.sealed_id_evt = header.last_id_evt
        state.last_chain = header.last_chain_hash
        state.last_digest = lot_digest
        journal.cut()
        state.releases.append((self.monotonic(), header.last_id_evt))
        self.counts.lots += 1
        self.counts.events += len(events)
        metrics.LOTS_SEALED.inc()
        metrics.LOT_SEAL_SECONDS.observe(time.perf_counter() - started)
        with log_context(id_oper=state.id_oper, id_coffre=state.id_coffre, lot=header.number):
            log.info("sealed %s: IDEvt %d..%d", note.lot_key, header.first_id_evt, header.last_id_evt)
        return 1

    def _claim_lost(self, state: CoffreSeal, key: str) -> int:
        """Another vault wrote this lot number first: go on from the archive if this journal agrees
        with what it wrote (the same events: nothing is lost), stop the vault if not."""
        self.counts.claims_lost += 1
        log.warning(
            "coffre %s/%s: %s was written by another vault; reading the archive again",
            state.id_oper,
            state.id_coffre,
            key,
        )
        journal = state.journal
        assert journal is not None
        key = (state.id_oper, state.id_coffre)
        with self._lock:
            fresh = self.align(state.id_oper, state.id_coffre, journal)  # ArchiveMismatch when it disagrees
            durable = max(fresh.durable_id_evt, state.durable_id_evt)
            for name in CoffreSeal.__dataclass_fields__:  # in place: a caller's loop holds this object
                setattr(state, name, getattr(fresh, name))
            state.durable_id_evt = durable
            self._coffres[key] = state
        return 0

    def _write_checkpoint(self, header: LotHeader, lot_digest: bytes) -> None:
        checkpoint = checkpoint_after(header, lot_digest, self.clock())
        document = serialize(self.signer.sign_built(build_checkpoint(checkpoint)))
        try:
            self.storage.create(checkpoint_key(header.id_oper, header.id_coffre, header.number), document)
        except ObjectExists:
            return  # another vault mended it first: the same lot, its own signature
        if self.on_checkpoint is not None:
            self.on_checkpoint(header.id_oper, header.id_coffre, header.number)


FATAL = (ArchiveMismatch, JournalCorrupted)
"""Failures no retry mends: the archive or the journal is not what the vault wrote. The vault stops."""


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
        may_seal: Callable[[], bool] | None = None,
    ) -> None:
        self.sealer = sealer
        self.may_seal = may_seal
        """Whether this vault may write to the archive now (its group membership is current): a
        pass is skipped otherwise, so a vault paused past its session writes nothing on waking."""
        self._pass = threading.Lock()  # held for a whole pass: forget() waits for the seal in hand
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

    def forget(self, coffres: list[Coffre]) -> None:
        """Stop sealing these coffres, once the seal in hand (if any) is done (blocking: their
        partitions moved to another vault, which reads from the archive where this one stopped)."""
        with self._pass:
            self.sealer.forget(coffres)
            with self._lock:
                for coffre in coffres:
                    self._grown.pop(coffre, None)

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
            pause = self.period
            with self._pass:  # what is taken is handled before forget() may run
                grown, stopping, seal_waiting = self._take()
                if stopping and not seal_waiting:
                    return
                try:
                    if self.may_seal is not None and not self.may_seal():
                        self.recorded(grown)  # kept for when the membership is current again
                        if stopping:
                            log.warning("the vault's group membership is not current: nothing sealed at stop")
                            return
                    else:
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
                    log.error(
                        "sealing failed (retried in %gs, nothing is lost): %s", delay, exc, exc_info=True
                    )
                    self.recorded(grown)  # handed over again: the reload may not see them otherwise
                    reload = True
                    pause, delay = delay, min(delay * 2, self.max_retry_delay)
            self._wake.wait(pause)
