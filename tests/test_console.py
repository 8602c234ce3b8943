"""The regulator's console over HTTPS, as a client without a browser sees it: nothing but the login
without credentials, a session only for a token the API accepts, the console's headers on every
answer, hostile inputs escaped, read-only, every page in the access log with who asked, and a lot
changed after it was indexed refused. The browser's view: tests/browser/test_console_browser.py."""

from __future__ import annotations

import csv
import html
import http.cookiejar
import io
import json
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import lxml.html
import pytest
from babel.messages.pofile import read_po
from coffre_regulator import console
from lxml import etree

from coffre.adapters.storage import LocalStorage
from coffre.domain.audit import rules
from coffre.domain.audit.findings import CODES

from audit_hands import ANNEX_POJEU, build_archive, duplicated_card_hand, normalized, seal_archive
from console_server import ConsoleServer
from signal_events import signal_events, signals_saved_at_each_pass

TOKEN = "console-test-token-0123456789"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory):
    """The API and its console, its index in SQLite (the default) or in PostgreSQL (the session's
    server, tests/postgres.py): every test of the console runs on both."""
    tmp = tmp_path_factory.mktemp("console")
    built, cert = build_archive(tmp)
    root = tmp / "served"  # a copy: a test changes a lot of it
    shutil.copytree(built, root)
    settings = {}
    if request.param == "postgresql":
        settings["console_index"] = request.getfixturevalue("postgres_server").create_database("console")
    served = ConsoleServer(tmp, root, cert, tokens=f"inspector:{TOKEN}\n", **settings)
    yield served
    served.stop()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Client:
    """A TLS client with its own cookie jar; redirects are not followed (they are asserted)."""

    def __init__(self, base: str, language: str = "en") -> None:
        self.language = language  # Accept-Language: the English pages unless a test asks for French
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        self.base, self.jar = base, http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPCookieProcessor(self.jar),
            NoRedirect,
        )

    def get(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None):
        request = urllib.request.Request(
            self.base + path, data=data, headers={"Accept-Language": self.language, **(headers or {})}
        )
        try:
            with self.opener.open(request, timeout=30) as answer:
                return answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def login(self, token: str = TOKEN):
        return self.get("/console/login", f"token={token}".encode())


@pytest.fixture
def client(server) -> Client:
    logged = Client(server.base)
    status, headers, _ = logged.login()
    assert status == 303 and headers["Location"] == "/console/"
    return logged


PAGES = (
    "/console/",
    "/console",
    "/console/search?player=alice",
    "/console/search.csv?player=alice",
    "/console/search-lots.zip?player=alice",
    "/console/event/0099/1/1",
    "/console/event/0099/1/1/proof.json",
    "/console/hand/0099/1/1?round=1",
    "/console/coffre/0099/1/checkpoint.xml",
    "/console/certificates.pem",
    "/console/player?oper=0099&id=alice",
    "/console/tech?oper=0099&id=T-42",
    "/console/rules",
    "/console/findings?oper=0099&since=2016-01-01",
    "/console/signals?oper=0099",
    "/console/no-such-page",
)


def test_without_credentials_only_the_login_is_served(server):
    anonymous = Client(server.base)
    for path in PAGES:
        status, headers, body = anonymous.get(path)
        assert status == 303 and headers["Location"] == "/console/login", path
        assert b"alice" not in body and b"0099" not in body, path
        assert headers["Content-Security-Policy"] == console.CSP
    status, headers, body = anonymous.get("/console/login")
    assert status == 200 and b'name="token"' in body and b"alice" not in body
    assert anonymous.get("/console/static/console.css")[0] == 200
    status, _, body = anonymous.login("not-the-token-at-all-000")
    assert status == 401 and b"not accepted" in body and not list(anonymous.jar)
    assert anonymous.get("/console/")[0] == 303
    assert anonymous.get("/v1/coffres")[0] == 401  # the API itself still answers in JSON
    forged = Client(server.base)
    forged.get("/console/login")
    cookie = http.cookiejar.Cookie(
        0, console.COOKIE, "x" * 43, None, False, "127.0.0.1", False, False, "/", True, True, None, False,
        None, None, {},
    )  # fmt: skip
    forged.jar.set_cookie(cookie)
    assert forged.get("/console/")[0] == 303


def test_a_session_for_an_accepted_token(server):
    logged = Client(server.base)
    status, headers, _ = logged.login()
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"{console.COOKIE}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/"):
        assert attribute in cookie
    assert TOKEN not in cookie
    for path in PAGES[:-1]:
        status, headers, body = logged.get(path)
        if path == "/console":
            assert status == 303
            continue
        assert status == 200, (path, body[:300])
        assert headers["Content-Security-Policy"] == console.CSP
        assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
        if headers["Content-Type"].startswith("text/html"):
            assert b"<script" not in body and b"http://" not in body and b"https://" not in body, path
    assert logged.get("/console/no-such-page")[0] == 404
    # the bearer header works as for the API
    status, _, body = Client(server.base).get(
        "/console/search?player=alice", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200 and b"alice" in body
    # logout ends the session
    assert logged.get("/console/logout", b"")[0] == 303
    assert logged.get("/console/")[0] == 303


def test_a_token_removed_from_the_file_ends_its_sessions(server):
    logged = Client(server.base)
    logged.login()
    assert logged.get("/console/")[0] == 200
    kept = server.tokens.read_text()
    try:
        server.tokens.write_text("someone-else:another-token-0123456789abc\n")
        time.sleep(0.05)
        assert logged.get("/console/")[0] == 303
    finally:
        server.tokens.write_text(kept)
    assert logged.get("/console/")[0] == 200


def test_read_only_and_no_form_from_elsewhere(client):
    for path in ("/console/", "/console/search?player=alice", "/console/event/0099/1/1"):
        status, headers, _ = client.get(path, b"x=1")
        assert status == 405 and headers["Allow"] == "GET"
    status, _, _ = client.get(
        "/console/login", f"token={TOKEN}".encode(), headers={"Origin": "https://evil.example"}
    )
    assert status == 403


@pytest.mark.parametrize(
    "value", ["'", "<script>alert(1)</script>", "../../etc/passwd", '"><img src=x onerror=alert(1)>', "%00"]
)
def test_hostile_inputs_are_shown_escaped(client, value):
    from urllib.parse import quote

    for field in ("player", "text", "tech", "hash", "inscription", "oper"):
        status, _, body = client.get(f"/console/search?{field}={quote(value)}")
        assert status == 200, (field, body[:300])
        page = body.decode()
        assert "<script>alert" not in page and "<img src=x" not in page
        if "<" in value:
            assert "&lt;" in page
    for path in (
        f"/console/player?id={quote(value)}",
        f"/console/tech?id={quote(value)}",
        f"/console/event/{quote(value, safe='')}/1/1",
        f"/console/hand/0099/{quote(value, safe='')}/1",
        f"/console/search?coffre={quote(value)}",
        f"/console/search?since={quote(value)}",
    ):
        status, _, body = client.get(path)
        assert status in (200, 400, 404), (path, status)
        assert b"<script>alert" not in body and b"root:x:0" not in body


def test_exports(client):
    status, headers, body = client.get("/console/search.csv?player=alice")
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    lines = body.decode().splitlines()
    assert lines[0].startswith("IDOper,IDCoffre,IDEvt") and len(lines) > 5
    cells = ["a", "=cmd|' /C calc'!A0", "-1", "@x"]
    assert [console.csv_cell(c) for c in cells] == ["a", "'=cmd|' /C calc'!A0", "'-1", "'@x"]
    status, headers, body = client.get("/console/search-lots.zip?player=alice")
    assert status == 200 and headers["Content-Type"] == "application/zip"
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    assert any("/checkpoints/" in n for n in names) and any("/checkpoints/" not in n for n in names)
    status, _, body = client.get("/console/event/0099/2/8/proof.json")
    proof = json.loads(body)
    assert status == 200 and proof["type"] == "inclusion" and proof["id_evt"] == 8


def test_pages_show_the_record(client):
    status, _, body = client.get("/console/event/0099/1/1")
    page = body.decode()
    assert status == 200 and "CARD_DEALT_TWICE" in page and "HashChaine" in page and "&lt;POJEU" in page
    status, _, body = client.get("/console/hand/0099/1/1?round=0")
    page = body.decode()
    assert "Round 1 of 6" in page and "Next round" in page and "Pots, as they stand" in page
    assert "Who won what" not in page  # not before the end
    assert 'class="card ' not in page  # the blinds: no card dealt yet
    last = client.get("/console/hand/0099/1/1?round=99")[2].decode()
    assert "Round 6 of 6" in last and 'class="card ' in last and "Who won what" in last
    assert "could not replay this hand to its end" in last  # CARD_DEALT_TWICE: no pots shared
    player = client.get("/console/player?oper=0099&id=alice")[2].decode()
    assert "Balance of alice" in player and "<polyline" in player
    tech = client.get("/console/tech?oper=0099&id=T-42")[2].decode()
    assert "Chips after each hand of T-42" in tech and "<polyline" in tech
    overview = client.get("/console/")[2].decode()
    assert "verified to lot 6" in overview and "Every sealed lot is indexed" in overview


def test_every_page_is_in_the_access_log_with_who_asked(server, client):
    client.get("/console/search?player=alice&type=POJEU")
    Client(server.base).get("/console/event/0099/1/1")
    records = [
        json.loads(line)
        for log in sorted((server.data / "access").glob("*"))
        for line in log.read_text().splitlines()
        if line.strip()
    ]
    asked = [
        r
        for r in records
        if r.get("path") == "/console/search" and r.get("query") == "player=alice&type=POJEU"
    ]
    assert asked and asked[-1]["token"] == "inspector" and asked[-1]["status"] == 200
    anonymous = [r for r in records if r.get("path") == "/console/event/0099/1/1" and r.get("status") == 303]
    assert anonymous and anonymous[-1]["token"] is None
    logins = [r for r in records if r.get("path") == "/console/login" and r.get("method") == "POST"]
    assert any(r["auth"] == "token (console login)" and r["token"] == "inspector" for r in logins)
    assert asked[-1]["auth"] == "token (console session)"
    assert all(TOKEN not in json.dumps(r) for r in records)


def test_the_live_index_equals_a_rebuild_from_the_archive_alone(server, tmp_path):
    """What the API's thread indexed, lot by lot as it found them, is what a rebuild makes."""
    from coffre_regulator.event_index import EventSearch, rebuild

    trust = server.trust
    rebuilt = tmp_path / "rebuilt.sqlite"
    assert rebuild(rebuilt, LocalStorage(server.root), trust).events == 22
    live = list(EventSearch(server.settings.console_index_path).dump())
    assert live and live == list(EventSearch(rebuilt).dump())


def test_a_lot_changed_after_it_was_indexed_is_refused(server, client):
    lot = next(
        p
        for p in (server.root / "0099" / "2").rglob("0099-2-0000000004.xml")
        if p.parent.name != "checkpoints"
    )
    kept = lot.read_bytes()
    try:
        lot.write_bytes(kept.replace(b"<Evenements>", b"<Evenements> ", 1))
        status, _, body = client.get("/console/event/0099/2/14")
        assert status == 409 and b"not the lot the index verified" in body
    finally:
        lot.write_bytes(kept)


def test_a_page_says_when_it_shows_only_the_first_events(server, client, monkeypatch):
    for path in ("/console/player?oper=0099&id=alice", "/console/tech?oper=0099&id=T-42"):
        assert b"Only the first" not in client.get(path)[2]
    monkeypatch.setattr(console, "PAGE_LIMIT", 3)
    for path in ("/console/player?oper=0099&id=alice", "/console/tech?oper=0099&id=T-42"):
        page = client.get(path)[2].decode()
        assert "Only the first 3 events are shown here" in page


ALICE_HASH = "2BCB4AA8D6AB79E07EE9239852774C7CD7A88CF6"  # her POINSCRIT's HashJoueur (the demo's)


def _rows(page: str) -> list[str]:
    return re.findall(r'href="/console/event/(\d+/\d+/\d+)"', page)


def test_a_hash_typed_in_lower_case_finds_what_upper_case_finds(client):
    """issue 32: sha1sum prints lower-case hex; HashJoueur is stored upper-cased (types:sha1)."""
    upper = client.get(f"/console/search?hash={ALICE_HASH}")[2].decode()
    status, _, body = client.get(f"/console/search?hash={ALICE_HASH.lower()}")
    assert status == 200 and _rows(upper) and _rows(body.decode()) == _rows(upper)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("coffre=1&from_id=9&to_id=3", "from IDEvt 9 is after to IDEvt 3: no event is between"),
        ("since=2026-03-05&until=2026-03-01", "from 2026-03-05 is after to 2026-03-01: no event is between"),
    ],
)
def test_an_impossible_range_is_refused_saying_why(client, query, words):
    status, _, body = client.get(f"/console/search?{query}")
    assert status == 400 and words in html.unescape(body.decode())


def test_an_unknown_player_is_a_404_that_says_so_a_known_one_out_of_range_is_not(client):
    status, _, body = client.get("/console/player?oper=0099&id=nobody-at-all")
    assert (
        status == 404
        and "no event of player nobody-at-all of operator 0099 is in the index"
        in html.unescape(body.decode())
    )
    status, _, body = client.get("/console/player?oper=0099&id=alice&since=2001-01-01&until=2001-01-02")
    assert status == 200 and "alice" in body.decode()


def test_the_event_page_counts_its_place_in_the_lot_from_one(client):
    page = client.get("/console/event/0099/1/1")[2].decode()
    assert re.search(r"event 1 of \d+ in the lot", page), page


def test_the_proof_check_command_names_the_files_the_downloads_take(client, tmp_path):
    """issue 32: the event page printed `proof.json` and `checkpoint.xml`; the downloads are named
    otherwise. The command as printed, run in a folder holding the three downloads, checks the proof."""
    page = html.unescape(client.get("/console/event/0099/2/8")[2].decode())
    (command,) = re.findall(r"<code>(coffre proof --check [^<]+)</code>", page)
    for path in (
        "/console/event/0099/2/8/proof.json",
        "/console/coffre/0099/2/checkpoint.xml",
        "/console/certificates.pem",
    ):
        status, headers, body = client.get(path)
        (name,) = re.findall(r'filename="([^"]+)"', headers["Content-Disposition"])
        assert status == 200 and f" {name}" in command, (name, command)
        (tmp_path / name).write_bytes(body)
    run = subprocess.run(
        [sys.executable, "-m", "coffre.cli", *command.split()[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and "inclusion proof: OK" in run.stdout, (run.stdout, run.stderr)


def test_results_and_the_csv_give_finding_codes_not_counts(client):
    """issue 32: a row's findings were a count ("2"); an investigator reads codes."""
    page = html.unescape(client.get("/console/search?coffre=1&oper=0099&from_id=1&to_id=1")[2].decode())
    assert re.search(
        r'<a class="bad" href="/console/search\?finding=CARD_DEALT_TWICE">CARD_DEALT_TWICE</a>', page
    ), page
    status, _, body = client.get("/console/search.csv?coffre=1&oper=0099&from_id=1&to_id=1")
    header, first = list(csv.reader(io.StringIO(body.decode())))[:2]
    assert status == 200 and "CARD_DEALT_TWICE" in first[header.index("findings")].split(), first


def test_a_search_with_empty_fields_goes_to_its_clean_url(client):
    """issue 32: the form put every empty field in the URL; the same search comes at a URL with only
    the fields given."""
    status, headers, _ = client.get("/console/search?oper=&coffre=&player=alice&type=&text=+")
    assert status == 303 and headers["Location"] == "/console/search?player=alice"
    status, headers, _ = client.get("/console/search?oper=&player=")
    assert status == 303 and headers["Location"] == "/console/search"
    status, _, body = client.get("/console/search?player=alice")
    assert status == 200 and "alice" in body.decode()


def test_an_empty_index_says_events_wait_for_their_lot(tmp_path):
    """issue 32: for a minute after `coffre up` the console said "No coffre indexed yet" and no more."""
    (tmp_path / "built").mkdir()
    _, cert = build_archive(tmp_path / "built")
    (tmp_path / "empty").mkdir()
    served = ConsoleServer(tmp_path, tmp_path / "empty", cert, tokens=f"inspector:{TOKEN}\n")
    try:
        logged = Client(served.base)
        logged.login()
        page = html.unescape(logged.get("/console/")[2].decode())
        assert "No coffre indexed yet. An event appears here once the vault has sealed its lot" in page
        assert "COFFRE_LOT_MAX_AGE_SECONDS" in page
    finally:
        served.stop()


def test_the_event_xml_is_indented_for_reading(client):
    """issue 32: the sealed XML was one line; it reads indented, the same elements and texts."""
    page = client.get("/console/event/0099/1/1")[2].decode()
    (xml,) = re.findall(r'<pre class="xml"[^>]*>(.*?)</pre>', page, re.S)
    text = html.unescape(xml)
    assert text.startswith("<POJEU") and text.count("\n") > 20 and "\n  <" in text
    assert "indented for reading" in page


HTML_PAGES = (
    "/console/",
    "/console/search?player=alice",
    "/console/search",
    "/console/event/0099/1/1",
    "/console/hand/0099/1/1?round=1",
    "/console/player?oper=0099&id=alice",
    "/console/tech?oper=0099&id=T-42",
    "/console/no-such-page",
    "/console/search?from_id=9&to_id=2",
    "/console/rules",
    "/console/search?player=ali*",
    "/console/findings?oper=0099&since=2016-01-01",
    "/console/signals",
)


def _visible_text(body: bytes, language: str) -> str:
    """The page's text a reader sees in its language: without what is marked as in another
    (``lang``), the XML and code shown as recorded, and the operators' identifiers in links."""
    tree = lxml.html.fromstring(body)
    shown_as_recorded = ("pre", "code", "script", "style")
    for element in tree.xpath("//*[@lang] | //pre | //code | //script | //style"):
        other = element.get("lang") not in (None, language) or element.tag in shown_as_recorded
        if other and element is not tree and element.getparent() is not None:
            element.drop_tree()
    return " ".join(tree.text_content().split())


def test_pages_are_in_french_by_default_and_english_on_request(server):
    french, english = Client(server.base, language=""), Client(server.base, language="en-GB,en;q=0.8")
    for who in (french, english):
        assert who.login()[0] == 303
    status, headers, body = french.get("/console/")
    assert status == 200 and headers["Content-Language"] == "fr"
    assert b'<html lang="fr">' in body and "Vue d'ensemble" in html.unescape(body.decode())
    status, headers, body = english.get("/console/")
    assert headers["Content-Language"] == "en" and b'<html lang="en">' in body and b"Overview" in body
    status, _, body = french.get("/console/search?from_id=9&to_id=2")
    assert status == 400 and "l'IDEvt de début 9 est après l'IDEvt de fin 2" in html.unescape(body.decode())


def test_the_switch_keeps_the_language_and_the_clean_url(server):
    who = Client(server.base, language="en")
    who.login()
    status, headers, _ = who.get("/console/search?player=alice&lang=fr")
    assert status == 303 and headers["Location"] == "/console/search?player=alice"
    status, headers, body = who.get("/console/search?player=alice")  # the cookie, over Accept-Language
    assert headers["Content-Language"] == "fr" and b"Recherche" in body
    assert b'href="/console/search?player=alice&amp;lang=en"' in body  # the switch back, on this page
    assert who.get("/console/?lang=de")[0] == 400
    anonymous = Client(server.base, language="en")
    status, headers, _ = anonymous.get("/console/login?lang=fr")  # the login page too
    assert status == 303 and headers["Location"] == "/console/login"


@pytest.mark.parametrize("language", ["fr", "en"])
def test_no_page_mixes_its_language_with_the_other(server, language):
    from coffre_regulator import i18n

    who = Client(server.base, language=language)
    who.login()
    french = i18n.translations("fr")
    pairs = [
        (english, french.gettext(english))
        for path in i18n.catalogue_files("fr")
        for english in _msgids(path)
        if len(english.split()) >= 2 and french.gettext(english) != english
    ]
    assert len(pairs) > 80
    for page in HTML_PAGES:
        status, _, body = who.get(page)
        assert status in (200, 400, 404), page
        text = _visible_text(body, language)
        for english, translated in pairs:
            other, own = (english, translated) if language == "fr" else (translated, english)
            plain = re.split(r"%\(|\{", other, maxsplit=1)[0].strip(" :;,.(")
            if len(plain.split()) >= 2 and plain not in own:
                # the fixed words before the first field (unless both languages write them alike)
                assert plain not in text, f"{page} in {language} shows {plain!r}"


def _msgids(path):
    from babel.messages.pofile import read_po

    with path.open("rb") as po:
        return [m.id for m in read_po(po) if m.id and isinstance(m.id, str)]


def _link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}"', page)
    return html.unescape(found.group(1)) if found else None


def test_a_search_says_its_total_and_pages_back_and_forth(client, monkeypatch):
    """issue 32: totals, previous and next pages, and both orders, over HTTPS."""
    monkeypatch.setattr(console, "PAGE_SIZE", 5)
    first = client.get("/console/search?oper=0099&sort=-date")[2].decode()
    total = int(re.search(r"(\d+) event\(s\) match", first).group(1))
    seen, page, pages = [], first, [first]
    while (onward := _link(page, "next")) is not None:
        page = client.get(onward)[2].decode()
        pages.append(page)
    for one in pages:
        seen += _rows(one)
    assert len(seen) == len(set(seen)) == total > 10  # every match once, over more than two pages
    assert _link(first, "prev") is None
    back = client.get(_link(pages[1], "prev"))[2].decode()
    assert _rows(back) == _rows(first)
    oldest = client.get("/console/search?oper=0099&sort=date")[2].decode()
    assert _rows(oldest)[0] == seen[-1]  # the oldest first is the newest-first's last
    status, _, body = client.get("/console/search?player=alice&sort=id")
    assert status == 400 and "sorting by IDEvt needs a coffre" in body.decode()
    by_id = client.get("/console/search?oper=0099&coffre=2&sort=-id")[2].decode()
    numbers = [int(r.split("/")[2]) for r in _rows(by_id)]
    assert numbers == sorted(numbers, reverse=True) and numbers


def test_players_are_found_by_the_start_of_their_identifier_and_an_empty_result_says_so(client):
    body = html.unescape(client.get("/console/search?player=ali*")[2].decode())
    assert "IDJoueur starting with “ali”" in body
    assert re.search(r'href="/console/search\?player=alice"', body)
    assert "/console/player?id=alice" in body
    hashed = html.unescape(client.get(f"/console/search?hash={ALICE_HASH[:8].lower()}*")[2].decode())
    assert f"/console/search?hash={ALICE_HASH}" in hashed  # the hash's start in lower case, found
    nobody = html.unescape(client.get("/console/search?player=zz-nobody*")[2].decode())
    assert "No player's identifier starts with “zz-nobody”." in nobody
    empty = html.unescape(client.get("/console/search?player=alice&type=POBILAN&tech=no-such")[2].decode())
    assert "No event matches this search." in empty and "0 event(s) match" in empty


# -- findings as sentences, linked to the rules (issue 32) ------------------------------------------


def _french(meaning: str) -> str:
    with (console.i18n.LOCALE_DIR / "fr" / "LC_MESSAGES" / "findings.po").open("rb") as file:
        return {m.id: m.string for m in read_po(file) if m.id}[meaning]


def _seat_3_player() -> str:
    """The IDJoueur on seat 3 of the flagged hand (coffre 0099/1, IDEvt 1), read from the hand."""
    root = etree.fromstring(duplicated_card_hand())
    (player,) = [j.findtext("IDJoueur") for j in root.iter("Joueur") if j.findtext("Siege") == "3"]
    return player


def _findings_section(page: str) -> str:
    (section,) = re.findall(r'<section aria-labelledby="findings-h">(.*?)</section>', page, re.S)
    return section


def _sentence(section: str) -> str:
    """The section's text without tags, blanks collapsed: the sentence as read."""
    return " ".join(re.sub(r"<[^>]+>", "", section).split())


def test_an_event_finding_names_the_player_and_links_the_rules_it_breaks(client):
    """The flagged hand's CARD_DEALT_TWICE reads as a sentence: the seat and its player (from the
    hand's participants), the code's meaning (French by default), the audit's message, then every
    rule that code checks, with its article, linked to its row, and the rule's own words."""
    client.language = "fr"
    page = _findings_section(html.unescape(client.get("/console/event/0099/1/1")[2].decode()))
    player, meaning = _seat_3_player(), CODES["CARD_DEALT_TWICE"][1]
    said = _sentence(page)
    assert f"Siège 3 (IDJoueur {player}), tour preflop: {_french(meaning)}: card 32" in said, said
    assert f'<a href="/console/player?oper=0099&id={player}">{player}</a>' in page and meaning not in page
    broken = rules.rows_by_code()["CARD_DEALT_TWICE"]
    assert len(broken) > 1  # a code under several rows cites them all
    for row in broken:
        assert f'<a href="/console/rules#{row.id}">la règle {row.id}, {row.source}</a>' in page, row.id
        assert f"Enfreint la règle {row.id}, {row.source}, qui exige {row.quote}" in said, row.id
    assert "coffre vérifie" not in page  # a French page gives the rule's French words, not coffre's English
    rules_page = client.get("/console/rules")[2].decode()
    for anchor in [row.id for row in broken] + ["CARD_DEALT_TWICE"]:
        assert f'id="{anchor}"' in rules_page, anchor


def test_an_english_page_gives_the_english_meaning_and_what_coffre_checks(client):
    english = {"Accept-Language": "en-GB,en;q=0.9,fr;q=0.8"}
    page = _findings_section(
        html.unescape(client.get("/console/event/0099/1/1", headers=english)[2].decode())
    )
    assert CODES["CARD_DEALT_TWICE"][1] in page
    c5 = {row.id: row for row in rules.rows()}["C5"]
    assert "coffre checks: " in page and "dealt once" in c5.checks and "dealt once" in page
    french = {"Accept-Language": "en;q=0.5, fr"}
    page = _findings_section(html.unescape(client.get("/console/event/0099/1/1", headers=french)[2].decode()))
    assert _french(CODES["CARD_DEALT_TWICE"][1]) in page


def test_the_hand_player_and_tech_pages_give_the_same_sentence(client):
    player = _seat_3_player()
    who = f"Seat 3 (IDJoueur {player}), round preflop"
    hand = html.unescape(client.get("/console/hand/0099/1/1")[2].decode())
    (tech,) = etree.fromstring(duplicated_card_hand()).iter("Tech")
    pages = [
        _findings_section(hand),
        _findings_section(html.unescape(client.get(f"/console/player?oper=0099&id={player}")[2].decode())),
        _findings_section(html.unescape(client.get(f"/console/tech?oper=0099&id={tech.text}")[2].decode())),
    ]
    for page in pages:
        assert who in _sentence(page) and '<a href="/console/rules#C5">rule C5, décret art. 2</a>' in page, (
            page
        )


def test_the_rules_page_has_an_anchor_per_rule_and_per_code(client):
    status, _, body = client.get("/console/rules")
    page = body.decode()
    assert status == 200
    ids = re.findall(r'<tr id="([^"]+)">', page)
    assert ids[: len(rules.rows_by_code())] == sorted(rules.rows_by_code())
    assert ids[len(rules.rows_by_code()) :] == [row.id for row in rules.rows()]
    text = html.unescape(page)
    c2b = {row.id: row for row in rules.rows()}["C2b"]
    assert c2b.rule == "(same)" and c2b.quote in text.split('<tr id="C2b">')[1].split("</tr>")[0]
    # a code span of the table is a <code>, a finding code in it a link to its row of codes
    assert (
        '<a href="/console/rules#TOO_FEW_OCCURRENCES">' not in page
        and "<code>TOO_FEW_OCCURRENCES</code>" in page
    )
    assert '<a href="/console/rules#CARD_DEALT_TWICE"><code>CARD_DEALT_TWICE</code></a>' in page


def test_a_rules_cell_is_escaped_and_its_markdown_read():
    cell = str(
        console.rule_cell("**not** *checked*: `CARD_DEALT_TWICE` and `<b>` [docs](x.md) <i> 1.3.6.c.* (x)")
    )
    assert cell == (
        '<strong>not</strong> <em>checked</em>: <a href="/console/rules#CARD_DEALT_TWICE">'
        "<code>CARD_DEALT_TWICE</code></a> and <code>&lt;b&gt;</code> docs &lt;i&gt; 1.3.6.c.* (x)"
    )
    assert "<a " not in str(console.rule_cell("`CARD_DEALT_TWICE`", link_codes=False))


@pytest.mark.parametrize(
    ("header", "language"),
    [
        (None, "fr"),
        ("en-US,en;q=0.9", "en"),
        ("fr-FR,fr;q=0.9,en;q=0.8", "fr"),
        ("de-DE,en;q=0.7,fr;q=0.5", "en"),
        ("de, es", "fr"),
        ("en;q=0, fr;q=0.1", "fr"),
        ("en;q=nonsense", "fr"),
    ],
)
def test_the_page_language_follows_accept_language(header, language):
    from aiohttp.test_utils import make_mocked_request

    request = make_mocked_request("GET", "/console/", headers={"Accept-Language": header} if header else {})
    assert console.language(request) == language


def test_a_seat_is_named_as_the_findings_name_it():
    from decimal import Decimal

    assert [console.seat_key(s) for s in (3, "3", Decimal("3.0"), "3.5", "x")] == ["3", "3", "3", "3.5", "x"]


# -- the findings page (issue 32) -----------------------------------------------------------------------


def flagged_hand(date: str, oper: str, *, card: bool = False, two_seats: bool = False) -> bytes:
    """The annex's hand of IDOper ``oper`` at DateEvt ``date`` (YYMMDDhhmmss): with a card dealt twice
    (CARD_DEALT_TWICE), with seat 7's player on seat 8 too (PLAYER_ON_TWO_SEATS), or clean."""
    raw = duplicated_card_hand("000-test-001" if two_seats else None) if card else ANNEX_POJEU.read_bytes()
    if two_seats and not card:
        raw = raw.replace(b"<IDJoueur>999-test-999</IDJoueur>", b"<IDJoueur>000-test-001</IDJoueur>")
    raw = raw.replace(b"<DateEvt>160101001000</DateEvt>", f"<DateEvt>{date}</DateEvt>".encode(), 1)
    return raw.replace(b"<IDOper>0099</IDOper>", f"<IDOper>{oper}</IDOper>".encode(), 1)


@pytest.fixture(scope="module")
def findings_server(tmp_path_factory):
    """Two operators, two finding codes (one event with both), over four months."""
    tmp = tmp_path_factory.mktemp("findings")
    root, cert = seal_archive(
        tmp,
        {
            ("0099", 1): normalized(
                [
                    flagged_hand("260301100000", "0099", card=True),
                    flagged_hand("260301110000", "0099"),
                    flagged_hand("260302090000", "0099", card=True, two_seats=True),
                    flagged_hand("260305120000", "0099", two_seats=True),
                ]
            ),
            ("0123", 1): normalized(
                [
                    flagged_hand("260302150000", "0123", card=True),
                    flagged_hand("260620080000", "0123", two_seats=True),
                ]
            ),
        },
    )
    served = ConsoleServer(tmp, root, cert, tokens=f"inspector:{TOKEN}\n")
    yield served
    served.stop()


def indexed(server) -> list:
    """Every event of the console's index with its finding codes, as its search gives them."""
    from coffre_regulator.event_index import EventSearch, Query

    return list(EventSearch(server.settings.console_index_path).export_rows(Query()))


def events_of(rows, code: str, oper: str | None, since: str | None, until: str | None) -> set:
    """(IDOper, IDCoffre, IDEvt) of the events with finding ``code``, of ``oper``, between the days."""
    return {
        (r.oper, str(r.coffre), str(r.id_evt))
        for r in rows
        if code in r.codes
        and oper in (None, r.oper)
        and (since is None or r.at[:10] >= since)
        and (until is None or r.at[:10] <= until)
    }


def searched(client: Client, href: str) -> set:
    """What the search a link leads to lists: every event of its CSV export (all its pages)."""
    path, _, query = href.partition("?")
    assert path == "/console/search", href
    status, _, body = client.get(f"/console/search.csv?{query}")
    assert status == 200, (href, body[:300])
    return {(r["IDOper"], r["IDCoffre"], r["IDEvt"]) for r in csv.DictReader(io.StringIO(body.decode()))}


def check_findings_page(client: Client, rows: list, filters: dict[str, str]) -> dict[str, object]:
    """The page's counts are the index's, and each count's link searches exactly the events counted."""
    from lxml import html as lxml_html

    status, _, body = client.get("/console/findings?" + urllib.parse.urlencode(filters))
    assert status == 200, body[:300]
    page = lxml_html.fromstring(body)
    oper, since, until = filters.get("oper"), filters.get("since"), filters.get("until")
    codes = sorted({c for r in rows for c in r.codes if events_of(rows, c, oper, since, until)})
    links = 0

    def check(link, wanted: set) -> None:
        nonlocal links
        assert int(link.text) == len(wanted) > 0, (link.get("href"), wanted)
        assert searched(client, link.get("href")) == wanted, link.get("href")
        links += 1

    if not codes:
        assert "No event with a finding here." in page.text_content() and not page.xpath("//table")
        return {"page": page, "links": 0, "monthly": False, "codes": codes}
    per_code = page.xpath("//table[@class='per-code']/tbody/tr")
    assert [tr.xpath("string(th)") for tr in per_code] == codes
    for tr in per_code:
        code = tr.xpath("string(th)")
        wanted = events_of(rows, code, oper, since, until)
        check(tr.xpath(".//a[@class='count']")[0], wanted)
        ats = sorted(r.at for r in rows if (r.oper, str(r.coffre), str(r.id_evt)) in wanted)
        english = console.i18n.Language("en")  # the client asks for English pages
        assert [td.text for td in tr.xpath("td")][2:] == [english.when(ats[0]), english.when(ats[-1])]
    header = [th.xpath("string()") for th in page.xpath("//table[@class='per-oper']/thead/tr/th")]
    assert header == ["IDOper", *codes]
    opers = sorted(
        {
            r.oper
            for r in rows
            if oper in (None, r.oper) and any(events_of(rows, c, r.oper, since, until) for c in codes)
        }
    )
    matrix = page.xpath("//table[@class='per-oper']/tbody/tr")
    assert [tr.xpath("string(th)") for tr in matrix] == opers
    for tr in matrix:
        for code, td in zip(codes, tr.xpath("td"), strict=True):
            wanted = events_of(rows, code, tr.xpath("string(th)"), since, until)
            if wanted:
                check(td.xpath("a[@class='count']")[0], wanted)
            else:
                assert td.text == "0" and not td.xpath("a")
    over_time = page.xpath("//table[@class='over-time']/tbody/tr")
    monthly = "Month (of DateEvt, UTC)" in page.xpath("string(//table[@class='over-time']/thead)")
    seen = 0
    for tr in over_time:
        when, code = tr.xpath("string(th/time/@datetime)"), tr.xpath("string(td/code)")
        first, last = (f"{when}-01", f"{when}-31") if monthly else (when, when)
        wanted = events_of(rows, code, oper, max(first, since or first), min(last, until or last))
        check(tr.xpath(".//a[@class='count']")[0], wanted)
        seen += len(wanted)
    assert seen == sum(len(events_of(rows, c, oper, since, until)) for c in codes)
    return {"page": page, "links": links, "monthly": monthly, "codes": codes}


def test_the_findings_page_of_the_demo_counts_what_the_index_holds(client, server):
    rows = indexed(server)
    found = check_findings_page(client, rows, {})
    assert found["codes"] == ["CARD_DEALT_TWICE"] and found["links"] == 3
    assert check_findings_page(client, rows, {"since": "2026-01-01"})["codes"] == []
    # the console's navigation leads there
    assert b'href="/console/findings"' in client.get("/console/search")[2]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"oper": "0123"},
        {"since": "2026-03-01", "until": "2026-03-31"},
        {"oper": "0099", "since": "2026-03-02", "until": "2026-03-05"},
        {"until": "2026-03-02"},
    ],
)
def test_the_findings_page_counts_what_the_index_holds_and_links_to_those_events(findings_server, filters):
    client = Client(findings_server.base)
    client.login()
    rows = indexed(findings_server)
    assert sum(len(r.codes) for r in rows) == 6  # the fixture's findings, each counted somewhere
    found = check_findings_page(client, rows, filters)
    assert found["links"] > 0


def test_the_findings_page_is_per_day_or_per_month_as_the_span_asks(findings_server):
    client = Client(findings_server.base)
    client.login()
    rows = indexed(findings_server)
    whole = check_findings_page(client, rows, {})  # 2026-03-01 to 2026-06-20: per month
    assert whole["monthly"]
    months = [tr.xpath("string(th)") for tr in whole["page"].xpath("//table[@class='over-time']/tbody/tr")]
    assert months == ["2026-03", "2026-03", "2026-06"]
    from lxml import etree

    (svg,) = whole["page"].xpath("//figure/*[local-name()='svg']")
    plot = etree.fromstring(lxml_html_tostring(svg))
    assert plot.findtext("{*}title") == "Events with findings per code per month"
    tips = [c.findtext("{*}title") for c in plot.iter("{*}circle")]
    assert (
        "CARD_DEALT_TWICE · 2026-03 (UTC) · 3" in tips and "PLAYER_ON_TWO_SEATS · 2026-05 (UTC) · 0" in tips
    )
    march = check_findings_page(client, rows, {"since": "2026-03-01", "until": "2026-03-31"})
    assert not march["monthly"]
    (svg,) = march["page"].xpath("//figure/*[local-name()='svg']")
    plot = etree.fromstring(lxml_html_tostring(svg))
    tips = [c.findtext("{*}title") for c in plot.iter("{*}circle")]
    assert len(tips) == 2 * 5  # two codes, every day from 2026-03-01 to 2026-03-05
    assert "PLAYER_ON_TWO_SEATS · 2026-03-03 (UTC) · 0" in tips
    x_label = [t.text for t in plot.iter("{*}text") if t.get("class") == "x-label"]
    assert x_label == ["date (UTC), 2026-03-01 to 2026-03-05"]


def lxml_html_tostring(element) -> bytes:
    from lxml import html as lxml_html

    return lxml_html.tostring(element)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("since=2026-03-05&until=2026-03-01", "from 2026-03-05 is after to 2026-03-01: no event is between"),
        ("oper=12", "IDOper must be 4 digits"),
        ("since=yesterday", "from: a date (YYYY-MM-DD)"),
    ],
)
def test_the_findings_page_refuses_filters_it_cannot_read(client, query, words):
    status, _, body = client.get(f"/console/findings?{query}")
    assert status == 400 and words in html.unescape(body.decode())


def test_the_overviews_plots_run_over_the_data_in_utc(client):
    """issue 32: the overview's findings plot ran from 2016 to 2026 for a few findings, its days
    without findings drawn as holding the day before's count."""
    from lxml import etree
    from lxml import html as lxml_html

    page = lxml_html.fromstring(client.get("/console/")[2])
    plots = [etree.fromstring(lxml_html.tostring(s)) for s in page.xpath("//figure/*[local-name()='svg']")]
    labels = {
        p.findtext("{*}title"): [t.text for t in p.iter("{*}text") if t.get("class") == "x-label"]
        for p in plots
    }
    assert labels == {
        "Lots sealed per day": ["date (UTC), 2026-03-02 to 2026-03-04"],
        "Events with findings per code per day": ["date (UTC), 2016-01-01"],
    }
    lots = [c.findtext("{*}title") for c in plots[0].iter("{*}circle")]
    assert lots == [
        "lots sealed · 2026-03-02 (UTC) · 3",
        "lots sealed · 2026-03-03 (UTC) · 2",
        "lots sealed · 2026-03-04 (UTC) · 2",
    ]


def test_counts_over_time_fill_the_days_or_months_without_any_with_zero():
    series, bucket = console._counts_over_time(
        [("2026-03-01", "A", 2), ("2026-03-04", "A", 1), ("2026-03-02", "B", 5)]
    )
    assert bucket == "day"
    assert {s.label: [(w.date().isoformat(), int(v)) for w, v in s.points] for s in series} == {
        "A": [("2026-03-01", 2), ("2026-03-02", 0), ("2026-03-03", 0), ("2026-03-04", 1)],
        "B": [("2026-03-01", 0), ("2026-03-02", 5), ("2026-03-03", 0), ("2026-03-04", 0)],
    }
    series, bucket = console._counts_over_time(
        [("2016-01-01", "A", 1), ("2016-01-20", "A", 2), ("2016-04-03", "A", 4)]
    )
    assert bucket == "month"  # per day when 92 days apart at most: these are 93
    assert [(w.date().isoformat(), int(v)) for w, v in series[0].points] == [
        ("2016-01-01", 3),
        ("2016-02-01", 0),
        ("2016-03-01", 0),
        ("2016-04-01", 4),
    ]
    assert console._counts_over_time([("2016-01-01", "A", 1), ("2016-04-01", "A", 1)])[1] == "day"
    assert console._counts_over_time([("2026-03", "A", 1)])[1] == "month"
    assert console._counts_over_time([]) == ([], "day")


def test_the_hand_page_takes_its_labels_and_card_ranks_from_its_language():
    """Issue 32: every label of the hand page goes through the page's translation, and the card
    ranks are the language's own labels (a French page shows R, D, V, never K, Q, J beside French
    words). Rendered with a translation that brackets every label, the page's own text holds no
    word that is neither bracketed nor the hand's data."""
    import types

    from lxml import html as lxml_html
    from test_hand_picture import side_pot_hand

    from coffre.domain.audit.engine import rules_of
    from coffre.domain.normalize import normalize
    from coffre.hand_picture import hand_view

    holder = types.SimpleNamespace()
    console.Console.__post_init__(holder)  # the console's own Jinja environment
    french_ranks = {"J": "V", "Q": "D", "K": "R", "A": "A", "D": "B"}
    environment = holder.templates["en"]
    environment.install_gettext_callables(
        gettext=lambda s: f"‹{s}›",
        ngettext=lambda s, p, n: f"‹{s if n == 1 else p}›",
        pgettext=lambda context, s: french_ranks[s],
        npgettext=lambda context, s, p, n: f"‹{s if n == 1 else p}›",
        newstyle=True,
    )
    event = normalize(json.dumps(side_pot_hand()).encode())
    row = types.SimpleNamespace(oper="0099", coffre=1, id_evt=1, tech="T-1", pool="1", at="2026-01-01")
    rounds = [t.name for t in event.Jeu.Tour]
    for step in (2, None):
        page = environment.get_template("hand.html").render(
            title="Hand",
            lang="en",
            switch={"fr": "?lang=fr", "en": "?lang=en"},
            seats={},
            row=row,
            event=event,
            findings=[],
            view=hand_view(event, (), until_round=step),
            kind=rules_of(event.Regle).kind,
            rounds=rounds,
            step=step,
        )
        document = lxml_html.fromstring(page)
        main = document.xpath("//main")[0]
        ranks = {r.text_content() for r in main.xpath(".//span[@class='rank']")}
        assert "R" in ranks and not ranks & {"J", "Q", "K"}, ranks
        for section in main.xpath(".//section[not(@aria-labelledby='findings-h')] | .//nav | ./p"):
            text = section.text_content()
            while re.search(r"‹[^‹›]*›", text):  # labels, innermost first (a label's words in a label)
                text = re.sub(r"‹[^‹›]*›", " ", text)
            data = {
                *rounds,
                "j1",
                "j2",
                "j3",
                "T-1",
                "Texas",
                "Hold'em",
                "No",
                "Limit",
                *re.findall(r"[A-Za-z]+", console.i18n.Language("en").when(row.at)),  # the date, as written
                "R",
                "V",
                "D",
                "A",
                "B",
            }
            words = set(re.findall(r"[A-Za-z][A-Za-z0-9'-]*", text)) - data
            assert not words, (step, words)


def test_a_checkpoints_cosignature_and_token_download_as_archived(server, client):
    """issue 32: the witness's cosignature (and a TSA's token) of the newest checkpoint, linked from
    the overview, downloads byte for byte, named as the archive names it; the cosignature verifies
    with the witness's key over the checkpoint downloaded beside it."""
    from coffre.domain import witness
    from coffre.domain.evidence import cosignature_key, timestamp_key

    checkpoints = sorted((server.root / "0099" / "2" / "checkpoints").glob("0099-2-*.xml"))
    number = int(checkpoints[-1].stem.rsplit("-", 1)[1])
    document = checkpoints[-1].read_bytes()
    body = witness.note_body(witness.open_checkpoint(document, server.trust))
    signer = witness.WitnessKey.generate("witness.anj.example")
    note = body + b"\n" + signer.cosign(body, 1_790_000_000)
    storage = LocalStorage(server.root)
    storage.create(cosignature_key("0099", 2, number, signer.name), note)
    storage.create(timestamp_key("0099", 2, number, "tsa.example"), b"\x30\x03\x02\x01\x00")
    here = f"/console/coffre/0099/2/{number}"
    overview = client.get("/console/")[2].decode()
    assert f'href="{here}/witness/witness.anj.example"' in overview
    assert f'href="{here}/tsa/tsa.example"' in overview
    status, headers, cosignature = client.get(f"{here}/witness/witness.anj.example")
    assert status == 200 and cosignature == note
    assert (
        headers["Content-Disposition"]
        == f'attachment; filename="0099-2-{number:010d}.witness-witness.anj.example.cosig"'
    )
    status, _, checkpoint = client.get(f"{here}/checkpoint.xml")
    assert status == 200 and checkpoint == document
    downloaded = witness.note_body(witness.open_checkpoint(checkpoint, server.trust))
    assert witness.cosigned_by(cosignature, downloaded, signer.private.public_key()).name == signer.name
    assert client.get(f"{here}/tsa/tsa.example")[2] == b"\x30\x03\x02\x01\x00"
    assert client.get(f"{here}/witness/nobody")[0] == 404
    assert client.get(f"{here}/witness/..%2F..%2Fsecret")[0] in (400, 404)
    assert client.get(f"{here}/other/witness.anj.example")[0] == 404


def test_the_player_page_gives_each_hands_net_and_totals_per_tech(server, client):
    """issue 32: a Net per hand, and totals of the period (hands, won, lost and net per Tech, never
    added across Techs: a tournament's chips are not money) equal to the index's own figures."""
    search = server.runner.app[console._CONSOLE].search
    parties = [p for p in search.player_parties("alice", None, None, 5000) if p.oper == "0099"]
    hands = [p for p in parties if p.type == "POJEU"]
    assert hands, "the demo's alice plays hands"
    page = lxml.html.fromstring(client.get("/console/player?oper=0099&id=alice")[2])
    table = page.xpath("//section[@aria-labelledby='hands-h']//tbody/tr")
    assert len(table) == len(hands)
    nets = [tr.xpath("string(td[6])").strip() for tr in table]
    english = console.i18n.Language("en")
    expected = [("+" if p.after > p.before else "") + english.number(p.after - p.before) for p in hands]
    assert nets == expected
    rows = page.xpath("//table[@class='per-tech']/tbody/tr")
    techs = sorted({p.tech for p in hands})
    assert [tr.xpath("string(td[1])") for tr in rows] == techs
    for tr, tech in zip(rows, techs, strict=True):
        mine = [p.after - p.before for p in hands if p.tech == tech]
        cells = [td.text_content().strip() for td in tr.xpath("td")]
        total = sum(mine)
        assert cells[2:] == [
            str(len(mine)),
            str(sum(n > 0 for n in mine)),
            str(sum(n < 0 for n in mine)),
            ("+" if total > 0 else "") + english.number(total),
        ]
    facts = dict(
        zip(
            page.xpath("//section[@aria-labelledby='totals-h']//dt/text()"),
            [dd.text_content() for dd in page.xpath("//section[@aria-labelledby='totals-h']//dd")],
            strict=True,
        )
    )
    assert facts["Hands"] == str(len(hands))
    assert facts["Registrations"] == str(sum(p.type == "POINSCRIT" for p in parties))


def test_the_player_page_lists_the_addresses_and_sessions_of_the_period(server, client):
    """issue 32: the IPs a player's events came from, with their sessions, counted from the index."""
    search = server.runner.app[console._CONSOLE].search
    parties = [p for p in search.player_parties("alice", None, None, 5000) if p.oper == "0099"]
    expected: dict[str, list] = {}
    for p in parties:
        if p.ip is not None:
            seen = expected.setdefault(p.ip, [0, []])
            seen[0] += 1
            if p.session is not None and p.session not in seen[1]:
                seen[1].append(p.session)
    assert expected and any(sessions for _, sessions in expected.values())
    page = lxml.html.fromstring(client.get("/console/player?oper=0099&id=alice")[2])
    shown = {
        tr.xpath("string(td[1])"): [int(tr.xpath("string(td[2])")), tr.xpath("td[5]/code/text()")]
        for tr in page.xpath("//table[@class='addresses']/tbody/tr")
    }
    assert shown == expected


def test_the_tech_page_gives_each_hands_game_and_each_results_place_and_amount(server, client):
    """issue 32: a table may change game between hands (its Regle per hand); a tournament's results
    give each player's place and amount, as the index holds them."""
    search = server.runner.app[console._CONSOLE].search
    from coffre_regulator.event_index import Query

    techs = {r.tech for r in search.search(Query(oper="0099"), page_size=1000).rows if r.tech}
    checked_games = checked_places = 0
    for tech in sorted(techs):
        page = lxml.html.fromstring(client.get(f"/console/tech?oper=0099&id={tech}")[2])
        events = {(r.coffre, r.id_evt): r for r, _ in search.tech_events(tech)}
        for tr in page.xpath("//section[@aria-labelledby='hands-h']//tbody/tr[td[2]/a]"):
            coffre, id_evt = tr.xpath("string(td[2]/a)").split("/")
            assert tr.xpath("string(td[3])") == (events[(int(coffre), int(id_evt))].game or "")
            checked_games += 1
        parties = {(p.id_evt, p.player): p for p in search.tech_results(tech)}
        for tr in page.xpath("//table[@class='results-of-tech']/tbody/tr[td[3]/a]"):
            id_evt = int(tr.xpath("string(td[2]/a)").split("/")[-1])
            party = parties[(id_evt, tr.xpath("string(td[3]/a)"))]
            assert tr.xpath("string(td[4])") == ("" if party.place is None else str(party.place))
            if party.place is not None:
                checked_places += 1
            if party.before is not None and party.after is not None:
                net = party.after - party.before
                assert tr.xpath("string(td[5])") == ("+" if net > 0 else "") + console.i18n.Language(
                    "en"
                ).number(net)
    assert checked_games > 0 and checked_places > 0


PARTNER = 'bob<b>"&'
"""The IDJoueur of the player who shares ana's IPJoueur at coffre 0099/5 (escaped wherever shown)."""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def signals_server(request, tmp_path_factory):
    """Two operators' tables where two players play from one IPJoueur and one person holds two
    accounts (tests/signal_events.py): four alerts, on both backends. The index saves the signals'
    state at the end of its first pass."""
    tmp = tmp_path_factory.mktemp("signals")
    root, cert = seal_archive(
        tmp,
        {
            ("0099", 5): normalized(signal_events("0099", 5, partner=PARTNER)),
            ("0123", 1): normalized(signal_events("0123", 1, seed=7, person="B" * 40)),
        },
    )
    settings = {}
    if request.param == "postgresql":
        settings["console_index"] = request.getfixturevalue("postgres_server").create_database("signals")
    with signals_saved_at_each_pass():
        served = ConsoleServer(tmp, root, cert, tokens=f"inspector:{TOKEN}\n", **settings)
    yield served
    served.stop()


def _signals_client(server, language: str = "en") -> Client:
    who = Client(server.base, language=language)
    assert who.login()[0] == 303
    return who


def _subjects(page: bytes, section: str) -> list:
    tree = lxml.html.fromstring(page)
    return tree.xpath(f"//section[@aria-labelledby='{section}-h']//article[@class='subject']")


def test_the_signals_page_ranks_the_alerts_with_the_events_behind_them(signals_server):
    who = _signals_client(signals_server)
    status, headers, body = who.get("/console/signals")
    assert status == 200 and headers["Content-Security-Policy"] == console.CSP
    page = body.decode()
    assert "<b>bob" not in page and "bob&lt;b&gt;&#34;&amp;" in page  # the IDJoueur escaped
    alerts = _subjects(body, "alerts")
    assert [" ".join(a.find("h3").text_content().split()) for a in alerts] == [
        f"1. pair 0099/ana & 0099/{PARTNER}: 1 of 2 signal(s) crossed",  # 4 hands from one IPJoueur
        "2. pair 0123/ana & 0123/bob: 1 of 2 signal(s) crossed",
        "3. pair 0099/ana & 0099/ana-2: 1 of 1 signal(s) crossed",  # 2 IDJoueur, 1 HashJoueur
        "4. pair 0123/ana & 0123/ana-2: 1 of 1 signal(s) crossed",
    ]
    shared = next(a for a in alerts if PARTNER in a.find("h3").text_content())
    (signal,) = shared.xpath(".//div[@class='signal crossed']")
    assert "shared_ip" in signal.find("h4").text_content()
    assert " ".join(signal.xpath("p")[0].text_content().split()) == "Score 4, threshold at least 1 — crossed"
    detail = signal.xpath("p[@class='detail']")[0]
    assert detail.get("lang") == "en" and detail.text_content() == (
        f"4 hand(s) or registration(s) of 0099/ana and 0099/{PARTNER} from one IPJoueur"
    )
    assert "Yampolskiy" in signal.xpath(".//p[@class='source']/span[@lang='en']")[0].text_content()
    links = [a.get("href") for a in signal.iter("a")]
    for id_evt in (3, 4, 5, 6):  # the four hands, each: its event, the hand, the proof
        base = f"/console/event/0099/5/{id_evt}"
        assert {base, f"/console/hand/0099/5/{id_evt}", f"{base}/proof.json"} <= set(links)
    players = [a.get("href") for a in shared.find("h3").iter("a")]
    assert players == [
        "/console/player?oper=0099&id=ana",
        "/console/player?oper=0099&id=bob%3Cb%3E%22%26",
    ]
    for link in ("/console/event/0099/5/3", "/console/hand/0099/5/3", players[1]):
        status, _, shown = who.get(link)
        assert status == 200 and b"bob&lt;b&gt;" in shown and PARTNER.encode() not in shown, link
    status, headers, proof = who.get("/console/event/0099/5/3/proof.json")
    assert status == 200 and json.loads(proof)["type"] == "inclusion" and json.loads(proof)["id_evt"] == 3
    same_hash = next(a for a in alerts if "0123/ana-2" in a.find("h3").text_content())
    deposit = [a.get("href") for a in same_hash.iter("a") if "/event/" in a.get("href")]
    assert deposit == ["/console/event/0123/1/2", "/console/event/0123/1/2/proof.json"]  # not a hand
    assert _subjects(body, "near")  # the players' own statistics, under their thresholds


def test_the_signals_page_by_operator_and_in_french(signals_server):
    who = _signals_client(signals_server)
    status, _, body = who.get("/console/signals?oper=0123")
    alerts = _subjects(body, "alerts")
    assert status == 200 and len(alerts) == 2
    assert all("0123/" in a.find("h3").text_content() and "0099/" not in a.text_content() for a in alerts)
    assert who.get("/console/signals?oper=../x")[0] == 400
    french = _signals_client(signals_server, language="fr")
    status, headers, body = french.get("/console/signals")
    page = html.unescape(body.decode())
    assert headers["Content-Language"] == "fr" and "<h1>Signaux</h1>" in page
    assert "Un signal est une raison de regarder, pas un constat." in page
    alerts = _subjects(body, "alerts")
    assert len(alerts) == 4 and "1 signal(s) franchi(s) sur 2" in alerts[0].find("h3").text_content()
    assert lxml.html.fromstring(body).xpath("//p[@class='detail']/@lang") == ["en"] * len(
        lxml.html.fromstring(body).xpath("//p[@class='detail']")
    )


def test_the_signals_are_evaluated_once_per_saved_state(signals_server):
    shown = signals_server.runner.app[console._CONSOLE]
    first = shown.signals_view()
    assert first is not None and first.events == 12 and first.hands == 8
    assert shown.signals_view() is first  # the same state saved: not evaluated again
