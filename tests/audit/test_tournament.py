"""Across the hands of one tournament (coffre/domain/audit/tournament.py): each rule has a known
answer written by hand from its text (TDA 2024, the club's rules, decree 2016-1326), the legal case
beside it, and what it counts as not checked when the events before are absent. The demo's two
tournaments give none of these findings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from coffre.domain.audit.events import audit_event
from coffre.domain.audit.findings import CODES
from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.tournament import TournamentTrail
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.normalize import normalize

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "coffre" / "demo" / "events"
TOURNAMENT_CODES = (
    "BLINDS_DECREASED",
    "BLIND_DODGED",
    "HEADS_UP_CHANGEOVER_WRONG",
    "STARTING_STACK_WRONG",
    "TOURNAMENT_CHIPS_WRONG",
    "HAND_OUT_OF_ORDER",
)


class Story:
    """A tournament written by hand: registrations, re-buys, results, and hands in which everyone
    folds to the big blind (the smallest legal hand: blinds, antes, two cards each, folds)."""

    def __init__(self, tech: str = "T-9", fmt: str = "T/A", stack: int = 1000) -> None:
        self.tech, self.fmt, self.stack = tech, fmt, stack
        self.events: list[Event] = []
        self.chips: dict[str, int] = {}
        self.balance: dict[str, str] = {}
        self.pool = 0

    def _add(self, tag: str, values: dict[str, Any]) -> Event:
        values = {"IDOper": "0099", "IDCoffre": 7, "DateEvt": "2026-03-05T20:00:00Z", **values}
        values["IDEvt"] = len(self.events) + 1
        event = normalize(json.dumps({tag: values}).encode())
        self.events.append(event)
        return event

    def _player(self, name: str, amount: int) -> dict[str, Any]:
        before = int(self.balance.get(name, "100"))
        self.balance[name] = str(before + amount)
        return {
            "IDJoueur": name,
            "HashJoueur": f"{sum(map(ord, name)):040X}",
            "IPJoueur": "198.51.100.9",
            "IDSession": f"s-{name}",
            "Inscription": f"I-{name}",
            "Tech": self.tech,
            "SoldeAvant": str(before),
            "SoldeMouvement": str(abs(amount)),
            "SoldeApres": self.balance[name],
        }

    def register(self, *names: str) -> None:
        for name in names:
            self.chips[name] = self.stack
            self._add("POINSCRIT", {**self._player(name, -10), "Description": "Tournoi", "Format": self.fmt})

    def rebuy(self, name: str, chips: int) -> None:
        self.chips[name] += chips
        self._add("POACHAT", {**self._player(name, -10), "Description": f"Recave : {chips} jetons"})

    def result(self, name: str, place: int, prize: int = 0) -> None:
        self._add("POBILAN", {**self._player(name, prize), "Classement": place})

    def walk(
        self,
        seated: dict[int, str],
        bb: int,
        sb: int | None,
        blinds: tuple[int, int] = (50, 100),
        ante: int = 0,
        rake: int = 0,
        pool: str | None = None,
        regle: str = "THNL",
        bba: bool = False,
        at: str = "2026-03-05T20:00:00Z",
    ) -> Event:
        """Everyone folds to the big blind at ``bb``, who wins the antes and the small blind (its
        own blind beyond the small blind is uncalled, given back). ``sb`` None: a dead small blind.
        ``at``: the time stamp of its rounds and its DateEvt."""
        seats = sorted(seated)
        posts: dict[int, list[tuple[str, int]]] = {s: [] for s in seats}
        for s in seats:
            if ante and (not bba or s == bb):
                posts[s].append(("ante", min(ante, self.chips[seated[s]])))
        for s, name, amount in ((sb, "small blind", blinds[0]), (bb, "big blind", blinds[1])):
            if s is not None:
                left = self.chips[seated[s]] - sum(v for _, v in posts[s])
                posts[s].append((name, min(amount, left)))
        blind = {s: sum(v for n, v in posts[s] if n != "ante") for s in seats}
        excess = blind[bb] - max([blind[s] for s in seats if s != bb] or [0])
        totals = {s: sum(v for _, v in posts[s]) for s in seats}
        totals[bb] -= excess
        pot = sum(totals.values())
        after = seats.index(bb)
        order = [seats[(after + k) % len(seats)] for k in range(1, len(seats))]
        joueurs = []
        for s in seats:
            name = seated[s]
            before = self.chips[name]
            won = pot - rake if s == bb else 0
            self.chips[name] = before - totals[s] + won
            finance: dict[str, Any] = {
                "Net": str(won - totals[s]),
                "Total": str(totals[s]),
                "CaveAvant": str(before),
                "CaveApres": str(self.chips[name]),
            }
            if s == bb and rake:
                finance["Rake"] = str(rake)
            joueurs.append(
                {
                    "IDOper": "0099",
                    "IDJoueur": name,
                    "IPJoueur": "198.51.100.9",
                    "Siege": s,
                    "Inscription": f"I-{name}",
                    "Finance": finance,
                }
            )
        forced = [
            {"Bet": {"name": n, "Siege": s, "Valeur": str(v)}}
            for kind in ("ante", "small blind", "big blind")
            for s in seats
            for n, v in posts[s]
            if n == kind
        ]
        start = seats.index(sb) if sb is not None else (seats.index(bb) - 1) % len(seats)
        dealt = [seats[(start + k) % len(seats)] for k in range(len(seats))]
        cards = [{"Draw": {"Siege": s, "Valeur": 2 * i + c}} for c in range(2) for i, s in enumerate(dealt)]
        self.pool += 1
        return self._add(
            "POJEU",
            {
                "DateEvt": at,
                "Tech": self.tech,
                "Pool": pool or str(self.pool),
                "Participants": {"Joueur": joueurs},
                "Regle": regle,
                "Description": f"Texas Hold'em ({blinds[0]}-{blinds[1]})",
                "Jeu": {
                    "Tour": [
                        {
                            "name": "bet",
                            "Timestamp": at,
                            "Action": forced,
                            "Total": str(pot),
                        },
                        {
                            "name": "pre-flop",
                            "Timestamp": at,
                            "Action": [*cards, *({"Fold": {"Siege": s}} for s in order)],
                        },
                    ]
                },
            },
        )

    def showdown(self, seated: dict[int, str], bb: int, sb: int, loser: int) -> Event:
        """Heads up at 250/500: ``loser`` (more than 500 chips, no more than the other) moves all in
        before the flop and is called; A♠ A♥ beat 7♦ 2♣ on R♣ 9♦ 5♥ V♣ 8♠."""
        winner = sb if loser == bb else bb
        stack = self.chips[seated[loser]]
        assert 500 < stack <= self.chips[seated[winner]]

        def bet(name: str, seat: int, value: int) -> dict[str, Any]:
            return {"Bet": {"name": name, "Siege": seat, "Valeur": str(value)}}

        actions = [
            {"Draw": {"Siege": seat, "Valeur": card}}
            for seat, card in ((winner, 51), (loser, 21), (winner, 50), (loser, 0))
        ]
        if loser == sb:
            actions += [bet("allin", sb, stack - 250), bet("call", bb, stack - 500)]
        else:
            actions += [bet("call", sb, 250), bet("allin", bb, stack - 500), bet("call", sb, stack - 500)]
        joueurs = []
        for s in sorted(seated):
            name = seated[s]
            before = self.chips[name]
            net = stack if s == winner else -stack
            self.chips[name] = before + net
            finance = {
                "Net": str(net),
                "Total": str(stack),
                "CaveAvant": str(before),
                "CaveApres": str(before + net),
            }
            joueurs.append(
                {
                    "IDOper": "0099",
                    "IDJoueur": name,
                    "IPJoueur": "198.51.100.9",
                    "Siege": s,
                    "Inscription": f"I-{name}",
                    "Finance": finance,
                }
            )

        def tour(name: str, acts: list[dict[str, Any]], total: int | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"name": name, "Timestamp": "2026-03-05T20:00:00Z", "Action": acts}
            return out if total is None else {**out, "Total": str(total)}

        def board(*cards: int) -> list[dict[str, Any]]:
            return [{"Draw": {"ouverte": True, "commune": True, "Valeur": c}} for c in cards]

        self.pool += 1
        return self._add(
            "POJEU",
            {
                "Tech": self.tech,
                "Pool": str(self.pool),
                "Participants": {"Joueur": joueurs},
                "Regle": "THNL",
                "Description": "Texas Hold'em No Limit (250-500)",
                "Jeu": {
                    "Tour": [
                        tour("bet", [bet("small blind", sb, 250), bet("big blind", bb, 500)], 750),
                        tour("pre-flop", actions, 2 * stack - 750),
                        tour("flop", board(44, 29, 14)),
                        tour("turn", board(36)),
                        tour("river", board(27)),
                        tour(
                            "reveal",
                            [
                                {"Reveal": {"Siege": s, "Valeur": c}}
                                for s, c in ((loser, 21), (loser, 0), (winner, 51), (winner, 50))
                            ],
                        ),
                    ]
                },
            },
        )


def found(events: list[Event], complete: bool = True) -> tuple[list[tuple[int, str]], TournamentTrail]:
    """The tournament findings of ``events`` (IDEvt, code), and the checker (its not_checked)."""
    trail = TournamentTrail({})
    out = [
        (e.id_evt, f.code) for e in events for f in trail.observe(f"{e.id_oper}/{e.id_coffre}/", e, complete)
    ]
    return out, trail


def everything(events: list[Event]) -> list[tuple[int, str]]:
    """Every finding of the whole audit (the event's own, its hand's, the money trail's)."""
    trail = MoneyTrail()
    return [(e.id_evt, f.code) for e in events for f in audit_event(e, trail)]


def four_players() -> Story:
    story = Story()
    story.register("ann", "ben", "cat", "dan")
    return story


# -------------------------------------------------------------------------------- the hands written


def test_the_hands_written_here_are_legal_hands():
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1, ante=10)
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=3, sb=2, ante=10)
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2, blinds=(100, 200))
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=3, sb=2, ante=100, bba=True, regle="THL")
    for e in story.events:
        if e.xml_tag == "POJEU":
            assert audit_hand(e) == [], e.Pool


def test_the_demo_tournaments_give_no_finding_of_these_rules():
    for folder in ("tournament", "mixed"):
        events = [normalize(p.read_bytes()) for p in sorted((DEMO / folder).iterdir())]
        codes, trail = found(events)
        assert codes == [], folder
        assert not trail.not_checked, folder
        assert [c for c in everything(events) if c[1] in TOURNAMENT_CODES] == []


# -------------------------------------------------------------------------------- BLINDS_DECREASED


def test_blinds_that_go_down_at_a_table():
    """TDA r.23 ("le nouveau niveau de blind s'applique à la main suivante"), club rules 3.1: levels
    follow each other up; 100/200 then 50/100 at the same table is a decrease."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, blinds=(100, 200))
    low = story.walk(table, bb=3, sb=2, blinds=(50, 100))
    assert found(story.events)[0] == [(low.id_evt, "BLINDS_DECREASED")]


def test_blinds_that_rise_or_a_short_blind_are_not_a_decrease():
    """A blind posted all in for less than the level does not show the level."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, blinds=(50, 100))
    story.walk(table, bb=3, sb=2, blinds=(100, 200))
    story.chips["dan"] = 150  # (changed between hands: the money trail's CAVE_CHAIN_BROKEN, not judged here)
    story.walk(table, bb=4, sb=3, blinds=(100, 200))  # dan's big blind all in for 150
    assert found(story.events)[0] == []


def test_another_tables_hand_at_the_old_level_is_not_judged():
    """Hands of two tables interleave: a hand that began before the level changed may be recorded
    after another table's hand at the new level. Each table is judged on its own."""
    story = Story()
    story.register("ann", "ben", "cat", "dan", "eve", "fay")
    one, two = {1: "ann", 2: "ben", 3: "cat"}, {1: "dan", 2: "eve", 3: "fay"}
    story.walk(one, bb=2, sb=1, blinds=(50, 100))
    story.walk(two, bb=2, sb=1, blinds=(50, 100))
    story.walk(one, bb=3, sb=2, blinds=(100, 200))
    story.walk(two, bb=3, sb=2, blinds=(50, 100))  # began before the level changed
    assert found(story.events)[0] == []
    low = story.walk(one, bb=1, sb=3, blinds=(50, 100))
    assert found(story.events)[0] == [(low.id_evt, "BLINDS_DECREASED")]


def test_antes_reduced_but_not_antes_dropped():
    """TDA RP-11: "les Antés ne devraient jamais être réduits". An ante lowered is found; an ante no
    longer posted is not judged (some rooms drop it heads up: Texapoker's note under r.34B)."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, ante=25)
    lower = story.walk(table, bb=3, sb=2, ante=10)
    story.walk(table, bb=4, sb=3, ante=0)
    assert found(story.events)[0] == [(lower.id_evt, "BLINDS_DECREASED")]


def test_each_game_of_a_mixed_tournament_has_its_own_levels():
    """A mixed tournament's level gives each game its own stakes (the WSOP's Players Championship
    played Omaha pot limit at half the blinds of Omaha hi/lo limit in one level): levels are compared
    within one Regle."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, blinds=(100, 200), regle="THL")
    story.walk(table, bb=3, sb=2, blinds=(50, 100))
    assert found(story.events)[0] == []
    lower = story.walk(table, bb=4, sb=3, blinds=(25, 50))
    assert found(story.events)[0] == [(lower.id_evt, "BLINDS_DECREASED")]


def test_a_big_blind_ante_and_antes_of_every_seat_are_not_compared():
    """TDA RP-11's big blind ante (one ante, the big blind's, for the table) against antes of every
    seat: different forms, not compared; within the big blind ante, a lower one is found."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, ante=100, bba=True)
    story.walk(table, bb=3, sb=2, ante=25)
    assert found(story.events)[0] == []
    lower = story.walk(table, bb=4, sb=3, ante=50, bba=True)
    assert found(story.events)[0] == [(lower.id_evt, "BLINDS_DECREASED")]


# -------------------------------------------------------------------------------- BLIND_DODGED


def test_a_big_blind_that_skips_a_player_is_dodged():
    """TDA r.32 ("en tournoi, la règle du bouton mort s'applique"), r.33, club rules 4.2: the old
    demo's hand 4. dan (seat 4) is out; the big blind was ann's (seat 1): it moves to ben (seat 2),
    not to cat (seat 3)."""
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=4, sb=3)
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=1, sb=4)
    dodged = story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=3, sb=2)
    assert found(story.events)[0] == [(dodged.id_evt, "BLIND_DODGED")]


def test_the_dead_button_is_legal():
    """The same hands under the dead button: the big blind moves on to ben."""
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=4, sb=3)
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=1, sb=4)
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=3, sb=2)
    assert found(story.events)[0] == []


def test_a_dead_small_blind_is_legal():
    """TDA r.32: with the small blind's player gone, the hand has only a big blind, which moves on."""
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1)
    # ben (seat 2, the big blind) leaves the table: the big blind moves on to cat, the small blind
    # would be ben's seat: dead
    story.walk({1: "ann", 3: "cat", 4: "dan"}, bb=3, sb=None)
    story.walk({1: "ann", 3: "cat", 4: "dan"}, bb=4, sb=3)
    assert found(story.events)[0] == []


def test_a_player_new_to_the_table_may_take_the_big_blind_at_once():
    """TDA r.11A: the player moved in pays the big blind at once, "même si la grosse blind doit être
    2 fois de suite au même siège"; club rules 2.2. A newcomer is never a dodger."""
    story = Story()
    story.register("ann", "ben", "cat", "dan", "eve")
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1)
    # ben (seat 2) goes to another table; eve sits in seat 2 and posts the big blind there again
    story.walk({1: "ann", 2: "eve", 3: "cat", 4: "dan"}, bb=2, sb=1)
    story.walk({1: "ann", 2: "eve", 3: "cat", 4: "dan"}, bb=3, sb=2)
    assert found(story.events)[0] == []


def test_the_final_table_of_a_real_tournament():
    """The big blinds of the WSOP 2023 #43 final table's hands 61 to 80 (the PHH dataset's
    ``wsop/2023/43/5``, seats rebuilt from the players' rotation): seat 2 busts during a stud level,
    the first Omaha hi/lo hand after it has a dead small blind and its big blind on seat 3, seat 1
    busts at hand 77 and heads-up begins with seat 4 on the big blind (seat 5 paid it last). Legal
    play, not flagged."""
    story = Story(stack=10_000_000)
    story.register("ashton", "tong", "obst", "shakerchi", "rast")
    five = {1: "ashton", 2: "tong", 3: "obst", 4: "shakerchi", 5: "rast"}
    for bb in (1, 2, 3, 4, 5, 1, 2):
        story.walk(five, bb=bb, sb=(bb - 2) % 5 + 1, blinds=(75_000, 150_000))
    four = {s: n for s, n in five.items() if s != 2}
    story.walk(four, bb=3, sb=None, blinds=(125_000, 250_000), regle="O4JL")
    story.walk(four, bb=4, sb=3, blinds=(125_000, 250_000), regle="O4JL")
    story.walk(four, bb=5, sb=4, blinds=(125_000, 250_000), regle="O4JL")
    story.walk({1: "ashton", 4: "shakerchi", 5: "rast"}, bb=1, sb=5, blinds=(125_000, 250_000), regle="O4JL")
    for bb in (4, 5, 4):
        story.walk({4: "shakerchi", 5: "rast"}, bb=bb, sb=9 - bb, blinds=(150_000, 300_000), regle="O4JL")
    codes, trail = found(story.events)
    assert codes == [] and not trail.not_checked


# -------------------------------------------------------------------------------- heads-up


def test_going_heads_up_the_last_big_blind_does_not_post_it_again():
    """TDA r.34B: "à la première main du heads-up, placer le bouton de façon qu'aucun joueur ne paye
    la grosse blind deux fois de suite"; club rules 4.3."""
    story = Story()
    story.register("ann", "ben", "cat")
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=3, sb=2)
    # ann leaves the table; cat, the last big blind, posts it again at the first hand of heads-up
    twice = story.walk({2: "ben", 3: "cat"}, bb=3, sb=2)
    assert found(story.events)[0] == [(twice.id_evt, "HEADS_UP_CHANGEOVER_WRONG")]


def test_going_heads_up_the_button_goes_before_the_last_big_blind():
    """Club rules 4.3: "le bouton est placé devant le joueur qui a payé en dernier la grosse blinde":
    the big blind walks on from ann's seat to ben's, and cat has the button and the small blind (TDA
    r.34B)."""
    story = Story()
    story.register("ann", "ben", "cat")
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=3, sb=2)
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=1, sb=3)
    # ann (seat 1), the last big blind, leaves the table; of the two left, ben paid it last
    story.walk({2: "ben", 3: "cat"}, bb=2, sb=3)
    story.walk({2: "ben", 3: "cat"}, bb=3, sb=2)
    assert found(story.events)[0] == []


def test_heads_up_the_big_blind_alternates():
    story = Story()
    story.register("ann", "ben")
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2)
    twice = story.walk({1: "ann", 2: "ben"}, bb=1, sb=2)
    assert found(story.events)[0] == [(twice.id_evt, "BLIND_DODGED")]


# -------------------------------------------------------------------------------- STARTING_STACK_WRONG


def test_a_late_entry_with_a_short_stack():
    """TDA r.8A: "il sera attribué une cave complète aux joueurs intégrant le tournoi ... en
    inscription tardive ou en réentrée"."""
    story = Story(fmt="T/M")
    story.register("ann", "ben", "cat")
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.register("dan")
    story.chips["dan"] = 600
    late = story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=3, sb=2)
    assert found(story.events)[0] == [(late.id_evt, "STARTING_STACK_WRONG")]


def test_a_late_entry_with_the_full_stack_and_a_rebuy():
    """A re-buy (POACHAT) adds chips whose count the event does not say: not a starting stack."""
    story = Story(fmt="T/AM")
    story.register("ann", "ben", "cat")
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.register("dan")
    story.rebuy("ann", 1000)
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=3, sb=2)
    assert found(story.events)[0] == []
    assert everything(story.events) == []


def test_an_add_on_before_the_first_hand():
    """A POACHAT before an inscription's first hand: its first CaveAvant holds chips the event does
    not count (annex 1.3.6.c.4), not judged as a starting stack; its chips are in play."""
    story = Story(fmt="T/A")
    story.register("ann", "ben")
    story.rebuy("ann", 500)
    story.showdown({1: "ann", 2: "ben"}, bb=1, sb=2, loser=2)
    story.result("ben", 2)
    story.result("ann", 1)
    assert found(story.events)[0] == []
    assert everything(story.events) == []


def test_the_first_hand_sets_the_starting_stack():
    story = Story()
    story.register("ann", "ben", "cat")
    story.chips["cat"] = 900
    first = story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    codes, _ = found(story.events)
    assert codes == [(first.id_evt, "STARTING_STACK_WRONG")]


# -------------------------------------------------------------------------------- TOURNAMENT_CHIPS_WRONG


def test_the_winner_holds_every_chip():
    """Decree 2016-1326 art. 1 II 2°: "la compétition s'achevant lorsqu'un joueur a remporté les
    mises de tous les autres"."""
    story = Story(fmt="T/A")
    story.register("ann", "ben")
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2)
    story.rebuy("ann", 1000)
    story.showdown({1: "ann", 2: "ben"}, bb=2, sb=1, loser=2)
    story.result("ben", 2)
    story.result("ann", 1)
    assert story.chips["ann"] == 3000
    assert found(story.events)[0] == []
    assert everything(story.events) == []


def test_chips_raked_from_a_tournament_hand():
    story = Story()
    story.register("ann", "ben")
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2, rake=20)
    last = story.showdown({1: "ann", 2: "ben"}, bb=2, sb=1, loser=2)
    codes, _ = found(story.events)
    assert codes == [(last.id_evt, "TOURNAMENT_CHIPS_WRONG")]


def test_a_player_gone_with_chips_and_never_settled():
    """cat leaves the table with chips and no POBILAN; the others play on and ann is ranked first
    without them."""
    story = Story()
    story.register("ann", "ben", "cat")
    story.walk({1: "ann", 2: "ben", 3: "cat"}, bb=2, sb=1)
    story.showdown({1: "ann", 2: "ben"}, bb=1, sb=2, loser=1)
    story.result("ann", 2)
    story.result("ben", 1)
    codes, _ = found(story.events)
    assert codes == [(story.events[-1].id_evt, "TOURNAMENT_CHIPS_WRONG")]


def test_a_stack_created_between_hands_is_the_money_trails_finding_only():
    """CAVE_CHAIN_BROKEN (trail.py) reports a stack that changes between two hands; the chips it made
    are counted in play, so the end of the tournament does not report them again."""
    story = Story()
    story.register("ann", "ben")
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2)
    story.chips["ann"] += 500
    changed = story.walk({1: "ann", 2: "ben"}, bb=2, sb=1)
    story.showdown({1: "ann", 2: "ben"}, bb=1, sb=2, loser=2)
    story.result("ben", 2)
    story.result("ann", 1)
    assert everything(story.events) == [(changed.id_evt, "CAVE_CHAIN_BROKEN")]


# -------------------------------------------------------------------------------- HAND_OUT_OF_ORDER


def test_a_hand_that_starts_before_the_previous_hand_of_its_table_ended():
    """Annex 1.3.6.c.2: a Tour's Timestamp is « Date et heure du début du tour »; club rules 3.1:
    « Une main commence lorsque le pot précédent est attribué ». The second hand of the table (its
    stacks and blinds following on) is stamped 20:09:30, the hand before it 20:10:00: it started
    before the previous pot was awarded."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, at="2026-03-05T20:10:00Z")
    early = story.walk(table, bb=3, sb=2, at="2026-03-05T20:09:30Z")
    story.walk(table, bb=4, sb=3, at="2026-03-05T20:11:00Z")
    assert found(story.events)[0] == [(early.id_evt, "HAND_OUT_OF_ORDER")]
    assert [c for c in everything(story.events) if c[1] == "HAND_OUT_OF_ORDER"] == [
        (early.id_evt, "HAND_OUT_OF_ORDER")
    ]


def test_hands_of_one_table_in_time_order_or_in_the_same_second():
    """The annex stamps to the second: a hand may start in the second the previous one ended."""
    story = four_players()
    table = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    story.walk(table, bb=2, sb=1, at="2026-03-05T20:10:00Z")
    story.walk(table, bb=3, sb=2, at="2026-03-05T20:10:00Z")
    story.walk(table, bb=4, sb=3, at="2026-03-05T20:11:00Z")
    assert found(story.events)[0] == []


def test_hands_of_different_tables_may_interleave():
    """Two tables of one tournament play at once: their hands are recorded in any order between
    them; only each table's own order is judged."""
    story = Story()
    story.register("ann", "ben", "cat", "dan", "eve", "fay", "gus", "hal")
    one = {1: "ann", 2: "ben", 3: "cat", 4: "dan"}
    two = {1: "eve", 2: "fay", 3: "gus", 4: "hal"}
    story.walk(one, bb=2, sb=1, at="2026-03-05T20:10:00Z")
    story.walk(two, bb=2, sb=1, at="2026-03-05T20:05:00Z")
    story.walk(one, bb=3, sb=2, at="2026-03-05T20:12:00Z")
    story.walk(two, bb=3, sb=2, at="2026-03-05T20:07:00Z")
    assert found(story.events)[0] == []
    late = story.walk(two, bb=4, sb=3, at="2026-03-05T20:06:00Z")
    assert found(story.events)[0] == [(late.id_evt, "HAND_OUT_OF_ORDER")]


# -------------------------------------------------------------------------------- context absent


def test_a_lone_hand_is_not_checked():
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1)
    hand = story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=4, sb=3)
    codes, trail = found([hand], complete=False)
    assert codes == []
    assert trail.not_checked == {
        "BLINDS_DECREASED": 1,
        "BLIND_DODGED": 1,
        "STARTING_STACK_WRONG": 1,
        "HAND_OUT_OF_ORDER": 1,
    }


def test_after_a_gap_nothing_across_hands_fires():
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1, blinds=(100, 200))
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=3, sb=2)  # (lost)
    later = story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=1, sb=4, blinds=(50, 100))
    trail = TournamentTrail({})
    for e in story.events[:-2]:
        assert trail.observe("0099/7/", e, True) == []
    assert trail.observe("0099/7/", later, False) == []
    assert trail.not_checked["BLIND_DODGED"] == 1 and trail.not_checked["BLINDS_DECREASED"] == 1


def test_a_hand_at_a_table_that_cannot_be_inferred_is_not_checked():
    """Four players redrawn to new seats (the final table, club rules 2.1): no table shares enough
    of them on the same seats, so the hand has no previous hand to be judged against."""
    story = four_players()
    story.walk({1: "ann", 2: "ben", 3: "cat", 4: "dan"}, bb=2, sb=1)
    story.walk({1: "dan", 2: "cat", 3: "ben", 4: "ann"}, bb=4, sb=3, blinds=(25, 50))
    codes, trail = found(story.events)
    assert codes == []
    assert trail.not_checked == {"BLINDS_DECREASED": 1, "BLIND_DODGED": 1, "HAND_OUT_OF_ORDER": 1}


def test_a_cash_game_is_not_a_tournament():
    story = Story(tech="CG-1", fmt="CG")
    story.register("ann", "ben")
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2, blinds=(100, 200))
    story.walk({1: "ann", 2: "ben"}, bb=1, sb=2, blinds=(50, 100))
    codes, trail = found(story.events)
    assert codes == [] and not trail.not_checked


# -------------------------------------------------------------------------------- state and docs


def test_a_techs_state_is_forgotten_when_it_ends():
    store: dict[str, Any] = {}
    trail = TournamentTrail(store)
    story = Story()
    story.register("ann", "ben")
    story.showdown({1: "ann", 2: "ben"}, bb=1, sb=2, loser=2)
    story.result("ben", 2)
    for e in story.events:
        trail.observe("0099/7/", e, True)
    assert store
    story.result("ann", 1)
    trail.observe("0099/7/", story.events[-1], True)
    assert store == {}


def test_the_codes_are_registered_in_the_tournament_family_and_documented():
    for code in TOURNAMENT_CODES:
        assert CODES[code][0] == "tournament"
    text = (ROOT / "docs" / "money-trail.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^\| `([A-Z_]+)` \| (tournament) \|", text, re.MULTILINE))
    registered = {code: family for code, (family, _) in CODES.items() if family == "tournament"}
    assert documented == registered


@pytest.mark.parametrize("code", TOURNAMENT_CODES)
def test_each_code_cites_its_text(code):
    assert re.search(r"TDA|club|decree", CODES[code][1]), CODES[code]
