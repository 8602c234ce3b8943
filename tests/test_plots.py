"""``coffre.plots``: server-side SVG step-line plots, well-formed and escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from itertools import pairwise

import pytest
from lxml import etree

from coffre.plots import MAX_POINTS, MAX_SERIES, PALETTE, Series, line_plot

T0 = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script>'\"&"


def points(values: list[str | int], minutes: int = 7) -> list[tuple[datetime, Decimal]]:
    return [(T0 + timedelta(minutes=minutes * i), Decimal(v)) for i, v in enumerate(values)]


def parse(svg: str) -> etree._Element:
    root = etree.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == "svg" and root.get("role") == "img"
    return root


def polyline(root: etree._Element, n: int = 0) -> list[tuple[float, float]]:
    text = root.xpath("//polyline")[n].get("points")
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in text.split())]


def tooltips(root: etree._Element) -> list[str]:
    return [c.findtext("title") for c in root.xpath("//circle")]


def y_ticks(root: etree._Element) -> list[Decimal]:
    return [Decimal(t.text) for t in root.xpath("//text[@text-anchor='end']")]


def test_two_series_drawn_with_their_legend_title_and_ticks():
    root = parse(
        line_plot(
            [Series("ines", points(["10", "12.50", "8", "-4.25"])), Series("karim", points([0, 3], 20))],
            title="Balances",
            y_label="EUR",
        )
    )
    assert root.findtext("title") == "Balances" and root.get("aria-label") == "Balances"
    assert len(root.xpath("//polyline")) == 2
    assert len(root.xpath("//circle")) == 6
    assert tooltips(root)[1] == "ines · 2026-03-01 20:07:00 UTC · 12.50"
    strokes = [p.get("stroke") for p in root.xpath("//polyline")]
    assert strokes == list(PALETTE[:2])
    legend = [g.findtext("text") for g in root.xpath("//g[@class='legend-item']")]
    assert legend == ["ines", "karim"]
    ticks = y_ticks(root)
    assert 4 <= len(ticks) <= 6 and ticks[0] <= Decimal("-4.25") and ticks[-1] >= Decimal("12.50")
    steps = {b - a for a, b in pairwise(ticks)}
    assert len(steps) == 1 and steps.pop().normalize() in {Decimal(n) for n in ("1", "2", "2.5", "5", "10")}
    x_texts = [t.text for t in root.xpath("//text[@text-anchor='middle'][@font-size='11']")]
    assert "time (UTC), from 2026-03-01" in x_texts
    assert 3 <= sum(1 for t in x_texts if len(t) == 5 and t[2] == ":") <= 6  # HH:MM ticks


def test_the_step_line_holds_each_value_until_the_next_point():
    root = parse(line_plot([Series("s", points(["5", "1", "3", "3", "9"]))], title="t", y_label="y"))
    coords = polyline(root)
    assert len(coords) == 2 * 5 - 1
    xs = [x for x, _ in coords]
    assert xs == sorted(xs)
    for (x0, y0), (x1, y1), (x2, _y2) in zip(coords[::2], coords[1::2], coords[2::2], strict=False):
        assert (y1, x1) == (y0, x2) and x0 < x1  # horizontal, then vertical
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.xpath("//circle")]
    assert circles == coords[::2]


def test_points_out_of_order_are_drawn_in_time_order_and_other_offsets_shown_in_utc():
    paris = timezone(timedelta(hours=1))
    series = Series(
        "s", [(T0 + timedelta(hours=1), Decimal(2)), (datetime(2026, 3, 1, 21, 30, tzinfo=paris), Decimal(1))]
    )
    root = parse(line_plot([series], title="t", y_label="y"))
    xs = [x for x, _ in polyline(root)]
    assert xs == sorted(xs)
    assert tooltips(root) == ["s · 2026-03-01 20:30:00 UTC · 1", "s · 2026-03-01 21:00:00 UTC · 2"]


def test_operator_text_is_escaped():
    svg = line_plot([Series(HOSTILE, points([1, 2]))], title=HOSTILE, y_label=HOSTILE)
    assert "<script" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#x27;&quot;&amp;" in svg
    root = parse(svg)
    assert root.xpath("//script") == []
    assert root.findtext("title") == HOSTILE and root.get("aria-label") == HOSTILE
    assert tooltips(root)[0].startswith(HOSTILE + " · ")
    assert root.xpath("//g[@class='legend-item']")[0].findtext("title") == HOSTILE
    # characters XML cannot hold are dropped, the picture stays well-formed
    parse(line_plot([Series("a\x00b\x1b", points([1]))], title="\x01", y_label="y"))


def test_no_series_or_no_points_says_no_data():
    for series in ([], [Series("a", []), Series("b", [])]):
        svg = line_plot(series, title="Empty <&>", y_label="y")
        root = parse(svg)
        assert "no data" in "".join(root.itertext())
        assert root.xpath("//polyline | //circle") == []
        assert root.findtext("title") == "Empty <&>: no data"


def test_an_empty_series_beside_others_is_in_the_legend_only():
    root = parse(line_plot([Series("a", []), Series("b", points([1, 2]))], title="t", y_label="y"))
    assert len(root.xpath("//polyline")) == 1
    assert [g.findtext("text") for g in root.xpath("//g[@class='legend-item']")] == ["a (no points)", "b"]


def test_one_point():
    root = parse(line_plot([Series("one", points(["12.50"]))], title="t", y_label="y"))
    assert len(root.xpath("//circle")) == 1 and len(polyline(root)) == 1
    ticks = y_ticks(root)
    assert 4 <= len(ticks) <= 6 and ticks[0] < Decimal("12.50") < ticks[-1]
    x = float(root.xpath("//circle")[0].get("cx"))
    assert 0 < x < 720


@pytest.mark.parametrize("value", ["0", "-3", "1000000", "0.01"])
def test_all_values_equal(value):
    root = parse(line_plot([Series("flat", points([value] * 5))], title="t", y_label="y"))
    ys = {y for _, y in polyline(root)}
    assert len(ys) == 1
    ticks = y_ticks(root)
    assert 4 <= len(ticks) <= 6 and ticks[0] < Decimal(value) < ticks[-1]
    assert all("E" not in str(t) for t in root.xpath("//text/text()"))


def test_negative_values_and_plain_numbers():
    root = parse(line_plot([Series("s", points(["-1E+3", "-250.5", "2E+3"]))], title="t", y_label="y"))
    ticks = y_ticks(root)
    assert ticks[0] <= -1000 and ticks[-1] >= 2000 and Decimal(0) in ticks
    assert [t.rsplit(" · ", 1)[1] for t in tooltips(root)] == ["-1000", "-250.5", "2000"]
    numbers = [t.text for t in root.xpath("//text[@text-anchor='end']")]
    numbers += [t.rsplit(" · ", 1)[1] for t in tooltips(root)]
    assert not any("E" in n or "," in n for n in numbers), numbers
    assert root.xpath("//line[@class='zero']")


def test_a_span_of_days_is_labelled_with_dates():
    root = parse(line_plot([Series("s", points([1, 2, 3, 4], minutes=60 * 30))], title="t", y_label="y"))
    x_texts = [t.text for t in root.xpath("//text[@text-anchor='middle'][@font-size='11']")]
    assert "date (UTC)" in x_texts
    dates = [t for t in x_texts if len(t) == 10 and t[4] == "-"]
    assert 3 <= len(dates) <= 6 and all(t.startswith("2026-03-0") for t in dates)


def test_a_long_series_is_thinned_keeping_first_last_min_and_max():
    values = [str(i % 97) for i in range(10_000)]
    values[4321] = "-50"  # the minimum, not on the n-th grid
    values[7777] = "500.25"  # the maximum
    values[-1] = "42.42"
    root = parse(line_plot([Series("long", points(values, minutes=1))], title="t", y_label="y"))
    tips = tooltips(root)
    assert len(tips) <= MAX_POINTS
    assert len(tips) > MAX_POINTS // 2
    shown = [tip.rsplit(" · ", 1)[1] for tip in tips]
    assert shown[0] == "0" and shown[-1] == "42.42" and "-50" in shown and "500.25" in shown
    assert tips[0].startswith("long · 2026-03-01 20:00:00 UTC")
    xs = [x for x, _ in polyline(root)]
    assert xs == sorted(xs)
    [legend] = root.xpath("//g[@class='legend-item']")
    assert legend.findtext("text") == "long (thinned)"
    assert f"{len(tips)} of 10000 points drawn" in legend.findtext("title")


def test_more_series_than_drawn_are_counted_and_colours_cycle():
    series = [Series(f"player {i}", points([i, i + 1])) for i in range(MAX_SERIES + 3)]
    root = parse(line_plot(series, title="t", y_label="y"))
    lines = root.xpath("//polyline")
    assert len(lines) == MAX_SERIES
    assert [p.get("stroke") for p in lines] == [PALETTE[i % len(PALETTE)] for i in range(MAX_SERIES)]
    assert [p.get("stroke-dasharray") for p in lines].count(None) == len(PALETTE)
    assert root.xpath("//text[@class='more']")[0].text == "3 more not drawn"


def test_naive_times_are_refused():
    with pytest.raises(ValueError, match="no timezone"):
        line_plot([Series("s", [(datetime(2026, 3, 1), Decimal(1))])], title="t", y_label="y")
    with pytest.raises(ValueError, match="finite"):
        line_plot([Series("s", [(T0, Decimal("NaN"))])], title="t", y_label="y")


def test_counts_start_at_zero_with_whole_ticks():
    from coffre.plots import _y_ticks

    ticks = _y_ticks(Decimal(0), Decimal(3), whole=True)
    assert ticks[0] == 0 and ticks[-1] >= 3 and all(t == t.to_integral_value() for t in ticks)
    assert all(t == t.to_integral_value() for t in _y_ticks(Decimal(0), Decimal(1), whole=True))
    svg = line_plot(
        [Series("lots", [(datetime(2026, 3, d, tzinfo=UTC), Decimal(2 + d % 2)) for d in range(1, 6)])],
        title="lots",
        y_label="lots",
        counts=True,
    )
    assert ">0<" in svg and ">2.5<" not in svg and ">2.2<" not in svg


def test_one_point_at_midnight_is_drawn_on_its_own_day():
    """issue 32: one lot sealed on 2026-11-29 was drawn on an axis 23:56 → 00:04 "from 2026-11-28"."""
    midnight = datetime(2026, 11, 29, tzinfo=UTC)
    root = parse(
        line_plot([Series("lots", [(midnight, Decimal(1))])], title="Lots", y_label="lots", counts=True)
    )
    x_texts = [t.text for t in root.xpath("//text[@text-anchor='middle'][@font-size='11']")]
    assert "time (UTC), from 2026-11-29" in x_texts, x_texts
    assert not [t for t in x_texts if t and t.startswith("23:")], x_texts
    assert len(root.xpath("//circle")) == 1
