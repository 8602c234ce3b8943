"""Server-side SVG line plots for the regulator's console: no script, no external asset.

Each series is drawn as a step line (a balance holds until its next event) with a circle per point
whose ``<title>`` is its tooltip. Every text (title, labels) is escaped where it is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from html import escape
from itertools import pairwise

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
"""x tick steps in seconds (ticks as HH:MM, or MM-DD HH:MM when the axis crosses a UTC midnight)."""
DAY_STEPS = (1, 2, 3, 7, 14)
"""Then x tick steps in days (ticks as dates; 7 and 14 days from a Monday)."""
MONTH_STEPS = (1, 2, 3, 6)
"""Then in months (ticks on the first of a month, as YYYY-MM)."""
YEAR_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
"""Then in years (ticks on the first of January, as YYYY)."""
MAX_X_TICKS = 6

Words = Callable[[str], str]
"""A gettext: the picture's own texts (axis labels, notes) in the page's language."""


def _english(message: str) -> str:
    return message


def N_(message: str) -> str:
    """A text of the picture, for the console's catalogue (services/regulator/i18n.py)."""
    return message


FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"
CHAR_W = 6.5
"""Approximate width of a character at font size 11, for margins and truncation."""
WIDE_CHAR_W = 8.0
"""A character's width at font size 11 at most, capitals included (a legend's label is cut to fit)."""
LEGEND_ROW = 16
"""One legend entry per row: a label never runs into another."""
MARKER_R = 2.5
"""A point's radius; a point under ``k`` points of series drawn after it is ``k`` × :data:`RING`
wider, so that each shows as a ring around the next."""
RING = 2.0
LINE_W = 1.8
"""A series' line width; where ``k`` series drawn after it run along it, it is ``k`` ×
:data:`LINE_RING` wider there, so that it shows on both sides of theirs."""
LINE_RING = 2.4

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


def _ticks_in(start: float, end: float, unit: str, n: int) -> list[float]:
    """The round instants of ``n`` ``unit`` (``s``, ``d``, ``m``, ``y``) within [start, end] (UTC
    seconds), at most ``MAX_X_TICKS + 1`` of them (enough to know there are too many)."""
    if unit in ("s", "d"):
        step = n if unit == "s" else n * DAY
        offset = 4 * DAY if unit == "d" and n % 7 == 0 else 0  # weeks from a Monday (1970-01-05)
        first = math.ceil((start - offset) / step)
        last = math.floor((end - offset) / step)
        return [float(k * step + offset) for k in range(first, min(last, first + MAX_X_TICKS) + 1)]
    moment = datetime.fromtimestamp(start, UTC)
    if unit == "m":
        index = moment.year * 12 + moment.month - 1
        index += -index % n
        if datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC).timestamp() < start:
            index += n
        found = []
        while len(found) <= MAX_X_TICKS and index // 12 <= 9999:
            at = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC).timestamp()
            if at > end:
                break
            found.append(at)
            index += n
        return found
    year = moment.year + (-moment.year % n)
    if datetime(year, 1, 1, tzinfo=UTC).timestamp() < start:
        year += n
    found = []
    while len(found) <= MAX_X_TICKS and year <= 9999:
        at = datetime(year, 1, 1, tzinfo=UTC).timestamp()
        if at > end:
            break
        found.append(at)
        year += n
    return found


def _x_ticks(
    start: float, end: float, bucket: str | None = None, words: Words = _english
) -> tuple[list[float], list[str], str]:
    """The round ticks of the time axis [start, end] (UTC seconds), their texts and the axis's label.

    The axis is the data's range itself, never widened: its label names where it starts and ends.
    The ticks are the finest round instants (minutes, hours, days, weeks, months, years) of which
    at most :data:`MAX_X_TICKS` fall within it; for counts per ``bucket`` (day, month) none finer."""
    steps = [
        *(("s", n) for n in TIME_STEPS if bucket is None),
        *(("d", n) for n in DAY_STEPS if bucket != "month"),
        *(("m", n) for n in MONTH_STEPS),
        *(("y", n) for n in YEAR_STEPS),
    ]
    unit, ticks = "y", []
    for unit, n in steps:
        ticks = _ticks_in(start, end, unit, n)
        if len(ticks) <= MAX_X_TICKS:
            break
    first, last = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    if unit == "s":
        same_day = first.date() == last.date()
        form = "%H:%M" if same_day else "%m-%d %H:%M"
        label = words(N_("time (UTC), {first} to {last}")).format(
            first=f"{first:%Y-%m-%d %H:%M}", last=f"{last:%H:%M}" if same_day else f"{last:%Y-%m-%d %H:%M}"
        )
    else:
        form = {"d": "%Y-%m-%d", "m": "%Y-%m", "y": "%Y"}[unit]
        label = (
            words(N_("date (UTC), {first} to {last}")).format(
                first=f"{first:%Y-%m-%d}", last=f"{last:%Y-%m-%d}"
            )
            if last.date() > first.date()
            else words(N_("date (UTC), {first}")).format(first=f"{first:%Y-%m-%d}")
        )
    return ticks, [datetime.fromtimestamp(t, UTC).strftime(form) for t in ticks], label


def _no_data(title: str, width: int, height: int, words: Words = _english) -> str:
    h = min(height, 80)
    none = words(N_("no data"))
    return (
        f'<svg class="plot" viewBox="0 0 {width} {h}" width="{width}" height="{h}" role="img" '
        f'aria-label="{_e(title)}: {_e(none)}" font-family="{FONT}"><title>{_e(title)}: {_e(none)}</title>'
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{h - 1}" fill="#fafafa" stroke="#ccc"/>'
        f'<text x="{width / 2:.1f}" y="{h / 2 - 4:.1f}" font-size="13" text-anchor="middle" font-weight="bold">'
        f"{_e(_short(title, int(width / 7.5)))}</text>"
        f'<text x="{width / 2:.1f}" y="{h / 2 + 14:.1f}" font-size="12" text-anchor="middle" fill="#666">'
        f"{_e(none)}</text></svg>"
    )


Stretch = tuple[str, float, float, float]
"""A horizontal (``h``, y, x from, x to) or vertical (``v``, x, y from, y to) run of a step line."""


def _shared(lines: list[list[tuple[float, float]]]) -> list[dict[int, list[Stretch]]]:
    """For each polyline, the stretches of it that lines drawn after it run along too, by how many
    of them do (1, 2, …): those are drawn wider beneath it, to show on both sides of theirs."""

    def runs(coords: list[tuple[float, float]]) -> dict[tuple[str, float], list[tuple[float, float]]]:
        found: dict[tuple[str, float], list[tuple[float, float]]] = {}
        for (xa, ya), (xb, yb) in pairwise(coords):
            if ya == yb and xa != xb:
                found.setdefault(("h", ya), []).append((min(xa, xb), max(xa, xb)))
            elif xa == xb and ya != yb:
                found.setdefault(("v", xa), []).append((min(ya, yb), max(ya, yb)))
        return {key: _merged(spans) for key, spans in found.items()}

    def common(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out, i, j = [], 0, 0
        while i < len(a) and j < len(b):
            low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
            if high > low:
                out.append((low, high))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return out

    all_runs = [runs(coords) for coords in lines]
    shared: list[dict[int, list[Stretch]]] = []
    for i, mine in enumerate(all_runs):
        depths: dict[int, list[Stretch]] = {}
        for key, spans in mine.items():
            edges: list[tuple[float, int]] = []  # +1 where a later line's common stretch starts, -1 ends
            for later in all_runs[i + 1 :]:
                for low, high in common(spans, later.get(key, [])):
                    edges += [(low, 1), (high, -1)]
            depth, since = 0, 0.0
            for at, change in sorted(edges):
                if depth and at > since:
                    depths.setdefault(depth, []).append((key[0], key[1], since, at))
                depth, since = depth + change, at
        shared.append(depths)
    return shared


def _stretches(stretches: list[Stretch]) -> str:
    """SVG path data drawing each stretch."""
    return " ".join(
        f"M{low:.1f},{at:.1f} H{high:.1f}" if kind == "h" else f"M{at:.1f},{low:.1f} V{high:.1f}"
        for kind, at, low, high in stretches
    )


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for low, high in sorted(spans):
        if out and low <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _moment_text(when: datetime, bucket: str | None) -> str:
    moment = when.astimezone(UTC)
    if bucket == "day":
        return f"{moment:%Y-%m-%d} (UTC)"
    if bucket == "month":
        return f"{moment:%Y-%m} (UTC)"
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def line_plot(
    series: Sequence[Series],
    *,
    title: str,
    y_label: str,
    width: int = 720,
    height: int = 260,
    counts: bool = False,
    bucket: str | None = None,
    words: Words = _english,
) -> str:
    """One inline SVG (no script) plotting ``series`` as step lines against time, in UTC.

    The time axis runs from the first point to the last (:func:`_x_ticks`; one instant: over
    :data:`MIN_SPAN` from it), its label saying from when to when, in UTC; the y ticks are round
    amounts. Each point is a circle whose ``<title>`` reads ``label · time · value`` (``bucket``
    ``"day"`` or ``"month"``: the points are counts of that day or month, and say so). Points and
    lines of several series drawn at the same place stay visible: the one drawn first is wider
    (a ring, a wider stroke) than each drawn over it. The legend has one entry per line.
    Only the first :data:`MAX_SERIES` series are drawn (a note counts the others). A series longer
    than :data:`MAX_POINTS` is thinned: every n-th point is kept, and always its first, last,
    minimum and maximum; its legend says so. No series, or no point at all, gives a small "no data"
    picture. ``width`` × ``height`` is the whole picture, legend included (the height grows if the
    legend would leave no room). ``counts``: the values are counts, drawn from 0 with whole-number
    ticks. ``words`` translates the picture's own texts (a gettext: the console's language).
    """
    if width < 200 or height < 120:
        raise ValueError(f"a plot needs at least 200 × 120, not {width} × {height}")
    if bucket not in (None, "day", "month"):
        raise ValueError(f"bucket: day, month or None, not {bucket!r}")
    drawn = [(s, _checked(s)) for s in series[:MAX_SERIES]]
    left_out = len(series) - len(drawn)
    if not any(points for _, points in drawn):
        return _no_data(title, width, height, words)
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
    x_ticks, x_texts, x_label = _x_ticks(start, end, bucket, words)
    x0, x1 = start, end
    y0, y1 = y_ticks[0], y_ticks[-1]
    tick_texts = [_tick_text(t) for t in y_ticks]

    # the layout: title, plot, x axis, legend rows (one entry per row)
    legend_items = len(thinned) + (left_out > 0)
    legend_h = legend_items * LEGEND_ROW + 6
    left = 30 + max(len(t) for t in tick_texts) * CHAR_W
    top = 30
    # room for the last x tick's text, centred on it, when it is near the right end
    right = 4 + max((len(x_texts[-1]) * CHAR_W / 2 if x_texts else 0), 6)
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
    for tick, text in zip(x_ticks, x_texts, strict=True):
        x = px(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e4e4e4"/>'
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>'
            f'<text class="x-tick" x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">'
            f"{_e(text)}</text>"
        )
    parts.append(
        f'<text class="x-label" x="{left + plot_w / 2:.1f}" y="{bottom + 32}" font-size="11" '
        f'text-anchor="middle" fill="#444">{_e(x_label)}</text>'
        f'<text transform="translate(13 {top + plot_h / 2:.1f}) rotate(-90)" font-size="11" '
        f'text-anchor="middle" fill="#444">{_e(_short(y_label, int(plot_h / CHAR_W)))}</text>'
    )

    # where each series is drawn, and what of it the series drawn after it cover
    placed = [[(round(px(w.timestamp()), 1), round(py(v), 1)) for w, v in points] for _, points, _ in thinned]
    lines: list[list[tuple[float, float]]] = []
    for spots in placed:
        coords: list[tuple[float, float]] = []
        for x, y in spots:
            if coords:
                coords.append((x, coords[-1][1]))  # the previous value holds until this point
            coords.append((x, y))
        lines.append(coords)
    under_lines = _shared(lines)
    later_spots: list[dict[tuple[float, float], int]] = []
    seen: dict[tuple[float, float], int] = {}
    for spots in reversed(placed):  # how many series drawn after each one have a point at a spot
        later_spots.append(dict(seen))
        for spot in set(spots):
            seen[spot] = seen.get(spot, 0) + 1
    later_spots.reverse()

    legend_top = bottom + 40
    for i, (s, points, total) in enumerate(thinned):
        colour = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6 3"' if i >= len(PALETTE) else ""
        circles = "".join(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{MARKER_R + RING * later_spots[i].get((x, y), 0):g}">'
            f"<title>{_e(f'{s.label} · {_moment_text(when, bucket)} · {_plain(value)}')}</title>"
            "</circle>"
            for (when, value), (x, y) in zip(points, placed[i], strict=True)
        )
        if points:
            coords_text = " ".join(f"{x:.1f},{y:.1f}" for x, y in lines[i])
            beneath = "".join(
                f'<path class="shared" d="{_stretches(stretches)}" fill="none" stroke="{colour}" '
                f'stroke-width="{LINE_W + LINE_RING * depth:g}"/>'
                for depth, stretches in sorted(under_lines[i].items(), reverse=True)
            )
            parts.append(
                f'<g class="series" fill="{colour}"><title>{_e(s.label)}</title>{beneath}'
                f'<polyline points="{coords_text}" fill="none" stroke="{colour}" stroke-width="{LINE_W:g}"{dash}/>'
                f"{circles}</g>"
            )
        lx, ly = 10, legend_top + i * LEGEND_ROW
        note = words(N_("no points")) if not points else words(N_("thinned")) if len(points) < total else ""
        room = int((width - lx - 23 - 4) / WIDE_CHAR_W)  # characters that fit on the entry's line
        text = _short(s.label, room - (len(note) + 3 if note else 0)) + (f" ({note})" if note else "")
        detail = (
            words(
                N_(": {drawn} of {total} points drawn (every n-th, and the first, last, min and max)")
            ).format(drawn=len(points), total=total)
            if points and len(points) < total
            else ""
        )
        parts.append(
            f'<g class="legend-item"><title>{_e(s.label + detail)}</title>'
            f'<line x1="{lx}" y1="{ly + 8}" x2="{lx + 18}" y2="{ly + 8}" stroke="{colour}" stroke-width="2.5"{dash}/>'
            f'<text x="{lx + 23}" y="{ly + 12}" font-size="11">{_e(text)}</text></g>'
        )
    if left_out > 0:
        more = words(N_("{count} more not drawn")).format(count=left_out)
        parts.append(
            f'<text class="more" x="10" y="{legend_top + len(thinned) * LEGEND_ROW + 12}" '
            f'font-size="11" font-style="italic">{_e(more)}</text>'
        )
    return (
        f'<svg class="plot" viewBox="0 0 {width} {total_h:.0f}" width="{width}" height="{total_h:.0f}" '
        f'role="img" aria-label="{_e(title)}" font-family="{FONT}"><title>{_e(title)}</title>'
        f"{''.join(parts)}</svg>"
    )
