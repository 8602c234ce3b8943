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
import urllib.request

import pytest
from coffre_regulator import console

from coffre.adapters.storage import LocalStorage

from audit_hands import build_archive
from console_server import ConsoleServer

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

    def __init__(self, base: str) -> None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        self.base, self.jar = base, http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPCookieProcessor(self.jar),
            NoRedirect,
        )

    def get(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None):
        request = urllib.request.Request(self.base + path, data=data, headers=headers or {})
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
    assert "Round 1 of 6" in page and "Next round" in page and "<svg" in page
    last = client.get("/console/hand/0099/1/1?round=99")[2].decode()
    assert "Round 6 of 6" in last
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
