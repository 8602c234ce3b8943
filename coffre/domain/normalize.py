"""Normalization: one operator input (XML or JSON bytes) to one validated catalogue event.

Every input ends as an :class:`~coffre.domain.catalogue.base.Event` or as
:class:`~coffre.domain.errors.Rejected` listing every problem found with its reason code
and path. Nothing else escapes: an unexpected failure inside is itself reported as a
rejection, so a service calling this can never crash on input.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from lxml import etree
from pydantic import ValidationError

from .catalogue import EVENT_ALIASES, EVENT_TYPES, Event
from .codec import DEFAULT_LIMITS, Limits, at_most_elements, finish_xml, parse_json, read_xml, sniff
from .errors import Problem, ReasonCode, Rejected
from .limits import MAX_ATTRIBUTES, MAX_DEPTH
from .xmlmodel import element_to_data, element_to_data_fast, loc_to_path, shape

log = logging.getLogger(__name__)

_PYDANTIC_CODES = {
    "missing": ReasonCode.MISSING_ELEMENT,
    "extra_forbidden": ReasonCode.UNEXPECTED_ELEMENT,
    "too_short": ReasonCode.TOO_FEW_OCCURRENCES,
    "too_long": ReasonCode.TOO_MANY_OCCURRENCES,
    "union_tag_invalid": ReasonCode.UNEXPECTED_ELEMENT,
    "union_tag_not_found": ReasonCode.UNEXPECTED_ELEMENT,
    "bool_parsing": ReasonCode.INVALID_BOOLEAN,
    "bool_type": ReasonCode.INVALID_BOOLEAN,
}


def normalize(
    raw: bytes, *, id_evt: int | None = None, limits: Limits = DEFAULT_LIMITS, fast: bool = True
) -> Event:
    """The normalized event for ``raw``, or :class:`Rejected`.

    ``id_evt``, when given, replaces whatever IDEvt the input carried (ingest assigns it);
    otherwise the input's IDEvt is kept and required. ``fast=False`` takes the full path even for
    a valid XML input (the reference :func:`_fast` is held to by the tests; same result).
    """
    try:
        kind = sniff(raw)
        if kind == "xml":
            root = read_xml(raw, limits)
            event = _fast(root, raw, id_evt) if fast else None
            if event is not None:
                return event
            finish_xml(root)
            tag = root.tag
            model = _event_type(tag)
            problems: list[Problem] = []
            data = element_to_data(model, root, f"/{tag}", problems)
            return _validate(tag, model, data, problems, id_evt)
        tag, model, data = _read(raw, kind, limits)
        return _validate(tag, model, data, [], id_evt)
    except Rejected:
        raise
    except Exception as exc:  # a defect, never the input's fault alone: refuse it visibly
        log.exception("normalization failed unexpectedly")
        raise internal_error(exc) from exc


def internal_error(exc: BaseException, event_type: str | None = None) -> Rejected:
    """The refusal of an input that met a defect of coffre's (INTERNAL_ERROR): the input is kept,
    on the rejections topic, rather than crash the service that read it."""
    return Rejected(
        [Problem(ReasonCode.INTERNAL_ERROR, "/", f"internal error: {type(exc).__name__}: {exc}")], event_type
    )


def _read(raw: bytes, kind: str, limits: Limits) -> tuple[str, type[Event], dict[str, Any]]:
    """The event's tag, model and data of a JSON input (or the refusal of anything else)."""
    if kind == "empty":
        raise Rejected([Problem(ReasonCode.EMPTY_INPUT, "/", "the message is empty")])
    if kind == "json":
        value = parse_json(raw, limits)
        if not isinstance(value, dict) or len(value) != 1:
            raise Rejected(
                [
                    Problem(
                        ReasonCode.UNSUPPORTED_FORMAT,
                        "/",
                        'a JSON event is one object with one key, the event type: {"POJEU": {...}}',
                    )
                ]
            )
        ((tag, data),) = value.items()
        model = _event_type(tag)
        if not isinstance(data, dict):
            raise Rejected(
                [Problem(ReasonCode.INVALID_VALUE, f"/{tag}", "the event must be a JSON object")], tag
            )
        return tag, model, data
    raise Rejected([Problem(ReasonCode.UNSUPPORTED_FORMAT, "/", "neither XML nor JSON")])


def _event_type(tag: Any) -> type[Event]:
    model = EVENT_TYPES.get(EVENT_ALIASES.get(tag, tag)) if isinstance(tag, str) else None
    if model is None:
        raise Rejected(
            [Problem(ReasonCode.UNKNOWN_EVENT, f"/{tag}", f"'{tag}' is not an event of the schema set")]
        )
    return model


def _fast(root: etree._Element, raw: bytes, id_evt: int | None) -> Event | None:
    """The event of a plainly valid XML input, read by
    :func:`~coffre.domain.xmlmodel.element_to_data_fast` (no paths written, repeated members
    remembered), or None for any other input: the full path then reads it again, limits first,
    and names every problem, so rejections are exactly what they were.

    coffre's structural limits (:func:`~coffre.domain.codec.finish_xml`) are not checked here but
    proved: the fast walk reads every element and lets no element or attribute through that the
    model has no field for, so a tree it reads whole is no deeper and has no more attributes per
    element than the model's :func:`~coffre.domain.xmlmodel.shape`, checked to be within the
    limits; the count of elements is bounded by the ``<`` of the input. Any exception means None
    (a defect met on the way too: the full path meets it again and reports it as it always did)."""
    tag = root.tag
    model = EVENT_TYPES.get(EVENT_ALIASES.get(tag, tag)) if isinstance(tag, str) else None
    if model is None or not _within_limits(model) or not at_most_elements(root, raw):
        return None
    try:
        data = element_to_data_fast(model, root)
        if id_evt is not None:
            data["IDEvt"] = id_evt
        return model.model_validate(data)
    except Exception:
        return None


@cache
def _within_limits(model: type[Event]) -> bool:
    """Whether every tree :func:`~coffre.domain.xmlmodel.element_to_data_fast` reads whole for
    ``model`` keeps coffre's depth and attribute limits."""
    depth, attributes = shape(model)
    return depth <= MAX_DEPTH and attributes <= MAX_ATTRIBUTES


def _validate(
    tag: str, model: type[Event], data: dict[str, Any], problems: list[Problem], id_evt: int | None
) -> Event:
    if id_evt is not None:
        data = {**data, "IDEvt": id_evt}
    try:
        event = model.model_validate(data)
    except ValidationError as exc:
        problems = problems + [_problem(model, tag, error, data) for error in exc.errors(include_url=False)]
        raise Rejected(problems, tag) from None
    if problems:
        raise Rejected(problems, tag)
    return event


def _problem(model: type[Event], tag: str, error: Any, data: dict[str, Any]) -> Problem:
    kind = error["type"]
    code = (
        ReasonCode(kind)
        if kind in ReasonCode.__members__
        else _PYDANTIC_CODES.get(kind, ReasonCode.INVALID_VALUE)
    )
    path = loc_to_path(model, tag, tuple(error["loc"]), data)
    extra = (error.get("ctx") or {}).get("path")
    if extra:
        path = f"{path}/{extra}"
    return Problem(code, path, error["msg"])
