"""The rules table: every rule of the five texts the events can show, with the finding codes that
check it, read from ``rules.md`` beside this module (package data; ``docs/rules.md`` is a link to it).

One file for people and for the program: the regulator's console reads these rows at run time (its
``/console/rules`` page, and each finding's sentence naming the rule it breaks), and
``tests/test_rules_doc.py`` holds them against the registered codes and the tests they cite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

HEADER = ("id", "source", "rule", "what coffre checks", "finding codes", "known answer")
"""The header of a rules table; a table with another header (the texts, say) is not read."""
CODE = re.compile(r"`([A-Z][A-Z0-9_]+)`")
CITATION = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[([^\]]+)\])?`")
SAME = "(same)"
"""A rule cell that repeats the previous row's rule (one requirement split into rules checked apart)."""
NO_SOURCE = "—"


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    source: str
    """The text and its article, e.g. ``décret art. 1 III 1°``; ``—`` for a code that checks none."""
    rule: str
    """As written: the rule quoted in French from the text (« … »), or ``(same)``."""
    checks: str
    """What coffre checks, in English."""
    codes: tuple[str, ...]
    known_answer: str
    section: str
    """The heading of the table the row is in (``1.1 The décret (2016-1326): the game``)."""
    quote: str
    """The rule itself: ``rule``, or for a ``(same)`` row the rule of the row it repeats."""

    @property
    def citations(self) -> list[tuple[str, str, str | None]]:
        """The tests the known answer cites: (path, name, parameter or None)."""
        return [(path, name, param or None) for path, name, param in CITATION.findall(self.known_answer)]

    @property
    def has_source(self) -> bool:
        return self.source not in ("", NO_SOURCE)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse(text: str) -> tuple[Row, ...]:
    """The rows of every table of ``text`` whose header is :data:`HEADER`, in order."""
    out: list[Row] = []
    lines = text.splitlines()
    section = ""
    i = 0
    while i < len(lines):
        if lines[i].startswith("#"):
            section = lines[i].lstrip("#").strip()
        if lines[i].startswith("|") and tuple(_cells(lines[i])) == HEADER:
            i += 2  # the header and its |---| line
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                if len(cells) != len(HEADER):
                    raise ValueError(f"rules.md: a row of {len(cells)} cells, not {len(HEADER)}: {lines[i]}")
                ident, source, rule, checks, codes, answer = cells
                quote = out[-1].quote if rule == SAME and out else rule
                out.append(
                    Row(ident, source, rule, checks, tuple(CODE.findall(codes)), answer, section, quote)
                )
                i += 1
        i += 1
    return tuple(out)


def text() -> str:
    """rules.md as shipped (package data: a wheel has no docs/ folder)."""
    return files(__package__).joinpath("rules.md").read_text(encoding="utf-8")


@cache
def rows() -> tuple[Row, ...]:
    return parse(text())


@cache
def rows_by_code() -> dict[str, tuple[Row, ...]]:
    """Each finding code -> the rows that name it, in the table's order (a code may check several)."""
    found: dict[str, list[Row]] = {}
    for row in rows():
        for code in row.codes:
            found.setdefault(code, []).append(row)
    return {code: tuple(listed) for code, listed in found.items()}
