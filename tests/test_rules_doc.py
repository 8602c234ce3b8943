"""docs/rules.md, the rules of the five texts with the finding code that checks each and its known
answer, is held against the code: every code it names is registered, every registered code is in it,
every test it cites exists, and every rule with a code cites the test that is its known answer. The
file is coffre/domain/audit/rules.md (package data, read by the console at run time), docs/rules.md
a link to it; its rows are read by coffre.domain.audit.rules, as the console reads them.

The known answers of the few codes and rules that had none are at the end of this file."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from coffre.domain.audit import rules
from coffre.domain.audit.findings import CODES
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.codec import canonical_bytes
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rules.md"
AUDIT_MODULES = ("hand", "trail", "single", "identity", "events", "table", "tournament")
"""Every module of coffre.domain.audit that registers codes; one not written yet is skipped."""

PLACEHOLDER = "—"


def registered() -> dict[str, tuple[str, str]]:
    """CODES once every checking module has registered its codes (and the auditor its own)."""
    for name in AUDIT_MODULES:
        if (ROOT / "coffre" / "domain" / "audit" / f"{name}.py").exists():
            importlib.import_module(f"coffre.domain.audit.{name}")
    importlib.import_module("coffre_auditor.join")  # AUDIT_FAILED
    return dict(CODES)


ROWS = rules.rows()


def test_the_tables_are_read():
    ids = [row.id for row in ROWS]
    assert len(ids) > 80, ids
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert all(row.source and row.checks for row in ROWS), [row.id for row in ROWS if not row.source]


def test_every_code_the_table_names_is_registered():
    codes = registered()
    unknown = sorted({(row.id, code) for row in ROWS for code in row.codes if code not in codes})
    assert unknown == []


def test_every_registered_code_is_in_the_table():
    """The console cites, for each finding, the rows that name its code: none may have no row."""
    assert sorted(set(registered()) - set(rules.rows_by_code())) == []


def test_docs_rules_md_is_the_packaged_file_not_a_copy():
    assert DOC.is_symlink() and DOC.resolve() == ROOT / "coffre" / "domain" / "audit" / "rules.md"
    assert rules.text() == DOC.read_text(encoding="utf-8")


def test_a_row_that_repeats_a_rule_quotes_it():
    by_id = {row.id: row for row in ROWS}
    assert by_id["C2b"].rule == "(same)" and by_id["C2b"].quote == by_id["C2a"].rule
    assert by_id["C2a"].quote.startswith("« la compétition")
    assert by_id["C3"].source == "décret art. 1 III 1°" and by_id["C3"].section.startswith("1.1 The décret")
    assert [row.id for row in rules.rows_by_code()["ROUND_OUT_OF_ORDER"]] == ["C3", "A44"]


def test_every_registered_code_has_its_meaning_in_french():
    """services/regulator/locale/fr/LC_MESSAGES/findings.po: the msgid is the meaning as registered
    (a meaning reworded in the code must be translated again), the msgstr not empty."""
    from babel.messages.pofile import read_po

    po = ROOT / "services" / "regulator" / "locale" / "fr" / "LC_MESSAGES" / "findings.po"
    with po.open("rb") as file:
        catalogue = read_po(file, locale="fr", domain="findings")
    french = {message.id: message.string for message in catalogue if message.id}
    missing = sorted(
        code for code, (_, meaning) in registered().items() if not french.get(meaning, "").strip()
    )
    assert missing == []


def test_every_row_with_a_code_cites_its_known_answer():
    """A row that names a code cites at least one test, and no placeholder is left."""
    missing = [row.id for row in ROWS if row.codes and not row.citations]
    placeholders = [row.id for row in ROWS if PLACEHOLDER in row.known_answer]
    assert missing == [] and placeholders == []


def test_a_row_without_a_code_says_why_or_cites_its_test():
    """A rule checked by no finding code is checked at ingest (a test cited) or argued in words."""
    silent = [row.id for row in ROWS if not row.codes and not row.citations and len(row.checks) < 40]
    assert silent == []


def _parametrized_ids(path: Path, name: str) -> set[str] | None:
    """The ids of ``name``'s single-argument parametrization with string values, or None if that
    cannot be told (no such parametrization, or values that are not strings)."""
    for folder in (path.parent, ROOT / "tests"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    module = importlib.import_module(path.stem)
    ids: set[str] = set()
    for mark in getattr(getattr(module, name), "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], list(mark.args[1])
        if "," in names or not all(isinstance(v, str) for v in values):
            return None
        ids |= set(values)
    return ids or None


@functools.cache
def _defined(file: Path) -> set[str]:
    """The functions ``file`` defines at its top level (parsed once: 171 citations name 19 files)."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_cited_test_exists():
    """The file exists and defines the test; a parametrized id is one of its parameters."""
    wrong = []
    for row in ROWS:
        for path, name, param in row.citations:
            file = ROOT / path
            if not file.is_file():
                wrong.append((row.id, path))
                continue
            if name not in _defined(file):
                wrong.append((row.id, f"{path}::{name}"))
            elif param is not None:
                ids = _parametrized_ids(file, name)
                if ids is not None and param not in ids:
                    wrong.append((row.id, f"{path}::{name}[{param}]"))
    assert wrong == []


def test_the_hand_audit_and_the_money_trail_link_here():
    for doc in ("hand-audit.md", "money-trail.md"):
        assert "(rules.md)" in (ROOT / "docs" / doc).read_text(encoding="utf-8"), doc


# --------------------------------------------------------------------------- known answers

DEMO = ROOT / "coffre" / "demo" / "events" / "tournament"


def demo() -> list[Event]:
    return [normalize(p.read_bytes()) for p in sorted(DEMO.iterdir()) if p.suffix in (".xml", ".json")]


def _index(events: list[Event], tag: str, who: str) -> int:
    return next(i for i, e in enumerate(events) if e.xml_tag == tag and getattr(e, "IDJoueur", None) == who)


def _found(events: list[Event]) -> list[tuple[int, str]]:
    trail = MoneyTrail()
    return [(e.IDEvt, f.code) for e in events for f in trail.observe(e)]


def test_a_registration_repeated_is_found():
    """Annexe 1.3.6.b: « Le code Inscription est un code unique généré lors de l'inscription »."""
    events = demo()
    i = _index(events, "POINSCRIT", "bruno")
    again = events[i].model_copy(update={"IDEvt": 900, "SoldeAvant": events[i].SoldeApres})
    again = again.model_copy(update={"SoldeApres": again.SoldeAvant - again.SoldeMouvement})
    assert _found([*events[: i + 1], again]) == [(900, "REGISTRATION_REPEATED")]


def test_a_settlement_without_registration_is_found():
    """Annexe 1.3.6.c.3: a POBILAN ends a participation, so it needs one."""
    events = demo()
    i = _index(events, "POBILAN", "david")
    bilan = events[i]
    assert _found([*events[:i], bilan.model_copy(update={"Inscription": "T42-nobody"})]) == [
        (bilan.IDEvt, "POBILAN_UNREGISTERED")
    ]


def test_a_bonus_that_does_not_chain_is_found():
    """Annexe 1.3.6.c.*: « BonusAvant … Montant du compartiment bonus avant le mouvement financier »:
    alice's bonus after her registration is 10, her next event says it was 5 before."""
    events = demo()
    i = _index(events, "POINSCRIT", "alice")
    j = next(k for k in range(i + 1, len(events)) if getattr(events[k], "IDJoueur", None) == "alice")
    bonus = {"BonusAvant": Decimal(10), "BonusMouvement": Decimal(0), "BonusApres": Decimal(10)}
    changed = list(events)
    changed[i] = events[i].model_copy(update=bonus)
    changed[j] = events[j].model_copy(
        update={"BonusAvant": Decimal(5), "BonusMouvement": Decimal(0), "BonusApres": Decimal(5)}
    )
    assert _found(changed[: j + 1]) == [(events[j].IDEvt, "BONUS_CHAIN_BROKEN")]


def _hand_audit() -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "audit"))
    return importlib.import_module("hands")


def test_a_card_dealt_after_the_hand_is_over_is_found():
    """TDA r. 28: « lorsque le coup se termine avant la River, il est interdit de montrer les cartes
    à venir ». The small hand, but seat 2 folds to seat 3's bet on the flop: the turn and the river
    dealt after it are reported."""
    hands = _hand_audit()
    event = hands.small_hand()
    jeu = event["POJEU"]["Jeu"]["Tour"]
    flop = hands.tours(event)["flop"]
    flop["Action"][-1] = hands.fold(2)
    flop["Total"] = "0"  # seat 3's bet of 0.10 is uncalled and comes back
    hands.tours(event)["turn"]["Action"] = [hands.draw(None, 36)]
    hands.tours(event)["river"]["Action"] = [hands.draw(None, 27)]
    del hands.tours(event)["river"]["Total"]
    event["POJEU"]["Jeu"]["Tour"] = [t for t in jeu if t["name"] != "reveal"]
    hands.finance(event, 2).update(Total="0.06", CaveApres="0.94", Net="-0.06")
    hands.finance(event, 3).update(Total="0.06", CaveApres="1.09", Net="0.09")
    found = hands.audit(event)
    assert {f.code for f in found} == {"CARD_COUNT_WRONG"}, [f.as_dict() for f in found]
    assert "after the hand is over" in found[0].message
    # the same hand without the rabbit is clean
    event["POJEU"]["Jeu"]["Tour"] = [
        t for t in event["POJEU"]["Jeu"]["Tour"] if t["name"] not in ("turn", "river")
    ]
    assert hands.audit(json.loads(json.dumps(event))) == []


def test_a_round_without_an_action_is_refused():
    """Annexe 1.3.6.c.2 (Tour): « au moins une action par tour »: refused at ingest."""
    event = _hand_audit().small_hand()
    event["POJEU"]["Jeu"]["Tour"][3]["Action"] = []  # the turn
    with pytest.raises(Rejected) as exc:
        normalize(json.dumps(event).encode())
    assert [str(p.code) for p in exc.value.problems] == ["TOO_FEW_OCCURRENCES"]


@pytest.mark.parametrize("form", ["json", "xml"])
def test_a_round_with_no_action_element_at_all_is_refused(form):
    """Annexe 1.3.6.c.2: the same rule when the ``Action`` element is left out altogether, not only
    when it is an empty list (it passed on main de91a12)."""
    event = _hand_audit().small_hand()
    del event["POJEU"]["Jeu"]["Tour"][3]["Action"]  # the turn
    raw = json.dumps(event).encode()
    if form == "xml":
        raw = canonical_bytes(normalize(json.dumps(_hand_audit().small_hand()).encode()))
        raw = re.sub(rb"(<Tour name=\"turn\"[^>]*>.*?</Timestamp>).*?(</Tour>)", rb"\1\2", raw, flags=re.S)
    with pytest.raises(Rejected) as exc:
        normalize(raw)
    assert "TOO_FEW_OCCURRENCES" in [str(p.code) for p in exc.value.problems]
