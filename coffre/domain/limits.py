"""coffre's own limits, where the regulator's schema set sets none: one place for all of them.

The schema set types ``IDCoffre`` and ``IDEvt`` as ``xs:nonNegativeInteger`` and amounts as
``xs:decimal``, both unbounded, and most text as ``xs:string`` with no length. An unbounded
value is a way to jam a pipeline (a 21-digit IDCoffre no store can hold, an amount ``1E+999999999``
whose decimal form takes gigabytes), so coffre refuses what lies beyond these bounds, with a
reason code, before any of it is stored or published. Each bound is far above anything an
operator sends; docs/input-contract.md lists them beside the schema's own.
"""

from __future__ import annotations

import re

# -- identifiers and integers --------------------------------------------------------------------

MAX_ID_DIGITS = 18
"""``IDCoffre`` and ``IDEvt``: at most 18 decimal digits (0 .. 10^18 - 1), so that every store
(SQLite INTEGER, a signed 64-bit integer), file name and URL holds them the same way."""
MAX_ID = 10**MAX_ID_DIGITS - 1

ID_COFFRE_PATTERN = rf"0|[1-9][0-9]{{0,{MAX_ID_DIGITS - 1}}}"
"""IDCoffre as written in archive paths, file names and the regulator API: no sign, no leading zero."""
ID_COFFRE_RE = re.compile(ID_COFFRE_PATTERN)

MAX_INTEGER_DIGITS = 18
"""Every other integer of the schema set (seats, ranks, points, counts): at most 18 digits."""

# -- decimals ------------------------------------------------------------------------------------

MAX_DECIMAL_INTEGER_DIGITS = 18
"""Digits before the decimal point of an amount, odds or rate (a quintillion euros)."""
MAX_DECIMAL_FRACTION_DIGITS = 10
"""Digits after the decimal point. 18 + 10 = 28, the precision of Python's default decimal
context, so sums of amounts stay exact."""

# -- text and structure ----------------------------------------------------------------------------

MAX_TEXT_CHARS = 4096
"""An ``xs:string`` element or attribute the schema gives no length (``Info``, ``Nom``…)."""
MAX_ELEMENTS = 20_000
"""Elements in one event (a long poker hand holds a few hundred)."""
MAX_ATTRIBUTES = 16
"""Attributes on one element (the schema set's elements carry at most four)."""
MAX_DEPTH = 32
"""Nesting of elements or JSON objects and lists in one event (the schema set's deepest is 6)."""

# -- what travels with an input --------------------------------------------------------------------

MAX_HEADER_BYTES = 256
"""The ``correlation-id`` and ``source-id`` headers: the platform's ids, carried to the acquittal."""
MAX_PROBLEMS = 100
"""Problems listed in one rejection; beyond, only their number is given."""
MAX_PROBLEM_TEXT = 512
"""Characters of a problem's path or message; a longer one is cut and marked with an ellipsis."""
INPUT_RECORD_HEADROOM = 64 * 1024
"""What ``<prefix>events.in`` takes beyond ``COFFRE_MAX_EVENT_BYTES`` per record: its key, headers and
Kafka's framing, so that every input ingest would read can be published there whole (beyond, the
broker refuses it to the platform, which hears so at once)."""


def clip(text: str, limit: int = MAX_PROBLEM_TEXT) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
