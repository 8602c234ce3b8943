"""The regulator's console in a real browser: Debian's chromium, driven by Playwright (its sync API;
no browser of Playwright's is downloaded, the test skips without chromium), over the regulator API
serving an archive sealed from coffre's own demo events (the cash table with its falsified hand, and
the mixed table of gaelle, hugo, ines, jules and karim at Tech T-77).

A browser without credentials sees only the login page; logged in with the development token it
searches a player, steps through one of her hands round by round (with the keyboard too), finds the
demo's flagged hand by its finding code, downloads its inclusion proof, the newest checkpoint and the
certificates and checks them offline with ``coffre proof --check``; hostile search inputs come back
escaped, with no script run, and a traversing path is an error page. Screenshots are written under
the test's tmp_path (their paths printed) and, when COFFRE_CONSOLE_SCREENSHOTS names a folder, there
too under stable names (docs/console/*.png)."""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from coffre.cli import main
from coffre.commands.inputs import inputs
from coffre.domain.audit.findings import CODES
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize

from audit_hands import DEMO, seal_archive
from console_server import ConsoleServer
from test_report_screenshot import CHROMIUM_ARGS, chromium

sync_api = pytest.importorskip("playwright.sync_api")

CASH, MIXED = DEMO / "cash", DEMO / "mixed"
FLAGGED_FILE = "03-POJEU-hand-1-falsified.json"
PLAYERS = ("gaelle", "hugo", "ines", "jules", "karim")
VIEWPORT = {"width": 1280, "height": 900}
HOSTILE = ("'", "<script>alert(1)</script>", "../../etc/passwd")


def demo_coffre(folder: Path) -> tuple[str, int, list[tuple[int, bytes]]]:
    """The folder's events, normalized, in their IDEvt order, and the one coffre they name."""
    events = [normalize(raw) for _, raw in inputs([str(folder)])]
    coffres = {(e.IDOper, e.IDCoffre) for e in events}
    assert len(coffres) == 1, f"{folder} names several coffres: {coffres}"
    (oper, coffre), ids = coffres.pop(), [e.IDEvt for e in events]
    assert ids == sorted(ids) == list(range(1, len(ids) + 1)), f"{folder}: IDEvt not 1..n in order"
    return oper, coffre, [(e.IDEvt, canonical_bytes(e)) for e in events]


def flagged_id() -> tuple[str, int, int]:
    event = normalize((CASH / FLAGGED_FILE).read_bytes())
    return event.IDOper, event.IDCoffre, event.IDEvt


def build_archive(
    tmp: Path, more: dict[tuple[str, int], list[bytes]] | None = None
) -> tuple[Path, Path, dict[str, tuple[str, int]]]:
    """A signed archive as the vault writes it, one coffre per demo folder, lots of 4 events; and
    ``more`` coffres (IDOper, IDCoffre) -> their events (canonical bytes)."""
    coffres = {name: demo_coffre(folder) for name, folder in (("cash", CASH), ("mixed", MIXED))}
    assert coffres["cash"][:2] != coffres["mixed"][:2], "the demo folders should fill different coffres"
    assert {oper for oper, _, _ in coffres.values()} == {"0099"}
    sealed = {("0099", coffre): [c for _, c in events] for _, coffre, events in coffres.values()}
    assert not set(sealed) & set(more or {}), "the demo's coffres are taken"
    root, cert = seal_archive(tmp, {**sealed, **(more or {})})
    return root, cert, {name: (oper, coffre) for name, (oper, coffre, _) in coffres.items()}


class Shots:
    """Screenshots: full page under tmp_path (paths printed); viewport-sized copies under stable
    names in $COFFRE_CONSOLE_SCREENSHOTS when set (the docs' pictures, kept small)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp / "screenshots"
        self.tmp.mkdir()
        wanted = os.environ.get("COFFRE_CONSOLE_SCREENSHOTS")
        self.docs = Path(wanted) if wanted else None
        if self.docs is not None:
            self.docs.mkdir(parents=True, exist_ok=True)
        self.taken: list[Path] = []

    def __call__(self, page: Any, name: str) -> None:
        path = self.tmp / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 5000, f"{name}: an empty screenshot"
        self.taken.append(path)
        print(f"console screenshot: {path}")
        if self.docs is not None:
            copy = self.docs / f"{name}.png"
            page.screenshot(path=str(copy), full_page=False)
            print(f"console screenshot (docs): {copy}")


def rows(page: Any) -> Any:
    return page.locator("table.results tbody tr")


def search_form(page: Any, base: str, **fields: str) -> Any:
    """Open the search page, fill the fields, press Enter in the last one: the response."""
    page.goto(f"{base}/console/search")
    last = None
    for name, value in fields.items():
        last = page.locator(f"form.search [name={name}]")
        last.fill(value)
    assert last is not None
    with page.expect_navigation() as navigation:
        last.press("Enter")
    return navigation.value


def round_counter(page: Any) -> tuple[int, int]:
    text = page.locator("nav.rounds [aria-current=step]").inner_text()
    found = re.match(r"Round (\d+) of (\d+)", text)
    assert found, text
    return int(found[1]), int(found[2])


def picture(page: Any) -> str:
    """The hand's table and its log, as the page draws them."""
    return page.locator("section.hand").inner_html() + page.locator("ol.log").inner_html()


def pots_text(page: Any) -> list[str]:
    return [" ".join(t.split()) for t in page.locator("ul.pots li").all_inner_texts()]


def seat_text(page: Any, seat: int) -> dict[str, str]:
    """A seat's box: its figures by their label, its status line ("All in", "✕ Folded (flop)") and
    its hand's name."""
    box = page.locator(f"li.seat[data-seat='{seat}']")
    labels = box.locator("dl.chips dt").all_inner_texts()
    values = box.locator("dl.chips dd").all_inner_texts()
    out = dict(zip(labels, values, strict=True))
    status = box.locator("p.status:not(.flag)")
    out["status"] = " ".join(status.inner_text().split()) if status.count() else ""
    hand = box.locator("p.hand-name")
    out["hand"] = " ".join(hand.first.inner_text().split()) if hand.count() else ""
    return out


def test_the_console_in_chromium(tmp_path):
    executable = chromium()
    root, cert, coffres = build_archive(tmp_path)
    cash, mixed = coffres["cash"], coffres["mixed"]
    server = ConsoleServer(tmp_path, root, cert)
    try:
        token = server.development_token()
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                scenario(browser, server.base, token, cash, mixed, tmp_path)
            finally:
                browser.close()
    finally:
        server.stop()


def scenario(browser: Any, base: str, token: str, cash: Any, mixed: Any, tmp: Path) -> None:
    shots = Shots(tmp)
    flagged = flagged_id()
    assert flagged[:2] == cash
    event_url = f"{base}/console/event/{mixed[0]}/{mixed[1]}/6"

    # 1. without credentials, every page is the login page, with none of the archive in it
    anonymous = browser.new_context(ignore_https_errors=True, viewport=VIEWPORT, locale="en-GB")
    page = anonymous.new_page()
    for url in (f"{base}/console/", f"{base}/console/search?player=gaelle", event_url):
        page.goto(url)
        assert urllib.parse.urlsplit(page.url).path == "/console/login", (url, page.url)
        assert page.locator("#token").is_visible()
        content = page.content()
        for secret in ("gaelle", "HashChaine", "T-77", "POJEU"):
            assert secret not in content, (url, secret)
    anonymous.close()

    context = browser.new_context(
        ignore_https_errors=True, viewport=VIEWPORT, accept_downloads=True, locale="en-GB"
    )
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    # 2. log in with the development token: the overview lists both coffres, verified
    page.goto(f"{base}/console/")
    assert urllib.parse.urlsplit(page.url).path == "/console/login"
    page.locator("#token").fill(token)
    with page.expect_navigation():
        page.locator("#token").press("Enter")
    assert urllib.parse.urlsplit(page.url).path == "/console/"
    assert page.locator("h1").inner_text() == "Overview"
    table = page.locator("section[aria-labelledby=coffres-h] tbody tr")
    assert table.count() == 2
    listed = {tuple(table.nth(i).locator("td").all_inner_texts()[:2]) for i in range(2)}
    assert listed == {(cash[0], str(cash[1])), (mixed[0], str(mixed[1]))}
    assert "Every sealed lot is indexed." in page.locator("section[aria-labelledby=index-h]").inner_text()
    assert page.locator("figure svg").count() >= 1  # lots sealed per day
    shots(page, "overview")

    # 3. search gaelle with the form: her events, and one of her hands opened from the results
    response = search_form(page, base, player="gaelle")
    assert response.status == 200
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)["player"] == ["gaelle"]
    results = rows(page)
    assert results.count() >= 5
    for i in range(results.count()):
        assert "gaelle" in results.nth(i).locator("td").nth(6).inner_text()
    types = {results.nth(i).locator("td").nth(3).inner_text().split(" ")[0] for i in range(results.count())}
    assert {"POINSCRIT", "POJEU", "POBILAN"} <= types, types
    shots(page, "search")
    hand_row = results.filter(has_text="POJEU").first
    hand_id = hand_row.locator("td").nth(2).inner_text()
    with page.expect_navigation():
        hand_row.get_by_role("link", name="hand", exact=True).click()
    assert urllib.parse.urlsplit(page.url).path == f"/console/hand/{mixed[0]}/{mixed[1]}/{hand_id}"
    assert page.locator("h1").inner_text() == f"Hand {mixed[0]}/{mixed[1]} IDEvt {hand_id}"
    assert "gaelle" in page.locator("section.hand ul.seats").inner_text()

    # 4. step through its rounds: the counter advances and the picture changes, to the last round
    with page.expect_navigation():
        page.get_by_role("link", name="Step through, from round 1").click()
    step, total = round_counter(page)
    assert step == 1 and total >= 2
    pictures = [picture(page)]
    texts = [page.locator("section.hand .card").count()]
    assert page.locator("nav.rounds a[accesskey=p]").count() == 0  # no previous round on the first
    while step < total:
        following = page.get_by_role("link", name="Next round →")
        assert following.get_attribute("accesskey") == "n"
        with page.expect_navigation():
            if step == 1:  # the keyboard: focus the link, press Enter
                following.focus()
                page.keyboard.press("Enter")
            else:
                following.click()
        now, of = round_counter(page)
        assert (now, of) == (step + 1, total)
        step = now
        pictures.append(picture(page))
        texts.append(page.locator("section.hand .card").count())
        assert pictures[-1] != pictures[-2], f"round {step}: the picture did not change"
        assert page.get_by_role("link", name="← Previous round").get_attribute("accesskey") == "p"
        if step == 2:
            shots(page, "hand")
    assert page.get_by_role("link", name="Next round →").count() == 0  # the last round
    assert page.locator("nav.rounds span.off").inner_text() == "Next round →"
    assert texts == sorted(texts) and texts[-1] > texts[0], texts  # cards are dealt, none taken back

    # 4b. the mixed table's hand 2 (IDEvt 7), stepped with the keyboard alone; its numbers are the
    # record's: blinds 10 (seat 3, ines) and 20 (seat 4, jules), the button seat 2 (hugo) before the
    # small blind; pre-flop hugo folds and gaelle, ines, karim (980 each) and jules (1070) are all in
    # for 980: one pot of 4 × 980 = 3920, jules keeps 90; gaelle's two pair (9♠ 3♠ with the board's
    # 5♠ 9♦ 9♣ 8♣ 8♥) wins it all
    hand_at = f"{base}/console/hand/{mixed[0]}/{mixed[1]}/7"
    page.goto(hand_at + "?round=0")
    assert round_counter(page) == (1, 6)
    assert pots_text(page) == ["Main pot: 30 · seats 1, 2, 3, 4, 5 can win it"]
    assert seat_text(page, 3)["Stack"] == "970" and seat_text(page, 4)["Stack"] == "1,050"
    assert "button" in page.locator("li.seat[data-seat='2'] h3").inner_text()
    assert "Button: seat 2" in page.locator(".dealer-note").inner_text()
    page.locator("a[accesskey=n]").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert round_counter(page) == (2, 6)
    assert pots_text(page) == ["Main pot: 3,920 · seats 1, 3, 4, 5 can win it"]
    gaelle = seat_text(page, 1)
    assert (gaelle["Stack"], gaelle["In the pots"], gaelle["status"]) == ("0", "980", "● All in")
    assert seat_text(page, 4)["Stack"] == "90"
    assert seat_text(page, 2)["status"] == "✕ Folded (pre-flop)"
    assert "folded" in (page.locator("li.seat[data-seat='2']").get_attribute("class") or "")
    assert page.locator("section[aria-labelledby=result-h]").count() == 0  # no winner before the end
    # the cards are big enough to read at 1280 px, the log's text at least 14 px
    heights = [page.locator("section.hand .card").nth(i).bounding_box()["height"] for i in range(10)]
    assert min(heights) >= 40, heights
    sizes = page.locator("ol.log ul li").evaluate_all(
        "items => items.map(i => parseFloat(getComputedStyle(i).fontSize))"
    )
    assert sizes and min(sizes) >= 14, sizes
    for _ in range(4):  # to the last round, by the keyboard
        page.locator("a[accesskey=n]").focus()
        with page.expect_navigation():
            page.keyboard.press("Enter")
    assert round_counter(page) == (6, 6)
    rows_won = page.locator("table.awards tbody tr")
    assert rows_won.count() == 1
    assert rows_won.first.locator("td").all_inner_texts() == [
        "Main pot",
        "3,920",
        "Seat 1 · gaelle",
        "3,920",
        "Two pair, nines and eights (9-9-8-8-5)",
    ]
    assert seat_text(page, 1)["hand"] == "Hand: Two pair, nines and eights (9-9-8-8-5)"
    shots(page, "hand-end")
    # at 125 % zoom of a 1280 px window (1024 CSS px), the page needs no sideways scrolling
    zoomed = browser.new_context(
        ignore_https_errors=True, viewport={"width": 1024, "height": 720}, device_scale_factor=1.25
    )
    try:
        zoomed.add_cookies(context.cookies())
        other = zoomed.new_page()
        other.goto(hand_at + "?round=2")
        assert round_counter(other) == (3, 6)
        assert other.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert (
            min(other.locator("section.hand .card").nth(i).bounding_box()["height"] for i in range(5)) >= 40
        )
    finally:
        zoomed.close()

    # 5. the demo's flagged hand, found by its finding code: the code is on the hand's page
    page.goto(f"{base}/console/search")
    options = page.locator("select[name=finding] option")
    codes = [
        options.nth(i).get_attribute("value") or options.nth(i).inner_text() for i in range(options.count())
    ]
    code = codes[1]  # after "any or none"
    assert code in CODES, codes
    page.locator("select[name=finding]").select_option(code)
    with page.expect_navigation():
        page.get_by_role("button", name="Search").click()
    results = rows(page)
    assert results.count() >= 1
    found = results.filter(
        has=page.locator(f'a[href="/console/event/{flagged[0]}/{flagged[1]}/{flagged[2]}"]')
    )
    assert found.count() == 1, page.content()
    with page.expect_navigation():
        found.get_by_role("link", name="hand", exact=True).click()
    assert urllib.parse.urlsplit(page.url).path == f"/console/hand/{flagged[0]}/{flagged[1]}/{flagged[2]}"
    bad = page.locator("section[aria-labelledby=findings-h] code.bad").all_inner_texts()
    assert bad and set(bad) <= set(CODES) and code in bad, bad
    shots(page, "flagged-hand")

    # 6. its proof, the newest checkpoint and the certificates, downloaded and checked offline
    with page.expect_navigation():
        page.get_by_role("link", name="the event").click()
    assert page.locator("h1").inner_text() == f"Event {flagged[0]}/{flagged[1]} IDEvt {flagged[2]}"
    assert code in page.locator("section[aria-labelledby=findings-h] code.bad").all_inner_texts()
    shots(page, "event")
    saved = {}
    for name, link in (
        ("proof.json", "download proof.json"),
        ("checkpoint.xml", "the newest signed checkpoint"),
        ("certificates.pem", "its certificates"),
    ):
        with page.expect_download() as download:
            page.get_by_role("link", name=link).click()
        saved[name] = tmp / f"downloaded-{name}"
        download.value.save_as(saved[name])
        assert saved[name].stat().st_size > 100, name
    assert saved["certificates.pem"].read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    assert (
        main(
            [
                "proof",
                "--check",
                str(saved["proof.json"]),
                "--checkpoint",
                str(saved["checkpoint.xml"]),
                "--cert",
                str(saved["certificates.pem"]),
            ]
        )
        == 0
    )

    # the player's page and the table's page
    page.goto(f"{base}/console/player?oper={mixed[0]}&id=gaelle")
    assert page.locator("h1").inner_text() == "Player gaelle"
    assert page.locator("section[aria-labelledby=hands-h] tbody tr a").count() >= 1
    assert page.locator("section[aria-labelledby=money-h] figure svg").count() == 1
    shots(page, "player")
    page.goto(f"{base}/console/tech?oper={mixed[0]}&id=T-77")
    assert page.locator("h1").inner_text() == "Tech T-77"
    hands = page.locator("section[aria-labelledby=hands-h] tbody tr")
    assert hands.count() == 24  # hands 1..24 of the mixed table
    seats = page.locator("section[aria-labelledby=hands-h]").inner_text()
    assert all(player in seats for player in PLAYERS)
    shots(page, "tech")

    # 7. hostile inputs: shown as text, no script run, nothing broken; a traversing path is an error page
    for value in HOSTILE:
        response = search_form(page, base, player=value, text=value)
        assert response.status in (200, 400), (value, response.status)
        body = response.text()
        assert "<script>alert" not in body
        if response.status == 200:
            assert page.locator("form.search [name=player]").input_value() == value
            assert page.locator("form.search [name=text]").input_value() == value
        assert page.locator("script").count() == 0
        assert page.locator("header nav[aria-label=console]").count() == 1  # the page's frame still there
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in search_form(page, base, player=HOSTILE[1]).text()
    for path in (
        "/console/event/..%2F..%2Fetc/1/1",
        "/console/event/0099/..%2F..%2F/1",
        "/console/static/..%2Fapi.py",
    ):
        response = page.goto(base + path)
        assert response is not None and response.status in (400, 404), (path, response and response.status)
        assert page.locator("h1").inner_text().startswith("Error")
        content = page.content()
        assert "root:" not in content and "import" not in content, path
    assert dialogs == []
    context.close()
    assert len(shots.taken) == 8
