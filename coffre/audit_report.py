"""``coffre audit --html``: one self-contained HTML report, each flagged hand drawn in inline SVG.

The report is opened by a regulator in a browser, offline: no script, no external asset (no URL,
font, image or stylesheet from elsewhere), inline CSS only, and a Content-Security-Policy that
forbids anything else. Every text that comes from an operator (identifiers, round names,
descriptions, messages naming them) is untrusted and escaped where it is written.

A hand picture shows the seats around the table (seat, IDJoueur, CaveAvant → CaveApres, Net),
each seat's cards as cards (annex 1.3.6.d.3; a card dealt face down and never revealed is still
drawn, since the POJEU records it, with a dashed edge and a faded face), the board, and each
round's actions with the pot as it grows; the seats and rounds a finding names are outlined.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from html import escape
from pathlib import Path

from .audit_command import MAX_PICTURES, AuditRun, FlaggedHand, Located
from .domain.audit.findings import CODES, Finding
from .domain.audit.hand import event_contributions
from .domain.catalogue.poker import POJEU, Bet, Check, Discard, Draw, Fold, Reveal, decode_card

# The picture's colours: the browser test looks for them in a screenshot.
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
MAX_ROWS_PER_CODE = 1000
"""Findings listed under one code in the HTML; the JSON output lists them all."""

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


def _sentence(text: str) -> str:
    """``text`` ending with one full stop."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _e(text: object) -> str:
    """Escaped for HTML text and attribute values (inline SVG is parsed as HTML)."""
    return escape(str(text), quote=True)


def _amount(value: Decimal | None) -> str:
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


@dataclass
class SeatView:
    seat: Decimal
    player: str | None = None
    before: Decimal | None = None
    after: Decimal | None = None
    net: Decimal | None = None
    cards: list[CardView] = field(default_factory=list)
    flagged: bool = False


@dataclass
class HandView:
    seats: dict[Decimal, SeatView]
    boards: dict[int, list[int]]
    rounds: list[tuple[str, list[list[tuple[str, str | None]]], Decimal, Decimal | None, bool]]
    """(name, lines of (text, colour) segments, pot after the round, the round's Total, flagged)."""


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
    """What the picture draws, read from the POJEU as declared (no replay: the findings say what is wrong).

    ``until_round`` (an index into ``Jeu.Tour``) stops the hand at the end of that round: later rounds'
    cards, folds, reveals and bets are not read, and a finding naming only a later round outlines nothing.
    """
    tours = event.Jeu.Tour[: _rounds_until(event, until_round)]
    later = {t.name for t in event.Jeu.Tour[len(tours) :]} - {t.name for t in tours}
    findings = tuple(f for f in findings if f.round is None or f.round not in later)
    flagged_seats = {f.seat for f in findings if f.seat is not None}
    flagged_players = {f.player for f in findings if f.player is not None}
    flagged_rounds = {f.round for f in findings if f.round is not None}
    seats: dict[Decimal, SeatView] = {}
    for p in event.Participants.Joueur:
        seats[p.Siege] = SeatView(
            p.Siege, p.IDJoueur, p.Finance.CaveAvant, p.Finance.CaveApres, p.Finance.Net
        )

    def seat(number: int | None) -> SeatView:
        key = Decimal(number or 0)
        return seats.setdefault(key, SeatView(key))

    boards: dict[int, list[int]] = defaultdict(list)
    rounds = []
    pot = Decimal(0)
    uncalled = event_contributions(event).round_back  # given back: not in the pot
    for tour in tours:
        pot -= uncalled.get(tour.name, Decimal(0))
        tokens: list[list[tuple[str, str | None]]] = []
        dealing: tuple[int | None, bool] | None = None
        for action in tour.Action:
            if isinstance(action, Bet):
                pot += action.Valeur
                tokens.append([(f"S{action.Siege} {action.name} {_amount(action.Valeur)}", None)])
            elif isinstance(action, Check):
                tokens.append([(f"S{action.Siege} check", None)])
            elif isinstance(action, Fold):
                tokens.append([(f"S{action.Siege} fold{' (shows)' if action.Reveal else ''}", None)])
                if action.Reveal:
                    for card in seat(action.Siege).cards:
                        card.shown = True
            elif isinstance(action, Draw) and action.commune:
                boards[action.board or 0].append(action.Valeur)
                tokens.append([("board ", None), *_card_text(action.Valeur)])
            elif isinstance(action, Draw):
                seat(action.Siege).cards.append(CardView(action.Valeur, shown=action.ouverte))
                if dealing == (action.Siege, action.ouverte):  # the same seat's next card: one token
                    tokens[-1][-1:-1] = [(" ", None), *_card_text(action.Valeur)]
                else:
                    shown = "" if action.ouverte else " (down)"
                    tokens.append([(f"S{action.Siege} ← ", None), *_card_text(action.Valeur), (shown, None)])
                dealing = (action.Siege, action.ouverte)
                continue
            elif isinstance(action, Discard | Reveal):
                owner = seat(action.Siege)
                held = next((c for c in owner.cards if c.code == action.Valeur), None)
                if held is None:  # not dealt to that seat: drawn anyway, the findings say so
                    held = CardView(action.Valeur, shown=False)
                    owner.cards.append(held)
                if isinstance(action, Discard):
                    held.discarded = True
                    tokens.append([(f"S{action.Siege} discards ", None), *_card_text(action.Valeur)])
                else:
                    held.shown = True
                    tokens.append([(f"S{action.Siege} shows ", None), *_card_text(action.Valeur)])
            dealing = None
        rounds.append((tour.name, _wrap(tokens), pot, tour.Total, tour.name in flagged_rounds))
    for view in seats.values():
        view.flagged = view.seat in flagged_seats or (
            view.player is not None and view.player in flagged_players
        )
    return HandView(seats, dict(boards), rounds)


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
        f'<g class="card{"" if view.shown else " hidden"}"><title>{_e(title)}</title>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="3" fill="{CARD_FACE}" {edge}/>',
        f"<g{faded}>",
        f'<text x="{x + 2.5:.1f}" y="{y + font + 0.5:.1f}" font-size="{font:.0f}" font-weight="bold" '
        f'fill="{colour}">{_e(card.rank)}</text>',
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
    net = "" if view.net is None else f"Net {'+' if view.net > 0 else ''}{_amount(view.net)}"
    out = [
        f'<g class="seat{" flagged" if view.flagged else ""}"><title>{_e(f"Siège {_amount(view.seat)}: {player}")}</title>',
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{SEAT_W}" height="{h}" rx="8" fill="{SEAT}" {edge}/>',
        f'<text x="{x + 7:.1f}" y="{y + 16:.1f}" fill="#fff" font-size="11.5" font-weight="bold">'
        f"{_e(f'Siège {_amount(view.seat)} · ' + _short(player, 13))}</text>",
        f'<text x="{x + 7:.1f}" y="{y + 31:.1f}" fill="#fff" font-size="11">'
        f"{_e(f'{_amount(view.before)} → {_amount(view.after)}')}</text>",
        f'<text x="{x + 7:.1f}" y="{y + 46:.1f}" fill="#fff" font-size="11">{_e(net)}</text>',
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
        f'<tspan fill="{colour}">{_e(text)}</tspan>' if colour else _e(text) for text, colour in segments
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
        f'text-anchor="middle">pot {_e(_amount(final_pot))}</text>'
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
        declared = "" if total is None else f" · Total {_amount(total)}"
        parts.append(
            f'<text x="{x:.1f}" y="{y + 11:.1f}" font-size="12" font-weight="bold">{_e(_short(name, 30))}'
            f'<tspan font-weight="normal"> — pot {_e(_amount(pot))}{_e(declared)}</tspan></text>'
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
        f"<title>{_e(f'POJEU IDEvt {event.id_evt}: {event.Description}')}</title>{''.join(parts)}</svg>"
    )


# -- the page -------------------------------------------------------------------------------------

STYLE = """
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; margin: 1.5em; color: #1a1a1a;
       background: #f6f6f3; }
h1 { margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1em; background: #fff; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; font-size: 0.9em; }
th { background: #e8e8e4; }
td.n { text-align: right; }
.ok { color: #1d6b2f; font-weight: bold; }
.bad { color: #b00020; font-weight: bold; }
.hand-block { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; margin: 0.5em 0 2em;
              padding: 1em; background: #fff; border: 1px solid #ccc; }
.hand-block svg { max-width: 100%; height: auto; }
.hand-findings { flex: 1 1 18em; max-width: 36em; }
.hand-findings li { margin-bottom: 0.4em; }
code { background: #eee; padding: 0 0.2em; }
.legend span { display: inline-block; width: 1em; height: 1em; vertical-align: middle; margin: 0 0.3em 0 1em;
               border: 1px solid #333; }
"""


def _finding_rows(items: list[Located]) -> str:
    rows = []
    for located in items:
        f = located.finding
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{_e(value)}</td>"
                for value in (
                    located.source,
                    located.id_evt,
                    located.event_type,
                    f.round if f.round is not None else "",
                    f.seat if f.seat is not None else "",
                    f.player if f.player is not None else "",
                    f.message,
                )
            )
            + "</tr>"
        )
    return "".join(rows)


def _hand_block(index: int, hand: FlaggedHand) -> str:
    event = hand.event
    items = "".join(
        f"<li><code>{_e(f.code)}</code>"
        + (f" round <b>{_e(f.round)}</b>" if f.round is not None else "")
        + (f" seat <b>{_e(f.seat)}</b>" if f.seat is not None else "")
        + (f" player <b>{_e(f.player)}</b>" if f.player is not None else "")
        + f": {_e(f.message)}</li>"
        for f in hand.findings
    )
    title = (
        f"POJEU IDEvt {event.id_evt}, coffre {event.id_oper}/{event.id_coffre}: {event.Regle} "
        f"({event.variant.name}), Tech {event.Tech}"
    )
    return (
        f'<article id="hand-{index}"><h3>{_e(title)}</h3>'
        f"<p>{_e(_sentence(event.Description + (' — ' + event.Info if event.Info else '')))} Source: "
        f"<code>{_e(hand.source)}</code></p>"
        f'<div class="hand-block">{hand_svg(event, hand.findings)}'
        f'<div class="hand-findings"><h4>{len(hand.findings)} finding(s)</h4><ul>{items}</ul></div></div></article>'
    )


def render_report(run: AuditRun, max_pictures: int = MAX_PICTURES, title: str = "coffre audit") -> str:
    """The whole report, one HTML document."""
    codes = run.codes
    families = Counter()
    for code, count in codes.items():
        families[CODES.get(code, ("?", ""))[0]] += count
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # nothing but this document's own inline styles: no script, no request anywhere
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>Written {datetime.now(UTC).isoformat(timespec='seconds')}. Findings are evidence of inconsistencies "
        "in what the operator declared; the events were recorded as declared.</p>",
        '<section id="summary"><h2>Summary</h2>',
        "<table><tr><th>input</th><th>kind</th><th>verification</th></tr>",
    ]
    verdicts = {v.archive: v for v in run.verifications}
    for path, kind in run.inputs:
        verification = verdicts.get(str(Path(path)))
        cell = ""
        if kind == "archive" and verification is not None:
            cell = (
                '<span class="ok">verified</span>'
                if verification.ok
                else '<span class="bad">does not verify: not audited</span>'
            )
        out.append(f"<tr><td><code>{_e(path)}</code></td><td>{_e(kind)}</td><td>{cell}</td></tr>")
    out.append("</table>")
    verdict = (
        '<span class="ok">no finding, no problem</span>'
        if run.clean
        else f'<span class="bad">{len(run.findings)} finding(s), {len(run.problems)} problem(s)</span>'
    )
    out.append(
        f"<p>{run.events} event(s) audited, {run.hands} hand(s) (POJEU), {run.flagged_total} flagged hand(s): "
        f"{verdict}.</p>"
    )
    if codes:
        out.append("<table><tr><th>family</th><th>code</th><th>count</th><th>meaning</th></tr>")
        for code, count in sorted(codes.items(), key=lambda item: (CODES.get(item[0], ("?",))[0], item[0])):
            family, meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))
            out.append(
                f'<tr><td>{_e(family)} ({families[family]})</td><td><a href="#code-{_e(code)}"><code>{_e(code)}'
                f'</code></a></td><td class="n">{count}</td><td>{_e(meaning)}</td></tr>'
            )
        out.append("</table>")
    if run.not_checked:
        out.append(
            f'<h3 id="not-checked">{sum(run.not_checked.values())} check(s) not made: context absent</h3>'
            "<p>Rules that need events outside the audited set (a registration, the previous event of a "
            "player or of a hand) are not judged where those events may be missing: the set does not "
            "begin at the coffre's IDEvt 1, or has a gap. They are counted here, never reported as "
            "findings.</p><table><tr><th>code</th><th>times not checked</th><th>meaning</th></tr>"
        )
        for code, count in sorted(run.not_checked.items()):
            meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))[1]
            out.append(
                f'<tr><td><code>{_e(code)}</code></td><td class="n">{count}</td><td>{_e(meaning)}</td></tr>'
            )
        out.append("</table>")
    if run.problems:
        out.append(f"<h3>{len(run.problems)} problem(s): inputs not audited</h3><table>")
        out.append("<tr><th>source</th><th>kind</th><th>codes</th><th>message</th></tr>")
        for p in run.problems:
            out.append(
                f"<tr><td><code>{_e(p.source)}</code></td><td>{_e(p.kind)}</td><td>{_e(' '.join(p.codes))}</td>"
                f"<td>{_e(p.message)}</td></tr>"
            )
        out.append("</table>")
    for v in run.verifications:
        lines = "\n".join(v.lines)
        out.append(
            f"<details><summary>verification of <code>{_e(v.archive)}</code></summary><pre>{_e(lines)}</pre></details>"
        )
    out.append("</section>")
    if run.findings:
        out.append('<section id="findings"><h2>Findings by code</h2>')
        by_code: dict[str, list[Located]] = defaultdict(list)
        for located in run.findings:
            by_code[located.finding.code].append(located)
        for code in sorted(by_code):
            items = by_code[code]
            family, meaning = CODES.get(code, ("?", "(a code this coffre does not know)"))
            out.append(
                f'<h3 id="code-{_e(code)}"><code>{_e(code)}</code> ({_e(family)}): {len(items)}</h3><p>{_e(meaning)}</p>'
                "<table><tr><th>source</th><th>IDEvt</th><th>type</th><th>round</th><th>seat</th><th>player</th>"
                f"<th>message</th></tr>{_finding_rows(items[:MAX_ROWS_PER_CODE])}</table>"
            )
            if len(items) > MAX_ROWS_PER_CODE:
                out.append(
                    f"<p>… and {len(items) - MAX_ROWS_PER_CODE} more (coffre audit --json lists them all).</p>"
                )
        out.append("</section>")
    if run.flagged_total:
        out.append('<section id="hands"><h2>Flagged hands</h2>')
        out.append(
            '<p class="legend">Seats a finding names are outlined<span style="background:#fff;border:3px solid '
            f'{FLAGGED}"></span>, rounds a finding names are shaded<span style="background:{FLAGGED_ROUND}"></span>; '
            "a card with a dashed edge and faded face was dealt face down and never revealed (the POJEU records it), "
            "a crossed card was discarded. S<i>n</i> is seat <i>n</i>; ← a card dealt; the pot is cumulative, net of an uncalled bet given back.</p>"
        )
        for index, hand in enumerate(run.flagged, start=1):
            out.append(_hand_block(index, hand))
        left_out = run.flagged_total - len(run.flagged)
        if left_out:
            out.append(
                f"<p>{left_out} more flagged hand(s) not pictured (at most {max_pictures}: "
                "coffre audit --max-pictures N); their findings are listed above.</p>"
            )
        out.append("</section>")
    out.append("<details><summary>Every code coffre checks</summary><table>")
    out.append("<tr><th>family</th><th>code</th><th>meaning</th></tr>")
    for code, (family, meaning) in sorted(CODES.items(), key=lambda item: (item[1][0], item[0])):
        out.append(f"<tr><td>{_e(family)}</td><td><code>{_e(code)}</code></td><td>{_e(meaning)}</td></tr>")
    out.append("</table></details></body></html>")
    return "\n".join(out)
