"""The HTML report of a flagged hand, opened in headless Chromium: the screenshot (the CI artifact,
its path printed) is decoded and the hand picture must be in it: the felt, the cards' faces, the
red suits, the seats and the flagged seat's outline, where the picture is. A blank page, a page
that does not render its SVG, or a picture without its cards fails."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from coffre.cli import main
from coffre.hand_picture import CARD_FACE, FELT, FLAGGED, RED_SUIT, SEAT

from audit_hands import duplicated_card_hand
from png_decode import Image, decode

WINDOW = (1400, 1900)


CHROMIUM_ARGS = [
    "--no-sandbox",  # as root in CI containers
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # without these, Chromium's connections are refused by a closed network, many at a time
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Chromium's flags in every browser test."""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    pytest.skip("no chromium binary (apt-get install chromium; .ci/run installs it)")


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def count(image: Image, colour: str, box: tuple[int, int, int, int], tolerance: int = 0) -> int:
    """Pixels of ``colour`` (each channel within ``tolerance``) inside ``box`` (x0, y0, x1, y1)."""
    r, g, b = rgb(colour)
    x0, y0, x1, y1 = box
    found = 0
    for y in range(max(0, y0), min(image.height, y1)):
        for x in range(max(0, x0), min(image.width, x1)):
            pr, pg, pb = image.rgb(x, y)
            if abs(pr - r) <= tolerance and abs(pg - g) <= tolerance and abs(pb - b) <= tolerance:
                found += 1
    return found


def bounding_box(image: Image, colour: str) -> tuple[int, int, int, int] | None:
    """The box around every pixel of exactly ``colour``, scanning the raw bytes row by row."""
    target = bytes(rgb(colour))
    step, stride = image.channels, image.width * image.channels
    xs, ys = [], []
    for y in range(image.height):
        row = image.pixels[y * stride : (y + 1) * stride]
        at = row.find(target)
        while at != -1:
            if at % step == 0:
                xs.append(at // step)
                ys.append(y)
            at = row.find(target, at + 1)
    return (min(xs), min(ys), max(xs) + 1, max(ys) + 1) if xs else None


def test_the_flagged_hand_renders_in_chromium(tmp_path, capsys):
    browser = chromium()
    hand = tmp_path / "hand.xml"
    hand.write_bytes(duplicated_card_hand())
    report = tmp_path / "report.html"
    assert main(["audit", str(hand), "--html", str(report)]) == 1
    shot = tmp_path / "report.png"
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
        print(f"\nscreenshot of the hand report: {shot}")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = decode(shot.read_bytes())
    assert (image.width, image.height) == WINDOW

    # the table: the felt is a large ellipse (about 260 × 145 px radii), where the picture is
    felt = bounding_box(image, FELT)
    assert felt is not None, "no felt: the hand picture did not render"
    x0, y0, x1, y1 = felt
    assert 450 <= x1 - x0 <= 600 and 250 <= y1 - y0 <= 340, felt
    assert count(image, FELT, felt) > 0.6 * 3.14 * (x1 - x0) * (y1 - y0) / 4
    # the board's five cards lie on the felt: their faces, and the red of 8♦ and 9♦
    assert count(image, CARD_FACE, felt) > 5 * 30 * 42 * 0.5
    assert count(image, RED_SUIT, felt, tolerance=40) > 2 * 40
    # the seats around it: six seat boxes, their cards (12 hole cards), the flagged seat's outline
    picture = (x0 - 200, y0 - 140, x1 + 200, y1 + 140)
    assert count(image, SEAT, picture) > 6 * 160 * 80 * 0.6
    assert count(image, CARD_FACE, picture) - count(image, CARD_FACE, felt) > 12 * 21 * 29 * 0.3
    assert count(image, RED_SUIT, picture, tolerance=40) > 5 * 40
    assert count(image, FLAGGED, picture) > 2 * (176 + 88) * 4 * 0.6
