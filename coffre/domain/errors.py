"""Rejection reason codes: stable, machine-readable, documented in docs/reason-codes.md.

A code never changes meaning once published; new codes may be added. Each problem
also carries the path of the offending element (an XPath from the event's root,
for example ``/POJEU/Jeu/Tour[3]/Draw[2]/Valeur``) and a human message.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .limits import MAX_PROBLEMS, clip


class ReasonCode(StrEnum):
    # -- the envelope: what the bytes are ------------------------------------------
    EMPTY_INPUT = "EMPTY_INPUT"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    DOCUMENT_TOO_LARGE = "DOCUMENT_TOO_LARGE"
    MALFORMED_XML = "MALFORMED_XML"
    MALFORMED_JSON = "MALFORMED_JSON"
    DTD_FORBIDDEN = "DTD_FORBIDDEN"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    UNKNOWN_EVENT = "UNKNOWN_EVENT"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    RESERVED_HEADER = "RESERVED_HEADER"
    # -- structure --------------------------------------------------------------------
    MISSING_ELEMENT = "MISSING_ELEMENT"
    UNEXPECTED_ELEMENT = "UNEXPECTED_ELEMENT"
    UNEXPECTED_ATTRIBUTE = "UNEXPECTED_ATTRIBUTE"
    TOO_FEW_OCCURRENCES = "TOO_FEW_OCCURRENCES"
    TOO_MANY_OCCURRENCES = "TOO_MANY_OCCURRENCES"
    CHOICE_CONFLICT = "CHOICE_CONFLICT"
    INCOMPLETE_GROUP = "INCOMPLETE_GROUP"
    # -- values -----------------------------------------------------------------------
    INVALID_VALUE = "INVALID_VALUE"
    INVALID_INTEGER = "INVALID_INTEGER"
    INVALID_BOOLEAN = "INVALID_BOOLEAN"
    INVALID_DECIMAL = "INVALID_DECIMAL"
    NEGATIVE_AMOUNT = "NEGATIVE_AMOUNT"
    INVALID_DATE = "INVALID_DATE"
    INVALID_OPERATOR_ID = "INVALID_OPERATOR_ID"
    INVALID_HASH = "INVALID_HASH"
    INVALID_IP = "INVALID_IP"
    INVALID_REFERENCE = "INVALID_REFERENCE"
    INVALID_COUNTRY = "INVALID_COUNTRY"
    INVALID_FORMAT_CODE = "INVALID_FORMAT_CODE"
    TOO_LONG = "TOO_LONG"
    NOT_EMPTY = "NOT_EMPTY"
    # -- poker (annex 1.3.6) -------------------------------------------------------------
    CARD_OUT_OF_RANGE = "CARD_OUT_OF_RANGE"
    UNKNOWN_REGLE = "UNKNOWN_REGLE"
    UNKNOWN_BET_TYPE = "UNKNOWN_BET_TYPE"
    TOO_FEW_PARTICIPANTS = "TOO_FEW_PARTICIPANTS"
    DUPLICATE_TOUR_NAME = "DUPLICATE_TOUR_NAME"
    MISSING_SEAT = "MISSING_SEAT"


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason why an input was refused. Path and message are cut to a bound: both may
    quote the input (an element's name), which must not make a rejection unbounded."""

    code: ReasonCode
    path: str
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", clip(self.path))
        object.__setattr__(self, "message", clip(self.message))

    def as_dict(self) -> dict[str, str]:
        return {"code": str(self.code), "path": self.path, "message": self.message}


class Rejected(Exception):
    """An input that cannot be normalized. Carries every problem found, not just the first, up
    to :data:`~coffre.domain.limits.MAX_PROBLEMS`; ``omitted`` counts the ones beyond."""

    def __init__(
        self,
        problems: list[Problem] | tuple[Problem, ...],
        event_type: str | None = None,
        *,
        omitted: int = 0,
    ):
        self.problems = tuple(problems[:MAX_PROBLEMS])
        self.omitted = omitted + max(0, len(problems) - MAX_PROBLEMS)
        self.event_type = event_type
        more = f"; and {self.omitted} more" if self.omitted else ""
        super().__init__("; ".join(f"{p.code} at {p.path}: {p.message}" for p in self.problems) + more)

    @property
    def codes(self) -> list[str]:
        return [str(p.code) for p in self.problems]

    def as_dict(self) -> dict[str, object]:
        return {
            "event_type": self.event_type,
            "problems": [p.as_dict() for p in self.problems],
            "problems_omitted": self.omitted,
        }
