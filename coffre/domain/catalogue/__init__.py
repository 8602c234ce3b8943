"""The event catalogue: one pydantic model per root event of the DET schema set.

Importing this package imports every family, which registers its events in
:data:`EVENT_TYPES` (root element name -> model).
"""

from . import betting, cj, fantasy, lottery, money, pdv, poker  # noqa: F401  (each registers its events)
from .base import EVENT_ALIASES, EVENT_TYPES, Event

FAMILIES = ("PO", "CJ", "PASP", "PAHI", "LOTI", "LOJI", "FA", "MO", "PDV")
"""The root schemas of the set, one per family (``PO`` -> ``PO.xsd``)."""


def families() -> dict[str, list[str]]:
    """Family -> its event types, in declaration order."""
    out: dict[str, list[str]] = {}
    for tag, model in EVENT_TYPES.items():
        out.setdefault(model.family, []).append(tag)
    return out


__all__ = ["EVENT_ALIASES", "EVENT_TYPES", "FAMILIES", "Event", "families"]
