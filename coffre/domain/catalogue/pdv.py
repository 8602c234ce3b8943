"""PDV (points of sale): schema PDV.xsd, over ``include/Common.xsd``.

A point of sale is opened (``OUVPOINTDEVENTE``), its address or size changed
(``MODIFPOINTDEVENTE``) and closed (``CLOTUREPOINTDEVENTE``). Player events name it by
``IDPointDeVente``.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ..types import Date8, NonNegDec, Text
from ..xmlmodel import FlagField, XmlModel, spelled
from .common import AnonymousHeader, Postal, String64, String256

MAX_ADDRESS_LINES = 8
"""maxOccurs of ``Ad``."""


class _PointOfSale(AnonymousHeader):
    IDPointDeVente: String64


class _Premises(XmlModel):
    """The address lines (1 to 8), postal code, town, country and size of a point of sale."""

    Ad: list[String256] = Field(min_length=1, max_length=MAX_ADDRESS_LINES)
    CP: Postal
    Ville: String64
    Pays: String64
    Taille: NonNegDec
    Test: FlagField = spelled("Test", "test", default=False)
    Info: Text | None = None


class _OpeningHead(_PointOfSale):
    DateOuverture: Date8 | None = None


class OUVPOINTDEVENTE(_Premises, _OpeningHead):
    """Ouverture d'un point de vente."""

    family: ClassVar[str] = "PDV"
    xml_tag: ClassVar[str] = "OUVPOINTDEVENTE"


class MODIFPOINTDEVENTE(_Premises, _PointOfSale):
    """Modification de l'adresse ou de la taille d'un point de vente."""

    family: ClassVar[str] = "PDV"
    xml_tag: ClassVar[str] = "MODIFPOINTDEVENTE"


class CLOTUREPOINTDEVENTE(_PointOfSale):
    """Clôture d'un point de vente."""

    family: ClassVar[str] = "PDV"
    xml_tag: ClassVar[str] = "CLOTUREPOINTDEVENTE"
    DateClotureEffective: Date8 | None = None
    Info: Text | None = None
