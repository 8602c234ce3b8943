"""PASP (sports bets) and PAHI (horse-race bets): schemas PASP.xsd and PAHI.xsd.

Both families include ``include/PACommon.xsd`` (the bet descriptions: ``PaSp``/``LigSp``
for sports, ``Desc``/``PronoPH`` for races, ``Cashout``) over ``include/Common.xsd``
(the player header and the balance elements). Each family has three events: a stake
(``MISE``), a cancellation with refund (``ANNUL``) and a winning (``GAIN``).

Two sequences of PACommon repeat a group of several elements, so the interleaving of
their children carries meaning and is kept as sent, in one ordered list:

* ``LigSp``: ``(PronoSp{1,64}, Cote{0,64}, Live?, Banque?){0,64}`` (:attr:`SportLine.Pronostics`);
* ``PronoSp``: ``(TypeRes, Choix){0,64}`` (:attr:`SportPrediction.Selections`).

The field holding such a list is named after the group (it is not an element); its items
are emitted under their own element names.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from ..errors import ReasonCode
from ..types import (
    DateTime12,
    Dec,
    Integer,
    NonNegDec,
    Text,
    bounded_integer,
    empty_text,
    enum_type,
    fail,
    pattern_type,
)
from ..xmlmodel import TEXT, FlagField, XmlModel
from .common import PlayerHeader, String64, String256

MAX_GROUPS = 64
"""maxOccurs of PACommon's repeated groups (and of most of their members)."""

# --------------------------------------------------------------------------- PACommon simple types

_CODE = r"[#0-9A-Z-]*"
_CANONIQUE = r"[0-9A-Z' -]*"


def _code(min_length: int, max_length: int, what: str) -> Any:
    """A PACommon ``code…`` type: Common ``code`` restricted in length."""
    return pattern_type(_CODE, what=what, min_length=min_length, max_length=max_length)


CodeCategorie = _code(3, 16, "codeCategorie")
CodeDiscipline = _code(4, 16, "codeDiscipline")
CodeEvenement = _code(5, 64, "codeEvenement")
CodeSport = _code(3, 16, "codeSport")
CodeTypRes = _code(5, 16, "codeTypRes")
CodeParticipant = pattern_type(_CANONIQUE, what="codeParticipant", max_length=256)
CodeRencontre = pattern_type(_CANONIQUE, what="codeRencontre", max_length=256)
"""``codeParticipant``/``codeRencontre``: Common ``canonique`` (upper case, digits, ``' -``), 0..256."""


def _at_least_one(value: Decimal) -> Decimal:
    if value < 1:
        raise fail(ReasonCode.INVALID_VALUE, "odds {value} are below 1", value=str(value))
    return value


CoteValue = Annotated[NonNegDec, AfterValidator(_at_least_one)]
"""The ``Cote`` of a ``LigSp``: a nonNegativeDecimal of at least 1."""
Cote2 = NonNegDec
"""``Cote2``, the odds of a ``Cashout``: a nonNegativeDecimal (no lower bound of 1)."""

COMBIS = (
    "S",
    "C",
    "XY",
    "TRIXIE",
    "PATENT",
    "YANKEE",
    "LUCKY15",
    "CANADIAN",
    "LUCKY31",
    "HEINZ",
    "LUCKY63",
    "SUPERHEINZ",
    "GOLIATH",
)
"""``Combi``: simple, combined, ``XY`` (X among Y) or a named full-cover system."""
CombiCode = enum_type(COMBIS, what="Combi")
GenreCode = enum_type(("H", "M", "F"), what="Genre")
SystemSize = bounded_integer(1, 64)
"""``X`` of a ``Combi`` XY system: 1..64."""


def _marker(value: Any) -> str:
    """An element declared nillable with no type (``Live``, ``Banque``): present and empty."""
    if value is None or value is True:
        return ""
    return empty_text(value)


# --------------------------------------------------------------------------- sports: PronoSp


def _member_tag(value: Any) -> str | None:
    """The element name of an item of an ordered group (a model, or ``{"Tag": ...}`` data)."""
    if isinstance(value, XmlModel):
        return value.xml_tag
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value))
    return None


class ResultType(XmlModel):
    """``TypeRes``: the code of the kind of result bet on."""

    xml_tag: ClassVar[str] = "TypeRes"
    value: Annotated[CodeTypRes, TEXT]


class Choice(XmlModel):
    """``Choix``: the outcome chosen for the ``TypeRes`` before it, in clear."""

    xml_tag: ClassVar[str] = "Choix"
    value: Annotated[Text, TEXT]


Selection = Annotated[
    Annotated[ResultType, Tag("TypeRes")] | Annotated[Choice, Tag("Choix")],
    Discriminator(_member_tag),
]


class SportPrediction(XmlModel):
    """``PronoSp``: a prediction, as pairs of a result type and the outcome chosen."""

    xml_tag: ClassVar[str] = "PronoSp"
    Selections: list[Selection] = Field(default_factory=list)
    """``(TypeRes, Choix){0,64}`` in document order."""

    @model_validator(mode="after")
    def _pairs(self) -> SportPrediction:
        seen = {"TypeRes": 0, "Choix": 0}
        for index, item in enumerate(self.Selections):
            tag = item.xml_tag
            seen[tag] += 1
            expected = "TypeRes" if index % 2 == 0 else "Choix"
            if tag != expected and tag == "Choix":
                raise fail(
                    ReasonCode.UNEXPECTED_ELEMENT,
                    "each Choix follows its own TypeRes",
                    path=f"Choix[{seen['Choix']}]",
                )
            if tag != expected:
                raise fail(
                    ReasonCode.INCOMPLETE_GROUP,
                    "TypeRes is followed by its Choix",
                    path=f"TypeRes[{seen['TypeRes'] - 1}]",
                )
            if seen["TypeRes"] > MAX_GROUPS:
                raise fail(
                    ReasonCode.TOO_MANY_OCCURRENCES,
                    "a PronoSp holds at most {max} TypeRes/Choix pairs",
                    max=MAX_GROUPS,
                    path=f"TypeRes[{seen['TypeRes']}]",
                )
        if len(self.Selections) % 2:
            raise fail(
                ReasonCode.INCOMPLETE_GROUP,
                "TypeRes is followed by its Choix",
                path=f"TypeRes[{seen['TypeRes']}]",
            )
        return self

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The (TypeRes, Choix) pairs."""
        values = [item.value for item in self.Selections]
        return list(zip(values[::2], values[1::2], strict=True))


# --------------------------------------------------------------------------- sports: LigSp group members


class Odds(XmlModel):
    """``Cote``: the odds taken for the predictions before it."""

    xml_tag: ClassVar[str] = "Cote"
    value: Annotated[CoteValue, TEXT]


class LiveMarker(XmlModel):
    """``Live``: the predictions before it were taken during the event (empty marker)."""

    xml_tag: ClassVar[str] = "Live"
    value: Annotated[str, BeforeValidator(_marker), TEXT] = ""


class BankerMarker(XmlModel):
    """``Banque``: the predictions before it are a banker of a system bet (empty marker)."""

    xml_tag: ClassVar[str] = "Banque"
    value: Annotated[str, BeforeValidator(_marker), TEXT] = ""


LineItem = Annotated[
    Annotated[SportPrediction, Tag("PronoSp")]
    | Annotated[Odds, Tag("Cote")]
    | Annotated[LiveMarker, Tag("Live")]
    | Annotated[BankerMarker, Tag("Banque")],
    Discriminator(_member_tag),
]


def check_line_groups(items: list[Any]) -> None:
    """``(PronoSp{1,64}, Cote{0,64}, Live?, Banque?){0,64}``, read greedily; raises at the first misfit.

    This is the schema's rule (a run of more than 64 PronoSp opens a new group). libxml2
    (lxml) miscounts these nested bounds on large lines: it refuses, for instance, 40 groups
    of two PronoSp and a Cote, or 6 groups of 64, which the XSD allows. Real bets stay far below.
    """
    seen = {"PronoSp": 0, "Cote": 0, "Live": 0, "Banque": 0}
    groups = pronos = cotes = 0
    state = ""  # the member last read in the current group; "" before the first group
    for item in items:
        tag = item.xml_tag
        seen[tag] += 1
        where = f"{tag}[{seen[tag]}]"
        if tag == "PronoSp":
            if state == "PronoSp" and pronos < MAX_GROUPS:
                pronos += 1
            else:
                groups += 1
                pronos, cotes = 1, 0
                if groups > MAX_GROUPS:
                    raise fail(
                        ReasonCode.TOO_MANY_OCCURRENCES,
                        "a LigSp holds at most {max} groups (PronoSp, Cote, Live, Banque)",
                        max=MAX_GROUPS,
                        path=where,
                    )
        elif not state:
            raise fail(
                ReasonCode.UNEXPECTED_ELEMENT, "{tag} follows the PronoSp it qualifies", tag=tag, path=where
            )
        elif tag == "Cote":
            if state in ("Live", "Banque"):
                raise fail(
                    ReasonCode.UNEXPECTED_ELEMENT,
                    "Cote comes before {state} in a group",
                    state=state,
                    path=where,
                )
            cotes += 1
            if cotes > MAX_GROUPS:
                raise fail(
                    ReasonCode.TOO_MANY_OCCURRENCES,
                    "a group holds at most {max} Cote",
                    max=MAX_GROUPS,
                    path=where,
                )
        elif tag == state:
            raise fail(
                ReasonCode.TOO_MANY_OCCURRENCES, "a group holds at most one {tag}", tag=tag, path=where
            )
        elif tag == "Live" and state == "Banque":
            raise fail(ReasonCode.UNEXPECTED_ELEMENT, "Live comes before Banque in a group", path=where)
        state = tag


class SportLine(XmlModel):
    """``LigSp``: one line of a sports bet, an event (``Renc``) and what is predicted on it."""

    Renc: CodeRencontre
    Tech: String256
    Sport: CodeSport
    Cat: CodeCategorie | None = None
    Evnt: CodeEvenement
    Disc: CodeDiscipline | None = None
    Genre: GenreCode
    Date: DateTime12
    Part: list[CodeParticipant] = Field(default_factory=list, max_length=2)
    Pronostics: list[LineItem] = Field(default_factory=list)
    """``(PronoSp{1,64}, Cote{0,64}, Live?, Banque?){0,64}`` in document order."""

    @model_validator(mode="after")
    def _groups(self) -> SportLine:
        check_line_groups(self.Pronostics)
        return self

    @property
    def groups(self) -> list[list[Any]]:
        """The items split into their groups (each starting with its PronoSp run)."""
        out: list[list[Any]] = []
        previous = ""
        for item in self.Pronostics:
            if item.xml_tag == "PronoSp" and (previous != "PronoSp" or len(out[-1]) == MAX_GROUPS):
                out.append([])
            out[-1].append(item)
            previous = item.xml_tag
        return out


class SportBet(XmlModel):
    """``PaSp``: one sports bet, simple (``S``), combined (``C``) or a system (``XY``, ``TRIXIE``…)."""

    Combi: CombiCode
    Mutuel: FlagField = False
    X: SystemSize | None = None
    LigSp: list[SportLine] = Field(min_length=1, max_length=64)
    MiseBase: NonNegDec | None = None


class CashoutDetail(XmlModel):
    """``Cashout``: a bet settled before its end, at a buy-back amount and odds."""

    Rachat: NonNegDec | None = None
    Cote: Cote2 | None = None


# --------------------------------------------------------------------------- horse races: Desc


class RacePrediction(XmlModel):
    """``PronoPH``: a horse-race bet: its type, horses (``Base``, ``Associes``) and multiplier."""

    Type: String64
    Base: list[String64] = Field(default_factory=list, max_length=64)
    Choix: Text | None = None
    Champ: FlagField = False
    Combinaison: FlagField = False
    Associes: list[String64] = Field(default_factory=list, max_length=64)
    Tlo: FlagField = False
    MiseBase: NonNegDec
    Nombre: Integer
    Coef: list[NonNegDec] = Field(default_factory=list, max_length=64)


class RaceDescription(XmlModel):
    """``Desc``: the race(s) a horse-race bet is on, and the prediction."""

    DateHeure: DateTime12 | None = None
    Hippodrome: list[Text] = Field(min_length=1, max_length=16)
    Pays: String64
    Reunion: list[Integer] = Field(min_length=1, max_length=16)
    CNom: list[Text] = Field(default_factory=list, max_length=16)
    CNum: list[Integer] = Field(default_factory=list, max_length=16)
    Clair: String256
    PronoPH: RacePrediction


# --------------------------------------------------------------------------- event heads


class _BetHead(PlayerHeader):
    """The player header, then ``Tech``: the operator's reference of the bet."""

    Tech: String256


class _SettledHead(_BetHead):
    """A cancellation or a winning refers to its bet by ``DateMise``."""

    DateMise: DateTime12


class _GainHead(_SettledHead):
    """A winning also carries ``DateHeure``, when the bet was settled."""

    DateHeure: DateTime12


PASP_MOTIFS = ("NonConforme", "MSE", "RencontreAnnulee", "Resultat", "Joueur", "PariModifie", "Autre")
PAHI_MOTIFS = ("CourseAnnulee", "Resultat", "NonPartant", "Joueur", "NombrePartants", "Autre")
PaspMotif = enum_type(PASP_MOTIFS, what="Motif")
PahiMotif = enum_type(PAHI_MOTIFS, what="Motif")
"""The ``Motif`` of a cancellation: the schema's enumeration, exact (no free text)."""


class _Refund(XmlModel):
    """The refund balances of a cancellation, cash then bonus (all optional)."""

    SoldeAvantRembours: Dec | None = None
    MontantRembours: NonNegDec | None = None
    SoldeApresRembours: Dec | None = None
    BonusAvant: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApres: Dec | None = None


# --------------------------------------------------------------------------- PASP


class PASPMISE(_BetHead):
    """Mise sur un pari sportif: one or several bets (``PaSp``) and the stake taken."""

    family: ClassVar[str] = "PASP"
    xml_tag: ClassVar[str] = "PASPMISE"
    TechJeu: Text | None = None
    Jackpot: FlagField = False
    PaSp: list[SportBet] = Field(min_length=1, max_length=64)
    SoldeAvantMise: Dec | None = None
    Mise: NonNegDec | None = None
    SoldeApresMise: Dec | None = None
    MiseAbond: NonNegDec | None = None
    BonusAvantMise: Dec | None = None
    BonusMise: NonNegDec | None = None
    BonusApresMise: Dec | None = None
    BonusNom: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None
    Unite: Text | None = None


class _PaspCancelHead(_SettledHead):
    Motif: PaspMotif


class PASPANNUL(_Refund, _PaspCancelHead):
    """Annulation d'un pari sportif, with the refund."""

    family: ClassVar[str] = "PASP"
    xml_tag: ClassVar[str] = "PASPANNUL"
    Tel: FlagField = False
    Info: Text | None = None
    Unite: Text | None = None


class PASPGAIN(_GainHead):
    """Gain d'un pari sportif, possibly a cash-out before the end of the event."""

    family: ClassVar[str] = "PASP"
    xml_tag: ClassVar[str] = "PASPGAIN"
    Cashout: CashoutDetail | None = None
    SoldeAvantGain: Dec | None = None
    Gain: NonNegDec | None = None
    SoldeApresGain: Dec | None = None
    GainAbond: NonNegDec | None = None
    Info: Text | None = None
    BonusAvantGain: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApresGain: Dec | None = None
    Unite: Text | None = None


# --------------------------------------------------------------------------- PAHI


class PAHIMISE(_BetHead):
    """Mise sur un pari hippique: one or several races and predictions (``Desc``) and the stake."""

    family: ClassVar[str] = "PAHI"
    xml_tag: ClassVar[str] = "PAHIMISE"
    TechJeu: Text | None = None
    Jackpot: FlagField = False
    Desc: list[RaceDescription] = Field(min_length=1, max_length=64)
    SoldeAvantMise: Dec | None = None
    Mise: NonNegDec | None = None
    SoldeApresMise: Dec | None = None
    MiseAbond: NonNegDec | None = None
    BonusAvantMise: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApresMise: Dec | None = None
    BonusNom: Text | None = None
    Unite: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None


class _PahiCancelHead(_SettledHead):
    Motif: PahiMotif


class PAHIANNUL(_Refund, _PahiCancelHead):
    """Annulation d'un pari hippique, with the refund. Note: Unite before Tel and Info here."""

    family: ClassVar[str] = "PAHI"
    xml_tag: ClassVar[str] = "PAHIANNUL"
    Unite: Text | None = None
    Tel: FlagField = False
    Info: Text | None = None


class PAHIGAIN(_GainHead):
    """Gain d'un pari hippique. Note: Info last here (after the bonus group and Unite)."""

    family: ClassVar[str] = "PAHI"
    xml_tag: ClassVar[str] = "PAHIGAIN"
    SoldeAvantGain: Dec | None = None
    Gain: NonNegDec | None = None
    SoldeApresGain: Dec | None = None
    GainAbond: NonNegDec | None = None
    BonusAvantGain: Dec | None = None
    BonusMouvement: NonNegDec | None = None
    BonusApresGain: Dec | None = None
    Unite: Text | None = None
    Info: Text | None = None
