"""Write the demo's event files (``events/``). Not used at run time: the files it wrote ship.

``events/tournament/``: a small sit-and-go, T-42, on coffre 0099/2, told as an operator's
platforms would send it: a deposit, five registrations, one cancelled, five hands of Texas
Hold'em No Limit played by pokerkit (so the betting order is legal, each card is dealt once
and the showdowns are won by the best hand), a re-buy, the bounties, each player's result and
a withdrawal. The players' account balances follow from one event to the next, and so do
their chips from one hand to the next.

``events/annex/``: the facts of the annex 1.4.3 examples (a to f), read from the annex text
with :func:`coffre.domain.annex.annex_examples` and written in the schema form coffre emits.

``events/mixed/``: tournament T-77, 24 hands of mixed games (the eleven variants of annex 1.3.6.d.5
in turn) whose every card and decision pokerkit draws from one seeded random
(:func:`coffre.domain.audit.play.play_hand`). ``events/cash/``: cash table CG-9, one hand played
to a showdown and then falsified (the players' results swapped): the demo's inconsistent hand.

Regenerate (fixed seeds: the same files every time)::

    .venv/bin/python -m coffre.demo.generate [--annex det-annexe-….md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parent / "events"
OPER, COFFRE = "0099", 2
TECH = "T-42"
TOURNAMENT = "Sit & Go du dimanche T-42 (10 €, bounty 2 €)"
FORMAT = "T/AG"  # a tournament with re-buys (A) and bounties (G)
BUY_IN = Decimal("10.00")
BOUNTY = Decimal("2.00")
STACK = 1500  # chips for a registration or a re-buy
DAY = "2026-03-01"
ZONE = "+01:00"  # the platform sends Paris time; coffre records UTC
HEADER = "coffre's demo: tournament T-42 on coffre 0099/2. Written by coffre/demo/generate.py; do not edit."

# -- the players ------------------------------------------------------------------------------------


@dataclass
class Player:
    name: str
    identity: str  # PRENOM + NOM + AAAAMMJJ + VILLE, hashed into HashJoueur (fictitious people)
    ip: str
    seat: int
    balance: Decimal
    chips: int = 0

    @property
    def hash(self) -> str:
        return hashlib.sha1(self.identity.encode()).hexdigest().upper()

    @property
    def session(self) -> str:
        return f"sess-{self.name}-0301"

    @property
    def inscription(self) -> str:
        return f"T42-{self.name}"


PLAYERS = {
    p.name: p
    for p in (
        Player("alice", "ALICEMARTIN19910412LYON", "198.51.100.7", 1, Decimal("0.00")),
        Player("bruno", "BRUNOPETIT19850923LILLE", "2001:db8:4a::12", 2, Decimal("35.50")),
        Player("chloe", "CHLOEROUX19990102NANTES", "203.0.113.45", 3, Decimal("120.00")),
        Player("david", "DAVIDMOREAU19770630BREST", "198.51.100.201", 4, Decimal("18.20")),
        Player("emma", "EMMALEFEBVRE20010315PAU", "2001:db8:77::3", 5, Decimal("60.00")),
    )
}
START_BALANCES = {name: p.balance for name, p in PLAYERS.items()}


def when(hhmmss: str) -> str:
    return f"{DAY}T{hhmmss}{ZONE}"


# -- writing events ---------------------------------------------------------------------------------


def element(tag: str, *children: ET.Element, text: object = None, **attributes: str) -> ET.Element:
    node = ET.Element(tag, attributes)
    node.extend(children)
    if text is not None:
        node.text = str(text)
    return node


def fields(**values: object) -> list[ET.Element]:
    """One element per value (None: absent); a value that is already an element is kept."""
    return [
        value if isinstance(value, ET.Element) else element(tag, text=value)
        for tag, value in values.items()
        if value is not None
    ]


def xml_document(root: ET.Element, comment: str) -> bytes:
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<!-- {comment} -->\n{body}\n'.encode()


def player_header(p: Player, at: str) -> dict[str, object]:
    """The cercle header and player id of POINSCRIT, POACHAT, POGAIN, POBILAN, POANNUL."""
    return {
        "IDOper": OPER,
        "IDCoffre": COFFRE,
        "DateEvt": when(at),
        "IDEvt": None,  # see Story.number
        "IDJoueur": p.name,
        "HashJoueur": p.hash,
        "IPJoueur": p.ip,
        "IDSession": p.session,
        "Inscription": p.inscription,
        "Tech": TECH,
    }


def move(p: Player, amount: Decimal) -> dict[str, object]:
    """SoldeAvant/SoldeMouvement/SoldeApres for a movement of ``amount`` (negative: a debit)."""
    before = p.balance
    p.balance += amount
    return {"SoldeAvant": before, "SoldeMouvement": abs(amount), "SoldeApres": p.balance}


@dataclass
class Story:
    """The tournament's events in order, each a file name and its bytes."""

    files: list[tuple[str, bytes]] = field(default_factory=list)

    def number(self, values: dict[str, Any]) -> dict[str, Any]:
        """The event's IDEvt: its place in the story, as a platform would number it (ingest
        assigns the coffre's own IDEvt anyway)."""
        return {k: len(self.files) + 1 if k == "IDEvt" else v for k, v in values.items()}

    def add(self, slug: str, ext: str, content: bytes) -> None:
        self.files.append((f"{len(self.files) + 1:02d}-{slug}.{ext}", content))

    def po(self, tag: str, slug: str, what: str, **values: object) -> None:
        root = element(tag, *fields(**self.number(values)))
        self.add(f"{tag}-{slug}", "xml", xml_document(root, f"{HEADER} {what}"))

    def cj(self, tag: str, slug: str, p: Player, at: str, **values: object) -> None:
        """An account event, as JSON: the operator's account platform sends JSON."""
        header = {"IDOper": OPER, "DateEvt": when(at), "IDEvt": None, "IDJoueur": p.name}
        header |= {"HashJoueur": p.hash, "IDSession": p.session, "IPJoueur": p.ip, "IDCoffre": COFFRE}
        data = self.number(header | values)
        event = {tag: {k: str(v) if isinstance(v, Decimal) else v for k, v in data.items()}}
        self.add(f"{tag}-{slug}", "json", (json.dumps(event, ensure_ascii=False, indent=2) + "\n").encode())

    # the player events of annex 1.3.6.c

    def register(self, name: str, at: str) -> None:
        p = PLAYERS[name]
        p.chips = STACK
        self.po(
            "POINSCRIT",
            name,
            f"{name} registers.",
            **player_header(p, at),
            Description=TOURNAMENT,
            Format=FORMAT,
            **move(p, -BUY_IN),
        )

    def cancel(self, name: str, at: str, motif: str, info: str) -> None:
        p = PLAYERS[name]
        p.chips = 0
        finance = move(p, BUY_IN)
        self.po(
            "POANNUL", name, f"{name} cancels.", **player_header(p, at), Motif=motif, **finance, Info=info
        )

    def rebuy(self, name: str, at: str) -> None:
        p = PLAYERS[name]
        p.chips += STACK
        self.po(
            "POACHAT",
            name,
            f"{name} buys {STACK} chips again.",
            **player_header(p, at),
            Description=f"Recave : {STACK} jetons",
            **move(p, -BUY_IN),
        )

    def bounty(self, name: str, victim: str, at: str) -> None:
        p = PLAYERS[name]
        self.po(
            "POGAIN",
            f"{name}-{victim}",
            f"{name}'s bounty on {victim}.",
            **player_header(p, at),
            Description=f"Bounty pour avoir éliminé {victim}",
            **move(p, BOUNTY),
        )

    def result(self, name: str, place: int, prize: Decimal, at: str) -> None:
        p = PLAYERS[name]
        self.po(
            "POBILAN",
            name,
            f"{name} ends in place {place}.",
            **player_header(p, at),
            Classement=place,
            **move(p, prize),
        )

    # the account events (CJ)

    def deposit(self, name: str, amount: Decimal, at: str) -> None:
        p = PLAYERS[name]
        self.cj(
            "CPTEALIM",
            name,
            p,
            at,
            IDRef=f"dep-{name}-0301",
            DateDemande=when(at),
            DateEffective=when(at),
            **move(p, amount),
            MoyenPaiement="CB VISA",
            TypeMoyenPaiement="CarteBancaire",
        )

    def withdraw(self, name: str, amount: Decimal, at: str) -> None:
        p = PLAYERS[name]
        self.cj(
            "CPTERETRAIT",
            name,
            p,
            at,
            IDRef=f"wd-{name}-0301",
            DateDemande=when(at),
            SoldeDemande=amount,
            **move(p, -amount),
        )

    def hand(self, hand: Hand) -> None:
        self.po("POJEU", f"hand-{hand.number}", f"Hand {hand.number}, played by pokerkit.", **hand.play())


# -- the hands --------------------------------------------------------------------------------------

Action = tuple[str, str] | tuple[str, str, int]
"""(player, "fold" | "check" | "call"), or (player, "raise", the street's total it raises to)."""


@dataclass
class Hand:
    """One hand: the players in pokerkit's order (small blind, big blind, …, button; heads-up:
    big blind, button), their hole cards, the board, and each decision in turn."""

    number: int
    start: str  # hh:mm:ss of the blinds
    blinds: tuple[int, int]
    order: tuple[str, ...]
    holes: dict[str, str]
    board: str
    decisions: list[Action]
    expected: dict[str, int]  # each player's result, checked against pokerkit's

    def play(self) -> dict[str, Any]:
        from pokerkit import Automation, Mode, NoLimitTexasHoldem

        players = [PLAYERS[name] for name in self.order]
        state = NoLimitTexasHoldem.create_state(
            (
                Automation.ANTE_POSTING,
                Automation.BET_COLLECTION,
                Automation.BLIND_OR_STRADDLE_POSTING,
                Automation.HOLE_CARDS_SHOWING_OR_MUCKING,
                Automation.HAND_KILLING,
                Automation.CHIPS_PUSHING,
                Automation.CHIPS_PULLING,
            ),
            True,
            0,
            self.blinds,
            self.blinds[1],
            tuple(p.chips for p in players),
            len(players),
            mode=Mode.TOURNAMENT,
        )
        for card in range(2):  # one card at a time round the table, from the small blind
            for p in players:
                state.deal_hole(self.holes[p.name][2 * card : 2 * card + 2])
        board, decisions = self.board, list(self.decisions)
        while state.status:
            if state.can_burn_card():
                state.burn_card("??")  # burnt cards are not recorded
            elif state.can_deal_board():
                count = 3 if not state.board_cards else 1
                state.deal_board(board[: 2 * count])
                board = board[2 * count :]
            else:
                who, what, *to = decisions.pop(0)
                assert players[state.actor_index].name == who, (self.number, who, state.actor_index)
                if what == "fold":
                    state.fold()
                elif what in ("check", "call"):
                    assert (what == "check") == (state.checking_or_calling_amount == 0), (self.number, who)
                    state.check_or_call()
                else:
                    state.complete_bet_or_raise_to(to[0])
        assert not decisions and not board, f"hand {self.number}: unused decisions or cards"
        results = {p.name: int(payoff) for p, payoff in zip(players, state.payoffs, strict=True)}
        assert results == self.expected, (self.number, results)
        rounds, totals = self.rounds(state.operations, players)
        joueurs = {}
        for p, final in zip(players, state.stacks, strict=True):
            before, after = p.chips, int(final)
            assert after == before + results[p.name]
            finance = fields(
                Net=results[p.name], Total=totals[p.name], CaveAvant=before, CaveApres=after, Unite="jetons"
            )
            joueurs[p.seat] = element(
                "Joueur",
                *fields(IDOper=OPER, IDJoueur=p.name, IPJoueur=p.ip, Siege=p.seat, Inscription=p.inscription),
                element("Finance", *finance),
            )
            p.chips = after
        small, big = self.blinds
        return {
            "IDOper": OPER,
            "IDCoffre": COFFRE,
            "DateEvt": when(self.clock(len(rounds))),
            "IDEvt": None,
            "Tech": TECH,
            "Pool": str(self.number),
            "Participants": element("Participants", *(joueurs[seat] for seat in sorted(joueurs))),
            "Regle": "THNL",
            "Description": f"Texas Hold'em No Limit ({small}-{big})",
            "Info": f"T-42, table 1, main {self.number}, blindes {small}/{big}",
            "Jeu": element("Jeu", *rounds),
        }

    def clock(self, step: int) -> str:
        h, m, s = map(int, self.start.split(":"))
        seconds = h * 3600 + m * 60 + s + 20 * step
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def rounds(self, operations: Any, players: list[Player]) -> tuple[list[ET.Element], dict[str, int]]:
        """pokerkit's operations as annex 1.3.6.d.5 rounds: bet (the blinds), pre-flop, flop,
        turn, river, reveal; each Bet's Valeur is what it adds to the pot."""
        from pokerkit import (
            BlindOrStraddlePosting,
            BoardDealing,
            CheckingOrCalling,
            CompletionBettingOrRaisingTo,
            Folding,
            HoleCardsShowingOrMucking,
            HoleDealing,
        )

        streets = iter(("flop", "turn", "river"))
        rounds: list[tuple[str, list[ET.Element]]] = [("bet", [])]
        reveals: list[ET.Element] = []  # shown at the end, whenever pokerkit turns the cards
        street = dict.fromkeys(range(len(players)), 0)  # what each put in during this street
        stacks = {i: p.chips for i, p in enumerate(players)}
        totals = dict.fromkeys((p.name for p in players), 0)
        street_bets: list[tuple[str, int, int]] = []  # (round, player, amount) of this street's bets
        returned: dict[str, int] = {}  # per round, the uncalled amount given back

        def bet(kind: str, i: int, added: int) -> ET.Element:
            street[i] += added
            stacks[i] -= added
            totals[players[i].name] += added
            street_bets.append((rounds[-1][0], i, added))
            return element("Bet", *fields(Siege=players[i].seat, Valeur=added), name=kind)

        def settle() -> None:
            """The street is over: what its biggest bettor put in beyond the next one is given back
            (an uncalled bet), and left out of the Totals (annex 1.4.3.f's river, docs/hand-audit.md)."""
            put: dict[int, int] = {}
            for _, i, added in street_bets:
                put[i] = put.get(i, 0) + added
            ranked = [*sorted(put.values(), reverse=True), 0, 0]
            if ranked[0] > ranked[1]:
                top = next(i for i, a in put.items() if a == ranked[0])
                excess = ranked[0] - ranked[1]
                totals[players[top].name] -= excess
                for name, i, added in reversed(street_bets):
                    if i == top and excess:
                        back = min(excess, added)
                        returned[name] = returned.get(name, 0) + back
                        excess -= back
            street_bets.clear()

        def card(action: str, i: int | None, value: Any, **attributes: str) -> ET.Element:
            seat = None if i is None else players[i].seat
            return element(action, *fields(Siege=seat, Valeur=code(value)), **attributes)

        for op in operations:
            actions = rounds[-1][1]
            if isinstance(op, BlindOrStraddlePosting):
                small = op.amount == self.blinds[0]  # heads-up, pokerkit posts the big blind first
                posted = bet("small blind" if small else "big blind", op.player_index, op.amount)
                actions.insert(0 if small else len(actions), posted)
            elif isinstance(op, HoleDealing):
                if rounds[-1][0] == "bet":
                    actions = []
                    rounds.append(("pre-flop", actions))
                actions.extend(card("Draw", op.player_index, c) for c in op.cards)
            elif isinstance(op, BoardDealing):
                settle()
                street = dict.fromkeys(street, 0)
                actions = []
                rounds.append((next(streets), actions))
                actions.extend(card("Draw", None, c, ouverte="true", commune="true") for c in op.cards)
            elif isinstance(op, CheckingOrCalling):
                i = op.player_index
                actions.append(
                    bet("call", i, op.amount)
                    if op.amount
                    else element("Check", *fields(Siege=players[i].seat))
                )
            elif isinstance(op, CompletionBettingOrRaisingTo):
                i = op.player_index
                added = op.amount - street[i]
                kind = "allin" if added == stacks[i] else "raise" if any(street.values()) else "bet"
                actions.append(bet(kind, i, added))
            elif isinstance(op, Folding):
                actions.append(element("Fold", *fields(Siege=players[op.player_index].seat)))
            elif isinstance(op, HoleCardsShowingOrMucking):
                reveals.extend(card("Reveal", op.player_index, c) for c in op.hole_cards)
        settle()
        if reveals:
            rounds.append(("reveal", reveals))
        tours = []
        for step, (name, actions) in enumerate(rounds):
            staked = sum(int(a.findtext("Valeur") or 0) for a in actions if a.tag == "Bet") - returned.get(
                name, 0
            )
            total = fields(Total=staked) if any(a.tag == "Bet" for a in actions) else []
            tours.append(
                element("Tour", *fields(Timestamp=when(self.clock(step))), *actions, *total, name=name)
            )
        return tours, totals


RANKS, SUITS = "23456789TJQKA", "cdhs"


def code(card: Any) -> int:
    """Annex 1.3.6.d.3: 4 × rank (2 … As) + suit (trèfle, carreau, cœur, pique)."""
    return 4 * RANKS.index(card.rank) + SUITS.index(card.suit)


HANDS = (
    # 4 players, button alice: david folds, alice raises, chloe defends her big blind, folds the flop
    Hand(
        1,
        "20:00:00",
        (50, 100),
        ("bruno", "chloe", "david", "alice"),
        {"bruno": "7c2d", "chloe": "Qh9h", "david": "8s3c", "alice": "AsKd"},
        "Kh5c2s",
        [
            ("david", "fold"),
            ("alice", "raise", 250),
            ("bruno", "fold"),
            ("chloe", "call"),
            ("chloe", "check"),
            ("alice", "raise", 300),
            ("chloe", "fold"),
        ],
        {"bruno": -50, "chloe": -250, "david": 0, "alice": 300},
    ),
    # button bruno: chloe moves all in with ace-queen, bruno calls with two jacks and wins: chloe is bust
    Hand(
        2,
        "20:03:00",
        (50, 100),
        ("chloe", "david", "alice", "bruno"),
        {"chloe": "AhQd", "david": "6d6h", "alice": "9c4d", "bruno": "JsJc"},
        "8d4s2hTc3d",
        [
            ("alice", "fold"),
            ("bruno", "raise", 300),
            ("chloe", "raise", 1250),
            ("david", "fold"),
            ("bruno", "call"),
        ],
        {"chloe": -1250, "david": -100, "alice": 0, "bruno": 1350},
    ),
    # (chloe buys again) button chloe: david all in with ace-eight, alice calls with kings: david is out
    Hand(
        3,
        "20:05:20",
        (50, 100),
        ("david", "alice", "bruno", "chloe"),
        {"david": "Ad8c", "alice": "KcKs", "bruno": "Tc7d", "chloe": "5d4d"},
        "5h9sKd2cJh",
        [("bruno", "fold"), ("chloe", "fold"), ("david", "raise", 1400), ("alice", "call")],
        {"david": -1400, "alice": 1400, "bruno": 0, "chloe": 0},
    ),
    # three left, blinds up. Dead button (TDA r.32, club 4.2): the big blind moves on from alice to
    # bruno, alice posts the small blind, the button is david's empty seat. All limp; chloe all in
    # on the flop, bruno's set wins
    Hand(
        4,
        "20:10:00",
        (100, 200),
        ("alice", "bruno", "chloe"),
        {"bruno": "6s6d", "chloe": "Th9h", "alice": "Qc3s"},
        "9c6h2d4cKh",
        [
            ("chloe", "call"),
            ("alice", "call"),
            ("bruno", "check"),
            ("alice", "check"),
            ("bruno", "check"),
            ("chloe", "raise", 1300),
            ("alice", "fold"),
            ("bruno", "call"),
        ],
        {"bruno": 1700, "chloe": -1500, "alice": -200},
    ),
    # heads-up, button bruno: alice all in with ace-jack, bruno calls with eights and wins the tournament
    Hand(
        5,
        "20:13:00",
        (100, 200),
        ("alice", "bruno"),
        {"alice": "AcJd", "bruno": "8h8c"},
        "7s3hQd2s5c",
        [("bruno", "raise", 500), ("alice", "raise", 3000), ("bruno", "call")],
        {"alice": -3000, "bruno": 3000},
    ),
)


def tournament(
    hands: tuple[Hand, ...] = HANDS, before: Mapping[int, Callable[[], None]] | None = None
) -> Iterator[tuple[str, bytes]]:
    """The story, in the order the platforms send it (prize pool 2/3 and 1/3 of what is left of
    50.00 after a 10 % fee and the three bounties: 26.00 and 13.00). A test may play other
    ``hands`` and run ``before[n]`` just before hand ``n`` (to change the story on purpose)."""
    for p in PLAYERS.values():  # the players as they begin, whatever an earlier call did to them
        p.balance, p.chips = START_BALANCES[p.name], 0
    story = Story()

    def hand(n: int) -> None:
        if before and n in before:
            before[n]()
        story.hand(hands[n - 1])

    steps: list[Callable[[], None]] = [
        lambda: story.deposit("alice", Decimal("50.00"), "19:30:12"),
        lambda: story.register("alice", "19:31:40"),
        lambda: story.register("bruno", "19:35:03"),
        lambda: story.register("chloe", "19:40:27"),
        lambda: story.register("david", "19:42:55"),
        lambda: story.register("emma", "19:45:10"),
        lambda: story.cancel("emma", "19:52:31", "Joueur", "Désinscription avant le début du tournoi"),
        lambda: hand(1),
        lambda: hand(2),
        lambda: story.rebuy("chloe", "20:05:02"),
        lambda: hand(3),
        lambda: story.bounty("alice", "david", "20:07:25"),
        lambda: story.result("david", 4, Decimal("0.00"), "20:07:26"),
        lambda: hand(4),
        lambda: story.bounty("bruno", "chloe", "20:12:05"),
        lambda: story.result("chloe", 3, Decimal("0.00"), "20:12:06"),
        lambda: hand(5),
        lambda: story.bounty("bruno", "alice", "20:15:05"),
        lambda: story.result("alice", 2, Decimal("13.00"), "20:15:06"),
        lambda: story.result("bruno", 1, Decimal("26.00"), "20:15:07"),
        lambda: story.withdraw("alice", Decimal("50.00"), "20:20:45"),
    ]
    for step in steps:
        step()
    return iter(story.files)


# -- tournament T-77: mixed games, played at random by pokerkit ---------------------------------------

MIXED_COFFRE = 3
MIXED_TECH = "T-77"
MIXED_TITLE = "Tournoi mixte du lundi T-77 (5 €, bounty 1 €)"
MIXED_BUY_IN, MIXED_BOUNTY, MIXED_STACK = Decimal("5.00"), Decimal("1.00"), 1000
MIXED_DAY = "2026-03-02"
MIXED_SEED = 158
MIXED_PLAYERS = (
    Player("gaelle", "GAELLEBERNARD19880517RENNES", "198.51.100.31", 1, Decimal("40.00")),
    Player("hugo", "HUGODUBOIS19930228DIJON", "2001:db8:4a::31", 2, Decimal("12.50")),
    Player("ines", "INESFOURNIER19960809TOULON", "203.0.113.131", 3, Decimal("25.00")),
    Player("jules", "JULESGIRARD19820114NIORT", "198.51.100.131", 4, Decimal("9.00")),
    Player("karim", "KARIMBONNET19900703ANGERS", "2001:db8:77::31", 5, Decimal("30.00")),
)
MIXED_LEVELS: tuple[tuple[str, dict[str, Any]], ...] = (
    # (Regle, stakes) per level of four hands: the mixed rotation, stakes rising each level
    ("THNL", {"blinds": (10, 20)}),
    ("O4HPL", {"blinds": (15, 30)}),
    ("7SHL", {"ante": 5, "bring_in": 10, "small_bet": 40}),
    ("2T7TD", {"blinds": (25, 50)}),
    ("THL", {"blinds": (30, 60)}),
    ("7SLL", {"ante": 10, "bring_in": 20, "small_bet": 80}),
    ("O4JL", {"blinds": (50, 100)}),
    ("7SJL", {"ante": 15, "bring_in": 30, "small_bet": 120}),
    ("THPL", {"blinds": (75, 150)}),
    ("O5HPL", {"blinds": (100, 200)}),
    ("O4JPL", {"blinds": (150, 300)}),
)
HANDS_PER_LEVEL = 2
REBUY_HANDS = 2
"""A player who busts in the tournament's first two hands may buy in again (POACHAT)."""


def _mixed_header(p: Player, at: str) -> dict[str, object]:
    return {
        **player_header(p, at),
        "IDCoffre": MIXED_COFFRE,
        "DateEvt": f"{MIXED_DAY}T{at}{ZONE}",
        "Inscription": f"T77-{p.name}",
        "IDSession": f"sess-{p.name}-0302",
        "Tech": MIXED_TECH,
    }


def mixed() -> Iterator[tuple[str, bytes]]:
    """Tournament T-77: five players, a level of two hands per variant of annex 1.3.6.d.5 in
    turn, every decision and card drawn by pokerkit from one seeded random: legal play, each card
    dealt once, pots won by the best hand. Re-buys in the first hands, a bounty per elimination,
    the two last players paid (2/3, 1/3 of the buy-ins less 10 % and the bounties)."""
    import random

    from coffre.domain.audit.play import play_hand

    rng = random.Random(MIXED_SEED)
    players = {p.name: Player(p.name, p.identity, p.ip, p.seat, p.balance) for p in MIXED_PLAYERS}
    story = Story()
    clock = [19 * 3600]

    def at(step: int = 37) -> str:
        clock[0] += step
        s = clock[0]
        return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"

    def po(tag: str, slug: str, what: str, **values: object) -> None:
        story.po(tag, slug, what.replace("T-42", MIXED_TECH), **values)

    for p in players.values():
        p.chips = MIXED_STACK
        po(
            "POINSCRIT",
            p.name,
            f"{p.name} registers.",
            **_mixed_header(p, at()),
            Description=MIXED_TITLE,
            Format="T/AG",
            **move(p, -MIXED_BUY_IN),
        )
    alive = [p.name for p in sorted(players.values(), key=lambda p: p.seat)]
    buy_ins = len(alive)
    bounties = 0
    button: int | None = None
    big_blind: int | None = None
    number = 0
    while len(alive) > 1:
        number += 1
        level = (number - 1) // HANDS_PER_LEVEL
        regle, base = MIXED_LEVELS[level % len(MIXED_LEVELS)]
        rise = 1 + level // len(MIXED_LEVELS)  # once round the rotation, the stakes double
        stakes = {
            k: tuple(x * rise for x in v) if isinstance(v, tuple) else v * rise for k, v in base.items()
        }
        seats = {players[n].seat: players[n].chips for n in alive}
        if regle[0] != "7":
            ordered = sorted(seats)
            if big_blind is None:  # the first hand: the button on the first seat
                button = ordered[0]
            else:
                # dead button (TDA r.32-34, club 4.2-4.3): the big blind moves on to the next seat
                # still playing after the last one's (a stud level between leaves it where it was,
                # TDA r.11B), so nobody dodges it, heads-up included; the small blind is posted by
                # the seat before it (the hand audit wants one of each) and the button sits before
                big = next((s for s in ordered if s > big_blind), ordered[0])
                button = ordered[(ordered.index(big) - (2 if len(ordered) > 2 else 1)) % len(ordered)]
            after = ordered.index(button) + (2 if len(ordered) > 2 else 1)
            big_blind = ordered[after % len(ordered)]
        hand = play_hand(
            regle,
            seats,
            rng,
            button=None if regle[0] == "7" else button,
            players={
                players[n].seat: {"IDJoueur": n, "IPJoueur": players[n].ip, "Inscription": f"T77-{n}"}
                for n in alive
            },
            header={
                "IDCoffre": MIXED_COFFRE,
                "IDEvt": None,
                "Tech": MIXED_TECH,
                "Pool": str(number),
                "Info": f"T-77, main {number}",
            },
            when=datetime.fromisoformat(f"{MIXED_DAY}T{at(55)}{ZONE}"),
            aggression=0.15,
            fold_rate=0.3,
            **stakes,
        )
        values = story.number({**hand.event["POJEU"], "DateEvt": f"{MIXED_DAY}T{at(240)}{ZONE}"})
        text = json.dumps({"POJEU": values}, ensure_ascii=False, indent=1) + "\n"
        story.add(f"POJEU-hand-{number}", "json", text.encode())
        gains = {players_at(players, s): hand.final_stacks[s] - seats[s] for s in seats}
        for n in alive:
            players[n].chips = int(hand.final_stacks[players[n].seat])
        bust = [n for n in alive if players[n].chips == 0]
        winner = max(gains, key=lambda n: gains[n])
        for n in sorted(bust, key=lambda n: seats[players[n].seat], reverse=True):
            p = players[n]
            if number <= REBUY_HANDS:
                p.chips = MIXED_STACK
                buy_ins += 1
                po(
                    "POACHAT",
                    n,
                    f"{n} buys {MIXED_STACK} chips again.",
                    **_mixed_header(p, at()),
                    Description=f"Recave : {MIXED_STACK} jetons",
                    **move(p, -MIXED_BUY_IN),
                )
                continue
            w = players[winner]
            bounties += 1
            po(
                "POGAIN",
                f"{winner}-{n}",
                f"{winner}'s bounty on {n}.",
                **_mixed_header(w, at()),
                Description=f"Bounty pour avoir éliminé {n}",
                **move(w, MIXED_BOUNTY),
            )
            place = len(alive)
            alive.remove(n)
            prize = _mixed_prize(place, buy_ins, bounties)
            po(
                "POBILAN",
                n,
                f"{n} ends in place {place}.",
                **_mixed_header(p, at()),
                Classement=place,
                **move(p, prize),
            )
    champion = players[alive[0]]
    po(
        "POBILAN",
        champion.name,
        f"{champion.name} wins T-77.",
        **_mixed_header(champion, at()),
        Classement=1,
        **move(champion, _mixed_prize(1, buy_ins, bounties)),
    )
    regles = {json.loads(c)["POJEU"]["Regle"] for n, c in story.files if "POJEU" in n}
    assert number >= 20 and len(regles) >= 5, (number, regles)
    return iter(story.files)


def players_at(players: dict[str, Player], seat: int) -> str:
    return next(n for n, p in players.items() if p.seat == seat)


def _mixed_prize(place: int, buy_ins: int, bounties: int) -> Decimal:
    """What place ``place`` is paid: the buy-ins less a 10 % fee and the bounties paid, 2/3 to the
    winner and 1/3 to the second; nothing below."""
    pool = buy_ins * MIXED_BUY_IN * Decimal("0.9") - (buy_ins - 1) * MIXED_BOUNTY
    if place == 1:
        return (pool * 2 / 3).quantize(Decimal("0.01"))
    if place == 2:
        return pool - (pool * 2 / 3).quantize(Decimal("0.01"))
    return Decimal("0.00")


# -- cash table CG-9: one deliberately inconsistent hand -----------------------------------------------

CASH_COFFRE = 4
CASH_TECH = "CG-9"
CASH_DAY = "2026-03-03"
CASH_SEED = 9
CASH_PLAYERS = (
    Player("lucas", "LUCASMERCIER19870921METZ", "198.51.100.91", 2, Decimal("80.00")),
    Player("maya", "MAYACHEVALIER19940606NANCY", "2001:db8:9::9", 5, Decimal("55.00")),
)
CASH_BUY_IN = Decimal("20.00")


def cash_table() -> Iterator[tuple[str, bytes]]:
    """Cash table CG-9: two players sit down with 20.00 € each, play one hand of Texas Hold'em No
    Limit to a showdown (pokerkit, 0.10/0.20, 5 % rake), and leave. The hand is written as played,
    then its finance is falsified: the two players' results are swapped, so the loser is declared
    the winner. coffre records it as declared, and its audit flags it."""
    import random

    from coffre.domain.audit.play import play_hand

    players = {p.name: Player(p.name, p.identity, p.ip, p.seat, p.balance) for p in CASH_PLAYERS}
    story = Story()

    def header(p: Player, at: str) -> dict[str, object]:
        return {
            **player_header(p, at),
            "IDCoffre": CASH_COFFRE,
            "DateEvt": f"{CASH_DAY}T{at}{ZONE}",
            "Inscription": f"CG9-{p.name}-1",
            "IDSession": f"sess-{p.name}-0303",
            "Tech": CASH_TECH,
        }

    for p, at in zip(players.values(), ("21:00:05", "21:00:40"), strict=True):
        story.po(
            "POINSCRIT",
            p.name,
            f"{p.name} sits down at CG-9.",
            **header(p, at),
            Description="Table cash-game CG-9, Texas Hold'em No Limit 0,10/0,20 €",
            Format="CG",
            **move(p, -CASH_BUY_IN),
        )
    rng = random.Random(CASH_SEED)
    while True:
        hand = play_hand(
            "THNL",
            {p.seat: CASH_BUY_IN for p in players.values()},
            rng,
            blinds=("0.10", "0.20"),
            button=2,
            rake="0.05",
            players={
                p.seat: {"IDJoueur": p.name, "IPJoueur": p.ip, "Inscription": f"CG9-{p.name}-1"}
                for p in players.values()
            },
            header={
                "IDCoffre": CASH_COFFRE,
                "IDEvt": None,
                "Tech": CASH_TECH,
                "Pool": "1",
                "Info": "CG-9, main 1. Falsified by the demo: the results of the two players are swapped.",
            },
            when=datetime.fromisoformat(f"{CASH_DAY}T21:01:00{ZONE}"),
        )
        nets = sorted(Decimal(j["Finance"]["Net"]) for j in hand.event["POJEU"]["Participants"]["Joueur"])
        if hand.showdown and nets[0] < 0 < nets[-1] and nets[-1] >= 1:
            break
    values = story.number({**hand.event["POJEU"], "DateEvt": f"{CASH_DAY}T21:03:10{ZONE}"})
    loser, winner = sorted(values["Participants"]["Joueur"], key=lambda j: Decimal(j["Finance"]["Net"]))
    for key in ("Net", "CaveApres"):  # the falsification: the loser declared the winner
        loser["Finance"][key], winner["Finance"][key] = winner["Finance"][key], loser["Finance"][key]
    loser["Finance"]["Rake"] = winner["Finance"].pop("Rake", "0.00")
    text = json.dumps({"POJEU": values}, ensure_ascii=False, indent=1) + "\n"
    story.add("POJEU-hand-1-falsified", "json", text.encode())
    for j, at in zip(values["Participants"]["Joueur"], ("21:03:40", "21:03:55"), strict=True):
        p = players[j["IDJoueur"]]
        story.po(
            "POBILAN",
            p.name,
            f"{p.name} leaves CG-9 with what the hand declared.",
            **header(p, at),
            **move(p, Decimal(j["Finance"]["CaveApres"])),
        )
    return iter(story.files)


def annex_facts(annex: Path) -> Iterator[tuple[str, bytes]]:
    """The annex 1.4.3 examples, normalized and written in the schema's form."""
    from coffre.domain.annex import annex_examples
    from coffre.domain.codec import pretty_xml
    from coffre.domain.normalize import normalize

    for letter, raw in annex_examples(annex).items():
        event = normalize(raw)
        comment = (
            f"<!-- The facts of the example of annex 1.4.3.{letter} (ARJEL decision 2016-064), "
            "in the schema's form. Written by coffre/demo/generate.py; do not edit. -->\n"
        )
        declaration, _, body = pretty_xml(event).decode().partition("\n")
        yield f"1.4.3.{letter}-{event.xml_tag}.xml", f"{declaration}\n{comment}{body}".encode()


def write(folder: Path, files: Iterator[tuple[str, bytes]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.suffix in (".xml", ".json"):
            old.unlink()
    for name, content in files:
        (folder / name).write_bytes(content)
        print(folder / name)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--annex", type=Path, help="also rewrite events/annex/ from this annex text")
    args = parser.parse_args()
    write(EVENTS / "tournament", tournament())
    write(EVENTS / "mixed", mixed())
    write(EVENTS / "cash", cash_table())
    if args.annex:
        write(EVENTS / "annex", annex_facts(args.annex))


if __name__ == "__main__":
    main()
