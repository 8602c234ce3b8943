"""The console's languages (services/regulator/i18n.py): which one a page is in, every text of the
templates and of the console's code in the French catalogue, and dates and numbers as each
language writes them. The pages themselves, in both languages, are in tests/test_console.py and
the browser tests."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir, extract_python
from babel.messages.pofile import read_po
from coffre_regulator import i18n

from coffre import plots

REGULATOR = Path(i18n.__file__).parent
PICTURES = [Path(plots.__file__)]
FIELDS = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}")


def source_messages() -> set[str]:
    """Every text the console marks for translation, extracted as ``pybabel extract`` does with
    services/regulator/babel.cfg."""
    method_map = [("**/templates/**.html", "jinja2"), ("**.py", "python")]
    options = {
        "**/templates/**.html": {
            "trim_blocks": "true",
            "lstrip_blocks": "true",
            "extensions": "jinja2.ext.i18n",
        }
    }
    keywords = {"_": None, "N_": None, "gettext": None, "pgettext": ((1, "c"), 2), "ngettext": (1, 2)}
    found = set()
    for _, _, message, _, _ in extract_from_dir(REGULATOR, method_map, options, keywords=keywords):
        found.add(message if isinstance(message, str) else message[0])
    for path in PICTURES:  # the pictures' own texts (axis labels, notes), shown on the console's pages
        with path.open("rb") as source:
            for _, _, message, _ in extract_python(source, ["N_"], [], {}):
                found.add(message)
    return found


def french_catalogue() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in i18n.catalogue_files("fr"):
        with path.open("rb") as po:
            for message in read_po(po, locale="fr"):
                if message.id:
                    out[message.id if isinstance(message.id, str) else message.id[0]] = (
                        message.string if isinstance(message.string, str) else message.string[0]
                    )
    return out


def test_every_text_of_the_console_has_its_french():
    messages, french = source_messages(), french_catalogue()
    assert len(messages) > 100  # the extraction found the templates and the code
    missing = sorted(m for m in messages if not french.get(m))
    assert not missing, f"no French for {missing}: pybabel update, then translate (docs/console.md)"


def test_a_translation_keeps_the_fields_of_its_english():
    for english, french in french_catalogue().items():
        if french:
            assert sorted(FIELDS.findall(french)) == sorted(FIELDS.findall(english)), english


def test_the_catalogue_loads_and_translates():
    assert i18n.Language("fr").gettext("Search") == "Recherche"
    assert i18n.Language("en").gettext("Search") == "Search"
    message = i18n.Message("no event of player {player} is in the index", player="alice")
    assert i18n.Language("fr").text(message) == "aucun événement du joueur alice n'est dans l'index"
    assert str(message) == "no event of player alice is in the index"  # the access log's
    nested = i18n.Message("{name}: a whole number, not “{text}”", name=i18n.Message("from IDEvt"), text="x")
    assert i18n.Language("fr").text(nested) == "IDEvt de début : un nombre entier, pas « x »"


@pytest.mark.parametrize(
    ("switch", "cookie", "header", "expected"),
    [
        (None, None, None, "fr"),  # the regulator's language by default
        (None, None, "en-US,en;q=0.9", "en"),
        (None, None, "de-DE, en;q=0.5", "en"),  # the first language spoken here
        (None, None, "de", "fr"),
        (None, None, "en;q=0, fr;q=0.1", "fr"),  # q=0: not wanted
        (None, None, "fr;q=0.4, en;q=0.8", "en"),  # by weight, not by order
        (None, None, "*", "fr"),
        (None, None, "x" * 5000, "fr"),
        (None, "en", "fr", "en"),  # the switch's cookie over the browser's
        ("fr", "en", "en", "fr"),  # the switch itself over both
        (None, "klingon", "en", "en"),  # a cookie not spoken here is ignored
    ],
)
def test_the_page_language(switch, cookie, header, expected):
    assert i18n.chosen(switch, cookie, header) == expected


def test_dates_and_amounts_as_each_language_writes_them():
    moment = datetime(2026, 11, 29, 17, 30, 5, tzinfo=UTC)
    french, english = i18n.Language("fr"), i18n.Language("en")
    assert french.when(moment) == "29 nov. 2026 17:30:05"
    assert english.when(moment) == "29 Nov 2026 17:30:05"
    assert french.when("2026-11-29T17:30:05Z") == french.when(moment)  # the index's stamps
    assert french.day("2026-11-29") == "29 nov. 2026"
    nbsp = "\u202f"  # CLDR's French thousands separator
    assert french.number(Decimal("1234.50")) == f"1{nbsp}234,50"  # never rounded
    assert english.number(Decimal("1234.50")) == "1,234.50"
    assert english.number(Decimal("0.005")) == "0.005"
    assert french.number(1_000_000) == f"1{nbsp}000{nbsp}000"
    assert french.number(None) == ""
