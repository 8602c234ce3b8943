"""CJ family (player account events): the regulator's samples normalize and validate
against CJ.xsd, input order does not matter, the models follow the schema element by
element, CJ-specific constraints are refused with their reason code and path, and
normalize(canonical_bytes(e)) == e."""

from __future__ import annotations

import random
import types
import typing
from collections.abc import Callable
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

from conftest import REFERENCE, assert_sample_normalizes, sample_files, sample_params

XS = "{http://www.w3.org/2001/XMLSchema}"
CJ_TYPES = {tag: model for tag, model in EVENT_TYPES.items() if model.family == "CJ"}


# --------------------------------------------------------------------------- helpers


def sample(reference_dir: Path, name: str) -> bytes:
    return (reference_dir / "samples" / "CJ" / name).read_bytes()


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


# --------------------------------------------------------------------------- 1. samples


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


@pytest.mark.parametrize("path", sample_params("CJ"))
def test_shuffled_input_gives_the_same_canonical_bytes(path):
    raw = path.read_bytes()
    reference = canonical_bytes(normalize(raw))
    original = [c.tag for c in etree.fromstring(raw) if isinstance(c.tag, str)]
    orders = set()
    for seed in range(6):
        root = etree.fromstring(raw)
        shuffle_children(root, random.Random(seed))
        orders.add(tuple(c.tag for c in root))
        assert canonical_bytes(normalize(etree.tostring(root, encoding="UTF-8"))) == reference
    assert len(orders) > 1 or len(set(original)) == 1


def test_same_name_elements_keep_their_relative_order(reference_dir):
    raw = sample(reference_dir, "PREFCPTE.xml")
    event = normalize(raw)
    assert [(m.Montant, m.TypeAct) for m in event.MiseMax] == [(Decimal(20), "PS"), (Decimal(10), "PH")]
    assert normalize(sample(reference_dir, "OUVINFOPERSO.xml")).Prenom == ["Jean-pierre", "Guillaume Jacques"]


# --------------------------------------------------------------------------- 3. rejections

REJECTIONS = [
    # enumerations
    ("OUVINFOPERSO.xml", set_text("Civilite", "Mlle"), "INVALID_VALUE", "/OUVINFOPERSO/Civilite"),
    (
        "CPTEIDENTITE.xml",
        set_text("NatureVerification", "Courrier"),
        "INVALID_VALUE",
        "/CPTEIDENTITE/NatureVerification",
    ),
    ("ACCESREFUSE.xml", set_text("TypeRefus", "Delai"), "INVALID_VALUE", "/ACCESREFUSE/TypeRefus"),
    ("AUTOINTERDICTION.xml", set_text("Unite", "H"), "INVALID_VALUE", "/AUTOINTERDICTION/Unite"),
    ("CLOTUREDEM.xml", set_text("TypeCloture", "Faillite"), "INVALID_VALUE", "/CLOTUREDEM/TypeCloture"),
    ("CPTEALIM.xml", set_text("TypeMoyenPaiement", "Crypto"), "INVALID_VALUE", "/CPTEALIM/TypeMoyenPaiement"),
    ("CPTEABOND.xml", set_text("TypeAbondement", "rakeback"), "INVALID_VALUE", "/CPTEABOND/TypeAbondement"),
    ("CPTEAJUSTOPE.xml", set_text("TypeAjust", "Remise"), "INVALID_VALUE", "/CPTEAJUSTOPE/TypeAjust"),
    (
        "PREFCPTE.xml",
        lambda root: setattr(root.findall("MiseMax")[1].find("TypeAct"), "text", "CA"),
        "INVALID_VALUE",
        "/PREFCPTE/MiseMax[2]/TypeAct",
    ),
    # required elements
    ("OUVINFOPERSO.xml", remove("Email"), "MISSING_ELEMENT", "/OUVINFOPERSO/Email"),
    (
        "MODIFINFOPERSO.xml",
        lambda r: [r.remove(p) for p in r.findall("Prenom")],
        "MISSING_ELEMENT",
        "/MODIFINFOPERSO/Prenom",
    ),
    ("CPTEABOND.xml", remove("Info"), "MISSING_ELEMENT", "/CPTEABOND/Info"),
    ("ACHATMONNAIE.xml", remove("Unite"), "MISSING_ELEMENT", "/ACHATMONNAIE/Unite"),
    ("CPTERETRAIT.xml", remove("DateDemande"), "MISSING_ELEMENT", "/CPTERETRAIT/DateDemande"),
    ("PREFCPTE.xml", remove("DateDebut"), "MISSING_ELEMENT", "/PREFCPTE/DateDebut"),
    ("LOTNATURE.xml", remove("LotN"), "MISSING_ELEMENT", "/LOTNATURE/LotN"),
    (
        "LOTNATURE.xml",
        lambda r: r.find("LotN").remove(r.find("LotN/Valeur")),
        "MISSING_ELEMENT",
        "/LOTNATURE/LotN[1]/Valeur",
    ),
    (
        "PREFCPTE.xml",
        lambda r: r.findall("MiseMax")[1].remove(r.findall("MiseMax")[1].find("Montant")),
        "MISSING_ELEMENT",
        "/PREFCPTE/MiseMax[2]/Montant",
    ),
    # occurrence bounds
    (
        "OUVINFOPERSO.xml",
        add_after("Prenom", "<Prenom>Marcel</Prenom>"),
        "TOO_MANY_OCCURRENCES",
        "/OUVINFOPERSO/Prenom",
    ),
    ("MODIFINFOPERSO.xml", repeat("Ad", 9), "TOO_MANY_OCCURRENCES", "/MODIFINFOPERSO/Ad"),
    ("PREFCPTE.xml", repeat("MiseMax", 6), "TOO_MANY_OCCURRENCES", "/PREFCPTE/MiseMax"),
    ("LOTNATURE.xml", repeat("LotN", 65), "TOO_MANY_OCCURRENCES", "/LOTNATURE/LotN"),
    ("CPTEALIM.xml", add_after("IDRef", "<IDRef>2</IDRef>"), "TOO_MANY_OCCURRENCES", "/CPTEALIM/IDRef"),
    # xs:choice PspCpteRef | PspIban
    (
        "CPTEREF.xml",
        add_after("PspLib", "<PspCpteRef>ref</PspCpteRef>"),
        "CHOICE_CONFLICT",
        "/CPTEREF/PspIban",
    ),
    (
        "CPTEREF2.xml",
        add_after("PspCpteRef", "<PspIban>FR1420041010050500013M02606</PspIban>"),
        "CHOICE_CONFLICT",
        "/CPTEREF/PspIban",
    ),
    # optional groups of CPTEAJUSTOPE: complete or absent
    ("CPTEAJUSTOPE.xml", remove("Ajustement"), "INCOMPLETE_GROUP", "/CPTEAJUSTOPE/Ajustement"),
    (
        "CPTEAJUSTOPE.xml",
        add_after("SoldeApres", "<BonusAvant>1</BonusAvant>"),
        "INCOMPLETE_GROUP",
        "/CPTEAJUSTOPE/BonusAjust",
    ),
    # patterns and lengths
    ("OUVINFOPERSO.xml", set_text("CP", "1301"), "INVALID_VALUE", "/OUVINFOPERSO/CP"),
    ("MODIFINFOPERSO.xml", set_text("CP", "C3012"), "INVALID_VALUE", "/MODIFINFOPERSO/CP"),
    ("OUVINFOPERSO.xml", set_text("DptN", "6"), "INVALID_VALUE", "/OUVINFOPERSO/DptN"),
    ("OUVINFOPERSO.xml", set_text("DptN", "2C"), "INVALID_VALUE", "/OUVINFOPERSO/DptN"),
    ("OUVINFOPERSO.xml", set_text("DptN", "0601"), "TOO_LONG", "/OUVINFOPERSO/DptN"),
    ("CPTEREF.xml", set_text("PspIban", "FR14"), "INVALID_VALUE", "/CPTEREF/PspIban"),
    ("CPTEREF.xml", set_text("PspIban", "1420041010050500013M02606"), "INVALID_VALUE", "/CPTEREF/PspIban"),
    ("CPTEREF.xml", set_text("PspCib", "2004"), "INVALID_VALUE", "/CPTEREF/PspCib"),
    ("OUVINFOPERSO.xml", set_text("Login", "x" * 65), "TOO_LONG", "/OUVINFOPERSO/Login"),
    (
        "OUVINFOPERSO.xml",
        set_text("Email", "jean<dupond>@domain.tld"),
        "INVALID_VALUE",
        "/OUVINFOPERSO/Email",
    ),
    ("OUVINFOPERSO.xml", set_text("TelMob", "0" * 33), "TOO_LONG", "/OUVINFOPERSO/TelMob"),
    ("OUVINFOPERSO.xml", set_text("DateN", "19791301"), "INVALID_DATE", "/OUVINFOPERSO/DateN"),
    ("AUTOINTERDICTION.xml", set_text("DateFin", "1105110000"), "INVALID_DATE", "/AUTOINTERDICTION/DateFin"),
    # numbers
    ("CPTEALIM.xml", set_text("SoldeMouvement", "-20"), "NEGATIVE_AMOUNT", "/CPTEALIM/SoldeMouvement"),
    ("CPTERETRAIT.xml", set_text("SoldeDemande", "-25.5"), "NEGATIVE_AMOUNT", "/CPTERETRAIT/SoldeDemande"),
    ("CPTEABOND.xml", set_text("MontAbond", "-2.4"), "NEGATIVE_AMOUNT", "/CPTEABOND/MontAbond"),
    (
        "ACHATMONNAIE.xml",
        set_text("MontantMonnaie", "-50"),
        "NEGATIVE_AMOUNT",
        "/ACHATMONNAIE/MontantMonnaie",
    ),
    (
        "LOTNATURE.xml",
        lambda r: setattr(r.find("LotN/Valeur"), "text", "-10"),
        "NEGATIVE_AMOUNT",
        "/LOTNATURE/LotN[1]/Valeur",
    ),
    (
        "PREFCPTE.xml",
        lambda r: setattr(r.find("Compte/Max"), "text", "-1"),
        "NEGATIVE_AMOUNT",
        "/PREFCPTE/Compte/Max",
    ),
    ("CLOTUREDEM.xml", set_text("SoldeClos", "5,6"), "INVALID_DECIMAL", "/CLOTUREDEM/SoldeClos"),
    ("AUTOINTERDICTION.xml", set_text("Duree", "0"), "INVALID_INTEGER", "/AUTOINTERDICTION/Duree"),
    ("PREFCPTE2.xml", set_text("TempsMax", "-120"), "INVALID_INTEGER", "/PREFCPTE/TempsMax"),
    # header: PREFCPTE and OKCONDGENE have no IDPointDeVente
    (
        "PREFCPTE.xml",
        add_after("IPJoueur", "<IDPointDeVente>PDV1</IDPointDeVente>"),
        "UNEXPECTED_ELEMENT",
        "/PREFCPTE/IDPointDeVente",
    ),
    (
        "OKCONDGENE.xml",
        add_after("IPJoueur", "<IDPointDeVente>PDV1</IDPointDeVente>"),
        "UNEXPECTED_ELEMENT",
        "/OKCONDGENE/IDPointDeVente",
    ),
    # Test is an empty marker, only where the schema has it
    ("OUVINFOPERSO.xml", add_after("Email", "<Test>oui</Test>"), "INVALID_BOOLEAN", "/OUVINFOPERSO/Test"),
    ("CPTEALIM.xml", add_after("TypeMoyenPaiement", "<Test/>"), "UNEXPECTED_ELEMENT", "/CPTEALIM/Test"),
]


@pytest.mark.parametrize(
    ("name", "change", "code", "path"),
    REJECTIONS,
    ids=[f"{r[0][:-4]}-{r[2]}-{r[3].rsplit('/', 1)[-1]}-{i}" for i, r in enumerate(REJECTIONS)],
)
def test_cj_constraint_is_refused_with_code_and_path(reference_dir, name, change, code, path):
    raw = sample(reference_dir, name)
    normalize(raw)  # the unmutated sample is fine
    exc = rejected(mutate(raw, change))
    assert [(str(p.code), p.path) for p in exc.problems] == [(code, path)], exc.problems


def test_every_problem_is_reported_not_only_the_first(reference_dir):
    raw = mutate(
        sample(reference_dir, "OUVINFOPERSO.xml"),
        lambda r: (set_text("Civilite", "Mlle")(r), set_text("CP", "1301")(r), remove("Email")(r)),
    )
    exc = rejected(raw)
    assert sorted(zip(exc.codes, (p.path for p in exc.problems), strict=True)) == [
        ("INVALID_VALUE", "/OUVINFOPERSO/CP"),
        ("INVALID_VALUE", "/OUVINFOPERSO/Civilite"),
        ("MISSING_ELEMENT", "/OUVINFOPERSO/Email"),
    ]


# --------------------------------------------------------------------------- facets: coffre vs the schema

FACET_VALUES = [
    ("OUVINFOPERSO.xml", "DptN", ["06", "2A", "974", "97", "6", "0601", "2C", "A1", "9B9"]),
    ("OUVINFOPERSO.xml", "CP", ["13012", "2A004", "99999", "9B123", "A3012", "1301", "130123"]),
    ("OUVINFOPERSO.xml", "Civilite", ["M", "Mme", "Mlle", "MME", ""]),
    ("OUVINFOPERSO.xml", "Email", ["a@b.fr", "a+b_c@d-e.fr", "a&b@c.fr", "x" * 64, "x" * 65]),
    ("OUVINFOPERSO.xml", "Nom", ["D'Artagnan", "Ñúñez", ""]),
    ("CPTEREF.xml", "PspCib", ["20041", "00000", "2004", "200410", "2004A"]),
    (
        "CPTEREF.xml",
        "PspIban",
        ["FR1420041010050500013M02606", "DE89370400440532013000", "FR14200", "fr14ABCDEFGHIJKL"],
    ),
    ("AUTOINTERDICTION.xml", "Duree", ["1", "+3", "0", "-1", "1.0", "x"]),
    ("CPTEALIM.xml", "SoldeMouvement", ["0", "-0", "0.00", "+5.", ".5", "-0.01", "1e3", "1 000"]),
    (
        "CLOTUREDEM.xml",
        "SoldeClos",
        ["-5.6", "0", "123456789012345678.1234567891", "12345678901234567890.123456789", "NaN", "INF"],
    ),
    ("PREFCPTE2.xml", "TempsMax", ["0", "120", "-1", "1.5"]),
]


@pytest.mark.parametrize(
    ("name", "tag", "values"), FACET_VALUES, ids=[f"{n[:-4]}-{t}" for n, t, _ in FACET_VALUES]
)
def test_accepts_what_the_schema_accepts_and_emits_only_valid(reference_dir, schema_set, name, tag, values):
    for value in values:
        raw = mutate(sample(reference_dir, name), set_text(tag, value))
        schema_ok = schema_set.errors("CJ", raw) == []
        try:
            event = normalize(raw)
        except Rejected as exc:
            # schema-valid values are refused only past coffre's own documented bounds
            assert not schema_ok or exc.codes == ["LIMIT_EXCEEDED"], (
                f"{tag}={value!r} is schema-valid but refused: {exc}"
            )
            assert {p.path for p in exc.problems} == {f"/{etree.fromstring(raw).tag}/{tag}"}
            continue
        assert schema_set.errors("CJ", canonical_bytes(event)) == [], f"{tag}={value!r}"


# --------------------------------------------------------------------------- accepted forms


def test_iban_paper_form_is_made_compact_and_upper_case(reference_dir):
    raw = mutate(
        sample(reference_dir, "CPTEREF.xml"), set_text("PspIban", " fr14 2004 1010 0505 0001 3m02 606 ")
    )
    event = normalize(raw)
    assert event.PspIban == "FR1420041010050500013M02606"
    assert canonical_bytes(event) == canonical_bytes(normalize(sample(reference_dir, "CPTEREF.xml")))


def test_cpteref_choice_may_be_empty_as_in_the_schema(reference_dir, schema_set):
    """CJ.xsd's choice holds two optional branches: neither element is schema-valid."""
    raw = mutate(sample(reference_dir, "CPTEREF.xml"), remove("PspIban"))
    assert schema_set.errors("CJ", raw) == []
    event = normalize(raw)
    assert (event.PspCpteRef, event.PspIban) == (None, None)
    assert schema_set.errors("CJ", canonical_bytes(event)) == []


def test_test_attribute_becomes_the_test_element(reference_dir, schema_set):
    raw = sample(reference_dir, "OUVINFOPERSO.xml").replace(b"<OUVINFOPERSO>", b'<OUVINFOPERSO test="true">')
    event = normalize(raw)
    assert event.Test is True
    data = canonical_bytes(event)
    assert b"<Email>jean.dupond@domain.tld</Email><Test></Test></OUVINFOPERSO>" in data
    assert schema_set.errors("CJ", data) == []


def test_supervision_attribute_becomes_the_element(reference_dir):
    raw = sample(reference_dir, "CPTEADRESSE2.xml").replace(
        b"<CPTEADRESSE>", b'<CPTEADRESSE supervision="true">'
    )
    assert canonical_bytes(normalize(raw)) == canonical_bytes(
        normalize(sample(reference_dir, "CPTEADRESSE.xml"))
    )


def test_dates_and_departement_are_normalized(reference_dir, schema_set):
    raw = mutate(
        sample(reference_dir, "OUVINFOPERSO.xml"),
        lambda r: (
            set_text("DateN", "1979-12-01")(r),
            set_text("DptN", " 2a ")(r),
            set_text("DateEvt", "2010-04-12T12:33:20+02:00")(r),
        ),
    )
    event = normalize(raw)
    assert (event.DateN, event.DptN, event.DateEvt) == ("19791201", "2A", "100412103320")
    assert schema_set.errors("CJ", canonical_bytes(event)) == []


def test_cpteajustope_without_any_group_and_with_both(reference_dir, schema_set):
    bare = mutate(
        sample(reference_dir, "CPTEAJUSTOPE.xml"),
        lambda r: [remove(t)(r) for t in ("SoldeAvant", "Ajustement", "SoldeApres")],
    )
    both = mutate(
        sample(reference_dir, "CPTEAJUSTOPE.xml"),
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
        assert schema_set.errors("CJ", canonical_bytes(event)) == []
    assert normalize(both).BonusAjust == Decimal(-5)


def test_amounts_stay_exact_decimals(reference_dir):
    raw = mutate(sample(reference_dir, "CPTEALIM.xml"), set_text("SoldeMouvement", "12345678901234567.1000000001"))
    event = normalize(raw)
    assert event.SoldeMouvement == Decimal("12345678901234567.1000000001")
    assert b"<SoldeMouvement>12345678901234567.1000000001</SoldeMouvement>" in canonical_bytes(event)


def test_sixty_four_lots_and_five_stake_limits_are_accepted(reference_dir, schema_set):
    lots = normalize(mutate(sample(reference_dir, "LOTNATURE.xml"), repeat("LotN", 64)))
    limits = normalize(mutate(sample(reference_dir, "PREFCPTE.xml"), repeat("MiseMax", 5)))
    assert (len(lots.LotN), len(limits.MiseMax)) == (64, 5)
    for event in (lots, limits):
        assert schema_set.errors("CJ", canonical_bytes(event)) == []


# --------------------------------------------------------------------------- 4. round trips


@pytest.mark.parametrize("path", sample_params("CJ"))
def test_round_trip_through_canonical_bytes_and_json(path):
    for raw in split_documents(path.read_bytes()):
        event = normalize(raw)
        data = canonical_bytes(event)
        again = normalize(data)
        assert again == event
        assert canonical_bytes(again) == data
        assert normalize(to_json(event)) == event
