"""PO: poker, référentiel 2 (annex 1.3.6 as amended by decision 2016-064; schema PO.xsd).

POINSCRIT, POACHAT, POGAIN, POBILAN and POANNUL are player events built on the cercle
types; POJEU is the synthesis event of one hand: its participants, its rule (``Regle``)
and its rounds (``Tour``) of actions (Bet, Draw, Check, Fold, Discard, Reveal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from ..errors import ReasonCode
from ..types import (
    IP,
    Boolean,
    Country,
    DateTime12,
    Dec,
    NonNegDec,
    NonNegInt,
    OpId,
    Reference,
    Text,
    _integer,
    enum_type,
    fail,
)
from ..xmlmodel import ATTRIBUTE, AttributeSwitch, XmlModel, spelled
from .base import EVENT_ALIASES
from .cercle import Cancel, CercleAnonymous, Final, Register, Special

# --------------------------------------------------------------------------- cards (1.3.6.d.3)

RANKS = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "V", "D", "R", "A")
"""Face values in code order: valet, dame, roi, as."""
SUITS = ("Trèfle", "Carreau", "Cœur", "Pique")
"""Suits in code order: a card's code is ``4 * rank index + suit index``."""


@dataclass(frozen=True, slots=True)
class Card:
    code: int
    rank: str
    suit: str

    def __str__(self) -> str:
        return f"{self.rank} de {self.suit}"


def decode_card(code: int) -> Card:
    """Annex 1.3.6.d.3: 0 = 2 de Trèfle, 1 = 2 de Carreau, …, 51 = As de Pique."""
    if not 0 <= code <= 51:
        raise ValueError(f"card code {code} is outside 0..51")
    return Card(code, RANKS[code // 4], SUITS[code % 4])


def _card_code(value: Any) -> int:
    code = _integer(value)
    if not 0 <= code <= 51:
        raise fail(ReasonCode.CARD_OUT_OF_RANGE, "card code {value} is outside 0..51", value=code)
    return code


CardCode = Annotated[int, BeforeValidator(_card_code)]


# --------------------------------------------------------------------------- rules (1.3.6.d.5)


@dataclass(frozen=True, slots=True)
class Variant:
    code: str
    name: str
    rounds: tuple[str, ...]


_HOLDEM_ROUNDS = ("bet", "pre-flop", "flop", "turn", "river", "reveal")
_STUD_ROUNDS = ("bet", "bring-in", "4th st", "5th st", "6th st", "7th st", "reveal")
VARIANTS: dict[str, Variant] = {
    v.code: v
    for v in (
        Variant("THL", "Texas Hold'em Limit", _HOLDEM_ROUNDS),
        Variant("THPL", "Texas Hold'em Pot Limit", _HOLDEM_ROUNDS),
        Variant("THNL", "Texas Hold'em No Limit", _HOLDEM_ROUNDS),
        Variant("O4HPL", "Omaha 4 High Pot Limit", _HOLDEM_ROUNDS),
        Variant("O4JL", "Omaha 4 High/Low Limit", _HOLDEM_ROUNDS),
        Variant("O4JPL", "Omaha 4 High/Low Pot Limit", _HOLDEM_ROUNDS),
        Variant("O5HPL", "Omaha 5 High Pot Limit", _HOLDEM_ROUNDS),
        Variant("7SHL", "7 Card Stud High Limit", _STUD_ROUNDS),
        Variant("7SJL", "7 Card Stud High/Low Limit", _STUD_ROUNDS),
        Variant("7SLL", "7 Card Stud Razz Limit", _STUD_ROUNDS),
        Variant(
            "2T7TD",
            "Triple Draw deuce to seven Lowball Limit",
            ("bet", "pre-draw", "1st draw", "2nd draw", "3rd draw", "reveal"),
        ),
    )
}
"""The variants of annex 1.3.6.d.5, under the codes the schema's ``canonical`` type allows."""


def normalize_regle(value: Any) -> str:
    """A ``Regle`` code: spaces removed, upper case, a leading zero read as the letter O.

    The annex's table prints ``05HPL`` (zero) for Omaha 5 and ``7S JL`` (with a space);
    the codes are ``O5HPL`` and ``7SJL``, in line with ``O4HPL``. Unknown codes are refused.
    """
    if not isinstance(value, str):
        raise fail(ReasonCode.UNKNOWN_REGLE, "Regle must be a code such as THNL")
    code = re.sub(r"\s+", "", value).upper()
    if code not in VARIANTS and code.startswith("0") and "O" + code[1:] in VARIANTS:
        code = "O" + code[1:]
    if code not in VARIANTS:
        raise fail(
            ReasonCode.UNKNOWN_REGLE,
            "Regle '{value}' is not a variant of annex 1.3.6.d.5 ({known})",
            value=value,
            known=", ".join(VARIANTS),
        )
    return code


RegleCode = Annotated[str, BeforeValidator(normalize_regle)]

# --------------------------------------------------------------------------- participants


class PlayerFinance(XmlModel):
    """poker:finance. The annex's example writes ``Stackin``/``Stackout``; the schema
    (and the annex's own table) ``CaveAvant``/``CaveApres``."""

    Net: Dec
    Total: NonNegDec
    CaveAvant: NonNegDec = spelled("CaveAvant", "Stackin")
    CaveApres: NonNegDec = spelled("CaveApres", "Stackout")
    Unite: Text | None = None
    Rake: NonNegDec | None = None


class Player(XmlModel):
    """poker:player: IDOper (an ARJEL-licensed operator's player) or Oper and Pays.

    ``Pays`` is mandatory in the schema; the annex makes it mandatory only without
    IDOper. A player with IDOper and no Pays is filled with ``FR``.
    """

    IDOper: OpId | None = None
    Oper: Text | None = None
    Pays: Country
    IDJoueur: Text
    IPJoueur: IP
    Siege: NonNegDec = spelled("Siege", "Slege")
    Inscription: Reference
    Finance: PlayerFinance

    @model_validator(mode="before")
    @classmethod
    def _operator_and_country(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        has_id = data.get("IDOper") is not None
        if has_id and data.get("Oper") is not None:
            raise fail(ReasonCode.CHOICE_CONFLICT, "IDOper and Oper are exclusive", path="Oper")
        if not has_id and data.get("Oper") is None:
            raise fail(ReasonCode.MISSING_ELEMENT, "IDOper (or Oper with Pays) is required", path="IDOper")
        if has_id and data.get("Pays") in (None, ""):
            return {**data, "Pays": "FR"}
        return data


def _at_least_two(players: list[Player]) -> list[Player]:
    if len(players) < 2:
        raise fail(
            ReasonCode.TOO_FEW_PARTICIPANTS,
            "a synthesis POJEU needs at least two participants, has {n}",
            n=len(players),
        )
    return players


class ParticipantList(XmlModel):
    Joueur: Annotated[list[Player], AfterValidator(_at_least_two)] = Field(default_factory=list)


# --------------------------------------------------------------------------- actions (1.3.6.d.2)

BET_TYPES = ("ante", "small blind", "big blind", "bring-in", "bet", "call", "raise", "allin")
BetType = Annotated[
    enum_type(BET_TYPES, ReasonCode.UNKNOWN_BET_TYPE, what="bet type"),  # type: ignore[misc]
    BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v),
]


class Check(XmlModel):
    """poker:action: the player at ``Siege`` checks (parole)."""

    xml_tag: ClassVar[str] = "Check"
    Siege: NonNegInt


class Fold(XmlModel):
    """poker:actionfold: the player folds, optionally showing (``Reveal``)."""

    xml_tag: ClassVar[str] = "Fold"
    Siege: NonNegInt
    Reveal: Boolean | None = None


class Bet(XmlModel):
    """poker:bet: a stake added to the pot by the player at ``Siege``."""

    xml_tag: ClassVar[str] = "Bet"
    name: Annotated[BetType, ATTRIBUTE]
    Siege: NonNegInt
    Valeur: NonNegDec


class _CardAction(XmlModel):
    """poker:card: ``Siege`` is optional only for a community card."""

    Siege: NonNegInt | None = None
    Valeur: CardCode

    @property
    def card(self) -> Card:
        return decode_card(self.Valeur)


class Draw(_CardAction):
    """poker:draw: a card dealt or drawn; ``ouverte`` face up, ``commune`` shared."""

    xml_tag: ClassVar[str] = "Draw"
    ouverte: AttributeSwitch = False
    commune: AttributeSwitch = False
    board: Annotated[NonNegInt | None, ATTRIBUTE] = None

    @model_validator(mode="after")
    def _seat_unless_common(self) -> Draw:
        if self.Siege is None and not self.commune:
            raise fail(
                ReasonCode.MISSING_SEAT,
                "a card that is not commune needs the Siege of its owner",
                path="Siege",
            )
        return self


class Discard(_CardAction):
    xml_tag: ClassVar[str] = "Discard"


class Reveal(_CardAction):
    xml_tag: ClassVar[str] = "Reveal"


def _action_tag(value: Any) -> str | None:
    if isinstance(value, XmlModel):
        return value.xml_tag
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value))
    return None


PokerAction = Annotated[
    Annotated[Bet, Tag("Bet")]
    | Annotated[Draw, Tag("Draw")]
    | Annotated[Check, Tag("Check")]
    | Annotated[Fold, Tag("Fold")]
    | Annotated[Discard, Tag("Discard")]
    | Annotated[Reveal, Tag("Reveal")],
    Discriminator(_action_tag),
]
"""The ``cercle:Action`` substitution group of poker."""


def _at_least_one_action(actions: list[Any]) -> list[Any]:
    if not actions:
        raise fail(ReasonCode.TOO_FEW_OCCURRENCES, "a Tour holds at least one action")
    return actions


class Round(XmlModel):
    """cercle:round: one betting round, its actions in the order they happened."""

    name: Annotated[Text, ATTRIBUTE]
    Timestamp: DateTime12
    Action: Annotated[list[PokerAction], AfterValidator(_at_least_one_action)] = Field(
        default_factory=list, validate_default=True
    )
    """At least one (annex 1.3.6.c.2): a ``Tour`` with no ``Action`` at all is refused like an empty one."""
    Total: NonNegDec | None = None


def _unique_names(tours: list[Round]) -> list[Round]:
    if not tours:
        raise fail(ReasonCode.TOO_FEW_OCCURRENCES, "a Jeu holds at least one Tour")
    seen: set[str] = set()
    for tour in tours:
        if tour.name in seen:
            raise fail(ReasonCode.DUPLICATE_TOUR_NAME, "two Tour are named '{name}'", name=tour.name)
        seen.add(tour.name)
    return tours


class Game(XmlModel):
    Tour: Annotated[list[Round], AfterValidator(_unique_names)] = Field(default_factory=list)


# --------------------------------------------------------------------------- the events


class POINSCRIT(Register):
    """Inscription d'un participant à un jeu de cercle (1.3.6.c.1)."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POINSCRIT"


class POACHAT(Special):
    """Achat en cours de jeu (1.3.6.c.4), such as a re-buy."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POACHAT"


EVENT_ALIASES["POCHAT"] = "POACHAT"  # decision 2016-064, article 2's table of types


class POGAIN(Special):
    """Gain en cours de jeu (1.3.6.c.5), such as a bounty."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POGAIN"


class POBILAN(Final):
    """Bilan financier d'un jeu de cercle (1.3.6.c.3)."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POBILAN"


class POANNUL(Cancel):
    """Annulation d'une participation (1.3.6.c.6)."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POANNUL"


class POJEU(CercleAnonymous):
    """Déroulement d'une partie (1.3.6.c.2): a synthesis event, recorded without acquittal."""

    family: ClassVar[str] = "PO"
    xml_tag: ClassVar[str] = "POJEU"
    Tech: Reference
    Pool: Reference
    Participants: ParticipantList
    Regle: RegleCode
    Description: Text
    Info: Text | None = None
    Jeu: Game

    @property
    def variant(self) -> Variant:
        return VARIANTS[self.Regle]
