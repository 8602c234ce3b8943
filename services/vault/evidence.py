"""Evidence about each checkpoint from outside the vault: an RFC 3161 time-stamp token from
each configured TSA and a cosignature from each configured witness (issue 21).

Nothing here is on the receipt path or the sealing path. Each source (one TSA, one witness)
runs in its own thread, an :class:`EvidenceThread`, with a :class:`TsaSource` or a
:class:`WitnessSource` doing the calls:

* **The archive is the queue.** At start the thread lists, per coffre, the checkpoints that
  lack its file (``<lot>.tsa-<name>.tsr`` or ``<lot>.witness-<name>.cosig``, see
  :mod:`coffre.domain.evidence`) and handles them oldest first, in lot order per coffre; then
  the sealer nudges it after each checkpoint it writes (:meth:`EvidenceCollector.nudge`, a
  put on a queue that never waits). Every file is written create-only: an "already exists"
  means another run wrote it first, which is done too. A vault that stops loses nothing: the
  next one lists the archive again.
* **Failures** (no answer, a timeout, a 5xx, an answer that does not verify) are logged and
  counted (``coffre_evidence_failures_total``) and the same checkpoint is tried again after a
  back-off that doubles up to ``COFFRE_EVIDENCE_MAX_RETRY_SECONDS``: the order is kept. A
  source that does not answer holds every coffre; a checkpoint whose answer alone is bad (a
  token that does not verify, a 4xx) holds only its own coffre, and the others go on.
* **A witness's refusal** other than ``conflict`` (``truncation``, ``fork``, ``rewrite``,
  ``signature``, ``malformed``) says that the archive is not what the witness cosigned: it is
  logged as critical, counted (``coffre_evidence_refused_total``) and nothing more of that
  coffre is sent to that witness until the vault restarts (an operator must look). The vault
  itself goes on.
* **Metrics**, per source: the checkpoints still lacking its file
  (``coffre_checkpoints_untimestamped{tsa}``, ``coffre_checkpoints_uncosigned{witness}``) and the
  age of the oldest one (now minus its ``Date``), for the alerts.

A witness is sent each checkpoint with a consistency proof from the tree it cosigned last
(tlog-witness ``add-checkpoint``). The thread keeps, per coffre, the accumulator
(:class:`~coffre.domain.merkle.MerkleAccumulator`) of that tree and proves each extension with
:func:`~coffre.domain.merkle.extension_proof` from the leaves of the lots that follow. **Cost:**
at start, and whenever the witness answers ``conflict`` with another size, that accumulator is
rebuilt by reading the coffre's lots from lot 1 up to the witness's size: the whole archive of
the coffre is read once per witness at each start (about a second per million events on local
disk, much more on S3). A later issue keeps the frontier beside the checkpoint instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from coffre import metrics
from coffre.adapters.storage import ArchiveStorage, ObjectExists
from coffre.adapters.witness_client import Unreachable, WitnessClient, post, ssl_context
from coffre.domain.evidence import NAME_RE, EvidenceKind, cosignature_key, timestamp_key
from coffre.domain.lot import (
    Checkpoint,
    LotFormatError,
    checkpoint_key,
    event_leaf,
    lot_key,
    numbered_lots,
    parse_document,
    parse_lot_name,
    read_checkpoint,
    read_lot,
)
from coffre.domain.merkle import MerkleAccumulator, extension_proof
from coffre.domain.seals import SealNoteError, find_note
from coffre.domain.timestamp import TimestampInvalid, build_request, verify_response
from coffre.domain.witness import (
    AddCheckpoint,
    CosignatureInvalid,
    Refusal,
    cosigned_by_any,
    note_body,
    split_note,
)
from coffre.logs import log_context

log = logging.getLogger("coffre.vault.evidence")

__all__ = [
    "NAME_RE",
    "EvidenceCollector",
    "EvidenceThread",
    "TsaSource",
    "WitnessSource",
]

Coffre = tuple[str, int]


class Retry(Exception):
    """This checkpoint's evidence could not be had now: try it again after a back-off.
    ``source_down``: the source itself does not answer (no other coffre is tried meanwhile);
    otherwise only this checkpoint failed, and the other coffres go on."""

    def __init__(self, message: str, *, source_down: bool = False) -> None:
        super().__init__(message)
        self.source_down = source_down


class Stopped(Exception):
    """Nothing more of this coffre goes to this source (the witness refused it)."""


# -- sources ------------------------------------------------------------------------------------


class Source:
    """What one TSA or one witness gives for a checkpoint. Called from its thread only."""

    kind: ClassVar[EvidenceKind]
    name: str

    def key(self, id_oper: str, id_coffre: int, number: int) -> str:
        raise NotImplementedError

    def evidence(self, checkpoint: Checkpoint, document: bytes) -> bytes:
        """The file to store beside ``document``; :class:`Retry` or :class:`Stopped` otherwise."""
        raise NotImplementedError

    def stored(self, checkpoint: Checkpoint) -> None:
        """The evidence of ``checkpoint`` is in the archive (the witness moves on)."""

    def forget(self, coffre: Coffre) -> None:
        """Drop what is kept about ``coffre`` (it is read again from the archive when needed)."""


class TsaSource(Source):
    """An RFC 3161 TSA at ``url``: the token over the checkpoint file's bytes, kept only once
    :func:`~coffre.domain.timestamp.verify_response` accepts it against ``trusted``."""

    kind = "tsa"

    def __init__(self, name: str, url: str, trusted: Sequence[x509.Certificate], *, timeout: float = 5.0):
        if not trusted:
            raise ValueError("a TSA needs trusted certificates (COFFRE_TSA_CERTS)")
        self.name = name
        self.url = url
        self.trusted = list(trusted)
        self.timeout = timeout
        self.context = ssl_context(None) if url.startswith("https://") else None

    def key(self, id_oper: str, id_coffre: int, number: int) -> str:
        return timestamp_key(id_oper, id_coffre, number, self.name)

    def evidence(self, checkpoint: Checkpoint, document: bytes) -> bytes:
        request = build_request(document)
        try:
            status, _, body = post(
                self.url,
                request.der,
                "application/timestamp-query",
                context=self.context,
                timeout=self.timeout,
            )
        except Unreachable as exc:
            raise Retry(str(exc), source_down=True) from None
        if status != 200:
            raise Retry(f"the TSA answered {status}", source_down=status >= 500)
        try:
            return verify_response(body, document, request.nonce, self.trusted).token
        except TimestampInvalid as exc:
            raise Retry(f"the TSA's answer is not a valid token: {exc}") from None


@dataclass
class _Witnessed:
    """What a witness holds for one coffre, as far as this vault knows."""

    tree: MerkleAccumulator
    next_lot: int
    """The lot whose events follow ``tree`` (its leaves are the next extension's)."""


class WitnessSource(Source):
    """A witness at ``url``: each checkpoint with a consistency proof from the witness's tree;
    its answer kept as a cosigned note (checked against ``keys`` when some are given)."""

    kind = "witness"

    def __init__(
        self,
        name: str,
        storage: ArchiveStorage,
        client: WitnessClient,
        keys: Sequence[Ed25519PublicKey] = (),
    ) -> None:
        self.name = name
        self.storage = storage
        self.client = client
        self.keys = list(keys)
        self._coffres: dict[Coffre, _Witnessed] = {}
        self._lot_keys: dict[Coffre, dict[int, str]] = {}
        self._answered: tuple[Coffre, _Witnessed, list[bytes], int] | None = None
        """The last cosigned submission, applied to the tree once its note is stored."""

    def key(self, id_oper: str, id_coffre: int, number: int) -> str:
        return cosignature_key(id_oper, id_coffre, number, self.name)

    def forget(self, coffre: Coffre) -> None:
        self._coffres.pop(coffre, None)
        self._lot_keys.pop(coffre, None)

    # -- the archive's lots --

    def _lot_key(self, coffre: Coffre, number: int, sealed: datetime | None = None) -> str:
        """Where lot ``number`` is: under the day of ``sealed`` (its checkpoint's Date) or the day
        before when given and there, else from a listing of the coffre (kept)."""
        known = self._lot_keys.setdefault(coffre, {})
        if number in known:
            return known[number]
        if sealed is not None:
            for day in (sealed, sealed - timedelta(days=1)):
                key = lot_key(*coffre, number, day)
                if self.storage.exists(key):
                    known[number] = key
                    return key
        id_oper, id_coffre = coffre
        known.update(numbered_lots(self.storage.list(f"{id_oper}/{id_coffre}/")))
        if number not in known:
            raise Stopped(f"lot {number} is not in the archive")
        return known[number]

    def _leaves(self, coffre: Coffre, number: int, sealed: datetime | None = None) -> list[bytes]:
        document = self.storage.read(self._lot_key(coffre, number, sealed))
        try:
            lot = read_lot(parse_document(document))
        except LotFormatError as exc:
            raise Stopped(f"lot {number} cannot be read: {exc}") from None
        self._lot_keys[coffre].pop(number - 1, None)  # only this lot and the next are looked for again
        return [event_leaf(event.canonical) for event in lot.events]

    def _from_notes(self, coffre: Coffre, size: int) -> _Witnessed | None:
        """The tree of the coffre's first ``size`` events from the seal note of the lot that ends
        there (found by a binary search over the notes, O(log n) reads; its frontier checked to
        fold to its root), or None when no note says so (an archive from before seal notes)."""
        try:
            note = find_note(self.storage.read, self.storage.exists, *coffre, size)
            if note is None or note.last_id_evt != size:
                return None
            return _Witnessed(note.tree(), note.number + 1)
        except (SealNoteError, OSError, KeyError):
            return None

    def _rebuild(self, coffre: Coffre, size: int) -> _Witnessed:
        """The tree of the coffre's first ``size`` events: from the seal note of the lot that ends
        there, else read from its lots from lot 1 (see the module's doc for the cost);
        :class:`Stopped` when no lot of the archive ends there."""
        started = time.perf_counter()
        if size and (noted := self._from_notes(coffre, size)) is not None:
            self._coffres[coffre] = noted
            log.info("witness %s: the tree of %d events from its seal note", self.name, size)
            return noted
        tree, number = MerkleAccumulator(), 1
        while tree.size < size:
            try:
                leaves = self._leaves(coffre, number)
            except Stopped as exc:
                raise Stopped(
                    f"the witness holds {size} events, more than the archive's lots: {exc}"
                ) from None
            for leaf in leaves:
                tree.append(leaf)
            number += 1
        if tree.size != size:
            raise Stopped(f"the witness holds {size} events, and no lot of the archive ends there")
        state = _Witnessed(tree, number)
        self._coffres[coffre] = state
        log.info(
            "witness %s: the tree of %d events rebuilt from %d lots in %.2fs",
            self.name,
            size,
            number - 1,
            time.perf_counter() - started,
        )
        return state

    def _state(self, coffre: Coffre, checkpoint: Checkpoint) -> _Witnessed:
        """Where the witness stands, as assumed before an answer says otherwise: at the previous
        checkpoint (lots are cosigned in order, so the previous one was cosigned)."""
        state = self._coffres.get(coffre)
        if state is not None:
            return state
        if checkpoint.lot_number == 1:
            return self._rebuild(coffre, 0)
        try:
            previous = self.storage.read(checkpoint_key(*coffre, checkpoint.lot_number - 1))
            size = read_checkpoint(parse_document(previous)).tree_size
        except Exception:  # no previous checkpoint (a crash between lot and checkpoint): its lot
            size = checkpoint.tree_size - len(self._leaves(coffre, checkpoint.lot_number, checkpoint.at))
        return self._rebuild(coffre, size)

    # -- a submission --

    def evidence(self, checkpoint: Checkpoint, document: bytes) -> bytes:
        coffre = (checkpoint.id_oper, checkpoint.id_coffre)
        for _ in range(2):  # a conflict: rebuilt at the witness's size and sent again, once
            state = self._state(coffre, checkpoint)
            leaves: list[bytes] = []
            for number in range(state.next_lot, checkpoint.lot_number + 1):
                leaves.extend(self._leaves(coffre, number, checkpoint.at))
            proof = extension_proof(state.tree, leaves) if state.tree.size and leaves else []
            request = AddCheckpoint(state.tree.size, tuple(proof), document)
            try:
                lines = self.client.add_checkpoint(request)
            except Unreachable as exc:
                raise Retry(str(exc), source_down=True) from None
            except Refusal as refusal:
                if refusal.kind != "conflict" or refusal.size is None:
                    metrics.EVIDENCE_REFUSED.labels(witness=self.name, kind=refusal.kind).inc()
                    raise Stopped(f"the witness refused: {refusal}") from None
                log.warning(
                    "witness %s holds %d events of coffre %s/%s, not %d: its tree is read again",
                    self.name,
                    refusal.size,
                    *coffre,
                    state.tree.size,
                )
                self._coffres.pop(coffre, None)
                self._rebuild(coffre, refusal.size)
                continue
            body = note_body(checkpoint)
            note = body + b"\n" + lines
            try:
                if not split_note(note)[1]:
                    raise CosignatureInvalid("no cosignature/v1 line in the answer")
                if self.keys:
                    cosigned_by_any(note, body, self.keys)
            except CosignatureInvalid as exc:
                raise Retry(f"the witness's answer is not a valid cosignature: {exc}") from None
            self._answered = (coffre, state, leaves, checkpoint.lot_number)
            return note
        raise Retry("the witness answered conflict twice")

    def stored(self, checkpoint: Checkpoint) -> None:
        if self._answered is None:
            return
        coffre, state, leaves, number = self._answered
        self._answered = None
        if coffre == (checkpoint.id_oper, checkpoint.id_coffre) and number == checkpoint.lot_number:
            for leaf in leaves:
                state.tree.append(leaf)
            state.next_lot = number + 1


# -- the thread ---------------------------------------------------------------------------------


@dataclass
class _Queue:
    """The checkpoints of one coffre still lacking this source's file."""

    lots: set[int] = field(default_factory=set)
    head: tuple[int, Checkpoint, bytes] | None = None
    """The oldest one, read (its number, what it says, its bytes)."""
    stopped: str | None = None


class EvidenceThread:
    """One :class:`Source` in its own thread (see the module's doc).

    :meth:`nudge` is what the sealer calls after each checkpoint: a put on a queue, never a
    wait. :meth:`stop` ends the thread between two calls (a call in flight ends within its
    timeout)."""

    def __init__(
        self,
        storage: ArchiveStorage,
        source: Source,
        *,
        retry_delay: float = 0.5,
        max_retry_delay: float = 60.0,
        period: float = 1.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.storage = storage
        self.source = source
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.period = period
        self.clock = clock
        self.stored = 0
        """Files written by this thread (for the tests and the bench)."""
        self.scanned = threading.Event()
        """Set once the start-up listing of the archive is done."""
        self._nudges: queue.SimpleQueue[tuple[str, int, int]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._coffres: dict[Coffre, _Queue] = {}
        label = {source.kind: source.name}
        if source.kind == "tsa":
            self._count = metrics.CHECKPOINTS_UNTIMESTAMPED.labels(**label)
            self._age = metrics.CHECKPOINT_UNTIMESTAMPED_AGE.labels(**label)
        else:
            self._count = metrics.CHECKPOINTS_UNCOSIGNED.labels(**label)
            self._age = metrics.CHECKPOINT_UNCOSIGNED_AGE.labels(**label)
        self._failures = metrics.EVIDENCE_FAILURES.labels(kind=source.kind, name=source.name)
        context = contextvars.copy_context()  # the service's log fields go with the thread
        self._thread = threading.Thread(
            target=context.run,
            args=(self._run,),
            name=f"coffre-{source.kind}-{source.name}",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def nudge(self, id_oper: str, id_coffre: int, number: int) -> None:
        """A checkpoint was written. Thread-safe; never waits."""
        self._nudges.put_nowait((id_oper, id_coffre, number))

    def stop(self) -> None:
        self._stop.set()
        self._nudges.put_nowait(("", -1, 0))  # wakes a thread waiting for a nudge

    def join(self, timeout: float | None = None) -> bool:
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def missing(self) -> dict[Coffre, list[int]]:
        """The checkpoints known to lack this source's file, per coffre (a copy)."""
        return {coffre: sorted(q.lots) for coffre, q in list(self._coffres.items()) if q.lots}

    def settled(self) -> bool:
        """Whether every checkpoint known lacks nothing from this source (but those of coffres
        it gave up on), with no nudge left untaken."""
        if not self.scanned.is_set() or not self._nudges.empty():
            return False
        return not any(q.lots and not q.stopped for q in list(self._coffres.values()))

    def stopped(self) -> dict[Coffre, str]:
        """The coffres this source gave up on, and why."""
        return {coffre: q.stopped for coffre, q in list(self._coffres.items()) if q.stopped}

    # -- the archive as the queue --

    def _scan(self) -> None:
        """Every checkpoint of the archive lacking this source's file."""
        operators, _ = self.storage.children("")
        for id_oper in operators:
            coffres, _ = self.storage.children(f"{id_oper}/")
            for name in coffres:
                if not name.isdigit():
                    continue
                self._scan_coffre(id_oper, int(name))

    def _scan_coffre(self, id_oper: str, id_coffre: int) -> None:
        _, files = self.storage.children(f"{id_oper}/{id_coffre}/checkpoints/")
        present = set(files)
        lots = self._coffres.setdefault((id_oper, id_coffre), _Queue()).lots
        for name in files:
            parsed = parse_lot_name(name)
            if parsed is None or parsed[:2] != (id_oper, id_coffre):
                continue
            wanted = self.source.key(id_oper, id_coffre, parsed[2]).rsplit("/", 1)[-1]
            if wanted not in present:
                lots.add(parsed[2])

    def _take_nudges(self, wait: float) -> None:
        try:
            item = self._nudges.get(timeout=wait) if wait > 0 else self._nudges.get_nowait()
        except queue.Empty:
            return
        while True:
            id_oper, id_coffre, number = item
            if id_coffre >= 0:
                self._coffres.setdefault((id_oper, id_coffre), _Queue()).lots.add(number)
            try:
                item = self._nudges.get_nowait()
            except queue.Empty:
                return

    # -- one checkpoint --

    def _head(self, coffre: Coffre, waiting: _Queue) -> tuple[int, Checkpoint, bytes]:
        number = min(waiting.lots)
        if waiting.head is None or waiting.head[0] != number:
            document = self.storage.read(checkpoint_key(*coffre, number))
            try:
                checkpoint = read_checkpoint(parse_document(document))
            except LotFormatError as exc:
                raise Stopped(f"checkpoint {number} cannot be read: {exc}") from None
            waiting.head = (number, checkpoint, document)
        return waiting.head

    def _step(self, coffre: Coffre, waiting: _Queue) -> None:
        """Fetch and store the evidence of the coffre's oldest checkpoint lacking it."""
        number, checkpoint, document = self._head(coffre, waiting)
        key = self.source.key(*coffre, number)
        if self.storage.exists(key):
            waiting.lots.discard(number)
            return
        evidence = self.source.evidence(checkpoint, document)
        with contextlib.suppress(ObjectExists):  # another run stored it first: done too
            self.storage.create(key, evidence)
        self.source.stored(checkpoint)
        waiting.lots.discard(number)
        self.stored += 1
        log.debug("stored %s", key)

    def _update_metrics(self) -> None:
        count, oldest = 0, None
        for coffre, waiting in list(self._coffres.items()):
            if not waiting.lots:
                continue
            count += len(waiting.lots)
            try:
                at = self._head(coffre, waiting)[1].at
            except Exception:  # unreadable now: counted, its age is known at the next try
                continue
            oldest = at if oldest is None else min(oldest, at)
        self._count.set(count)
        self._age.set(max(0.0, (self.clock() - oldest).total_seconds()) if oldest is not None else 0.0)

    def _run(self) -> None:
        source = self.source
        delay = self.retry_delay
        with log_context(evidence=f"{source.kind}:{source.name}"):
            while not self._stop.is_set():
                try:
                    self._scan()
                    break
                except Exception as exc:
                    self._failures.inc()
                    log.error("listing the archive failed (tried again in %gs): %s", delay, exc)
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.max_retry_delay)
            self.scanned.set()
            delay = self.retry_delay
            while not self._stop.is_set():
                self._take_nudges(0)
                self._update_metrics()
                ready = [(c, q) for c, q in sorted(self._coffres.items()) if q.lots and not q.stopped]
                if not ready:
                    self._take_nudges(self.period)
                    continue
                failed = None
                for coffre, waiting in ready:  # one checkpoint per coffre in turn, oldest first
                    if self._stop.is_set():
                        return
                    with log_context(id_oper=coffre[0], id_coffre=coffre[1], lot=min(waiting.lots)):
                        try:
                            self._step(coffre, waiting)
                        except Stopped as exc:
                            waiting.stopped = str(exc)
                            source.forget(coffre)
                            log.critical(
                                "%s %s: nothing more of coffre %s/%s is sent (an operator must look): %s",
                                source.kind,
                                source.name,
                                *coffre,
                                exc,
                            )
                        except Exception as exc:
                            self._failures.inc()
                            failed = exc
                            if not isinstance(exc, Retry):
                                source.forget(coffre)  # a storage failure: read again from the archive
                            log.error(
                                "%s %s: no evidence for lot %d (tried again in %gs, nothing is lost): %s",
                                source.kind,
                                source.name,
                                min(waiting.lots),
                                delay,
                                exc,
                                exc_info=not isinstance(exc, Retry),
                            )
                            if not isinstance(exc, Retry) or exc.source_down:
                                break  # the source or the archive is down: no other coffre either
                if failed is None:
                    delay = self.retry_delay
                    continue
                self._update_metrics()
                self._stop.wait(delay)
                delay = min(delay * 2, self.max_retry_delay)


class EvidenceCollector:
    """Every configured source's thread; :meth:`nudge` is the sealer's ``on_checkpoint``."""

    def __init__(self, threads: Iterable[EvidenceThread]) -> None:
        self.threads = list(threads)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def nudge(self, id_oper: str, id_coffre: int, number: int) -> None:
        for thread in self.threads:
            thread.nudge(id_oper, id_coffre, number)

    def stop(self) -> None:
        for thread in self.threads:
            thread.stop()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every source to have fetched the evidence of every
        checkpoint it knows of (at shutdown, after the last seal: a TSA and a witness that answer
        get the last checkpoints too); whether they all did. A source that is down is not waited
        for longer: the next start resumes from the archive."""
        deadline = time.monotonic() + timeout
        while not all(thread.settled() or not thread.alive for thread in self.threads):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        done = True
        for thread in self.threads:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = thread.join(left) and done
        return done


def collector(
    storage: ArchiveStorage,
    *,
    tsas: Sequence[tuple[str, str]] = (),
    tsa_trust: Sequence[x509.Certificate] = (),
    witnesses: Sequence[tuple[str, str]] = (),
    witness_ca: Path | None = None,
    witness_keys: Sequence[Ed25519PublicKey] = (),
    timeout: float = 5.0,
    max_retry_delay: float = 60.0,
    retry_delay: float = 0.5,
) -> EvidenceCollector:
    """A collector with one thread per TSA and per witness."""
    sources: list[Source] = [TsaSource(name, url, tsa_trust, timeout=timeout) for name, url in tsas]
    sources += [
        WitnessSource(name, storage, WitnessClient(url, ca=witness_ca, timeout=timeout), witness_keys)
        for name, url in witnesses
    ]
    return EvidenceCollector(
        EvidenceThread(storage, source, retry_delay=retry_delay, max_retry_delay=max_retry_delay)
        for source in sources
    )
