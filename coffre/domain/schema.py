"""Validation against the regulator's XSD set, when a copy of it is at hand.

coffre does not ship the schema set: the regulator publishes it. Tests and
``coffre verify --xsd DIR`` point this module at a folder holding the root schemas
(``CJ.xsd``, ``PO.xsd``, …) and their ``include/`` folder.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from lxml import etree

REFERENCE_ENV = "COFFRE_ARJEL_REFERENCE"
"""Environment variable naming the regulator's reference folder (holding ``xsd/`` and ``samples/``)."""


def default_reference_dir() -> Path:
    """``$COFFRE_ARJEL_REFERENCE``, else ``../shared/arjel-reference`` beside the project."""
    env = os.environ.get(REFERENCE_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "arjel-reference"


class SchemaSet:
    """The root schemas of a folder, one per event family (``PO`` -> ``PO.xsd``)."""

    def __init__(self, xsd_dir: Path | str):
        self.xsd_dir = Path(xsd_dir)
        if not (self.xsd_dir / "PO.xsd").is_file():
            raise FileNotFoundError(f"{self.xsd_dir} does not hold the DET root schemas (PO.xsd, CJ.xsd, …)")

    @cache  # noqa: B019 - a SchemaSet lives as long as the process; the cache is the point
    def schema(self, family: str) -> etree.XMLSchema:
        path = self.xsd_dir / f"{family}.xsd"
        return etree.XMLSchema(etree.parse(str(path)))

    def errors(self, family: str, document: bytes | etree._Element) -> list[str]:
        """Schema errors of one event document (empty when it validates)."""
        element = etree.fromstring(document) if isinstance(document, bytes) else document
        schema = self.schema(family)
        if schema.validate(element):
            return []
        return [f"line {e.line}: {e.message}" for e in schema.error_log]
