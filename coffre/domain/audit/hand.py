"""One ``POJEU`` audited: replayed by coffre's engine, its money checked (annex 1.3.6.c.2, 1.3.6.d).

Entry point: :func:`audit_hand`. See docs/hand-audit.md for how each annex field maps to
the engine, the interpretations coffre made, and the finding codes.

Three passes, in this order, each independent of the engine's:

1. the structure and the cards (rounds known and in order, seats known, each card dealt once,
   the counts of cards per variant and round, a Reveal or a Discard only of a held card);
2. the money, pure arithmetic (rounds' and players' totals net of an uncalled bet, Net, the sum
   of Net and Rake, a player betting more than their stack);
3. the replay (:class:`_Replay`) on coffre's engine (:class:`~.engine.Table`), only when pass 1
   found nothing (the engine needs consistent cards): each action in turn and legal for the
   structure, names that say what the action does, the forced bets, and at the end the payoffs the
   revealed cards give against the recorded finance. The first illegal action stops the replay
   (what follows cannot be replayed faithfully); an unexpected engine failure becomes
   ``REPLAY_FAILED``, never an exception. The rules of poker the replay holds the hand to beyond
   the annex (decree 2016-1326, TDA 2024, the club's rules: antes, dead small blind, reopening,
   showdown, odd chip, 2-7, the operator's fixed-limit cap as :class:`~.house.HouseRules`) are in
   docs/hand-audit.md, "The rules of poker". pokerkit, the engine before issue 31, replays the
   same hands in the tests (tests/audit/pokerkit_engine.py), which must agree with this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from ..catalogue.poker import POJEU, Bet, Check, Discard, Draw, Fold, Reveal, Round
from . import ranking
from .engine import BETTING, DEALING, OVER, Illegal, Table, VariantRules, rules_of
from .findings import Finding, register
from .house import DEFAULT_RULES, HouseRules, Reopening, scale_of
from .table import audit_table

register(
    "cards",
    CARD_DEALT_TWICE="a card code is dealt (Draw) more than once in one hand",
    CARD_COUNT_WRONG="a round deals a number of cards (hole, up, board, replacements) the variant does not",
    REVEAL_NOT_HELD="a Reveal shows a card that seat was not dealt (or had discarded)",
    DISCARD_NOT_HELD="a Discard throws a card that seat does not hold",
)
register(
    "order",
    ROUND_UNKNOWN="a Tour's name is not a round of the hand's Regle (nor an accepted alias)",
    ROUND_OUT_OF_ORDER="the Tours are not in the order of the variant's rounds",
    SEAT_UNKNOWN="an action names a Siege that is not a participant's",
    FORCED_BETS_WRONG="the antes, blinds or bring-in are missing, repeated, misplaced or by the wrong seat",
    OUT_OF_TURN="a seat acts when it is not its turn (or when nobody is to act)",
    ACTION_AFTER_FOLD="a seat acts after it folded",
    BET_ILLEGAL="a bet, raise, call or bring-in of a size the betting structure forbids",
    BET_NAME_MISMATCH="a Bet's name contradicts what it does (a call that raises, an allin that leaves chips…)",
    CHECK_FACING_BET="a Check when there is a bet to call",
    ROUND_INCOMPLETE="a betting round ends (or the hand does) while a seat still has to act",
    REPLAY_FAILED="the engine could not replay the hand (the reason is in the message)",
)
register(
    "money",
    ROUND_TOTAL_WRONG="a Tour's Total is not the sum of its Bets less the uncalled amount returned in it",
    PLAYER_TOTAL_WRONG="a player's Finance.Total is not the sum of their Bets less the uncalled amount returned",
    NET_WRONG="a player's Net is not CaveApres − CaveAvant",
    NOT_ZERO_SUM="the players' Net and Rake do not sum to zero",
    BET_EXCEEDS_STACK="a player bets more than their CaveAvant",
    WINNINGS_NEGATIVE="CaveApres is below CaveAvant − Total: the player lost more than they bet",
)
register(
    "order",
    BETTING_NOT_REOPENED=(
        "a seat that already acted raises again when only an all-in short of a full raise (in limit,"
        " of half a bet) faced it: the betting was not reopened"
    ),
    ANTE_MISSING="a seat posts no ante in a stud hand (decree 2016-1326 art. 7 III)",
)
register(
    "showdown",
    ALLIN_NOT_SHOWN="a hand live at a showdown with a player all in is not revealed (all hands are tabled)",
    SHOWDOWN_ORDER_WRONG="the first hand revealed is not the last aggressor's (or, with no bet, the first to act's)",
    ODD_CHIP_WRONG="the odd chip of a split pot goes to another tied winner than the texts' (left of the button, suit, high half)",
    PAYOFF_WRONG="a player's result (CaveApres − CaveAvant + Rake) is not what the cards give (winners, split, side pots)",
    REVEAL_INCOMPLETE="a player shows only part of the hole cards at showdown",
)

FORCED = frozenset({"ante", "small blind", "big blind"})
ALIASES = {"blinds": "bet", "showdown": "reveal"}
STAKES = re.compile(r"\((\d+(?:[.,]\d+)?)\s*[-/]\s*(\d+(?:[.,]\d+)?)\)")
"""``(small-big)`` in a ``Description``: the blinds of the table (see ``_Replay._nominal_blinds``)."""
"""Round names the annex's own example uses (compared without case, spaces or hyphens)."""


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


_ROUND_KEYS: dict[str, dict[str, int]] = {}


_ROUND_INDEX: dict[tuple[str, str], int | None] = {}
"""(Regle, a Tour's name as written) -> :func:`_round_index`: the names repeat from hand to hand."""


def _round_index(variant: VariantRules, name: str) -> int | None:
    """The position of ``name`` among the variant's rounds (``bet`` 0 … ``reveal`` last), or None."""
    try:
        return _ROUND_INDEX[variant.regle, name]
    except KeyError:
        pass
    if len(_ROUND_INDEX) > 10_000:
        _ROUND_INDEX.clear()
    index = _ROUND_INDEX[variant.regle, name] = _find_round(variant, name)
    return index


def _find_round(variant: VariantRules, name: str) -> int | None:
    keys = _ROUND_KEYS.get(variant.regle)
    if keys is None:
        from ..catalogue.poker import VARIANTS

        keys = {_key(r): i for i, r in enumerate(VARIANTS[variant.regle].rounds)}
        for alias, target in ALIASES.items():
            keys[alias] = keys[_key(target)]
        _ROUND_KEYS[variant.regle] = keys
    return keys.get(_key(name))


class _Hand:
    """What the passes share: the event read once."""

    def __init__(self, event: POJEU) -> None:
        self.event = event
        self.variant = rules_of(event.Regle)
        self.players = {int(p.Siege): p for p in event.Participants.Joueur}
        self.tours: list[tuple[int, Round]] = []  # (round index, tour) of the known rounds
        self.bets: list[
            tuple[int, str, Bet]
        ] = []  # (round index, round name, Bet) of the known rounds, in order
        self.findings: list[Finding] = []
        self.blocking = False  # a structure or card finding: no engine replay
        self.payoffs_comparable = True  # the finance adds up: who got what can be held against the cards

    def add(self, code: str, message: str, round: str | None = None, seat: int | None = None) -> None:
        self.findings.append(Finding(code, message, round, seat))


def audit_hand(event: POJEU, rules: HouseRules = DEFAULT_RULES) -> list[Finding]:
    """The findings of one hand, pass by pass (empty: consistent). Never raises on a hand's content.
    ``rules``: what the operator sets and the hand does not say (the fixed-limit cap)."""
    table = audit_table(event)  # seats, players, time, actions per round (table.py)
    if table.unreadable:
        return table.findings
    hand = _Hand(event)
    hand.findings += table.findings
    try:
        _structure(hand)
        _cards(hand)
        _money(hand)
        if not hand.blocking:
            _Replay(hand, rules).run()
    except Exception as exc:  # a defect of coffre's: evidence, not a crash
        hand.add("REPLAY_FAILED", f"the audit failed: {type(exc).__name__}: {exc}")
    return hand.findings


# --------------------------------------------------------------------------- pass 1: structure, cards


def _structure(hand: _Hand) -> None:
    """The rounds known and in order, the seats known; the Bets gathered for the passes after."""
    last = -1
    players, bets = hand.players, hand.bets
    for tour in hand.event.Jeu.Tour:
        index = _round_index(hand.variant, tour.name)
        if index is None:
            hand.add("ROUND_UNKNOWN", f"'{tour.name}' is not a round of {hand.event.Regle}", tour.name)
            hand.blocking = True
            continue
        if index <= last:
            hand.add("ROUND_OUT_OF_ORDER", f"'{tour.name}' comes after a later round", tour.name)
            hand.blocking = True
        last = max(last, index)
        hand.tours.append((index, tour))
        name = tour.name
        for action in tour.Action:
            if action.__class__ is Bet:
                bets.append((index, name, action))
            seat = action.Siege  # an int (or None for a board card)
            if seat is not None and seat not in players:
                hand.add(
                    "SEAT_UNKNOWN",
                    f"{type(action).__name__} by seat {seat}, not a participant",
                    tour.name,
                    seat,
                )
                hand.blocking = True


def _cards(hand: _Hand) -> None:
    variant, kind = hand.variant, hand.variant.kind
    rounds = len(variant.rounds) + 1  # the index of "reveal"
    dealt: dict[int, str] = {}
    discarded: set[int] = set()
    held: dict[int, set[int]] = {s: set() for s in hand.players}
    folded: set[int] = set()
    board = 0
    for index, tour in hand.tours:
        name = tour.name
        hole: dict[int, int] = {}  # per seat, the cards dealt in this round (plain dicts: a Counter
        up: dict[int, int] = {}  # is built and updated in Python, these in C)
        thrown: dict[int, int] = {}
        common = 0
        folds: list[int] = []
        for action in tour.Action:
            cls = action.__class__  # the action classes have no subclasses: told apart by identity
            if cls is Fold:
                folds.append(int(action.Siege))  # the round's folds count from the next round on
                continue
            if cls is not Draw and cls is not Discard and cls is not Reveal:
                continue
            seat_of = action.Siege
            if seat_of is not None and int(seat_of) not in held and not (cls is Draw and action.commune):
                continue  # SEAT_UNKNOWN already says so: no card to follow for a seat not at the table
            if cls is Draw:
                code = action.Valeur
                if code in dealt and not (code in discarded and len(dealt) >= 52):
                    hand.add(
                        "CARD_DEALT_TWICE",
                        f"card {code} ({action.card}) is dealt in '{name}' and already was in '{dealt[code]}'",
                        name,
                        action.Siege,
                    )
                    hand.blocking = True
                dealt[code] = name
                if action.commune:
                    common += 1
                else:
                    seat = int(action.Siege)  # type: ignore[arg-type]
                    hole[seat] = hole.get(seat, 0) + 1
                    up[seat] = up.get(seat, 0) + bool(action.ouverte)
                    held[seat].add(code)
            elif cls is Discard:
                seat = int(action.Siege)  # type: ignore[arg-type]
                if action.Valeur not in held[seat]:
                    hand.add(
                        "DISCARD_NOT_HELD",
                        f"seat {seat} discards {action.Valeur} ({action.card}), which it does not hold",
                        name,
                        seat,
                    )
                    hand.blocking = True
                held[seat].discard(action.Valeur)
                discarded.add(action.Valeur)
                thrown[seat] = thrown.get(seat, 0) + 1
            else:  # a Reveal
                seat = int(action.Siege)  # type: ignore[arg-type]
                if action.Valeur not in held[seat]:
                    hand.add(
                        "REVEAL_NOT_HELD",
                        f"seat {seat} reveals {action.Valeur} ({action.card}), which it does not hold",
                        name,
                        seat,
                    )
                    hand.blocking = True
        expected = _expected_cards(
            kind, variant, index, rounds, [s for s in hand.players if s not in folded], thrown
        )
        if expected is not None:
            want_board, want_hole, want_up = expected
            if common != want_board:
                hand.add("CARD_COUNT_WRONG", f"'{name}' deals {common} board cards, not {want_board}", name)
                hand.blocking = True
            if hole != want_hole or (want_up is not None and up != want_up):  # else as the rules deal
                for seat in sorted(set(hole) | set(want_hole)):
                    got, want = hole.get(seat, 0), want_hole.get(seat, 0)
                    if got != want or (want_up is not None and up.get(seat, 0) != want_up.get(seat, 0)):
                        faces = f" ({up.get(seat, 0)} face up, not {want_up.get(seat, 0)})" if want_up else ""
                        hand.add(
                            "CARD_COUNT_WRONG",
                            f"'{name}' deals seat {seat} {got} cards, not {want}{faces}",
                            name,
                            seat,
                        )
                        hand.blocking = True
        board += common
        folded.update(folds)


def _expected_cards(
    kind: str, variant: VariantRules, index: int, reveal: int, live: list[int], thrown: dict[int, int]
) -> tuple[int, dict[int, int], dict[int, int] | None] | None:
    """(board cards, hole cards per seat, face-up cards per seat or None) a round deals; None: no rule."""
    if index == 0 or index == reveal:
        return 0, {}, None
    street = index - 1
    if kind == "holdem":
        if street == 0:
            return 0, dict.fromkeys(live, variant.hole_cards), None
        return (3, 1, 1)[street - 1], {}, None
    if kind == "stud":
        per = (3, 1, 1, 1, 1)[street]
        ups = (1, 1, 1, 1, 0)[street]
        return 0, dict.fromkeys(live, per), dict.fromkeys(live, ups)
    if street == 0:
        return 0, dict.fromkeys(live, 5), None
    return 0, {s: n for s, n in thrown.items() if n}, None


# --------------------------------------------------------------------------- pass 2: money


_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class Contributions:
    """What each seat put into a hand, and what came back uncalled (docs/hand-audit.md)."""

    bets_of: dict[int, list[tuple[str, Decimal]]]
    """Per seat, the (round name, Valeur) of each of its Bets, in order."""
    round_sum: dict[str, Decimal]
    """Per round, the sum of its Bets' Valeur."""
    returned: dict[int, Decimal]
    """Per seat, the uncalled amount given back to it."""
    round_back: dict[str, Decimal]
    """Per round, the uncalled amount given back out of it (from the latest Bets of its bettor)."""
    back_of: dict[tuple[int, str], Decimal] = field(default_factory=dict)
    """Per (seat, round), the uncalled amount given back to the seat out of that round."""

    def round_total(self, name: str) -> Decimal:
        """The round's Total as the annex means it: its Bets less what came back uncalled."""
        return self.round_sum.get(name, Decimal(0)) - self.round_back.get(name, Decimal(0))


def contributions(bets: list[tuple[int, str, Bet]], seats: Iterable[int]) -> Contributions:
    """The ``bets`` ((round index, round name, Bet) in order, index 0 the forced bets' round) by the
    ``seats``, and the uncalled excess of each betting round: what the biggest bettor put in beyond
    the next one (the blinds count with the first betting round, the antes apart)."""
    bets_of: dict[int, list[tuple[str, Decimal]]] = {s: [] for s in seats}
    street_in: dict[int, dict[int, Decimal]] = {}
    round_sum: dict[str, Decimal] = {}
    for index, name, action in bets:
        seat, value = action.Siege, action.Valeur
        of = bets_of.get(seat)
        if of is None:
            continue
        of.append((name, value))
        total = round_sum.get(name)
        round_sum[name] = (_ZERO if total is None else total) + value  # 0 + value: as Decimal sums write it
        if action.name == "ante":
            continue
        street = index - 1 if index else 0  # blinds belong with the first betting round
        into = street_in.get(street)
        if into is None:
            into = street_in[street] = {}
        put = into.get(seat)
        into[seat] = (_ZERO if put is None else put) + value
    returned: dict[int, Decimal] = {}
    round_back: dict[str, Decimal] = {}
    back_of: dict[tuple[int, str], Decimal] = {}
    for contributed in street_in.values():
        ranked = sorted(contributed.values(), reverse=True)
        second = ranked[1] if len(ranked) > 1 else Decimal(0)
        if ranked and ranked[0] > second:
            top = next(s for s, a in contributed.items() if a == ranked[0])
            excess = ranked[0] - second
            returned[top] = returned.get(top, Decimal(0)) + excess
            for round_name, value in reversed(bets_of[top]):
                back = min(excess, value)
                round_back[round_name] = round_back.get(round_name, Decimal(0)) + back
                back_of[top, round_name] = back_of.get((top, round_name), Decimal(0)) + back
                excess -= back
                if not excess:
                    break
    return Contributions(bets_of, round_sum, returned, round_back, back_of)


def event_contributions(event: POJEU) -> Contributions:
    """:func:`contributions` of a whole hand (its rounds the variant knows, in the variant's order)."""
    hand = _Hand(event)
    _structure(hand)
    return contributions(hand.bets, hand.players)


def _money(hand: _Hand) -> None:
    paid = contributions(hand.bets, hand.players)
    bets_of, round_sum, returned, round_back = paid.bets_of, paid.round_sum, paid.returned, paid.round_back
    for _, tour in hand.tours:
        if tour.Total is not None:
            want = round_sum.get(tour.name, Decimal(0)) - round_back.get(tour.name, Decimal(0))
            if tour.Total != want:
                back = round_back.get(tour.name)
                detail = f" less {back} uncalled" if back else ""
                hand.add(
                    "ROUND_TOTAL_WRONG",
                    f"'{tour.name}' Total {tour.Total} ≠ its Bets {round_sum.get(tour.name, 0)}{detail} = {want}",
                    tour.name,
                )
    net_sum = Decimal(0)
    for seat, player in hand.players.items():
        f = player.Finance
        put = sum((v for _, v in bets_of[seat]), Decimal(0))
        back = returned.get(seat, Decimal(0))
        if put > f.CaveAvant:
            hand.add(
                "BET_EXCEEDS_STACK",
                f"seat {seat} bets {put}, more than its CaveAvant {f.CaveAvant}",
                seat=seat,
            )
            hand.blocking = True
        if f.Total != put - back:
            detail = f" less {back} uncalled returned" if back else ""
            hand.add(
                "PLAYER_TOTAL_WRONG",
                f"seat {seat} Total {f.Total} ≠ its Bets {put}{detail} = {put - back}",
                seat=seat,
            )
        if f.Net != f.CaveApres - f.CaveAvant:
            hand.add(
                "NET_WRONG",
                f"seat {seat} Net {f.Net} ≠ CaveApres {f.CaveApres} − CaveAvant {f.CaveAvant}",
                seat=seat,
            )
        won = f.CaveApres - f.CaveAvant + f.Total
        if won < 0:
            hand.payoffs_comparable = False
            hand.add(
                "WINNINGS_NEGATIVE",
                f"seat {seat} CaveApres {f.CaveApres} < CaveAvant {f.CaveAvant} − Total {f.Total}",
                seat=seat,
            )
        net_sum += f.Net + (f.Rake or 0)
    if net_sum:
        hand.payoffs_comparable = False
        hand.add("NOT_ZERO_SUM", f"Σ Net + Σ Rake = {net_sum}, not 0")


# --------------------------------------------------------------------------- pass 3: the engine


class _Stop(Exception):
    """The replay cannot go on faithfully (the finding is already recorded)."""


class _Replay:
    """A hand's actions, one by one, on coffre's engine (:class:`~.engine.Table`): each checked
    against what the rules allow at that point, the first illegal one stopping the replay."""

    __slots__ = (
        "aggressor",
        "all_in_showdown",
        "first_actor",
        "hand",
        "index",
        "lacking",
        "order",
        "pending_board",
        "pending_discard",
        "pending_hole",
        "reopening",
        "reveal_order",
        "revealed",
        "round",
        "rules",
        "scale",
        "street",
        "table",
        "tour_street",
        "variant",
    )

    def __init__(self, hand: _Hand, rules: HouseRules = DEFAULT_RULES) -> None:
        self.hand = hand
        self.rules = rules
        self.variant = hand.variant
        self.table: Table | None = None
        self.order: list[int] = []
        self.index: dict[int, int] = {}
        self.scale = 1
        self.pending_hole: list[list[int]] = []  # per player, the cards recorded and not yet dealt
        self.pending_board: list[int] = []
        self.pending_discard: list[dict[int, list[int]]] = []
        """Per player, per draw (street index), the cards it throws: a draw throws only its own round's
        (with nobody left to bet, several draws' cards are recorded before the engine deals them)."""
        self.tour_street = 0
        self.revealed: dict[int, list[int]] = {}
        self.round = ""
        self.lacking = ""
        # reopening (TDA 47, club 9.15): per betting round, who acted since the last full raise
        self.street = -1
        self.reopening = Reopening(hand.variant.fixed_limit)
        # showdown (TDA 16, 17A): the order of the Reveals, each round's first actor and last aggressor
        self.reveal_order: list[int] = []
        self.first_actor: dict[int, int] = {}
        self.aggressor: dict[int, int] = {}
        self.all_in_showdown = False

    def stop(self, code: str, message: str, seat: int | None = None) -> _Stop:
        self.hand.add(code, message, self.round or None, seat)
        return _Stop()

    def units(self, amount: Decimal) -> int:
        return int(amount * self.scale)

    def run(self) -> None:
        handlers = _HANDLERS
        try:
            self._setup()
            for index, tour in self.hand.tours:
                self.round = tour.name
                if index == 0:
                    self._forced_round(tour)
                    continue
                street = self.tour_street = index - 1
                for action in tour.Action:
                    cls = action.__class__
                    if cls is Draw:  # the most frequent action: _draw, inline
                        if action.commune:
                            self.pending_board.append(action.Valeur)
                        else:
                            self.pending_hole[self.index[action.Siege]].append(action.Valeur)
                    elif (handler := handlers.get(cls)) is not None:  # a card: kept until dealt or shown
                        handler(self, action)
                    else:
                        self._action(action, street)
            self.round = ""
            self._advance()
            self._finish()
        except _Stop:
            pass
        except Illegal as exc:  # the engine refused something coffre's checks did not foresee
            self.hand.add("REPLAY_FAILED", f"the engine: {exc}", self.round or None)

    # -- setup: seats, forced bets, limits

    def _setup(self) -> None:
        hand, variant = self.hand, self.variant
        forced: list[tuple[str, Bet]] = []
        bring_in: Decimal | None = None
        first_raise: Decimal | None = None
        later_bet: tuple[int, Decimal] | None = None
        amounts: list[Decimal] = []  # not a set: 0.5 and 0.50 are equal, but not written to the same unit
        for p in hand.players.values():
            f = p.Finance
            amounts += (f.CaveAvant, f.CaveApres, f.Total)
        stud = variant.kind == "stud"
        for index, round_name, action in hand.bets:
            amounts.append(action.Valeur)
            name = action.name
            if name in FORCED:
                if index != 0:
                    raise self.stop(
                        "FORCED_BETS_WRONG", f"a {name} in '{round_name}', not in the forced bets' round"
                    )
                forced.append((name, action))
            elif index == 0:
                raise self.stop("FORCED_BETS_WRONG", f"a '{name}' among the forced bets ('{round_name}')")
            elif name == "bring-in":
                if not stud or index != 1 or bring_in is not None:
                    raise self.stop("FORCED_BETS_WRONG", f"a bring-in in '{round_name}'", int(action.Siege))
                bring_in = action.Valeur
            elif stud and name in ("bet", "raise", "allin"):
                if index == 1 and first_raise is None:
                    first_raise = action.Valeur  # a completion: to = its Valeur
                elif index > 1 and later_bet is None:
                    later_bet = (index, action.Valeur)
        self.scale = scale_of(amounts)
        antes: dict[int, int] = {}
        small_blinds: list[int] = []
        big_blinds: list[int] = []
        ante_count = 0
        sb = bb = 0  # the first small and big blind posted
        for n, b in forced:
            if n == "ante":
                antes[b.Siege] = self.units(b.Valeur)
                ante_count += 1
            elif n == "small blind":
                if not small_blinds:
                    sb = self.units(b.Valeur)
                small_blinds.append(b.Siege)
            elif n == "big blind":
                if not big_blinds:
                    bb = self.units(b.Valeur)
                big_blinds.append(b.Siege)
        if ante_count != len(antes):
            raise self.stop("FORCED_BETS_WRONG", "a seat posts two antes")
        seats = sorted(hand.players)
        blinds: dict[int, int] = {}
        if variant.kind == "stud":
            if len(forced) != ante_count:
                raise self.stop("FORCED_BETS_WRONG", "blinds in a stud hand")
            self.order = seats
            bring = self.units(bring_in) if bring_in is not None else 0
            if first_raise is not None:
                small = self.units(first_raise)
            elif later_bet is not None:
                small = self.units(later_bet[1]) // (1 if later_bet[0] == 2 else 2)
            else:
                small = max(2 * bring, 2)
            if not bring:
                bring = max(small // 4, 1)
            if bring >= small:
                small = bring + 1
            for seat in seats:
                if seat not in antes:  # decree art. 7 III, art. 3 ("tous les joueurs engagent")
                    self.hand.add("ANTE_MISSING", f"seat {seat} posts no ante in a stud hand", seat=seat)
            missing = bb = 0
        else:
            dead_small = not small_blinds and len(big_blinds) == 1 and len(seats) > 2
            if (len(small_blinds) != 1 and not dead_small) or len(big_blinds) != 1:
                raise self.stop(
                    "FORCED_BETS_WRONG",
                    f"{len(small_blinds)} small blind(s) and {len(big_blinds)} big blind(s), not one of each",
                )
            bb_seat = big_blinds[0]
            if dead_small:
                # TDA 32 (dead button), 54B ("pas de SB"): the small blind's seat is empty, the button
                # is the seat before the big blind, and the big blind acts first after the flop
                at = seats.index(bb_seat)
                self.order = seats[at:] + seats[:at]
                sb = 0
            else:
                sb_seat = small_blinds[0]
                if sb_seat == bb_seat:  # décret art. 3: the blinds are the two players left of the dealer
                    raise self.stop(
                        "FORCED_BETS_WRONG", f"seat {bb_seat} posts both the small and the big blind", bb_seat
                    )
                if len(seats) == 2:  # heads-up (TDA 34B): the big blind first, the button second
                    self.order = [bb_seat, sb_seat]
                else:
                    at = seats.index(sb_seat)
                    self.order = seats[at:] + seats[:at]
                    if self.order[1] != bb_seat:
                        raise self.stop(
                            "FORCED_BETS_WRONG",
                            f"the big blind is posted by seat {bb_seat}, not by seat {self.order[1]} after the small blind",
                            bb_seat,
                        )
            posted = sb + bb
            sb, bb = self._nominal_blinds(forced, sb, bb, dead_small)
            blinds = {bb_seat: bb} if dead_small else {sb_seat: sb, bb_seat: bb}
            missing = sb + bb - posted
            bring = 0
            small = max(bb, 1)
        self.index = {s: i for i, s in enumerate(self.order)}
        self.pending_hole = [[] for _ in self.order]
        self.pending_discard = [{} for _ in self.order]
        self.table = Table(
            self.variant,
            [self.units(hand.players[s].Finance.CaveAvant) for s in self.order],
            antes=[antes.get(s, 0) for s in self.order],
            # equal antes (one may be short): what the short one cannot match comes back to the others;
            # antes of some seats only (TDA RP-11's big-blind ante): dead money, nothing handed back
            ante_trimming=len(antes) == len(seats),
            blinds=[blinds.get(s, 0) for s in self.order],
            bring_in=bring,
            small_bet=small,
            cap=self.rules.cap(len(seats)),
            uncapped_two_player_rounds=self.rules.heads_up == "round",
            missing_blinds=missing,
            full_big_blind=bb,
        )

    def _nominal_blinds(
        self, forced: list[tuple[str, Bet]], sb: int, bb: int, dead_small: bool = False
    ) -> tuple[int, int]:
        """The blinds the table plays, when a blind was posted all in for less (its Valeur is the
        player's whole CaveAvant): the hand does not say them, so they are read from the
        Description's ``(small-big)`` as coffre's writer and the annex's example print it
        ("Texas Hold'Em No Limit (0.02-0.04)"), when it is there and not below what was posted.
        Otherwise the amounts posted stand (a short blind then makes the limits look smaller).
        With a dead small blind (none posted) the small blind is the Description's too, or else the
        big blind: an upper bound, so that the pot limit before the flop (TDA 54B) flags no legal bet."""
        short = dead_small or any(
            b.Valeur == self.hand.players[int(b.Siege)].Finance.CaveAvant
            for n, b in forced
            if n in ("small blind", "big blind") and int(b.Siege) in self.hand.players
        )
        match = STAKES.search(self.hand.event.Description or "") if short else None
        if match is None:
            return (bb, bb) if dead_small else (sb, bb)
        small, big = (self.units(Decimal(x.replace(",", "."))) for x in match.groups())
        if small >= sb and big >= bb and big >= small:
            return small, big
        return (bb, bb) if dead_small else (sb, bb)

    def _forced_round(self, tour: Round) -> None:
        """The engine posted the antes and blinds from this round's amounts; only the cards remain."""
        for action in tour.Action:
            if not isinstance(action, Bet):
                raise self.stop("FORCED_BETS_WRONG", f"a {type(action).__name__} among the forced bets")

    # -- the actions: cards are buffered until the engine deals them, the others are judged now

    def _action(self, action: object, street: int) -> None:
        table = self.table
        assert table is not None
        if table.phase != BETTING:
            self._advance()
        seat = action.Siege  # type: ignore[attr-defined]  # an int (NonNegInt)
        i = self.index[seat]
        actor = table.actors[0] if table.actors else None
        if table.street_index is not None and table.street_index < street and actor is not None:
            raise self.stop(
                "ROUND_INCOMPLETE",
                f"seat {self.order[actor]} had still to act in '{self.variant.rounds[table.street_index]}'",
                self.order[actor],
            )
        if not table.live[i]:
            raise self.stop("ACTION_AFTER_FOLD", f"seat {seat} acts after folding", seat)
        if actor is None:
            raise self.stop("OUT_OF_TURN", f"seat {seat} acts when nobody is to act", seat)
        if actor != i:
            raise self.stop("OUT_OF_TURN", f"seat {seat} acts in the turn of seat {self.order[actor]}", seat)
        if street != self.street:
            self._new_round(street)
        self.first_actor.setdefault(street, seat)
        kind = action.__class__
        if kind is Fold:
            if table.bring_in_status:  # decree art. 7 III: the bring-in "ne peut passer"
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat} folds instead of the bring-in", seat)
            table.fold()
        elif kind is Check:
            if table.bring_in_status:
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat} checks instead of the bring-in", seat)
            owed = table.owed() or 0
            if owed:
                raise self.stop(
                    "CHECK_FACING_BET", f"seat {seat} checks facing a bet of {owed / self.scale}", seat
                )
            table.check_or_call()
            self.reopening.calls(seat, chips=False)
        elif kind is Bet:
            self._bet(action, seat, i)  # type: ignore[arg-type]

    def _draw(self, action: Draw) -> None:
        if action.commune:
            self.pending_board.append(action.Valeur)
        else:
            self.pending_hole[self.index[int(action.Siege)]].append(action.Valeur)  # type: ignore[arg-type]

    def _discard(self, action: Discard) -> None:
        thrown = self.pending_discard[self.index[int(action.Siege)]]  # type: ignore[arg-type]
        thrown.setdefault(self.tour_street, []).append(action.Valeur)

    def _reveal(self, action: Reveal) -> None:
        seat = int(action.Siege)  # type: ignore[arg-type]
        self.revealed.setdefault(seat, []).append(action.Valeur)
        if seat not in self.reveal_order:
            self.reveal_order.append(seat)

    def _bet(self, action: Bet, seat: int, i: int) -> None:
        table = self.table
        assert table is not None
        added = int(action.Valeur * self.scale)
        stack = table.stacks[i]
        name = action.name
        if name == "bring-in":
            if not table.bring_in_status:
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat}'s bring-in: no bring-in is due", seat)
            due = min(stack, table.bring_in)
            if added != due:
                raise self.stop(
                    "BET_ILLEGAL", f"seat {seat}'s bring-in {action.Valeur} is not {due / self.scale}", seat
                )
            table.post_bring_in()
            return
        # what calling costs (the seat is the one to act: checked before)
        owed = 0 if table.bring_in_status else min(stack, max(table.bets) - table.bets[i])
        if added == owed and added > 0:
            want = "allin" if added == stack else "call"
            if name != want and not (name == "call" and want == "allin"):
                self.hand.add(
                    "BET_NAME_MISMATCH",
                    f"seat {seat}'s '{name}' of {action.Valeur} is a {want}",
                    self.round,
                    seat,
                )
            table.check_or_call()
            self.reopening.acted.add(seat)  # Reopening.calls(seat, chips=True)
            return
        if added <= owed:
            raise self.stop(
                "BET_ILLEGAL",
                f"seat {seat} puts in {action.Valeur}, less than the {owed / self.scale} to call",
                seat,
            )
        to = table.bets[i] + added
        refusal, low, high = table.limits()
        verified = refusal is None and low <= to <= high
        if not verified:
            reach = max(
                (table.bets[j] + table.stacks[j] for j in range(table.n) if j != i and table.live[j]),
                default=0,
            )
            if refusal is not None or not reach <= to < low:
                if refusal is None:
                    refusal = (
                        f"{to} is below the minimum {low}"
                        if to < low
                        else f"{to} is above the maximum {high}"
                    )
                raise self.stop("BET_ILLEGAL", f"seat {seat}'s {name} of {action.Valeur}: {refusal}", seat)
            # below the minimum, but it puts every other player in the hand all in: the same as the
            # minimum raise, whose excess would come back uncalled (a limit raise met at a WSOP
            # razz table). The engine raises the minimum; the excess returns to the raiser.
        aggressive = "allin" if added == stack else None
        if name == "call" or (name == "allin" and aggressive is None):
            self.hand.add(
                "BET_NAME_MISMATCH",
                f"seat {seat}'s '{name}' of {action.Valeur} raises"
                + (" and leaves chips behind" if name == "allin" else ""),
                self.round,
                seat,
            )
        elif aggressive and name != "allin":
            self.hand.add(
                "BET_NAME_MISMATCH",
                f"seat {seat}'s '{name}' of {action.Valeur} puts its last chip in",
                self.round,
                seat,
            )
        self._reopening(seat, to if table.completion_status else to - max(table.bets))
        table.raise_to(to if verified else max(to, low), verified=verified)
        self.aggressor[self.street] = seat

    def _new_round(self, street: int) -> None:
        """A betting round begins: nobody has acted; the full bet is the structure's (the big blind
        or the minimum bet in no and pot limit; the round's bet in limit)."""
        table = self.table
        assert table is not None
        self.street = street
        streets = self.variant.streets
        full = table.big_bet if streets[street].big_bet else table.small_bet
        self.reopening.new_round(full)

    def _reopening(self, seat: int, increment: int) -> None:
        """Club 9.15, TDA 47 (:class:`~.house.Reopening`): a seat that acted may not raise while
        only all-ins short of a full raise came after it. The raise is replayed: the engine can."""
        track = self.reopening
        if not track.may_raise(seat):
            self.hand.add(
                "BETTING_NOT_REOPENED",
                f"seat {seat} raises again facing only an all-in short of a full raise"
                f" ({track.short / self.scale} of {track.full / self.scale})",
                self.round,
                seat,
            )
        track.raises(seat, increment)

    # -- the engine's own steps: cards from the buffers, showdown from the reveals

    def _advance(self) -> None:
        table = self.table
        assert table is not None
        self.lacking = ""
        order = self.order
        while table.phase != OVER:
            if table.phase == DEALING:
                lacking = table.deal(self.pending_hole, self.pending_board, self.pending_discard)
                if lacking is not None:  # a later round's, or never dealt: _finish tells
                    what, k = lacking
                    self.lacking = (
                        f"seat {order[k]} is owed a card the hand does not deal"
                        if what == "hole"
                        else f"the board is owed {k} cards the hand does not deal"
                    )
                    return
            elif (i := table.shower) is not None:
                self._show(table, i)
            else:
                return

    def _show(self, table: Table, i: int) -> None:
        seat = self.order[i]
        shown = self.revealed.get(seat)
        if not self.all_in_showdown:  # once a player is all in at the showdown, it stays so
            live = [j for j in range(table.n) if table.live[j]]
            if len(live) > 1 and any(not table.stacks[j] for j in live):
                self.all_in_showdown = True
        if not shown and self.all_in_showdown:
            # TDA 16, club 10.2: with a player all in and the betting over, every live hand is
            # tabled; the cards speak, so the replay shows it (it may still win)
            self.hand.add(
                "ALLIN_NOT_SHOWN",
                f"seat {seat} does not reveal its hand at a showdown with a player all in",
                "reveal",
                seat,
            )
            table.show_or_muck(True)
        elif shown:
            missing = [
                c for c, up in zip(table.hole[i], table.up[i], strict=True) if not up and c not in shown
            ]
            if missing:
                self.hand.add(
                    "REVEAL_INCOMPLETE",
                    f"seat {seat} shows {len(shown)} cards and keeps {len(missing)} face down",
                    "reveal",
                    seat,
                )
            table.show_or_muck(True)
        else:
            table.show_or_muck(False)

    def _finish(self) -> None:
        table = self.table
        assert table is not None
        if table.phase != OVER:
            if self.lacking:
                raise self.stop("CARD_COUNT_WRONG", self.lacking)
            if table.actors:
                seat = self.order[table.actors[0]]
                raise self.stop("ROUND_INCOMPLETE", f"the hand ends while seat {seat} has to act", seat)
            raise self.stop("REPLAY_FAILED", f"the hand ends before the engine does ({table.street_index=})")
        leftover = sum(map(len, self.pending_hole)) + len(self.pending_board)
        if leftover:
            raise self.stop("CARD_COUNT_WRONG", f"{leftover} cards are dealt after the hand is over")
        self._showdown_order()
        if not self.hand.payoffs_comparable:
            return  # money is created or lost: NOT_ZERO_SUM / WINNINGS_NEGATIVE say so, per-seat blame would be noise
        tolerance = [0] * table.n  # per player, the odd chips it may be owed or owe
        halves: dict[int, set[int]] = {}
        for amounts, pot_index, _ in table.pushes:
            winners = [i for i, a in enumerate(amounts) if a]
            if len(winners) > 1:
                for i in winners:
                    tolerance[i] += 1  # the odd chip of a tie
            halves.setdefault(pot_index, set()).update(winners)
        if self.variant.split:
            for winners in halves.values():
                if len(winners) > 1:
                    for i in winners:
                        tolerance[i] += 1  # the odd chip between a high and a low half
        off: dict[int, int] = {}
        results: dict[int, Decimal] = {}
        for i, seat in enumerate(self.order):
            f = self.hand.players[seat].Finance
            results[i] = f.CaveApres - f.CaveAvant + (f.Rake or 0)
            if diff := self.units(results[i]) - table.payoffs[i]:
                off[i] = diff
        if off and all(abs(d) <= tolerance[i] for i, d in off.items()):
            # TDA 20, club 10.4: only odd chips of split pots went to another tied winner
            if any(self.hand.players[self.order[i]].Finance.Rake for i in off):
                return  # how each winner's Rake was rounded may carry the odd unit: not judged
            got = [self.order[i] for i, d in off.items() if d > 0]
            owed = [self.order[i] for i, d in off.items() if d < 0]
            self.hand.add(
                "ODD_CHIP_WRONG",
                f"the odd chip goes to seat(s) {', '.join(map(str, got))}; TDA 20 gives it to seat(s)"
                f" {', '.join(map(str, owed))}",
                seat=owed[0] if owed else None,
            )
            return
        for i, diff in off.items():
            if abs(diff) > tolerance[i]:
                seat = self.order[i]
                self.hand.add(
                    "PAYOFF_WRONG",
                    f"seat {seat}: CaveApres − CaveAvant + Rake = {results[i]}, the cards give"
                    f" {Decimal(table.payoffs[i]) / self.scale}",
                    seat=seat,
                )

    def _showdown_order(self) -> None:
        """TDA 17A, club 10.3: at a showdown with nobody all in, the last aggressor of the last betting
        round shows first; with no bet in it, the player who would have acted first (the first left
        of the button; at stud the best showing hand, in razz the lowest). Judged only when that
        player reveals (a player may concede without showing) and nobody is all in (TDA 16 tables
        every hand at once)."""
        if self.all_in_showdown or len(self.reveal_order) < 2 or not self.first_actor:
            return
        last = len(self.variant.rounds) - 1
        if last not in self.first_actor:
            return
        first = self.aggressor.get(last, self.first_actor[last])
        if first in self.reveal_order and self.reveal_order[0] != first:
            why = "the last aggressor" if last in self.aggressor else "the first to act in the last round"
            self.hand.add(
                "SHOWDOWN_ORDER_WRONG",
                f"seat {self.reveal_order[0]} shows first; seat {first}, {why}, must",
                "reveal",
                self.reveal_order[0],
            )


_HANDLERS: dict[type, Callable[[_Replay, object], None]] = {
    Draw: _Replay._draw,  # type: ignore[dict-item]
    Discard: _Replay._discard,  # type: ignore[dict-item]
    Reveal: _Replay._reveal,  # type: ignore[dict-item]
}
"""The actions that only say what the cards are: kept until the engine deals or shows them."""


# --------------------------------------------------------------------------- the pots, as the engine shares them


@dataclass(frozen=True, slots=True)
class PotShare:
    """One pot, or one half of a split pot, as coffre's engine shares it by the cards."""

    pot: int
    """0 the main pot, 1 the first side pot, …"""
    amount: Decimal
    """The whole pot (both halves of a split pot)."""
    players: tuple[int, ...]
    """The seats still in for it once the showdown put out the hands that could win no part of any
    pot (the winners and the hands that tie or win elsewhere), in seat order."""
    kind: str | None
    """The kind of hand (:data:`~.ranking.HAND_KINDS`' names) that won this share (the first, high,
    kind when one hand is left at the showdown and takes the whole pot), or None: everybody else
    folded and the last player takes the pot without a showdown."""
    winners: tuple[tuple[int, Decimal], ...]
    """(seat, amount) of each winner of this share (a tie splits it; the odd chip as the engine gives it)."""


def shared_pots(event: POJEU, rules: HouseRules = DEFAULT_RULES) -> list[PotShare] | None:
    """How coffre's engine shares the pots of ``event`` by its cards: :func:`audit_hand`'s replay, run
    to the end. None when the replay does not reach the end of the hand (the audit's findings say
    why: the structure, the cards or an illegal action). Amounts before any rake."""
    if audit_table(event).unreadable:
        return None
    hand = _Hand(event)
    try:
        _structure(hand)
        _cards(hand)
        _money(hand)
        if hand.blocking:
            return None
        replay = _Replay(hand, rules)
        replay.run()
    except Exception:  # audit_hand reports it as REPLAY_FAILED
        return None
    table = replay.table
    if table is None or table.phase != OVER:
        return None
    kinds = dict(zip(hand.variant.hands, ranking.HAND_KINDS[hand.variant.regle], strict=True))
    order, scale = replay.order, replay.scale
    shares = []
    for amounts, index, kind in table.pushes:
        amount, players = table.shared[index]
        shares.append(
            PotShare(
                index,
                Decimal(amount) / scale,
                tuple(sorted(order[i] for i in players)),
                None if kind is None else kinds[kind],
                tuple(sorted((order[i], Decimal(a) / scale) for i, a in enumerate(amounts) if a)),
            )
        )
    return shares
