"""PASP (sports bets) and PAHI (horse-race bets): order, interleaved groups, rejections, every
optional element, round trips, on coffre's own fixtures (tests/fixtures/events/PASP and PAHI),
their outputs validated against the XSDs when the regulator's schemas are at hand. The
regulator's samples are cross-checked too (they skip without ../shared)."""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from lxml import etree

import coffre.domain.catalogue.betting  # noqa: F401  (registers PASP and PAHI)
from coffre.domain.catalogue.base import EVENT_TYPES
from coffre.domain.catalogue.betting import PASPMISE
from coffre.domain.codec import canonical_bytes, split_documents, to_json
from coffre.domain.errors import ReasonCode, Rejected
from coffre.domain.normalize import normalize
from coffre.domain.xmlmodel import to_data

from conftest import (
    REFERENCE,
    assert_sample_normalizes,
    assert_schema_valid,
    own_and_sample_params,
    reference_or_skip,
    sample_params,
)
from events import canonical, fixture

SAMPLES = sample_params("PASP") + sample_params("PAHI")
OWN_AND_SAMPLES = own_and_sample_params("PASP", "PAHI")
OWN_AND_SAMPLES_XML = own_and_sample_params("PASP", "PAHI", xml_only=True)


def sample(family: str, name: str) -> bytes:
    """One of the regulator's sample files (for the cross-checks only)."""
    reference_or_skip()
    return (REFERENCE / "samples" / family / name).read_bytes()


def edited(raw: bytes, edit: Callable[[etree._Element], object]) -> bytes:
    """The document after ``edit`` changed its parsed tree in place."""
    root = etree.fromstring(raw)
    edit(root)
    return etree.tostring(root)


def element(tag: str, text: str | None = None) -> etree._Element:
    el = etree.Element(tag)
    el.text = text
    return el


def problems(raw: bytes) -> list[tuple[str, str]]:
    with pytest.raises(Rejected) as caught:
        normalize(raw)
    return [(str(p.code), p.path) for p in caught.value.problems]


def line_tags(event: PASPMISE, bet: int = 0, line: int = 0) -> list[str]:
    return [item.xml_tag for item in event.PaSp[bet].LigSp[line].Pronostics]


# --------------------------------------------------------------------------- registration


def test_events_are_registered_in_their_families():
    for tag in ("PASPMISE", "PASPANNUL", "PASPGAIN"):
        assert EVENT_TYPES[tag].family == "PASP"
    for tag in ("PAHIMISE", "PAHIANNUL", "PAHIGAIN"):
        assert EVENT_TYPES[tag].family == "PAHI"


# --------------------------------------------------------------------------- the regulator's samples (cross-checks)


@pytest.mark.parametrize("path", SAMPLES)
def test_sample_normalizes_and_validates(path: Path, schema_set):
    assert_sample_normalizes(path, schema_set)


@pytest.mark.parametrize(
    ("path", "count"), [("PASP/PASPGAIN9.xml", 2), ("PASP/PASPMISE13.xml", 2), ("PAHI/PAHIMISE4.xml", 2)]
)
def test_regulators_files_holding_several_events_are_split(path: str, count: int):
    family, name = path.split("/")
    events = [normalize(raw) for raw in split_documents(sample(family, name))]
    assert len(events) == count
    assert len({e.Tech for e in events}) == count


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("path", OWN_AND_SAMPLES)
def test_round_trips(path: Path):
    for raw in split_documents(path.read_bytes()):
        event = normalize(raw)
        assert normalize(canonical_bytes(event)) == event
        assert normalize(to_json(event)) == event


@pytest.mark.parametrize(("name", "count"), [("PASPGAIN-two", 2), ("PAHIMISE-two", 2)])
def test_files_holding_several_events_are_split(name: str, count: int):
    events = [normalize(raw) for raw in split_documents(fixture(name))]
    assert len(events) == count
    assert len({e.Tech for e in events}) == count


def test_values_are_read_exactly():
    event = normalize(fixture("PASPMISE-pairs"))
    line = event.PaSp[0].LigSp[0]
    assert line.Part == ["PARIS FC", "OL LYONNES"]
    assert line.Pronostics[0].pairs == [
        ("1N2-FT", "Vainqueur\xa0: OL Lyonnes"),  # a non-breaking space, kept (free text)
        ("BUT-1ER", "Première buteuse : Éloïse Mercier"),
    ]
    assert line.Pronostics[1].value == Decimal("6.40")
    gain = normalize(fixture("PASPGAIN-cashout"))
    assert gain.Cashout.Rachat == Decimal("7.75") and gain.Cashout.Cote == Decimal("3.10")
    race = normalize(fixture("PAHIMISE-champ"))
    prono = race.Desc[0].PronoPH
    assert (prono.Base, prono.Associes, prono.Champ, prono.Combinaison, prono.Tlo) == (
        ["9", "14"],
        ["1", "5", "12", "7"],
        True,
        True,
        False,
    )
    assert normalize(fixture("PAHIMISE-tlo")).Desc[0].PronoPH.Tlo is True


# --------------------------------------------------------------------------- order


def shuffled_children(raw: bytes, seed: int) -> bytes:
    """The root's children in a random order, elements of the same name kept in their relative order."""
    root = etree.fromstring(raw)
    children = [c for c in root if isinstance(c.tag, str)]
    by_tag: dict[str, list[etree._Element]] = {}
    for child in children:
        by_tag.setdefault(child.tag, []).append(child)
    order = [c.tag for c in children]
    random.Random(seed).shuffle(order)
    queues = {tag: iter(elements) for tag, elements in by_tag.items()}
    for child in children:
        root.remove(child)
    for tag in order:
        root.append(next(queues[tag]))
    return etree.tostring(root)


@pytest.mark.parametrize("path", OWN_AND_SAMPLES_XML)
def test_input_order_of_top_level_children_does_not_matter(path: Path):
    for raw in split_documents(path.read_bytes()):
        expected = canonical_bytes(normalize(raw))
        for seed in range(5):
            assert canonical_bytes(normalize(shuffled_children(raw, seed))) == expected


def test_line_children_outside_the_group_may_come_in_any_order():
    def move_renc_last(root: etree._Element) -> None:
        line = root.find("PaSp/LigSp")
        line.append(line.find("Renc"))
        for part in line.findall("Part"):  # after the group, in their relative order
            line.append(part)

    raw = fixture("PASPMISE-interleaved")
    assert canonical_bytes(normalize(edited(raw, move_renc_last))) == canonical_bytes(normalize(raw))


def test_interleaved_prono_and_cote_survive_a_round_trip():
    raw = fixture("PASPMISE-interleaved")
    event = normalize(raw)
    assert line_tags(event) == ["PronoSp", "Cote", "PronoSp", "Cote"]
    out = canonical_bytes(event)
    line = etree.fromstring(out).find("PaSp/LigSp")
    assert [c.tag for c in line][-4:] == ["PronoSp", "Cote", "PronoSp", "Cote"]
    assert [c.findtext("Choix") or c.text for c in line][-4:] == ["STADE TOULOUSAIN", "1.45", "NUL", "21.00"]
    assert normalize(out) == event

    def group_the_cotes(root: etree._Element) -> None:  # P C P C -> P P C C: one group, another meaning
        line = root.find("PaSp/LigSp")
        line.append(line.findall("Cote")[0])
        line.append(line.findall("Cote")[-1])

    regrouped = normalize(edited(raw, group_the_cotes))
    assert line_tags(regrouped) == ["PronoSp", "PronoSp", "Cote", "Cote"]
    assert [len(g) for g in regrouped.PaSp[0].LigSp[0].groups] == [4]
    assert [len(g) for g in event.PaSp[0].LigSp[0].groups] == [2, 2]
    assert canonical_bytes(regrouped) != out
    assert normalize(canonical_bytes(regrouped)) == regrouped


def test_type_res_and_choix_pairs_keep_their_order():
    raw = fixture("PASPMISE-pairs")
    out = canonical_bytes(normalize(raw))
    prono = etree.fromstring(out).find("PaSp/LigSp/PronoSp")
    assert [(c.tag, c.text) for c in prono] == [
        ("TypeRes", "1N2-FT"),
        ("Choix", "Vainqueur\xa0: OL Lyonnes"),
        ("TypeRes", "BUT-1ER"),
        ("Choix", "Première buteuse : Éloïse Mercier"),
    ]


# --------------------------------------------------------------------------- empty markers and optional groups


def test_live_and_banque_are_empty_markers(optional_schema_set):
    def add_markers(root: etree._Element) -> None:
        line = root.find("PaSp/LigSp")
        second_cote = line.findall("Cote")[1]
        second_cote.addnext(element("Banque", ""))
        second_cote.addnext(element("Live"))

    event = normalize(edited(fixture("PASPMISE-interleaved"), add_markers))
    assert line_tags(event) == ["PronoSp", "Cote", "PronoSp", "Cote", "Live", "Banque"]
    out = canonical_bytes(event)
    assert b"<Cote>21.00</Cote><Live></Live><Banque></Banque></LigSp>" in out
    assert_schema_valid(optional_schema_set, "PASP", out)
    assert normalize(out) == event
    assert normalize(to_json(event)) == event


def test_a_line_may_hold_no_prediction_and_a_prediction_no_pair(optional_schema_set):
    def strip(root: etree._Element) -> None:
        lines = root.findall("PaSp/LigSp")
        for child in lines[0].findall("PronoSp") + lines[0].findall("Cote"):
            lines[0].remove(child)
        prono = lines[1].find("PronoSp")
        for child in list(prono):
            prono.remove(child)

    event = normalize(edited(fixture("PASPMISE-system"), strip))
    assert event.PaSp[0].LigSp[0].Pronostics == []
    assert event.PaSp[0].LigSp[1].Pronostics[0].pairs == []
    out = canonical_bytes(event)
    assert b"<Part>MONACO</Part></LigSp>" in out and b"<PronoSp></PronoSp><Cote>1.55</Cote>" in out
    assert_schema_valid(optional_schema_set, "PASP", out)


def test_cashout_odds_may_be_below_one(optional_schema_set):
    raw = edited(fixture("PASPGAIN-cashout"), lambda root: setattr(root.find("Cashout/Cote"), "text", "0.85"))
    event = normalize(raw)
    assert event.Cashout.Cote == Decimal("0.85")
    assert_schema_valid(optional_schema_set, "PASP", canonical_bytes(event))


# --------------------------------------------------------------------------- the LigSp group against the schema


FRAGMENTS = {
    "P": "<PronoSp><TypeRes>123CD</TypeRes><Choix>NUL</Choix></PronoSp>",
    "E": "<PronoSp/>",
    "C": "<Cote>2</Cote>",
    "L": "<Live/>",
    "B": "<Banque/>",
}


def with_line_items(items: str) -> bytes:
    """The PASPMISE fixture (in schema form) with its line's group members replaced by ``items``."""
    raw = canonical("PASPMISE").decode()
    head, rest = raw.split("<PronoSp>", 1)
    tail = rest.split("</LigSp>", 1)[1]
    return (head + "".join(FRAGMENTS[i] for i in items) + "</LigSp>" + tail).encode()


def group_sequences() -> list[str]:
    rng = random.Random(20240611)
    sequences = [
        "",
        "P",
        "E",
        "PC",
        "PPCCLB",
        "PLB",
        "PB",
        "PCLBPCLB",
        "C",
        "L",
        "B",
        "PLC",
        "PBL",
        "PLL",
        "PBB",
        "PCBC",
    ]
    sequences += ["PC" * 64, "PC" * 65, "P" + "C" * 64, "P" + "C" * 65, "PB" * 64, "PB" * 65, "P" * 64 + "C"]
    sequences += ["".join(rng.choice("PPPECCLB") for _ in range(rng.randint(1, 9))) for _ in range(120)]
    return sequences


LINE_GROUPS = re.compile(r"(?:[PE]{1,64}C{0,64}L?B?){0,64}")
"""The XSD's content model of a LigSp's members, as a regular expression over their initials
(backtracking: fine for the short lines below, exponential on long refused runs of PronoSp)."""


def test_line_groups_are_checked_as_the_schema_does(optional_schema_set):
    """(PronoSp{1,64}, Cote{0,64}, Live?, Banque?){0,64}: coffre accepts what the XSD accepts.

    The content model is written above as a regular expression; with the regulator's schemas
    at hand, the XSD itself is asked too. Kept to sizes libxml2 counts right: it rejects some
    larger valid lines, such as 40 groups of two PronoSp and a Cote (see
    :func:`coffre.domain.catalogue.betting.check_line_groups`).
    """
    for items in group_sequences():
        raw = with_line_items(items)
        schema_ok = LINE_GROUPS.fullmatch(items) is not None
        if optional_schema_set is not None:
            assert (optional_schema_set.errors("PASP", raw) == []) == schema_ok, items
        try:
            event = normalize(raw)
        except Rejected as rejected:
            assert not schema_ok, (items, rejected.problems)
            assert all("/LigSp[1]/" in p.path for p in rejected.problems), rejected.problems
            continue
        assert schema_ok, items
        assert_schema_valid(optional_schema_set, "PASP", canonical_bytes(event))
        assert "".join("P" if t == "PronoSp" else t[0] for t in line_tags(event)) == items.replace("E", "P")


@pytest.mark.parametrize(
    ("items", "code", "where"),
    [
        ("CP", "UNEXPECTED_ELEMENT", "Cote[1]"),
        ("LP", "UNEXPECTED_ELEMENT", "Live[1]"),
        ("PLC", "UNEXPECTED_ELEMENT", "Cote[1]"),
        ("PBL", "UNEXPECTED_ELEMENT", "Live[1]"),
        ("PCLL", "TOO_MANY_OCCURRENCES", "Live[2]"),
        ("PBB", "TOO_MANY_OCCURRENCES", "Banque[2]"),
        ("P" + "C" * 65, "TOO_MANY_OCCURRENCES", "Cote[65]"),
        ("PC" * 65, "TOO_MANY_OCCURRENCES", "PronoSp[65]"),
    ],
)
def test_misplaced_group_members_are_named(items: str, code: str, where: str):
    assert problems(with_line_items(items)) == [(code, f"/PASPMISE/PaSp[1]/LigSp[1]/{where}")]


def test_prono_pairs_are_checked():
    def prono(*children: tuple[str, str]) -> Callable[[etree._Element], None]:
        def edit(root: etree._Element) -> None:
            el = root.find("PaSp/LigSp/PronoSp")
            for child in list(el):
                el.remove(child)
            for tag, text in children:
                el.append(element(tag, text))

        return edit

    raw = fixture("PASPMISE")
    at = "/PASPMISE/PaSp[1]/LigSp[1]/PronoSp[1]"
    assert problems(edited(raw, prono(("Choix", "NUL"), ("TypeRes", "123CD")))) == [
        ("UNEXPECTED_ELEMENT", f"{at}/Choix[1]")
    ]
    assert problems(edited(raw, prono(("TypeRes", "123CD")))) == [("INCOMPLETE_GROUP", f"{at}/TypeRes[1]")]
    two_types = prono(("TypeRes", "123CD"), ("TypeRes", "456AB"), ("Choix", "NUL"))
    assert problems(edited(raw, two_types)) == [("INCOMPLETE_GROUP", f"{at}/TypeRes[1]")]
    pairs = [("TypeRes", "123CD"), ("Choix", "NUL")]
    assert (
        normalize(edited(raw, prono(*pairs * 64))).PaSp[0].LigSp[0].Pronostics[0].pairs
        == [("123CD", "NUL")] * 64
    )
    assert problems(edited(raw, prono(*pairs * 65))) == [("TOO_MANY_OCCURRENCES", f"{at}/TypeRes[65]")]


# --------------------------------------------------------------------------- rejections


def set_text(path: str, text: str) -> Callable[[etree._Element], None]:
    return lambda root: setattr(root.find(path), "text", text)


def remove(path: str) -> Callable[[etree._Element], None]:
    def edit(root: etree._Element) -> None:
        el = root.find(path)
        el.getparent().remove(el)

    return edit


def append(path: str, *children: etree._Element) -> Callable[[etree._Element], None]:
    def edit(root: etree._Element) -> None:
        parent = root if path == "." else root.find(path)
        for child in children:
            parent.append(child)

    return edit


SP_MISE, SP_MISE_XY, SP_ANNUL, SP_GAIN = "PASPMISE", "PASPMISE-system", "PASPANNUL", "PASPGAIN"
HI_MISE, HI_MISE_TLO, HI_ANNUL, HI_GAIN = "PAHIMISE", "PAHIMISE-tlo", "PAHIANNUL", "PAHIGAIN"
L = "PaSp/LigSp/"
LINE = "/PASPMISE/PaSp[1]/LigSp[1]"
DESC = "/PAHIMISE/Desc[1]"

REJECTIONS = [
    # enumerations
    (SP_MISE, set_text("PaSp/Combi", "QUINTE"), "INVALID_VALUE", "/PASPMISE/PaSp[1]/Combi"),
    (SP_MISE, set_text(L + "Genre", "X"), "INVALID_VALUE", LINE + "/Genre"),
    (SP_ANNUL, set_text("Motif", "CourseAnnulee"), "INVALID_VALUE", "/PASPANNUL/Motif"),
    (HI_ANNUL, set_text("Motif", "RencontreAnnulee"), "INVALID_VALUE", "/PAHIANNUL/Motif"),
    # facets of PACommon's codes
    (SP_MISE, set_text(L + "Sport", "AB"), "INVALID_VALUE", LINE + "/Sport"),
    (SP_MISE, set_text(L + "Evnt", "ab123"), "INVALID_VALUE", LINE + "/Evnt"),
    (SP_MISE, set_text(L + "Evnt", "E" * 65), "TOO_LONG", LINE + "/Evnt"),
    (SP_MISE, set_text(L + "Renc", "Chelsea"), "INVALID_VALUE", LINE + "/Renc"),
    (SP_MISE, set_text(L + "PronoSp/TypeRes", "12CD"), "INVALID_VALUE", LINE + "/PronoSp[1]/TypeRes[1]"),
    (SP_MISE, set_text(L + "Cote", "0.95"), "INVALID_VALUE", LINE + "/Cote[1]"),
    (SP_MISE_XY, set_text("PaSp/X", "65"), "INVALID_INTEGER", "/PASPMISE/PaSp[1]/X"),
    (HI_MISE, set_text("Desc/Pays", "P" * 65), "TOO_LONG", DESC + "/Pays"),
    (HI_MISE, set_text("Desc/Reunion", "R1"), "INVALID_INTEGER", DESC + "/Reunion[1]"),
    # missing required elements
    (SP_MISE, remove("PaSp"), "MISSING_ELEMENT", "/PASPMISE/PaSp"),
    (SP_MISE, remove(L + "Evnt"), "MISSING_ELEMENT", LINE + "/Evnt"),
    (SP_GAIN, remove("DateHeure"), "MISSING_ELEMENT", "/PASPGAIN/DateHeure"),
    (HI_MISE, remove("Desc/Hippodrome"), "MISSING_ELEMENT", DESC + "/Hippodrome"),
    (HI_MISE, remove("Desc/PronoPH/MiseBase"), "MISSING_ELEMENT", DESC + "/PronoPH/MiseBase"),
    (HI_ANNUL, remove("Motif"), "MISSING_ELEMENT", "/PAHIANNUL/Motif"),
    # maxOccurs
    (SP_MISE, append("PaSp/LigSp", element("Part", "ARBITRE")), "TOO_MANY_OCCURRENCES", LINE + "/Part"),
    (
        HI_MISE,
        append("Desc", *(element("CNum", "3") for _ in range(16))),
        "TOO_MANY_OCCURRENCES",
        DESC + "/CNum",
    ),
    (
        HI_MISE,
        append("Desc/PronoPH", *(element("Base", "1") for _ in range(62))),
        "TOO_MANY_OCCURRENCES",
        DESC + "/PronoPH/Base",
    ),
    (SP_GAIN, append(".", element("Tech", "X")), "TOO_MANY_OCCURRENCES", "/PASPGAIN/Tech"),
    # negative amounts
    (SP_MISE, set_text("Mise", "-1.50"), "NEGATIVE_AMOUNT", "/PASPMISE/Mise"),
    (SP_MISE, set_text("PaSp/MiseBase", "-1.50"), "NEGATIVE_AMOUNT", "/PASPMISE/PaSp[1]/MiseBase"),
    (SP_GAIN, set_text("Gain", "-5.10"), "NEGATIVE_AMOUNT", "/PASPGAIN/Gain"),
    (HI_GAIN, set_text("Gain", "-17.28"), "NEGATIVE_AMOUNT", "/PAHIGAIN/Gain"),
    (HI_ANNUL, set_text("MontantRembours", "-5"), "NEGATIVE_AMOUNT", "/PAHIANNUL/MontantRembours"),
    (HI_MISE, set_text("Desc/PronoPH/MiseBase", "-10"), "NEGATIVE_AMOUNT", DESC + "/PronoPH/MiseBase"),
    # dates
    (SP_MISE, set_text(L + "Date", "111306194500"), "INVALID_DATE", LINE + "/Date"),
    (SP_ANNUL, set_text("DateMise", "1112041017"), "INVALID_DATE", "/PASPANNUL/DateMise"),
    (HI_MISE, set_text("Desc/DateHeure", "191031250000"), "INVALID_DATE", DESC + "/DateHeure"),
    # unexpected elements: each family's own spelling is not the other's
    (HI_MISE, append(".", element("BonusMise", "1")), "UNEXPECTED_ELEMENT", "/PAHIMISE/BonusMise"),
    (HI_GAIN, append(".", element("Cashout")), "UNEXPECTED_ELEMENT", "/PAHIGAIN/Cashout"),
    (SP_MISE, append(".", element("Desc")), "UNEXPECTED_ELEMENT", "/PASPMISE/Desc"),
    (
        SP_MISE,
        append("PaSp/LigSp", element("Hippodrome", "Vincennes")),
        "UNEXPECTED_ELEMENT",
        LINE + "/Hippodrome",
    ),
    (HI_MISE, append("Desc/PronoPH", element("Cote", "2")), "UNEXPECTED_ELEMENT", DESC + "/PronoPH/Cote"),
    # empty markers
    (HI_MISE_TLO, set_text("Desc/PronoPH/Tlo", "oui"), "INVALID_BOOLEAN", DESC + "/PronoPH/Tlo"),
]


@pytest.mark.parametrize(
    ("name", "edit", "code", "where"), REJECTIONS, ids=[f"{r[2]}:{r[3]}" for r in REJECTIONS]
)
def test_rejection(name: str, edit, code: str, where: str):
    normalize(fixture(name))  # the unmutated fixture is fine
    found = problems(edited(fixture(name), edit))
    assert [c for c, _ in found] == [code], found
    assert found[0][1].startswith(where), found


def test_a_non_empty_live_marker_is_rejected():
    found = problems(with_line_items("P").replace(b"</PronoSp>", b"</PronoSp><Live>oui</Live>", 1))
    assert [c for c, _ in found] == [str(ReasonCode.NOT_EMPTY)]
    assert found[0][1].startswith("/PASPMISE/PaSp[1]/LigSp[1]/Live[1]")


def test_every_problem_is_reported():
    def break_three(root: etree._Element) -> None:
        root.find("Mise").text = "-1"
        root.find("PaSp/Combi").text = "Z"
        root.find("PaSp/LigSp/Date").text = "demain"

    found = problems(edited(fixture("PASPMISE"), break_three))
    assert sorted(found) == sorted(
        [
            ("NEGATIVE_AMOUNT", "/PASPMISE/Mise"),
            ("INVALID_VALUE", "/PASPMISE/PaSp[1]/Combi"),
            ("INVALID_DATE", "/PASPMISE/PaSp[1]/LigSp[1]/Date"),
        ]
    )


def test_line_count_follows_the_schema_bounds(optional_schema_set):
    def lines(n: int) -> Callable[[etree._Element], None]:
        def edit(root: etree._Element) -> None:
            bet = root.find("PaSp")
            line = bet.find("LigSp")
            for _ in range(n - 1):
                line.addnext(copy.deepcopy(line))

        return edit

    raw = fixture("PASPMISE")
    event = normalize(edited(raw, lines(64)))
    assert len(event.PaSp[0].LigSp) == 64
    assert_schema_valid(optional_schema_set, "PASP", canonical_bytes(event))
    assert problems(edited(raw, lines(65))) == [("TOO_MANY_OCCURRENCES", "/PASPMISE/PaSp[1]/LigSp")]


# --------------------------------------------------------------------------- every element, in schema order

HEADER_EXTRAS = {"IDPointDeVente": "PDV-12", "Supervision": True}
BONUS_GAIN = {
    "BonusAvantGain": "5",
    "BonusMouvement": "1",
    "BonusApresGain": "6",
    "Unite": "EUR",
    "Info": "i",
}
COMPLETE = {
    "PASP/PASPMISE-interleaved": {
        "TechJeu": "TJ-1",
        "Jackpot": True,
        "MiseAbond": "1",
        "BonusAvantMise": "5",
        "BonusMise": "1",
        "BonusApresMise": "4",
        "BonusNom": "offre de bienvenue",
        "Tel": True,
        "Info": "i",
        "Unite": "EUR",
    },
    "PASP/PASPANNUL": {
        "BonusAvant": "5",
        "BonusMouvement": "1",
        "BonusApres": "6",
        "Tel": True,
        "Info": "i",
        "Unite": "EUR",
    },
    "PASP/PASPGAIN-cashout": {"GainAbond": "1", **BONUS_GAIN},
    "PAHI/PAHIMISE-champ": {
        "TechJeu": "TJ-1",
        "Jackpot": True,
        "BonusAvantMise": "5",
        "BonusMouvement": "1",
        "BonusApresMise": "4",
        "BonusNom": "offre",
        "Unite": "EUR",
        "Tel": True,
        "Info": "i",
    },
    "PAHI/PAHIANNUL": {
        "BonusAvant": "5",
        "BonusMouvement": "1",
        "BonusApres": "6",
        "Unite": "EUR",
        "Tel": True,
        "Info": "i",
    },
    "PAHI/PAHIGAIN": {"GainAbond": "1", **BONUS_GAIN},
}


def complete_bet(data: dict) -> None:
    bet = data["PaSp"][0]
    bet.update({"Mutuel": True, "X": 2})
    line = bet["LigSp"][0]
    line.update({"Cat": "FOOT", "Disc": "LIGUE"})
    line["Pronostics"] += [{"Live": ""}, {"Banque": ""}]


def complete_race(data: dict) -> None:
    desc = data["Desc"][0]
    desc.update(
        {"Hippodrome": ["Vincennes", "Enghien"], "Reunion": [1, 2], "CNom": ["A", "B"], "CNum": [3, 4]}
    )
    desc["PronoPH"].update({"Choix": "ordre", "Tlo": True, "Coef": ["1.5", "2"]})


@pytest.mark.parametrize("path", list(COMPLETE))
def test_every_optional_element_is_emitted_in_schema_order(path: str, optional_schema_set):
    family, name = path.split("/")
    event = normalize(fixture(name))
    data = {**to_data(event), **HEADER_EXTRAS, **COMPLETE[path]}
    if "PaSp" in data:
        complete_bet(data)
    if "Desc" in data:
        complete_race(data)
    full = type(event).model_validate(data)
    out = canonical_bytes(full)
    assert_schema_valid(optional_schema_set, family, out)
    present = {c.tag for c in etree.fromstring(out)}
    assert present == {name for name, value in full if value not in (None, False)}
    assert normalize(out) == full
