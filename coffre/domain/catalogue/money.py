"""MO (virtual currency): schema MO.xsd, over ``include/Common.xsd``.

One event, ``TYPEMONNAIE``, declares a virtual currency the operator's games use; its
purchases are CJ's ``ACHATMONNAIE``.
"""

from __future__ import annotations

from typing import ClassVar

from ..types import NonNegDec, Text
from .common import AnonymousHeader, String64, String256


class TYPEMONNAIE(AnonymousHeader):
    """Déclaration d'un type de monnaie virtuelle: son identifiant, son nom, sa valeur."""

    family: ClassVar[str] = "MO"
    xml_tag: ClassVar[str] = "TYPEMONNAIE"
    IDMonnaie: String64
    Nom: String256
    Desc: Text
    Valeur: NonNegDec | None = None
    Info: Text | None = None
