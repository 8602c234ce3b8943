"""What the regulator's console searches an event by: its facets, read from the event as declared.

One :class:`Facets` per recorded event: its type and date, the ``Tech``, ``Pool`` and
``Inscription`` it names, and one :class:`Party` per player it names (the player of a
``POINSCRIT``, ``POACHAT``…, with the balance after the operation; each participant of a ``POJEU``,
with the seat and the chips before and after the hand). Nothing here judges the event: the
findings do (coffre.domain.audit).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from .audit.single import balances
from .catalogue.base import Event
from .catalogue.poker import POJEU, Bet

MAX_TEXT = 512
"""Characters of an event's free text (``Description``, ``Info``…) kept for the full-text search."""
_TEXT_FIELDS = ("Description", "Info", "Desc", "Nom", "Libelle", "Motif")
_FORCED = ("blind", "blinde", "ante")


@dataclass(frozen=True, slots=True)
class Party:
    """A player an event names."""

    player: str
    hash_joueur: str | None = None
    inscription: str | None = None
    seat: Decimal | None = None
    before: Decimal | None = None
    """The balance (``SoldeAvant``) or, in a hand, the chips (``CaveAvant``) before."""
    after: Decimal | None = None
    """The balance (``SoldeApres``) or, in a hand, the chips (``CaveApres``) after."""
    ip: str | None = None
    """``IPJoueur``: the address the player played from (a hand's participant, a player event)."""
    session: str | None = None
    """``IDSession`` of a player event (a hand records none)."""
    place: int | None = None
    """``Classement``: the player's place in a tournament's result (``POBILAN``)."""


@dataclass(frozen=True, slots=True)
class Facets:
    type: str
    at: datetime
    """``DateEvt``, in UTC."""
    tech: str | None
    pool: str | None
    inscription: str | None
    parties: tuple[Party, ...]
    forced_bets: str | None
    """A hand's forced bets as declared (the blind level), such as ``10/20``; None elsewhere."""
    text: str
    """Free text of the event (``Description``, ``Info``…), for the full-text search."""
    game: str | None = None
    """A hand's variant (``Regle``, such as ``THNL``): a table may change game between hands."""


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COMPACT = {12: "%y%m%d%H%M%S", 10: "%y%m%d%H%M", 14: "%Y%m%d%H%M%S"}


def event_time(value: object) -> datetime:
    """``DateEvt`` as a UTC datetime: the schema's compact UTC forms (``aammjjhhmmss``…, as the
    catalogue keeps them) or xs:dateTime; :data:`EPOCH` for an event without one."""
    if isinstance(value, datetime):
        return utc(value)
    if value is None:
        return EPOCH
    text = str(value).strip()
    try:
        if text.isdigit() and len(text) in _COMPACT:
            return datetime.strptime(text, _COMPACT[len(text)]).replace(tzinfo=UTC)
        return utc(datetime.fromisoformat(text))
    except ValueError:
        return EPOCH


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


def _forced_bets(event: POJEU) -> str | None:
    """The values of the bets named as blinds or antes, written as a level reads: the small blind,
    the big blind, then the others (antes) in the order the hand posts them. Heads-up the big blind
    may be recorded first: "300/150" read as a level another table writes "150/300"."""
    bets = [
        action
        for tour in event.Jeu.Tour
        for action in tour.Action
        if isinstance(action, Bet) and any(word in (action.name or "").lower() for word in _FORCED)
    ]
    bets.sort(key=_level_place)  # stable: the posting order within each part
    return "/".join(format(bet.Valeur.normalize(), "f") for bet in bets) or None


def _level_place(bet: Bet) -> int:
    name = (bet.name or "").lower()
    return 0 if "small" in name or "petite" in name else 1 if "big" in name or "grosse" in name else 2


def event_facets(event: Event) -> Facets:
    """The facets of one (normalized) event."""
    tag: str = event.xml_tag  # type: ignore[attr-defined]
    at = event_time(getattr(event, "DateEvt", None))
    text = " ".join(str(v) for name in _TEXT_FIELDS if (v := getattr(event, name, None)) is not None)
    if isinstance(event, POJEU):
        parties = tuple(
            Party(
                p.IDJoueur,
                None,
                p.Inscription,
                p.Siege,
                p.Finance.CaveAvant,
                p.Finance.CaveApres,
                ip=_optional_text(p.IPJoueur),
            )
            for p in event.Participants.Joueur
        )
        return Facets(
            tag, at, event.Tech, event.Pool, None, parties, _forced_bets(event), text[:MAX_TEXT], event.Regle
        )
    parties = ()
    player = getattr(event, "IDJoueur", None)
    if player is not None:
        before = after = None
        for group, was, _movement, now in balances(event):
            if group.compartment == "solde":
                before, after = was, now
                break
        parties = (
            Party(
                str(player),
                _optional_text(getattr(event, "HashJoueur", None)),
                _optional_text(getattr(event, "Inscription", None)),
                None,
                before,
                after,
                ip=_optional_text(getattr(event, "IPJoueur", None)),
                session=_optional_text(getattr(event, "IDSession", None)),
                place=getattr(event, "Classement", None),
            ),
        )
    return Facets(
        tag,
        at,
        _optional_text(getattr(event, "Tech", None)),
        _optional_text(getattr(event, "Pool", None)),
        _optional_text(getattr(event, "Inscription", None)),
        parties,
        None,
        text[:MAX_TEXT],
    )


__all__ = ["EPOCH", "MAX_TEXT", "Facets", "Party", "event_facets", "event_time", "utc"]
