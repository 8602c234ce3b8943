"""FA: fantasy games (schema FA.xsd, with ``include/fantasy.xsd``), built on the cercle types.

FAINSCRIT (``cercle:register2``) registers a player to a competition named by its sport,
category, event and discipline codes; FAJEU (``fantasy:game``) records the team the
player composed; FAACHAT and FAGAIN (``cercle:special``) are purchases and winnings
during the game; FABILAN (``cercle:final2``) the final ranking, points and payout;
FAANNUL (``cercle:cancel2``) a cancelled participation and its refund.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ..types import CercleFormat, DateTime12, NonNegInt, Reference, Text, enum_type, pattern_type
from ..xmlmodel import FlagField, XmlModel
from .cercle import CercleId, FinanceOld, Special

# --------------------------------------------------------------------------- cercle codes

_CODE = r"[0-9A-Z-]*"
CodeSport = pattern_type(_CODE, what="sport code (3)", min_length=3, max_length=3)
"""cercle:codeSport: three of ``0-9``, ``A-Z``, ``-``."""
CodeCategorie = pattern_type(_CODE, what="category code (3)", min_length=3, max_length=3)
"""cercle:codeCategorie: three of ``0-9``, ``A-Z``, ``-``."""
CodeEvenement = pattern_type(_CODE, what="event code (5 to 64)", min_length=5, max_length=64)
"""cercle:codeEvenement: 5 to 64 of ``0-9``, ``A-Z``, ``-``."""
CodeDiscipline = pattern_type(_CODE, what="discipline code (4)", min_length=4, max_length=4)
"""cercle:codeDiscipline: four of ``0-9``, ``A-Z``, ``-``."""

CANCEL2_MOTIFS = ("NonConforme", "MSE", "RencontreAnnulee", "Resultat", "NombreJoueur", "Joueur", "Autre")
"""The values of cercle:cancel2's ``Motif`` (an enumeration: other text is refused)."""
Cancel2Motif = enum_type(CANCEL2_MOTIFS, what="Motif")


# --------------------------------------------------------------------------- cercle types


class _Register2Head(CercleId):
    Description: Text
    Sport: CodeSport
    Cat: CodeCategorie | None = None
    Evnt: CodeEvenement
    Disc: CodeDiscipline | None = None
    Format: CercleFormat


class Register2(FinanceOld, _Register2Head):
    """cercle:register2: cercle:id, the competition's codes and format, finance:old."""

    Info: Text | None = None
    Unite: Text | None = None
    Tel: FlagField = False


class CercleGame(CercleId):
    """cercle:game: cercle:pool-id (Inscription, Tech, Pool), Description, Info."""

    Pool: Reference
    Description: Text
    Info: Text | None = None


class FantasyChoice(XmlModel):
    """fantasy:choice: one member of the team, by name, and its role (``Info``)."""

    Nom: Text
    Info: Text


class Lineup(XmlModel):
    """The ``Composition`` of a fantasy:game: its ``Choix``, at least one, in order."""

    Choix: list[FantasyChoice] = Field(min_length=1)


class FantasyGame(CercleGame):
    """fantasy:game: cercle:game, then the composition's id, date and choices."""

    IDCompo: Reference
    DateCompo: DateTime12
    Composition: Lineup


class _Final2Head(CercleId):
    """cercle:id-final2: Inscription, Tech, Classement, Points."""

    Classement: NonNegInt | None = None
    Points: NonNegInt


class Final2(FinanceOld, _Final2Head):
    """cercle:final2: the final ranking and points, and the payout (finance:old)."""

    Info: Text | None = None
    Unite: Text | None = None


class _Cancel2Head(CercleId):
    Motif: Cancel2Motif


class Cancel2(FinanceOld, _Cancel2Head):
    """cercle:cancel2: a cancelled participation, its reason (an enumeration) and refund."""

    Unite: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None


# --------------------------------------------------------------------------- the events


class FAINSCRIT(Register2):
    """Inscription d'un joueur à une compétition de fantasy."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FAINSCRIT"


class FAJEU(FantasyGame):
    """Composition d'équipe déposée par un joueur pour une compétition de fantasy."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FAJEU"


class FAACHAT(Special):
    """Achat en cours de jeu de fantasy (bonus, option)."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FAACHAT"


class FAGAIN(Special):
    """Gain en cours de jeu de fantasy."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FAGAIN"


class FABILAN(Final2):
    """Bilan d'une compétition de fantasy: classement, points et gain du joueur."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FABILAN"


class FAANNUL(Cancel2):
    """Annulation d'une participation à une compétition de fantasy, et son remboursement."""

    family: ClassVar[str] = "FA"
    xml_tag: ClassVar[str] = "FAANNUL"
