"""The regulator's console: the archive searched and shown in a browser (docs/console.md).

Served by the regulator API itself, under ``/console/``: the same TLS listener, the same
authentication (a client certificate, or a bearer token given once on the login page and kept
server-side behind an HttpOnly, SameSite=Strict session cookie), the same access log (every page
and every search, with who asked). Read-only: the only POSTs are the login and the logout, and
nothing is written to the archive.

Pages are rendered on the server with Jinja2 (autoescaped: every operator's text is escaped), with
no script and no external asset; pictures (balances, chip counts) are inline SVG, a hand is
HTML drawn from :func:`coffre.hand_picture.hand_view` (round by round: pots, stacks, cards); the
Content-Security-Policy forbids anything else. Searches read the console's index
(:mod:`.event_index`); an event's bytes come from its lot in the archive, whose SHA-256 must still
be the one the index verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import functools
import hashlib
import io
import json
import re
import secrets
import threading
import time
import zipfile
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as day_time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import coffre_auditor.join  # noqa: F401  registers AUDIT_FAILED, a code the index writes too
import jinja2
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from lxml import etree
from markupsafe import Markup, escape

from coffre.adapters.storage import ArchiveStorage, ObjectMissing
from coffre.domain.audit import rules as rule_table
from coffre.domain.audit.engine import rules_of as variant_rules
from coffre.domain.audit.findings import CODES, Finding
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.codec import read_xml
from coffre.domain.errors import Rejected
from coffre.domain.lot import LotEvent, checkpoint_key, parse_document, read_lot
from coffre.domain.normalize import normalize
from coffre.domain.signals.scores import SOURCES, Signal, Subject, Thresholds, evaluate
from coffre.hand_picture import hand_view
from coffre.plots import Series, line_plot

from . import i18n
from .archive_index import (
    EVIDENCE_KINDS,
    ArchiveIndex,
    ArchiveQueryError,
    parse_coffre,
    parse_evidence_label,
    parse_number,
    parse_oper,
)
from .event_index import (
    CHOICE_LIMIT,
    PAGE_LIMIT,
    PAGE_SIZE,
    SCAN_WINDOW,
    SORTS,
    EventRow,
    EventSearch,
    IndexQueryError,
    IndexThread,
    LotRow,
    Query,
    unstamp,
)
from .i18n import N_, Message

PREFIX = "/console"
COOKIE = "__Host-coffre-console"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 1000
MAX_EXPORT_LOTS = 200
"""Lots in one signed-lots export (a zip); a search that needs more says so."""
MAX_FIELD = 200
"""Characters of one search field."""
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
PUBLIC_PATHS = frozenset({f"{PREFIX}/login", f"{PREFIX}/static/console.css"})
"""What a client without credentials may fetch: the login page and its stylesheet."""
POST_PATHS = frozenset({f"{PREFIX}/login", f"{PREFIX}/logout"})
SEARCH_FIELDS = (
    "oper",
    "coffre",
    "from_id",
    "to_id",
    "since",
    "until",
    "type",
    "player",
    "hash",
    "tech",
    "pool",
    "inscription",
    "finding",
    "text",
)
DAY_BUCKETS = 92
"""Counts over time are drawn per day when their days span at most this many days, else per month."""
QUERY_PARAMETERS = frozenset((*SEARCH_FIELDS, "after", "before", "sort", "round", "id", "lang"))
"""The console's query parameters: none holds a secret, the access log keeps their values."""

_HERE = Path(__file__).parent


# -- sessions -----------------------------------------------------------------------------------------


class Sessions:
    """Logged-in browsers: a random session id (the cookie) -> the token it logged in with, kept in
    memory only. Each request authenticates that token again (a token removed from the tokens file
    ends its sessions at once); a session ends after ``SESSION_SECONDS`` or at logout."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def open(self, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[sid] = (token, self._clock() + SESSION_SECONDS)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return sid

    def token(self, sid: str | None) -> str | None:
        if not sid:
            return None
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                return None
            if found[1] < self._clock():
                del self._sessions[sid]
                return None
            return found[0]

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)


# -- the console -------------------------------------------------------------------------------------


class PageError(Exception):
    """A console answer that is an error page: its status and what it says, in the page's
    language (``str()``: in English, for the access log)."""

    status = 500

    def __init__(self, msgid: str, **fields: object) -> None:
        self.message = Message(msgid, **fields)
        super().__init__(str(self.message))


class BadRequest(PageError):
    """A console request whose parameters cannot be read: a 400 page saying why."""

    status = 400


class NotFound(PageError):
    """What was asked is not in the index or the archive: a 404 page that says so."""

    status = 404


class Conflict(PageError):
    """The archive no longer holds what the index verified: a 409 page that says so."""

    status = 409


@dataclass
class Console:
    search: EventSearch
    archive: ArchiveIndex
    storage: ArchiveStorage
    thread: IndexThread | None
    sessions: Sessions
    login_modes: tuple[str, ...]
    """What the login page offers: ``token`` and/or ``certificate``."""

    def __post_init__(self) -> None:
        loader = jinja2.FileSystemLoader(_HERE / "templates")
        self.templates = {
            language: i18n.environment(
                language,
                loader,
                {
                    "prefix": PREFIX,
                    "link": _link,
                    "codes": CODES,
                    "meaning": meaning,
                    "rules_of": lambda code: rule_table.rows_by_code().get(code, ()),
                    "families": FAMILIES,
                },
            )
            for language in i18n.LANGUAGES
        }
        for spoken, env in self.templates.items():
            env.filters["hexa"] = lambda value: value.hex() if isinstance(value, bytes) else value
            env.filters["cell"] = rule_cell
            env.filters["score"] = functools.partial(score_text, i18n.Language(spoken))
        self._lots: OrderedDict[str, list[LotEvent]] = OrderedDict()
        self._lots_lock = threading.Lock()
        self._signals: SignalsView | None = None
        self._signals_lock = threading.Lock()

    def render(
        self, request: web.Request, name: str, title: str | Message, code: int = 200, **values: Any
    ) -> web.Response:
        """The page ``name`` in the request's language (:func:`language`)."""
        spoken = language(request)
        env = self.templates[spoken]
        here = request.rel_url
        switch = {other: str(here.update_query({i18n.SWITCH_PARAMETER: other})) for other in i18n.LANGUAGES}
        body = env.get_template(name).render(
            title=i18n.Language(spoken).text(title), switch=switch, lang=spoken, **values
        )
        response = web.Response(status=code, text=body, content_type="text/html", charset="utf-8")
        response.headers["Content-Language"] = spoken
        response.headers["Vary"] = "Accept-Language, Cookie"
        return response

    def verified_lot(self, lot: LotRow) -> bytes:
        """The lot's file from the archive, as the index verified it (409: its SHA-256 changed)."""
        try:
            document = self.storage.read(lot.key)
        except ObjectMissing:
            raise NotFound(N_("{key} is no longer in the archive"), key=lot.key) from None
        if hashlib.sha256(document).digest() != lot.digest:
            raise Conflict(
                N_("{key} is not the lot the index verified (its SHA-256 changed): run coffre verify"),
                key=lot.key,
            )
        return document

    # an event's bytes, from the archive, as the index verified them
    def lot_events(self, lot: LotRow) -> list[LotEvent]:
        with self._lots_lock:
            cached = self._lots.get(lot.key)
        if cached is not None:
            return cached
        events = read_lot(parse_document(self.verified_lot(lot))).events
        with self._lots_lock:
            self._lots[lot.key] = events
            while len(self._lots) > 16:
                self._lots.popitem(last=False)
        return events

    def signals_view(self) -> SignalsView | None:
        """The signals of the state the index saved, evaluated once per version of it (a save:
        every few lots); None before the index saved one."""
        version = self.search.signals_version()
        if version is None:
            return None
        with self._signals_lock:
            cached = self._signals
        if cached is not None and cached.version == version:
            return cached
        found = self.search.signals_state()
        if found is None:
            return None
        version, state = found
        view = SignalsView(
            version,
            evaluate(state, THRESHOLDS),
            state.events,
            state.hands,
            len(state.players),
            len(state.pairs),
        )
        with self._signals_lock:
            self._signals = view
        return view

    def canonical(self, lot: LotRow, id_evt: int) -> LotEvent:
        for event in self.lot_events(lot):
            if event.id_evt == id_evt:
                return event
        raise NotFound(N_("IDEvt {id_evt} is not in {key}"), id_evt=id_evt, key=lot.key)


@dataclass(frozen=True)
class SignalsView:
    """The signals as the page shows them: evaluated from one version of the saved state."""

    version: int
    subjects: list[Subject]
    """Ranked (coffre.domain.signals.scores.evaluate)."""
    events: int
    hands: int
    players: int
    pairs: int


THRESHOLDS = Thresholds()
"""The signals' thresholds on the console: the defaults (docs/signals.md)."""
MAX_ALERTS = 200
"""Subjects over a threshold one page lists (the first in rank); a filter by IDOper narrows them."""
NEAR_MISSES = 20
"""Subjects under every threshold listed after the alerts (the strongest), as coffre signals does."""
SIGNAL_TITLES = {
    "same_hash": N_("One HashJoueur behind several IDJoueur"),
    "several_hashes": N_("One IDJoueur under several HashJoueur"),
    "shared_session": N_("Players in one IDSession"),
    "shared_ip": N_("Players from one IPJoueur"),
    "chip_dumping": N_("Chip dumping"),
    "soft_play": N_("Soft play"),
    "long_sessions": N_("Long play without a pause"),
    "many_tables": N_("Many tables at once"),
    "around_the_clock": N_("Play around the clock"),
    "regular_timing": N_("Timing too regular"),
}
"""Each signal (coffre.domain.signals.scores.SOURCES) as the page titles it."""
SUBJECT_KINDS = {"pair": N_("pair"), "player": N_("player")}


def score_text(words: i18n.Language, value: float | int) -> str:
    """A score or threshold as the language writes it, to 4 decimals at most."""
    if isinstance(value, int):
        return words.number(value)
    return words.number(Decimal(str(round(value, 4))).normalize() if value else Decimal(0))


def evidence_of(signal: Signal) -> list[tuple[float, tuple[str, int, int]]]:
    """The signal's evidence events, an event kept twice (two decisions of one hand) listed once."""
    listed: dict[tuple[str, int, int], float] = {}
    for weight, ref in signal.evidence:
        listed.setdefault(ref, weight)
    return [(weight, ref) for ref, weight in listed.items()]


def player_link(key: str) -> str:
    """The player page of a signals' player key (``IDOper/IDJoueur``)."""
    oper, _, player = key.partition("/")
    return _link("/player", oper=oper, id=player)


def meaning(code: str, lang: str) -> str:
    """The code's one-line meaning in ``lang`` (English when French has none); empty if unknown."""
    english = CODES[code][1] if code in CODES else ""
    return i18n.Language(lang).gettext(english) if english else english


_CODE_SPAN = re.compile(r"`([^`]*)`")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![\w.*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])")


def rule_cell(text: str, link_codes: bool = True) -> Markup:
    """A cell of rules.md as HTML: its code spans (a finding code linked to its rules unless
    ``link_codes`` is false: inside a link), bold and italics; a link to another document is kept as
    its text (the console does not serve docs/)."""
    out: list[str] = []
    for n, piece in enumerate(_CODE_SPAN.split(text)):
        if n % 2:  # inside backticks
            if link_codes and piece in rule_table.rows_by_code():
                out.append(f'<a href="{PREFIX}/rules#{escape(piece)}"><code>{escape(piece)}</code></a>')
            else:
                out.append(f"<code>{escape(piece)}</code>")
            continue
        html = str(escape(_LINK.sub(r"\1", piece)))
        html = _STRONG.sub(r"<strong>\1</strong>", html)
        out.append(_EMPHASIS.sub(r"<em>\1</em>", html))
    return Markup("".join(out))


def seat_key(seat: object) -> str:
    """A seat as the findings name it (``3``): a participant's Siege is a decimal (``3``, ``3.0``)."""
    try:
        number = Decimal(str(seat))
    except ArithmeticError:
        return str(seat)
    return str(int(number)) if number.is_finite() and number == number.to_integral_value() else str(seat)


def hand_seats(event: POJEU) -> dict[str, str]:
    """Seat -> IDJoueur of a hand's participants (a finding names a seat)."""
    return {seat_key(p.Siege): p.IDJoueur for p in event.Participants.Joueur}


def _link(path: str, **params: object) -> str:
    """A console URL with its query, the parameters that are None or empty left out."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return f"{PREFIX}{path}" + (f"?{urlencode(kept)}" if kept else "")


_CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)
LOGIN: web.RequestKey[tuple[str, str | None]] = web.RequestKey("console_login", tuple)
"""What a login attempt gave (``accepted`` or ``refused``, the token's name): for the access log."""


def _console(request: web.Request) -> Console:
    return request.app[_CONSOLE]


def language(request: web.Request) -> str:
    """The language of the request's page (services/regulator/i18n.py: the switch, the cookie,
    ``Accept-Language``, French)."""
    return i18n.chosen(
        request.query.get(i18n.SWITCH_PARAMETER),
        request.cookies.get(i18n.COOKIE),
        request.headers.get("Accept-Language"),
    )


def _switching_language(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """``handler``, except for a ``GET`` with ``?lang=``: the language kept in a cookie, and a 303
    to the same page at its URL without ``lang`` (links and the access log stay clean)."""

    async def answer(request: web.Request) -> web.StreamResponse:
        asked = request.query.get(i18n.SWITCH_PARAMETER)
        if asked is None or request.method != "GET":
            return await handler(request)
        if asked not in i18n.LANGUAGES:
            raise BadRequest(N_("lang: one of {languages}"), languages=", ".join(i18n.LANGUAGES))
        response = redirect(str(request.rel_url.without_query_params(i18n.SWITCH_PARAMETER)))
        response.set_cookie(
            i18n.COOKIE, asked, secure=True, httponly=True, samesite="Lax", path="/", max_age=365 * 24 * 3600
        )
        return response

    return answer


# -- parameters ------------------------------------------------------------------------------------


def _field(request: web.Request, name: str) -> str | None:
    value = request.query.get(name, "").strip()
    if len(value) > MAX_FIELD:
        raise BadRequest(N_("{name}: at most {count} characters"), name=name, count=MAX_FIELD)
    return value or None


def _number(text: str | None, name: str | Message) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or len(text) > 18:
        raise BadRequest(N_("{name}: a whole number, not “{text}”"), name=name, text=text)
    return int(text)


def _moment(text: str | None, name: str | Message, end: bool = False) -> datetime | None:
    """A date (``2026-03-01``: the whole day) or a date and time (``2026-03-01T20:15``), in UTC."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            N_("{name}: a date (YYYY-MM-DD) or date and time (YYYY-MM-DDTHH:MM), not “{text}”"),
            name=name,
            text=text,
        ) from None
    if len(text) == 10 and end:
        moment = datetime.combine(moment.date(), day_time(23, 59, 59))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _query(request: web.Request) -> tuple[Query, dict[str, str]]:
    """The search asked, and the fields as given (to fill the form again and build links)."""
    given = {name: value for name in SEARCH_FIELDS if (value := _field(request, name)) is not None}
    query = Query(
        oper=given.get("oper"),
        coffre=_number(given.get("coffre"), "IDCoffre"),
        first_id=_number(given.get("from_id"), Message(N_("from IDEvt"))),
        last_id=_number(given.get("to_id"), Message(N_("to IDEvt"))),
        since=_moment(given.get("since"), Message(N_("from"))),
        until=_moment(given.get("until"), Message(N_("to")), end=True),
        type=given.get("type"),
        player=given.get("player"),
        hash_joueur=given["hash"].upper() if "hash" in given else None,  # stored upper-cased (types:sha1)
        tech=given.get("tech"),
        pool=given.get("pool"),
        inscription=given.get("inscription"),
        finding=given.get("finding"),
        text=given.get("text"),
    )
    if query.first_id is not None and query.last_id is not None and query.first_id > query.last_id:
        raise BadRequest(
            N_("from IDEvt {first} is after to IDEvt {last}: no event is between"),
            first=query.first_id,
            last=query.last_id,
        )
    if query.since is not None and query.until is not None and query.since > query.until:
        raise BadRequest(
            N_("from {since} is after to {until}: no event is between"),
            since=given["since"],
            until=given["until"],
        )
    return query, given


def _indented(canonical: bytes) -> str:
    """The sealed XML indented for reading (the canonical bytes are one line): the same elements,
    attributes and texts; HashChaine covers the canonical bytes, not this text. As sealed when it
    cannot be read again (it can: the index verified it)."""
    try:
        root = read_xml(canonical)
    except Rejected:
        return canonical.decode("utf-8", "replace")
    for element in root.iter():  # no indentation of its own to keep: every blank is a text's
        if element.text is not None and not element.text.strip() and len(element):
            element.text = None
    return etree.tostring(root, pretty_print=True, encoding="unicode").rstrip("\n")


def _oper_coffre_id(request: web.Request) -> tuple[str, int, int]:
    """IDOper, IDCoffre and IDEvt of the path, read as the API reads them (InvalidRequest: a 400)."""
    info = request.match_info
    return parse_oper(info["oper"]), parse_coffre(info["coffre"]), parse_number(info["id_evt"], "IDEvt")


def _oper(request: web.Request) -> str | None:
    given = _field(request, "oper")
    return None if given is None else parse_oper(given)


# -- pages -------------------------------------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    console = _console(request)

    def gather() -> dict[str, Any]:
        coffres = console.search.coffres()
        evidence: dict[tuple[str, int], Any] = {}
        for state in coffres:
            if state.lots:
                try:
                    page = console.archive.checkpoints(state.oper, state.coffre, state.lots, page_size=1)
                    evidence[(state.oper, state.coffre)] = page.checkpoints[0] if page.checkpoints else None
                except ArchiveQueryError:
                    evidence[(state.oper, state.coffre)] = None
        lots = console.search.lots_by_day()
        findings = console.search.findings_by_day()
        return {"coffres": coffres, "evidence": evidence, "lots": lots, "findings": findings}

    data = await asyncio.to_thread(gather)
    words = i18n.Language(language(request))
    plots = []
    if data["lots"]:
        sealed = [(day, words.gettext(N_("lots sealed")), n) for day, n, _ in data["lots"]]
        plots.append(_counts_plot(sealed, "lots", words)[0])
    if data["findings"]:
        plots.append(_counts_plot(data["findings"], "findings", words)[0])
    thread = console.thread
    return console.render(
        request,
        "overview.html",
        title=N_("Overview"),
        plots=plots,
        index_status=thread.last if thread is not None else None,
        **data,
    )


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


PER_BUCKET = {
    "lots": {"day": N_("Lots sealed per day"), "month": N_("Lots sealed per month")},
    "findings": {
        "day": N_("Events with findings per code per day"),
        "month": N_("Events with findings per code per month"),
    },
}
"""The titles of the plots of counts over time, per bucket."""
COUNTED = {"lots": N_("lots"), "findings": N_("events")}
"""What the plots of counts over time count (their y axis)."""


def _counts_plot(rows: Sequence[tuple[str, str, int]], kind: str, words: i18n.Language) -> tuple[str, str]:
    """The plot of counts over time of ``kind`` (``lots``, ``findings``) in the page's language,
    per day or per month (:func:`_counts_over_time`), and that bucket."""
    series, bucket = _counts_over_time(rows)
    picture = line_plot(
        series,
        title=words.gettext(PER_BUCKET[kind][bucket]),
        words=words.gettext,
        y_label=words.gettext(COUNTED[kind]),
        counts=True,
        bucket=bucket,
    )
    return picture, bucket


def _month_after(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _bucketed(rows: Sequence[tuple[str, str, int]]) -> tuple[list[tuple[str, str, int]], str]:
    """Counts of (``YYYY-MM-DD`` day, label, count) as they are drawn and listed, and their bucket:
    per day when their days span at most :data:`DAY_BUCKETS` days, else summed per month
    (``YYYY-MM``); rows already per month stay so."""
    if not rows:
        return [], "day"
    if any(len(when) == 7 for when, _, _ in rows):
        return list(rows), "month"
    days = [date.fromisoformat(when) for when, _, _ in rows]
    if (max(days) - min(days)).days <= DAY_BUCKETS:
        return list(rows), "day"
    months: defaultdict[tuple[str, str], int] = defaultdict(int)
    for when, label, count in rows:
        months[(when[:7], label)] += count
    return [(month, label, count) for (month, label), count in sorted(months.items())], "month"


def _counts_over_time(rows: Sequence[tuple[str, str, int]]) -> tuple[list[Series], str]:
    """Counts of (``YYYY-MM-DD`` day or ``YYYY-MM`` month, label, count) as one series per label,
    per day or per month (:func:`_bucketed`), and that bucket. Every day (month) from the first to
    the last is a point, 0 where no row has it: a step line would otherwise hold a count over the
    days without any."""
    rows, bucket = _bucketed(rows)
    if not rows:
        return [], bucket
    monthly = bucket == "month"
    counts: defaultdict[tuple[date, str], int] = defaultdict(int)
    for when, label, count in rows:
        counts[(date.fromisoformat(when if len(when) == 10 else f"{when}-01"), label)] += count
    start, end = min(when for when, _ in counts), max(when for when, _ in counts)
    buckets = []
    while start <= end:
        buckets.append(start)
        start = _month_after(start) if monthly else start + timedelta(days=1)
    series = [
        Series(
            label,
            [
                (datetime.combine(b, day_time(0), tzinfo=UTC), Decimal(counts.get((b, label), 0)))
                for b in buckets
            ],
        )
        for label in sorted({label for _, label, _ in rows})
    ]
    return series, bucket


def _bucket_days(when: str) -> tuple[str, str]:
    """The first and last day (``YYYY-MM-DD``) of a day or a month (``YYYY-MM``)."""
    if len(when) == 10:
        return when, when
    first = date.fromisoformat(f"{when}-01")
    return first.isoformat(), (_month_after(first) - timedelta(days=1)).isoformat()


async def findings_page(request: web.Request) -> web.Response:
    """Events with findings by code, by operator and over time, each count a link to the search that
    lists those events (docs/console.md, "Findings")."""
    console = _console(request)
    oper = _oper(request)
    since_text, until_text = _field(request, "since"), _field(request, "until")
    since, until = _moment(since_text, Message(N_("from"))), _moment(until_text, Message(N_("to")), end=True)
    if since is not None and until is not None and since > until:
        raise BadRequest(
            N_("from {since} is after to {until}: no event is between"), since=since_text, until=until_text
        )

    def gather() -> dict[str, Any]:
        per_code = console.search.findings_per_code(oper, since, until)
        return {
            "per_code": per_code,
            "per_oper": console.search.findings_per_operator(oper, since, until),
            "over_time": console.search.findings_over_time(oper, since, until) if per_code else [],
            "operators": sorted({c.oper for c in console.search.coffres()}),
        }

    data = await asyncio.to_thread(gather)

    def search_link(code: str, found_oper: str | None = None, when: str | None = None) -> str:
        """The search listing the events a count counts: the code, the operator, the period (the
        page's, narrowed to the day or month ``when``)."""
        low, high = since_text, until_text
        if when is not None:
            first, last = _bucket_days(when)
            if since is None or since < _day(first):
                low = first
            if until is None or until > _moment(last, "to", end=True):  # type: ignore[operator]
                high = last
        return _link("/search", oper=found_oper or oper, finding=code, since=low, until=high)

    codes = [code for code, *_ in data["per_code"]]
    matrix: dict[str, dict[str, int]] = {}
    for found_oper, code, count in data["per_oper"]:
        matrix.setdefault(found_oper, {})[code] = count
    over_time, bucket = _bucketed(data["over_time"])  # the table's rows are the plot's points
    plot = None
    if over_time:
        plot = _counts_plot(over_time, "findings", i18n.Language(language(request)))[0]
    return console.render(
        request,
        "findings.html",
        title=N_("Findings"),
        oper=oper,
        since=since_text,
        until=until_text,
        operators=data["operators"],
        per_code=data["per_code"],
        codes_found=codes,
        matrix=matrix,
        over_time=over_time,
        bucket=bucket,
        plot=plot,
        search_link=search_link,
    )


async def search(request: web.Request) -> web.Response:
    console = _console(request)
    if any(not value.strip() for value in request.query.values()):
        # the form sends every field, most of them empty: the same search at its clean URL
        kept = [(k, v) for k, v in request.query.items() if v.strip()]
        return redirect(request.path + (f"?{urlencode(kept)}" if kept else ""))
    query, given = _query(request)
    after, before, sort = _field(request, "after"), _field(request, "before"), _field(request, "sort")
    if sort is not None and sort not in SORTS:
        raise BadRequest(N_("sort: one of {sorts}"), sorts=", ".join(SORTS))
    if sort is not None and sort.lstrip("-") == "id" and query.coffre is None:
        raise BadRequest(
            N_("sorting by IDEvt needs a coffre (IDCoffre): IDEvt numbers the events of one coffre")
        )
    prefixes = {
        name: value[:-1]
        for name, value in (("player", query.player), ("hash", query.hash_joueur))
        if value is not None and value.endswith("*")
    }
    page, started, starting = None, time.perf_counter(), None
    if prefixes:  # IDJoueur or HashJoueur given by its start: the players it may be
        name, prefix = next(iter(prefixes.items()))
        starting = (
            name,
            prefix,
            await asyncio.to_thread(console.search.players_starting, prefix, hashes=name == "hash"),
        )
    elif not query.empty:
        page = await asyncio.to_thread(
            console.search.search, query, after=after, before=before, sort=sort, page_size=PAGE_SIZE
        )
    elapsed = (time.perf_counter() - started) * 1000
    types, codes = await asyncio.to_thread(
        lambda: (console.search.event_types(), console.search.finding_codes())
    )
    return console.render(
        request,
        "search.html",
        title=N_("Search"),
        given=defaultdict(str, given),
        page=page,
        after=after,
        before=before,
        sort=sort,
        sorts=SORT_NAMES,
        starting=starting,
        elapsed_ms=elapsed,
        scan_window=SCAN_WINDOW,
        choice_limit=CHOICE_LIMIT,
        types=types,
        finding_codes=codes,
    )


SORT_NAMES = {
    "date": N_("date, oldest first"),
    "-date": N_("date, newest first"),
    "id": N_("IDEvt, lowest first (one coffre)"),
    "-id": N_("IDEvt, highest first (one coffre)"),
}


async def search_csv(request: web.Request) -> web.StreamResponse:
    console = _console(request)
    query, _ = _query(request)
    if query.empty:
        raise BadRequest(N_("an export needs a search: give at least one field"))
    rows: list[EventRow] = await asyncio.to_thread(lambda: list(console.search.export_rows(query)))
    out = io.StringIO()
    writer = csv.writer(out)
    header = ["IDOper", "IDCoffre", "IDEvt", "type", "DateEvt (UTC)", "lot", "Tech", "Pool", "Inscription"]
    writer.writerow([*header, "players", "findings"])
    for row in rows:
        cells = [
            row.oper,
            row.coffre,
            row.id_evt,
            row.type,
            row.at,
            row.lot,
            row.tech,
            row.pool,
            row.inscription,
        ]
        writer.writerow([csv_cell(cell) for cell in (*cells, " ".join(row.players), " ".join(row.codes))])
    return web.Response(
        body=out.getvalue().encode("utf-8"),
        content_type="text/csv",
        charset="utf-8",
        headers={"Content-Disposition": 'attachment; filename="coffre-search.csv"'},
    )


def csv_cell(value: object) -> str:
    """A CSV cell a spreadsheet will not run as a formula (one starting with = + - @, a tab or a
    carriage return gets a leading apostrophe): the operators' identifiers are untrusted."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


async def search_lots(request: web.Request) -> web.StreamResponse:
    """The signed lots (and their checkpoints) the search's events are in, in one zip, byte for byte."""
    console = _console(request)
    query, _ = _query(request)
    if query.empty:
        raise BadRequest(N_("an export needs a search: give at least one field"))

    def build() -> bytes:
        wanted: dict[tuple[str, int, int], None] = {}
        for row in console.search.export_rows(query):
            wanted[(row.oper, row.coffre, row.lot)] = None
            if len(wanted) > MAX_EXPORT_LOTS:
                raise IndexQueryError(
                    f"the events are in more than {MAX_EXPORT_LOTS} lots: narrow the search"
                )
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
            for oper, coffre, number in wanted:
                lot = console.search.lot(oper, coffre, number)
                assert lot is not None
                bundle.writestr(lot.key, console.verified_lot(lot))
                with_checkpoint = checkpoint_key(oper, coffre, number)
                with contextlib.suppress(ObjectMissing):
                    bundle.writestr(with_checkpoint, console.storage.read(with_checkpoint))
        return buffer.getvalue()

    body = await asyncio.to_thread(build)
    return web.Response(
        body=body,
        content_type="application/zip",
        headers={"Content-Disposition": 'attachment; filename="coffre-lots.zip"'},
    )


async def event_page(request: web.Request) -> web.Response:
    console = _console(request)
    oper, coffre, id_evt = _oper_coffre_id(request)

    def gather() -> dict[str, Any] | None:
        found = console.search.event(oper, coffre, id_evt)
        if found is None:
            return None
        row, lot, findings = found
        stored = console.canonical(lot, id_evt)
        position = id_evt - lot.first_id + 1  # the first event of a lot is its event 1
        neighbours = {
            player: console.search.neighbours(oper, player, row.at, row.row) for player in row.players[:12]
        }
        seats: dict[str, str] = {}
        if row.type == "POJEU" and any(f.seat is not None for f in findings):
            with contextlib.suppress(Rejected):  # the index read it: it reads again
                event = normalize(stored.canonical)
                if isinstance(event, POJEU):
                    seats = hand_seats(event)
        return {
            "row": row,
            "lot": lot,
            "findings": findings,
            "seats": seats,
            "stored": stored,
            "position": position,
            "neighbours": neighbours,
            "canonical": _indented(stored.canonical),
        }

    data = await asyncio.to_thread(gather)
    if data is None:
        raise NotFound(
            N_("IDEvt {id_evt} of coffre {oper}/{coffre} is not in the index"),
            id_evt=id_evt,
            oper=oper,
            coffre=coffre,
        )
    return console.render(
        request,
        "event.html",
        title=Message(N_("Event {oper}/{coffre} IDEvt {id_evt}"), oper=oper, coffre=coffre, id_evt=id_evt),
        **data,
    )


async def event_proof(request: web.Request) -> web.Response:
    console = _console(request)
    oper, coffre, id_evt = _oper_coffre_id(request)
    proof = await asyncio.to_thread(console.archive.inclusion_proof, oper, coffre, id_evt)
    return web.Response(
        text=json.dumps(proof, indent=2),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="proof-{oper}-{coffre}-{id_evt}.json"'},
    )


async def coffre_checkpoint(request: web.Request) -> web.Response:
    console = _console(request)
    oper, coffre = parse_oper(request.match_info["oper"]), parse_coffre(request.match_info["coffre"])
    stored = await asyncio.to_thread(console.archive.checkpoint, oper, coffre)
    return web.Response(
        body=stored.data,
        content_type="application/xml",
        # named as the event page's check command names it (the lot it signs is inside)
        headers={"Content-Disposition": f'attachment; filename="checkpoint-{oper}-{coffre}.xml"'},
    )


async def lot_checkpoint(request: web.Request) -> web.Response:
    """The checkpoint of one lot, byte for byte: the one its time-stamp tokens and cosignatures
    are over (the newest is ``checkpoint.xml``)."""
    console = _console(request)
    oper, coffre = parse_oper(request.match_info["oper"]), parse_coffre(request.match_info["coffre"])
    number = parse_number(request.match_info["number"], "lot")
    stored = await asyncio.to_thread(console.archive.checkpoint_at, oper, coffre, number)
    return web.Response(
        body=stored.data,
        content_type="application/xml",
        headers={"Content-Disposition": f'attachment; filename="{stored.key.rsplit("/", 1)[-1]}"'},
    )


async def checkpoint_evidence(request: web.Request) -> web.Response:
    """A time-stamp token (``tsa``) or a witness's cosignature (``witness``) of the checkpoint of
    one lot, byte for byte, named as the archive names it (docs/archive-format.md)."""
    console = _console(request)
    info = request.match_info
    oper, coffre = parse_oper(info["oper"]), parse_coffre(info["coffre"])
    number, kind = parse_number(info["number"], "lot"), info["kind"]
    if kind not in EVIDENCE_KINDS:
        raise NotFound(N_("no evidence of kind {kind}: tsa or witness"), kind=kind)
    name = parse_evidence_label(info["name"], "the name")
    stored = await asyncio.to_thread(console.archive.evidence, oper, coffre, number, kind, name)
    return web.Response(
        body=stored.data,
        content_type="application/timestamp-reply" if kind == "tsa" else "text/plain",
        charset=None if kind == "tsa" else "utf-8",
        headers={"Content-Disposition": f'attachment; filename="{stored.key.rsplit("/", 1)[-1]}"'},
    )


async def certificates(request: web.Request) -> web.Response:
    console = _console(request)
    pem = b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in console.archive.trust)
    return web.Response(
        body=pem,
        content_type="application/x-pem-file",
        headers={"Content-Disposition": 'attachment; filename="coffre-certificates.pem"'},
    )


async def player_page(request: web.Request) -> web.Response:
    console = _console(request)
    oper, player = _oper(request), _field(request, "id")
    if player is None:
        raise BadRequest(N_("name the player: id=IDJoueur"))
    since, until = (
        _moment(_field(request, "since"), Message(N_("from"))),
        _moment(_field(request, "until"), Message(N_("to")), end=True),
    )

    def gather() -> dict[str, Any]:
        parties = [
            p
            for p in console.search.player_parties(player, since, until, PAGE_LIMIT)
            if oper is None or p.oper == oper
        ]
        known = bool(parties) or any(
            oper is None or p.oper == oper
            for p in console.search.player_parties(player, None, None, PAGE_LIMIT)
        )  # a player of the index, with nothing in the period asked: an empty page, not a 404
        return {
            "parties": parties,
            "findings": console.search.player_findings(player, since, until, PAGE_LIMIT),
            "known": known,
        }

    data = await asyncio.to_thread(gather)
    parties = data["parties"]
    if not parties and not data["findings"] and not data["known"]:
        if oper:
            raise NotFound(
                N_("no event of player {player} of operator {oper} is in the index"), player=player, oper=oper
            )
        raise NotFound(N_("no event of player {player} is in the index"), player=player)
    money = [p for p in parties if p.type != "POJEU" and p.after is not None]
    hands = [p for p in parties if p.type == "POJEU"]
    words = i18n.Language(language(request))
    plot = line_plot(
        [
            Series(
                words.text(Message(N_("SoldeApres of {player}"), player=player)),
                [(unstamp(p.at), p.after) for p in money],
            )
        ],  # type: ignore[misc]
        title=words.text(Message(N_("Balance of {player}"), player=player)),
        words=words.gettext,
        y_label=words.gettext(N_("balance")),
    )
    return console.render(
        request,
        "player.html",
        title=Message(N_("Player {player}"), player=player),
        player=player,
        oper=oper,
        plot=plot,
        registrations=[p for p in parties if p.type == "POINSCRIT"],
        hands=hands,
        money=money,
        per_tech=_hands_per_tech(hands),
        addresses=_addresses(parties),
        balance=(money[0].before if money[0].before is not None else None, money[-1].after)
        if money
        else None,
        hashes=sorted({p.hash_joueur for p in parties if p.hash_joueur}),
        findings=data["findings"],
        seats={
            (p.oper, p.coffre, p.id_evt): {seat_key(p.seat): p.player}
            for p in parties
            if p.type == "POJEU" and p.seat is not None
        },
        since=_field(request, "since"),
        until=_field(request, "until"),
        truncated=len(parties) >= PAGE_LIMIT,
        page_limit=PAGE_LIMIT,
    )


@dataclass
class TechTotals:
    """A player's hands at one table or tournament over the period: chips are a table's own (a
    tournament's are not money), so nets are added up per ``Tech``, never across."""

    tech: str | None
    oper: str
    hands: int = 0
    won: int = 0
    lost: int = 0
    net: Decimal = Decimal(0)
    unknown: int = 0
    """Hands whose chips before or after are not recorded (their net is not counted)."""


def _by_event(parties: list[Any]) -> dict[tuple[str, int, int], list[Any]]:
    out: dict[tuple[str, int, int], list[Any]] = {}
    for party in parties:
        out.setdefault((party.oper, party.coffre, party.id_evt), []).append(party)
    return out


@dataclass
class Address:
    """An ``IPJoueur`` a player's events were recorded from, over the period."""

    ip: str
    events: int
    first: str
    last: str
    sessions: list[str]
    """The ``IDSession`` of the player events from it (a hand records none), in order, each once."""


def _addresses(parties: list[Any]) -> list[Address]:
    found: dict[str, Address] = {}
    for party in parties:  # by date
        if party.ip is None:
            continue
        address = found.get(party.ip)
        if address is None:
            address = found[party.ip] = Address(party.ip, 0, party.at, party.at, [])
        address.events += 1
        address.last = party.at
        if party.session is not None and party.session not in address.sessions:
            address.sessions.append(party.session)
    return sorted(found.values(), key=lambda a: (a.first, a.ip))


def _hands_per_tech(hands: list[Any]) -> list[TechTotals]:
    totals: dict[tuple[str, str | None], TechTotals] = {}
    for hand in hands:
        total = totals.setdefault((hand.oper, hand.tech), TechTotals(hand.tech, hand.oper))
        total.hands += 1
        if hand.before is None or hand.after is None:
            total.unknown += 1
            continue
        net = hand.after - hand.before
        total.net += net
        total.won += net > 0
        total.lost += net < 0
    return [totals[key] for key in sorted(totals, key=lambda k: (k[0], k[1] or ""))]


async def tech_page(request: web.Request) -> web.Response:
    console = _console(request)
    oper, tech = _oper(request), _field(request, "id")
    if tech is None:
        raise BadRequest(N_("name the table or tournament: id=Tech"))

    def gather() -> dict[str, Any]:
        events = [
            (r, f) for r, f in console.search.tech_events(tech, PAGE_LIMIT) if oper is None or r.oper == oper
        ]
        seats = [
            p for p in console.search.tech_parties(tech, 4 * PAGE_LIMIT) if oper is None or p.oper == oper
        ]
        results = [p for p in console.search.tech_results(tech, PAGE_LIMIT) if oper is None or p.oper == oper]
        return {"events": events, "seats": seats, "results": results}

    data = await asyncio.to_thread(gather)
    seats_by_hand = _by_event(data["seats"])
    chips: dict[str, list[tuple[datetime, Decimal]]] = {}
    for seat in data["seats"]:
        if seat.after is not None:
            chips.setdefault(seat.player, []).append((unstamp(seat.at), seat.after))
    events = data["events"]
    levels: list[tuple[str, EventRow]] = []
    for row, _ in events:
        if row.type == "POJEU" and row.forced and (not levels or levels[-1][0] != row.forced):
            levels.append((row.forced, row))
    words = i18n.Language(language(request))
    plot = line_plot(
        [Series(player, points) for player, points in sorted(chips.items())],
        title=words.text(Message(N_("Chips after each hand of {tech}"), tech=tech)),
        words=words.gettext,
        y_label=words.gettext(N_("chips (CaveApres)")),
    )
    return console.render(
        request,
        "tech.html",
        title=Message(N_("Tech {tech}"), tech=tech),
        tech=tech,
        oper=oper,
        plot=plot,
        registrations=[(r, f) for r, f in events if r.type == "POINSCRIT"],
        hands=[(r, f) for r, f in events if r.type == "POJEU"],
        results=[(r, f) for r, f in events if r.type not in ("POINSCRIT", "POJEU")],
        seats=seats_by_hand,
        result_parties=_by_event(data["results"]),
        levels=levels,
        findings=[(r, f) for r, fs in events for f in fs],
        seats_of={
            key: {seat_key(s.seat): s.player for s in listed if s.seat is not None}
            for key, listed in seats_by_hand.items()
        },
        truncated=len(events) >= PAGE_LIMIT,
        page_limit=PAGE_LIMIT,
    )


async def hand_page(request: web.Request) -> web.Response:
    console = _console(request)
    oper, coffre, id_evt = _oper_coffre_id(request)
    step = _number(_field(request, "round"), "round")

    def gather() -> tuple[EventRow, POJEU, list[Finding]] | None:
        found = console.search.event(oper, coffre, id_evt)
        if found is None:
            return None
        row, lot, findings = found
        event = normalize(console.canonical(lot, id_evt).canonical)
        if not isinstance(event, POJEU):
            raise BadRequest(
                N_("IDEvt {id_evt} is a {type}, not a hand (POJEU)"), id_evt=id_evt, type=row.type
            )
        return row, event, findings

    found = await asyncio.to_thread(gather)
    if found is None:
        raise NotFound(
            N_("IDEvt {id_evt} of coffre {oper}/{coffre} is not in the index"),
            id_evt=id_evt,
            oper=oper,
            coffre=coffre,
        )
    row, event, findings = found
    rounds = [tour.name for tour in event.Jeu.Tour]
    if step is not None and rounds:
        step = min(step, len(rounds) - 1)
    view = await asyncio.to_thread(hand_view, event, tuple(findings), until_round=step)
    return console.render(
        request,
        "hand.html",
        title=Message(N_("Hand {oper}/{coffre} IDEvt {id_evt}"), oper=oper, coffre=coffre, id_evt=id_evt),
        row=row,
        event=event,
        findings=findings,
        seats=hand_seats(event),
        view=view,
        kind=variant_rules(event.Regle).kind,
        rounds=rounds,
        step=step,
    )


async def signals_page(request: web.Request) -> web.Response:
    """The collusion and robot signals of the index's state, ranked, each with the events behind it
    (docs/console.md, "Signals"); by IDOper with ``oper``."""
    console = _console(request)
    oper = _oper(request)

    def gather() -> dict[str, Any]:
        coffres = console.search.coffres()
        view = console.signals_view()
        data: dict[str, Any] = {
            "view": view,
            "operators": sorted({c.oper for c in coffres}),
            "indexed": sum(c.events for c in coffres),
            "alerts": [],
            "near": [],
            "more": 0,
            "types": {},
        }
        if view is None:
            return data
        subjects = [
            s for s in view.subjects if oper is None or any(p.partition("/")[0] == oper for p in s.players)
        ]
        alerts = [s for s in subjects if s.crossed]
        data["alerts"], data["more"] = alerts[:MAX_ALERTS], max(0, len(alerts) - MAX_ALERTS)
        data["near"] = [s for s in subjects if not s.crossed][:NEAR_MISSES]
        shown = data["alerts"] + data["near"]
        data["types"] = console.search.types_of(
            [ref for s in shown for g in s.signals for _, ref in g.evidence]
        )
        return data

    data = await asyncio.to_thread(gather)
    return console.render(
        request,
        "signals.html",
        title=N_("Signals"),
        oper=oper,
        thresholds=dataclasses.asdict(THRESHOLDS),
        titles=SIGNAL_TITLES,
        kinds=SUBJECT_KINDS,
        sources=SOURCES,
        evidence_of=evidence_of,
        player_link=player_link,
        max_alerts=MAX_ALERTS,
        **data,
    )


FAMILIES = {
    "cards": N_("cards"),
    "order": N_("order"),
    "money": N_("money"),
    "showdown": N_("showdown"),
    "trail": N_("trail"),
    "identity": N_("identity"),
    "tournament": N_("tournament"),
    "audit": N_("audit"),
}
"""The finding codes' families (findings.CODES), as the rules page names them."""


async def rules_page(request: web.Request) -> web.Response:
    """The rules table (rules.md as shipped): an anchor per rule id and per finding code, which
    each finding's sentence links to."""
    sections: dict[str, list[rule_table.Row]] = {}
    for row in rule_table.rows():
        sections.setdefault(row.section, []).append(row)
    by_code = rule_table.rows_by_code()
    return _console(request).render(
        request,
        "rules.html",
        title=N_("The rules coffre checks"),
        sections=sections,
        codes_listed=[
            (code, CODES[code][0] if code in CODES else "", rows) for code, rows in sorted(by_code.items())
        ],
    )


# -- login ---------------------------------------------------------------------------------------------


async def login_page(request: web.Request) -> web.Response:
    console = _console(request)
    if request.method == "POST":
        form = await request.post()
        token = str(form.get("token", "")).strip()
        authenticate: Callable[[str], str | None] = request.app[_CHECK_TOKEN]
        name = authenticate(token) if token and len(token) <= 4096 else None
        if name is None:
            request[LOGIN] = ("refused", None)
            return console.render(
                request,
                "login.html",
                code=401,
                title=N_("Log in"),
                modes=console.login_modes,
                message=N_("This token is not accepted."),
            )
        request[LOGIN] = ("accepted", name)
        response = redirect(f"{PREFIX}/")
        response.set_cookie(
            COOKIE,
            console.sessions.open(token),
            secure=True,
            httponly=True,
            samesite="Strict",
            path="/",
            max_age=SESSION_SECONDS,
        )
        return response
    return console.render(request, "login.html", title=N_("Log in"), modes=console.login_modes, message=None)


async def logout(request: web.Request) -> web.Response:
    console = _console(request)
    console.sessions.close(request.cookies.get(COOKIE))
    response = redirect(f"{PREFIX}/login")
    response.del_cookie(COOKIE, path="/")
    return response


def redirect(location: str) -> web.Response:
    """A 303 to ``location``: after a login or logout, to the login page without credentials, and
    to a search's clean URL."""
    return web.Response(status=303, headers={"Location": location})


async def stylesheet(_: web.Request) -> web.Response:
    return web.Response(
        body=(_HERE / "static" / "console.css").read_bytes(),
        content_type="text/css",
        headers={"Cache-Control": "max-age=3600"},
    )


_CHECK_TOKEN: web.AppKey[Callable[[str], str | None]] = web.AppKey("console_check_token")


def add_console(app: web.Application, console: Console, check_token: Callable[[str], str | None]) -> None:
    """The console's routes on the API's application. ``check_token`` gives the name of a bearer
    token the API accepts (None: refused)."""
    app[_CONSOLE] = console
    app[_CHECK_TOKEN] = check_token
    route = app.router
    for path, handler in (
        ("/", overview),
        ("/search", search),
        ("/search.csv", search_csv),
        ("/search-lots.zip", search_lots),
        ("/event/{oper}/{coffre}/{id_evt}", event_page),
        ("/event/{oper}/{coffre}/{id_evt}/proof.json", event_proof),
        ("/hand/{oper}/{coffre}/{id_evt}", hand_page),
        ("/coffre/{oper}/{coffre}/checkpoint.xml", coffre_checkpoint),
        ("/coffre/{oper}/{coffre}/{number:[0-9]+}/checkpoint.xml", lot_checkpoint),
        ("/coffre/{oper}/{coffre}/{number:[0-9]+}/{kind}/{name}", checkpoint_evidence),
        ("/certificates.pem", certificates),
        ("/player", player_page),
        ("/tech", tech_page),
        ("/rules", rules_page),
        ("/findings", findings_page),
        ("/signals", signals_page),
        ("/static/console.css", stylesheet),
    ):
        route.add_get(PREFIX + path, _switching_language(handler), allow_head=False)

    async def home(_: web.Request) -> web.Response:
        return redirect(f"{PREFIX}/")

    route.add_get(PREFIX, home, allow_head=False)
    route.add_route("GET", f"{PREFIX}/login", _switching_language(login_page))
    route.add_route("POST", f"{PREFIX}/login", login_page)
    route.add_route("POST", f"{PREFIX}/logout", logout)


def secure_headers(response: web.StreamResponse) -> None:
    """What every console answer carries: the CSP, no framing, no referrer to other sites, no cache."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    # same-origin, not no-referrer: under no-referrer a browser posts forms with "Origin: null", which
    # the API's same-site check of the login and logout forms refuses; nothing leaves for another site
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("Cache-Control", "no-store")


def error_page(request: web.Request, status: int, message: str | Message) -> web.Response:
    console = request.app.get(_CONSOLE)
    if console is None:  # pragma: no cover - the console is always set where this is called
        return web.Response(status=status, text=message)
    return console.render(
        request,
        "error.html",
        code=status,
        title=Message(N_("Error {status}"), status=status),
        status=status,
        message=i18n.Language(language(request)).text(message) if isinstance(message, Message) else message,
        message_lang=None if isinstance(message, Message) else "en",
    )


def console_app_ready(app: web.Application) -> bool:
    return _CONSOLE in app


def session_token(request: web.Request) -> str | None:
    """The token of the browser's console session, if it has a live one."""
    return request.app[_CONSOLE].sessions.token(request.cookies.get(COOKIE))


__all__ = [
    "COOKIE",
    "CSP",
    "LOGIN",
    "POST_PATHS",
    "PREFIX",
    "PUBLIC_PATHS",
    "QUERY_PARAMETERS",
    "BadRequest",
    "Console",
    "PageError",
    "Sessions",
    "add_console",
    "console_app_ready",
    "csv_cell",
    "error_page",
    "redirect",
    "secure_headers",
    "session_token",
]
