"""The console's languages: French (the regulator's, by default) and English (docs/console.md).

Pages are written in English in the templates and the code (``_("…")``, :func:`N_`), and
translated with the gettext catalogues of ``locale/fr/LC_MESSAGES/*.po`` (Babel's PO format,
compiled in memory when the console starts: no build step, nothing compiled in the wheel). A page
is in one language: the one the browser chose with the console's switch (a cookie), else the first
of its ``Accept-Language`` the console speaks, else French. Dates, numbers and amounts are written
as that language writes them (Babel's CLDR data); times stay UTC and say so.

What stays as recorded, whatever the language: the operators' identifiers and texts, the DET's
element names (``IDJoueur``, ``HashChaine``…, the regulator's own words), the event's XML, and the
messages of the archive's shared API and of the audit engine's findings (English, as in
``coffre audit``'s report and the access log): a page marks those with ``lang="en"``.
"""

from __future__ import annotations

import gettext as _gettext
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path

import jinja2
from babel import Locale
from babel.dates import format_date, format_datetime
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal
from babel.support import Translations

LANGUAGES = ("fr", "en")
"""What the console speaks, the default first."""
DEFAULT = LANGUAGES[0]
NAMES = {"fr": "Français", "en": "English"}
"""Each language in its own words: what the switch shows."""
COOKIE = "__Host-coffre-console-lang"
SWITCH_PARAMETER = "lang"
"""``?lang=en`` on any console page: the language chosen (kept in :data:`COOKIE`), and the same
page again at its URL without it."""
LOCALE_DIR = Path(__file__).parent / "locale"
MAX_ACCEPT_LANGUAGE = 64
"""Entries of an ``Accept-Language`` header read (the rest ignored: a header is untrusted input)."""


def N_(message: str) -> str:
    """A message marked for the catalogue and translated where it is shown (a constant, an
    exception's text): Babel's extraction finds it, the page calls ``_`` on it."""
    return message


class Message:
    """A text for a person, translated when shown: the English ``msgid`` with ``{name}`` fields.
    ``str()`` gives the English (the access log's language)."""

    __slots__ = ("fields", "msgid")

    def __init__(self, msgid: str, **fields: object) -> None:
        self.msgid, self.fields = msgid, fields

    def __str__(self) -> str:
        return self.msgid.format(**self.fields)

    def in_language(self, gettext: Callable[[str], str]) -> str:
        fields = {
            name: value.in_language(gettext) if isinstance(value, Message) else value
            for name, value in self.fields.items()
        }
        return gettext(self.msgid).format(**fields)


def chosen(switch: str | None, cookie: str | None, accept_language: str | None) -> str:
    """The page's language: the switch's (``?lang=``), the cookie's, the browser's first spoken
    here, or French."""
    for given in (switch, cookie):
        if given in LANGUAGES:
            return given  # type: ignore[return-value]
    for tag in preferred(accept_language or ""):
        primary = tag.split("-", 1)[0].lower()
        if primary in LANGUAGES:
            return primary
        if tag == "*":
            return DEFAULT
    return DEFAULT


def preferred(header: str) -> list[str]:
    """The language tags of an ``Accept-Language`` header, the most wanted first (``q=0``: not
    wanted; equal weights keep their order)."""
    weighted: list[tuple[float, int, str]] = []
    for index, part in enumerate(header.split(",")[:MAX_ACCEPT_LANGUAGE]):
        tag, _, params = part.strip().partition(";")
        tag = tag.strip()
        if not tag or len(tag) > 35:
            continue
        weight = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if weight > 0:
            weighted.append((-weight, index, tag))
    return [tag for _, _, tag in sorted(weighted)]


def catalogue_files(language: str) -> list[Path]:
    return sorted((LOCALE_DIR / language / "LC_MESSAGES").glob("*.po"))


@cache
def translations(language: str) -> _gettext.NullTranslations:
    """Every catalogue of ``language`` in one (English: the msgids themselves)."""
    if language == "en":
        return _gettext.NullTranslations()
    merged: Translations | None = None
    for path in catalogue_files(language):
        with path.open("rb") as po:
            catalog = read_po(po, locale=language)
        compiled = io.BytesIO()
        write_mo(compiled, catalog)
        compiled.seek(0)
        loaded = Translations(fp=compiled)
        if merged is None:
            merged = loaded
        else:
            merged.merge(loaded)
    if merged is None:
        raise FileNotFoundError(f"no catalogue for {language} in {LOCALE_DIR}")
    return merged


@dataclass(frozen=True)
class Language:
    """One language's way of writing what the console shows."""

    code: str

    @property
    def locale(self) -> Locale:
        return Locale.parse(self.code)

    def gettext(self, message: str) -> str:
        return translations(self.code).gettext(message)

    def text(self, message: str | Message) -> str:
        return message.in_language(self.gettext) if isinstance(message, Message) else self.gettext(message)

    def when(self, value: datetime | str | None, *, seconds: bool = True) -> str:
        """A date and time in UTC as the language writes it (``29 nov. 2026 17:30:05``; 24 hours in
        both languages, the day first: an investigator reads one, whatever the page's language)."""
        if value is None or value == "":
            return ""
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        pattern = "d MMM y HH:mm:ss" if seconds else "d MMM y HH:mm"
        return format_datetime(moment, pattern, tzinfo=UTC, locale=self.code)

    def day(self, value: datetime | str) -> str:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        return format_date(moment.date(), "d MMM y", locale=self.code)

    def number(self, value: int | Decimal | str | None) -> str:
        """A count or an amount as the language writes it (``1 234,50`` / ``1,234.50``), with the
        decimals the record has (an amount is never rounded for display)."""
        if value is None or value == "":
            return ""
        amount = Decimal(value) if not isinstance(value, Decimal) else value
        exponent = amount.as_tuple().exponent
        decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        pattern = "#,##0" + ("." + "0" * decimals if decimals else "")
        return format_decimal(amount, format=pattern, locale=self.code)

    def amount(self, value: Decimal | int | None) -> str:
        """A hand's amount or seat as the language writes it, whole amounts without decimals
        (``2`` rather than ``2.00``, as the hand page shows them); ``–`` for none."""
        if value is None:
            return "–"
        amount = Decimal(value)
        if amount == amount.to_integral():
            amount = amount.quantize(Decimal(1))
        return self.number(amount)


def environment(language: str, loader: jinja2.BaseLoader, globals_: dict[str, object]) -> jinja2.Environment:
    """The console's Jinja2 environment for one language: its catalogue, and filters that write
    dates (``when``, ``day``) and numbers (``number``) as it does."""
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.i18n"],
    )
    env.install_gettext_translations(translations(language), newstyle=True)  # type: ignore[attr-defined]
    spoken = Language(language)
    env.globals.update(globals_)
    env.globals.update(
        language=language,
        languages=[(code, NAMES[code]) for code in LANGUAGES],
        text=spoken.text,
    )
    env.filters["when"] = spoken.when
    env.filters["day"] = spoken.day
    env.filters["number"] = spoken.number
    env.filters["amount"] = spoken.amount
    return env
