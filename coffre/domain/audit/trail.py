"""The money trail across events: each player's balances chain from one event to the next, and
each poker registration (``POINSCRIT``) is followed through its hands, buy-ins, gains and
settlement (``POBILAN``) or cancellation (``POANNUL``).

The state lives in a :class:`TrailStore` (key -> JSON-able value): a dict for ``coffre audit``,
the auditor's faust tables in the service. Keys begin with the coffre (``IDOper/IDCoffre/``),
so that one coffre's state lives where its events are (one partition). Feed one coffre's events
in IDEvt order. docs/money-trail.md describes each check, the texts it rests on and the bound:

- ``player/<IDJoueur>``: one small record per player (last balance and bonus after, HashJoueur);
  kept for as long as the coffre lives (a player's next event may come years later);
- ``ins/<Tech>|<Inscription>``: one record per registration while its ``Tech`` has a registration
  still open; ``tech/<Tech>``: the Tech's format, open count, members and final ranks. When the
  last open registration of a Tech is settled or cancelled, all of them are deleted and the Tech
  joins ``closed``, the last :data:`CLOSED_TECHS_KEPT` Techs closed (a later event of one of those
  is reported as such; of an older one, as an unknown registration: a finding either way).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Protocol

from ..catalogue.base import Event
from ..catalogue.poker import POACHAT, POANNUL, POBILAN, POGAIN, POINSCRIT, POJEU
from .findings import Finding, register
from .single import balances
from .tournament import TournamentTrail

register(
    "trail",
    BALANCE_CHAIN_BROKEN="a player's SoldeAvant is not the SoldeApres of that player's previous event",
    BONUS_CHAIN_BROKEN="a player's BonusAvant is not the BonusApres of that player's previous event",
    PARTICIPANT_NOT_REGISTERED="a POJEU participant of this operator has no POINSCRIT of that Tech and Inscription",
    INSCRIPTION_PLAYER_MISMATCH="an event names an Inscription registered (POINSCRIT) by another IDJoueur",
    CAVE_CHAIN_BROKEN="a participant's CaveAvant is not the CaveApres of that inscription's previous hand "
    "(no POACHAT between)",
    PLAY_AFTER_SETTLEMENT="a POJEU, POACHAT or POGAIN of an inscription after its POBILAN or POANNUL",
    OPERATION_OUTSIDE_PARTICIPATION="a POACHAT or POGAIN for an inscription with no POINSCRIT of that Tech",
    FORMAT_FORBIDS_OPERATION="a POACHAT (or POGAIN) in a tournament whose Format lacks A (or G)",
    REGISTRATION_REPEATED="a POINSCRIT for an Inscription of that Tech already registered",
    POBILAN_UNREGISTERED="a POBILAN for an inscription with no POINSCRIT of that Tech",
    POBILAN_REPEATED="a second POBILAN for one inscription, or a POBILAN after its POANNUL",
    CASH_GAME_BILAN_MISMATCH="a cash game's POBILAN does not pay out the chips the player left the table "
    "with (the last CaveApres)",
    RANKING_CONTRADICTS_ELIMINATIONS="a tournament's Classement ranks a player eliminated earlier above one "
    "eliminated later (or still holding chips)",
    POANNUL_UNREGISTERED="a POANNUL for an inscription with no POINSCRIT of that Tech",
    POANNUL_NOT_OPEN="a POANNUL for an inscription already cancelled or settled",
)
register(
    "identity",
    HASHJOUEUR_CHANGED="a player's HashJoueur differs from that player's previous event without a "
    "MODIFINFOPERSO between",
)

CLOSED_TECHS_KEPT = 4096
"""How many closed Techs a coffre remembers (their name and when they closed)."""

_OPEN, _SETTLED, _CANCELLED = "open", "settled", "cancelled"
_IDENTITY_EVENTS = frozenset({"OUVINFOPERSO", "MODIFINFOPERSO"})


class TrailStore(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...

    def __setitem__(self, key: str, value: Any) -> None: ...


def _forget(store: TrailStore, key: str) -> None:
    """Delete ``key`` where the store can (a dict, a faust table); else leave a null in its place."""
    try:
        del store[key]  # type: ignore[attr-defined]
    except KeyError:
        pass
    except (AttributeError, TypeError):
        store[key] = None


def is_cash_game(format_code: str) -> bool:
    return format_code == "CG"


def tournament_allows(format_code: str, flag: str) -> bool:
    """Whether a tournament's Format (``T/AG``, ``TDV``…) carries ``flag`` (A: buy-ins, G: gains)."""
    last = format_code.rsplit("/", 1)[-1] if "/" in format_code else ""
    return last.isalpha() and flag in last


class MoneyTrail:
    """Feed it a coffre's events in IDEvt order; each :meth:`observe` returns that event's findings."""

    def __init__(self, store: TrailStore | None = None) -> None:
        self.store: TrailStore = store if store is not None else {}
        self.tournament = TournamentTrail(self.store)
        self._seq: dict[str, tuple[int, bool]] = {}  # TOURNAMENT's stand-in for TRAIL's "complete"

    def observe(self, event: Event) -> list[Finding]:
        if getattr(event, "test", False) or getattr(event, "retransmission", False):
            return []  # a test is not to be counted; a retransmission repeats an event already seen
        prefix = f"{event.id_oper}/{event.id_coffre}/"
        findings = self._player(prefix, event)
        if isinstance(event, POJEU):
            findings += self._hand(prefix, event)
        elif isinstance(event, POINSCRIT):
            findings += self._register(prefix, event)
        elif isinstance(event, POACHAT | POGAIN):
            findings += self._during(prefix, event)
        elif isinstance(event, POBILAN):
            findings += self._settle(prefix, event)
        elif isinstance(event, POANNUL):
            findings += self._cancel(prefix, event)
        last, complete = self._seq.get(prefix, (0, True))
        self._seq[prefix] = (event.id_evt, complete and event.id_evt == last + 1)
        findings += self.tournament.observe(prefix, event, self._seq[prefix][1])
        return findings

    # -------------------------------------------------------------------- the player's account

    def _player(self, prefix: str, event: Event) -> list[Finding]:
        player = getattr(event, "IDJoueur", None)
        if player is None or isinstance(event, POJEU):
            return []
        key = f"{prefix}player/{player}"
        previous: dict[str, Any] = self.store.get(key) or {}
        state = dict(previous)
        findings: list[Finding] = []
        tag: str = event.xml_tag  # type: ignore[attr-defined]
        for group, before, _movement, after in balances(event):
            if group.compartment not in ("solde", "bonus"):
                continue
            last = previous.get(group.compartment)
            if last is not None and Decimal(last[0]) != before:
                code = "BALANCE_CHAIN_BROKEN" if group.compartment == "solde" else "BONUS_CHAIN_BROKEN"
                findings.append(
                    Finding(
                        code,
                        f"{group.before} {before} of {tag} (IDEvt {event.id_evt}) is not the "
                        f"{'SoldeApres' if group.compartment == 'solde' else 'BonusApres'} {last[0]} "
                        f"of IDEvt {last[1]}",
                        player=player,
                    )
                )
            state[group.compartment] = [str(after), event.id_evt]
        closing = getattr(event, "SoldeClos", None)
        if isinstance(closing, Decimal):  # CLOTUREDEM: the balance at closing
            last = previous.get("solde")
            if last is not None and Decimal(last[0]) != closing:
                findings.append(
                    Finding(
                        "BALANCE_CHAIN_BROKEN",
                        f"SoldeClos {closing} of {tag} (IDEvt {event.id_evt}) is not the SoldeApres "
                        f"{last[0]} of IDEvt {last[1]}",
                        player=player,
                    )
                )
            state["solde"] = [str(closing), event.id_evt]
        declared = getattr(event, "HashJoueur", None)
        if isinstance(declared, str):
            declared = declared.upper()
            last_hash = previous.get("hash")
            if last_hash is not None and last_hash[0] != declared and tag not in _IDENTITY_EVENTS:
                findings.append(
                    Finding(
                        "HASHJOUEUR_CHANGED",
                        f"HashJoueur {declared} of {tag} (IDEvt {event.id_evt}) differs from {last_hash[0]} "
                        f"of IDEvt {last_hash[1]}, with no MODIFINFOPERSO between",
                        player=player,
                    )
                )
            state["hash"] = [declared, event.id_evt]
        if state != previous:
            self.store[key] = state
        return findings

    # -------------------------------------------------------------------- poker registrations

    @staticmethod
    def _ins_key(prefix: str, tech: str, inscription: str) -> str:
        return f"{prefix}ins/{tech}|{inscription}"

    def _closed(self, prefix: str, tech: str) -> int | None:
        """The IDEvt that closed ``tech``, when it is among the Techs remembered as closed."""
        for name, id_evt in self.store.get(f"{prefix}closed") or ():
            if name == tech:
                return int(id_evt)
        return None

    def _register(self, prefix: str, event: POINSCRIT) -> list[Finding]:
        key = self._ins_key(prefix, event.Tech, event.Inscription)
        known = self.store.get(key)
        if known is not None:
            return [
                Finding(
                    "REGISTRATION_REPEATED",
                    f"POINSCRIT (IDEvt {event.id_evt}) of Inscription {event.Inscription} in Tech {event.Tech}: "
                    f"already registered at IDEvt {known['since']} ({known['state']})",
                    player=event.IDJoueur,
                )
            ]
        tech_key = f"{prefix}tech/{event.Tech}"
        tech = self.store.get(tech_key) or {"format": event.Format, "open": 0, "members": [], "ranks": []}
        tech = {**tech, "open": tech["open"] + 1, "members": [*tech["members"], event.Inscription]}
        self.store[tech_key] = tech
        self.store[key] = {
            "player": event.IDJoueur,
            "state": _OPEN,
            "since": event.id_evt,
            "cave": None,
            "rebuy": False,
            "out": None,
        }
        return []

    def _lookup(
        self, prefix: str, tech: str, inscription: str, player: str | None
    ) -> tuple[dict[str, Any] | None, list[Finding]]:
        """The registration's record (None when unknown) and, when it belongs to another player,
        the finding that says so."""
        known = self.store.get(self._ins_key(prefix, tech, inscription))
        if known is not None and player is not None and known["player"] != player:
            return known, [
                Finding(
                    "INSCRIPTION_PLAYER_MISMATCH",
                    f"Inscription {inscription} of Tech {tech} was registered by {known['player']}, "
                    f"not {player}",
                    player=player,
                )
            ]
        return known, []

    def _after_end(self, prefix: str, tech: str, inscription: str, what: str, player: str | None) -> Finding:
        closed = self._closed(prefix, tech)
        return Finding(
            "PLAY_AFTER_SETTLEMENT",
            f"{what} of Inscription {inscription} in Tech {tech} after the Tech closed "
            f"(its last POBILAN or POANNUL, IDEvt {closed})",
            player=player,
        )

    def _hand(self, prefix: str, event: POJEU) -> list[Finding]:
        findings: list[Finding] = []
        for joueur in event.Participants.Joueur:
            if joueur.IDOper != event.IDOper:
                continue  # another operator's player registers with that operator
            key = self._ins_key(prefix, event.Tech, joueur.Inscription)
            known, mismatch = self._lookup(prefix, event.Tech, joueur.Inscription, joueur.IDJoueur)
            findings += mismatch
            what = f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool})"
            if known is None:
                if self._closed(prefix, event.Tech) is not None:
                    findings.append(
                        self._after_end(prefix, event.Tech, joueur.Inscription, what, joueur.IDJoueur)
                    )
                else:
                    findings.append(
                        Finding(
                            "PARTICIPANT_NOT_REGISTERED",
                            f"{what}: participant {joueur.IDJoueur} at seat {joueur.Siege} plays Inscription "
                            f"{joueur.Inscription} with no POINSCRIT of Tech {event.Tech}",
                            seat=int(joueur.Siege),
                            player=joueur.IDJoueur,
                        )
                    )
                continue
            if known["state"] != _OPEN:
                findings.append(
                    Finding(
                        "PLAY_AFTER_SETTLEMENT",
                        f"{what}: Inscription {joueur.Inscription} plays after its "
                        f"{'POBILAN' if known['state'] == _SETTLED else 'POANNUL'} (IDEvt {known['ended']})",
                        seat=int(joueur.Siege),
                        player=joueur.IDJoueur,
                    )
                )
                continue
            finance = joueur.Finance
            if (
                known["cave"] is not None
                and not known["rebuy"]
                and Decimal(known["cave"]) != finance.CaveAvant
            ):
                findings.append(
                    Finding(
                        "CAVE_CHAIN_BROKEN",
                        f"{what}: CaveAvant {finance.CaveAvant} of Inscription {joueur.Inscription} is not "
                        f"the CaveApres {known['cave']} of its previous hand (IDEvt {known['hand']})",
                        seat=int(joueur.Siege),
                        player=joueur.IDJoueur,
                    )
                )
            # the hand that took the last chips (kept while the player stays out; a POACHAT clears it)
            out = (known["out"] or event.id_evt) if finance.CaveApres == 0 else None
            self.store[key] = {
                **known,
                "cave": str(finance.CaveApres),
                "hand": event.id_evt,
                "rebuy": False,
                "out": out,
            }
        return findings

    def _during(self, prefix: str, event: POACHAT | POGAIN) -> list[Finding]:
        tag = event.xml_tag
        key = self._ins_key(prefix, event.Tech, event.Inscription)
        known, findings = self._lookup(prefix, event.Tech, event.Inscription, event.IDJoueur)
        what = f"{tag} (IDEvt {event.id_evt})"
        if known is None:
            if self._closed(prefix, event.Tech) is not None:
                return [self._after_end(prefix, event.Tech, event.Inscription, what, event.IDJoueur)]
            return [
                Finding(
                    "OPERATION_OUTSIDE_PARTICIPATION",
                    f"{what} for Inscription {event.Inscription} with no POINSCRIT of Tech {event.Tech}",
                    player=event.IDJoueur,
                )
            ]
        if known["state"] != _OPEN:
            return [
                *findings,
                Finding(
                    "PLAY_AFTER_SETTLEMENT",
                    f"{what} for Inscription {event.Inscription} after its "
                    f"{'POBILAN' if known['state'] == _SETTLED else 'POANNUL'} (IDEvt {known['ended']})",
                    player=event.IDJoueur,
                ),
            ]
        tech = self.store.get(f"{prefix}tech/{event.Tech}") or {}
        format_code = tech.get("format", "")
        flag = "A" if isinstance(event, POACHAT) else "G"
        if format_code and not is_cash_game(format_code) and not tournament_allows(format_code, flag):
            findings.append(
                Finding(
                    "FORMAT_FORBIDS_OPERATION",
                    f"{what} in Tech {event.Tech}, a tournament of Format {format_code} "
                    f"(no {flag}: {'buy-ins' if flag == 'A' else 'gains'} during play not allowed)",
                    player=event.IDJoueur,
                )
            )
        if isinstance(event, POACHAT):
            self.store[key] = {**known, "rebuy": True, "out": None}
        return findings

    def _end(self, prefix: str, tech_name: str, inscription: str, state: str, id_evt: int) -> dict[str, Any]:
        """Mark the registration ended; close the Tech when none is open any more. The Tech's record."""
        tech_key = f"{prefix}tech/{tech_name}"
        tech = dict(self.store.get(tech_key) or {"format": "", "open": 1, "members": [], "ranks": []})
        tech["open"] = max(0, tech["open"] - 1)
        if tech["open"] > 0:
            known = self.store.get(self._ins_key(prefix, tech_name, inscription)) or {}
            self.store[self._ins_key(prefix, tech_name, inscription)] = {
                "player": known.get("player"),
                "state": state,
                "since": known.get("since"),
                "ended": id_evt,
            }
            self.store[tech_key] = tech
            return tech
        for member in tech["members"]:
            _forget(self.store, self._ins_key(prefix, tech_name, member))
        _forget(self.store, tech_key)
        closed = [c for c in self.store.get(f"{prefix}closed") or () if c[0] != tech_name]
        closed.append([tech_name, id_evt])
        self.store[f"{prefix}closed"] = closed[-CLOSED_TECHS_KEPT:]
        return tech

    def _ended_already(
        self, prefix: str, event: POBILAN | POANNUL, known: dict[str, Any] | None
    ) -> str | None:
        if known is not None:
            return (
                None
                if known["state"] == _OPEN
                else f"its {'POBILAN' if known['state'] == _SETTLED else 'POANNUL'} (IDEvt {known['ended']})"
            )
        closed = self._closed(prefix, event.Tech)
        return None if closed is None else f"the Tech closed (IDEvt {closed})"

    def _settle(self, prefix: str, event: POBILAN) -> list[Finding]:
        known, findings = self._lookup(prefix, event.Tech, event.Inscription, event.IDJoueur)
        what = f"POBILAN (IDEvt {event.id_evt}) of Inscription {event.Inscription} in Tech {event.Tech}"
        ended = self._ended_already(prefix, event, known)
        if ended is not None:
            return [*findings, Finding("POBILAN_REPEATED", f"{what} after {ended}", player=event.IDJoueur)]
        if known is None:
            return [Finding("POBILAN_UNREGISTERED", f"{what}: no POINSCRIT", player=event.IDJoueur)]
        tech = self.store.get(f"{prefix}tech/{event.Tech}") or {"format": "", "ranks": []}
        if is_cash_game(tech["format"]):
            findings += self._cash_out(event, known, what)
        elif event.Classement is not None:
            findings += self._ranking(prefix, event, known, tech, what)
        self._end(prefix, event.Tech, event.Inscription, _SETTLED, event.id_evt)
        return findings

    @staticmethod
    def _cash_out(event: POBILAN, known: dict[str, Any], what: str) -> list[Finding]:
        """In a cash game chips are money (annex 1.3.6.c.1, Format CG): the POBILAN pays out the chips
        the player left the table with, unless a POACHAT came after the last hand (its chips unknown)."""
        if known["cave"] is None or known["rebuy"]:
            return []
        paid = (event.SoldeMouvement or Decimal(0)) + (event.BonusMouvement or Decimal(0))
        if paid == Decimal(known["cave"]):
            return []
        return [
            Finding(
                "CASH_GAME_BILAN_MISMATCH",
                f"{what} pays {paid}; the player left the table with CaveApres {known['cave']} "
                f"(POJEU IDEvt {known['hand']})",
                player=event.IDJoueur,
            )
        ]

    def _ranking(
        self, prefix: str, event: POBILAN, known: dict[str, Any], tech: dict[str, Any], what: str
    ) -> list[Finding]:
        """A tournament's ranks follow its eliminations: a player out in an earlier hand ranks below one
        out in a later hand, and below one still holding chips (ties in one hand are not judged)."""
        assert event.Classement is not None
        rank = int(event.Classement)
        out = known["out"] if known["cave"] is not None else None
        playing = known["cave"] is not None and out is None
        findings: list[Finding] = []
        for other, other_rank, other_out, other_playing in tech["ranks"]:
            worse = None  # whether this player must rank below the other
            if out is not None and other_out is not None and out != other_out:
                worse = out < other_out
            elif out is not None and other_playing:
                worse = True
            elif playing and other_out is not None:
                worse = False
            if worse is None or (rank > other_rank) == worse:
                continue
            findings.append(
                Finding(
                    "RANKING_CONTRADICTS_ELIMINATIONS",
                    f"{what} ranks {rank}; Inscription {other} ranks {other_rank}, yet "
                    + (
                        f"{event.Inscription} was out at IDEvt {out}, "
                        + (
                            f"{other} at IDEvt {other_out}"
                            if other_out is not None
                            else f"{other} still had chips"
                        )
                        if out is not None
                        else f"{event.Inscription} still had chips and {other} was out at IDEvt {other_out}"
                    ),
                    player=event.IDJoueur,
                )
            )
        tech_key = f"{prefix}tech/{event.Tech}"
        self.store[tech_key] = {**tech, "ranks": [*tech["ranks"], [event.Inscription, rank, out, playing]]}
        return findings

    def _cancel(self, prefix: str, event: POANNUL) -> list[Finding]:
        known, findings = self._lookup(prefix, event.Tech, event.Inscription, event.IDJoueur)
        what = f"POANNUL (IDEvt {event.id_evt}) of Inscription {event.Inscription} in Tech {event.Tech}"
        ended = self._ended_already(prefix, event, known)
        if ended is not None:
            return [*findings, Finding("POANNUL_NOT_OPEN", f"{what} after {ended}", player=event.IDJoueur)]
        if known is None:
            return [Finding("POANNUL_UNREGISTERED", f"{what}: no POINSCRIT", player=event.IDJoueur)]
        self._end(prefix, event.Tech, event.Inscription, _CANCELLED, event.id_evt)
        return findings
