"""A poker hand drawn in inline SVG: the report of ``coffre audit --html`` and the regulator's console
show each flagged hand with it.

A hand picture shows the seats around the table (seat, IDJoueur, CaveAvant → CaveApres, Net),
each seat's cards as cards (annex 1.3.6.d.3; a card dealt face down and never revealed is still
drawn, since the POJEU records it, with a dashed edge and a faded face), the board, and each
round's actions with the pot as it grows; the seats and rounds a finding names are outlined. Every
text that comes from an operator is untrusted and escaped where it is written.

:func:`hand_view` is what both draw: the regulator's console writes it as HTML in its own
language (services/regulator/templates/hand.html), round by round, with the pots and side pots as
they stand, each seat's stack, fold and all-in, the button, and at the end who won each pot with
which hand (coffre's engine sharing the pots, its evaluators naming the hands).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from html import escape

from coffre.domain.audit import ranking
from coffre.domain.audit.engine import rules_of
from coffre.domain.audit.findings import CODES, Finding
from coffre.domain.audit.hand import event_contributions, shared_pots
from coffre.domain.audit.ranking import HandName
from coffre.domain.catalogue.poker import POJEU, Bet, Check, Discard, Draw, Fold, Reveal, decode_card

FELT = "#1f6f43"
CARD_FACE = "#fff8e7"
RED_SUIT = "#d0021b"
BLACK_SUIT = "#1a1a1a"
SEAT = "#2b4c7e"
FLAGGED = "#ff9f1c"
FLAGGED_ROUND = "#ffe3c2"

MAX_SEATS = 12
"""Seats drawn around one table; a hand naming more says how many were left out."""
MAX_SEAT_CARDS = 21
"""Cards drawn for one seat (7 a row): a draw game deals at most 5 + 3 × 5."""
MAX_BOARD_CARDS = 10
MAX_ROUND_LINES = 40
"""Lines of actions written for one round; the rest are counted."""

RED_SUITS = frozenset({"Cœur", "Carreau"})
SUIT_SYMBOL = {"Trèfle": "♣", "Carreau": "♦", "Cœur": "♥", "Pique": "♠"}

CARD_W, CARD_H, CARD_GAP = 21, 29, 3
SEAT_W = 7 * (CARD_W + CARD_GAP) - CARD_GAP + 12
SEAT_TEXT_H = 54
RX, RY = 330, 215
"""Radii of the ellipse the seats' centres sit on."""
ROUNDS_W = 360
LINE_H = 15
CHARS_PER_LINE = 50


def sentence(text: str) -> str:
    """``text`` ending with one full stop."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def esc(text: object) -> str:
    """Escaped for HTML text and attribute values (inline SVG is parsed as HTML)."""
    return escape(str(text), quote=True)


def amount_text(value: Decimal | None) -> str:
    """An amount as the hand writes it (0.50, 2 rather than 2.00 when whole), "–" for none."""
    if value is None:
        return "–"
    return f"{value.normalize():f}" if value == value.to_integral() else f"{value:f}"


def _short(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


# -- the hand, as drawn ---------------------------------------------------------------------------


@dataclass
class CardView:
    code: int
    shown: bool
    """Dealt face up (``ouverte``), or revealed later (``Reveal``, a ``Fold`` that shows)."""
    discarded: bool = False
    up: bool = False
    """Dealt face up (a stud up card, ``ouverte``): what the table saw from the deal on."""


@dataclass
class SeatView:
    seat: Decimal
    player: str | None = None
    before: Decimal | None = None
    after: Decimal | None = None
    """At the end: CaveApres; stepped: the stack as it stands then (as :attr:`stack`)."""
    net: Decimal | None = None
    cards: list[CardView] = field(default_factory=list)
    flagged: bool = False
    stack: Decimal | None = None
    """The stack as it stands at the end of the rounds drawn, before the pots are paid: CaveAvant
    less the seat's Bets so far, plus what came back to it uncalled."""
    put: Decimal = Decimal(0)
    """What the seat has in the pots (its Bets so far less what came back uncalled)."""
    folded: str | None = None
    """The round it folded in (it shows as folded from that round on), or None."""
    all_in: bool = False
    """Live, with chips in the pot and none left in front of it."""
    button: bool = False
    hands: list[HandName] = field(default_factory=list)
    """At the end, for a live seat whose cards are all shown: its hand per half (high, then low),
    named by coffre's evaluators (:func:`~coffre.domain.audit.ranking.hand_name`)."""


@dataclass
class PotView:
    """A pot as it stands: the main pot first, then each side pot."""

    amount: Decimal
    players: tuple[Decimal, ...]
    """The seats that can win it: live, and not all in for less than it asks."""


@dataclass
class ActionView:
    """One line of a round's log, in parts a page writes in its own language."""

    verb: str
    """A Bet's name ("small blind", "call", "allin", …), "check", "fold", "fold shows", "deal" (cards
    to a seat), "board", "discard" or "show"."""
    seat: Decimal | None = None
    amount: Decimal | None = None
    cards: list[int] = field(default_factory=list)
    up: bool = False
    """``deal``: the cards are dealt face up."""


@dataclass
class RoundView:
    name: str
    actions: list[ActionView]
    pot: Decimal
    """The pot at the end of the round (net of what came back uncalled)."""
    total: Decimal | None
    flagged: bool


@dataclass
class AwardView:
    """One pot, or one half of a split pot, and who won it: coffre's engine sharing it by the cards."""

    pot: int
    """0 the main pot, 1 the first side pot, …"""
    amount: Decimal
    players: tuple[Decimal, ...]
    half: str | None
    """The half of a halved pot ("high" or "low"); None for a whole pot."""
    contested: bool
    """False: everybody else folded, the pot is taken without a showdown."""
    winners: list[tuple[Decimal, Decimal, list[HandName]]]
    """(seat, amount, the winning hand's names if its cards are shown: the half's for a halved pot,
    every half's (high, low) for a whole pot)."""


@dataclass
class HandView:
    seats: dict[Decimal, SeatView]
    boards: dict[int, list[int]]
    rounds: list[tuple[str, list[list[tuple[str, str | None]]], Decimal, Decimal | None, bool]]
    """(name, lines of (text, colour) segments, pot after the round, the round's Total, flagged)."""
    log: list[RoundView] = field(default_factory=list)
    pots: list[PotView] = field(default_factory=list)
    """The pots at the end of the last round drawn (:func:`pots_of`)."""
    has_button: bool = True
    """False in a stud game: no button (the bring-in and the showing cards decide who acts)."""
    button: Decimal | None = None
    """The button's seat as the forced bets place it (the seat before the small blind; heads-up the
    small blind's; with no small blind, the seat before the big blind), None if they do not say."""
    whole: bool = True
    split: bool = False
    awards: list[AwardView] | None = None
    """With the whole hand: each pot (each half) and its winners, as coffre's engine shares them;
    None before the end, or when the engine could not replay the hand (:attr:`engine_failed`)."""
    engine_failed: bool = False


def _card_text(code: int) -> list[tuple[str, str | None]]:
    card = decode_card(code)
    return [(f"{card.rank}{SUIT_SYMBOL[card.suit]}", RED_SUIT if card.suit in RED_SUITS else None)]


def _wrap(tokens: list[list[tuple[str, str | None]]]) -> list[list[tuple[str, str | None]]]:
    """Tokens (each a list of segments) flowed into lines of at most :data:`CHARS_PER_LINE`."""
    lines: list[list[tuple[str, str | None]]] = []
    line: list[tuple[str, str | None]] = []
    used = 0
    for token in tokens:
        size = sum(len(text) for text, _ in token)
        if line and used + 3 + size > CHARS_PER_LINE:
            lines.append(line)
            line, used = [], 0
        if line:
            line.append((" · ", None))
            used += 3
        line += token
        used += size
    if line:
        lines.append(line)
    return lines


def _rounds_until(event: POJEU, until_round: int | None) -> int:
    """How many of the hand's rounds are drawn: all, or 0..``until_round`` (clamped to the last)."""
    count = len(event.Jeu.Tour)
    if until_round is None:
        return count
    if until_round < 0:
        raise ValueError(f"until_round must be 0 or more, not {until_round}")
    return min(until_round + 1, count)


def hand_view(event: POJEU, findings: tuple[Finding, ...], *, until_round: int | None = None) -> HandView:
    """What the picture draws, read from the POJEU as declared (no replay: the findings say what is
    wrong), but for the pots' winners at the end, which coffre's engine shares by the cards.

    ``until_round`` (an index into ``Jeu.Tour``) stops the hand at the end of that round: later rounds'
    cards, folds, reveals and bets are not read, and a finding naming only a later round outlines nothing.
    """
    tours = event.Jeu.Tour[: _rounds_until(event, until_round)]
    whole = len(tours) == len(event.Jeu.Tour)
    later = {t.name for t in event.Jeu.Tour[len(tours) :]} - {t.name for t in tours}
    findings = tuple(
        f
        for f in findings
        if (f.round is None and (whole or not _about_the_result(f)))
        or (f.round is not None and f.round not in later)
    )
    flagged_seats = {f.seat for f in findings if f.seat is not None}
    flagged_players = {f.player for f in findings if f.player is not None}
    flagged_rounds = {f.round for f in findings if f.round is not None}
    paid = event_contributions(event)
    shown = {t.name for t in tours}
    # what came back uncalled goes back at the end of its betting street: the forced bets' round
    # belongs with the first betting round, so what comes back out of the blinds is given back once
    # that round is drawn
    first = event.Jeu.Tour[0].name if event.Jeu.Tour else None
    settled = shown if whole or len(tours) > 1 else shown - {first}
    seats: dict[Decimal, SeatView] = {}
    for p in event.Participants.Joueur:
        number = int(p.Siege) if p.Siege == p.Siege.to_integral_value() else None
        put = sum((v for name, v in paid.bets_of.get(number, ()) if name in shown), Decimal(0))  # type: ignore[arg-type]
        back = sum(
            (v for (s, name), v in paid.back_of.items() if s == number and name in settled), Decimal(0)
        )
        stack = p.Finance.CaveAvant - put + back
        if whole:
            view = SeatView(p.Siege, p.IDJoueur, p.Finance.CaveAvant, p.Finance.CaveApres, p.Finance.Net)
        else:  # no CaveApres nor Net before the hand's end
            view = SeatView(p.Siege, p.IDJoueur, p.Finance.CaveAvant, stack)
        view.stack, view.put = stack, put - back
        seats[p.Siege] = view

    def seat(number: int | None) -> SeatView:
        key = Decimal(number or 0)
        return seats.setdefault(key, SeatView(key))

    boards: dict[int, list[int]] = defaultdict(list)
    rounds = []
    log: list[RoundView] = []
    pot = Decimal(0)
    uncalled = paid.round_back  # given back: not in the pot
    for tour in tours:
        pot -= uncalled.get(tour.name, Decimal(0))
        tokens: list[list[tuple[str, str | None]]] = []
        actions: list[ActionView] = []
        dealing: tuple[int | None, bool] | None = None
        for action in tour.Action:
            if isinstance(action, Bet):
                pot += action.Valeur
                tokens.append([(f"S{action.Siege} {action.name} {amount_text(action.Valeur)}", None)])
                actions.append(ActionView(action.name, Decimal(action.Siege), action.Valeur))
            elif isinstance(action, Check):
                tokens.append([(f"S{action.Siege} check", None)])
                actions.append(ActionView("check", Decimal(action.Siege)))
            elif isinstance(action, Fold):
                tokens.append([(f"S{action.Siege} fold{' (shows)' if action.Reveal else ''}", None)])
                actions.append(ActionView("fold shows" if action.Reveal else "fold", Decimal(action.Siege)))
                folder = seat(action.Siege)
                if folder.folded is None:
                    folder.folded = tour.name
                if action.Reveal:
                    for card in folder.cards:
                        card.shown = True
            elif isinstance(action, Draw) and action.commune:
                boards[action.board or 0].append(action.Valeur)
                tokens.append([("board ", None), *_card_text(action.Valeur)])
                if dealing == (None, True):
                    actions[-1].cards.append(action.Valeur)
                else:
                    actions.append(ActionView("board", None, None, [action.Valeur], True))
                dealing = (None, True)
                continue
            elif isinstance(action, Draw):
                seat(action.Siege).cards.append(CardView(action.Valeur, action.ouverte, up=action.ouverte))
                if dealing == (action.Siege, action.ouverte):  # the same seat's next card: one token
                    tokens[-1][-1:-1] = [(" ", None), *_card_text(action.Valeur)]
                    actions[-1].cards.append(action.Valeur)
                else:
                    down = "" if action.ouverte else " (down)"
                    tokens.append([(f"S{action.Siege} ← ", None), *_card_text(action.Valeur), (down, None)])
                    actions.append(
                        ActionView("deal", Decimal(action.Siege), None, [action.Valeur], action.ouverte)
                    )
                dealing = (action.Siege, action.ouverte)
                continue
            elif isinstance(action, Discard | Reveal):
                owner = seat(action.Siege)
                held = next((c for c in owner.cards if c.code == action.Valeur), None)
                if held is None:  # not dealt to that seat: drawn anyway, the findings say so
                    held = CardView(action.Valeur, shown=False)
                    owner.cards.append(held)
                verb = "discard" if isinstance(action, Discard) else "show"
                if isinstance(action, Discard):
                    held.discarded = True
                    tokens.append([(f"S{action.Siege} discards ", None), *_card_text(action.Valeur)])
                else:
                    held.shown = True
                    tokens.append([(f"S{action.Siege} shows ", None), *_card_text(action.Valeur)])
                last = actions[-1] if actions else None
                if last is not None and last.verb == verb and last.seat == Decimal(action.Siege):  # type: ignore[arg-type]
                    last.cards.append(action.Valeur)
                else:
                    actions.append(ActionView(verb, Decimal(action.Siege), None, [action.Valeur]))  # type: ignore[arg-type]
            dealing = None
        flagged = tour.name in flagged_rounds
        rounds.append((tour.name, _wrap(tokens), pot, tour.Total, flagged))
        log.append(RoundView(tour.name, actions, pot, tour.Total, flagged))
    for view in seats.values():
        view.flagged = view.seat in flagged_seats or (
            view.player is not None and view.player in flagged_players
        )
        view.all_in = view.folded is None and view.put > 0 and view.stack == 0
    variant = rules_of(event.Regle)
    hand = HandView(seats, dict(boards), rounds, log, whole=whole, split=variant.split)
    dead = {Decimal(s): v for s, v in _dead_antes(event, shown).items()}
    hand.pots = pots_of(
        {v.seat: v.put - dead.get(v.seat, Decimal(0)) for v in seats.values()},
        {v.seat for v in seats.values() if v.folded is None and v.player is not None},
        {v.seat for v in seats.values() if v.all_in},
        sum(dead.values(), Decimal(0)),
    )
    hand.has_button = variant.kind != "stud"
    if hand.has_button:
        hand.button = button_of(event)
        if hand.button in seats:
            seats[hand.button].button = True
    if whole:
        _name_hands(event, hand)
        _award(event, hand)
    return hand


def _dead_antes(event: POJEU, shown: set[str]) -> dict[int, Decimal]:
    """Per seat, its ante when antes are posted by some seats only: dead money (TDA RP-11's big-blind
    ante), in the main pot whoever wins it, as coffre's engine plays them. Antes posted by every seat
    count as bets (empty)."""
    antes = [
        a
        for t in event.Jeu.Tour
        if t.name in shown
        for a in t.Action
        if isinstance(a, Bet) and a.name == "ante"
    ]
    if len({a.Siege for a in antes}) == len(event.Participants.Joueur):
        return {}
    dead: dict[int, Decimal] = defaultdict(Decimal)
    for a in antes:
        dead[a.Siege] += a.Valeur
    return dict(dead)


def pots_of(
    put: dict[Decimal, Decimal], live: set[Decimal], all_in: set[Decimal], dead: Decimal = Decimal(0)
) -> list[PotView]:
    """The main pot and the side pots as they stand (TDA 21), from what each seat has put in (``put``,
    net of what came back uncalled, dead antes apart): a pot is closed at each level a ``live``
    player ``all_in`` has put in; it holds what every seat put in up to that level (a folded seat's
    chips too), and the live seats not all in for less can win it. ``dead``: the dead antes, in the
    main pot. Two pots the same seats can win are one."""
    levels = sorted({put[s] for s in all_in if s in live})
    pots: list[PotView] = []
    previous = Decimal(0)
    for level in [*levels, None]:
        amount = sum(
            ((v if level is None else min(v, level)) - min(v, previous) for v in put.values()), Decimal(0)
        )
        if not pots and not previous:  # the first pot: the main pot
            amount += dead
        players = tuple(sorted(s for s in live if s not in all_in or (level is not None and put[s] >= level)))
        while pots and pots[-1].players == players:
            amount += pots.pop().amount
        if amount:
            pots.append(PotView(amount, players))
        if level is not None:
            previous = level
    return pots or [PotView(dead, tuple(sorted(live)))]


def button_of(event: POJEU) -> Decimal | None:
    """The button's seat as the forced bets place it (a POJEU does not record the button): the seat
    before the small blind's, in seat order round the table; heads-up the small blind's own (TDA 34B);
    with no small blind (a dead small blind), the seat before the big blind's, as coffre's engine
    places it. None when the hand posts no blind."""
    blinds = {}
    for tour in event.Jeu.Tour:
        for action in tour.Action:
            if isinstance(action, Bet) and action.name in ("small blind", "big blind"):
                blinds.setdefault(action.name, Decimal(action.Siege))
    seats = sorted(p.Siege for p in event.Participants.Joueur)
    if "small blind" in blinds and blinds["small blind"] in seats:
        small = blinds["small blind"]
        return small if len(seats) == 2 else seats[seats.index(small) - 1]
    if "big blind" in blinds and blinds["big blind"] in seats:
        return seats[seats.index(blinds["big blind"]) - 1]
    return None


def _held(view: SeatView) -> list[int]:
    return [c.code for c in view.cards if not c.discarded]


def _name_hands(event: POJEU, hand: HandView) -> None:
    """Each live seat whose cards are all shown at the end: its hand per half, named by coffre's
    evaluators (ranking.py) from its cards and the board."""
    kinds = ranking.HAND_KINDS[event.Regle]
    board = [c for b in sorted(hand.boards) for c in hand.boards[b]]
    for view in hand.seats.values():
        held = [c for c in view.cards if not c.discarded]
        if view.folded is not None or not held or not all(c.shown for c in held):
            continue
        try:
            view.hands = [
                ranking.hand_name(kind, ranking.EVALUATORS[kind]([c.code for c in held], board))
                for kind in kinds
            ]
        except (ValueError, KeyError, IndexError):  # not a whole hand (the findings say why)
            view.hands = []


def _award(event: POJEU, hand: HandView) -> None:
    """The pots as coffre's engine shares them by the cards (:func:`shared_pots`), with the winners'
    hands: the half's hand when a split pot is halved, every half's when one hand takes a whole pot."""
    shares = shared_pots(event)
    if shares is None:
        hand.engine_failed = True
        return
    kinds = ranking.HAND_KINDS[event.Regle]
    per_pot: dict[int, int] = defaultdict(int)
    for share in shares:
        per_pot[share.pot] += 1
    hand.awards = []
    for share in shares:
        halved = hand.split and per_pot[share.pot] > 1 and share.kind in kinds
        winners = []
        for seat, amount in share.winners:
            view = hand.seats.get(Decimal(seat))
            named = [] if view is None or share.kind is None else view.hands
            if halved and named:
                named = named[kinds.index(share.kind) : kinds.index(share.kind) + 1]  # type: ignore[arg-type]
            winners.append((Decimal(seat), amount, named))
        hand.awards.append(
            AwardView(
                share.pot,
                share.amount,
                tuple(Decimal(s) for s in share.players),
                ("high", "low")[kinds.index(share.kind)] if halved else None,  # type: ignore[arg-type]
                share.kind is not None,
                winners,
            )
        )


def _about_the_result(finding: Finding) -> bool:
    """A finding of the hand's money or showdown that names no round judges its end (the payoffs,
    the totals): outlined once the whole hand is drawn, not from the forced bets on."""
    family = CODES.get(finding.code, ("", ""))[0]
    return family in ("money", "showdown")


# -- SVG ------------------------------------------------------------------------------------------


def _suit(suit: str, cx: float, cy: float, s: float, colour: str) -> str:
    """A suit drawn with shapes (no font needed): s is its height."""

    def circle(x: float, y: float, r: float) -> str:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"/>'

    def polygon(*points: tuple[float, float]) -> str:
        return '<polygon points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>'

    if suit == "Carreau":
        parts = [polygon((cx, cy - s / 2), (cx + s * 0.38, cy), (cx, cy + s / 2), (cx - s * 0.38, cy))]
    elif suit == "Cœur":
        parts = [
            circle(cx - s * 0.24, cy - s * 0.14, s * 0.26),
            circle(cx + s * 0.24, cy - s * 0.14, s * 0.26),
            polygon((cx - s * 0.49, cy - s * 0.06), (cx + s * 0.49, cy - s * 0.06), (cx, cy + s * 0.5)),
        ]
    elif suit == "Pique":
        parts = [
            circle(cx - s * 0.24, cy + s * 0.06, s * 0.24),
            circle(cx + s * 0.24, cy + s * 0.06, s * 0.24),
            polygon((cx - s * 0.47, cy + s * 0.1), (cx + s * 0.47, cy + s * 0.1), (cx, cy - s * 0.5)),
            polygon((cx, cy + s * 0.05), (cx - s * 0.17, cy + s * 0.5), (cx + s * 0.17, cy + s * 0.5)),
        ]
    else:  # Trèfle
        parts = [
            circle(cx, cy - s * 0.25, s * 0.21),
            circle(cx - s * 0.23, cy + s * 0.05, s * 0.21),
            circle(cx + s * 0.23, cy + s * 0.05, s * 0.21),
            polygon((cx, cy - s * 0.05), (cx - s * 0.16, cy + s * 0.5), (cx + s * 0.16, cy + s * 0.5)),
        ]
    return f'<g fill="{colour}">{"".join(parts)}</g>'


def _card(x: float, y: float, view: CardView, w: float = CARD_W, h: float = CARD_H) -> str:
    card = decode_card(view.code)
    colour = RED_SUIT if card.suit in RED_SUITS else BLACK_SUIT
    state = [] if view.shown else ["face down, never revealed"]
    if view.discarded:
        state.append("discarded")
    title = f"{card} (code {card.code})" + (f": {', '.join(state)}" if state else "")
    edge = 'stroke="#333"' if view.shown else 'stroke="#777" stroke-dasharray="3 2"'
    faded = "" if view.shown else ' opacity="0.45"'
    font = max(8.0, h * 0.34)
    out = [
        f'<g class="card{"" if view.shown else " hidden"}"><title>{esc(title)}</title>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="3" fill="{CARD_FACE}" {edge}/>',
        f"<g{faded}>",
        f'<text x="{x + 2.5:.1f}" y="{y + font + 0.5:.1f}" font-size="{font:.0f}" font-weight="bold" '
        f'fill="{colour}">{esc(card.rank)}</text>',
        _suit(card.suit, x + w * 0.58, y + h * 0.66, h * 0.42, colour),
        "</g>",
    ]
    if view.discarded:
        out.append(
            f'<line x1="{x:.1f}" y1="{y + h:.1f}" x2="{x + w:.1f}" y2="{y:.1f}" stroke="#777" stroke-width="2"/>'
        )
    out.append("</g>")
    return "".join(out)


def _seat_height(view: SeatView) -> int:
    rows = math.ceil(min(len(view.cards), MAX_SEAT_CARDS) / 7)
    return SEAT_TEXT_H + rows * (CARD_H + 5)


def _seat(view: SeatView, cx: float, cy: float) -> str:
    h = _seat_height(view)
    x, y = cx - SEAT_W / 2, cy - h / 2
    edge = f'stroke="{FLAGGED}" stroke-width="5"' if view.flagged else 'stroke="#16294a" stroke-width="1.5"'
    player = view.player if view.player is not None else "(not a participant)"
    net = "" if view.net is None else f"Net {'+' if view.net > 0 else ''}{amount_text(view.net)}"
    out = [
        f'<g class="seat{" flagged" if view.flagged else ""}"><title>{esc(f"Siège {amount_text(view.seat)}: {player}")}</title>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{SEAT_W}" height="{h}" rx="8" fill="{SEAT}" {edge}/>',
        f'<text x="{x + 7:.1f}" y="{y + 16:.1f}" fill="#fff" font-size="11.5" font-weight="bold">'
        f"{esc(f'Siège {amount_text(view.seat)} · ' + _short(player, 13))}</text>",
        f'<text x="{x + 7:.1f}" y="{y + 31:.1f}" fill="#fff" font-size="11">'
        f"{esc(f'{amount_text(view.before)} → {amount_text(view.after)}')}</text>",
        f'<text x="{x + 7:.1f}" y="{y + 46:.1f}" fill="#fff" font-size="11">{esc(net)}</text>',
    ]
    for i, card in enumerate(view.cards[:MAX_SEAT_CARDS]):
        row, col = divmod(i, 7)
        out.append(_card(x + 6 + col * (CARD_W + CARD_GAP), y + SEAT_TEXT_H + row * (CARD_H + 5), card))
    if len(view.cards) > MAX_SEAT_CARDS:
        more = len(view.cards) - MAX_SEAT_CARDS
        out.append(
            f'<text x="{x + SEAT_W - 6:.1f}" y="{y + 16:.1f}" fill="#fff" font-size="10" text-anchor="end">+{more} cards</text>'
        )
    out.append("</g>")
    return "".join(out)


def _segments(segments: list[tuple[str, str | None]]) -> str:
    return "".join(
        f'<tspan fill="{colour}">{esc(text)}</tspan>' if colour else esc(text) for text, colour in segments
    )


def hand_svg(event: POJEU, findings: tuple[Finding, ...], *, until_round: int | None = None) -> str:
    """The hand's picture: the table with its seats and board, the rounds beside it.

    ``until_round``: the hand as it stood at the end of that round (see :func:`hand_view`).
    """
    view = hand_view(event, findings, until_round=until_round)
    seats = sorted(view.seats.values(), key=lambda s: s.seat)
    drawn, left_out = seats[:MAX_SEATS], len(seats) - MAX_SEATS
    tallest = max((_seat_height(s) for s in drawn), default=SEAT_TEXT_H)
    parts: list[str] = []
    # the table: the seats' centres on an ellipse, the first seat at the bottom, clockwise
    parts.append(
        f'<ellipse cx="0" cy="0" rx="{RX - 70}" ry="{RY - 70}" fill="{FELT}" stroke="#6b4226" stroke-width="12"/>'
    )
    for i, seat in enumerate(drawn):
        angle = math.pi / 2 + 2 * math.pi * i / len(drawn)
        parts.append(_seat(seat, RX * math.cos(angle), RY * math.sin(angle)))
    # the board in the middle of the felt, one row per board
    rows = [view.boards[b][:MAX_BOARD_CARDS] for b in sorted(view.boards)]
    bw, bh = 30, 42
    top = -len(rows) * (bh + 6) / 2 - 8
    for r, cards in enumerate(rows):
        x0 = -(len(cards) * (bw + 4) - 4) / 2
        for i, code in enumerate(cards):
            parts.append(_card(x0 + i * (bw + 4), top + r * (bh + 6), CardView(code, shown=True), bw, bh))
    final_pot = view.rounds[-1][2] if view.rounds else Decimal(0)
    parts.append(
        f'<text x="0" y="{top + len(rows) * (bh + 6) + 16:.1f}" fill="#fff" font-size="13" '
        f'text-anchor="middle">pot {esc(amount_text(final_pot))}</text>'
    )
    if left_out > 0:
        parts.append(
            f'<text x="0" y="{-RY + 40}" fill="#fff" font-size="12" text-anchor="middle">{left_out} more seat(s) not drawn</text>'
        )
    # the rounds, beside the table
    left = -RX - SEAT_W / 2 - 10
    x = RX + SEAT_W / 2 + 24
    y = -RY - tallest / 2
    for name, lines, pot, total, flagged in view.rounds:
        shown, more = lines[:MAX_ROUND_LINES], len(lines) - MAX_ROUND_LINES
        height = (len(shown) + 1 + (more > 0)) * LINE_H + 8
        if flagged:
            parts.append(
                f'<rect class="round flagged" x="{x - 6:.1f}" y="{y - 4:.1f}" width="{ROUNDS_W}" height="{height}" '
                f'rx="5" fill="{FLAGGED_ROUND}" stroke="{FLAGGED}" stroke-width="2"/>'
            )
        declared = "" if total is None else f" · Total {amount_text(total)}"
        parts.append(
            f'<text x="{x:.1f}" y="{y + 11:.1f}" font-size="12" font-weight="bold">{esc(_short(name, 30))}'
            f'<tspan font-weight="normal"> — pot {esc(amount_text(pot))}{esc(declared)}</tspan></text>'
        )
        for n, line in enumerate(shown, start=1):
            parts.append(
                f'<text x="{x + 8:.1f}" y="{y + 11 + n * LINE_H:.1f}" font-size="11">{_segments(line)}</text>'
            )
        if more > 0:
            parts.append(
                f'<text x="{x + 8:.1f}" y="{y + 11 + (len(shown) + 1) * LINE_H:.1f}" font-size="11" '
                f'font-style="italic">… {more} more line(s) of actions</text>'
            )
        y += height + 6
    bottom = max(RY + tallest / 2 + 10, y)
    top_edge = -RY - tallest / 2 - 10
    width, height = x + ROUNDS_W - left, bottom - top_edge
    return (
        f'<svg class="hand" viewBox="{left:.0f} {top_edge:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" font-family="DejaVu Sans, Liberation Sans, Arial, sans-serif">'
        f"<title>{esc(f'POJEU IDEvt {event.id_evt}: {event.Description}')}</title>{''.join(parts)}</svg>"
    )
