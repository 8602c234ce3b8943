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


def x_ticks(root: etree._Element) -> list[str]:
    return [t.text for t in root.xpath("//text[@class='x-tick']")]


def x_label(root: etree._Element) -> str:
    return root.xpath("//text[@class='x-label']")[0].text


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
    assert x_label(root) == "time (UTC), 2026-03-01 20:00 to 20:21"
    assert x_ticks(root) == ["20:00", "20:05", "20:10", "20:15", "20:20"]


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
    assert x_label(root) == "date (UTC), 2026-03-01 to 2026-03-05"
    assert x_ticks(root) == ["2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05"]


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
    assert x_label(root) == "time (UTC), 2026-11-29 00:00 to 00:10"
    assert x_ticks(root) == ["00:00", "00:02", "00:04", "00:06", "00:08", "00:10"]
    assert len(root.xpath("//circle")) == 1


# -- issue 32, item 4: pictures that tell the truth -----------------------------------------------------


def plot_box(root: etree._Element) -> tuple[float, float]:
    """The plot's left and right x (its frame, the first rect after the title)."""
    frame = root.xpath("//rect")[0]
    return float(frame.get("x")), float(frame.get("x")) + float(frame.get("width"))


def tick_instant(text: str, label: str) -> datetime:
    """A tick's text read back as the instant it names, the date taken from the axis's label."""
    if len(text) == 4:
        return datetime(int(text), 1, 1, tzinfo=UTC)
    if len(text) == 7:
        return datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
    if len(text) == 10:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    year = label.split(", ", 1)[1][:4]
    if len(text) == 5:  # HH:MM on the label's day
        return datetime.strptime(f"{label.split(', ', 1)[1][:10]} {text}", "%Y-%m-%d %H:%M").replace(
            tzinfo=UTC
        )
    return datetime.strptime(f"{year}-{text}", "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def daily(first: datetime, days: int, step: int = 1) -> list[tuple[datetime, Decimal]]:
    return [(first + timedelta(days=d), Decimal(1 + d % 3)) for d in range(0, days, step)]


SPANS = {
    "one point": (
        [(datetime(2026, 3, 1, 20, 0, tzinfo=UTC), Decimal(5))],
        "time (UTC), 2026-03-01 20:00 to 20:10",
        ["20:00", "20:02", "20:04", "20:06", "20:08", "20:10"],
    ),
    "one day": (
        [(datetime(2026, 3, 1, h, tzinfo=UTC), Decimal(h)) for h in range(24)],
        "time (UTC), 2026-03-01 00:00 to 23:00",
        ["00:00", "06:00", "12:00", "18:00"],
    ),
    "one year": (
        daily(datetime(2025, 1, 1, tzinfo=UTC), 365),
        "date (UTC), 2025-01-01 to 2025-12-31",
        ["2025-01", "2025-03", "2025-05", "2025-07", "2025-09", "2025-11"],
    ),
    "six years": (
        [(datetime(2020 + m // 12, m % 12 + 1, 1, tzinfo=UTC), Decimal(m)) for m in range(72)],
        "date (UTC), 2020-01-01 to 2025-12-01",
        ["2020", "2021", "2022", "2023", "2024", "2025"],
    ),
    "five findings over five days": (  # issue 32: the axis ran from 2016 to 2026
        daily(datetime(2026, 11, 25, tzinfo=UTC), 5),
        "date (UTC), 2026-11-25 to 2026-11-29",
        ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29"],
    ),
    "a day across midnight": (
        [(datetime(2026, 3, 1, 18, tzinfo=UTC) + timedelta(hours=h), Decimal(h)) for h in range(13)],
        "time (UTC), 2026-03-01 18:00 to 2026-03-02 06:00",
        ["03-01 18:00", "03-01 21:00", "03-02 00:00", "03-02 03:00", "03-02 06:00"],
    ),
}


@pytest.mark.parametrize("span", list(SPANS))
def test_the_time_axis_runs_over_the_data_and_its_ticks_say_where_they_are(span):
    data, label, ticks = SPANS[span]
    root = parse(line_plot([Series("s", data)], title="t", y_label="y", counts=True))
    assert x_label(root) == label and "UTC" in label
    assert x_ticks(root) == ticks
    left, right = plot_box(root)
    xs = [float(c.get("cx")) for c in root.xpath("//circle")]
    assert xs[0] == pytest.approx(left, abs=0.11)  # the axis starts on the first point
    if len(data) > 1:
        assert xs[-1] == pytest.approx(right, abs=0.11)  # and ends on the last
    start = data[0][0].timestamp()
    end = data[-1][0].timestamp() if len(data) > 1 else start + 600
    for text in root.xpath("//text[@class='x-tick']"):  # each tick is drawn where its text says
        at = tick_instant(text.text, label).timestamp()
        assert start <= at <= end
        assert float(text.get("x")) == pytest.approx(
            left + (at - start) / (end - start) * (right - left), abs=0.1
        )
    assert "1970" not in " ".join(root.itertext()) and "2016" not in " ".join(root.itertext())


def legend_boxes(root: etree._Element) -> list[tuple[float, float, float, float]]:
    """Each legend entry's box (x0, y0, x1, y1): its line sample and its text, each character as wide
    as a capital letter may be."""
    from coffre.plots import WIDE_CHAR_W

    boxes = []
    for entry in [*root.xpath("//g[@class='legend-item']"), *root.xpath("//text[@class='more']")]:
        text = entry if entry.tag == "text" else entry.find("text")
        x, y = float(text.get("x")), float(text.get("y"))
        x0 = x if entry.tag == "text" else float(entry.find("line").get("x1"))
        boxes.append((x0, y - 11, x + len(text.text) * WIDE_CHAR_W, y + 3))
    return boxes


@pytest.mark.parametrize(
    "labels", [[f"CODE_{i}_" + "X" * (i * 4) for i in range(MAX_SERIES + 2)], ["a", "b"]]
)
def test_legend_labels_never_overlap(labels):
    series = [Series(label, points([i, i + 1])) for i, label in enumerate(labels)]
    root = parse(line_plot(series, title="t", y_label="y", width=400))
    boxes = legend_boxes(root)
    assert len(boxes) == min(len(labels), MAX_SERIES) + (len(labels) > MAX_SERIES)
    for i, a in enumerate(boxes):
        assert a[0] >= 0 and a[2] <= 400 and a[3] <= float(root.get("height"))
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    axis_label_y = float(root.xpath("//text[@class='x-label']")[0].get("y"))
    assert all(box[1] > axis_label_y for box in boxes)  # below the axis, not on it
    shown = [g.findtext("text") for g in root.xpath("//g[@class='legend-item']")]
    assert shown[:2] == [labels[0], labels[1]]  # short labels whole


def test_series_drawn_at_the_same_values_all_stay_visible():
    """issue 32: a series' point and line hid another's drawn at the same values."""
    same = points([1, 2, 2, 1])
    root = parse(
        line_plot(
            [Series("a", same), Series("b", same), Series("c", same), Series("apart", points([5, 6], 3))],
            title="t",
            y_label="y",
            counts=True,
        )
    )
    groups = root.xpath("//g[@class='series']")
    radii = [[float(c.get("r")) for c in g.xpath("circle")] for g in groups]
    centres = [[(c.get("cx"), c.get("cy")) for c in g.xpath("circle")] for g in groups]
    assert centres[0] == centres[1] == centres[2]
    for k in range(4):  # at each shared spot, each point drawn over another is smaller: a ring shows
        assert radii[0][k] > radii[1][k] > radii[2][k] > 0
    assert radii[3] == [2.5, 2.5]  # a point no other covers keeps its size
    lines = root.xpath("//polyline")
    assert lines[0].get("points") == lines[1].get("points") == lines[2].get("points")
    assert {p.get("stroke-width") for p in lines} == {"1.8"}
    assert len({p.get("stroke") for p in lines}) == 4
    # beneath a line, wider, the stretches that lines drawn after it run along: 2 of them, then 1
    beneath = [[(float(p.get("stroke-width")), length(p.get("d"))) for p in g.xpath("path")] for g in groups]
    whole = length_of(polyline(root, 0))
    assert beneath[0] == [(pytest.approx(1.8 + 2 * 2.4), pytest.approx(whole, abs=0.2))]
    assert beneath[1] == [(pytest.approx(1.8 + 2.4), pytest.approx(whole, abs=0.2))]
    assert beneath[2] == [] and beneath[3] == []


def length(d: str) -> float:
    """The length of a path of ``M x,y H x2`` and ``M x,y V y2`` moves."""
    total, words = 0.0, d.split()
    for move, line in zip(words[::2], words[1::2], strict=True):
        x, y = (float(v) for v in move[1:].split(","))
        total += abs(float(line[1:]) - (x if line[0] == "H" else y))
    return total


def length_of(coords: list[tuple[float, float]]) -> float:
    return sum(abs(x1 - x0) + abs(y1 - y0) for (x0, y0), (x1, y1) in pairwise(coords))


def test_only_the_shared_stretch_of_a_line_is_drawn_wider():
    root = parse(
        line_plot([Series("a", points([1, 1, 3])), Series("b", points([1, 1, 2]))], title="t", y_label="y")
    )
    a, b = polyline(root, 0), polyline(root, 1)
    (beneath,) = root.xpath("//g[@class='series'][1]/path")
    assert float(beneath.get("stroke-width")) > 1.8
    flat = a[3][0] - a[0][0]  # both hold 1 until the third point
    rise = abs(b[-1][1] - b[-2][1])  # then both rise to 2; a alone goes on to 3
    assert length(beneath.get("d")) == pytest.approx(flat + rise, abs=0.2)
    assert flat + rise < length_of(a) - 10  # a's rise from 2 to 3 is not beneath: b does not go there
    assert root.xpath("//g[@class='series'][2]/path") == []


def test_every_point_says_its_value_in_its_title():
    a = [(datetime(2026, 3, d, tzinfo=UTC), Decimal(d)) for d in (1, 2, 5)]
    b = [(datetime(2026, 3, 2, 13, 5, 9, tzinfo=UTC), Decimal("7.50"))]
    root = parse(line_plot([Series("a", a), Series("b & c", b)], title="t", y_label="y"))
    assert tooltips(root) == [
        "a · 2026-03-01 00:00:00 UTC · 1",
        "a · 2026-03-02 00:00:00 UTC · 2",
        "a · 2026-03-05 00:00:00 UTC · 5",
        "b & c · 2026-03-02 13:05:09 UTC · 7.50",
    ]
    days = parse(line_plot([Series("a", a)], title="t", y_label="y", counts=True, bucket="day"))
    assert tooltips(days) == [
        "a · 2026-03-01 (UTC) · 1",
        "a · 2026-03-02 (UTC) · 2",
        "a · 2026-03-05 (UTC) · 5",
    ]
    months = parse(line_plot([Series("a", a[:1])], title="t", y_label="y", counts=True, bucket="month"))
    assert tooltips(months) == ["a · 2026-03 (UTC) · 1"]
    with pytest.raises(ValueError, match="bucket"):
        line_plot([Series("a", a)], title="t", y_label="y", bucket="week")


def test_counts_per_day_or_month_have_no_finer_ticks():
    """A day's count is not at an hour of it: per-day counts tick on days, per-month on months."""
    days = [(datetime(2026, 3, d, tzinfo=UTC), Decimal(d)) for d in (2, 3, 4)]
    root = parse(line_plot([Series("lots", days)], title="t", y_label="y", counts=True, bucket="day"))
    assert x_ticks(root) == ["2026-03-02", "2026-03-03", "2026-03-04"]
    assert x_label(root) == "date (UTC), 2026-03-02 to 2026-03-04"
    one = parse(line_plot([Series("lots", days[:1])], title="t", y_label="y", counts=True, bucket="day"))
    assert x_ticks(one) == ["2026-03-02"] and x_label(one) == "date (UTC), 2026-03-02"
    months = [(datetime(2026, m, 1, tzinfo=UTC), Decimal(m)) for m in (1, 2, 3)]
    root = parse(line_plot([Series("f", months)], title="t", y_label="y", counts=True, bucket="month"))
    assert x_ticks(root) == ["2026-01", "2026-02", "2026-03"]
