"""Normalization rules of PRODUCT.md "Events", one test each, and the same rules checked over
coffre's fixture files (tests/fixtures): their inputs use every form the contract accepts, their
expected outputs hold only the schema's forms."""

from __future__ import annotations

import ipaddress
import json
import random
import re
from decimal import Decimal

import pytest
from lxml import etree

from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.catalogue.poker import VARIANTS, decode_card, normalize_regle
from coffre.domain.codec import canonical_bytes, to_json
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize

from events import POINSCRIT, expected_path, fixture_inputs, pojeu


def test_dates_with_a_zone_are_converted_to_utc_aammjjhhmmss():
    assert normalize(POINSCRIT).DateEvt == "260301090000"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2016-01-01T00:00:00", "160101000000"),  # no zone: UTC (annex: dates are UTC)
        ("2016-01-01T00:00:00Z", "160101000000"),
        ("2016-01-01T01:30:00+01:30", "160101000000"),
        ("2015-12-31T23:00:00-01:00", "160101000000"),
        ("2016-01-01T00:00:00.987", "160101000000"),  # to the second (annex: "à la seconde près")
        ("2015-12-31T24:00:00", "160101000000"),
        ("160101000000", "160101000000"),
    ],
)
def test_date_forms(given, expected):
    assert normalize(POINSCRIT.replace(b"2026-03-01T10:00:00+01:00", given.encode())).DateEvt == expected


@pytest.mark.parametrize(
    "bad", ["2016-02-30T00:00:00", "161301000000", "1999-01-01T00:00:00", "yesterday", "16010100000"]
)
def test_impossible_dates_are_refused(bad):
    with pytest.raises(Rejected) as exc:
        normalize(POINSCRIT.replace(b"2026-03-01T10:00:00+01:00", bad.encode()))
    assert exc.value.codes == ["INVALID_DATE"]
    assert exc.value.problems[0].path == "/POINSCRIT/DateEvt"


def test_annex_spellings_become_schema_spellings():
    event = normalize(POINSCRIT)
    assert event.SoldeApres == Decimal("90.05")
    assert b"<SoldeApres>90.05</SoldeApres>" in canonical_bytes(event)
    assert event.Format == "T/AS"


def test_supervision_attribute_becomes_element():
    raw = POINSCRIT.replace(b"<POINSCRIT>", b'<POINSCRIT supervision="true" retransmission="true">')
    event = normalize(raw)
    assert event.supervised and event.retransmission
    data = canonical_bytes(event)
    assert data.startswith(b'<POINSCRIT retransmission="true"><IDOper>')
    assert b"<IDEvt>12</IDEvt><Supervision></Supervision><IDJoueur>" in data


def test_supervision_false_attribute_means_absent():
    event = normalize(POINSCRIT.replace(b"<POINSCRIT>", b'<POINSCRIT supervision="false">'))
    assert not event.supervised and b"Supervision" not in canonical_bytes(event)


def test_hash_upper_case_and_ipv6_canonical():
    event = normalize(POINSCRIT)
    assert event.HashJoueur == "A94A8FE5CCB19BA61C4C0873D391E987982FBBD3"
    assert event.IPJoueur == "2001:db8::1"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2001:DB8::0:1", "2001:db8::1"),
        ("::FFFF:192.0.2.1", "::ffff:c000:201"),
        ("fe80::1%eth0", "fe80::1%eth0"),
        ("192.0.2.7", "192.0.2.7"),
    ],
)
def test_ip_forms(given, expected):
    raw = POINSCRIT.replace(b"2001:0DB8:0000:0000:0000:0000:0000:0001", given.encode())
    assert normalize(raw).IPJoueur == expected


def test_amounts_are_exact_decimals_never_floats():
    event = normalize(POINSCRIT.replace(b"100.10", b"12345678901234567.3000000001"))
    assert event.SoldeAvant == Decimal("12345678901234567.3000000001")
    assert b"<SoldeAvant>12345678901234567.3000000001</SoldeAvant>" in canonical_bytes(event)


def test_children_are_emitted_in_schema_order_whatever_the_input_order():
    root = etree.fromstring(POINSCRIT)
    children = list(root)
    reference = canonical_bytes(normalize(POINSCRIT))
    for seed in range(5):
        random.Random(seed).shuffle(children)
        shuffled = etree.Element("POINSCRIT")
        shuffled.extend(children)
        assert canonical_bytes(normalize(etree.tostring(shuffled, encoding="UTF-8"))) == reference


def test_pays_is_filled_with_fr_for_an_arjel_operators_player():
    event = normalize(pojeu())
    assert [p.Pays for p in event.Participants.Joueur] == ["FR", "FR"]


def test_regle_typos_of_the_annex_are_mapped():
    assert normalize_regle("05HPL") == "O5HPL"
    assert normalize_regle("7S JL") == "7SJL"
    assert normalize_regle(" thnl ") == "THNL"
    assert normalize(pojeu(regle="05HPL")).Regle == "O5HPL"
    assert set(VARIANTS) == {
        "THL",
        "THPL",
        "THNL",
        "O4HPL",
        "O4JL",
        "O4JPL",
        "O5HPL",
        "7SHL",
        "7SJL",
        "7SLL",
        "2T7TD",
    }


def test_card_codes_decode_per_annex_table():
    assert (decode_card(0).rank, decode_card(0).suit) == ("2", "Trèfle")
    assert (decode_card(33).rank, decode_card(33).suit) == ("10", "Carreau")
    assert (decode_card(42).rank, decode_card(42).suit) == ("D", "Cœur")
    assert (decode_card(51).rank, decode_card(51).suit) == ("A", "Pique")
    assert {decode_card(c).suit for c in range(52)} == {"Trèfle", "Carreau", "Cœur", "Pique"}
    assert len({(decode_card(c).rank, decode_card(c).suit) for c in range(52)}) == 52
    draws = normalize(pojeu(cards=(12, 51))).Jeu.Tour[1].Action
    assert [str(a.card) for a in draws[:2]] == ["5 de Trèfle", "A de Pique"]


def test_actions_keep_their_order():
    event = normalize(pojeu())
    assert [type(a).__name__ for a in event.Jeu.Tour[1].Action] == ["Draw", "Draw", "Fold"]


def test_json_input_gives_the_same_event_as_xml():
    xml_event = normalize(pojeu())
    again = normalize(to_json(xml_event))
    assert again == xml_event
    assert canonical_bytes(again) == canonical_bytes(xml_event)


def test_json_with_annex_spellings_and_numbers():
    doc = {
        "POINSCRIT": {
            "supervision": True,
            "IDOper": "0099",
            "IDCoffre": 7,
            "DateEvt": "2016-01-01T00:00:00",
            "IDEvt": 1,
            "IDJoueur": "p-1",
            "HashJoueur": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
            "IPJoueur": "192.0.2.1",
            "IDSession": "s",
            "Inscription": "i",
            "Tech": "t",
            "Description": "d",
            "Format": "CG",
            "SoldeAvant": 1000.10,
            "SoldeMouvement": 100,
            "SoldeAprès": "900.10",
        }
    }
    event = normalize(json.dumps(doc).encode())
    assert (
        event.supervised and event.SoldeAvant == Decimal("1000.10") and event.SoldeApres == Decimal("900.10")
    )


def test_ingest_assigned_idevt_replaces_the_inputs():
    event = normalize(POINSCRIT, id_evt=41)
    assert event.IDEvt == 41 and event.with_id_evt(42).IDEvt == 42


def test_the_decisions_pochat_spelling_is_poachat():
    raw = POINSCRIT.replace(b"POINSCRIT>", b"POCHAT>").replace(b"<Format>T /AS</Format>", b"")
    event = normalize(raw)
    assert event.xml_tag == "POACHAT" and canonical_bytes(event).startswith(b"<POACHAT>")


def test_annex_typo_slege_and_retransmission_element():
    raw = pojeu().replace(b"<Siege>2</Siege><Inscription>", b"<Slege>2</Slege><Inscription>")
    raw = raw.replace(
        b"<IDOper>0099</IDOper><IDCoffre>", b"<IDOper>0099</IDOper><Retransmission/><IDCoffre>", 1
    )
    event = normalize(raw)
    assert event.Participants.Joueur[1].Siege == 2 and event.retransmission
    assert canonical_bytes(event).startswith(b'<POJEU retransmission="true">')


# --------------------------------------------------------------------------- the rules over coffre's fixture files

DATES_12 = {"DateEvt", "DateMise", "DateHeure", "Date", "DateDemande", "DateEffective", "DateModif"}
DATES_12 |= {"DateFin", "DateDebut", "Timestamp", "DateCompo"}
DATES_8 = {"DateN", "DateOuverture", "DateClotureEffective"}
CERCLE_FAMILIES = {"PO", "FA"}
ANNEX_ONLY_NAMES = {"SoldeAprès", "BonusAprès", "Stackin", "Stackout", "Slege", "Retransmission", "POCHAT"}

INPUT_FORMS = {
    "xs:dateTime with a zone": rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d",
    "xs:dateTime in UTC": rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z",
    "xs:dateTime without a zone": rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[<\"]",
    "fractions of a second": rb"T\d\d:\d\d:\d\d\.\d+",
    "xs:date": rb">\d{4}-\d\d-\d\d<",
    "SoldeAprès": "<SoldeAprès>".encode(),
    "BonusAprès": "<BonusAprès>".encode(),
    "Stackin/Stackout": rb"<Stackin>",
    "supervision attribute": rb'supervision="true"',
    "supervision false": rb'supervision="false"',
    "test attribute": rb'test="true"',
    "Retransmission element": rb"<Retransmission/>",
    "POCHAT": rb"<POCHAT>",
    "Slege": rb"<Slege>",
    "lower-case hash": rb"[>\"][0-9a-f]{40}[<\"]",
    "IPv6 in upper case": rb"[>\"][0-9A-F:]*[A-F][0-9A-F:]*:[0-9A-F:]+[<\"]",
    "IPv6 with every group": rb"[>\"][0-9A-Fa-f]{1,4}(:[0-9A-Fa-f]{1,4}){7}[<\"]",
    "IPv6 compressed": rb"[>\"][0-9A-Fa-f:]*::[0-9A-Fa-f:]*[<\"]",
    "IPv4-mapped IPv6": rb"::ffff:\d+\.\d+\.\d+\.\d+",
    "IPv6 zone": rb"%[A-Za-z0-9]+<",
    "Regle 05HPL": rb"<Regle>05HPL<",
    "Regle 7S JL": rb'"7S JL"',
    "Format with spaces": rb"<Format>[^<]* / ",
    "free-text POANNUL Motif": rb"<Motif>Annulation",
    "IDEvt with leading zeros": rb"(<IDEvt>|\"IDEvt\": \")0\d",
    "negative zero": rb">-0(\.0+)?<",
    "JSON exponent": rb": \d(\.\d+)?E\+\d",
    "IBAN in paper form": rb"<PspIban> [a-z]{2}\d\d ",
    "namespaced": rb"xmlns",
    "comment and processing instruction": rb"<\?operator-tool",
    "ISO-8859-1": rb'encoding="ISO-8859-1"',
    "elements out of order": rb"<CPTERETRAIT>\s*(<!--[^>]*-->\s*)?<SoldeAvant>",
}


def _inputs() -> list[bytes]:
    return [path.read_bytes() for path in fixture_inputs()]


def _outputs() -> list[tuple[str, etree._Element]]:
    return [
        (path.parent.name, etree.fromstring(line))
        for path in fixture_inputs()
        for line in expected_path(path).read_bytes().splitlines()
    ]


@pytest.mark.parametrize("form", INPUT_FORMS)
def test_the_fixture_inputs_exercise_the_annex_and_operator_forms(form):
    assert any(re.search(INPUT_FORMS[form], raw) for raw in _inputs()), form


def test_the_fixture_outputs_hold_only_the_schema_forms():
    """Checked on the expected files themselves, with no help from coffre."""
    for family, root in _outputs():
        where = f"{family}/{root.tag} {root.findtext('IDEvt')}"
        assert root.tag in EVENT_TYPES, where
        assert "supervision" not in root.attrib and set(root.attrib) <= {"retransmission", "test"}, where
        assert all(value == "true" for value in root.attrib.values()), where
        for el in root.iter():
            assert el.tag not in ANNEX_ONLY_NAMES, where
            text = el.text or ""
            if el.tag in DATES_12:
                assert re.fullmatch(r"\d{12}", text), (where, el.tag, text)
            elif el.tag in DATES_8:
                assert re.fullmatch(r"\d{8}", text), (where, el.tag, text)
            elif el.tag == "HashJoueur":
                assert re.fullmatch(r"[0-9A-F]{40}", text), (where, text)
            elif el.tag == "IDOper":
                assert re.fullmatch(r"\d{4}", text), (where, text)
            elif el.tag in ("IDEvt", "IDCoffre"):
                assert re.fullmatch(r"0|[1-9]\d*", text), (where, el.tag, text)
            elif el.tag == "Regle":
                assert text in VARIANTS, (where, text)
            elif el.tag in ("Supervision", "Test", "Tel", "Jackpot", "Live", "Banque", "Tlo", "Champ"):
                assert text == "" and len(el) == 0, (where, el.tag)
            elif el.tag == "IPJoueur" and ":" in text:
                address, _, zone = text.partition("%")
                assert address == address.lower() and zone == zone.lower(), (where, text)
                if family in CERCLE_FAMILIES:  # types:IP: RFC 5952
                    assert address == ipaddress.IPv6Address(address).compressed, (where, text)
                else:  # Common.xsd IP: all eight groups, no "::", no zone
                    assert "::" not in text and "%" not in text and text.count(":") == 7, (where, text)
        if family == "PO" and root.tag == "POJEU":
            for player in root.iter("Joueur"):
                assert re.fullmatch(r"[A-Z]{2}", player.findtext("Pays") or ""), where
                assert [c.tag for c in player][:3] in (
                    ["IDOper", "Pays", "IDJoueur"],
                    ["Oper", "Pays", "IDJoueur"],
                )
