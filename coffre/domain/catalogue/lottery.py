"""LOTI (lotteries with a draw) and LOJI (instant lotteries): schemas LOTI.xsd and LOJI.xsd.

Both families use the player header of ``include/Common.xsd`` and have four events: a
stake (``MISE``), a cancellation with refund (``ANNUL``), a winning (``GAIN``) and a
closing statement (``BILAN``). They differ by their ``Desc`` (a LOTI description names
its draws, ``Tirage``), by ``Selection`` (the player's choice, LOTI only) and by the
values of ``Motif``.

The balance and bonus elements are each optional in these schemas, with no grouping:
unlike the cercle families' ``finance:old``, nothing ties them together.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ..types import DateTime12, Dec, Integer, NonNegDec, Text, enum_type
from ..xmlmodel import FlagField, XmlModel
from .common import PlayerHeader, String64, String256

MAX_TIRAGES = 64
"""maxOccurs of ``Tirage`` in a LOTI ``Desc``."""
MAX_OPTIONS = 64
"""maxOccurs of ``Option`` in a LOTI ``Selection``."""

LOTI_MOTIFS = ("Tirage", "Joueur", "Autre")
LOJI_MOTIFS = ("Jeu", "Joueur", "Autre")
LotiMotif = enum_type(LOTI_MOTIFS, what="Motif")
LojiMotif = enum_type(LOJI_MOTIFS, what="Motif")


# --------------------------------------------------------------------------- LOTICommon / LOJICommon


class LotteryDraw(XmlModel):
    """LOTICommon ``Tirage``: one draw the stake takes part in."""

    DateHeure: DateTime12
    IDTirage: String64


class LotiDescription(XmlModel):
    """LOTICommon ``Desc``: the game, in clear and by name, and its draws (1 to 64)."""

    Clair: String256
    Nom: Text
    Tirage: list[LotteryDraw] = Field(min_length=1, max_length=MAX_TIRAGES)


class LotterySelection(XmlModel):
    """LOTICommon ``Selection``: how many choices the player made, its options (0 to 64)."""

    Nombre: Integer
    Option: list[Text] = Field(default_factory=list, max_length=MAX_OPTIONS)
    IDGroupe: String64 | None = None


class LojiDescription(XmlModel):
    """LOJICommon ``Desc``: the game, in clear and by name, and an option."""

    Clair: String256
    Nom: Text
    Option: Text | None = None


# --------------------------------------------------------------------------- shared parts


class _GameHead(PlayerHeader):
    Tech: String256
    TechJeu: Text | None = None
    Jackpot: FlagField = False


class _StakeTail(XmlModel):
    """The balance, abandoned-stake and bonus elements closing a ``MISE``."""

    SoldeAvant: Dec | None = None
    SoldeMouvement: NonNegDec | None = None
    SoldeApres: Dec | None = None
    MiseAbond: NonNegDec | None = None
    BonusAvant: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApres: Dec | None = None
    BonusNom: Text | None = None
    Unite: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None


class _RefundTail(XmlModel):
    """The balance and bonus elements closing an ``ANNUL``."""

    SoldeAvant: Dec | None = None
    SoldeMouvement: NonNegDec | None = None
    SoldeApres: Dec | None = None
    BonusAvant: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApres: Dec | None = None
    Unite: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None


class _SettledHead(PlayerHeader):
    Tech: String256
    DateMise: DateTime12


class _Gain(_SettledHead):
    """The ``GAIN`` body, the same in LOTI and LOJI."""

    SoldeAvant: Dec | None = None
    SoldeMouvement: NonNegDec | None = None
    SoldeApres: Dec | None = None
    GainAbond: NonNegDec | None = None
    BonusAvant: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApres: Dec | None = None
    Unite: Text | None = None
    Info: Text | None = None


class _Bilan(_SettledHead):
    """The ``BILAN`` body, the same in LOTI and LOJI."""

    NombreChoix: Integer | None = None
    Info: Text | None = None


# --------------------------------------------------------------------------- LOTI


class _LotiStakeHead(_GameHead):
    Desc: LotiDescription
    Selection: LotterySelection


class LOTIMISE(_StakeTail, _LotiStakeHead):
    """Mise sur une loterie à tirage."""

    family: ClassVar[str] = "LOTI"
    xml_tag: ClassVar[str] = "LOTIMISE"


class _LotiCancelHead(_SettledHead):
    Motif: LotiMotif


class LOTIANNUL(_RefundTail, _LotiCancelHead):
    """Annulation d'une mise sur une loterie à tirage, et son remboursement."""

    family: ClassVar[str] = "LOTI"
    xml_tag: ClassVar[str] = "LOTIANNUL"


class LOTIGAIN(_Gain):
    """Gain sur une loterie à tirage."""

    family: ClassVar[str] = "LOTI"
    xml_tag: ClassVar[str] = "LOTIGAIN"


class LOTIBILAN(_Bilan):
    """Bilan d'une mise sur une loterie à tirage (sans mouvement financier)."""

    family: ClassVar[str] = "LOTI"
    xml_tag: ClassVar[str] = "LOTIBILAN"


# --------------------------------------------------------------------------- LOJI


class _LojiStakeHead(_GameHead):
    Desc: LojiDescription


class LOJIMISE(_StakeTail, _LojiStakeHead):
    """Mise sur une loterie instantanée."""

    family: ClassVar[str] = "LOJI"
    xml_tag: ClassVar[str] = "LOJIMISE"


class _LojiCancelHead(_SettledHead):
    Motif: LojiMotif


class LOJIANNUL(_RefundTail, _LojiCancelHead):
    """Annulation d'une mise sur une loterie instantanée, et son remboursement."""

    family: ClassVar[str] = "LOJI"
    xml_tag: ClassVar[str] = "LOJIANNUL"


class LOJIGAIN(_Gain):
    """Gain sur une loterie instantanée."""

    family: ClassVar[str] = "LOJI"
    xml_tag: ClassVar[str] = "LOJIGAIN"


class LOJIBILAN(_Bilan):
    """Bilan d'une mise sur une loterie instantanée (sans mouvement financier)."""

    family: ClassVar[str] = "LOJI"
    xml_tag: ClassVar[str] = "LOJIBILAN"
