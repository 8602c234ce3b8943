"""The root-event base class and the registry of every event type of the schema set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

from ..errors import ReasonCode
from ..types import fail
from ..xmlmodel import XmlModel

EVENT_TYPES: dict[str, type[Event]] = {}
"""Root element name -> model, filled as the family modules are imported."""

EVENT_ALIASES: dict[str, str] = {}
"""Other root names the regulator's texts use for an event -> the schema's name."""


class Event(XmlModel):
    """A root event. Every family names the header fields the same way (IDOper, IDCoffre,
    DateEvt, IDEvt) but orders them differently, so each family declares its own header."""

    family: ClassVar[str] = ""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "xml_tag" in cls.__dict__ and cls.xml_tag:
            if cls.xml_tag in EVENT_TYPES:
                raise TypeError(f"event type {cls.xml_tag} declared twice")
            EVENT_TYPES[cls.xml_tag] = cls

    @property
    def id_oper(self) -> str:
        return self.IDOper  # type: ignore[attr-defined, no-any-return]

    @property
    def id_coffre(self) -> int:
        return self.IDCoffre  # type: ignore[attr-defined, no-any-return]

    @property
    def id_evt(self) -> int:
        return self.IDEvt  # type: ignore[attr-defined, no-any-return]

    @property
    def supervised(self) -> bool:
        """Sent by the operator without the player's acknowledgement (no acquittal)."""
        return bool(getattr(self, "Supervision", False))

    def with_id_evt(self, id_evt: int) -> Self:
        """The same event under the IDEvt that ingest assigned."""
        if id_evt < 0:
            raise ValueError("IDEvt is a non-negative integer")
        return self.model_copy(update={"IDEvt": id_evt})


def complete_groups(model: XmlModel, groups: Sequence[Sequence[str]]) -> int:
    """How many of ``groups`` are present, each being all-or-nothing (an optional
    xs:sequence of elements, such as SoldeAvant/SoldeMouvement/SoldeApres); a partial
    group is refused with INCOMPLETE_GROUP at its first missing element."""
    present_groups = 0
    for group in groups:
        present = [name for name in group if getattr(model, name) is not None]
        if present and len(present) < len(group):
            missing = next(name for name in group if getattr(model, name) is None)
            raise fail(
                ReasonCode.INCOMPLETE_GROUP,
                "{missing} is required with {present}",
                missing=missing,
                present=", ".join(present),
                path=missing,
            )
        present_groups += bool(present)
    return present_groups
