"""docs/hand-audit.md lists every code of the hand audit, with its family and meaning as registered."""

from __future__ import annotations

import re
from pathlib import Path

import coffre.domain.audit.hand  # noqa: F401  (registers the hand codes)
from coffre.domain.audit.findings import CODES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "hand-audit.md").read_text(encoding="utf-8")
HAND_FAMILIES = ("cards", "order", "money", "showdown")


def test_the_table_of_codes_is_the_registered_one():
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\w+) \|", DOC, re.MULTILINE)
    registered = {code: family for code, (family, _) in CODES.items() if family in HAND_FAMILIES}
    assert dict(rows) == registered
    assert len(rows) == len(registered)


def test_it_links_to_the_money_trail():
    assert "(money-trail.md)" in DOC
