"""``include/Common.xsd``: the types and headers of the families written in the older,
flat style (CJ, PASP, PAHI, LOTI, LOJI, MO, PDV), whose elements are global and
referenced (``ref="IDOper"``) rather than typed locally.

These families order their header differently from the cercle families: the player's
identity comes before ``IDCoffre`` (see :class:`PlayerHeader`).
"""

from __future__ import annotations

from ..errors import ReasonCode
from ..types import (
    DateTime12,
    IdNumber,
    IPFull,
    OpId,
    Sha1,
    fr_string,
    pattern_type,
)
from ..xmlmodel import FlagField, XmlModel, spelled
from .base import Event

# Common.xsd simple types -------------------------------------------------------------
String8 = fr_string(8)
String32 = fr_string(32)
String64 = fr_string(64)
String256 = fr_string(256)
String1024 = fr_string(1024)
"""``string-N``: the ``fr`` character set (letters with French accents, digits, common
punctuation), at most N characters, whitespace collapsed (xs:token)."""

Canonique = pattern_type(r"[0-9A-Z' -]*", what="canonique code")
Code = pattern_type(r"[#0-9A-Z-]*", what="code")
Reference2 = pattern_type(r"[a-zA-Z0-9._/#-]+", ReasonCode.INVALID_REFERENCE, what="reference")
Postal = pattern_type(
    r"(([0-8][0-9AB])|(9[0-9AB]|99))[0-9]{3}", what="postal code", min_length=5, max_length=5
)


class AnonymousHeader(Event):
    """IDOper, DateEvt, IDEvt, IDCoffre: the header of events with no player (MO, PDV)."""

    IDOper: OpId
    DateEvt: DateTime12
    IDEvt: IdNumber
    IDCoffre: IdNumber


class _PlayerIdentity(Event):
    IDOper: OpId
    DateEvt: DateTime12
    IDEvt: IdNumber
    IDJoueur: String64
    HashJoueur: Sha1
    IDSession: String256
    IPJoueur: IPFull | None = None


class _PointOfSale(XmlModel):
    IDPointDeVente: String64 | None = None


class _CoffreAndSupervision(XmlModel):
    IDCoffre: IdNumber
    Supervision: FlagField = spelled("Supervision", "supervision", default=False)


class PlayerHeader(_CoffreAndSupervision, _PointOfSale, _PlayerIdentity):
    """The player-event header of Common.xsd families, in their schema order: IDOper,
    DateEvt, IDEvt, IDJoueur, HashJoueur, IDSession, IPJoueur?, IDPointDeVente?,
    IDCoffre, Supervision?.

    ``IPJoueur`` here is Common.xsd's ``IP`` type, whose IPv6 form has all eight groups
    (no ``::``): IPv6 addresses are emitted in that full, lower-case form.
    ``supervision="true"`` (the annex's attribute) is accepted for ``<Supervision/>``.
    """


class PlayerHeaderWithoutPointDeVente(_CoffreAndSupervision, _PlayerIdentity):
    """The same header without ``IDPointDeVente`` (PREFCPTE, OKCONDGENE): the schema has
    no place for it there, so one sent is refused (UNEXPECTED_ELEMENT)."""
