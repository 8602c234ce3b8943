"""CJ: the player account (compte joueur) events — opening, identity, preferences, access,
self-exclusion, closing, deposits, withdrawals, bonuses, adjustments, prizes, bank
reference, betting limits and virtual-currency purchases (schema ``CJ.xsd``, which
includes ``include/CJCommon.xsd`` and ``include/Common.xsd``).

Every event starts with the Common.xsd player header (:class:`PlayerHeader`), except
PREFCPTE and OKCONDGENE, whose header has no ``IDPointDeVente``
(:class:`PlayerHeaderWithoutPointDeVente`). Fields are declared in schema order; the
body groups shared by several events are mixins placed before the header in the bases.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, model_validator

from ..errors import ReasonCode
from ..types import (
    Date8,
    DateTime12,
    Dec,
    NonNegDec,
    NonNegInt,
    Text,
    bounded_integer,
    enum_type,
    fail,
    pattern_type,
)
from ..xmlmodel import FlagField, XmlModel, spelled
from .base import complete_groups
from .common import PlayerHeader, PlayerHeaderWithoutPointDeVente, Postal, String32, String64, String256

# --------------------------------------------------------------------------- CJCommon.xsd simple types

Civil = enum_type(("M", "Mme"), what="Civilite")
"""CJCommon ``civil``: M or Mme, exactly."""

Departement = pattern_type(r"[0-9][0-9AB][0-9]?", what="département", min_length=2, max_length=3, upper=True)
"""CJCommon ``departement``: 2 or 3 characters, ``06``, ``2A``, ``974``. Surrounding blanks
are trimmed and a Corsican ``2a``/``2b`` is upper-cased."""

NatureVerificationCode = enum_type(("PieceIdentite", "Electronique"), what="NatureVerification")
TypeActCode = enum_type(("PS", "PH", "PO", "LO"), what="TypeAct")
"""CJCommon ``TypeAct``: sports bets, horse bets, poker, lotteries."""

Cib = pattern_type(r"\d{5}", what="CIB (5-digit bank code)")
"""CJCommon ``cib``: the 5-digit code of the bank (code interbancaire)."""


def _iban_without_blanks(value: Any) -> Any:
    """IBANs are usually printed in groups of four (``FR76 3000 …``): blanks are removed."""
    if isinstance(value, str):
        return "".join(value.split())
    return value


Iban = Annotated[
    pattern_type(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}", what="IBAN", upper=True),
    BeforeValidator(_iban_without_blanks),
]
"""CJCommon ``iban``: country, check digits, 11 to 30 letters or digits. The paper form
(blanks between groups, lower case) is accepted and emitted compact and upper-case; the
check digits are not verified (the schema does not)."""

DureeCount = bounded_integer(1)
"""AUTOINTERDICTION ``Duree``: xs:integer, at least 1."""

# enumerations declared locally in CJ.xsd
TypeRefusCode = enum_type(
    (
        "DelaiIdentite",
        "RejetIdentite",
        "Interdit",
        "AutoInterdit",
        "OpVerrouille",
        "Verrouille",
        "Cloture",
        "Autre",
    ),
    what="TypeRefus",
)
UniteDuree = enum_type(("J", "S", "M", "A"), what="Unite")
"""AUTOINTERDICTION ``Unite``: jours, semaines, mois, années."""
TypeClotureCode = enum_type(
    ("Joueur", "DelaisIdentite", "DelaisAdresse", "Inactivite", "Interdits", "Autre"), what="TypeCloture"
)
TypeMoyenPaiementCode = enum_type(
    (
        "CarteBancaire",
        "Virement",
        "Intermediaire",
        "MonnaieElectronique",
        "Espece",
        "Cheque",
        "RecepisseGagnant",
    ),
    what="TypeMoyenPaiement",
)
TypeAbondementCode = enum_type(
    ("Ouverture", "RakeBack", "HautFait", "Code", "Offre", "Points", "Autre"), what="TypeAbondement"
)
TypeAjustCode = enum_type(
    ("Alimentation", "Retrait", "Gain", "Abondement", "Bonus", "Lot", "Frais", "Etat", "Autre"),
    what="TypeAjust",
)

# --------------------------------------------------------------------------- header


# --------------------------------------------------------------------------- CJCommon.xsd complex elements


class CompteLimits(XmlModel):
    """CJCommon ``Compte``: the Min and Max amounts set for the account, both optional."""

    Min: NonNegDec | None = None
    Max: NonNegDec | None = None


class MiseMaxEntry(XmlModel):
    """CJCommon ``MiseMax``: a stake limit for one kind of activity."""

    Montant: NonNegDec
    TypeAct: TypeActCode


class LotNEntry(XmlModel):
    """CJCommon ``LotN``: a prize in kind, its name and value."""

    Nom: Text
    Valeur: NonNegDec


# --------------------------------------------------------------------------- body groups


class _PersonalInfo(XmlModel):
    """The body of OUVINFOPERSO and MODIFINFOPERSO: the player's identity and contact data."""

    Login: String64
    Pseudo: String64
    Nom: Text
    Prenom: list[Text] = Field(min_length=1, max_length=2)
    Civilite: Civil
    DateN: Date8
    VilleN: String64
    DptN: Departement
    PaysN: String64
    Ad: list[String256] | None = Field(None, max_length=8)
    CP: Postal | None = None
    Ville: String64 | None = None
    Pays: String64 | None = None
    TelFixe: String32 | None = None
    TelMob: String32 | None = None
    Email: String64
    Test: FlagField = spelled("Test", "test", default=False)
    Info: Text | None = None


class _InfoOnly(XmlModel):
    """A body holding nothing but the optional free-text ``Info``."""

    Info: Text | None = None


# --------------------------------------------------------------------------- the events


class OUVINFOPERSO(_PersonalInfo, PlayerHeader):
    """Ouverture d'un compte joueur: the personal data given at registration."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "OUVINFOPERSO"


class PREFCPTE(PlayerHeaderWithoutPointDeVente):
    """Préférences du compte: the moderators the player set (balance bounds, stake, deposit
    and time limits), effective from ``DateDebut``."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "PREFCPTE"
    Compte: CompteLimits | None = None
    MiseMax: list[MiseMaxEntry] | None = Field(None, max_length=5)
    DepotMax: NonNegDec | None = None
    TempsMax: NonNegInt | None = None
    DateDebut: DateTime12
    Info: Text | None = None


class CPTEIDENTITE(PlayerHeader):
    """Vérification de l'identité du joueur (by identity document or electronically)."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEIDENTITE"
    NatureVerification: NatureVerificationCode
    Info: Text | None = None


class CPTEADRESSE(_InfoOnly, PlayerHeader):
    """Vérification de l'adresse du joueur."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEADRESSE"


class MODIFINFOPERSO(_PersonalInfo, PlayerHeader):
    """Modification des données personnelles du joueur: the full set, as modified."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "MODIFINFOPERSO"


class OKCONDGENE(_InfoOnly, PlayerHeaderWithoutPointDeVente):
    """Acceptation des conditions générales par le joueur."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "OKCONDGENE"


class OUVOKCONFIRME(_InfoOnly, PlayerHeader):
    """Confirmation de l'ouverture définitive du compte joueur."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "OUVOKCONFIRME"


class ACCESREFUSE(PlayerHeader):
    """Refus d'accès au compte joueur, with its type and optional stated cause."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "ACCESREFUSE"
    CauseRefus: Text | None = None
    TypeRefus: TypeRefusCode
    Info: Text | None = None


class AUTOINTERDICTION(PlayerHeader):
    """Auto-exclusion temporaire du joueur: ``Duree`` ``Unite`` (days, weeks, months, years)
    from ``DateModif`` until ``DateFin``."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "AUTOINTERDICTION"
    DateModif: DateTime12
    Duree: DureeCount
    Unite: UniteDuree
    DateFin: DateTime12
    Info: Text | None = None


class CLOTUREDEM(PlayerHeader):
    """Clôture du compte joueur, with the balance at closing and the reason."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CLOTUREDEM"
    SoldeClos: Dec
    TypeCloture: TypeClotureCode
    Info: Text | None = None


class CPTEALIM(PlayerHeader):
    """Alimentation du compte joueur (a deposit) and the means of payment used."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEALIM"
    IDRef: String256
    DateDemande: DateTime12 | None = None
    DateEffective: DateTime12 | None = None
    SoldeAvant: Dec
    SoldeMouvement: NonNegDec
    SoldeApres: Dec
    MoyenPaiement: Text
    TypeMoyenPaiement: TypeMoyenPaiementCode
    Info: Text | None = None


class CPTERETRAIT(PlayerHeader):
    """Retrait du compte joueur: the amount asked for and the movement made."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTERETRAIT"
    IDRef: String256
    DateDemande: DateTime12
    SoldeDemande: NonNegDec
    SoldeAvant: Dec
    SoldeMouvement: NonNegDec
    SoldeApres: Dec
    Info: Text | None = None


class CPTEABOND(PlayerHeader):
    """Abondement du compte par l'opérateur (welcome offer, rake-back…). ``Info`` is required."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEABOND"
    IDRef: String256
    SoldeAvant: Dec
    MontAbond: NonNegDec
    SoldeApres: Dec
    Info: Text
    TypeAbondement: TypeAbondementCode
    Unite: Text | None = None


class CPTEAJUSTOPE(PlayerHeader):
    """Ajustement du compte par l'opérateur: the balance group (SoldeAvant, Ajustement,
    SoldeApres) and the bonus group (BonusAvant, BonusAjust, BonusApres), each complete
    or absent; the adjustments may be negative."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEAJUSTOPE"
    IDRef: String256
    Info: Text
    TypeAjust: TypeAjustCode
    SoldeAvant: Dec | None = None
    Ajustement: Dec | None = None
    SoldeApres: Dec | None = None
    BonusAvant: Dec | None = None
    BonusAjust: Dec | None = None
    BonusApres: Dec | None = None
    Unite: Text | None = None

    _GROUPS: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("SoldeAvant", "Ajustement", "SoldeApres"),
        ("BonusAvant", "BonusAjust", "BonusApres"),
    )

    @model_validator(mode="after")
    def _groups_complete(self) -> Any:
        complete_groups(self, self._GROUPS)
        return self


class CPTEALIMOPE(PlayerHeader):
    """Alimentation du compte bonus par l'opérateur (a bonus credited, named ``BonusNom``)."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEALIMOPE"
    IDRef: String256
    BonusAvant: Dec
    BonusMouvement: NonNegDec
    BonusApres: Dec
    BonusNom: Text
    Info: Text | None = None
    Unite: Text | None = None


class LOTNATURE(PlayerHeader):
    """Gain d'un ou plusieurs lots en nature (1 to 64 ``LotN``, in the order sent)."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "LOTNATURE"
    IDRef: String256
    LotN: list[LotNEntry] = Field(min_length=1, max_length=64)
    Info: Text | None = None


class CPTEREF(PlayerHeader):
    """Compte de référence du joueur pour ses retraits: the payment service provider and
    either its account reference (``PspCpteRef``) or an IBAN (``PspIban``), not both.

    The schema's choice (minOccurs 1) has two branches of minOccurs 0, so it is also
    satisfied by neither: an event with no reference validates and is accepted as is.
    """

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "CPTEREF"
    PspCib: Cib
    PspLib: String256
    PspCpteRef: String256 | None = None
    PspIban: Iban | None = None
    Info: Text | None = None

    @model_validator(mode="after")
    def _reference_or_iban(self) -> Any:
        if self.PspCpteRef is not None and self.PspIban is not None:
            raise fail(ReasonCode.CHOICE_CONFLICT, "PspCpteRef and PspIban are exclusive", path="PspIban")
        return self


class LIMITMISE(PlayerHeader):
    """Limitation des mises imposée au joueur par l'opérateur, its nature and motive."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "LIMITMISE"
    DateDebut: DateTime12
    DateFin: DateTime12
    Nature: Text
    Motif: Text
    Info: Text | None = None


class ACHATMONNAIE(PlayerHeader):
    """Achat de monnaie virtuelle: the money balance spent and the virtual currency credited
    (in ``Unite``). Note: ``Info`` comes before the amounts here."""

    family: ClassVar[str] = "CJ"
    xml_tag: ClassVar[str] = "ACHATMONNAIE"
    IDRef: String256
    Info: Text | None = None
    SoldeAvant: Dec
    MontantAchat: NonNegDec
    SoldeApres: Dec
    MonnaieAvant: Dec
    MontantMonnaie: NonNegDec
    MonnaieApres: Dec
    Unite: Text
