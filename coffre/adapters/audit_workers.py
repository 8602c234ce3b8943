"""``coffre audit --jobs N``: the work of each event that needs no other event, in worker processes.

A worker reads its share of the inputs (a chunk of event files, or part of a lot), normalizes each
event and runs its own checks (``check_event``) and its hand's (``audit_hand``, judged by the
operator's :class:`~coffre.domain.audit.house.HouseRules`): :func:`coffre.domain.audit.events.audit_event`
without the money trail. The main process feeds the money trail in exactly the order the serial run
feeds it (coffre/commands/audit/run.py), so the output is the serial run's, byte for byte.

What crosses the process boundary is one ``bytes`` per task, pickled here with a reducer that
rebuilds pydantic models without their ``__setstate__`` (bench/README.md, issue 20: unpickling a
hand costs the main process some 250 µs this way against 450 to 600 µs with pydantic's own). A hand
the main process only feeds to the money trail crosses it as :func:`trail_view` makes it, without
the actions of its later rounds (issue 31: half the models to pickle and unpickle); the whole
event crosses it only when the main process may keep it (``coffre audit``'s pictures).

Start method: ``fork`` when the process runs no other thread (``coffre audit`` runs none: the
workers inherit the imported audit and need no start-up of their own; the executor launches every
worker before it starts its own management thread), ``forkserver`` otherwise (forking a process
with threads may copy a lock another thread holds).
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import pickle
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.house import DEFAULT_RULES, HouseRules
from coffre.domain.audit.single import check_event
from coffre.domain.catalogue.base import Event
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.codec import split_documents
from coffre.domain.errors import Rejected
from coffre.domain.facets import event_facets
from coffre.domain.lot import LotFormatError, parse_document, read_lot
from coffre.domain.normalize import normalize

START_METHOD: str | None = None
"""Forces the start method (tests); None: ``fork`` without other threads, else ``forkserver``."""

_rules: HouseRules = DEFAULT_RULES

# One event's outcome: ("ok", event, findings) | ("rejected", message, codes) | ("error", message);
# events_task's "ok" has a fourth item, the event's facets, and a fifth, what the signals read of it
Outcome = tuple[Any, ...]
# One event file's: ("unreadable", message) | ("events", [(label, outcome), ...])
FileOutcome = tuple[str, Any]


def start_method() -> str:
    if START_METHOD is not None:
        return START_METHOD
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def pool(jobs: int, rules: HouseRules) -> Executor:
    """``jobs`` worker processes, each given the operator's ``rules``."""
    context = multiprocessing.get_context(start_method())
    # what is alive now lives as long as the run: the collector need not walk it again, in this
    # process nor in a forked worker (where walking it would also copy its pages); the caller
    # unfreezes it when the pool is shut down
    gc.freeze()
    return ProcessPoolExecutor(jobs, mp_context=context, initializer=_init, initargs=(rules,))


def _init(rules: HouseRules) -> None:
    global _rules
    _rules = rules


def _replaced(model: BaseModel, **changes: Any) -> Any:
    """A shallow copy of ``model`` with ``changes`` to its fields, not validated again (as
    ``model_copy(update=...)`` without its cost)."""
    copy = object.__new__(type(model))
    object.__setattr__(copy, "__dict__", {**model.__dict__, **changes})
    object.__setattr__(copy, "__pydantic_fields_set__", model.__pydantic_fields_set__)
    object.__setattr__(copy, "__pydantic_extra__", model.__pydantic_extra__)
    object.__setattr__(copy, "__pydantic_private__", model.__pydantic_private__)
    return copy


def trail_view(event: Event) -> Event:
    """What the money trail reads of an event (coffre/domain/audit/trail.py, tournament.py): the
    event itself, but for a ``POJEU`` whose rounds after the first two keep their name, Timestamp
    and Total without their actions. The trail reads a hand's participants, every round's
    Timestamp, and the actions of its first two rounds only (the forced bets' round, a stud hand's
    bring-in: ``tournament.forced_bets``); tests/test_audit_workers.py holds the trail's findings
    and state on views to those on whole events."""
    if not isinstance(event, POJEU) or len(event.Jeu.Tour) <= 2:
        return event
    tours = event.Jeu.Tour
    kept = [*tours[:2], *(_replaced(tour, Action=[]) for tour in tours[2:])]
    return _replaced(event, Jeu=_replaced(event.Jeu, Tour=kept))  # type: ignore[no-any-return]


def outcome(raw: bytes, rules: HouseRules | None = None, *, full: bool = True) -> Outcome:
    """Normalize and audit one event's bytes, the money trail left out (the main process's); the
    event whole, or (not ``full``) only its :func:`trail_view`."""
    try:
        event = normalize(raw)
    except Rejected as exc:
        return ("rejected", "; ".join(p.message for p in exc.problems), tuple(exc.codes))
    try:
        findings = check_event(event)
        if isinstance(event, POJEU):
            findings += audit_hand(event, _rules if rules is None else rules)
    except Exception as exc:  # a defect of a check: reported as the serial run reports it
        return ("error", f"the audit failed: {type(exc).__name__}: {exc}")
    return ("ok", event if full else trail_view(event), findings)


def files_task(files: Sequence[str], full: bool = True) -> bytes:
    """Each file's events (labelled as ``coffre.commands.inputs.inputs`` labels them) and their
    outcomes; ``full``: the events whole (the main process may keep them), else their trail views."""
    out: list[FileOutcome] = []
    for name in files:
        file = Path(name)
        try:
            documents = split_documents(file.read_bytes())
        except OSError as exc:
            out.append(("unreadable", str(exc)))
            continue
        labels = [f"{file}#{i}" if len(documents) > 1 else str(file) for i in range(1, len(documents) + 1)]
        out.append(
            (
                "events",
                [(label, outcome(raw, full=full)) for label, raw in zip(labels, documents, strict=True)],
            )
        )
    return dumps(out)


def events_task(raws: Sequence[bytes]) -> bytes:
    """The outcome of each event's bytes, in order, with its facets and its signals' facts (the
    console's index of a lot's events: it keeps no event, the trail's view is enough)."""
    out: list[Outcome] = []
    for raw in raws:
        done = outcome(raw)
        if done[0] == "ok":
            done = ("ok", trail_view(done[1]), done[2], event_facets(done[1]), signal_facts(done[1]))
        out.append(done)
    return dumps(out)


def signal_facts(event: Event) -> Any:
    """What the collusion and robot signals read of the whole event (issue 33), a hand's equities
    computed here, None for nothing or a defect of that reading (the main process's signals pass
    the event over)."""
    from coffre.domain.signals.state import facts_with_equities

    try:
        return facts_with_equities(event)
    except Exception:
        return None


def lot_task(file: str, source: str, part: int, parts: int, full: bool = True) -> bytes:
    """The ``part``-th of ``parts`` slices of a lot's events: ("unreadable", message) or
    ("events", [(label, outcome), ...]); ``full`` as :func:`files_task` takes it."""
    try:
        lot = read_lot(parse_document(Path(file).read_bytes()))
    except (OSError, LotFormatError) as exc:
        return dumps(("unreadable", str(exc)))
    items = lot.events
    share = items[len(items) * part // parts : len(items) * (part + 1) // parts]
    return dumps(
        ("events", [(f"{source}#{item.id_evt}", outcome(item.canonical, full=full)) for item in share])
    )


# ------------------------------------------------------------------------------------ pickling


def _model(
    cls: type[BaseModel],
    state: dict[str, Any],
    fields_set: set[str],
    extra: Any = None,
    private: Any = None,
    _new: Any = object.__new__,
    _set: Any = object.__setattr__,
) -> BaseModel:
    """A model rebuilt from what :class:`_Pickler` kept of it, without validating it again."""
    obj = _new(cls)
    _set(obj, "__dict__", state)
    _set(obj, "__pydantic_fields_set__", fields_set)
    _set(obj, "__pydantic_extra__", extra)
    _set(obj, "__pydantic_private__", private)
    return obj


_is_model: dict[type, bool] = {}
"""type -> whether it is a pydantic model (``isinstance`` against BaseModel's metaclass is slow)."""


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        model = _is_model.get(kind)
        if model is None:
            model = _is_model[kind] = issubclass(kind, BaseModel)
        if not model:
            return NotImplemented
        extra, private = obj.__pydantic_extra__, obj.__pydantic_private__
        if extra is None and private is None:
            return _model, (kind, obj.__dict__, obj.__pydantic_fields_set__)
        return _model, (kind, obj.__dict__, obj.__pydantic_fields_set__, extra, private)


def dumps(value: Any) -> bytes:
    """``value`` pickled, the garbage collector paused (as in :func:`loads`: the reductions'
    tuples triggered collections that walked the task's events again and again)."""
    buffer = io.BytesIO()
    enabled = gc.isenabled()
    gc.disable()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    finally:
        if enabled:
            gc.enable()
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """``data`` unpickled with the cyclic garbage collector paused: unpickling a hand creates some
    seventy models and their dicts and lists, none in a cycle, and the collections their creation
    triggers more than doubled its cost (370 µs a hand against 160)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(data)
    finally:
        if enabled:
            gc.enable()
