"""``coffre signals PATH…``: collusion and robot signals from event files, folders or archives.

An archive is verified first, exactly as ``coffre audit`` verifies it, and refused when it does not
verify: its events are no evidence. Event files are read in sorted path order. ``--state FILE``
keeps the running counters between runs (:class:`~coffre.domain.signals.state.SignalState`): a run
feeds only the events past the state's cursor (per coffre, the last IDEvt fed), so a new lot adds to
a year's statistics instead of recomputing them.

Signals are reasons to look, not findings (docs/signals.md). Exit codes: 0 when no signal crossed
its threshold and every input was read, 1 when one did or an input was refused, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coffre.adapters import signal_workers
from coffre.adapters.signal_workers import Outcome, event_outcome, lot_task
from coffre.domain.signals.scores import SOURCES, Subject, Thresholds, evaluate
from coffre.domain.signals.state import Scope, SignalState

from .audit.run import Problem, Verification, archive_lots, available_cpus, is_archive

NEAR_MISSES = 20
"""Subjects below every threshold listed after the alerts (the strongest), so that a reader sees
how far the honest population is from them."""


@dataclass
class SignalsRun:
    state: SignalState
    thresholds: Thresholds
    scope: Scope
    inputs: list[tuple[str, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    verifications: list[Verification] = field(default_factory=list)
    fed: int = 0
    """Events fed by this run (the state may hold more, from earlier runs)."""
    subjects: list[Subject] = field(default_factory=list)

    @property
    def alerts(self) -> list[Subject]:
        return [s for s in self.subjects if s.crossed]

    def as_json(self) -> dict[str, Any]:
        near = [s for s in self.subjects if not s.crossed][:NEAR_MISSES]
        return {
            "inputs": [{"path": p, "kind": k} for p, k in self.inputs],
            "scope": self.scope.as_json(),
            "events": self.state.events,
            "hands": self.state.hands,
            "fed_by_this_run": self.fed,
            "players": len(self.state.players),
            "pairs": len(self.state.pairs),
            "thresholds": asdict(self.thresholds),
            "judging": asdict(self.state.judging),
            "sources": SOURCES,
            "alerts": [s.as_json() for s in self.alerts],
            "near_misses": [s.as_json() for s in near],
            "problems": [p.as_dict() for p in self.problems],
            "verifications": [v.as_dict() for v in self.verifications],
            "note": "a signal is a reason to look, not a finding of the rules (docs/signals.md)",
        }


def _archive_outcomes(path: Path, run: SignalsRun, jobs: int) -> Iterator[Outcome]:
    """Each event of the archive past the state's cursor, in IDEvt order per coffre, as an outcome
    (:mod:`coffre.adapters.signal_workers`), computed here or by ``jobs`` workers."""
    tasks = []
    for (oper, coffre), files in sorted(archive_lots(path).items()):
        cursor = run.state.cursor.get(f"{oper}/{coffre}", 0)
        tasks += [(str(file), f"{path}@{oper}/{coffre}", cursor, run.scope) for _number, file in files]
    if jobs <= 1:
        for task in tasks:
            yield from lot_task(*task)
        return
    with signal_workers.pool(jobs) as executor:
        pending: deque[Any] = deque()
        queued = iter(tasks)
        for task in itertools.islice(queued, 4 * jobs):
            pending.append(executor.submit(lot_task, *task))
        while pending:
            outcomes = pending.popleft().result()
            for task in itertools.islice(queued, 1):
                pending.append(executor.submit(lot_task, *task))
            yield from outcomes


def _record(run: SignalsRun, outcome: Outcome) -> bool:
    """One outcome fed to the state or recorded as a problem; False: its lot could not be read (the
    rest of its coffre is not read either)."""
    kind, label = outcome[0], outcome[1]
    if kind == "facts":
        if not run.state.seen(outcome[2]):  # event files read again with --state: fed once
            run.state.add_event(outcome[3], outcome[2])
            run.fed += 1
    elif kind == "skip":
        if not run.state.seen(outcome[2]):
            run.state.add_event(None, outcome[2])  # out of scope: passed over, the cursor moves on
    elif kind == "rejected":
        run.problems.append(Problem(label, "rejected", outcome[2], outcome[3]))
    elif kind == "error":
        run.problems.append(Problem(label, "error", outcome[2]))
    else:
        run.problems.append(Problem(label, "unreadable", outcome[2]))
        return False
    return True


def feed(run: SignalsRun, source: str, raw: bytes) -> None:
    """One event's bytes fed in this process (event files)."""
    _record(run, event_outcome(source, raw, run.scope, 0, equities=False))


def signals_paths(
    paths: Sequence[str],
    certificates: Sequence[Path] = (),
    *,
    state: SignalState | None = None,
    thresholds: Thresholds | None = None,
    scope: Scope | None = None,
    jobs: int = 1,
) -> SignalsRun:
    """Every PATH fed to ``state`` (a new one by default), archives verified first, then the signals;
    an archive's lots read by ``jobs`` worker processes (the result is the same whatever it is)."""
    from coffre.commands.inputs import inputs
    from coffre.commands.verify import verify_archive

    run = SignalsRun(state or SignalState(), thresholds or Thresholds(), scope or Scope())
    files: list[str] = []
    archives: list[Path] = []
    for name in paths:
        path = Path(name)
        kind = "archive" if is_archive(path) else "folder" if path.is_dir() else "file"
        run.inputs.append((name, kind))
        (archives.append(path) if kind == "archive" else files.append(name))  # type: ignore[func-returns-value]
    for name in sorted(files):
        try:
            for label, raw in inputs([name]):
                feed(run, label, raw)
        except OSError as exc:
            run.problems.append(Problem(name, "unreadable", str(exc)))
    for archive in sorted(archives):
        report = verify_archive(archive, certificates)
        run.verifications.append(Verification(str(archive), report.ok, tuple(report.lines())))
        if not report.ok:
            failed = report.problems + [str(f) for coffre in report.coffres for f in coffre.failures]
            run.problems.append(
                Problem(
                    str(archive),
                    "unverified",
                    "the archive does not verify, its events are not read: "
                    + "; ".join((failed or ["no lot found"])[:5]),
                )
            )
            continue
        unreadable: set[str] = set()
        for outcome in _archive_outcomes(archive, run, jobs):
            coffre = outcome[1].rsplit("#", 1)[0]
            if coffre not in unreadable and not _record(run, outcome):
                unreadable.add(coffre)
    run.subjects = evaluate(run.state, run.thresholds)
    return run


def text_lines(run: SignalsRun) -> Iterator[str]:
    for rank, subject in enumerate(run.alerts, start=1):
        yield f"{rank}. {subject.kind} {' & '.join(subject.players)}: {subject.crossed} signal(s) crossed"
        for s in subject.signals:
            if s.crossed:
                refs = ", ".join(f"{o}/{c}#{e}" for _, (o, c, e) in s.evidence[:5])
                comparison = "≤" if s.below else "≥"
                yield f"   {s.name} {s.score:.3g} {comparison} {s.threshold:g}: {s.detail}" + (
                    f" [{refs}]" if refs else ""
                )
    for problem in run.problems:
        yield str(problem)
    for verification in run.verifications:
        yield f"archive {verification.archive}: {'verified' if verification.ok else 'does not verify, not read'}"
    yield (
        f"{run.state.events} event(s) ({run.fed} read by this run), {run.state.hands} hand(s), "
        f"{len(run.state.players)} player(s), {len(run.alerts)} alert(s), {len(run.problems)} problem(s); "
        "a signal is a reason to look, not a finding"
    )


def _date(text: str, option: str) -> int:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{option} {text!r}: not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM, UTC)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def _usage_error(message: str) -> int:
    print(f"coffre signals: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    for name in args.paths:
        if not Path(name).exists():
            return _usage_error(f"no file or folder {name}")
    for name in args.cert:
        if not Path(name).is_file():
            return _usage_error(f"no file {name}")
    try:
        thresholds = Thresholds().with_values(dict(_pair(item) for item in args.threshold))
        scope = Scope(
            tuple(sorted(set(args.oper))),
            _date(args.since, "--since") if args.since else None,
            _date(args.until, "--until") if args.until else None,
        )
    except ValueError as exc:
        return _usage_error(str(exc))
    if scope.since is not None and scope.until is not None and scope.until <= scope.since:
        return _usage_error("--until must be after --since")
    archives = [name for name in args.paths if is_archive(Path(name))]
    if archives and not args.cert:
        return _usage_error(
            f"{archives[0]} is an archive: name the certificate(s) you trust with --cert PEM, "
            "it is verified before it is read"
        )
    jobs = args.jobs if args.jobs is not None else available_cpus()
    if jobs < 1:
        return _usage_error("--jobs must be 1 or more")
    html = Path(args.html) if args.html else None
    if html is not None and not html.parent.is_dir():
        return _usage_error(f"--html {html}: no folder {html.parent}")
    console_url: str | None = None
    if args.console:
        from .signals_report import console_base

        if html is None:
            return _usage_error("--console links the HTML report's evidence: give --html FILE too")
        try:
            console_url = console_base(args.console)
        except ValueError as exc:
            return _usage_error(str(exc))
    state: SignalState | None = None
    state_file = Path(args.state) if args.state else None
    if state_file is not None and state_file.exists():
        try:
            state = SignalState.load(state_file)
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
            return _usage_error(f"--state {state_file}: unreadable ({exc}); remove it to start again")
        if state.scope and state.scope != scope.as_json():
            return _usage_error(
                f"--state {state_file} was fed with another scope ({state.scope}): use the same "
                "--oper/--since/--until, or another state file"
            )
    if state is None:
        state = SignalState()
    state.scope = scope.as_json()
    result = signals_paths(
        args.paths, [Path(c) for c in args.cert], state=state, thresholds=thresholds, scope=scope, jobs=jobs
    )
    if state_file is not None:
        try:
            state.save(state_file)
        except OSError as exc:
            return _usage_error(f"--state {state_file}: {exc}")
    if args.json:
        print(json.dumps(result.as_json(), ensure_ascii=False))
    else:
        for line in text_lines(result):
            print(line)
    if html is not None:
        from .signals_report import render_report

        try:
            html.write_text(render_report(result.as_json(), console_url), encoding="utf-8")
        except OSError as exc:
            return _usage_error(f"--html {html}: {exc}")
        print(f"report: {html}", file=sys.stderr)
    return 1 if result.alerts or result.problems else 0


def _pair(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep:
        raise ValueError(f"--threshold {item!r}: write NAME=VALUE")
    return name.strip(), value.strip()
