"""``coffre verify``: an archive folder, checked offline, coffre by coffre (see coffre.domain.verify)."""

from __future__ import annotations

import argparse
import collections
import contextlib
import multiprocessing
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from lxml import etree

from coffre.adapters.storage import TMP_PREFIX
from coffre.adapters.witness_client import WitnessedCheckpoint
from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.evidence import parse_evidence_name
from coffre.domain.lot import (
    LotFormatError,
    check_document_size,
    parse_document,
    parse_lot_name,
    read_checkpoint,
)
from coffre.domain.merkle import root as merkle_root
from coffre.domain.proofs import prove_consistency, prove_inclusion
from coffre.domain.schema import SchemaSet
from coffre.domain.seals import MAX_NOTE_BYTES, SealNote, SealNoteError
from coffre.domain.signing import TrustStore
from coffre.domain.timestamp import load_trust_files
from coffre.domain.verify import (
    TSA_MAX_DELAY,
    CheckpointItem,
    CheckpointRead,
    CoffreReport,
    EvidencePolicy,
    LotSummary,
    SchemaCheck,
    Source,
    checkpoint_items,
    numbered_lots,
    read_checkpoint_alone,
    summarize_lot,
    verify_coffre,
)
from coffre.domain.witness import CosignatureInvalid, cosigned_by_any, load_public_keys, note_body_of, origin

EVIDENCE_SUFFIXES = (".tsr", ".cosig")


@dataclass
class ArchiveReport:
    coffres: list[CoffreReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Failures outside any coffre (a file named like no lot or checkpoint, an unreadable
    ``--checkpoint``)."""
    ignored: list[str] = field(default_factory=list)
    """Files that are not part of the archive and were not read (not failures): temporary files
    an interrupted write left, files with another extension."""
    policy: EvidencePolicy | None = None
    """What was asked of the evidence (None: nothing, as with no --tsa-cert or --witness-key)."""

    @property
    def ok(self) -> bool:
        return bool(self.coffres) and not self.problems and all(not c.failures for c in self.coffres)

    def lines(self) -> list[str]:
        out = list(self.problems)
        for coffre in self.coffres:
            out += [str(failure) for failure in coffre.failures]
        out += self.ignored
        for coffre in self.coffres:
            verdict = "OK" if not coffre.failures else f"{len(coffre.failures)} failure(s)"
            out.append(
                f"coffre {coffre.id_oper}/{coffre.id_coffre}: {coffre.lots} lot(s), {coffre.events} event(s), "
                f"{coffre.checkpoints} checkpoint(s){self._evidence(coffre)}: {verdict}"
            )
        if not self.coffres and not self.problems:
            out.append("no lot found")
        return out

    def _evidence(self, coffre: CoffreReport) -> str:
        """The evidence counted, and said unchecked when nothing was given to check it with;
        nothing for a coffre without any (the line is then as before evidence existed)."""
        policy = self.policy or EvidencePolicy()
        said = ""
        if coffre.tokens:
            said += f", {coffre.tokens} token(s)" + ("" if policy.tsa_roots else " not checked")
        if coffre.cosignatures:
            said += f", {coffre.cosignatures} cosignature(s)" + (
                "" if policy.witness_keys else " not checked"
            )
        return said


def schema_check(xsd_dir: Path) -> SchemaCheck:
    schemas = SchemaSet(xsd_dir)

    def check(canonical: bytes) -> list[str]:
        element = etree.fromstring(canonical)
        model = EVENT_TYPES.get(element.tag)
        if model is None:
            return [f"{element.tag} is not an event of the schema set"]
        return schemas.errors(model.family, element)

    return check


def verify_archive(
    path: Path,
    certificates: Sequence[Path],
    *,
    older_checkpoint: Path | None = None,
    xsd_dir: Path | None = None,
    tsa_certs: Sequence[Path] = (),
    tsa_max_delay: timedelta = TSA_MAX_DELAY,
    witness_keys: Sequence[Path] = (),
    witness: Sequence[WitnessedCheckpoint] | None = None,
    witness_name: str = "--witness",
    jobs: int = 1,
    keep: bool = False,
) -> ArchiveReport:
    """Every coffre whose lots are under ``path`` (the archive's root, or any folder inside it).

    Files are read one at a time as the check reaches them. A ``.tmp-*`` file (what a crash
    while sealing leaves, see :mod:`coffre.adapters.storage`) or a file that is not ``.xml``,
    ``.tsr`` or ``.cosig`` is not part of the archive: it is listed as ignored, not read, and is
    no failure. A ``--checkpoint`` of a coffre the archive does not hold is checked against an
    empty coffre: a ``truncation`` failure when its signature holds.

    ``tsa_certs`` (trusted TSA roots, PEM) and ``witness_keys`` (Ed25519 public keys, PEM) have
    the evidence beside each checkpoint checked; ``witness`` is what a witness says it cosigned
    last for each coffre (:meth:`WitnessClient.checkpoints`, reported as ``witness_name``): the
    archive must extend each of those checkpoints.

    ``jobs`` above 1 reads the lots in that many worker processes (``coffre verify --jobs``), one
    coffre's lots as well as many coffres': each worker checks a lot on its own (its signature,
    its events, its tree) and hands back a summary (:class:`~coffre.domain.verify.LotSummary`);
    this process reads the checkpoints and checks each lot against the one before, in order. The
    report is the serial one, line for line.

    ``keep`` keeps every event's leaf and chain hash in the coffres' reports (proofs need them:
    :func:`archive_proof`); without it the memory used does not grow with the coffres' events."""
    report = ArchiveReport()
    trust = TrustStore.from_pem_files(list(certificates))
    keys = [key for file in witness_keys for key in load_public_keys(Path(file).read_bytes())]
    policy = EvidencePolicy(
        tsa_roots=load_trust_files(tsa_certs) if tsa_certs else (),
        tsa_max_delay=tsa_max_delay,
        witness_keys=keys,
    )
    report.policy = policy
    lots: dict[tuple[str, int], list[tuple[str, Source]]] = {}
    checkpoints: dict[tuple[str, int], list[tuple[str, Source]]] = {}
    evidence: dict[tuple[str, int], list[tuple[str, Source]]] = {}
    seal_notes: dict[tuple[str, ...], list[tuple[str, Path]]] = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path).as_posix()
        if any(part.startswith(TMP_PREFIX) for part in file.relative_to(path).parts):
            report.ignored.append(f"{relative}: ignored: a temporary file an interrupted write left")
            continue
        if file.suffix in EVIDENCE_SUFFIXES:
            name = parse_evidence_name(file.name)
            if name is None:
                report.problems.append(f"{relative}: location: not an evidence file name")
            else:
                evidence.setdefault((name.id_oper, name.id_coffre), []).append((relative, _RawReader(file)))
            continue
        if file.suffix == ".json" and file.parent.name == "seals":
            seal_notes.setdefault(tuple(file.parent.parent.parts[-2:]), []).append((relative, file))
            continue
        if file.suffix != ".xml":
            report.ignored.append(f"{relative}: ignored: not a lot, checkpoint or evidence file")
            continue
        parsed = parse_lot_name(file.name)
        if parsed is None:
            report.problems.append(f"{relative}: location: not a lot or checkpoint file name")
            continue
        into = checkpoints if file.parent.name == "checkpoints" else lots
        into.setdefault((parsed[0], parsed[1]), []).append((relative, _Reader(file)))
    older: dict[tuple[str, int], tuple[str, bytes]] = {}
    if older_checkpoint is not None:
        try:
            document = _reader(older_checkpoint)()
            checkpoint = read_checkpoint(parse_document(document))  # its signature is checked with its coffre
        except LotFormatError as exc:
            report.problems.append(f"{older_checkpoint}: format: {exc}")
        else:
            older[(checkpoint.id_oper, checkpoint.id_coffre)] = (str(older_checkpoint), document)
    witnessed = {(entry.id_oper, entry.id_coffre): entry for entry in witness or ()}
    keys_in_order = sorted(
        lots.keys() | checkpoints.keys() | older.keys() | evidence.keys() | witnessed.keys()
    )
    tasks = [
        _CoffreTask(
            key,
            lots.get(key, []),
            checkpoints.get(key, []),
            older.get(key),
            evidence.get(key, []),
            keep,
            (witnessed[key].size,) if key in witnessed else (),
            tuple(_note_numbers(seal_notes.get((key[0], str(key[1])), []))),
        )
        for key in keys_in_order
    ]
    setting = _Setting(
        tuple(Path(c) for c in certificates),
        tuple(Path(c) for c in tsa_certs),
        tsa_max_delay,
        tuple(Path(k) for k in witness_keys),
        xsd_dir,
    )
    schema = schema_check(xsd_dir) if xsd_dir is not None else None
    with contextlib.ExitStack() as stack:
        feed = None
        if jobs > 1 and sum(len(task.lots) for task in tasks) > 1:
            feed = stack.enter_context(_LotFeed(setting, tasks, jobs))
        for key, task in zip(keys_in_order, tasks, strict=True):
            coffre = task.run(trust, schema, policy, feed)
            if key in witnessed:
                check_witnessed(coffre, witnessed[key], keys, witness_name)
            check_seal_notes(coffre, seal_notes.pop((key[0], str(key[1])), []))
            report.coffres.append(coffre)
    for files in seal_notes.values():
        report.problems.extend(
            f"{relative}: location: a seal note of no coffre of the archive" for relative, _ in files
        )
    return report


def check_seal_notes(coffre: CoffreReport, notes: Sequence[tuple[str, Path]]) -> None:
    """The vault's seal notes (unsigned, see :mod:`coffre.domain.seals`) must each describe a lot
    the archive holds, with the coffre's real tree after it: its IDEvt range that lot's, its root
    the root as verified (when the tree as read agrees with the signed ones: a difference there is
    reported already), its frontier folding to that root. Only the newest may announce a lot
    not written yet (the vault stopped between the two; its next seal writes that lot)."""
    if not coffre.complete:
        return  # the tree is unknown past a lot that could not be read: that is reported
    spans = {number: (first, last) for number, first, last in coffre.spans}
    newest = max(spans, default=0)
    for relative, file in sorted(notes):
        try:
            note = SealNote.decode(_RawReader(file, MAX_NOTE_BYTES + 1)())
            note.tree()
        except (SealNoteError, LotFormatError) as exc:
            coffre.fail(relative, "seal-note", str(exc))
            continue
        if (note.id_oper, note.id_coffre) != (coffre.id_oper, coffre.id_coffre) or not relative.endswith(
            note.key.split("/", 2)[2]
        ):
            coffre.fail(
                relative,
                "seal-note",
                f"the note of lot {note.number} of {note.id_oper}/{note.id_coffre} filed here",
            )
            continue
        span = spans.get(note.number)
        if span is None:
            if note.number != newest + 1:
                coffre.fail(
                    relative, "seal-note", f"announces lot {note.number}, which the archive does not hold"
                )
            continue
        as_read = coffre.roots.get(note.last_id_evt)
        if span != (note.first_id_evt, note.last_id_evt) or (
            coffre.tree_agrees and as_read != note.tree_root
        ):
            coffre.fail(
                relative,
                "seal-note",
                f"does not describe lot {note.number} as it verified (IDEvt {span[0]}..{span[1]} and its tree)",
            )


def check_witnessed(
    coffre: CoffreReport, entry: WitnessedCheckpoint, keys: Sequence[Ed25519PublicKey], where: str
) -> None:
    """The archive must extend the newest checkpoint the witness cosigned for this coffre: hold at
    least its events, and its first ``size`` events must have its root. With witness keys, the
    witness's entry counts only when its note carries a valid cosignature by one of them."""
    name = f"{coffre.id_oper}/{coffre.id_coffre}"
    size = entry.size
    if keys:
        body = note_body_of(origin(entry.id_oper, entry.id_coffre), size, entry.root)
        try:
            cosigned_by_any(entry.note, body, keys)
        except CosignatureInvalid as exc:
            coffre.fail(
                where,
                "witness",
                f"the witness's checkpoint of coffre {name} (size {size}) is not cosigned by a given "
                f"witness key ({exc}): it is no evidence",
            )
            return
    if not coffre.lots and not coffre.held:
        coffre.fail(
            where,
            "witness",
            f"the witness cosigned {size} events of coffre {name}; the archive has none: a coffre removed",
        )
        return
    if not coffre.complete:
        return  # a lot could not be read: the coffre's tree is unknown, and that is reported
    held = coffre.held
    if held < size:
        coffre.fail(
            where,
            "witness",
            f"truncation: the witness cosigned {size} events of coffre {name}, the archive holds {held}: "
            "events were removed (pull again if the vault sealed since)",
        )
        return
    root = coffre.roots.get(size)
    if root is None and coffre.keep:
        root = merkle_root(coffre.leaves.prefix(size))
    if root != entry.root:
        coffre.fail(
            where,
            "witness",
            f"rewriting: the archive's first {size} events of coffre {name} are not those the witness "
            "cosigned: the history was rebuilt, or forked",
        )


@dataclass(frozen=True, slots=True)
class _RawReader:
    """Reads an evidence file when called, refusing one larger than ``limit`` (a token or a
    cosigned note is a few KiB). A class, not a closure: it is sent to a ``--jobs`` worker."""

    file: Path
    limit: int = 64 * 1024

    def __call__(self) -> bytes:
        size = self.file.stat().st_size
        if size > self.limit:
            raise LotFormatError(f"{size} bytes, more than the {self.limit} an evidence file may hold")
        return self.file.read_bytes()


@dataclass(frozen=True, slots=True)
class _Reader:
    """Reads ``file`` when called, refusing (``format``) one larger than any lot may be."""

    file: Path

    def __call__(self) -> bytes:
        check_document_size(self.file.stat().st_size)
        return self.file.read_bytes()


def _reader(file: Path) -> Callable[[], bytes]:
    return _Reader(file)


# -- ``--jobs``: coffres verified in worker processes ---------------------------------------------


@dataclass(frozen=True, slots=True)
class _Setting:
    """What every coffre is checked with, as files: a worker loads them once (certificates and
    keys are not sent between processes)."""

    certificates: tuple[Path, ...]
    tsa_certs: tuple[Path, ...]
    tsa_max_delay: timedelta
    witness_keys: tuple[Path, ...]
    xsd_dir: Path | None


@dataclass(frozen=True, slots=True)
class _CoffreTask:
    """One coffre's files (bytes read when the check reaches them), verified by :meth:`run`."""

    key: tuple[str, int]
    lots: list[tuple[str, Source]]
    checkpoints: list[tuple[str, Source]]
    older: tuple[str, bytes] | None
    evidence: list[tuple[str, Source]]
    keep: bool = False
    wanted: tuple[int, ...] = ()
    """Tree sizes checked after the walk (a witness's checkpoint): their roots are kept."""
    wanted_lots: tuple[int, ...] = ()
    """Lots whose seal notes are checked after the walk: their spans and roots are kept."""

    def run(
        self,
        trust: TrustStore,
        schema: SchemaCheck | None,
        policy: EvidencePolicy,
        feed: _LotFeed | None = None,
    ) -> CoffreReport:
        return verify_coffre(
            self.key[0],
            self.key[1],
            self.lots,
            self.checkpoints,
            trust,
            older_checkpoint=self.older,
            schema=schema,
            evidence=self.evidence,
            policy=policy,
            keep=self.keep,
            wanted=self.wanted,
            wanted_lots=self.wanted_lots,
            summaries=feed.take if feed is not None else None,
            checkpoints_read=feed.take_checkpoints if feed is not None else None,
        )


_NOTE_NAME = re.compile(r"[0-9]{4}-[0-9]+-([0-9]{10})\.json")


def _note_numbers(notes: Sequence[tuple[str, Path]]) -> Iterator[int]:
    """The lot numbers in the seal notes' file names (a note that names another lot inside is
    reported by :func:`check_seal_notes` before its lot is looked up)."""
    for _, file in notes:
        found = _NOTE_NAME.fullmatch(file.name)
        if found:
            yield int(found[1])


_worker: tuple[TrustStore, SchemaCheck | None, EvidencePolicy] | None = None


def _init_worker(setting: _Setting) -> None:
    global _worker
    keys = [key for file in setting.witness_keys for key in load_public_keys(Path(file).read_bytes())]
    policy = EvidencePolicy(
        tsa_roots=load_trust_files(setting.tsa_certs) if setting.tsa_certs else (),
        tsa_max_delay=setting.tsa_max_delay,
        witness_keys=keys,
    )
    schema = schema_check(setting.xsd_dir) if setting.xsd_dir is not None else None
    _worker = (TrustStore.from_pem_files(list(setting.certificates)), schema, policy)


def _read_many_in_worker(tasks: list[tuple[object, ...]]) -> list[LotSummary | CheckpointRead]:
    return [_read_in_worker(*task) for task in tasks]  # type: ignore[arg-type]


def _read_in_worker(kind: str, key: tuple[str, int], *task: object) -> LotSummary | CheckpointRead:
    """A lot (``number, path, source``) or a checkpoint (a :data:`CheckpointItem`) of coffre ``key``."""
    assert _worker is not None
    trust, schema, policy = _worker
    if kind == "checkpoint":
        return read_checkpoint_alone(key[0], key[1], task[0], trust, policy)  # type: ignore[arg-type]
    number, path, source = task
    return summarize_lot(number, path, source, trust, schema, key[0], key[1], keep_events=False)  # type: ignore[arg-type]


BATCH = 4
"""Lots or checkpoints sent to a worker at a time: fewer round trips (each costs this process
about a millisecond), still a small share of a coffre."""


class _LotFeed:
    """Every coffre's checkpoints and lots read by ``jobs`` worker processes
    (:func:`read_checkpoint_alone`, :func:`summarize_lot`), in the order this process checks them
    (coffre by coffre: its checkpoints, then its lots), at most a few per worker ahead (a lot's
    summary is 64 bytes an event): the workers read the next coffre while this one is linked."""

    def __init__(self, setting: _Setting, tasks: Sequence[_CoffreTask], jobs: int) -> None:
        from coffre.adapters.audit_workers import start_method

        self._tasks: list[tuple[object, ...]] = []
        for task in tasks:
            for item in checkpoint_items(*task.key, task.checkpoints, task.evidence):
                self._tasks.append(("checkpoint", task.key, item))
            for number, path, source in numbered_lots(task.lots)[0]:
                self._tasks.append(("lot", task.key, number, path, source))
        self._ahead = 4 * jobs
        self._pending: collections.deque[Future[list[Any]]] = collections.deque()
        self._ready: collections.deque[Any] = collections.deque()
        self._next = 0
        context = multiprocessing.get_context(start_method())
        self._executor = ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(setting,)
        )

    def __enter__(self) -> _LotFeed:
        self._fill()
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self._pending:
            future.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _fill(self) -> None:
        while self._next < len(self._tasks) and len(self._pending) < self._ahead:
            batch = self._tasks[self._next : self._next + BATCH]
            self._pending.append(self._executor.submit(_read_many_in_worker, batch))
            self._next += len(batch)

    def _result(self) -> Any:
        if not self._ready:
            self._ready.extend(self._pending.popleft().result())
            self._fill()
        return self._ready.popleft()

    def take_checkpoints(self, items: list[CheckpointItem]) -> Iterator[CheckpointRead]:
        """One coffre's checkpoints as read, ``items`` as :func:`checkpoint_items` orders them."""
        for path, _, _ in items:
            read = self._result()
            if read[0].opened.path != path:  # pragma: no cover
                raise RuntimeError(f"checkpoint {path} read out of order ({read[0].opened.path})")
            yield read

    def take(self, numbered: list[tuple[int, str, Source]]) -> Iterator[LotSummary]:
        """One coffre's lots summarized, ``numbered`` as :func:`numbered_lots` orders them."""
        for number, path, _ in numbered:
            summary = self._result()
            if (summary.number, summary.path) != (number, path):  # pragma: no cover
                raise RuntimeError(f"lot {path} read out of order ({summary.path})")
            yield summary


def archive_proof(
    path: Path,
    certificates: Sequence[Path],
    id_oper: str,
    id_coffre: int,
    *,
    id_evt: int | None = None,
    since_size: int | None = None,
) -> dict[str, object]:
    """An inclusion proof for ``id_evt``, or a consistency proof from the tree of ``since_size``
    events to the archive's whole tree, computed from an archive that verifies."""
    report = verify_archive(path, certificates, keep=True)
    coffre = next((c for c in report.coffres if (c.id_oper, c.id_coffre) == (id_oper, id_coffre)), None)
    if coffre is None:
        raise ValueError(f"no lot of coffre {id_oper}/{id_coffre} under {path}")
    if not report.ok:
        raise ValueError("the archive does not verify: " + "; ".join(report.lines()[:5]))
    if id_evt is not None:
        for number, first, last in coffre.spans:
            if first <= id_evt <= last:
                return prove_inclusion(
                    id_oper, id_coffre, id_evt, number, first, coffre.leaves[first - 1 : last], coffre.leaves
                ).to_dict()
        raise ValueError(f"IDEvt {id_evt} is not in the archive of coffre {id_oper}/{id_coffre}")
    if since_size is None:
        raise ValueError("an IDEvt or an older tree size is needed")
    return prove_consistency(id_oper, id_coffre, since_size, coffre.leaves).to_dict()


def run(args: argparse.Namespace) -> int:
    """Offline verification of an archive folder; exit 0 only when every check holds."""
    from datetime import timedelta

    from coffre.adapters.witness_client import Unreachable, WitnessClient

    if not args.cert:
        print("coffre verify: name the certificate(s) you trust with --cert PEM", file=sys.stderr)
        return 2
    named_files = [
        *args.cert,
        *([args.checkpoint] if args.checkpoint else []),
        *args.tsa_cert,
        *args.witness_key,
        *([args.witness_ca] if args.witness_ca else []),
    ]
    for named in named_files:
        if not Path(named).is_file():
            print(f"coffre verify: no file {named}", file=sys.stderr)
            return 2
    if args.tsa_max_delay < 0:
        print("coffre verify: --tsa-max-delay is a number of seconds, at least 0", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print("coffre verify: --jobs must be 1 or more", file=sys.stderr)
        return 2
    from coffre.commands.audit.run import available_cpus

    witnessed = None
    if args.witness:
        try:
            client = WitnessClient(args.witness, ca=Path(args.witness_ca) if args.witness_ca else None)
            witnessed = client.checkpoints()
        except (ValueError, Unreachable) as exc:
            print(f"coffre verify: the witness {args.witness}: {exc}", file=sys.stderr)
            return 2
    try:
        report = verify_archive(
            Path(args.path),
            [Path(c) for c in args.cert],
            older_checkpoint=Path(args.checkpoint) if args.checkpoint else None,
            xsd_dir=Path(args.xsd) if args.xsd else None,
            tsa_certs=[Path(c) for c in args.tsa_cert],
            tsa_max_delay=timedelta(seconds=args.tsa_max_delay),
            witness_keys=[Path(k) for k in args.witness_key],
            witness=witnessed,
            witness_name=args.witness or "--witness",
            jobs=args.jobs if args.jobs is not None else available_cpus(),
        )
    except ValueError as exc:  # an unreadable --tsa-cert or --witness-key
        print(f"coffre verify: {exc}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1
