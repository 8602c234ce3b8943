"""CJ family (player account events): input order does not matter, CJ-specific constraints
are refused with their reason code and path, facets are read as the schema reads them, and
normalize(canonical_bytes(e)) == e, all on coffre's own fixtures (tests/fixtures/events/CJ),
with their outputs validated against CJ.xsd when the regulator's schemas are at hand.
Cross-checks of the regulator's files (they skip without ../shared): its samples normalize
and validate, and the models follow CJ.xsd element by element and type by type."""

from __future__ import annotations

import random
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import pytest
from annotated_types import MaxLen, MinLen
from lxml import etree
from pydantic import TypeAdapter, ValidationError

import coffre.domain.catalogue.cj  # noqa: F401  (registers the CJ family)
from coffre.domain import types as t
from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.catalogue import cj as m
from coffre.domain.catalogue import common as c
from coffre.domain.codec import canonical_bytes, split_documents, to_json
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize
from coffre.domain.xmlmodel import FlagField, XmlModel, binding

from conftest import (
    REFERENCE,
    assert_sample_normalizes,
    assert_schema_valid,
    own_and_sample_params,
    sample_files,
    sample_params,
)
from events import canonical, fixture

XS = "{http://www.w3.org/2001/XMLSchema}"
CJ_TYPES = {tag: model for tag, model in EVENT_TYPES.items() if model.family == "CJ"}


# --------------------------------------------------------------------------- helpers


def mutate(raw: bytes, change: Callable[[etree._Element], None]) -> bytes:
    root = etree.fromstring(raw)
    change(root)
    return etree.tostring(root, encoding="UTF-8")


def set_text(tag: str, text: str) -> Callable[[etree._Element], None]:
    def change(root: etree._Element) -> None:
        root.find(tag).text = text

    return change


def remove(tag: str) -> Callable[[etree._Element], None]:
    def change(root: etree._Element) -> None:
        root.remove(root.find(tag))

    return change


def add_after(anchor: str, *xml: str) -> Callable[[etree._Element], None]:
    """Insert the given elements right after the last ``anchor`` child."""

    def change(root: etree._Element) -> None:
        at = root.index(root.findall(anchor)[-1]) + 1
        for offset, fragment in enumerate(xml):
            root.insert(at + offset, etree.fromstring(fragment))

    return change


def repeat(tag: str, times: int) -> Callable[[etree._Element], None]:
    """Make ``tag`` occur ``times`` times (copies of its first occurrence)."""

    def change(root: etree._Element) -> None:
        existing = root.findall(tag)
        for _ in range(times - len(existing)):
            add_after(tag, etree.tostring(existing[0], encoding="unicode"))(root)

    return change


def rejected(raw: bytes) -> Rejected:
    with pytest.raises(Rejected) as exc:
        normalize(raw)
    return exc.value


def shuffle_children(el: etree._Element, rng: random.Random) -> None:
    """Shuffle the children of ``el`` at every level; same-name siblings keep their order."""
    children = [c for c in el if isinstance(c.tag, str)]
    for child in children:
        shuffle_children(child, rng)
    order = children[:]
    rng.shuffle(order)
    queues: dict[str, list[etree._Element]] = {}
    for child in children:
        queues.setdefault(child.tag, []).append(child)
    for child in children:
        el.remove(child)
    el.extend(queues[child.tag].pop(0) for child in order)


# --------------------------------------------------------------------------- 1. the regulator's samples (cross-checks)


@pytest.mark.parametrize("path", sample_params("CJ"))
def test_cj_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


def test_every_cj_event_type_has_a_sample():
    names = {p.stem.rstrip("0123456789") for p in sample_files("CJ")}
    if not names:
        pytest.skip(f"no CJ samples at {REFERENCE}")
    assert set(CJ_TYPES) - names == set(), "CJ events without a regulator sample: extend the hand tests"


# --------------------------------------------------------------------------- the models follow CJ.xsd


def _schema_particles(node: etree._Element, optional: bool = False) -> list[tuple[str, bool, int | None]]:
    """(element name, required, maxOccurs or None for unbounded) along a content model."""
    out: list[tuple[str, bool, int | None]] = []
    for child in node:
        if not isinstance(child.tag, str):
            continue
        min_occurs = int(child.get("minOccurs", "1"))
        if child.tag == f"{XS}element":
            raw_max = child.get("maxOccurs", "1")
            out.append(
                (
                    child.get("ref") or child.get("name"),
                    min_occurs > 0 and not optional,
                    None if raw_max == "unbounded" else int(raw_max),
                )
            )
        elif child.tag == f"{XS}sequence":
            out += _schema_particles(child, optional or min_occurs == 0)
        elif child.tag == f"{XS}choice":
            # each branch of a choice is optional on its own; a validator enforces "exactly one"
            out += _schema_particles(child, True)
    return out


def _cj_roots(reference_dir: Path) -> dict[str, etree._Element]:
    tree = etree.parse(str(reference_dir / "xsd" / "CJ.xsd"))
    return {el.get("name"): el for el in tree.getroot().findall(f"{XS}element")}


def test_every_root_of_cj_xsd_is_a_cj_event(reference_dir):
    assert set(_cj_roots(reference_dir)) == set(CJ_TYPES)


def test_models_follow_the_schema_sequence_and_occurrences(reference_dir):
    for tag, root in _cj_roots(reference_dir).items():
        model = CJ_TYPES[tag]
        expected = _schema_particles(root.find(f"{XS}complexType/{XS}sequence"))
        actual = []
        for fb in binding(model).fields:
            info = model.model_fields[fb.name]
            max_len = next((m.max_length for m in info.metadata if isinstance(m, MaxLen)), None)
            actual.append((fb.xml_names[0], info.is_required(), max_len if fb.many else 1))
        assert actual == expected, tag


XSD_TYPES: dict[str, Any] = {
    "operator": t.OpId,
    "date-aammjjhhmmss": t.DateTime12,
    "date-aaaammjj": t.Date8,
    "xs:nonNegativeInteger": t.NonNegInt,
    "nonNegativeInteger": t.NonNegInt,
    "nonNegativeDecimal": t.NonNegDec,
    "mouvement": t.NonNegDec,
    "solde": t.Dec,
    "bonus": t.Dec,
    "ajustement": t.Dec,
    "sha1": t.Sha1,
    "IP": t.IPFull,
    "xs:string": t.Text,
    "empty": FlagField,
    "string-32": c.String32,
    "string-64": c.String64,
    "string-256": c.String256,
    "postal": c.Postal,
    "civil": m.Civil,
    "departement": m.Departement,
    "NatureVerification": m.NatureVerificationCode,
    "TypeAct": m.TypeActCode,
    "cib": m.Cib,
    "iban": m.Iban,
}
"""The type each schema simple type is bound to (enumerations are also checked by value)."""
LOCAL_TYPES: dict[str, Any] = {"Duree": m.DureeCount}
"""Elements whose anonymous simple type is not an enumeration."""


def _signature(annotation: Any, metadata: list[Any] = ()) -> tuple[Any, tuple[Any, ...]]:
    """(core type, validators) of a field or of a type alias, Optional and list peeled."""
    meta = [x for x in metadata if not isinstance(x, (MinLen, MaxLen))]
    while True:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        elif origin is Annotated:
            meta = [*annotation.__metadata__, *meta]
            annotation = annotation.__origin__
        else:
            return annotation, tuple(meta)


def _declarations(reference_dir: Path) -> tuple[dict[str, etree._Element], dict[str, etree._Element]]:
    elements, simple_types = {}, {}
    for name in ("CJ.xsd", "include/CJCommon.xsd", "include/Common.xsd"):
        for decl in etree.parse(str(reference_dir / "xsd" / name)).getroot():
            if decl.tag == f"{XS}element":
                elements[decl.get("name")] = decl
            elif decl.tag == f"{XS}simpleType":
                simple_types[decl.get("name")] = decl
    return elements, simple_types


def _check_types(
    model: type[XmlModel], sequence: etree._Element, decls: tuple[dict, dict], where: str
) -> int:
    """Assert every element of ``sequence`` has the model type its schema type maps to."""
    elements, simple_types = decls
    checked = 0
    for particle in sequence.iter(f"{XS}element"):
        decl = elements[particle.get("ref")] if particle.get("ref") else particle
        name = decl.get("name")
        info = model.model_fields[name]
        core, meta = _signature(info.annotation, info.metadata)
        complex_type = decl.find(f"{XS}complexType")
        if complex_type is not None:
            checked += _check_types(core, complex_type.find(f"{XS}sequence"), decls, f"{where}/{name}")
            continue
        simple = decl.find(f"{XS}simpleType")
        type_name = decl.get("type")
        if type_name is not None:
            # coffre's own bound on the two identifiers (coffre/domain/limits.py), same XSD type
            bound = t.IdNumber if name in ("IDCoffre", "IDEvt") else XSD_TYPES[type_name]
            assert (core, meta) == _signature(bound), f"{where}/{name} is not bound to {type_name}"
            simple = simple_types.get(type_name)
        enumeration = [] if simple is None else [e.get("value") for e in simple.iter(f"{XS}enumeration")]
        if enumeration:
            adapter = TypeAdapter(Annotated[core, *meta])
            assert [adapter.validate_python(value) for value in enumeration] == enumeration, f"{where}/{name}"
            for outsider in ("Bogus", enumeration[0].lower() + "x", ""):
                with pytest.raises(ValidationError):
                    adapter.validate_python(outsider)
        elif simple is not None and type_name is None:
            assert (core, meta) == _signature(LOCAL_TYPES[name]), f"{where}/{name}"
        checked += 1
    return checked


def test_models_bind_the_schema_types(reference_dir):
    decls = _declarations(reference_dir)
    checked = sum(
        _check_types(CJ_TYPES[tag], root.find(f"{XS}complexType/{XS}sequence"), decls, tag)
        for tag, root in _cj_roots(reference_dir).items()
    )
    assert checked > 250


def test_duree_is_at_least_one():
    adapter = TypeAdapter(m.DureeCount)
    assert adapter.validate_python("1") == 1
    with pytest.raises(ValidationError):
        adapter.validate_python("0")


# --------------------------------------------------------------------------- 2. input order


@pytest.mark.parametrize("path", own_and_sample_params("CJ", xml_only=True))
def test_shuffled_input_gives_the_same_canonical_bytes(path):
    for raw in split_documents(path.read_bytes()):
        reference = canonical_bytes(normalize(raw))
        original = [c.tag for c in etree.fromstring(raw) if isinstance(c.tag, str)]
        orders = set()
        for seed in range(6):
            root = etree.fromstring(raw)
            shuffle_children(root, random.Random(seed))
            orders.add(tuple(c.tag for c in root if isinstance(c.tag, str)))
            assert canonical_bytes(normalize(etree.tostring(root, encoding="UTF-8"))) == reference
        assert len(orders) > 1 or len(set(original)) == 1


def test_same_name_elements_keep_their_relative_order():
    event = normalize(fixture("PREFCPTE"))
    assert [(m.Montant, m.TypeAct) for m in event.MiseMax] == [(Decimal(50), "PS"), (Decimal("25.5"), "PO")]
    assert normalize(fixture("OUVINFOPERSO")).Prenom == ["Marie-Louise", "Anne Sophie"]
    assert [lot.Nom for lot in normalize(fixture("LOTNATURE")).LotN] == ["casque audio", "maillot dédicacé"]


# --------------------------------------------------------------------------- 3. rejections

REJECTIONS = [
    # enumerations
    ("OUVINFOPERSO", set_text("Civilite", "Mlle"), "INVALID_VALUE", "/OUVINFOPERSO/Civilite"),
    (
        "CPTEIDENTITE",
        set_text("NatureVerification", "Courrier"),
        "INVALID_VALUE",
        "/CPTEIDENTITE/NatureVerification",
    ),
    ("ACCESREFUSE", set_text("TypeRefus", "Delai"), "INVALID_VALUE", "/ACCESREFUSE/TypeRefus"),
    ("AUTOINTERDICTION", set_text("Unite", "H"), "INVALID_VALUE", "/AUTOINTERDICTION/Unite"),
    ("CLOTUREDEM", set_text("TypeCloture", "Faillite"), "INVALID_VALUE", "/CLOTUREDEM/TypeCloture"),
    ("CPTEALIM", set_text("TypeMoyenPaiement", "Crypto"), "INVALID_VALUE", "/CPTEALIM/TypeMoyenPaiement"),
    ("CPTEABOND", set_text("TypeAbondement", "rakeback"), "INVALID_VALUE", "/CPTEABOND/TypeAbondement"),
    ("CPTEAJUSTOPE", set_text("TypeAjust", "Remise"), "INVALID_VALUE", "/CPTEAJUSTOPE/TypeAjust"),
    (
        "PREFCPTE",
        lambda root: setattr(root.findall("MiseMax")[1].find("TypeAct"), "text", "CA"),
        "INVALID_VALUE",
        "/PREFCPTE/MiseMax[2]/TypeAct",
    ),
    # required elements
    ("OUVINFOPERSO", remove("Email"), "MISSING_ELEMENT", "/OUVINFOPERSO/Email"),
    (
        "MODIFINFOPERSO",
        lambda r: [r.remove(p) for p in r.findall("Prenom")],
        "MISSING_ELEMENT",
        "/MODIFINFOPERSO/Prenom",
    ),
    ("CPTEABOND", remove("Info"), "MISSING_ELEMENT", "/CPTEABOND/Info"),
    ("ACHATMONNAIE", remove("Unite"), "MISSING_ELEMENT", "/ACHATMONNAIE/Unite"),
    ("CPTERETRAIT", remove("DateDemande"), "MISSING_ELEMENT", "/CPTERETRAIT/DateDemande"),
    ("PREFCPTE", remove("DateDebut"), "MISSING_ELEMENT", "/PREFCPTE/DateDebut"),
    (
        "LOTNATURE",
        lambda r: [r.remove(lot) for lot in r.findall("LotN")],
        "MISSING_ELEMENT",
        "/LOTNATURE/LotN",
    ),
    (
        "LOTNATURE",
        lambda r: r.find("LotN").remove(r.find("LotN/Valeur")),
        "MISSING_ELEMENT",
        "/LOTNATURE/LotN[1]/Valeur",
    ),
    (
        "PREFCPTE",
        lambda r: r.findall("MiseMax")[1].remove(r.findall("MiseMax")[1].find("Montant")),
        "MISSING_ELEMENT",
        "/PREFCPTE/MiseMax[2]/Montant",
    ),
    # occurrence bounds
    (
        "OUVINFOPERSO",
        add_after("Prenom", "<Prenom>Marcel</Prenom>"),
        "TOO_MANY_OCCURRENCES",
        "/OUVINFOPERSO/Prenom",
    ),
    ("MODIFINFOPERSO", repeat("Ad", 9), "TOO_MANY_OCCURRENCES", "/MODIFINFOPERSO/Ad"),
    ("PREFCPTE", repeat("MiseMax", 6), "TOO_MANY_OCCURRENCES", "/PREFCPTE/MiseMax"),
    ("LOTNATURE", repeat("LotN", 65), "TOO_MANY_OCCURRENCES", "/LOTNATURE/LotN"),
    ("CPTEALIM", add_after("IDRef", "<IDRef>2</IDRef>"), "TOO_MANY_OCCURRENCES", "/CPTEALIM/IDRef"),
    # xs:choice PspCpteRef | PspIban
    (
        "CPTEREF",
        add_after("PspLib", "<PspCpteRef>ref</PspCpteRef>"),
        "CHOICE_CONFLICT",
        "/CPTEREF/PspIban",
    ),
    (
        "CPTEREF-compte",
        add_after("PspCpteRef", "<PspIban>FR1420041010050500013M02606</PspIban>"),
        "CHOICE_CONFLICT",
        "/CPTEREF/PspIban",
    ),
    # optional groups of CPTEAJUSTOPE: complete or absent
    ("CPTEAJUSTOPE", remove("Ajustement"), "INCOMPLETE_GROUP", "/CPTEAJUSTOPE/Ajustement"),
    (
        "CPTEAJUSTOPE",
        add_after("SoldeApres", "<BonusAvant>1</BonusAvant>"),
        "INCOMPLETE_GROUP",
        "/CPTEAJUSTOPE/BonusAjust",
    ),
    # patterns and lengths
    ("OUVINFOPERSO", set_text("CP", "1301"), "INVALID_VALUE", "/OUVINFOPERSO/CP"),
    ("MODIFINFOPERSO", set_text("CP", "C3012"), "INVALID_VALUE", "/MODIFINFOPERSO/CP"),
    ("OUVINFOPERSO", set_text("DptN", "6"), "INVALID_VALUE", "/OUVINFOPERSO/DptN"),
    ("OUVINFOPERSO", set_text("DptN", "2C"), "INVALID_VALUE", "/OUVINFOPERSO/DptN"),
    ("OUVINFOPERSO", set_text("DptN", "0601"), "TOO_LONG", "/OUVINFOPERSO/DptN"),
    ("CPTEREF", set_text("PspIban", "FR14"), "INVALID_VALUE", "/CPTEREF/PspIban"),
    ("CPTEREF", set_text("PspIban", "1420041010050500013M02606"), "INVALID_VALUE", "/CPTEREF/PspIban"),
    ("CPTEREF", set_text("PspCib", "2004"), "INVALID_VALUE", "/CPTEREF/PspCib"),
    ("OUVINFOPERSO", set_text("Login", "x" * 65), "TOO_LONG", "/OUVINFOPERSO/Login"),
    (
        "OUVINFOPERSO",
        set_text("Email", "jean<dupond>@domain.tld"),
        "INVALID_VALUE",
        "/OUVINFOPERSO/Email",
    ),
    ("OUVINFOPERSO", set_text("TelMob", "0" * 33), "TOO_LONG", "/OUVINFOPERSO/TelMob"),
    ("OUVINFOPERSO", set_text("DateN", "19791301"), "INVALID_DATE", "/OUVINFOPERSO/DateN"),
    ("AUTOINTERDICTION", set_text("DateFin", "1105110000"), "INVALID_DATE", "/AUTOINTERDICTION/DateFin"),
    # numbers
    ("CPTEALIM", set_text("SoldeMouvement", "-20"), "NEGATIVE_AMOUNT", "/CPTEALIM/SoldeMouvement"),
    ("CPTERETRAIT", set_text("SoldeDemande", "-25.5"), "NEGATIVE_AMOUNT", "/CPTERETRAIT/SoldeDemande"),
    ("CPTEABOND", set_text("MontAbond", "-2.4"), "NEGATIVE_AMOUNT", "/CPTEABOND/MontAbond"),
    (
        "ACHATMONNAIE",
        set_text("MontantMonnaie", "-50"),
        "NEGATIVE_AMOUNT",
        "/ACHATMONNAIE/MontantMonnaie",
    ),
    (
        "LOTNATURE",
        lambda r: setattr(r.find("LotN/Valeur"), "text", "-10"),
        "NEGATIVE_AMOUNT",
        "/LOTNATURE/LotN[1]/Valeur",
    ),
    (
        "PREFCPTE",
        lambda r: setattr(r.find("Compte/Max"), "text", "-1"),
        "NEGATIVE_AMOUNT",
        "/PREFCPTE/Compte/Max",
    ),
    ("CLOTUREDEM", set_text("SoldeClos", "5,6"), "INVALID_DECIMAL", "/CLOTUREDEM/SoldeClos"),
    ("AUTOINTERDICTION", set_text("Duree", "0"), "INVALID_INTEGER", "/AUTOINTERDICTION/Duree"),
    ("PREFCPTE-temps", set_text("TempsMax", "-120"), "INVALID_INTEGER", "/PREFCPTE/TempsMax"),
    # header: PREFCPTE and OKCONDGENE have no IDPointDeVente
    (
        "PREFCPTE",
        add_after("IPJoueur", "<IDPointDeVente>PDV1</IDPointDeVente>"),
        "UNEXPECTED_ELEMENT",
        "/PREFCPTE/IDPointDeVente",
    ),
    (
        "OKCONDGENE",
        add_after("IPJoueur", "<IDPointDeVente>PDV1</IDPointDeVente>"),
        "UNEXPECTED_ELEMENT",
        "/OKCONDGENE/IDPointDeVente",
    ),
    # Test is an empty marker, only where the schema has it
    ("OUVINFOPERSO", add_after("Email", "<Test>oui</Test>"), "INVALID_BOOLEAN", "/OUVINFOPERSO/Test"),
    ("CPTEALIM", add_after("TypeMoyenPaiement", "<Test/>"), "UNEXPECTED_ELEMENT", "/CPTEALIM/Test"),
]


@pytest.mark.parametrize(
    ("name", "change", "code", "path"),
    REJECTIONS,
    ids=[f"{r[0]}-{r[2]}-{r[3].rsplit('/', 1)[-1]}-{i}" for i, r in enumerate(REJECTIONS)],
)
def test_cj_constraint_is_refused_with_code_and_path(name, change, code, path):
    raw = fixture(name)
    normalize(raw)  # the unmutated fixture is fine
    exc = rejected(mutate(raw, change))
    assert [(str(p.code), p.path) for p in exc.problems] == [(code, path)], exc.problems


def test_every_problem_is_reported_not_only_the_first():
    raw = mutate(
        fixture("OUVINFOPERSO"),
        lambda r: (set_text("Civilite", "Mlle")(r), set_text("CP", "1301")(r), remove("Email")(r)),
    )
    exc = rejected(raw)
    assert sorted(zip(exc.codes, (p.path for p in exc.problems), strict=True)) == [
        ("INVALID_VALUE", "/OUVINFOPERSO/CP"),
        ("INVALID_VALUE", "/OUVINFOPERSO/Civilite"),
        ("MISSING_ELEMENT", "/OUVINFOPERSO/Email"),
    ]


# --------------------------------------------------------------------------- facets: coffre vs the schema


@dataclass(frozen=True)
class Refused:
    code: str


FACET_VALUES: list[tuple[str, str, dict[str, str | Refused]]] = [
    # fixture, element, {value sent: value emitted, or the refusal}
    (
        "OUVINFOPERSO",
        "DptN",
        {
            **{v: v for v in ("06", "2A", "974", "97", "9B9")},
            "6": Refused("INVALID_VALUE"),
            "0601": Refused("TOO_LONG"),
            "2C": Refused("INVALID_VALUE"),
            "A1": Refused("INVALID_VALUE"),
        },
    ),
    (
        "OUVINFOPERSO",
        "CP",
        {
            **{v: v for v in ("13012", "2A004", "99999", "9B123")},
            "A3012": Refused("INVALID_VALUE"),
            "1301": Refused("INVALID_VALUE"),
            "130123": Refused("TOO_LONG"),
        },
    ),
    (
        "OUVINFOPERSO",
        "Civilite",
        {"M": "M", "Mme": "Mme", **{v: Refused("INVALID_VALUE") for v in ("Mlle", "MME", "")}},
    ),
    (
        "OUVINFOPERSO",
        "Email",
        {
            **{v: v for v in ("a@b.fr", "a+b_c@d-e.fr", "x" * 64)},
            "a&b@c.fr": Refused("INVALID_VALUE"),
            "x" * 65: Refused("TOO_LONG"),
        },
    ),
    ("OUVINFOPERSO", "Nom", {v: v for v in ("D'Artagnan", "Ñúñez", "")}),
    (
        "CPTEREF",
        "PspCib",
        {
            "20041": "20041",
            "00000": "00000",
            **{v: Refused("INVALID_VALUE") for v in ("2004", "200410", "2004A")},
        },
    ),
    (
        "CPTEREF",
        "PspIban",
        {
            "FR1420041010050500013M02606": "FR1420041010050500013M02606",
            "DE89370400440532013000": "DE89370400440532013000",
            "FR14200": Refused("INVALID_VALUE"),
            "fr14ABCDEFGHIJKL": "FR14ABCDEFGHIJKL",  # the schema's pattern is upper case: normalized
        },
    ),
    (
        "AUTOINTERDICTION",
        "Duree",
        {"1": "1", "+3": "3", **{v: Refused("INVALID_INTEGER") for v in ("0", "-1", "1.0", "x")}},
    ),
    (
        "CPTEALIM",
        "SoldeMouvement",
        {
            "0": "0",
            "-0": "0",
            "0.00": "0.00",
            "+5.": "5",
            ".5": "0.5",
            "-0.01": Refused("NEGATIVE_AMOUNT"),
            "1e3": Refused("INVALID_DECIMAL"),
            "1 000": Refused("INVALID_DECIMAL"),
        },
    ),
    (
        "CLOTUREDEM",
        "SoldeClos",
        {
            "-5.6": "-5.6",
            "0": "0",
            "123456789012345678.1234567891": "123456789012345678.1234567891",
            "12345678901234567890.123456789": Refused("LIMIT_EXCEEDED"),  # schema-valid, past coffre's bound
            "NaN": Refused("INVALID_DECIMAL"),
            "INF": Refused("INVALID_DECIMAL"),
        },
    ),
    (
        "PREFCPTE-temps",
        "TempsMax",
        {"0": "0", "120": "120", "-1": Refused("INVALID_INTEGER"), "1.5": Refused("INVALID_INTEGER")},
    ),
]


@pytest.mark.parametrize(
    ("name", "tag", "values"), FACET_VALUES, ids=[f"{n}-{t}" for n, t, _ in FACET_VALUES]
)
def test_accepts_what_the_schema_accepts_and_emits_only_valid(optional_schema_set, name, tag, values):
    """coffre's answer to each value is the one written down; with the schemas at hand, a value
    the schema accepts is refused only past coffre's own documented bounds, and what coffre
    emits validates."""
    for value, outcome in values.items():
        raw = mutate(canonical(name), set_text(tag, value))  # the fixture in schema form, one value changed
        schema_ok = optional_schema_set is not None and optional_schema_set.errors("CJ", raw) == []
        try:
            event = normalize(raw)
        except Rejected as exc:
            assert isinstance(outcome, Refused), f"{tag}={value!r} is refused: {exc}"
            assert exc.codes == [outcome.code], f"{tag}={value!r}: {exc}"
            # schema-valid values are refused only past coffre's own documented bounds
            assert not schema_ok or exc.codes == ["LIMIT_EXCEEDED"], (
                f"{tag}={value!r} is schema-valid but refused: {exc}"
            )
            assert {p.path for p in exc.problems} == {f"/{etree.fromstring(raw).tag}/{tag}"}
            continue
        data = canonical_bytes(event)
        assert etree.fromstring(data).findtext(tag) == outcome, f"{tag}={value!r}"
        assert_schema_valid(optional_schema_set, "CJ", data)


# --------------------------------------------------------------------------- accepted forms


def test_iban_paper_form_is_made_compact_and_upper_case():
    assert normalize(fixture("CPTEREF")).PspIban == "FR7617515900000800123456789"  # sent in paper form
    raw = mutate(canonical("CPTEREF"), set_text("PspIban", " fr76 1751 5900 0008 0012 3456 789 "))
    event = normalize(raw)
    assert event.PspIban == "FR7617515900000800123456789"
    assert canonical_bytes(event) == canonical("CPTEREF")


def test_cpteref_choice_may_be_empty_as_in_the_schema(optional_schema_set):
    """CJ.xsd's choice holds two optional branches: neither element is schema-valid."""
    raw = mutate(canonical("CPTEREF"), remove("PspIban"))
    assert_schema_valid(optional_schema_set, "CJ", raw)
    event = normalize(raw)
    assert (event.PspCpteRef, event.PspIban) == (None, None)
    assert b"<PspLib>CAISSE D'EPARGNE RHONE ALPES</PspLib></CPTEREF>" in canonical_bytes(event)
    assert_schema_valid(optional_schema_set, "CJ", canonical_bytes(event))


def test_test_attribute_becomes_the_test_element(optional_schema_set):
    raw = mutate(fixture("OUVINFOPERSO"), lambda root: root.set("test", "true"))
    event = normalize(raw)
    assert event.Test is True
    data = canonical_bytes(event)
    assert data.startswith(b"<OUVINFOPERSO><IDOper>")
    assert b"<Email>ml.martin@exemple.fr</Email><Test></Test></OUVINFOPERSO>" in data
    assert_schema_valid(optional_schema_set, "CJ", data)


def test_supervision_attribute_becomes_the_element():
    as_attribute = fixture("CPTEADRESSE")  # <CPTEADRESSE supervision="true">

    def as_element(root: etree._Element) -> None:
        del root.attrib["supervision"]
        root.append(etree.fromstring("<Supervision/>"))

    assert b'supervision="true"' in as_attribute
    expected = canonical("CPTEADRESSE")
    assert b"<IDCoffre>3</IDCoffre><Supervision></Supervision><Info>" in expected
    assert canonical_bytes(normalize(as_attribute)) == expected
    assert canonical_bytes(normalize(mutate(as_attribute, as_element))) == expected
    without = normalize(mutate(as_attribute, lambda root: root.set("supervision", "false")))
    assert not without.supervised and b"Supervision" not in canonical_bytes(without)


def test_dates_and_departement_are_normalized(optional_schema_set):
    raw = mutate(
        fixture("OUVINFOPERSO"),
        lambda r: (
            set_text("DateN", "1979-12-01")(r),
            set_text("DptN", " 2a ")(r),
            set_text("DateEvt", "2010-04-12T12:33:20+02:00")(r),
        ),
    )
    event = normalize(raw)
    assert (event.DateN, event.DptN, event.DateEvt) == ("19791201", "2A", "100412103320")
    assert_schema_valid(optional_schema_set, "CJ", canonical_bytes(event))


def test_cpteajustope_without_any_group_and_with_both(optional_schema_set):
    bare = mutate(
        fixture("CPTEAJUSTOPE"),
        lambda r: [remove(t)(r) for t in ("SoldeAvant", "Ajustement", "SoldeApres")],
    )
    both = mutate(
        fixture("CPTEAJUSTOPE"),
        add_after(
            "SoldeApres",
            "<BonusAvant>5</BonusAvant>",
            "<BonusAjust>-5</BonusAjust>",
            "<BonusApres>0</BonusApres>",
            "<Unite>EUR</Unite>",
        ),
    )
    for raw in (bare, both):
        event = normalize(raw)
        assert_schema_valid(optional_schema_set, "CJ", canonical_bytes(event))
    assert (normalize(bare).Ajustement, normalize(bare).BonusAjust) == (None, None)
    assert normalize(both).BonusAjust == Decimal(-5)
    assert normalize(both).Ajustement == Decimal("-12.50")


def test_amounts_stay_exact_decimals():
    raw = mutate(fixture("CPTEALIM"), set_text("SoldeMouvement", "12345678901234567.1000000001"))
    event = normalize(raw)
    assert event.SoldeMouvement == Decimal("12345678901234567.1000000001")
    assert b"<SoldeMouvement>12345678901234567.1000000001</SoldeMouvement>" in canonical_bytes(event)


def test_sixty_four_lots_and_five_stake_limits_are_accepted(optional_schema_set):
    lots = normalize(mutate(fixture("LOTNATURE"), repeat("LotN", 64)))
    limits = normalize(mutate(fixture("PREFCPTE"), repeat("MiseMax", 5)))
    assert (len(lots.LotN), len(limits.MiseMax)) == (64, 5)
    for event in (lots, limits):
        assert_schema_valid(optional_schema_set, "CJ", canonical_bytes(event))


# --------------------------------------------------------------------------- 4. round trips


@pytest.mark.parametrize("path", own_and_sample_params("CJ"))
def test_round_trip_through_canonical_bytes_and_json(path):
    for raw in split_documents(path.read_bytes()):
        event = normalize(raw)
        data = canonical_bytes(event)
        again = normalize(data)
        assert again == event
        assert canonical_bytes(again) == data
        assert normalize(to_json(event)) == event
