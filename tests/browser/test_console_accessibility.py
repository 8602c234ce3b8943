"""Every page type of the regulator's console, in French and in English, judged by axe-core (Deque's
accessibility engine, from the npm registry, pinned by its integrity hash) in Debian's chromium:
no violation of WCAG 2.0 and 2.1, levels A and AA (issue 32).

axe-core is fetched once into a cache (``COFFRE_AXE_CACHE``, default ``~/.cache/coffre``) and
checked against the registry's SHA-512 before use; the test skips where neither the cache nor the
registry is there (and fails under CI, which has the registry). The console's Content-Security-
Policy forbids every script, so the browser context bypasses it to inject axe: the pages
themselves run no script."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_console_browser import VIEWPORT, build_archive, flagged_id

from audit_hands import normalized
from console_server import ConsoleServer
from signal_events import signal_events, signals_saved_at_each_pass
from test_report_screenshot import CHROMIUM_ARGS, chromium

sync_api = pytest.importorskip("playwright.sync_api")

AXE_VERSION = "4.14.1"
AXE_TARBALL = f"https://registry.npmjs.org/axe-core/-/axe-core-{AXE_VERSION}.tgz"
AXE_INTEGRITY = (
    "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
)
"""npm's ``dist.integrity`` of the tarball (``npm view axe-core@4.14.1 dist.integrity``)."""
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def axe_source() -> str:
    cache = Path(os.environ.get("COFFRE_AXE_CACHE", Path.home() / ".cache" / "coffre"))
    kept = cache / f"axe-core-{AXE_VERSION}.tgz"
    if not kept.exists():
        try:
            with urllib.request.urlopen(AXE_TARBALL, timeout=60) as answer:
                data = answer.read()
        except OSError as error:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"axe-core {AXE_VERSION} is not cached and the npm registry is unreachable: {error}")
        cache.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(kept)
    data = kept.read_bytes()
    digest = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != AXE_INTEGRITY:
        kept.unlink()
        raise AssertionError(f"{kept}: not the axe-core {AXE_VERSION} the npm registry publishes ({digest})")
    with tarfile.open(fileobj=io.BytesIO(data)) as tarball:
        member = tarball.extractfile("package/axe.min.js")
        assert member is not None
        return member.read().decode("utf-8")


def violations(page: Any, source: str) -> list[str]:
    """axe-core's WCAG 2.1 A and AA violations of the page as it stands, one line per element."""
    page.add_script_tag(content=source)
    found = page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations"
        ".map(v => v.nodes.map(n => v.id + ' (' + v.impact + '): ' + n.target.join(' ') + ' ' + "
        "n.failureSummary.replace(/\\s+/g, ' '))).flat()",
        WCAG_AA,
    )
    return list(found)


def page_types(cash: tuple[str, int], mixed: tuple[str, int]) -> dict[str, str]:
    oper, coffre, flagged = flagged_id()
    return {
        "overview": "/console/",
        "search, empty": "/console/search",
        "search, results": f"/console/search?oper={oper}&sort=-date",
        "search, players by start": "/console/search?player=ga*",
        "event": f"/console/event/{mixed[0]}/{mixed[1]}/6",
        "hand, a round": f"/console/hand/{mixed[0]}/{mixed[1]}/7?round=1",
        "hand, whole": f"/console/hand/{oper}/{coffre}/{flagged}",
        "player": f"/console/player?oper={mixed[0]}&id=gaelle",
        "tech": f"/console/tech?oper={mixed[0]}&id=T-77",
        "findings": "/console/findings",
        "signals": "/console/signals",
        "rules": "/console/rules",
        "error": "/console/event/0099/9/999999",
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One archive, one regulator API and one chromium for the module's tests. The archive holds a
    table whose signals cross their thresholds (tests/signal_events.py), which the index saves at
    the end of its pass: the signals page lists alerts."""
    executable = chromium()
    tmp = tmp_path_factory.mktemp("console-a11y")
    root, cert, coffres = build_archive(tmp, {("0099", 5): normalized(signal_events())})
    with signals_saved_at_each_pass():
        server = ConsoleServer(tmp, root, cert)
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                yield server, browser, coffres
            finally:
                browser.close()
    finally:
        server.stop()


def logged_in(served: Any, locale: str, **options: Any) -> Any:
    server, browser, _ = served
    page = browser.new_context(
        ignore_https_errors=True, viewport=VIEWPORT, locale=locale, **options
    ).new_page()
    page.goto(f"{server.base}/console/login")
    return page


def log_in(page: Any, served: Any) -> None:
    page.fill("#token", served[0].development_token())
    with page.expect_navigation():
        page.locator("form.login button").click()


@pytest.mark.parametrize(("locale", "language"), [("fr-FR", "fr"), ("en-GB", "en")])
def test_every_page_type_has_no_wcag_aa_violation(served, locale, language):
    source = axe_source()
    server, _, coffres = served
    page = logged_in(served, locale, bypass_csp=True)
    found: dict[str, list[str]] = {}
    assert page.locator("html").get_attribute("lang") == language
    found["login"] = violations(page, source)
    log_in(page, served)
    for name, path in page_types(coffres["cash"], coffres["mixed"]).items():
        page.goto(server.base + path)
        assert page.locator("html").get_attribute("lang") == language, name
        if name == "signals":  # judged with its alerts shown: two signals crossed, their events listed
            assert page.locator(".signal.crossed").count() == 2
            assert page.locator(".signal.crossed ol.evidence li").count() == 5
        found[name] = violations(page, source)
    bad = {name: lines for name, lines in found.items() if lines}
    assert not bad, "\n".join(f"{name}: {line}" for name, lines in bad.items() for line in lines)
    assert len(found) == 14
    page.context.close()


def test_the_language_switch_in_the_browser(served):
    """French by default for a French browser; the switch leads to the same page in English, and
    the choice holds on the next page."""
    server, _, coffres = served
    page = logged_in(served, "fr-FR")
    assert page.locator("h1").inner_text() == "Se connecter"
    log_in(page, served)
    mixed = coffres["mixed"]
    page.goto(f"{server.base}/console/hand/{mixed[0]}/{mixed[1]}/7?round=1")
    assert page.locator("nav.rounds [aria-current=step]").inner_text().startswith("Tour 2 sur")
    with page.expect_navigation():
        page.get_by_role("link", name="English").click()
    assert page.url.endswith(f"/console/hand/{mixed[0]}/{mixed[1]}/7?round=1")
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("nav.rounds [aria-current=step]").inner_text().startswith("Round 2 of")
    page.goto(f"{server.base}/console/search")
    assert page.locator("h1").inner_text() == "Search"
    with page.expect_navigation():
        page.get_by_role("link", name="Français").click()
    assert page.locator("h1").inner_text() == "Recherche"
    page.context.close()
