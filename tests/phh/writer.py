"""PHH hand -> POJEU JSON dict (annex 1.3.6.c.2), written from the hand history alone.

This writer is the tests' oracle, so it shares nothing with what it tests: no coffre module
(coffre/domain/audit/play.py writes coffre's own hands) and no pokerkit. Every amount is
arithmetic on what the PHH text says; the outcome (``CaveApres``) is the dataset's own
``finishing_stacks``, never computed by an engine. A hand the annex cannot express raises
``Skip`` with the reason, counted by the tests.

Conventions followed (docs/hand-audit.md, "Interpretations"; annex 1.3.6.d.3 and 1.3.6.d.5):

- Rounds: ``bet`` holds the antes and the blinds (stud: the antes only); then the variant's
  rounds (hold'em and Omaha ``pre-flop``, ``flop``, ``turn``, ``river``; stud ``bring-in``,
  ``4th st``…``7th st``; triple draw ``pre-draw``, ``1st draw``…``3rd draw``); ``reveal`` last.
  A round with no action is left out.
- Cards: ``4 × rank + suit``, rank 2 = 0 … ace = 12, suits trèfle, carreau, cœur, pique = c d h s.
  Hole cards are ``Draw`` with ``Siege``; board cards ``Draw`` ``commune`` and ``ouverte``; stud's
  up cards (3rd to 6th street's third to sixth card) ``ouverte``. In a draw round each seat's
  ``Discard`` of every card thrown, then the ``Draw`` of each replacement, then the betting.
- Bets: ``Valeur`` is what the action adds. ``ante``, ``small blind``, ``big blind``,
  ``bring-in``; ``bet`` when the round has no bet yet (the blinds and the bring-in count as one),
  ``raise`` facing one, ``call``, and ``allin`` for any action that puts the last chip in.
- Uncalled bets: at the end of each betting round (the blinds count with the first, the antes
  apart), what the biggest contributor put in above the next one comes back, taken from that
  player's latest Bets first: ``Tour.Total`` and ``Finance.Total`` are net of it.
- Finance: ``CaveAvant`` = ``starting_stacks``, ``CaveApres`` = ``finishing_stacks`` (the dataset's),
  ``Net`` = their difference, ``Total`` = the player's Bets net of what came back. Pluribus and the
  WSOP carry no rake: a hand whose finishing stacks do not add up to its starting stacks is skipped,
  never given an invented rake. A handhq hand has no finishing stacks but the room's ``winnings``
  (what each player collected, net of the rake): ``CaveApres`` = ``CaveAvant`` − ``Total`` +
  winnings, and the pot less the winnings is the ``Rake``, on the one winner (a hand with a raked
  split pot, or whose winnings exceed the pot, is skipped). A hand everyone but one player folds
  before the flop needs no engine: that player takes the pot, unraked (no flop, no drop), which
  completes a room's record of nothing (or of 0, a defect of the PokerStars and Full Tilt logs) and
  reads one that counts the returned big blind of a walk as won. Other hands with no outcome are
  skipped: it would have to be computed, by an engine.
- Unknown cards (``??``) of a player who never shows them and discards none of them are filled
  with cards of the deck that appear nowhere in the hand (lowest codes first); such a player's
  cards change nothing the audit can check (a folded or mucked hand). Stud up cards are never
  filled (they decide who brings in and who acts first): such a hand is skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

REGLE: dict[str, str] = {
    "NT": "THNL",
    "FT": "THL",
    "PO": "O4HPL",
    "FO/8": "O4JL",
    "F7S": "7SHL",
    "F7S/8": "7SJL",
    "FR": "7SLL",
    "F2L3D": "2T7TD",
}
"""PHH variant code -> annex 1.3.6.d.5 Regle. The dataset's other variants (no-limit 2-7 single
draw ``N2L1D``, badugi ``FB``, short-deck ``NS``) have no Regle."""

NAME: dict[str, str] = {
    "THNL": "Texas Hold'em No Limit",
    "THL": "Texas Hold'em Limit",
    "O4HPL": "Omaha 4 High Pot Limit",
    "O4JL": "Omaha 4 High/Low Limit",
    "7SHL": "7 Card Stud High Limit",
    "7SJL": "7 Card Stud High/Low Limit",
    "7SLL": "7 Card Stud Razz Limit",
    "2T7TD": "Triple Draw deuce to seven Lowball Limit",
}

KIND = {r: "stud" if r.startswith("7S") else "draw" if r == "2T7TD" else "board" for r in NAME}
ROUNDS = {
    "board": ("pre-flop", "flop", "turn", "river"),
    "stud": ("bring-in", "4th st", "5th st", "6th st", "7th st"),
    "draw": ("pre-draw", "1st draw", "2nd draw", "3rd draw"),
}
RANKS = "23456789TJQKA"
SUITS = "cdhs"
UP_CARDS = {2, 3, 4, 5}
"""Stud: the third to sixth cards a player is dealt are dealt face up."""


class Skip(Exception):
    """The hand cannot be written as a POJEU the annex allows; ``reason`` is short and stable (the
    tests count hands by reason)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def card_code(card: str) -> int:
    """``Jh`` -> 38 (annex 1.3.6.d.3: 4 × rank + suit)."""
    return 4 * RANKS.index(card[0].upper()) + SUITS.index(card[1].lower())


def _cards(text: str) -> list[int | None]:
    """``AhKs??`` -> [50, 47, None]."""
    if text in ("", "-", "#"):
        return []
    if len(text) % 2:
        raise Skip("unreadable cards", text)
    out: list[int | None] = []
    for i in range(0, len(text), 2):
        c = text[i : i + 2]
        out.append(None if c == "??" else card_code(c))
    return out


def amount(value: Decimal) -> str:
    return format(value, "f")


@dataclass
class _Bet:
    tour: int
    value: Decimal


@dataclass
class _Writer:
    regle: str
    n: int
    seats: list[int]
    start: list[Decimal]
    kind: str = ""
    tours: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    totals: list[Decimal] = field(default_factory=list)
    stack: list[Decimal] = field(default_factory=list)
    paid: list[Decimal] = field(default_factory=list)
    returned: list[Decimal] = field(default_factory=list)
    folded: set[int] = field(default_factory=set)
    street: int = -1
    street_bets: list[Decimal] = field(default_factory=list)
    street_log: list[list[_Bet]] = field(default_factory=list)
    dealt: list[int] = field(default_factory=list)
    dealt_in_street: set[int] = field(default_factory=set)
    acted_in_street: bool = False
    discarded_in_street: set[int] = field(default_factory=set)
    draw_block: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    reveals: list[dict[str, Any]] = field(default_factory=list)
    placeholders: list[tuple[dict[str, Any], int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kind = KIND[self.regle]
        self.stack = list(self.start)
        self.paid = [Decimal(0)] * self.n
        self.returned = [Decimal(0)] * self.n
        self.street_bets = [Decimal(0)] * self.n
        self.street_log = [[] for _ in range(self.n)]
        self.dealt = [0] * self.n
        self.tours = [("bet", [])]
        self.totals = [Decimal(0)]

    # ------------------------------------------------------------------ money

    def put(self, p: int, name: str, value: Decimal, *, forced_ante: bool = False) -> None:
        if value > self.stack[p]:
            raise Skip("bet exceeds stack", f"p{p + 1} {name} {value} of {self.stack[p]}")
        tour = len(self.tours) - 1
        self.tours[tour][1].append({"Bet": {"name": name, "Siege": self.seats[p], "Valeur": amount(value)}})
        self.totals[tour] += value
        self.stack[p] -= value
        self.paid[p] += value
        if not forced_ante:
            self.street_bets[p] += value
            self.street_log[p].append(_Bet(tour, value))

    def close_betting(self) -> None:
        """The uncalled part of the round's biggest contribution comes back to its player."""
        bets = self.street_bets
        top = max(bets)
        if top > 0 and bets.count(top) == 1:
            p = bets.index(top)
            back = top - max(b for i, b in enumerate(bets) if i != p)
            self.stack[p] += back
            self.paid[p] -= back
            self.returned[p] += back
            for bet in reversed(self.street_log[p]):
                taken = min(back, bet.value)
                self.totals[bet.tour] -= taken
                back -= taken
                if not back:
                    break
        self.street_bets = [Decimal(0)] * self.n
        self.street_log = [[] for _ in range(self.n)]

    # ------------------------------------------------------------------ rounds

    def new_street(self) -> None:
        if self.street >= 0:
            self.flush_draws()
            self.close_betting()
        self.street += 1
        rounds = ROUNDS[self.kind]
        if self.street >= len(rounds):
            raise Skip("more streets than the variant has")
        self.tours.append((rounds[self.street], []))
        self.totals.append(Decimal(0))
        self.dealt_in_street = set()
        self.discarded_in_street = set()
        self.acted_in_street = False

    def emit(self, action: dict[str, Any]) -> None:
        self.tours[-1][1].append(action)

    def draw(self, p: int | None, card: int | None, *, up: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if p is None:
            body = {"ouverte": True, "commune": True}
        else:
            body["Siege"] = self.seats[p]
            if up:
                body["ouverte"] = True
        body["Valeur"] = card
        out = {"Draw": body}
        if card is None:
            if p is None:
                raise Skip("unknown board card")
            self.placeholders.append((body, p))
        return out

    def flush_draws(self) -> None:
        for _, actions in self.draw_block:
            self.tours[-1][1].extend(actions)
        self.draw_block = []

    def block(self, p: int) -> list[dict[str, Any]]:
        for q, actions in self.draw_block:
            if q == p:
                return actions
        self.draw_block.append((p, []))
        return self.draw_block[-1][1]

    # ------------------------------------------------------------------ actions

    def deal_hole(self, p: int, cards: list[int | None]) -> None:
        if self.kind == "stud":
            if self.street < 0 or p in self.dealt_in_street or self.acted_in_street:
                self.new_street()
        elif self.kind == "board":
            if self.street < 0:
                self.new_street()
            elif self.street > 0 or self.acted_in_street:
                raise Skip("hole cards dealt after the deal")
        else:  # draw
            if self.street < 0:
                self.new_street()
            elif self.street > 0 or self.acted_in_street:
                if p not in self.discarded_in_street:
                    raise Skip("replacement without a discard", f"p{p + 1}")
                self.block(p).extend(self.draw(p, c) for c in cards)
                self.dealt[p] += len(cards)
                return
        self.dealt_in_street.add(p)
        for c in cards:
            self.emit(self.draw(p, c, up=self.kind == "stud" and self.dealt[p] in UP_CARDS))
            self.dealt[p] += 1

    def deal_board(self, cards: list[int | None]) -> None:
        if self.kind != "board":
            raise Skip("board cards in a variant without a board")
        self.new_street()
        for c in cards:
            self.emit(self.draw(None, c))

    def discard(self, p: int, cards: list[int | None]) -> None:
        if self.kind != "draw":
            raise Skip("a discard outside a draw variant")
        if self.street == 0 or self.acted_in_street or p in self.discarded_in_street:
            self.new_street()
        if any(c is None for c in cards):
            raise Skip("unknown discarded card")
        self.discarded_in_street.add(p)
        self.block(p).extend({"Discard": {"Siege": self.seats[p], "Valeur": c}} for c in cards)

    def betting(self, p: int, verb: str, arg: str) -> None:
        self.flush_draws()
        self.acted_in_street = True
        seat = self.seats[p]
        facing = max(self.street_bets)
        if verb == "f":
            self.folded.add(p)
            self.emit({"Fold": {"Siege": seat}})
        elif verb == "cc":
            owed = min(facing - self.street_bets[p], self.stack[p])
            if owed <= 0:
                self.emit({"Check": {"Siege": seat}})
            else:
                self.put(p, "allin" if owed == self.stack[p] else "call", owed)
        elif verb == "cbr":
            added = Decimal(arg) - self.street_bets[p]
            if added <= 0:
                raise Skip("a raise to less than the player's bet", f"p{p + 1} cbr {arg}")
            name = "allin" if added == self.stack[p] else "raise" if facing > 0 else "bet"
            self.put(p, name, added)
        else:
            raise Skip("unknown action", verb)


def _fill_unknown(w: _Writer, showing: set[int]) -> None:
    """Unknown hole cards of a player who never shows them: cards of the deck found nowhere in the
    hand, lowest codes first. A stud up card is filled only for a player who folds on 3rd street
    (it decided nothing but the bring-in, which the hand names): with the card that can never bring
    in, the highest (an ace, spades first) in stud high and high/low, the lowest (an ace) in razz."""
    if {p for _, p in w.placeholders} & showing:
        raise Skip("unknown cards of a player who shows or draws")
    used = {a[k]["Valeur"] for _, acts in w.tours for a in acts for k in ("Draw", "Discard") if k in a}
    down = [c for c in range(52) if c not in used]
    ups = sorted(down, key=lambda c: (c // 4 != 12, -c) if w.regle == "7SLL" else (-c,))
    for body, p in w.placeholders:
        if body.get("ouverte"):
            if p not in w.folded or w.dealt[p] > 3:
                raise Skip("unknown up card of a player past 3rd street")
            card = ups[0]
        else:
            card = down[0]
        body["Valeur"] = card
        down.remove(card)
        ups.remove(card)


def _player(seat: int, finance: dict[str, str]) -> dict[str, Any]:
    return {
        "IDOper": "0099",
        "IDJoueur": f"joueur-{seat}",
        "IPJoueur": f"2001:db8::{seat:x}",
        "Siege": seat,
        "Inscription": f"inscription-{seat}",
        "Finance": finance,
    }


def to_pojeu(hand: dict[str, Any], name: str = "hand", *, id_evt: int = 1) -> dict[str, Any]:
    """The POJEU of one PHH hand (as ``tomllib`` reads it, amounts as Decimal), or ``Skip``."""
    variant = hand.get("variant")
    regle = REGLE.get(variant or "")
    if regle is None:
        raise Skip("variant with no Regle", str(variant))
    start = [Decimal(x) for x in hand["starting_stacks"]]
    n = len(start)
    if "finishing_stacks" in hand:
        finish = [Decimal(x) for x in hand["finishing_stacks"]]
        if len(finish) != n:
            raise Skip("finishing stacks of another table")
        if sum(finish) != sum(start):
            raise Skip("stacks not conserved (a rake the dataset does not state)")
    seats = [int(s) for s in hand.get("seats", range(1, n + 1))]
    if len(set(seats)) != n or min(seats) < 0:
        raise Skip("seats not one per player")
    w = _Writer(regle, n, seats, start)
    kind = w.kind

    antes = [Decimal(a) for a in hand.get("antes", [0] * n)]
    blinds = [Decimal(b) for b in hand.get("blinds_or_straddles", [0] * n)]
    if any(b for b in blinds[2:]):
        raise Skip("straddle")
    for p in range(n):
        if antes[p]:
            w.put(p, "ante", min(antes[p], w.stack[p]), forced_ante=True)
    if kind != "stud":
        # Heads up (PHH, as pokerkit): p1 is the big blind, p2 the button who posts the small blind.
        small, big = (1, 0) if n == 2 else (0, 1)
        posted = [(small, "small blind", blinds[0]), (big, "big blind", blinds[1])]
        if blinds[0] and not blinds[1]:
            # One blind only: the small blind is dead (dead-button rule, TDA 32): p1 posts the big blind.
            posted = [(0, "big blind", blinds[0])]
        for p, blind, value in posted:
            if value and w.stack[p]:
                w.put(p, blind, min(value, w.stack[p]))
    elif any(blinds):
        raise Skip("blinds in stud")

    shown: set[int] = set()
    revealed: set[tuple[int, int | None]] = set()
    sd_unknown: set[int] = set()
    for raw in hand["actions"]:
        text = raw.split("#", 1)[0].strip()
        parts = text.split()
        if not parts:
            continue
        if parts[0] == "d":
            if parts[1] == "dh":
                w.deal_hole(int(parts[2][1:]) - 1, _cards(parts[3] if len(parts) > 3 else ""))
            elif parts[1] == "db":
                w.deal_board(_cards(parts[2]))
            else:
                raise Skip("unknown dealing", text)
            continue
        p = int(parts[0][1:]) - 1
        verb, arg = parts[1], parts[2] if len(parts) > 2 else ""
        if verb == "pb":
            if kind != "stud":
                raise Skip("bring-in outside stud")
            w.flush_draws()
            w.acted_in_street = True
            w.put(p, "bring-in", min(Decimal(hand["bring_in"]), w.stack[p]))
        elif verb == "sd":
            cards = _cards(arg)
            if any(c is None for c in cards):
                sd_unknown.add(p)
            w.discard(p, cards)
        elif verb == "sm":
            cards = _cards(arg)
            if any(c is None for c in cards):
                if any(c is not None for c in cards):
                    raise Skip("cards shown in part")
                continue  # "sm ????": mucked
            if cards:
                shown.add(p)
            # An all-in showdown shows before the runout and again after it: each card once.
            w.reveals.extend(
                {"Reveal": {"Siege": seats[p], "Valeur": c}} for c in cards if (p, c) not in revealed
            )
            revealed.update((p, c) for c in cards)
        else:
            w.betting(p, verb, arg)
    w.flush_draws()
    w.close_betting()

    if w.placeholders:
        _fill_unknown(w, shown | sd_unknown)

    rake: dict[int, Decimal] = {}
    if "finishing_stacks" not in hand:
        # The room's own record of what each player collected, net of the rake (handhq): the rake is
        # the pot less what was collected, taken from the one winner (a split pot's is not stated).
        won = [Decimal(x) for x in hand.get("winnings", [0] * n)]
        pot = sum(w.paid)
        alive = [p for p in range(n) if p not in w.folded]
        if len(alive) == 1 and w.street <= 0:
            # Everyone else folded before the flop: the last player takes the pot, unraked (these
            # rooms take no rake from a hand without a flop). A room that records nothing (or 0) is
            # completed so; one that counts the uncalled blind it returned as won, read so.
            (last,) = alive
            if not sum(won) or sum(won) - pot == w.returned[last] == won[last] - pot:
                won = [pot if p == last else Decimal(0) for p in range(n)]
        elif "winnings" not in hand:
            raise Skip("no outcome in the dataset (neither finishing stacks nor winnings)")
        taken = pot - sum(won)
        winners = [p for p in range(n) if won[p] > 0]
        if taken and not winners:
            raise Skip("nobody wins in the room's winnings")
        if taken < 0:
            raise Skip("winnings exceed the pot")
        if taken and len(winners) != 1:
            raise Skip("rake of a split pot")
        if taken:
            rake[winners[0]] = taken
        finish = [start[p] - w.paid[p] + won[p] for p in range(n)]

    players = []
    for p in range(n):
        net = finish[p] - start[p]
        if finish[p] < start[p] - w.paid[p]:
            raise Skip("a player lost more than they bet", f"p{p + 1}")
        finance = {
            "Net": amount(net),
            "Total": amount(w.paid[p]),
            "CaveAvant": amount(start[p]),
            "CaveApres": amount(finish[p]),
        }
        if p in rake:
            finance["Rake"] = amount(rake[p])
        players.append(_player(seats[p], finance))

    tours = []
    second = 0
    for (tour_name, actions), total in zip(w.tours, w.totals, strict=True):
        if not actions:
            continue
        tour: dict[str, Any] = {"name": tour_name, "Timestamp": f"2601011200{second:02d}", "Action": actions}
        if total:
            tour["Total"] = amount(total)
        tours.append(tour)
        second += 1
    if w.reveals:
        tours.append({"name": "reveal", "Timestamp": f"2601011200{second:02d}", "Action": w.reveals})

    # The stakes as coffre's own writer and the annex's example print them: blinds, stud's bets.
    stakes = (hand.get("small_bet"), hand.get("big_bet")) if kind == "stud" else (blinds[0], blinds[1])
    description = NAME[regle]
    if all(stakes):
        description += f" ({amount(Decimal(stakes[0]))}-{amount(Decimal(stakes[1]))})"
    return {
        "POJEU": {
            "IDOper": "0099",
            "IDCoffre": 1,
            "DateEvt": "2026-01-01T12:01:00Z",
            "IDEvt": id_evt,
            "Tech": re.sub(r"[^a-zA-Z0-9._/#-]", "-", f"phh-{name}")[-50:],  # one per hand
            "Pool": "1",
            "Participants": {"Joueur": players},
            "Regle": regle,
            "Description": description,
            "Jeu": {"Tour": tours},
        }
    }


def regle_of(hand: dict[str, Any]) -> str | None:
    return REGLE.get(hand.get("variant") or "")


def convert_all(hands: Any) -> tuple[list[tuple[str, str, dict[str, Any]]], Counter[str]]:
    """(name, Regle, POJEU) of every hand that converts, and the count of the others by reason."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    skipped: Counter[str] = Counter()
    for name, hand in hands:
        try:
            event = to_pojeu(hand, name)
            out.append((name, REGLE[hand["variant"]], event))
        except Skip as skip:
            skipped[skip.reason] += 1
    return out, skipped
