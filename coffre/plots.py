"""Server-side SVG line plots for the regulator's console: no script, no external asset.

Each series is drawn as a step line (a balance holds until its next event) with a circle per point
whose ``<title>`` is its tooltip. Every text (title, labels) is escaped where it is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from html import escape

MAX_POINTS = 2000
"""Points drawn for one series; a longer one is thinned (see :func:`line_plot`)."""
MAX_SERIES = 12
"""Series drawn in one plot; the others are counted in a note."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
"""One colour per series, cycled; the second cycle is dashed."""

MIN_SPAN = timedelta(minutes=10)
"""A time axis is never narrower (one point, or points at the same instant): it then runs from the
first point over this span."""
DAY = 86400
TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)
"""x tick steps in seconds when the span is at most 2 days (ticks as HH:MM)."""
DATE_STEPS = (1, 2, 3, 7, 14, 30, 60, 91, 182, 365)
"""x tick steps in days beyond 2 days (ticks as dates); then multiples of 365 × (1, 2, 5)."""
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"
CHAR_W = 6.5
"""Approximate width of a character at font size 11, for margins and truncation."""
LEGEND_ROW = 16
LEGEND_COL = 180

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[datetime, Decimal]]
    """(instant, amount): timezone-aware instants, in any order (drawn sorted by time)."""


def _e(text: object) -> str:
    """Escaped for XML/HTML text and attributes; characters XML cannot hold are dropped."""
    return escape(_NOT_XML.sub("", str(text)), quote=True)


def _plain(value: Decimal) -> str:
    """A Decimal without exponent nor grouping, as given (``1.50`` stays ``1.50``, ``1E+3`` is ``1000``)."""
    return f"{value:f}"


def _tick_text(value: Decimal) -> str:
    text = _plain(value.normalize())
    return "0" if text in ("0", "-0") else text


def _short(text: str, length: int) -> str:
    return text if len(text) <= length else text[: max(1, length - 1)] + "…"


def _checked(series: Series) -> list[tuple[datetime, Decimal]]:
    points = []
    for when, value in series.points:
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"series {series.label!r}: {when.isoformat()} has no timezone")
        if isinstance(value, bool) or not isinstance(value, Decimal | int):
            raise TypeError(f"series {series.label!r}: {value!r} is not a Decimal")
        value = Decimal(value)
        if not value.is_finite():
            raise ValueError(f"series {series.label!r}: {value} is not a finite amount")
        points.append((when, value))
    points.sort(key=lambda p: p[0])
    return points


def _thin(points: list[tuple[datetime, Decimal]]) -> list[tuple[datetime, Decimal]]:
    """At most :data:`MAX_POINTS`: every n-th point, and always the first, the last, a min and a max."""
    if len(points) <= MAX_POINTS:
        return points
    n = math.ceil(len(points) / (MAX_POINTS - 3))
    keep = set(range(0, len(points), n))
    keep.add(len(points) - 1)
    keep.add(min(range(len(points)), key=lambda i: points[i][1]))
    keep.add(max(range(len(points)), key=lambda i: points[i][1]))
    return [points[i] for i in sorted(keep)]


def _y_ticks(low: Decimal, high: Decimal, whole: bool = False) -> list[Decimal]:
    """4 to 6 round ticks (1, 2, 2.5 or 5 × 10^e apart) covering [low, high]; ``whole``: whole
    numbers only (counts)."""
    if low == high:
        pad = abs(low) / 10 if low else Decimal(1)
        low, high = low - pad, high + pad
    span = high - low
    exponent = span.adjusted() - 2
    if whole:
        exponent = max(exponent, 0)
    while True:
        for mantissa in (1, 2, Decimal("2.5"), 5):
            step = Decimal(mantissa).scaleb(exponent)
            if whole and step != step.to_integral_value():
                continue
            first = (low / step).to_integral_value(ROUND_FLOOR)
            last = (high / step).to_integral_value(ROUND_CEILING)
            if last - first + 1 <= 6:
                return [(first + i) * step for i in range(int(last - first) + 1)]
        exponent += 1


def _x_ticks(start: float, end: float) -> tuple[float, float, list[float], bool]:
    """The time axis (UTC seconds) and its 3 to 6 round ticks, and whether they are dates.

    The axis is [start, end] when 3 ticks fall within it, else it is widened to the round ticks around.
    """
    dates = end - start > 2 * DAY
    steps = (
        [d * DAY for d in DATE_STEPS] + [365 * DAY * k * m for k in (1, 10, 100) for m in (2, 5, 10)]
        if dates
        else list(TIME_STEPS)
    )
    for step in steps:
        inside = range(math.ceil(start / step), math.floor(end / step) + 1)
        if len(inside) <= 6:
            break
    if len(inside) >= 3:
        return start, end, [float(k * step) for k in inside], dates
    for step in steps:
        first, last = math.floor(start / step), math.ceil(end / step)
        if last - first + 1 <= 6:
            break
    return float(first * step), float(last * step), [float(k * step) for k in range(first, last + 1)], dates


def _when(seconds: float, dates: bool) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%d" if dates else "%H:%M")


def _no_data(title: str, width: int, height: int) -> str:
    h = min(height, 80)
    return (
        f'<svg class="plot" viewBox="0 0 {width} {h}" width="{width}" height="{h}" role="img" '
        f'aria-label="{_e(title)}: no data" font-family="{FONT}"><title>{_e(title)}: no data</title>'
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{h - 1}" fill="#fafafa" stroke="#ccc"/>'
        f'<text x="{width / 2:.1f}" y="{h / 2 - 4:.1f}" font-size="13" text-anchor="middle" font-weight="bold">'
        f"{_e(_short(title, int(width / 7.5)))}</text>"
        f'<text x="{width / 2:.1f}" y="{h / 2 + 14:.1f}" font-size="12" text-anchor="middle" fill="#666">'
        "no data</text></svg>"
    )


def line_plot(
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    width: int = 720,
    height: int = 260,
    counts: bool = False,
) -> str:
    """One inline SVG (no script) plotting ``series`` as step lines against time, in UTC.

    The y ticks are round amounts, the x ticks times (HH:MM) or, beyond a 2-day span, dates. Each point
    is a circle whose ``<title>`` reads ``label · time · value``. Only the first :data:`MAX_SERIES`
    series are drawn (a note counts the others). A series longer than :data:`MAX_POINTS` is thinned:
    every n-th point is kept, and always its first, last, minimum and maximum; its legend says so.
    No series, or no point at all, gives a small "no data" picture. ``width`` × ``height`` is the
    whole picture, legend included (the height grows if the legend would leave no room). ``counts``:
    the values are counts, drawn from 0 with whole-number ticks.
    """
    if width < 200 or height < 120:
        raise ValueError(f"a plot needs at least 200 × 120, not {width} × {height}")
    drawn = [(s, _checked(s)) for s in series[:MAX_SERIES]]
    left_out = len(series) - len(drawn)
    if not any(points for _, points in drawn):
        return _no_data(title, width, height)
    thinned = [(s, _thin(points), len(points)) for s, points in drawn]
    values = [v for _, points, _ in thinned for _, v in points]
    instants = [t.timestamp() for _, points, _ in thinned for t, _ in points]
    low = min(min(values), Decimal(0)) if counts else min(values)
    y_ticks = _y_ticks(low, max(values), whole=counts)
    start, end = min(instants), max(instants)
    if end - start < MIN_SPAN.total_seconds():
        # from the first point on, not centred on the points: a day's count at 00:00 would otherwise
        # sit on an axis from 23:55 the day before, labelled with that day
        end = start + MIN_SPAN.total_seconds()
    x0, x1, x_ticks, dates = _x_ticks(start, end)
    y0, y1 = y_ticks[0], y_ticks[-1]
    tick_texts = [_tick_text(t) for t in y_ticks]

    # the layout: title, plot, x axis, legend rows
    columns = max(1, (width - 20) // LEGEND_COL)
    legend_items = len(thinned) + (left_out > 0)
    legend_h = math.ceil(legend_items / columns) * LEGEND_ROW + 6
    left = 30 + max(len(t) for t in tick_texts) * CHAR_W
    top, right = 30, 4 + len(_when(x_ticks[-1], dates)) * CHAR_W / 2  # room for the last x tick's text
    plot_h = max(60, height - top - 40 - legend_h)
    total_h = top + plot_h + 40 + legend_h
    plot_w = width - left - right

    def px(seconds: float) -> float:
        return left + (seconds - x0) / (x1 - x0) * plot_w

    def py(value: Decimal) -> float:
        return top + float((y1 - value) / (y1 - y0)) * plot_h

    parts = [
        f'<text x="{width / 2:.1f}" y="18" font-size="14" font-weight="bold" text-anchor="middle">'
        f"{_e(_short(title, int(width / 8.5)))}</text>",
        f'<rect x="{left:.1f}" y="{top}" width="{plot_w:.1f}" height="{plot_h}" fill="#fff" stroke="#999"/>',
    ]
    for tick, text in zip(y_ticks, tick_texts, strict=True):
        y = py(tick)
        parts.append(
            f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + plot_w:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{left - 5:.1f}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_e(text)}</text>'
        )
    if y0 < 0 < y1:
        parts.append(
            f'<line class="zero" x1="{left:.1f}" y1="{py(Decimal(0)):.1f}" x2="{left + plot_w:.1f}" '
            f'y2="{py(Decimal(0)):.1f}" stroke="#888"/>'
        )
    bottom = top + plot_h
    for tick in x_ticks:
        x = px(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e4e4e4"/>'
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">'
            f"{_e(_when(tick, dates))}</text>"
        )
    x_label = "date (UTC)" if dates else f"time (UTC), from {_when(x0, True)}"
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{bottom + 32}" font-size="11" text-anchor="middle" '
        f'fill="#444">{_e(x_label)}</text>'
        f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" font-size="11" '
        f'text-anchor="middle" fill="#444">{_e(_short(y_label, int(plot_h / CHAR_W)))}</text>'
    )

    legend_top = bottom + 40
    for i, (s, points, total) in enumerate(thinned):
        colour = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6 3"' if i >= len(PALETTE) else ""
        coords: list[str] = []
        held: float | None = None
        for when, value in points:
            x, y = px(when.timestamp()), py(value)
            if held is not None:
                coords.append(f"{x:.1f},{held:.1f}")  # the previous value holds until this point
            coords.append(f"{x:.1f},{y:.1f}")
            held = y
        circles = "".join(
            f'<circle cx="{px(when.timestamp()):.1f}" cy="{py(value):.1f}" r="2.5">'
            f"<title>{_e(f'{s.label} · {when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC · {_plain(value)}')}</title>"
            "</circle>"
            for when, value in points
        )
        if points:
            parts.append(
                f'<g class="series" fill="{colour}"><title>{_e(s.label)}</title>'
                f'<polyline points="{" ".join(coords)}" fill="none" stroke="{colour}" stroke-width="1.8"{dash}/>'
                f"{circles}</g>"
            )
        row, column = divmod(i, columns)
        lx, ly = 10 + column * LEGEND_COL, legend_top + row * LEGEND_ROW
        note = "no points" if not points else "thinned" if len(points) < total else ""
        text = _short(s.label, 24 - (len(note) + 3 if note else 0)) + (f" ({note})" if note else "")
        detail = (
            f": {len(points)} of {total} points drawn (every n-th, and the first, last, min and max)"
            if note == "thinned"
            else ""
        )
        parts.append(
            f'<g class="legend-item"><title>{_e(s.label + detail)}</title>'
            f'<line x1="{lx}" y1="{ly + 8}" x2="{lx + 18}" y2="{ly + 8}" stroke="{colour}" stroke-width="2.5"{dash}/>'
            f'<text x="{lx + 23}" y="{ly + 12}" font-size="11">{_e(text)}</text></g>'
        )
    if left_out > 0:
        row, column = divmod(len(thinned), columns)
        parts.append(
            f'<text class="more" x="{10 + column * LEGEND_COL}" y="{legend_top + row * LEGEND_ROW + 12}" '
            f'font-size="11" font-style="italic">{left_out} more not drawn</text>'
        )
    return (
        f'<svg class="plot" viewBox="0 0 {width} {total_h:.0f}" width="{width}" height="{total_h:.0f}" '
        f'role="img" aria-label="{_e(title)}" font-family="{FONT}"><title>{_e(title)}</title>'
        f"{''.join(parts)}</svg>"
    )
