"""Groups and complex types of ``features/cercle`` and ``common/*`` (poker and fantasy).

Field order is schema order. A schema group used in the middle of a sequence is a mixin:
pydantic lists a model's fields base-first along the reversed MRO, so in
``class Register(FinanceOld, _RegisterHead)`` the head's fields come first, then the
finance group's, then the class's own.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import model_validator

from ..errors import ReasonCode
from ..types import (
    IP,
    CercleFormat,
    DateTime12,
    Dec,
    IdNumber,
    NonNegDec,
    NonNegInt,
    OpId,
    Reference,
    Sha1,
    Text,
    enum_type,
    fail,
)
from ..xmlmodel import AttributeSwitch, FlagField, XmlModel, spelled
from .base import Event, complete_groups


class CercleAnonymous(Event):
    """event:anonymous: header:id, and the header:state attributes.

    The annex writes ``supervision``, ``retransmission`` and ``test`` as attributes of the
    root; the schema has ``Supervision`` as an element and the other two as attributes.
    Either spelling is accepted; the schema's is emitted.
    """

    retransmission: AttributeSwitch = spelled("retransmission", "Retransmission", default=False)
    test: AttributeSwitch = spelled("test", "Test", default=False)
    IDOper: OpId
    IDCoffre: IdNumber
    DateEvt: DateTime12
    IDEvt: IdNumber
    Supervision: FlagField = spelled("Supervision", "supervision", default=False)


class CercleDefault(CercleAnonymous):
    """event:default: the header, then player:id."""

    IDJoueur: Text
    HashJoueur: Sha1
    IPJoueur: IP
    IDPointDeVente: Text | None = None
    IDSession: Text


class FinanceOld(XmlModel):
    """finance:old: the balance group (SoldeAvant, SoldeMouvement, SoldeApres) and/or the
    bonus group (BonusAvant, BonusMouvement, BonusApres); each group complete or absent,
    at least one present. The annex's ``SoldeAprès``/``BonusAprès`` are accepted."""

    SoldeAvant: Dec | None = None
    SoldeMouvement: NonNegDec | None = None
    SoldeApres: Dec | None = spelled("SoldeApres", "SoldeAprès", default=None)
    BonusAvant: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApres: Dec | None = spelled("BonusApres", "BonusAprès", default=None)

    _FINANCE_GROUPS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("SoldeAvant", "SoldeMouvement", "SoldeApres"),
        ("BonusAvant", "BonusMouvement", "BonusApres"),
    )

    @model_validator(mode="after")
    def _finance_groups_complete(self) -> Any:
        if not complete_groups(self, self._FINANCE_GROUPS):
            raise fail(
                ReasonCode.MISSING_ELEMENT,
                "a financial movement is required: SoldeAvant/SoldeMouvement/SoldeApres or the Bonus group",
                path="SoldeAvant",
            )
        return self


class CercleId(CercleDefault):
    """cercle:id after event:default."""

    Inscription: Reference
    Tech: Reference


class _RegisterHead(CercleId):
    Description: Text
    Format: CercleFormat


class Register(FinanceOld, _RegisterHead):
    """cercle:register (POINSCRIT)."""

    Unite: Text | None = None
    Info: Text | None = None


class _SpecialHead(CercleId):
    """cercle:motif-old is a choice of Description or Motif."""

    Description: Text | None = None
    Motif: Text | None = None

    @model_validator(mode="after")
    def _description_or_motif(self) -> Any:
        if self.Description is not None and self.Motif is not None:
            raise fail(ReasonCode.CHOICE_CONFLICT, "Description and Motif are exclusive", path="Motif")
        if self.Description is None and self.Motif is None:
            raise fail(ReasonCode.MISSING_ELEMENT, "Description (or Motif) is required", path="Description")
        return self


class Special(FinanceOld, _SpecialHead):
    """cercle:special (POACHAT, POGAIN, FAACHAT, FAGAIN). Note: Info before Unite here."""

    Info: Text | None = None
    Unite: Text | None = None


class _FinalHead(CercleId):
    Classement: NonNegInt | None = None


class Final(FinanceOld, _FinalHead):
    """cercle:final (POBILAN)."""

    Info: Text | None = None
    Unite: Text | None = None


def free_text_motif(allowed: tuple[str, ...]) -> Any:
    """A before-validator for a cancel event whose schema ``Motif`` is an enumeration.

    The annex's examples write a free-text motif (``Annulation Tournoi …``). A value that
    matches the enumeration (ignoring case) is kept in the schema's spelling; any other
    text becomes ``Autre`` and the operator's text is kept, whole, in ``Info`` (joined to
    an existing ``Info`` with `` | ``), so nothing is lost and the output validates.
    """

    by_lower = {value.lower(): value for value in allowed}

    def normalize(cls: type, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("Motif"), str):
            return data
        text = data["Motif"].strip()
        if text.lower() in by_lower:
            return {**data, "Motif": by_lower[text.lower()]}
        if not text:
            return data
        info = data.get("Info")
        return {
            **data,
            "Motif": "Autre",
            "Info": text if not isinstance(info, str) or not info else f"{text} | {info}",
        }

    return model_validator(mode="before")(classmethod(normalize))  # type: ignore[arg-type]


CANCEL_MOTIFS = ("NombreJoueurs", "Joueur", "Deconnexion", "Autre")


class _CancelHead(CercleId):
    Motif: enum_type(CANCEL_MOTIFS, what="Motif")  # type: ignore[valid-type]

    _free_text_motif = free_text_motif(CANCEL_MOTIFS)


class Cancel(FinanceOld, _CancelHead):
    """cercle:cancel (POANNUL). Note: Unite before Info here."""

    Unite: Text | None = None
    Info: Text | None = None
