"""coffre's own fixtures (tests/fixtures): every input normalizes to exactly its expected canonical
bytes, every event type of the catalogue has one, and, with the regulator's schemas at hand,
every expected output validates against them.

The inputs are written in the forms operators send (the annex's and the schema's, XML and JSON);
the expected files were generated once by ``tests/fixtures/regenerate.py`` and checked by hand.
A change of normalization shows here as a byte difference, to be reviewed before regenerating.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from coffre.cli import main
from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.codec import split_documents
from coffre.domain.normalize import normalize

from events import EVENTS, EXPECTED, FAMILIES, expected_path, fixture_inputs, render

INPUTS = fixture_inputs()


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


# --------------------------------------------------------------------------- conformance (always runs)


@pytest.mark.parametrize("path", INPUTS, ids=_id)
def test_fixture_normalizes_to_exactly_its_expected_bytes(path: Path):
    assert render(path.read_bytes()) == expected_path(path).read_bytes()


def test_coffre_normalize_prints_the_expected_files(capsysbinary):
    assert main(["normalize", str(EVENTS)]) == 0
    out = capsysbinary.readouterr().out
    in_cli_order = sorted(p for p in EVENTS.rglob("*") if p.suffix in (".xml", ".json"))
    assert out == b"".join(expected_path(p).read_bytes() for p in in_cli_order)


def test_every_event_type_has_a_fixture_filed_under_its_family():
    seen: dict[str, set[str]] = {}
    for path in INPUTS:
        for raw in split_documents(path.read_bytes()):
            event = normalize(raw)
            assert event.family == path.parent.name, path
            assert path.stem.split("-")[0] == event.xml_tag, path
            seen.setdefault(event.family, set()).add(event.xml_tag)
    assert set(seen) == set(FAMILIES)
    assert {tag for tags in seen.values() for tag in tags} == set(EVENT_TYPES)


def test_every_expected_file_has_its_input():
    assert {p for p in EXPECTED.rglob("*") if p.is_file()} == {expected_path(p) for p in INPUTS}


def test_the_fixtures_hold_xml_and_json_and_several_events_per_file():
    suffixes = {p.suffix for p in INPUTS}
    several = [p for p in INPUTS if len(split_documents(p.read_bytes())) > 1]
    assert suffixes == {".xml", ".json"}
    assert {p.suffix for p in several} == {".xml", ".json"}


# --------------------------------------------------------------------------- cross-check (needs ../shared)


def test_every_expected_output_validates_against_the_regulators_xsds(schema_set):
    failures = []
    for path in INPUTS:
        for line in expected_path(path).read_bytes().splitlines():
            family = path.parent.name
            errors = schema_set.errors(family, line)
            if errors:
                failures.append(f"{_id(path)} <{etree.fromstring(line).tag}>: {errors}")
    assert failures == []
