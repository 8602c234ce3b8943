"""The second engine: coffre's hand audit as it was before issue 31, pass 3 replayed by pokerkit.

``audit_hand_pokerkit(event, rules)`` gives the findings the audit gave with pokerkit (0.7) as its
engine: passes 1 and 2 are coffre.domain.audit.hand's own, pass 3 is the replay below, moved here
whole from hand.py (its ``_Replay``), over :mod:`coffre.domain.audit.variants` (the pokerkit games
and coffre's overrides of pokerkit's ``State``, which the hand generator ``play.py`` still plays
by). tests/audit/test_engine_differential.py holds coffre's engine (:mod:`coffre.domain.audit.engine`)
against it. Not on the audit's path: only the tests import it.
"""

from __future__ import annotations

import warnings
from collections import Counter
from decimal import Decimal

from pokerkit import ChipsPushing, State

from coffre.domain.audit.findings import Finding
from coffre.domain.audit.hand import FORCED, STAKES, _cards, _Hand, _money, _structure
from coffre.domain.audit.table import audit_table
from coffre.domain.audit.variants import (
    CARDS,
    DEFAULT_RULES,
    UNKNOWN_CARD,
    HouseRules,
    Reopening,
    clear_evaluations,
    engine_variant,
    scale_of,
)
from coffre.domain.catalogue.poker import POJEU, Bet, Check, Discard, Draw, Fold, Reveal, Round


def audit_hand_pokerkit(event: POJEU, rules: HouseRules = DEFAULT_RULES) -> list[Finding]:
    """``coffre.domain.audit.hand.audit_hand`` with pokerkit's replay as pass 3."""
    table = audit_table(event)
    if table.unreadable:
        return table.findings
    hand = _Hand(event)
    hand.findings += table.findings
    try:
        _structure(hand)
        _cards(hand)
        _money(hand)
        if not hand.blocking:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _Replay(hand, rules).run()
    except Exception as exc:  # a defect of coffre's or pokerkit's: evidence, not a crash
        hand.add("REPLAY_FAILED", f"the audit failed: {type(exc).__name__}: {exc}")
    return hand.findings


class _Stop(Exception):
    """The replay cannot go on faithfully (the finding is already recorded)."""


class _Replay:
    def __init__(self, hand: _Hand, rules: HouseRules = DEFAULT_RULES) -> None:
        self.hand = hand
        self.rules = rules
        self.variant = engine_variant(hand.event.Regle)
        self.state: State | None = None
        self.order: list[int] = []
        self.index: dict[int, int] = {}
        self.scale = 1
        self.pending_hole: dict[int, list[int]] = {}
        self.pending_board: list[int] = []
        self.pending_discard: dict[tuple[int, int], list[int]] = {}
        # (seat, street): a draw throws only its own round's cards. Before issue 31 the discards were
        # kept per seat only, and a triple draw with nobody left to bet after an all-in, its later
        # draws recorded before the replay dealt them, threw them all at the first draw
        # (REPLAY_FAILED on a legal hand): found by test_engine_differential's short stacks
        self.revealed: dict[int, list[int]] = {}
        self.round = ""
        self.lacking = ""
        # reopening (TDA 47, club 9.15): per betting round, who acted since the last full raise
        self.street = -1
        self.reopening = Reopening(self.variant.fixed_limit)
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
        clear_evaluations()  # a hand's evaluations are its own
        try:
            self._setup()
            for index, tour in self.hand.tours:
                self.round = tour.name
                if index == 0:
                    self._forced_round(tour)
                    continue
                street = index - 1
                for action in tour.Action:
                    self._action(action, street)
            self.round = ""
            self._advance()
            self._finish()
        except _Stop:
            pass
        except ValueError as exc:  # pokerkit refused something coffre's checks did not foresee
            self.hand.add("REPLAY_FAILED", f"pokerkit: {exc}", self.round or None)
        except AssertionError:
            # pokerkit asserts where a hand cannot go on (the last two players with chips both fold
            # beside an all-in one: a side pot nobody live can win). Before issue 31 this escaped to
            # audit_hand's catch-all, a REPLAY_FAILED without its round; coffre's engine names the
            # round (test_engine_differential.py::test_where_the_last_players_with_chips_both_fold)
            self.hand.add("REPLAY_FAILED", "pokerkit: an assertion failed", self.round or None)

    # -- setup: seats, forced bets, limits

    def _setup(self) -> None:
        hand, variant = self.hand, self.variant
        forced: list[tuple[str, Bet]] = []
        bring_in: Decimal | None = None
        first_raise: Decimal | None = None
        later_bet: tuple[int, Decimal] | None = None
        amounts: list[Decimal] = []
        for p in hand.players.values():
            amounts += (p.Finance.CaveAvant, p.Finance.CaveApres, p.Finance.Total)
        for index, tour in hand.tours:
            for action in tour.Action:
                if not isinstance(action, Bet):
                    continue
                amounts.append(action.Valeur)
                if action.name in FORCED:
                    if index != 0:
                        raise self.stop(
                            "FORCED_BETS_WRONG",
                            f"a {action.name} in '{tour.name}', not in the forced bets' round",
                        )
                    forced.append((action.name, action))
                elif index == 0:
                    raise self.stop(
                        "FORCED_BETS_WRONG", f"a '{action.name}' among the forced bets ('{tour.name}')"
                    )
                elif action.name == "bring-in":
                    if variant.kind != "stud" or index != 1 or bring_in is not None:
                        raise self.stop(
                            "FORCED_BETS_WRONG", f"a bring-in in '{tour.name}'", int(action.Siege)
                        )
                    bring_in = action.Valeur
                elif variant.kind == "stud" and action.name in ("bet", "raise", "allin"):
                    if index == 1 and first_raise is None:
                        first_raise = action.Valeur  # a completion: to = its Valeur
                    elif index > 1 and later_bet is None:
                        later_bet = (index, action.Valeur)
        self.scale = scale_of(amounts)
        antes = {int(b.Siege): self.units(b.Valeur) for n, b in forced if n == "ante"}
        if len([1 for n, _ in forced if n == "ante"]) != len(antes):
            raise self.stop("FORCED_BETS_WRONG", "a seat posts two antes")
        seats = sorted(hand.players)
        if variant.kind == "stud":
            if any(n != "ante" for n, _ in forced):
                raise self.stop("FORCED_BETS_WRONG", "blinds in a stud hand")
            self.order = seats
            blinds: tuple[int, ...] | int = 0
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
        else:
            small_blinds = [int(b.Siege) for n, b in forced if n == "small blind"]
            big_blinds = [int(b.Siege) for n, b in forced if n == "big blind"]
            dead_small = not small_blinds and len(big_blinds) == 1 and len(seats) > 2
            if (len(small_blinds) != 1 and not dead_small) or len(big_blinds) != 1:
                raise self.stop(
                    "FORCED_BETS_WRONG",
                    f"{len(small_blinds)} small blind(s) and {len(big_blinds)} big blind(s), not one of each",
                )
            bb_seat = big_blinds[0]
            bb = next(self.units(b.Valeur) for n, b in forced if n == "big blind")
            if dead_small:
                # TDA 32 (dead button), 54B ("pas de SB"): the small blind's seat is empty, the button
                # is the seat before the big blind, and the big blind acts first after the flop
                at = seats.index(bb_seat)
                self.order = seats[at:] + seats[:at]
                sb = 0
            else:
                sb_seat = small_blinds[0]
                sb = next(self.units(b.Valeur) for n, b in forced if n == "small blind")
                if sb_seat == bb_seat:  # décret art. 3: the blinds are the two players left of the dealer
                    raise self.stop(
                        "FORCED_BETS_WRONG", f"seat {bb_seat} posts both the small and the big blind", bb_seat
                    )
                if len(seats) == 2:
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
            # a dead small blind: the big blind is pokerkit's player 0, a one-blind table; otherwise
            # pokerkit reverses the blinds heads-up, and the order above puts the big blind first
            blinds = (bb,) if dead_small else (sb, bb)
            missing = sb + bb - posted
            bring = 0
            small = max(bb, 1)
        self.index = {s: i for i, s in enumerate(self.order)}
        self.order_indices = range(len(self.order))
        ante_list = [antes.get(s, 0) for s in self.order]
        if len(self.order) == 2:
            ante_list.reverse()  # heads-up pokerkit charges each player the other's ante
        self.state = variant.state(
            tuple(self.units(hand.players[s].Finance.CaveAvant) for s in self.order),
            antes=tuple(ante_list) if antes else 0,
            # equal antes (one may be short): pokerkit hands back what the short one cannot match;
            # antes of some seats only (TDA RP-11's big-blind ante): dead money, nothing handed back
            ante_trimming=len(antes) == len(seats),
            blinds=blinds,
            bring_in=bring,
            small_bet=small,
            cap=self.rules.cap(len(seats)),
            uncapped_two_player_rounds=self.rules.heads_up == "round",
            missing_blinds=missing if variant.kind != "stud" else 0,
            full_big_blind=bb if variant.kind != "stud" else 0,
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

    # -- the actions

    def _action(self, action: object, street: int) -> None:
        if isinstance(action, Draw):
            if action.commune:
                self.pending_board.append(action.Valeur)
            else:
                self.pending_hole.setdefault(int(action.Siege), []).append(action.Valeur)  # type: ignore[arg-type]
            return
        if isinstance(action, Discard):
            key = (int(action.Siege), street)  # type: ignore[arg-type]
            self.pending_discard.setdefault(key, []).append(action.Valeur)
            return
        if isinstance(action, Reveal):
            seat = int(action.Siege)  # type: ignore[arg-type]
            self.revealed.setdefault(seat, []).append(action.Valeur)
            if seat not in self.reveal_order:
                self.reveal_order.append(seat)
            return
        self._advance()
        state = self.state
        assert state is not None
        seat = int(action.Siege)  # type: ignore[attr-defined]
        i = self.index[seat]
        if state.street_index is not None and state.street_index < street and state.actor_index is not None:
            raise self.stop(
                "ROUND_INCOMPLETE",
                f"seat {self.order[state.actor_index]} had still to act in '{self.variant.rounds[state.street_index]}'",
                self.order[state.actor_index],
            )
        if not state.statuses[i]:
            raise self.stop("ACTION_AFTER_FOLD", f"seat {seat} acts after folding", seat)
        actor = state.actor_index
        if actor is None:
            raise self.stop("OUT_OF_TURN", f"seat {seat} acts when nobody is to act", seat)
        if actor != i:
            raise self.stop("OUT_OF_TURN", f"seat {seat} acts in the turn of seat {self.order[actor]}", seat)
        if street != self.street:
            self._new_round(street)
        self.first_actor.setdefault(street, seat)
        if isinstance(action, Fold):
            if state.bring_in_status:  # decree art. 7 III: the bring-in "ne peut passer"
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat} folds instead of the bring-in", seat)
            state.fold()
        elif isinstance(action, Check):
            owed = state.checking_or_calling_amount or 0
            if state.bring_in_status:
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat} checks instead of the bring-in", seat)
            if owed:
                raise self.stop(
                    "CHECK_FACING_BET", f"seat {seat} checks facing a bet of {owed / self.scale}", seat
                )
            state.check_or_call()
            self.reopening.calls(seat, chips=False)
        elif isinstance(action, Bet):
            self._bet(action, seat, i)

    def _bet(self, action: Bet, seat: int, i: int) -> None:
        state = self.state
        assert state is not None
        added = self.units(action.Valeur)
        stack = state.stacks[i]
        name = action.name
        if name == "bring-in":
            try:
                state.verify_bring_in_posting()
            except ValueError as exc:
                raise self.stop("FORCED_BETS_WRONG", f"seat {seat}'s bring-in: {exc}", seat) from None
            if added != state.effective_bring_in_amount:
                raise self.stop(
                    "BET_ILLEGAL",
                    f"seat {seat}'s bring-in {action.Valeur} is not {state.effective_bring_in_amount / self.scale}",
                    seat,
                )
            state.post_bring_in()
            return
        owed = state.checking_or_calling_amount or 0
        if added == owed and added > 0 and not state.bring_in_status:
            want = "allin" if added == stack else "call"
            if name != want and not (name == "call" and want == "allin"):
                self.hand.add(
                    "BET_NAME_MISMATCH",
                    f"seat {seat}'s '{name}' of {action.Valeur} is a {want}",
                    self.round,
                    seat,
                )
            state.check_or_call()
            self.reopening.calls(seat, chips=True)
            return
        if added <= owed:
            raise self.stop(
                "BET_ILLEGAL",
                f"seat {seat} puts in {action.Valeur}, less than the {owed / self.scale} to call",
                seat,
            )
        to = state.bets[i] + added
        verified: int | None = None
        try:
            verified = state.verify_completion_betting_or_raising_to(to)
        except ValueError as exc:
            low = state.min_completion_betting_or_raising_to_amount
            reach = max(
                (state.bets[j] + state.stacks[j] for j in self.order_indices if j != i and state.statuses[j]),
                default=0,
            )
            if low is None or not reach <= to < low:
                raise self.stop(
                    "BET_ILLEGAL", f"seat {seat}'s {name} of {action.Valeur}: {exc}", seat
                ) from None
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
        self._reopening(seat, to if state.completion_status else to - max(state.bets))
        low = state.min_completion_betting_or_raising_to_amount
        amount = max(to, low) if low is not None else to
        if verified is not None and amount == to:  # verified just above: pokerkit need not again
            state.complete_verified_bet_or_raise_to(to, verified)  # type: ignore[attr-defined]
        else:
            state.complete_bet_or_raise_to(amount)
        self.aggressor[self.street] = seat

    def _new_round(self, street: int) -> None:
        """A betting round begins: nobody has acted; the full bet is the structure's (the big blind
        or the minimum bet in no and pot limit; the round's bet in limit)."""
        state = self.state
        assert state is not None
        self.street = street
        self.reopening.new_round(state.streets[street].min_completion_betting_or_raising_amount)

    def _reopening(self, seat: int, increment: int) -> None:
        """Club 9.15, TDA 47 (:class:`~.variants.Reopening`): a seat that acted may not raise while
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
        state = self.state
        assert state is not None
        self.lacking = ""
        while state.status:
            if (i := state.stand_patter_or_discarder_index) is not None:
                thrown = self.pending_discard.pop((self.order[i], state.street_index), [])
                state.stand_pat_or_discard(tuple(CARDS[c] for c in thrown))
            elif state.card_burning_status:
                state.burn_card(UNKNOWN_CARD)
            elif (i := state.hole_dealee_index) is not None:
                cards = self.pending_hole.get(self.order[i])
                if not cards:  # a later round's, or never dealt: _finish tells
                    self.lacking = f"seat {self.order[i]} is owed a card the hand does not deal"
                    return
                owed = min(len(cards), len(state.hole_dealing_statuses[i]))
                state.deal_hole(tuple(CARDS[cards.pop(0)] for _ in range(owed)), i)
            elif (count := state.board_dealing_count) is not None:
                if len(self.pending_board) < count:
                    self.lacking = f"the board is owed {count} cards the hand does not deal"
                    return
                state.deal_board(tuple(CARDS[self.pending_board.pop(0)] for _ in range(count)))
            elif (i := state.showdown_index) is not None:
                seat = self.order[i]
                shown = self.revealed.get(seat)
                live = [j for j in self.order_indices if state.statuses[j]]
                if any(not state.stacks[j] for j in live) and len(live) > 1:
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
                    state.show_or_muck_hole_cards(True, i)
                elif shown:
                    down = {
                        c
                        for c, up in zip(state.hole_cards[i], state.hole_card_statuses[i], strict=True)
                        if not up
                    }
                    missing = [c for c in down if _code(c) not in shown]
                    if missing:
                        self.hand.add(
                            "REVEAL_INCOMPLETE",
                            f"seat {seat} shows {len(shown)} cards and keeps {len(missing)} face down",
                            "reveal",
                            seat,
                        )
                    state.show_or_muck_hole_cards(True, i)
                else:
                    try:
                        state.show_or_muck_hole_cards(False, i)
                    except ValueError:
                        state.show_or_muck_hole_cards(True, i)
            elif state.can_kill_hand():
                state.kill_hand()
            else:
                return

    def _finish(self) -> None:
        state = self.state
        assert state is not None
        if state.status:
            if self.lacking:
                raise self.stop("CARD_COUNT_WRONG", self.lacking)
            if state.actor_index is not None:
                seat = self.order[state.actor_index]
                raise self.stop("ROUND_INCOMPLETE", f"the hand ends while seat {seat} has to act", seat)
            raise self.stop("REPLAY_FAILED", f"the hand ends before the engine does ({state.street_index=})")
        leftover = sum(map(len, self.pending_hole.values())) + len(self.pending_board)
        if leftover:
            raise self.stop("CARD_COUNT_WRONG", f"{leftover} cards are dealt after the hand is over")
        self._showdown_order()
        if not self.hand.payoffs_comparable:
            return  # money is created or lost: NOT_ZERO_SUM / WINNINGS_NEGATIVE say so, per-seat blame would be noise
        tolerance: Counter[int] = Counter()  # per player, the odd chips it may be owed or owe
        halves: dict[int, set[int]] = {}
        for op in state.operations:
            if isinstance(op, ChipsPushing):
                winners = [i for i, a in enumerate(op.amounts) if a]
                if len(winners) > 1:
                    tolerance.update(winners)  # the odd chip of a tie
                halves.setdefault(op.pot_index, set()).update(winners)
        for winners in halves.values():
            if len(winners) > 1 and self.variant.split:
                tolerance.update(winners)  # the odd chip between a high and a low half
        off: dict[int, int] = {}
        results: dict[int, Decimal] = {}
        for i, seat in enumerate(self.order):
            f = self.hand.players[seat].Finance
            results[i] = f.CaveApres - f.CaveAvant + (f.Rake or 0)
            if diff := self.units(results[i]) - state.payoffs[i]:
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
                    f" {Decimal(state.payoffs[i]) / self.scale}",
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


def _code(card: object) -> int:
    from coffre.domain.audit.variants import CODES

    return CODES[card]  # type: ignore[index]
