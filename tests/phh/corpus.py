"""The PHH corpus in tests/fixtures/phh: one xz-compressed ``.phhs`` file per source.

A ``.phhs`` file (https://phh.readthedocs.io) is a sequence of PHH hands, each under a ``[name]``
header; each hand's body is TOML. The names here are the dataset's own paths (``pluribus/100/0``,
``wsop/2023/43/5/1``), which is how a hand is named in the tests and the triage.
"""

from __future__ import annotations

import lzma
import re
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "phh"

_HEADER = re.compile(r"^\[([^\]\n]+)\]\s*$", re.MULTILINE)


def sources() -> list[Path]:
    return sorted(CORPUS.glob("*.phhs.xz"))


def parse_phhs(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, hand) for each hand of a ``.phhs`` text. Decimal amounts are read as ``Decimal``
    (a float would turn 0.1 into 0.1000000000000000055…)."""
    parts = _HEADER.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        yield name, tomllib.loads(body, parse_float=Decimal)


def hands(source: Path | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every hand of one source, or of the whole corpus."""
    for path in [source] if source else sources():
        yield from parse_phhs(lzma.decompress(path.read_bytes()).decode("utf-8"))
