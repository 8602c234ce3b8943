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

import hashlib
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ..catalogue.base import Event
from ..catalogue.poker import POACHAT, POANNUL, POBILAN, POGAIN, POINSCRIT, POJEU
from .findings import Finding, register
from .single import balances
from .store import TrailStore
from .store import forget as _forget
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
    REFUND_MISMATCH="a POANNUL does not refund what its POINSCRIT took (annex 1.3.6.c.6)",
    REGISTRATION_NEVER_SETTLED="a tournament's winner was settled (POBILAN Classement 1) and an inscription "
    "of it never got its POBILAN nor a POANNUL by the end of the coffre (annex 1.3.6.c.3)",
    POOL_REUSED="two different POJEU under one Tech and Pool (annex 1.3.6.b: one Pool per partie)",
    REENTRY_FORBIDDEN="a second registration of one IDJoueur in a tournament whose Format lacks M "
    "(annex 1.3.6.c.1)",
)
register(
    "identity",
    HASHJOUEUR_CHANGED="a player's HashJoueur differs from that player's previous event without a "
    "MODIFINFOPERSO between",
)

CLOSED_TECHS_KEPT = 4096
"""How many closed Techs a coffre remembers (their name and when they closed)."""
POOLS_PER_CHUNK = 256
"""The Pools of an open Tech are listed (to be forgotten with it) in chunks of this many names, so
that one hand rewrites a small list, not every Pool of the Tech."""
POOLS_KEPT = 65536
"""At most this many Pools (rounded to whole chunks) are remembered per Tech, the latest: a cash table
that never empties does not grow without bound; a reuse of an older Pool goes unseen."""

_OPEN, _SETTLED, _CANCELLED = "open", "settled", "cancelled"
_IDENTITY_EVENTS = frozenset({"OUVINFOPERSO", "MODIFINFOPERSO"})


def is_cash_game(format_code: str) -> bool:
    return format_code == "CG"


def tournament_allows(format_code: str, flag: str) -> bool:
    """Whether a tournament's Format (``T/AG``, ``TDV``…) carries ``flag`` (A: buy-ins, G: gains)."""
    last = format_code.rsplit("/", 1)[-1] if "/" in format_code else ""
    return last.isalpha() and flag in last


def _amount(event: Event) -> Decimal | None:
    """What a PO event moved in the player's account (balance and bonus movements), None when it
    carries no complete group."""
    moved = [
        movement for group, _b, movement, _a in balances(event) if group.compartment in ("solde", "bonus")
    ]
    return sum(moved, Decimal(0)) if moved else None


def hand_fingerprint(event: POJEU) -> str:
    """A short digest of what a POJEU describes: its variant, its participants (player, seat,
    inscription, chips before and after) and when its first round began. Two POJEU of one partie
    (annex 1.3.6.b) give the same; two hands of a Tech do not (the chips, or the time, differ). Kept
    this small because it is computed for every hand."""
    first = event.Jeu.Tour[0].Timestamp if event.Jeu.Tour else ""
    parts = [
        (j.IDJoueur, j.Siege, j.Inscription, j.Finance.CaveAvant, j.Finance.CaveApres)
        for j in event.Participants.Joueur
    ]
    return hashlib.blake2b(f"{event.Regle}|{first}|{parts}".encode(), digest_size=8).hexdigest()


def _whereabouts(inscription: str, out: int | None, moment: list[int] | None, left: bool) -> str:
    """Where a ranked inscription stood, for RANKING_CONTRADICTS_ELIMINATIONS's message."""
    if left and moment is not None:
        return f"{inscription} left with chips after its hand of IDEvt {moment[0]}"
    if out is not None:
        return f"{inscription} was out at IDEvt {out}"
    return f"{inscription} still had chips"


class MoneyTrail:
    """Feed it a coffre's events in IDEvt order; each :meth:`observe` returns that event's findings.

    :attr:`not_checked` counts, per finding code, the times a rule could not be judged because the
    events it needs are not in the audited set ("context absent", issue 20 item 4): a coffre's
    context is complete while its events came from IDEvt 1 with no gap. :meth:`finish` is called at
    the end of a whole input (``coffre audit``), never by the streaming auditor."""

    def __init__(self, store: TrailStore | None = None) -> None:
        self.store: TrailStore = store if store is not None else {}
        self.not_checked: Counter[str] = Counter()
        self.not_checked_now: Counter[str] = Counter()
        """The counts of the last :meth:`observe` alone (the auditor's metric)."""
        self.tournament = TournamentTrail(self.store)
        self._complete = True
        self._gap = 0
        self._described_again = False

    def _skip(self, *codes: str) -> None:
        """The rules of ``codes`` could not be judged here: their context is absent."""
        for code in codes:
            self.not_checked[code] += 1
            self.not_checked_now[code] += 1

    def _context(self, prefix: str, id_evt: int) -> None:
        """Follow the coffre's IDEvt sequence: :attr:`_complete` (every event from 1, no gap so far) and
        :attr:`_gap` (the first IDEvt after the last gap: an event before it may have a missing one
        after it, so a chain from it to now cannot be judged)."""
        key = f"{prefix}ctx"
        state = self.store.get(key)
        if state is None:
            last, complete, gap = id_evt, id_evt == 1, id_evt
        else:
            last, complete, gap = state
            if id_evt == last + 1:
                last = id_evt
            elif id_evt > last + 1:
                last, complete, gap = id_evt, False, id_evt
            else:  # out of IDEvt order (or a repeat): nothing fed so far is known to be followed
                complete, gap = False, last + 1
        self.store[key] = [last, complete, gap]
        self._complete, self._gap = complete, gap

    def observe(self, event: Event) -> list[Finding]:
        self.not_checked_now = Counter()
        prefix = f"{event.id_oper}/{event.id_coffre}/"
        self._context(prefix, int(event.id_evt))
        if getattr(event, "test", False) or getattr(event, "retransmission", False):
            return []  # a test is not to be counted; a retransmission repeats an event already seen
        findings = self._player(prefix, event)
        self._described_again = False
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
        if self._described_again:
            return findings  # the tournament's checks followed that partie once too
        skipped = self.tournament.skipped_now = []
        findings += self.tournament.observe(prefix, event, self._complete)
        for code in skipped:
            self.not_checked[code] += 1
            self.not_checked_now[code] += 1
        return findings

    def finish(self) -> list[tuple[str, int, int, Finding]]:
        """At the end of a whole input (``coffre audit``; the streaming auditor never knows the end):
        ``REGISTRATION_NEVER_SETTLED`` for each inscription still open in a tournament whose winner was
        settled (a POBILAN with Classement 1: decree 2016-1326 art. 1 II 2°, the tournament ends when
        one player has won every stake). Annex 1.3.6.c.3: the POBILAN ends each participation, "un
        mouvement nul" when the player lost everything. (IDOper, IDCoffre, IDEvt of its POINSCRIT,
        finding) each; counted not checked in a coffre whose IDEvt had a gap."""
        keys: Iterable[str] = list(getattr(self.store, "keys", lambda: ())())
        out: list[tuple[str, int, int, Finding]] = []
        for key in keys:
            parts = key.split("/", 3)
            if len(parts) < 4 or parts[2] != "tech":
                continue
            tech = self.store.get(key)
            if not tech or tech.get("won") is None:
                continue
            prefix = f"{parts[0]}/{parts[1]}/"
            ctx = self.store.get(f"{prefix}ctx") or [0, False, 0]
            for member in tech["members"]:
                known = self.store.get(self._ins_key(prefix, parts[3], member))
                if not known or known["state"] != _OPEN:
                    continue
                if not ctx[1]:
                    self._skip("REGISTRATION_NEVER_SETTLED")  # its POBILAN may be among the missing events
                    continue
                state = "was out" if known.get("out") else "still held chips"
                out.append(
                    (
                        parts[0],
                        int(parts[1]),
                        int(known["since"]),
                        Finding(
                            "REGISTRATION_NEVER_SETTLED",
                            f"Inscription {member} of Tech {parts[3]} (POINSCRIT IDEvt {known['since']}) "
                            f"{state} and has no POBILAN nor POANNUL, though the winner was settled "
                            f"(POBILAN IDEvt {tech['won']}) and the coffre's events end at IDEvt {ctx[0]}",
                            player=known.get("player"),
                        ),
                    )
                )
        return out

    # -------------------------------------------------------------------- the player's account

    def _follows(self, last: list[Any] | None, code: str) -> bool:
        """Whether a chain from ``last`` ([value, IDEvt] of the player's previous event, None when none
        was seen) to now can be judged: no event missing between; else the rule is counted not checked."""
        if last is None:
            if not self._complete:
                self._skip(code)  # the previous event may be among the missing ones
            return False
        if int(last[1]) < self._gap:
            self._skip(code)
            return False
        return True

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
            code = "BALANCE_CHAIN_BROKEN" if group.compartment == "solde" else "BONUS_CHAIN_BROKEN"
            if self._follows(last, code) and Decimal(last[0]) != before:
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
            if self._follows(last, "BALANCE_CHAIN_BROKEN") and Decimal(last[0]) != closing:
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
            if (
                tag not in _IDENTITY_EVENTS
                and self._follows(last_hash, "HASHJOUEUR_CHANGED")
                and last_hash[0] != declared
            ):
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
        findings = self._reentry(prefix, event, tech)
        tech = {
            **tech,
            "open": tech["open"] + 1,
            "members": [*tech["members"], event.Inscription],
            "players": [*tech.get("players", ()), event.IDJoueur],
        }
        self.store[tech_key] = tech
        paid = _amount(event)
        self.store[key] = {
            "player": event.IDJoueur,
            "state": _OPEN,
            "since": event.id_evt,
            "cave": None,
            "rebuy": False,
            "out": None,
            "paid": None if paid is None else str(paid),
            "bought": "0",
            "gained": "0",
        }
        return findings

    def _reentry(self, prefix: str, event: POINSCRIT, tech: dict[str, Any]) -> list[Finding]:
        """Annex 1.3.6.c.1: "Le participant peut s'inscrire une ou plusieurs fois à un jeu de cercle si
        le format le lui autorise"; the tournament Format's ``M`` is "tournoi multi-entrée". A cash
        game (CG) has no such rule. A registration cancelled (POANNUL) does not count."""
        format_code = tech.get("format") or event.Format
        if is_cash_game(format_code) or tournament_allows(format_code, "M"):
            return []
        if event.IDJoueur not in tech.get("players", ()):
            if not self._complete:
                self._skip("REENTRY_FORBIDDEN")  # the first registration may be among the missing events
            return []
        return [
            Finding(
                "REENTRY_FORBIDDEN",
                f"POINSCRIT (IDEvt {event.id_evt}) of Inscription {event.Inscription}: {event.IDJoueur} is "
                f"already registered in Tech {event.Tech}, a tournament of Format {format_code} (no M: "
                "not multi-entry)",
                player=event.IDJoueur,
            )
        ]

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
        findings, again = self._pool(prefix, event)
        self._described_again = again
        if again:
            return findings  # the partie described again (annex 1.3.6.b): its chips were followed once
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
                elif not self._complete:
                    self._skip("PARTICIPANT_NOT_REGISTERED")  # the POINSCRIT may be among the missing events
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
            if known["rebuy"]:
                pass  # a POACHAT's chips are not stated (1.3.6.d.4)
            elif int(known["hand"] if known["cave"] is not None else known["since"]) < self._gap:
                self._skip("CAVE_CHAIN_BROKEN")  # the previous hand may be among the missing events
            elif known["cave"] is not None and Decimal(known["cave"]) != finance.CaveAvant:
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
            # the stack at the start of the hand that took the last chips (club rules 1.8)
            stack = (known.get("stack") if known["out"] else str(finance.CaveAvant)) if out else None
            self.store[key] = {
                **known,
                "cave": str(finance.CaveApres),
                "hand": event.id_evt,
                "rebuy": False,
                "out": out,
                "stack": stack,
            }
        return findings

    def _pool(self, prefix: str, event: POJEU) -> tuple[list[Finding], bool]:
        """Annex 1.3.6.b: "Chaque partie d'un même jeu de cercle (code Tech identique) dispose d'un code
        Pool qui est unique. Si plusieurs POJEU décrivent une même partie, chaque POJEU utilise le même
        code Pool." Two POJEU under one Tech and Pool must describe one partie: the same
        :func:`hand_fingerprint`. Remembered while the Tech is open, forgotten when it closes. The
        findings, and whether the POJEU describes again a partie already seen."""
        tech_key = f"{prefix}tech/{event.Tech}"
        key = f"{prefix}pool/{event.Tech}|{event.Pool}"
        seen = self.store.get(key) if self.store.get(tech_key) is not None else None
        if seen is None and not self._complete:
            self._skip("POOL_REUSED")  # the other POJEU of the Pool may be among the missing events
        if self.store.get(tech_key) is None:
            return [], False  # no open Tech to remember it with (its registrations unseen, or it closed)
        digest = hand_fingerprint(event)
        if seen is not None:
            if seen[1] == digest:
                return [], True  # the same partie described again
            return [
                Finding(
                    "POOL_REUSED",
                    f"POJEU (IDEvt {event.id_evt}) of Tech {event.Tech} uses Pool {event.Pool}, the Pool of the "
                    f"different POJEU IDEvt {seen[0]}",
                )
            ], False
        self.store[key] = [event.id_evt, digest]
        index_key = f"{prefix}pools/{event.Tech}"
        index = self.store.get(index_key) or {"chunks": 0, "names": []}
        names = [*index["names"], str(event.Pool)]
        if len(names) >= POOLS_PER_CHUNK:
            self.store[f"{index_key}/{index['chunks']}"] = names
            index = {**index, "chunks": index["chunks"] + 1, "names": []}
            first = index.get("first", 0)
            if (index["chunks"] - first) * POOLS_PER_CHUNK > POOLS_KEPT:  # forget the oldest chunk
                self._forget_chunk(prefix, event.Tech, first)
                index["first"] = first + 1
        else:
            index = {**index, "names": names}
        self.store[index_key] = index
        return [], False

    def _forget_chunk(self, prefix: str, tech: str, chunk: int) -> None:
        key = f"{prefix}pools/{tech}/{chunk}"
        for name in self.store.get(key) or ():
            _forget(self.store, f"{prefix}pool/{tech}|{name}")
        _forget(self.store, key)

    def _forget_pools(self, prefix: str, tech: str) -> None:
        index_key = f"{prefix}pools/{tech}"
        index = self.store.get(index_key)
        if index is None:
            return
        for chunk in range(index.get("first", 0), index["chunks"]):
            self._forget_chunk(prefix, tech, chunk)
        for name in index["names"]:
            _forget(self.store, f"{prefix}pool/{tech}|{name}")
        _forget(self.store, index_key)

    def _during(self, prefix: str, event: POACHAT | POGAIN) -> list[Finding]:
        tag = event.xml_tag
        key = self._ins_key(prefix, event.Tech, event.Inscription)
        known, findings = self._lookup(prefix, event.Tech, event.Inscription, event.IDJoueur)
        what = f"{tag} (IDEvt {event.id_evt})"
        if known is None:
            if self._closed(prefix, event.Tech) is not None:
                return [self._after_end(prefix, event.Tech, event.Inscription, what, event.IDJoueur)]
            if not self._complete:
                self._skip("OPERATION_OUTSIDE_PARTICIPATION")
                return []
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
        moved = _amount(event) or Decimal(0)
        if isinstance(event, POACHAT):
            bought = str(Decimal(known.get("bought", "0")) + moved)
            self.store[key] = {**known, "rebuy": True, "out": None, "stack": None, "bought": bought}
        else:
            self.store[key] = {**known, "gained": str(Decimal(known.get("gained", "0")) + moved)}
        return findings

    def _end(self, prefix: str, tech_name: str, inscription: str, state: str, id_evt: int) -> dict[str, Any]:
        """Mark the registration ended; close the Tech when none is open any more. The Tech's record."""
        tech_key = f"{prefix}tech/{tech_name}"
        tech = dict(self.store.get(tech_key) or {"format": "", "open": 1, "members": [], "ranks": []})
        tech["open"] = max(0, tech["open"] - 1)
        if tech["open"] > 0:
            known = self.store.get(self._ins_key(prefix, tech_name, inscription)) or {}
            players = list(tech.get("players", ()))
            if state == _CANCELLED and known.get("player") in players:
                players.remove(known["player"])  # a cancelled registration is no entry (REENTRY_FORBIDDEN)
                tech["players"] = players
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
        self._forget_pools(prefix, tech_name)
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
            if not self._complete:
                self._skip("POBILAN_UNREGISTERED")
                return []
            return [Finding("POBILAN_UNREGISTERED", f"{what}: no POINSCRIT", player=event.IDJoueur)]
        tech = self.store.get(f"{prefix}tech/{event.Tech}") or {"format": "", "ranks": []}
        if is_cash_game(tech["format"]):
            findings += self._cash_out(event, known, what)
        elif event.Classement is not None:
            findings += self._ranking(prefix, event, known, tech, what)
            if int(event.Classement) == 1 and tech.get("format"):
                # the winner is settled: the tournament is over (decree 2016-1326 art. 1 II 2°)
                tech_key = f"{prefix}tech/{event.Tech}"
                self.store[tech_key] = {**(self.store.get(tech_key) or tech), "won": event.id_evt}
        self._end(prefix, event.Tech, event.Inscription, _SETTLED, event.id_evt)
        return findings

    def _cash_out(self, event: POBILAN, known: dict[str, Any], what: str) -> list[Finding]:
        """In a cash game chips are money (annex 1.3.6.c.1, Format CG): the POBILAN pays out the chips
        the player left the table with, unless a POACHAT came after the last hand (its chips unknown)."""
        if known["cave"] is None or known["rebuy"]:
            return []
        paid = (event.SoldeMouvement or Decimal(0)) + (event.BonusMouvement or Decimal(0))
        if paid == Decimal(known["cave"]):
            return []
        if int(known["hand"]) < self._gap:
            self._skip("CASH_GAME_BILAN_MISMATCH")  # a later hand or a buy-in may be among the missing events
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
        """A tournament's ranks follow its eliminations (decree 2016-1326 art. 1 II 2°): a player out in
        an earlier hand ranks below one out in a later hand, and below one still holding chips. Players
        out in the same hand (club rules 1.8 "celui qui possédait le plus gros tapis au début du coup
        sera le mieux classé. S'ils possédaient le même tapis ils sont alors considérés comme ex
        æquo"): the bigger stack at the start of that hand does not rank below the smaller, equal
        stacks rank equal. An equal Classement for different stacks is accepted: TDA RP-8 has players
        out in one hand-for-hand hand share the place. Judged only between inscriptions whose every
        event since their POINSCRIT was seen (no gap in the coffre's IDEvt after it)."""
        assert event.Classement is not None
        rank = int(event.Classement)
        out = known["out"] if known["cave"] is not None else None
        left = known["cave"] is not None and out is None and Decimal(known["cave"]) > 0
        if left:
            # club rules 1.7: a player who leaves the tournament with chips « est classé comme sortant au
            # moment de sa sortie », after the last hand he played and before the next one (its stack
            # is taken out of play, as TOURNAMENT_CHIPS_WRONG counts it)
            moment: list[int] | None = [int(known["hand"] if known.get("hand") else known["since"]), 1]
        else:
            moment = [int(out), 0] if out is not None else None
        playing = known["cave"] is not None and out is None and not left
        stack = known.get("stack") if out is not None else None
        sure = int(known["since"]) >= self._gap
        findings: list[Finding] = []
        skipped = not sure
        for entry in tech["ranks"] if sure else ():
            other, other_rank, other_out, other_playing = entry[:4]
            other_stack, other_sure = (entry[4], entry[5]) if len(entry) >= 6 else (None, True)
            other_moment = (
                entry[6] if len(entry) >= 7 else ([other_out, 0] if other_out is not None else None)
            )
            if not other_sure:
                skipped = True
                continue
            worse = None  # whether this player must rank below the other
            tie = ""
            if left or (len(entry) >= 7 and entry[7]):
                # one of the two left with chips: whoever went out (or left) first ranks below; two who
                # left after the same hand are not judged (the ranks of a deal are the players')
                if moment is not None and other_moment is not None and moment != other_moment:
                    worse = moment < other_moment
                elif moment is not None and other_playing:
                    worse = True
            elif out is not None and other_out is not None and out != other_out:
                worse = out < other_out
            elif out is not None and other_playing:
                worse = True
            elif playing and other_out is not None:
                worse = False
            elif out is not None and out == other_out and stack is not None and other_stack is not None:
                mine, theirs = Decimal(stack), Decimal(other_stack)
                tie = f" in the same hand, with {mine} and {theirs} chips at its start"
                if mine == theirs:
                    if rank != other_rank:
                        findings.append(
                            Finding(
                                "RANKING_CONTRADICTS_ELIMINATIONS",
                                f"{what} ranks {rank}; Inscription {other} ranks {other_rank}, yet both were "
                                f"out at IDEvt {out}{tie}: equal stacks rank ex aequo (club rules 1.8)",
                                player=event.IDJoueur,
                            )
                        )
                    continue
                if rank == other_rank:
                    continue  # sharing the place (TDA RP-8)
                worse = mine < theirs
            if worse is None or (rank > other_rank) == worse:
                continue
            findings.append(
                Finding(
                    "RANKING_CONTRADICTS_ELIMINATIONS",
                    f"{what} ranks {rank}; Inscription {other} ranks {other_rank}, yet "
                    f"{_whereabouts(event.Inscription, out, moment, left)}, "
                    f"{_whereabouts(other, other_out, other_moment, len(entry) >= 8 and entry[7])}{tie}",
                    player=event.IDJoueur,
                )
            )
        if skipped:
            self._skip("RANKING_CONTRADICTS_ELIMINATIONS")  # an elimination (or a re-buy) may be missing
        tech_key = f"{prefix}tech/{event.Tech}"
        entry = [event.Inscription, rank, out, playing, stack, sure, moment, left]
        self.store[tech_key] = {**tech, "ranks": [*tech["ranks"], entry]}
        return findings

    def _cancel(self, prefix: str, event: POANNUL) -> list[Finding]:
        known, findings = self._lookup(prefix, event.Tech, event.Inscription, event.IDJoueur)
        what = f"POANNUL (IDEvt {event.id_evt}) of Inscription {event.Inscription} in Tech {event.Tech}"
        ended = self._ended_already(prefix, event, known)
        if ended is not None:
            return [*findings, Finding("POANNUL_NOT_OPEN", f"{what} after {ended}", player=event.IDJoueur)]
        if known is None:
            if not self._complete:
                self._skip("POANNUL_UNREGISTERED", "REFUND_MISMATCH")
                return []
            return [Finding("POANNUL_UNREGISTERED", f"{what}: no POINSCRIT", player=event.IDJoueur)]
        findings += self._refund(event, known, what)
        self._end(prefix, event.Tech, event.Inscription, _CANCELLED, event.id_evt)
        return findings

    def _refund(self, event: POANNUL, known: dict[str, Any], what: str) -> list[Finding]:
        """Annex 1.3.6.c.6: the POANNUL "a charge de refléter le remboursement de l'inscription"; 1.3.6.a:
        "les sommes engagées sont remboursées selon les conditions prévues. L'utilisation d'un événement
        CPTAJUSTOPE en complément de POANNUL peut être nécessaire pour compenser les achats (POACHAT)
        ou gains (POGAIN) intermédiaires". The refund (balance + bonus movements) is the registration's
        amount; or that plus the buy-ins, or plus the buy-ins less the gains, for an operator that
        settles them in the POANNUL rather than with a CPTEAJUSTOPE (which names no Tech nor
        Inscription, so the trail cannot tie it to the cancellation)."""
        refund = _amount(event)
        if refund is None or known.get("paid") is None:
            return []  # a movement not declared: nothing to compare
        paid = Decimal(known["paid"])
        bought = Decimal(known.get("bought", "0"))
        gained = Decimal(known.get("gained", "0"))
        if refund in (paid, paid + bought, paid + bought - gained):
            return []
        if int(known["since"]) < self._gap:
            self._skip("REFUND_MISMATCH")  # a buy-in or gain of the inscription may be missing
            return []
        extra = f" (+ buy-ins {bought}, − gains {gained})" if bought or gained else ""
        return [
            Finding(
                "REFUND_MISMATCH",
                f"{what} refunds {refund}; its POINSCRIT (IDEvt {known['since']}) took {paid}{extra}",
                player=event.IDJoueur,
            )
        ]
