"""The documentation's examples and lists are true: they are checked against the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONTRACT = (DOCS / "input-contract.md").read_text(encoding="utf-8")
FIXTURES = DOCS.parent / "tests" / "fixtures" / "events"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", CONTRACT, re.DOTALL)


def test_the_xml_example_is_recorded_as_documented():
    given, recorded = blocks("xml")
    assert canonical_bytes(normalize(given.encode(), id_evt=1)) == recorded.strip().encode()


def test_the_json_example_normalizes():
    example, _ = blocks("json")
    event = normalize(example.encode())
    assert event.xml_tag == "POJEU" and event.Participants.Joueur[0].Pays == "FR"


def test_the_documented_rejection_has_the_fields_ingest_writes():
    from coffre.domain.errors import Rejected
    from coffre.domain.messages import Rejection

    _, documented = blocks("json")
    try:
        normalize(b"<POINSCRIT/>")
    except Rejected as refusal:
        written = json.loads(Rejection.of(refusal, b"<POINSCRIT/>", [], "in", 0, 0).encode())
    assert set(json.loads(documented)) == set(written)


def test_the_documented_event_list_is_the_catalogue():
    table = CONTRACT.split("## Which events", 1)[1].split("## XML", 1)[0]
    documented = set(re.findall(r"\b[A-Z]{4,}\b", table)) - {
        "PO",
        "CJ",
        "PASP",
        "PAHI",
        "LOTI",
        "LOJI",
        "FA",
        "MO",
        "PDV",
        "ARJEL",
        "UNKNOWN_EVENT",
        "POCAVE",
        "POPARTIE",
        "POEVERS",
    }
    assert documented == set(EVENT_TYPES)


def test_the_readme_configuration_table_is_the_settings():
    from coffre.config import Settings

    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"^\| `(COFFRE_[A-Z0-9_]+)` \| (`[^`]*`|\(none\)) \|", table, re.MULTILINE)
    documented = {name: value.strip("`") if value != "(none)" else "" for name, value in cells}
    expected = {}
    for name, field in Settings.model_fields.items():
        default = field.default_factory() if field.default_factory else field.default
        if isinstance(default, set):
            default = ",".join(sorted(default))
        elif isinstance(default, tuple):
            default = ";".join(default)
        expected[f"COFFRE_{name.upper()}"] = "" if default is None else str(default)
    assert documented == expected


def test_the_documented_json_of_a_sports_line_normalizes():
    from coffre.domain.errors import Rejected

    documented = json.loads(re.search(r'"Pronostics": (\[.*?\])\}\]`', CONTRACT).group(1))
    event = json.loads((FIXTURES / "PASP" / "PASPMISE-live.json").read_text(encoding="utf-8"))
    line = event["PASPMISE"]["PaSp"][0]["LigSp"][0]
    line["Pronostics"] = documented
    normalized = normalize(json.dumps(event).encode())
    assert normalized.PaSp[0].LigSp[0].groups[0][0].pairs == [("SCORE-EXACT", "2-1")]
    del line["Pronostics"]
    line["PronoSp"] = {"TypeRes": "SCORE-EXACT", "Choix": "2-1"}  # the element names alone: refused
    with pytest.raises(Rejected) as refused:
        normalize(json.dumps(event).encode())
    assert "UNEXPECTED_ELEMENT" in refused.value.codes


def test_the_documented_principal_mapping_is_the_one_the_secured_tests_run_with():
    """docs/operations.md gives the brokers' ``ssl.principal.mapping.rules`` that makes a mutual-TLS
    principal the plain name of the ACL table: the rule ``tests/apache_kafka.py`` runs the secured
    broker with (where the vault logs in by certificate under the table's ACLs), and it does map a
    certificate subject to its CN."""
    operations = (DOCS / "operations.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\s*ssl\.principal\.mapping\.rules=(\S+)$", operations, re.MULTILINE)
    tested = re.findall(
        r'"ssl\.principal\.mapping\.rules": "([^"]+)"',
        (DOCS.parent / "tests" / "apache_kafka.py").read_text(encoding="utf-8"),
    )
    assert documented == tested and len(tested) == 1, (documented, tested)
    rule = re.fullmatch(r"RULE:(.+)/(.*)/,DEFAULT", tested[0])
    assert rule is not None
    for subject in ("CN=coffre-vault,O=coffre tests", "CN=coffre-vault", "C=FR,O=Acme,CN=coffre-vault"):
        assert re.sub(rule[1], rule[2].replace("$1", r"\1"), subject) == "coffre-vault"
