"""``coffre signals --html``'s report opened in headless Chromium (its screenshot the CI artifact,
its path printed): the banner that a signal is not a finding is drawn at the top, and each signal
that crossed its threshold is drawn with its red edge, one per crossed signal."""

from __future__ import annotations

import subprocess

from coffre.cli import main
from coffre.commands.signals_report import STYLE

from png_decode import decode
from signal_events import signal_events
from test_report_screenshot import CHROMIUM_ARGS, bounding_box, chromium, rgb

WINDOW = (1200, 1600)
BANNER = "#fff4df"
CROSSED_EDGE = "#b00020"


def test_the_signals_report_renders_in_chromium(tmp_path, capsys):
    assert f"background: {BANNER}" in STYLE and f"border-left-color: {CROSSED_EDGE}" in STYLE
    browser = chromium()
    events = tmp_path / "events"
    events.mkdir()
    for n, raw in enumerate(signal_events(), start=1):
        (events / f"{n:02d}.json").write_bytes(raw)
    report = tmp_path / "signals.html"
    assert (
        main(["signals", str(events), "--html", str(report), "--console", "https://regulator.example"]) == 1
    )
    shot = tmp_path / "signals.png"
    command = [
        browser,
        "--headless",
        *CHROMIUM_ARGS,
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={shot}",
        report.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    with capsys.disabled():
        print(f"\nscreenshot of the signals report: {shot}")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = decode(shot.read_bytes())
    assert (image.width, image.height) == WINDOW
    # the banner: a wide band near the top of the page
    banner = bounding_box(image, BANNER)
    assert banner is not None, "no banner: the report's style did not apply"
    x0, y0, x1, y1 = banner
    assert y0 < 200 and x1 - x0 > 600 and 30 < y1 - y0 < 200, banner
    # two signals crossed (one IPJoueur, one HashJoueur): two red edges, 3 px wide, one under the other
    # (the words "crossed" are red too, but no column of a text holds 20 such pixels in a row)
    red = rgb(CROSSED_EDGE)
    edges: dict[int, list[tuple[int, int]]] = {}
    for x in range(image.width // 2):
        runs, start = [], None
        for y in range(image.height + 1):
            inside = y < image.height and image.rgb(x, y) == red
            if inside and start is None:
                start = y
            elif not inside and start is not None:
                if y - start >= 20:
                    runs.append((start, y))
                start = None
        if runs:
            edges[x] = runs
    assert len(edges) == 3, sorted(edges)  # the edge's width
    assert all(len(runs) == 2 for runs in edges.values()), edges
    assert max(x for x in edges) - min(x for x in edges) == 2
