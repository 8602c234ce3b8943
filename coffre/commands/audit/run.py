"""``coffre audit PATH…``: the offline audit of event files, folders and archives.

Each input event is normalized and audited with :func:`coffre.domain.audit.events.audit_event`,
fed to a :class:`~coffre.domain.audit.trail.MoneyTrail` in order: the files (and folders) in sorted
path order, an archive coffre by coffre in IDEvt order once it verifies exactly as ``coffre verify``
checks it. An archive that does not verify is reported and not audited: its events are no evidence.

Findings are evidence, not refusals; an input that cannot be normalized, or an archive that does
not verify, is a *problem*. Exit codes: 0 when neither, 1 when any, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from coffre.adapters.storage import TMP_PREFIX
from coffre.domain.audit.events import audit_event
from coffre.domain.audit.findings import Finding
from coffre.domain.audit.house import DEFAULT_RULES, HouseRules
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.errors import Rejected
from coffre.domain.lot import LotFormatError, parse_document, parse_lot_name, read_lot
from coffre.domain.normalize import normalize

MAX_PICTURES = 200
"""Flagged hands pictured in the HTML report by default; the others are counted, not drawn."""

MIN_PARALLEL_EVENTS = 200
"""Without ``--jobs``, an input of fewer events (event files, or an archive's events) is audited in
this process: a pool's start-up would cost more than it saves."""

FILES_PER_TASK = 32
"""At most this many event files per worker task (fewer when there are few files per worker)."""

LOT_BYTES_PER_TASK = 128 * 1024
"""A lot is shared between worker tasks by slices of about this many bytes of its events (each task
parses the lot, a small cost beside normalizing and auditing its events)."""


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity), the default of ``--jobs``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class Located:
    """A finding and the event it was found in."""

    source: str
    """``file`` or ``file#n`` (the n-th event of a file), or ``archive@IDOper/IDCoffre``."""
    id_oper: str
    id_coffre: int
    id_evt: int
    event_type: str
    finding: Finding

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "id_oper": self.id_oper,
            "id_coffre": self.id_coffre,
            "id_evt": self.id_evt,
            "event_type": self.event_type,
            **self.finding.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class Problem:
    """An input that could not be audited: ``rejected`` (normalize's reason codes), ``unverified``
    (an archive that fails verification), ``unreadable``, ``empty`` (no event), ``error`` (a check
    that failed on the event: a defect of coffre's, reported rather than hidden)."""

    source: str
    kind: str
    message: str
    codes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "message": self.message, "codes": list(self.codes)}

    def __str__(self) -> str:
        codes = f" {' '.join(self.codes)}" if self.codes else ""
        return f"{self.source}: {self.kind.upper()}{codes}: {self.message}"


@dataclass(frozen=True, slots=True)
class Verification:
    """An archive's verification, as ``coffre verify`` prints it."""

    archive: str
    ok: bool
    lines: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"archive": self.archive, "ok": self.ok, "report": list(self.lines)}


@dataclass(frozen=True, slots=True)
class FlaggedHand:
    """A ``POJEU`` with findings, kept for the report's picture."""

    source: str
    event: POJEU
    findings: tuple[Finding, ...]


@dataclass
class AuditRun:
    inputs: list[tuple[str, str]] = field(default_factory=list)
    """(PATH, kind): ``file``, ``folder`` or ``archive``."""
    events: int = 0
    hands: int = 0
    findings: list[Located] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    verifications: list[Verification] = field(default_factory=list)
    flagged: list[FlaggedHand] = field(default_factory=list)
    """The first flagged hands, up to the run's picture limit."""
    flagged_total: int = 0
    """Every flagged hand, pictured or not."""
    not_checked: Counter[str] = field(default_factory=Counter)
    """Finding code -> times its rule could not be judged: the events it needs are not in the
    audited set ("not checked, context absent", docs/money-trail.md)."""

    @property
    def codes(self) -> dict[str, int]:
        return dict(sorted(Counter(f.finding.code for f in self.findings).items()))

    @property
    def clean(self) -> bool:
        return not self.findings and not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "findings": [f.as_dict() for f in self.findings],
            "hands": self.hands,
            "events": self.events,
            "codes": self.codes,
            "problems": [p.as_dict() for p in self.problems],
            "verified": [v.as_dict() for v in self.verifications] if self.verifications else None,
            "inputs": [{"path": path, "kind": kind} for path, kind in self.inputs],
            "flagged_hands": self.flagged_total,
            "not_checked": dict(sorted(self.not_checked.items())),
        }


class Auditor:
    """Runs the audit of one input after the other into an :class:`AuditRun`.

    ``jobs``: worker processes for the work of each event that needs no other event (reading,
    normalizing, ``check_event``, ``audit_hand``: coffre/adapters/audit_workers.py), the money trail fed
    here in the serial order; 1: everything in this process; None: :func:`available_cpus`, and this
    process alone for an input of fewer than :data:`MIN_PARALLEL_EVENTS` events. Call :meth:`close`
    at the end (the pool, when one was started)."""

    def __init__(
        self, max_pictures: int = MAX_PICTURES, rules: HouseRules = DEFAULT_RULES, jobs: int | None = 1
    ) -> None:
        self.run = AuditRun()
        self.max_pictures = max_pictures
        self.rules = rules
        self.jobs = jobs
        self._pool: Executor | None = None

    def _workers(self, events: int) -> int:
        """The worker processes for an input of about ``events`` events (1: none)."""
        if self.jobs is not None:
            return self.jobs
        return available_cpus() if events >= MIN_PARALLEL_EVENTS else 1

    def _results(
        self, workers: int, task: Callable[..., bytes], calls: Iterable[tuple[Any, ...]]
    ) -> Iterator[Any]:
        """``task(*call)`` for each call, run by the workers, its results in the calls' order (a few
        tasks per worker in flight, so that what waits for the main process stays small)."""
        from coffre.adapters import audit_workers

        if self._pool is None:
            self._pool = audit_workers.pool(workers, self.rules)
        pool, pending, calls = self._pool, deque(), iter(calls)
        for call in itertools.islice(calls, 4 * workers):
            pending.append(pool.submit(task, *call))
        while pending:
            future = pending.popleft()
            for call in itertools.islice(calls, 1):
                pending.append(pool.submit(task, *call))
            yield audit_workers.loads(future.result())

    def _keeps(self) -> bool:
        """Whether a task submitted now must send its events whole: :meth:`record` may keep a hand
        for a picture while places are left (they only fill up); else the trail's view will do
        (``audit_workers.trail_view``: a hand's later rounds without their actions)."""
        return len(self.run.flagged) < self.max_pictures

    def close(self) -> None:
        if self._pool is not None:
            import gc

            self._pool.shutdown(cancel_futures=True)
            self._pool = None
            gc.unfreeze()  # frozen by audit_workers.pool

    def event(self, source: str, raw: bytes, trail: MoneyTrail) -> None:
        """Normalize and audit one event's bytes (its input's IDEvt is kept)."""
        try:
            event = normalize(raw)
        except Rejected as exc:
            self.run.problems.append(
                Problem(source, "rejected", "; ".join(p.message for p in exc.problems), tuple(exc.codes))
            )
            return
        try:
            findings = audit_event(event, trail, self.rules)
        except Exception as exc:  # a defect of a check: reported as a problem, the run goes on
            self.run.problems.append(
                Problem(source, "error", f"the audit failed: {type(exc).__name__}: {exc}")
            )
            return
        self.record(source, event, findings)

    def outcome(self, source: str, outcome: tuple[Any, ...], trail: MoneyTrail) -> None:
        """What a worker made of one event (audit_workers.outcome), fed to ``trail`` and recorded
        as :meth:`event` records it."""
        if outcome[0] == "rejected":
            self.run.problems.append(Problem(source, "rejected", outcome[1], outcome[2]))
            return
        if outcome[0] == "error":
            self.run.problems.append(Problem(source, "error", outcome[1]))
            return
        _, event, findings = outcome
        try:
            findings += trail.observe(event)
        except Exception as exc:  # as audit_event's trail fails in self.event
            self.run.problems.append(
                Problem(source, "error", f"the audit failed: {type(exc).__name__}: {exc}")
            )
            return
        self.record(source, event, findings)

    def record(self, source: str, event: Event, findings: list[Finding]) -> None:
        run = self.run
        run.events += 1
        tag = str(type(event).xml_tag)  # type: ignore[attr-defined]
        run.findings += [
            Located(source, event.id_oper, event.id_coffre, event.id_evt, tag, f) for f in findings
        ]
        if isinstance(event, POJEU):
            run.hands += 1
            if findings:
                run.flagged_total += 1
                if len(run.flagged) < self.max_pictures:
                    run.flagged.append(FlaggedHand(source, event, tuple(findings)))

    def finish(self, source: str, trail: MoneyTrail) -> None:
        """The end of a trail's input: the findings only the end can give, and its not-checked counts."""
        for id_oper, id_coffre, id_evt, finding in trail.finish():
            self.run.findings.append(Located(source, id_oper, id_coffre, id_evt, "POINSCRIT", finding))
        self.run.not_checked.update(trail.not_checked)

    def files(self, paths: Sequence[str]) -> None:
        """Event files and folders (recursively), in sorted path order, through one money trail."""
        if self.jobs == 1:
            self._files_here(paths)
            return
        listed: list[tuple[str, list[Path] | OSError]] = []
        for path in sorted(paths):
            try:
                listed.append((path, _event_files(path)))
            except OSError as exc:
                listed.append((path, exc))
        workers = self._workers(sum(len(files) for _, files in listed if isinstance(files, list)))
        if workers > 1:
            self._files_in_workers(listed, workers)
        else:
            self._files_here(paths)

    def _files_here(self, paths: Sequence[str]) -> None:
        from coffre.commands.inputs import inputs

        trail = MoneyTrail()
        for path in sorted(paths):
            found = 0
            try:
                for label, raw in inputs([path]):
                    found += 1
                    self.event(label, raw, trail)
            except OSError as exc:
                self.run.problems.append(Problem(path, "unreadable", str(exc)))
                continue
            if found == 0:
                self.run.problems.append(Problem(path, "empty", "no event (.xml or .json file) found"))
        self.finish("(end of input)", trail)

    def _files_in_workers(self, listed: list[tuple[str, list[Path] | OSError]], workers: int) -> None:
        """:meth:`_files_here`'s run, each file read, normalized and audited by a worker."""
        from coffre.adapters.audit_workers import files_task

        names = [str(file) for _, files in listed if isinstance(files, list) for file in files]
        size = max(1, min(FILES_PER_TASK, len(names) // (8 * workers)))
        chunks = [names[k : k + size] for k in range(0, len(names), size)]
        results = (
            outcome
            for chunk in self._results(workers, files_task, ((chunk, self._keeps()) for chunk in chunks))
            for outcome in chunk
        )
        trail = MoneyTrail()
        for path, files in listed:
            if isinstance(files, OSError):
                self.run.problems.append(Problem(path, "unreadable", str(files)))
                continue
            found = 0
            failed = False
            for _file in files:
                kind, payload = next(results)
                if failed:
                    continue  # the serial run stops reading this path at its first unreadable file
                if kind == "unreadable":
                    self.run.problems.append(Problem(path, "unreadable", payload))
                    failed = True
                    continue
                for label, outcome in payload:
                    found += 1
                    self.outcome(label, outcome, trail)
            if not failed and found == 0:
                self.run.problems.append(Problem(path, "empty", "no event (.xml or .json file) found"))
        self.finish("(end of input)", trail)

    def archive(self, path: Path, certificates: Sequence[Path]) -> None:
        """Verify the archive under ``path`` as ``coffre verify`` does; audit it only if it verifies."""
        from coffre.commands.verify import verify_archive

        report = verify_archive(path, certificates)
        lines = tuple(report.lines())
        self.run.verifications.append(Verification(str(path), report.ok, lines))
        if not report.ok:
            failed = report.problems + [str(f) for coffre in report.coffres for f in coffre.failures]
            failed = failed or ["no lot found"]
            self.run.problems.append(
                Problem(
                    str(path),
                    "unverified",
                    "the archive does not verify, its events are not audited: " + "; ".join(failed[:5]),
                )
            )
            return
        lots = sorted(archive_lots(path).items())
        workers = self._workers(sum(coffre.events for coffre in report.coffres))
        if workers > 1:
            self._archive_in_workers(path, lots, workers)
            return
        for (oper, coffre), files in lots:
            trail = MoneyTrail()
            source = f"{path}@{oper}/{coffre}"
            for _number, file in files:
                try:
                    lot = read_lot(parse_document(file.read_bytes()))
                except (OSError, LotFormatError) as exc:  # changed since it verified
                    self.run.problems.append(Problem(str(file), "unreadable", str(exc)))
                    self.run.not_checked.update(trail.not_checked)  # not its end: the rest is unread
                    break
                for item in lot.events:
                    self.event(f"{source}#{item.id_evt}", item.canonical, trail)
            else:
                self.finish(f"{source} (end)", trail)

    def _archive_in_workers(
        self, path: Path, lots: list[tuple[tuple[str, int], list[tuple[int, Path]]]], workers: int
    ) -> None:
        """:meth:`archive`'s audit of a verified archive, each lot read, normalized and audited by
        workers (a large lot by several, a slice of its events each)."""
        from coffre.adapters.audit_workers import lot_task

        def parts(file: Path) -> int:
            try:
                return max(1, file.stat().st_size // LOT_BYTES_PER_TASK)
            except OSError:
                return 1  # its worker reports it unreadable

        plan = [
            (f"{path}@{oper}/{coffre}", [(file, parts(file)) for _number, file in files])
            for (oper, coffre), files in lots
        ]
        results = self._results(
            workers,
            lot_task,
            (
                (str(file), source, k, n, self._keeps())
                for source, files in plan
                for file, n in files
                for k in range(n)
            ),
        )
        for source, files in plan:
            trail = MoneyTrail()
            remaining = sum(n for _, n in files)
            for file, n in files:
                slices = [next(results) for _ in range(n)]
                remaining -= n
                failed = next((message for kind, message in slices if kind == "unreadable"), None)
                if failed is not None:  # changed since it verified: the rest of the coffre is unread
                    self.run.problems.append(Problem(str(file), "unreadable", failed))
                    self.run.not_checked.update(trail.not_checked)
                    for _ in range(remaining):
                        next(results)
                    break
                for _kind, events in slices:
                    for label, outcome in events:
                        self.outcome(label, outcome, trail)
            else:
                self.finish(f"{source} (end)", trail)


def _event_files(name: str) -> list[Path]:
    """The files ``coffre.commands.inputs.inputs`` reads for one PATH, in its order."""
    path = Path(name)
    if not path.is_dir():
        return [path]
    return sorted(
        (p for p in path.rglob("*") if p.suffix.lower() in (".xml", ".json") and p.is_file()), key=path_order
    )


def archive_lots(path: Path) -> dict[tuple[str, int], list[tuple[int, Path]]]:
    """The lot files under ``path`` by coffre, each coffre's in lot-number order (checkpoints,
    temporary files and other files left out, as ``coffre verify`` leaves them out)."""
    lots: dict[tuple[str, int], list[tuple[int, Path]]] = {}
    for file in _lot_files(path):
        if file.parent.name == "checkpoints":
            continue
        parsed = parse_lot_name(file.name)
        assert parsed is not None
        lots.setdefault((parsed[0], parsed[1]), []).append((parsed[2], file))
    return {key: sorted(files) for key, files in lots.items()}


def path_order(path: PurePath) -> Any:
    """The sort key of a path that sorts paths as ``sorted(paths)`` does (a tuple of its parts on
    POSIX, case-sensitive as ``PurePosixPath``; the path itself elsewhere), without ``Path.__lt__``'s
    cost (issue 31: sorting 10,000 files twice was 0.3 s of ``coffre audit``'s start)."""
    return path.parts if isinstance(path, PurePosixPath) else path


def _is_lot_file(path: Path, file: Path) -> bool:
    return bool(
        parse_lot_name(file.name)  # the name first: a folder of event files is not stat'ed for it
        and file.is_file()
        and not any(part.startswith(TMP_PREFIX) for part in file.relative_to(path).parts)
    )


def _lot_files(path: Path) -> Iterator[Path]:
    for file in sorted(path.rglob("*.xml"), key=path_order):
        if _is_lot_file(path, file):
            yield file


def is_archive(path: Path) -> bool:
    """A folder holding at least one file named as the vault names lots and checkpoints."""
    return path.is_dir() and any(_is_lot_file(path, file) for file in path.rglob("*.xml"))


def audit_paths(
    paths: Sequence[str],
    certificates: Sequence[Path] = (),
    max_pictures: int = MAX_PICTURES,
    rules: HouseRules = DEFAULT_RULES,
    jobs: int | None = 1,
) -> AuditRun:
    """The audit of every PATH: archives (verified first) and event files or folders; ``jobs`` as
    :class:`Auditor` takes it (the same run whatever it is)."""
    auditor = Auditor(max_pictures, rules, jobs)
    files: list[str] = []
    archives: list[Path] = []
    for name in paths:
        path = Path(name)
        kind = "archive" if is_archive(path) else "folder" if path.is_dir() else "file"
        auditor.run.inputs.append((name, kind))
        if kind == "archive":
            archives.append(path)
        else:
            files.append(name)
    try:
        if files:
            auditor.files(files)
        for archive in sorted(archives):
            auditor.archive(archive, certificates)
    finally:
        auditor.close()
    return auditor.run


def text_lines(run: AuditRun) -> Iterator[str]:
    """One line per finding, per problem, per archive verified, and the summary."""
    for located in run.findings:
        f = located.finding
        where = "".join(
            f" {name} {value}"
            for name, value in (("round", f.round), ("seat", f.seat), ("player", f.player))
            if value is not None
        )
        yield f"{located.source}: IDEvt {located.id_evt} {located.event_type} {f.code}{where}: {f.message}"
    for problem in run.problems:
        yield str(problem)
    for verification in run.verifications:
        verdict = "verified" if verification.ok else "does not verify, not audited"
        yield f"archive {verification.archive}: {verdict}"
    if run.not_checked:
        counts = ", ".join(f"{code} ×{n}" for code, n in sorted(run.not_checked.items()))
        yield f"not checked, context absent (events outside the audited set): {counts}"
    codes = ", ".join(f"{code} ×{count}" for code, count in run.codes.items())
    yield (
        f"{run.events} event(s), {run.hands} hand(s), {len(run.findings)} finding(s)"
        f"{f' ({codes})' if codes else ''}, {len(run.problems)} problem(s)"
    )


def _usage_error(message: str) -> int:
    print(f"coffre audit: {message}", file=sys.stderr)
    return 2


def _html_target_error(target: Path) -> str | None:
    """Why the report cannot be written to ``target`` (checked before the audit runs), or None."""
    if target.is_dir():
        return f"--html {target} is a folder"
    parent = target.parent
    if not parent.is_dir():
        return f"--html {target}: no folder {parent}"
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"--html {target}: not writable"
    return None


def house_rules() -> HouseRules:
    """The operator's rules the hand audit needs: ``COFFRE_AUDIT_FIXED_LIMIT_BETS`` (README), read
    through the settings only when it is set (``coffre audit`` needs no other setting, and loading
    them costs its start-up some 60 ms)."""
    if "COFFRE_AUDIT_FIXED_LIMIT_BETS" not in os.environ:
        return DEFAULT_RULES
    from coffre.config import load_settings

    return HouseRules(fixed_limit_bets=load_settings().audit_fixed_limit_bets or None)


def run(args: argparse.Namespace) -> int:
    """``coffre audit``'s arguments checked (exit 2), the audit run, its output written."""
    for name in args.paths:
        if not Path(name).exists():
            return _usage_error(f"no file or folder {name}")
    for name in args.cert:
        if not Path(name).is_file():
            return _usage_error(f"no file {name}")
    max_pictures = MAX_PICTURES if args.max_pictures is None else args.max_pictures
    if max_pictures < 0:
        return _usage_error("--max-pictures must be 0 or more")
    jobs = getattr(args, "jobs", None)
    if jobs is not None and jobs < 1:
        return _usage_error("--jobs must be 1 or more")
    html = Path(args.html) if args.html else None
    if html is not None and (why := _html_target_error(html)):
        return _usage_error(why)
    archives = [name for name in args.paths if is_archive(Path(name))]
    if archives and not args.cert:
        return _usage_error(
            f"{archives[0]} is an archive: name the certificate(s) you trust with --cert PEM, "
            "it is verified before it is audited"
        )
    # without --html no hand is pictured: the run need not keep any (nor its workers send them whole)
    kept = max_pictures if html is not None else 0
    run = audit_paths(args.paths, [Path(c) for c in args.cert], kept, house_rules(), jobs)
    if args.json:
        print(json.dumps(run.as_json(), ensure_ascii=False))
    else:
        for line in text_lines(run):
            print(line)
    if html is not None:
        from .report import render_report

        try:
            html.write_text(render_report(run, max_pictures=max_pictures), encoding="utf-8")
        except OSError as exc:
            return _usage_error(f"--html {html}: {exc}")
        print(f"report: {html}", file=sys.stderr)
    return 0 if run.clean else 1
