"""Across the hands of one tournament (a ``Tech`` whose ``POINSCRIT`` Format begins with ``T``): blind
levels, the big blind's walk round the table, the heads-up change-over, starting stacks and the
chips in play. docs/money-trail.md ("Across the hands of a tournament") gives each rule's text and
the readings chosen; the codes:

- ``BLINDS_DECREASED``: a blind, ante or bring-in lower than at the previous hand of the same
  ``Regle`` at the same table (TDA 2024 r.23, RP-11; club rules 3.1);
- ``BLIND_DODGED``: the big blind skips a player who was at the table's previous hand and still
  plays (dead button: TDA r.32–34A; club rules 4.2);
- ``HEADS_UP_CHANGEOVER_WRONG``: the same, at the first hand of heads-up (TDA r.34B; club rules 4.3);
- ``STARTING_STACK_WRONG``: an inscription's first ``CaveAvant`` is not the starting stack (TDA r.8A);
- ``TOURNAMENT_CHIPS_WRONG``: once one inscription is left with chips, it does not hold every chip
  put in play (decree 2016-1326 art. 1 II 2°);
- ``HAND_OUT_OF_ORDER``: a hand starts before the previous hand of its table reached its last round
  (annex 1.3.6.c.2 ``Timestamp``; club rules 3.1).

POJEU names no table: a hand's table is the one whose latest hand shares the most participants
with it (same ``Inscription`` on the same ``Siege``), when that is more than half of the hand's
participants, at least two, and no other table shares as many. A rule that needs a previous hand or
the Tech's first hand that the audited events lack does not fire: it is counted in
:attr:`TournamentTrail.not_checked`.

The state is in the money trail's store (JSON-able values; keys begin with the coffre's prefix):

- ``tour/<Tech>``: Format, open registrations, starting stack, chips put in play, how many
  inscriptions hold chips, the tables alive and the next table number;
- ``tour/<Tech>|members``: the inscriptions that played (written when one enters);
- ``tour/<Tech>|ins|<oper>:<Inscription>``: the inscription's last stack, its table, whether it ended;
- ``tour/<Tech>|table|<id>``: the table's latest hand (seat -> inscription, its IDEvt and the start of
  its last round), its last blind hand and its last level per ``Regle``.

(A ``Tech`` never holds ``|``: types:reference.)

All of a Tech's keys are deleted when its last open registration is settled or cancelled.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from ..catalogue.base import Event
from ..catalogue.poker import POACHAT, POANNUL, POBILAN, POINSCRIT, POJEU, Bet, Player
from .findings import Finding, register
from .store import TrailStore
from .store import forget as _forget

register(
    "tournament",
    BLINDS_DECREASED="a tournament hand's small blind, big blind, ante or bring-in is lower than at the "
    "previous hand of that Regle at its table (TDA r.23, RP-11; club 3.1)",
    BLIND_DODGED="the big blind skips a player of the table's previous hand who still plays: it does not "
    "move to the next seat (dead button, TDA r.32-34A; club 4.2)",
    HEADS_UP_CHANGEOVER_WRONG="at the first hand of heads-up the big blind is not where the dead button "
    "puts it: a player posts it twice in a row (TDA r.34B; club 4.3)",
    STARTING_STACK_WRONG="an entry's first CaveAvant is not the tournament's starting stack (TDA r.8A)",
    TOURNAMENT_CHIPS_WRONG="once one inscription is left with chips, it does not hold every chip put in "
    "play (decree 2016-1326 art. 1 II 2°)",
    HAND_OUT_OF_ORDER="a hand starts before the previous hand of its table reached its last round: the "
    "hands of one table are dealt one after the other (annex 1.3.6.c.2 Timestamp; club 3.1)",
)

HAND_RULES = ("BLINDS_DECREASED", "BLIND_DODGED", "STARTING_STACK_WRONG", "HAND_OUT_OF_ORDER")
"""The rules a tournament hand is judged by across hands: each counted once per hand not checked."""
LEVEL_PARTS = ("small blind", "big blind", "ante", "bring-in")


def is_tournament(format_code: str) -> bool:
    """Annex 1.3.6.c.1: ``T[/d]`` and ``TDV`` are tournaments, ``CG`` a cash game."""
    return format_code.startswith("T")


def _who(joueur: Player) -> str:
    """An inscription's key: Inscription codes are unique per operator (annex 1.3.6.b)."""
    return f"{joueur.IDOper or joueur.Oper}:{joueur.Inscription}"


def forced_bets(event: POJEU) -> list[Bet]:
    """The Bets of the forced bets' round (``bet``) and a stud hand's bring-in."""
    out: list[Bet] = []
    for tour in event.Jeu.Tour[:2]:  # the forced bets' round first, a stud hand's bring-in next
        if tour.name in ("bet", "bring-in"):
            out += [a for a in tour.Action if isinstance(a, Bet) and a.name in LEVEL_PARTS]
    return out


def levels(event: POJEU, bets: list[Bet] | None = None) -> tuple[dict[str, str], str | None]:
    """The hand's level as its forced bets show it: part -> amount, for the parts posted by a player
    left with chips (a post all in for less does not show the level), and the ante's form
    (``bba``: the big blind alone posts it; ``each``). An ante absent is not read as nothing: some
    rooms drop it heads up (TDA r.34B's Texapoker note), and a short big blind skips it (RP-11)."""
    stacks = {int(j.Siege): j.Finance.CaveAvant for j in event.Participants.Joueur}
    bets = forced_bets(event) if bets is None else bets
    posted: dict[int, Decimal] = {}
    for b in bets:
        posted[int(b.Siege)] = posted.get(int(b.Siege), Decimal(0)) + b.Valeur
    out: dict[str, Decimal] = {}
    for b in bets:
        seat = int(b.Siege)
        if seat not in stacks or posted[seat] >= stacks[seat] or b.Valeur <= 0:
            continue
        out[b.name] = max(out.get(b.name, Decimal(0)), b.Valeur)
    ante_seats = {int(b.Siege) for b in bets if b.name == "ante"}
    big = {int(b.Siege) for b in bets if b.name == "big blind"}
    form = None if not ante_seats else "bba" if ante_seats == big else "each"
    return {k: str(v) for k, v in out.items()}, form


def big_blind_seat(bets: list[Bet]) -> int | None:
    """The seat of the hand's one ``big blind`` among its forced ``bets`` (None: none, or several)."""
    seats = [int(b.Siege) for b in bets if b.name == "big blind"]
    return seats[0] if len(seats) == 1 else None


class TournamentTrail:
    """Feed it a coffre's events in IDEvt order with the coffre's key prefix and whether its events so
    far are complete (from IDEvt 1, no gap); each :meth:`observe` returns the event's findings."""

    def __init__(self, store: TrailStore) -> None:
        self.store = store
        self.not_checked: Counter[str] = Counter()
        self.skipped_now: list[str] = []
        """The codes counted in :attr:`not_checked` since the caller emptied it (one per time)."""

    def _skip(self, code: str) -> None:
        self.not_checked[code] += 1
        self.skipped_now.append(code)

    def observe(self, prefix: str, event: Event, complete: bool) -> list[Finding]:
        if isinstance(event, POINSCRIT):
            self._register(prefix, event)
        elif isinstance(event, POJEU):
            return self._hand(prefix, event, complete)
        elif isinstance(event, POBILAN | POANNUL):
            return self._end(prefix, event, complete)
        elif isinstance(event, POACHAT):
            self._buy(prefix, event)
        return []

    # -------------------------------------------------------------------- registrations

    def _register(self, prefix: str, event: POINSCRIT) -> None:
        key = f"{prefix}tour/{event.Tech}"
        tech = self.store.get(key) or {"format": event.Format, "open": 0}
        self.store[key] = {**tech, "open": tech["open"] + 1}

    def _buy(self, prefix: str, event: POACHAT) -> None:
        """A buy-in before the inscription's first hand (an add-on at the start): its first CaveAvant
        then holds chips the event does not count (annex 1.3.6.c.4), and is not a starting stack."""
        tech_key = f"{prefix}tour/{event.Tech}"
        who = f"{event.IDOper}:{event.Inscription}"
        tech = self.store.get(tech_key)
        if tech is None or not is_tournament(tech["format"]) or self.store.get(f"{tech_key}|ins|{who}"):
            return
        self.store[f"{tech_key}|members"] = [*(self.store.get(f"{tech_key}|members") or []), who]
        self.store[f"{tech_key}|ins|{who}"] = {"stack": None, "bought": True}

    def _end(self, prefix: str, event: POBILAN | POANNUL, complete: bool) -> list[Finding]:
        tech_key = f"{prefix}tour/{event.Tech}"
        tech = self.store.get(tech_key)
        if tech is None:
            if isinstance(event, POBILAN) and event.Classement == 1:
                self._skip("TOURNAMENT_CHIPS_WRONG")  # the Tech's hands are not all here
            return []
        tech = dict(tech)
        findings: list[Finding] = []
        ins_key = f"{tech_key}|ins|{event.IDOper}:{event.Inscription}"
        known = self.store.get(ins_key)
        if isinstance(event, POBILAN) and event.Classement == 1 and is_tournament(tech["format"]):
            if not complete or "put" not in tech:
                self._skip("TOURNAMENT_CHIPS_WRONG")
            elif not tech.get("over"):
                held = Decimal(known["stack"] or 0) if known is not None else Decimal(0)
                findings += self._all_chips(event, tech, held, event.Inscription, event.IDJoueur)
                tech["over"] = True
        if known is not None and not known.get("ended"):
            stack = Decimal(known["stack"] or 0)
            if stack > 0:  # a player who leaves for good: the stack leaves play (club 1.7)
                tech["put"] = str(Decimal(tech["put"]) - stack)
                tech["holders"] -= 1
            self.store[ins_key] = {**known, "ended": True}
        tech["open"] -= 1
        if tech["open"] > 0:
            self.store[tech_key] = tech
            return findings
        for member in self.store.get(f"{tech_key}|members") or ():
            _forget(self.store, f"{tech_key}|ins|{member}")
        _forget(self.store, f"{tech_key}|members")
        for table in tech.get("tables", ()):
            _forget(self.store, f"{tech_key}|table|{table}")
        _forget(self.store, tech_key)
        return findings

    @staticmethod
    def _all_chips(
        event: Event, tech: dict[str, Any], held: Decimal, inscription: str, player: str | None
    ) -> list[Finding]:
        """Decree 2016-1326 art. 1 II 2°: the tournament ends when one player has won every chip."""
        put = Decimal(tech["put"])
        if held == put:
            return []
        others = tech["holders"] - (1 if held > 0 else 0)
        return [
            Finding(
                "TOURNAMENT_CHIPS_WRONG",
                f"{event.xml_tag} (IDEvt {event.id_evt}): Inscription {inscription} ends Tech "
                f"{getattr(event, 'Tech', '')} with {held} chips of the {put} in play (entries, re-buys "
                f"and stacks changed between hands, less the stacks of players who left)"
                + (f"; {others} other inscription(s) still hold chips" if others > 0 else "")
                + (f"; {tech['rake']} raked in its hands" if Decimal(tech.get("rake", 0)) else ""),
                player=player,
            )
        ]

    # -------------------------------------------------------------------- hands

    def _hand(self, prefix: str, event: POJEU, complete: bool) -> list[Finding]:
        tech_key = f"{prefix}tour/{event.Tech}"
        tech = self.store.get(tech_key)
        if tech is not None and not is_tournament(tech["format"]):
            return []  # a cash game: no levels, no starting stack
        if tech is None or not complete:
            # the Tech's registration (its Format) or earlier events are not among those audited
            for code in HAND_RULES:
                self._skip(code)
            return []
        tech = dict(tech)
        tech.setdefault("put", "0")
        tech.setdefault("holders", 0)
        tech.setdefault("rake", "0")
        tech.setdefault("tables", [])
        tech.setdefault("next", 1)
        joueurs = [(_who(j), j) for j in event.Participants.Joueur]
        seats = {str(int(j.Siege)): who for who, j in joueurs}
        records = {who: self.store.get(f"{tech_key}|ins|{who}") for who, _ in joueurs}
        bets = forced_bets(event)
        level, form = levels(event, bets)
        bb = big_blind_seat(bets)
        entering = [who for who, _ in joueurs if records[who] is None]
        if entering:  # the Tech's inscriptions that played, to forget them when it ends
            members = self.store.get(f"{tech_key}|members") or []
            self.store[f"{tech_key}|members"] = [*members, *entering]
        findings = self._stacks(event, tech, joueurs, records)
        table, table_id = self._table(tech_key, tech, seats, records)
        if table is None:
            if any(r is not None and r.get("table") for r in records.values()):  # seen at a table before
                self._skip("BLINDS_DECREASED")
                self._skip("BLIND_DODGED")
                self._skip("HAND_OUT_OF_ORDER")
            table = {"seats": seats, "levels": {}, "blind": None}
        else:
            findings += self._levels(event, table, level, form)
            findings += self._blinds(event, table, seats, bb)
            findings += _in_time_order(event, table)
        self._move(tech_key, tech, table_id, records)
        table = {
            "seats": seats,
            "levels": self._level_record(event, table["levels"], level, form),
            "blind": table["blind"] if bb is None else {"seats": seats, "bb": bb},
            **_last_round(event, table),
        }
        self.store[f"{tech_key}|table|{table_id}"] = table
        for who, j in joueurs:
            known = records[who] or {}
            self.store[f"{tech_key}|ins|{who}"] = {
                **known,
                "stack": str(j.Finance.CaveApres),
                "table": table_id,
            }
        if tech["holders"] == 1 and not tech.get("over"):
            last = next(
                (
                    j
                    for who, j in joueurs
                    if j.Finance.CaveApres > 0 and not (records[who] or {}).get("ended")
                ),
                None,
            )
            if last is not None:
                found = self._all_chips(event, tech, last.Finance.CaveApres, last.Inscription, last.IDJoueur)
                findings += found
                tech["over"] = bool(found)  # reported once; a re-buy may yet follow a false end
        self.store[tech_key] = tech
        return findings

    def _stacks(
        self,
        event: POJEU,
        tech: dict[str, Any],
        joueurs: list[tuple[str, Player]],
        records: dict[str, dict[str, Any] | None],
    ) -> list[Finding]:
        """Starting stacks (TDA r.8A) and the chips put in play: an entry's first CaveAvant, and
        whatever a stack gained between two hands (a re-buy's chips, or a stack changed without one,
        which the money trail reports as CAVE_CHAIN_BROKEN)."""
        findings: list[Finding] = []
        first = [j for who, j in joueurs if records[who] is None]
        if first and tech.get("stack") is None and "first" not in tech:
            # the Tech's first hand: its stack is the one most of its entries start with
            counts = Counter(j.Finance.CaveAvant for j in first).most_common()
            if len(counts) > 1 and counts[0][1] == counts[1][1]:
                findings.append(
                    Finding(
                        "STARTING_STACK_WRONG",
                        f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool}), the first hand of Tech {event.Tech}: "
                        f"its entries start with different stacks ("
                        + ", ".join(f"seat {int(j.Siege)}: {j.Finance.CaveAvant}" for j in first)
                        + ")",
                    )
                )
            else:
                tech["stack"] = str(counts[0][0])
            tech["first"] = event.id_evt
        for who, j in joueurs:
            known = records[who]
            before, after = j.Finance.CaveAvant, j.Finance.CaveApres
            last = Decimal(known["stack"]) if known is not None and known.get("stack") is not None else None
            if known is None or last is None:
                tech["put"] = str(Decimal(tech["put"]) + before)
                stack = tech.get("stack") if known is None else None  # (None: bought chips first)
                if stack is not None and before != Decimal(stack):
                    findings.append(
                        Finding(
                            "STARTING_STACK_WRONG",
                            f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool}): Inscription {j.Inscription} "
                            f"enters Tech {event.Tech} with CaveAvant {before}, not the starting stack {stack}",
                            seat=int(j.Siege),
                            player=j.IDJoueur,
                        )
                    )
            elif last is not None and before != last:
                tech["put"] = str(Decimal(tech["put"]) + before - last)
            had = last is not None and last > 0 and not (known or {}).get("ended")
            tech["holders"] += (after > 0) - had
            tech["rake"] = str(Decimal(tech["rake"]) + (j.Finance.Rake or 0))
        # chips are conserved within a hand but for its rake (the hand audit reports any other gap)
        gap = sum(j.Finance.CaveApres - j.Finance.CaveAvant + (j.Finance.Rake or 0) for _, j in joueurs)
        tech["put"] = str(Decimal(tech["put"]) + gap)
        return findings

    def _table(
        self,
        tech_key: str,
        tech: dict[str, Any],
        seats: dict[str, str],
        records: dict[str, dict[str, Any] | None],
    ) -> tuple[dict[str, Any] | None, str]:
        """The table whose latest hand this one follows (None: no table can be inferred; a new one's
        id), by the participants it shares on the same seats."""
        shared: Counter[str] = Counter()
        tables: dict[str, dict[str, Any]] = {}
        for seat, who in seats.items():
            record = records[who]
            table_id = record.get("table") if record else None
            if table_id is None:
                continue
            if table_id not in tables:
                tables[table_id] = self.store.get(f"{tech_key}|table|{table_id}") or {"seats": {}}
            if tables[table_id]["seats"].get(seat) == who:
                shared[table_id] += 1
        ranked = shared.most_common(2)
        if ranked:
            table_id, count = ranked[0]
            unique = len(ranked) == 1 or ranked[1][1] < count
            if unique and count >= 2 and 2 * count > len(seats):
                return tables[table_id], table_id
        table_id = f"t{tech['next']}"
        tech["next"] += 1
        tech["tables"] = [*tech["tables"], table_id]
        return None, table_id

    def _move(
        self, tech_key: str, tech: dict[str, Any], table_id: str, records: dict[str, dict[str, Any] | None]
    ) -> None:
        """Players now at ``table_id`` have left their former tables; a table left with fewer than
        two players is forgotten (it broke, or it is down to its winner)."""
        for who, record in records.items():
            old = (record or {}).get("table")
            if old is None or old == table_id:
                continue
            key = f"{tech_key}|table|{old}"
            table = self.store.get(key)
            if table is None:
                continue
            seats = {s: w for s, w in table["seats"].items() if w != who}
            if len(seats) >= 2:
                self.store[key] = {**table, "seats": seats}
            else:
                _forget(self.store, key)
                tech["tables"] = [t for t in tech["tables"] if t != old]

    @staticmethod
    def _level_record(
        event: POJEU, before: dict[str, Any], read: dict[str, str], form: str | None
    ) -> dict[str, Any]:
        """Per Regle, each part's last amount read (a part not read this hand keeps its last)."""
        kept = dict(before.get(event.Regle) or {})
        for part, amount in read.items():
            if part == "ante":  # one per form: the big blind's alone, or every seat's
                kept["ante"] = {**kept.get("ante", {}), str(form): amount}
            else:
                kept[part] = amount
        return {**before, event.Regle: kept}

    @staticmethod
    def _levels(event: POJEU, table: dict[str, Any], read: dict[str, str], form: str | None) -> list[Finding]:
        """TDA r.23 and club 3.1: a new level applies from the next hand; the levels only rise (a
        tournament's structure), and RP-11: antes are never reduced. Judged against the previous
        hand of the same Regle at the same table: hands of one table follow one another, while
        another table's hand that began before a level change may be recorded after one of the new
        level (and TDA r.23 lets an incoming dealer deal one more hand at the old level)."""
        before = (table.get("levels") or {}).get(event.Regle)
        if not before:
            return []
        lower = []
        for part, amount in read.items():
            if part == "ante":
                last = before.get("ante", {}).get(str(form))
                if last is not None and Decimal(amount) < Decimal(last):
                    lower.append(f"ante {amount} < {last}")
            elif part in before and Decimal(amount) < Decimal(before[part]):
                lower.append(f"{part} {amount} < {before[part]}")
        if not lower:
            return []
        return [
            Finding(
                "BLINDS_DECREASED",
                f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool}) of Tech {event.Tech} ({event.Regle}): "
                + ", ".join(lower)
                + " at the table's previous hand of that Regle",
                round="bet",
            )
        ]

    @staticmethod
    def _blinds(event: POJEU, table: dict[str, Any], seats: dict[str, str], bb: int | None) -> list[Finding]:
        """The dead button rule (TDA r.32, club 4.2): the big blind moves one seat a hand, to the next
        seat of this hand after the previous big blind's; none of the previous hand's players who
        still play may be passed over (TDA r.33: blinds may not be dodged). A player new to the table
        may take any seat, even the big blind's twice in a row (TDA r.10A, 11A; club 2.2): players
        new to the table are not judged. Heads up (TDA r.34B, club 4.3) the same walk puts the button
        before the last to pay the big blind: nobody pays it twice in a row."""
        previous = table.get("blind")
        if previous is None or bb is None or str(bb) not in seats:
            return []  # no blind hand before at the table; none or several big blinds, or a stranger's
        before: dict[str, str] = previous["seats"]
        last = int(previous["bb"])
        heads_up = len(seats) == 2 and len(before) > 2
        code = "HEADS_UP_CHANGEOVER_WRONG" if heads_up else "BLIND_DODGED"
        where = f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool}) of Tech {event.Tech}"
        player = {int(j.Siege): j.IDJoueur for j in event.Participants.Joueur}
        who = seats.get(str(bb))
        if who is not None and who == before.get(str(last)):
            return [
                Finding(
                    code,
                    f"{where}: seat {bb} ({who.split(':', 1)[1]}) posts the big blind again, as at the table's "
                    "previous hand",
                    round="bet",
                    seat=bb,
                    player=player.get(bb),
                )
            ]
        if bb == last:
            return []  # a player new to the seat (TDA r.11A)
        order = sorted(int(s) for s in seats)
        after = [s for s in order if s > last] + [s for s in order if s < last]
        passed = [s for s in after[: after.index(bb)] if seats[str(s)] in before.values()]
        if not passed:
            return []
        return [
            Finding(
                code,
                f"{where}: the big blind is posted by seat {bb}; after seat {last}'s at the table's previous "
                f"hand it falls to seat {passed[0]}, whose player ("
                + ", ".join(f"seat {s}: {seats[str(s)].split(':', 1)[1]}" for s in passed)
                + ") was at that hand and plays this one",
                round="bet",
                seat=passed[0],
                player=player.get(passed[0]),
            )
        ]


# ------------------------------------------------------------------------ time, across a table's hands


def _last_round(event: POJEU, previous: dict[str, Any]) -> dict[str, Any]:
    """What the table keeps of its latest hand for the next one's time: the latest start of its rounds
    (the hand ended at or after it) and its IDEvt. A hand stamped before the table's latest keeps the
    latest (the hands after it are judged against the table's true progress, not its error)."""
    stamps = [tour.Timestamp for tour in event.Jeu.Tour]
    if not stamps:
        return {k: previous[k] for k in ("end", "end_evt") if k in previous}
    end = max(stamps)
    if previous.get("end") is not None and previous["end"] > end:
        return {"end": previous["end"], "end_evt": previous["end_evt"]}
    return {"end": end, "end_evt": event.id_evt}


def _in_time_order(event: POJEU, table: dict[str, Any]) -> list[Finding]:
    """Annex 1.3.6.c.2: a Tour's ``Timestamp`` is « Date et heure du début du tour »; club rules 3.1:
    « Une main commence lorsque le pot précédent est attribué ». The hands of one table follow each
    other: a hand whose first round starts before the last round of the table's previous hand started
    is out of order (that hand had not ended). Hands of different tables may interleave; a table is
    the one :meth:`TournamentTrail._table` infers (a POJEU names none). Equal stamps are allowed: the
    annex stamps to the second."""
    end = table.get("end")
    if end is None or not event.Jeu.Tour:
        return []
    start = min(tour.Timestamp for tour in event.Jeu.Tour)
    if start >= end:
        return []
    return [
        Finding(
            "HAND_OUT_OF_ORDER",
            f"POJEU (IDEvt {event.id_evt}, Pool {event.Pool}) starts at {start}, before the last round of the "
            f"previous hand of its table (IDEvt {table.get('end_evt')}) started at {end}",
        )
    ]
