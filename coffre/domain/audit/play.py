"""pokerkit plays a random but legal hand of any ``Regle`` and coffre writes it as a ``POJEU``.

Used by the hand audit's property test (every hand played here must audit clean), by
bench/audit.py, and by the demo's tournament. The POJEU follows the conventions of
docs/hand-audit.md: forced bets in ``bet``, each Bet's ``Valeur`` the amount it adds, an
uncalled bet returned in the Totals, the rake taken from the winners' winnings.

    >>> import random
    >>> hand = play_hand("THNL", {1: "2.00", 4: "3.50", 6: "1.00"}, random.Random(7), blinds=("0.02", "0.04"))
    >>> sorted(hand.final_stacks) == [1, 4, 6] and sum(hand.final_stacks.values()) == Decimal("6.50")
    True
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pokerkit import Automation, Mode, State

from ..catalogue.poker import VARIANTS
from .table import MAX_SEATS
from .variants import CARDS, CODES, UNKNOWN_CARD, EngineVariant, Reopening, engine_variant, scale_of, to_int

Amount = Decimal | int | str

PLAY_AUTOMATIONS: tuple[Automation, ...] = (
    Automation.ANTE_POSTING,
    Automation.BET_COLLECTION,
    Automation.BLIND_OR_STRADDLE_POSTING,
    Automation.RUNOUT_COUNT_SELECTION,
    Automation.HAND_KILLING,
    Automation.CHIPS_PUSHING,
    Automation.CHIPS_PULLING,
)
"""The player's decisions and the cards are this module's (from its seeded random); the rest is pokerkit's."""

MAX_PLAYERS: dict[str, int] = MAX_SEATS
"""Per ``Regle``, the seats decree 2016-1326 art. 2 allows (10 hold'em, 9 Omaha, 7 stud, 6 triple
draw: :data:`coffre.domain.audit.table.MAX_SEATS`). Seven-card stud then deals at most 7 × 7 = 49
cards of 52 (no shared last card needed); triple draw's discards are limited to what is left in the
deck, so that no card is ever dealt twice."""


@dataclass(frozen=True, slots=True)
class PlayedHand:
    """One hand played: its ``POJEU`` (coffre's JSON form) and each seat's stack after it."""

    regle: str
    event: dict[str, Any]
    """``{"POJEU": {...}}``, amounts as strings: ``json.dumps`` it for ``normalize()``."""
    final_stacks: dict[int, Decimal]
    """Seat -> CaveApres (after the rake)."""
    rake: Decimal = Decimal(0)
    showdown: bool = False
    """Whether the hand ended in a showdown (two players or more revealed their cards)."""

    def json(self) -> bytes:
        return json.dumps(self.event, ensure_ascii=False).encode()

    def xml(self) -> bytes:
        """The POJEU as XML, in the schema's order (through coffre's own model)."""
        from ..codec import pretty_xml
        from ..normalize import normalize

        return pretty_xml(normalize(self.json()))


@dataclass
class _Recorder:
    """The POJEU's rounds being written as the engine plays."""

    rounds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # per betting street: seat -> amount put in (forced bets included, antes apart)
    street_in: list[dict[int, int]] = field(default_factory=list)
    # per seat, the (round, amount) of each of its Bets, to return an uncalled excess from
    bets_of: dict[int, list[list[Any]]] = field(default_factory=dict)

    def add(self, round_name: str, action: dict[str, Any]) -> None:
        self.rounds.setdefault(round_name, []).append(action)

    def bet(self, round_name: str, name: str, seat: int, amount: int, street: int | None) -> None:
        self.add(round_name, {"Bet": {"name": name, "Siege": seat, "Valeur": amount}})
        entry = [round_name, amount]
        self.bets_of.setdefault(seat, []).append(entry)
        if street is not None:
            while len(self.street_in) <= street:
                self.street_in.append({})
            self.street_in[street][seat] = self.street_in[street].get(seat, 0) + amount

    def settle(self, seats: Iterable[int]) -> tuple[dict[int, int], dict[str, int]]:
        """(per seat, what it put in net of an uncalled excess; per round, its Bets less the excess
        returned out of it): the biggest bettor of a street gets back what it put in beyond the next one."""
        put_in = {s: sum(a for _, a in self.bets_of.get(s, [])) for s in seats}
        round_total: dict[str, int] = {}
        for bets in self.bets_of.values():
            for round_name, amount in bets:
                round_total[round_name] = round_total.get(round_name, 0) + amount
        for street in self.street_in:
            if len(street) >= 1:
                ranked = sorted(street.values(), reverse=True)
                second = ranked[1] if len(ranked) > 1 else 0
                if ranked[0] > second:
                    (top,) = [s for s, a in street.items() if a == ranked[0]]
                    excess = ranked[0] - second
                    put_in[top] -= excess
                    for entry in reversed(self.bets_of[top]):  # the latest bets hold the excess
                        back = min(excess, entry[1])
                        round_total[entry[0]] -= back
                        excess -= back
                        if not excess:
                            break
        return put_in, round_total

    def tours(
        self,
        regle: str,
        reveals: list[dict[str, Any]],
        round_total: Mapping[str, int],
        out: Callable[[int], str],
        stamp: Callable[[str], str],
    ) -> list[dict[str, Any]]:
        """The POJEU's Tours: the variant's rounds that hold an action, in its order, each Bet's
        Valeur written by ``out``; ``stamp(name)`` gives each round's Timestamp (called in order)."""
        tours = []
        for name in VARIANTS[regle].rounds:
            actions = reveals if name == "reveal" else self.rounds.get(name)
            if not actions:
                continue
            for a in actions:
                if "Bet" in a:
                    a["Bet"]["Valeur"] = out(a["Bet"]["Valeur"])
            tour: dict[str, Any] = {"name": name, "Timestamp": stamp(name), "Action": actions}
            if name in round_total:
                tour["Total"] = out(round_total[name])
            tours.append(tour)
        return tours


def _amount(value: Amount) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def _seat_order(variant: EngineVariant, seats: list[int], button: int | None) -> list[int]:
    """pokerkit's player order: after the button (small blind first, big blind first heads-up)."""
    seats = sorted(seats)
    if variant.kind == "stud":
        return seats
    if button is None or button not in seats:
        raise ValueError(f"the button {button} is not one of the seats {seats}")
    at = seats.index(button)
    return seats[at + 1 :] + seats[: at + 1]


def play_hand(
    regle: str,
    seats: Mapping[int, Amount],
    rng: random.Random,
    *,
    blinds: tuple[Amount, Amount] | None = None,
    ante: Amount = 0,
    bring_in: Amount | None = None,
    small_bet: Amount | None = None,
    button: int | None = None,
    rake: Amount = 0,
    aggression: float = 0.3,
    fold_rate: float = 0.12,
    players: Mapping[int, Mapping[str, Any]] | None = None,
    header: Mapping[str, Any] | None = None,
    when: datetime | None = None,
) -> PlayedHand:
    """Play one hand of ``regle`` at ``seats`` (seat -> stack) and write it as a POJEU.

    - ``blinds`` (small, big): hold'em, Omaha and triple draw (default 1 and 2 hundredths of the
      smallest stack, at least 0.01 and 0.02); ``ante``: every player's, any variant; ``bring_in``: stud's
      (default: a quarter of the small bet).
    - ``small_bet``: fixed limit's small bet (the big bet is twice it); hold'em and draw use the big
      blind, as coffre's audit assumes; stud's default is 2 × the bring-in. No and pot limit: the
      minimum bet is the big blind.
    - ``button``: the button's seat (default: drawn at random); stud has none.
    - ``rake``: a fraction of each winner's winnings kept by the operator (cash games), rounded down
      to the hand's smallest unit, recorded as that player's ``Finance.Rake``.
    - ``players``: seat -> overrides of the Joueur (IDOper, IDJoueur, IPJoueur, Inscription, …);
      ``header``: overrides of the event's fields (IDOper, IDCoffre, IDEvt, Tech, Pool, …).
    - ``when``: the first round's start (a naive time is UTC); each round starts 3 to 40 s after the
      previous one, all written in UTC, and ``DateEvt`` is the hand's end, after its last round began
      (annex 1.3.6.c.2, docs/hand-audit.md "The table: seats and time").
    """
    variant = engine_variant(regle)
    if not 2 <= len(seats) <= MAX_PLAYERS[variant.regle]:
        raise ValueError(f"{regle} is played by 2 to {MAX_PLAYERS[variant.regle]} players, not {len(seats)}")
    stacks_in = {int(s): _amount(v) for s, v in seats.items()}
    ante_d = _amount(ante)
    smallest = min(stacks_in.values())
    if variant.kind == "stud":
        sb_d = bb_d = Decimal(0)
        bet_d = _amount(small_bet) if small_bet is not None else None
        bring_d = _amount(bring_in) if bring_in is not None else (bet_d / 4 if bet_d else None)
        if bring_d is None:
            bring_d = max((smallest / 200).quantize(Decimal("0.01")), Decimal("0.01"))
        if bet_d is None:
            bet_d = 2 * bring_d
    else:
        if blinds is None:
            sb_d = max((smallest / 100).quantize(Decimal("0.01")), Decimal("0.01"))
            bb_d = 2 * sb_d
        else:
            sb_d, bb_d = _amount(blinds[0]), _amount(blinds[1])
        bring_d = Decimal(0)
        bet_d = bb_d
    rake_d = _amount(rake)
    scale = scale_of([*stacks_in.values(), ante_d, sb_d, bb_d, bring_d, bet_d])
    unit = Decimal(1) / scale

    if variant.kind != "stud" and button is None:
        button = rng.choice(sorted(stacks_in))
    order = _seat_order(variant, list(stacks_in), button)
    n = len(order)
    state = variant.state(
        tuple(to_int(stacks_in[s], scale) for s in order),
        antes=to_int(ante_d, scale),
        blinds=(to_int(sb_d, scale), to_int(bb_d, scale)) if variant.kind != "stud" else 0,
        bring_in=to_int(bring_d, scale),
        small_bet=to_int(bet_d, scale),
        automations=PLAY_AUTOMATIONS,
        mode=Mode.CASH_GAME,
    )
    state.strict_reopening = True  # type: ignore[attr-defined]  # never a raise TDA 47 forbids
    deck = list(range(52))
    rng.shuffle(deck)
    rec = _Recorder()
    reveals: list[dict[str, Any]] = []
    shown: set[int] = set()
    _play(state, variant, order, deck, rng, rec, reveals, shown, aggression, fold_rate)

    # money: what each player put in net of an uncalled excess, what the engine paid them
    start = {s: to_int(stacks_in[s], scale) for s in order}
    end = {order[i]: state.stacks[i] for i in range(n)}
    put_in, round_total = rec.settle(order)
    rake_of: dict[int, int] = {}
    for s in order:
        won = end[s] - start[s] + put_in[s]
        if won < 0:
            raise AssertionError(f"seat {s} won {won}: the recorder lost track of its bets")
        taken = int(Decimal(won) * rake_d) if rake_d else 0
        if taken:
            rake_of[s] = taken
            end[s] -= taken

    def dec(x: int) -> Decimal:
        return (Decimal(x) * unit).quantize(unit) if scale > 1 else Decimal(x)

    def out(x: int) -> str:
        return str(dec(x))

    when = when or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    stamp = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)  # Timestamps are UTC

    def next_stamp(_: str) -> str:
        nonlocal stamp
        text = stamp.strftime("%y%m%d%H%M%S")
        stamp += timedelta(seconds=rng.randint(3, 40))
        return text

    tours = rec.tours(regle, reveals, round_total, out, next_stamp)

    joueurs = []
    for s in sorted(order):
        finance: dict[str, Any] = {
            "Net": out(end[s] - start[s]),
            "Total": out(put_in[s]),
            "CaveAvant": out(start[s]),
            "CaveApres": out(end[s]),
        }
        if s in rake_of:
            finance["Rake"] = out(rake_of[s])
        joueur = {
            "IDOper": "0099",
            "IDJoueur": f"joueur-{s}",
            "IPJoueur": f"2001:db8::{s:x}",
            "Siege": s,
            "Inscription": f"inscription-{s}",
            **(players or {}).get(s, {}),
            "Finance": finance,
        }
        joueurs.append(joueur)
    stakes = (
        f"{dec(to_int(sb_d, scale))}-{dec(to_int(bb_d, scale))}"
        if variant.kind != "stud"
        else (f"{dec(to_int(bet_d, scale))}-{dec(2 * to_int(bet_d, scale))}")
    )
    pojeu: dict[str, Any] = {
        "IDOper": "0099",
        "IDCoffre": 1,
        "DateEvt": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),  # the hand over: after its last round began
        "IDEvt": 1,
        "Tech": f"{regle}-{rng.getrandbits(32):08x}",
        "Pool": "1",
        **(header or {}),
        "Participants": {"Joueur": joueurs},
        "Regle": regle,
        "Description": f"{VARIANTS[regle].name} ({stakes})",
        "Jeu": {"Tour": tours},
    }
    return PlayedHand(
        regle,
        {"POJEU": pojeu},
        {s: dec(end[s]) for s in order},
        dec(sum(rake_of.values())),
        len(shown) >= 2,
    )


def _play(
    state: State,
    variant: EngineVariant,
    order: list[int],
    deck: list[int],
    rng: random.Random,
    rec: _Recorder,
    reveals: list[dict[str, Any]],
    shown: set[int],
    aggression: float,
    fold_rate: float,
) -> None:
    """Drive ``state`` to its end, choosing the cards (from ``deck``) and every decision."""
    reopening = Reopening(variant.fixed_limit)  # never a raise TDA 47 forbids (docs/hand-audit.md)
    betting_street: int | None = None
    rounds = variant.rounds
    forced_done = False
    while state.status:
        street = state.street_index
        name = rounds[street] if street is not None else "bet"
        if not forced_done and street is not None:
            forced_done = True
            for op in state.operations:  # antes then blinds, as the engine posted them
                kind = type(op).__name__
                if kind == "AntePosting":
                    rec.bet("bet", "ante", order[op.player_index], op.amount, None)
                elif kind == "BlindOrStraddlePosting":
                    # pokerkit: small blind first, big blind second; heads-up, the other way round
                    big = op.player_index == (0 if len(order) == 2 else 1)
                    blind = "big blind" if big else "small blind"
                    rec.bet("bet", blind, order[op.player_index], op.amount, 0)
        if (i := state.stand_patter_or_discarder_index) is not None:
            held = list(state.hole_cards[i])
            # never more discards than cards left to replace them (no card is dealt twice)
            pending = sum(state.standing_pat_or_discarding_statuses) - 1
            room = max(0, len(deck) - 5 * pending)
            k = min(rng.choice((0, 1, 1, 2, 2, 3)), room)
            discards = rng.sample(held, k)
            state.stand_pat_or_discard(tuple(discards))
            for card in discards:
                rec.add(name, {"Discard": {"Siege": order[i], "Valeur": CODES[card]}})
        elif state.card_burning_status:
            state.burn_card(UNKNOWN_CARD)
        elif (i := state.hole_dealee_index) is not None:
            if variant.kind == "draw" and street:
                _draw_replacements(state, order, deck, rec, name)
            else:
                code = deck.pop()
                up = state.hole_dealing_statuses[i][0]
                state.deal_hole(CARDS[code], i)
                draw: dict[str, Any] = {"Siege": order[i], "Valeur": code}
                if up:
                    draw["ouverte"] = True
                rec.add(name, {"Draw": draw})
        elif (count := state.board_dealing_count) is not None:
            codes = [deck.pop() for _ in range(count)]
            state.deal_board(tuple(CARDS[c] for c in codes))
            for c in codes:
                rec.add(name, {"Draw": {"ouverte": True, "commune": True, "Valeur": c}})
        elif (i := state.actor_index) is not None:
            if street != betting_street and street is not None:
                betting_street = street
                reopening.new_round(state.streets[street].min_completion_betting_or_raising_amount)
            _act(state, variant, i, order, rng, rec, name, street or 0, aggression, fold_rate, reopening)
        elif (i := state.showdown_index) is not None:
            faces = list(zip(state.hole_cards[i], state.hole_card_statuses[i], strict=True))  # before showing
            op = state.show_or_muck_hole_cards(None, i)
            if op.hole_cards:
                shown.add(order[i])
                for card, up in faces:
                    if variant.kind == "stud" and up:
                        continue  # already face up: the reveal shows the down cards
                    reveals.append({"Reveal": {"Siege": order[i], "Valeur": CODES[card]}})
        else:  # pragma: no cover - every pending operation above is handled or automated
            raise AssertionError(f"pokerkit waits for an operation coffre does not drive: {state}")


def _draw_replacements(state: State, order: list[int], deck: list[int], rec: _Recorder, name: str) -> None:
    """Triple draw: each player in turn gets its replacements; the round records, per seat, its
    Discard of each discarded card then the Draw of each replacement."""
    by_seat: dict[int, list[dict[str, Any]]] = {}
    current = rec.rounds.get(name, [])
    for action in current:  # the Discards just recorded, regrouped by seat
        seat = action["Discard"]["Siege"]
        by_seat.setdefault(seat, []).append(action)
    rec.rounds[name] = []
    for i in range(len(order)):
        owed = len(state.hole_dealing_statuses[i])
        cards = [deck.pop() for _ in range(owed)]
        if cards:
            state.deal_hole(tuple(CARDS[c] for c in cards), i)
        rec.rounds[name].extend(by_seat.get(order[i], []))
        for c in cards:
            rec.rounds[name].append({"Draw": {"Siege": order[i], "Valeur": c}})


def _act(
    state: State,
    variant: EngineVariant,
    i: int,
    order: list[int],
    rng: random.Random,
    rec: _Recorder,
    name: str,
    street: int,
    aggression: float,
    fold_rate: float,
    reopening: Reopening,
) -> None:
    seat = order[i]
    before = state.bets[i]
    stack = state.stacks[i]
    facing = max(state.bets) > before
    if state.can_post_bring_in() and (rng.random() > aggression or not state.can_complete_bet_or_raise_to()):
        op = state.post_bring_in()
        rec.bet(name, "bring-in", seat, op.amount, street)
        return
    roll = 1.0 if state.can_post_bring_in() else rng.random()  # completing instead of the bring-in
    if facing and roll < fold_rate and state.can_fold():
        state.fold()
        rec.add(name, {"Fold": {"Siege": seat}})
        return
    if roll > 1 - aggression and state.can_complete_bet_or_raise_to() and reopening.may_raise(i):
        low = state.min_completion_betting_or_raising_to_amount
        high = state.max_completion_betting_or_raising_to_amount
        assert low is not None and high is not None
        to = low if high <= low else min(high, low + int((high - low) * rng.random() ** 3))
        if rng.random() < 0.03:
            to = high  # now and then, all in
        top, completion = max(state.bets), state.completion_status
        op = state.complete_bet_or_raise_to(to)
        reopening.raises(i, to if completion else to - top)
        added = op.amount - before
        label = "allin" if added == stack else ("raise" if facing or before else "bet")
        rec.bet(name, label, seat, added, street)
        return
    op2 = state.check_or_call()
    reopening.calls(i, chips=bool(op2.amount))
    if op2.amount:
        rec.bet(name, "allin" if op2.amount == stack else "call", seat, op2.amount, street)
    else:
        rec.add(name, {"Check": {"Siege": seat}})
