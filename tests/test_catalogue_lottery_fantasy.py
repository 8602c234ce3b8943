"""LOTI, LOJI, FA, MO and PDV: input order does not matter, canonical bytes read back to the
same event, and refusals name their element, on coffre's own events (the small ones below and
the fixture files under tests/fixtures/events), their outputs validated against the XSDs when
the regulator's schemas are at hand. The regulator's samples are cross-checked too (they skip
without ../shared)."""

from __future__ import annotations

import copy
import random
import re
from decimal import Decimal

import pytest
from lxml import etree

from coffre.domain.catalogue import EVENT_TYPES, fantasy, lottery, money, pdv  # importing registers
from coffre.domain.codec import canonical_bytes, split_documents, to_json
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize

from conftest import assert_sample_normalizes, assert_schema_valid, own_and_sample_params, sample_params
from events import fixture

FAMILIES = ("LOTI", "LOJI", "FA", "MO", "PDV")
OWN_AND_SAMPLES = own_and_sample_params(*FAMILIES)
OWN_AND_SAMPLES_XML = own_and_sample_params(*FAMILIES, xml_only=True)

HASH = "46b1499f5c9b190eab9d11571fb9566efad5ef13"  # SHA-1 of "lottery", lower case on purpose

LOTIMISE = f"""<LOTIMISE>
  <IDOper>0042</IDOper>
  <DateEvt>2026-05-02T18:30:00Z</DateEvt>
  <IDEvt>21</IDEvt>
  <IDJoueur>lot-7</IDJoueur>
  <HashJoueur>{HASH}</HashJoueur>
  <IDSession>sess-7</IDSession>
  <IPJoueur>2001:db8::7</IPJoueur>
  <IDCoffre>3</IDCoffre>
  <Tech>TK-77</Tech>
  <Desc>
    <Clair>Grille du samedi</Clair>
    <Nom>Loto de test</Nom>
    <Tirage><DateHeure>260502200000</DateHeure><IDTirage>T-0502</IDTirage></Tirage>
  </Desc>
  <Selection><Nombre>2</Nombre><Option>option-a</Option><Option>option-b</Option></Selection>
  <SoldeAvant>20.00</SoldeAvant>
  <SoldeMouvement>2.50</SoldeMouvement>
  <SoldeApres>17.50</SoldeApres>
</LOTIMISE>""".encode()

LOTIANNUL = f"""<LOTIANNUL><IDOper>0042</IDOper><DateEvt>260503090000</DateEvt><IDEvt>22</IDEvt>
<IDJoueur>lot-7</IDJoueur><HashJoueur>{HASH}</HashJoueur><IDSession>sess-8</IDSession><IDCoffre>3</IDCoffre>
<Tech>TK-77</Tech><DateMise>260502183000</DateMise><Motif>Tirage</Motif>
<SoldeAvant>17.50</SoldeAvant><SoldeMouvement>2.50</SoldeMouvement><SoldeApres>20.00</SoldeApres>
</LOTIANNUL>""".encode()

LOJIGAIN = f"""<LOJIGAIN><IDOper>0042</IDOper><DateEvt>260503100000</DateEvt><IDEvt>23</IDEvt>
<IDJoueur>lot-7</IDJoueur><HashJoueur>{HASH}</HashJoueur><IDSession>sess-9</IDSession><IDCoffre>3</IDCoffre>
<Tech>GR-12</Tech><DateMise>260503095500</DateMise>
<SoldeAvant>20.00</SoldeAvant><SoldeMouvement>5</SoldeMouvement><SoldeApres>25.00</SoldeApres>
<GainAbond>0.40</GainAbond></LOJIGAIN>""".encode()

LOJIMISE = f"""<LOJIMISE><IDOper>0042</IDOper><DateEvt>260503095500</DateEvt><IDEvt>24</IDEvt>
<IDJoueur>lot-7</IDJoueur><HashJoueur>{HASH}</HashJoueur><IDSession>sess-9</IDSession><IDCoffre>3</IDCoffre>
<Tech>GR-12</Tech><Desc><Clair>Ticket à gratter</Clair><Nom>Gratte-ciel</Nom></Desc>
<SoldeAvant>21.00</SoldeAvant><SoldeMouvement>1</SoldeMouvement><SoldeApres>20.00</SoldeApres>
<Tel/></LOJIMISE>""".encode()

_FA_HEAD = f"""<IDOper>0042</IDOper><IDCoffre>4</IDCoffre><DateEvt>260601120000</DateEvt><IDEvt>31</IDEvt>
<IDJoueur>fan-3</IDJoueur><HashJoueur>{HASH}</HashJoueur><IPJoueur>198.51.100.9</IPJoueur>
<IDSession>sess-f</IDSession><Inscription>reg-3</Inscription><Tech>LIGUE-9</Tech>"""

FAINSCRIT = f"""<FAINSCRIT>{_FA_HEAD}<Description>Ligue d'été</Description><Sport>FOO</Sport>
<Evnt>CHAMP-2026</Evnt><Format>3/1/0/S</Format>
<SoldeAvant>50</SoldeAvant><SoldeMouvement>5</SoldeMouvement><SoldeApres>45</SoldeApres></FAINSCRIT>""".encode()

FAJEU = f"""<FAJEU>{_FA_HEAD}<Pool>P-1</Pool><Description>Barème normal</Description>
<IDCompo>compo-31</IDCompo><DateCompo>260601115900</DateCompo>
<Composition><Choix><Nom>Joueuse A</Nom><Info>Gardienne</Info></Choix>
<Choix><Nom>Joueuse B</Nom><Info>Avant-centre</Info></Choix></Composition></FAJEU>""".encode()

FABILAN = f"""<FABILAN>{_FA_HEAD}<Classement>3</Classement><Points>88</Points>
<SoldeAvant>45</SoldeAvant><SoldeMouvement>12</SoldeMouvement><SoldeApres>57</SoldeApres></FABILAN>""".encode()

FAANNUL = f"""<FAANNUL>{_FA_HEAD}<Motif>MSE</Motif>
<BonusAvant>0</BonusAvant><BonusMouvement>5</BonusMouvement><BonusApres>5</BonusApres></FAANNUL>""".encode()

TYPEMONNAIE = b"""<TYPEMONNAIE><IDOper>0042</IDOper><DateEvt>260101000000</DateEvt><IDEvt>41</IDEvt>
<IDCoffre>5</IDCoffre><IDMonnaie>JETON</IDMonnaie><Nom>Jeton vert</Nom><Desc>Jeton de jeu</Desc>
<Valeur>0.10</Valeur></TYPEMONNAIE>"""

OUVPOINTDEVENTE = """<OUVPOINTDEVENTE><IDOper>0042</IDOper><DateEvt>260101000000</DateEvt><IDEvt>51</IDEvt>
<IDCoffre>5</IDCoffre><IDPointDeVente>pdv-1</IDPointDeVente><DateOuverture>20260115</DateOuverture>
<Ad>Bar des Sports</Ad><Ad>2 place du Marché</Ad><CP>2A004</CP><Ville>Ajaccio</Ville><Pays>France</Pays>
<Taille>35.5</Taille></OUVPOINTDEVENTE>""".encode()

OWN_EVENTS = {
    "LOTIMISE": LOTIMISE,
    "LOTIANNUL": LOTIANNUL,
    "LOJIGAIN": LOJIGAIN,
    "LOJIMISE": LOJIMISE,
    "FAINSCRIT": FAINSCRIT,
    "FAJEU": FAJEU,
    "FABILAN": FABILAN,
    "FAANNUL": FAANNUL,
    "TYPEMONNAIE": TYPEMONNAIE,
    "OUVPOINTDEVENTE": OUVPOINTDEVENTE,
}


def documents(path) -> list[bytes]:
    return split_documents(path.read_bytes())


def shuffled(element: etree._Element, rng: random.Random) -> etree._Element:
    """A copy with every element's children shuffled, same-name siblings kept in their order."""
    out = copy.deepcopy(element)
    _shuffle(out, rng)
    return out


def _shuffle(element: etree._Element, rng: random.Random) -> None:
    children = [child for child in element if isinstance(child.tag, str)]
    for child in children:
        _shuffle(child, rng)
    order = children[:]
    rng.shuffle(order)
    by_tag: dict[str, list[etree._Element]] = {}
    for child in children:
        by_tag.setdefault(child.tag, []).append(child)
    arranged = [by_tag[child.tag].pop(0) for child in order]
    for child in children:
        element.remove(child)
    element.extend(arranged)


def rejected(raw: bytes) -> Rejected:
    with pytest.raises(Rejected) as exc:
        normalize(raw)
    return exc.value


def only(exc: Rejected) -> tuple[str, str]:
    assert len(exc.problems) == 1, exc.problems
    return str(exc.problems[0].code), exc.problems[0].path


# --------------------------------------------------------------------------- catalogue


def test_every_root_element_of_the_five_schemas_is_registered():
    expected = {
        "LOTI": (lottery, {"LOTIMISE", "LOTIANNUL", "LOTIGAIN", "LOTIBILAN"}),
        "LOJI": (lottery, {"LOJIMISE", "LOJIANNUL", "LOJIGAIN", "LOJIBILAN"}),
        "FA": (fantasy, {"FAINSCRIT", "FAJEU", "FAACHAT", "FAGAIN", "FABILAN", "FAANNUL"}),
        "MO": (money, {"TYPEMONNAIE"}),
        "PDV": (pdv, {"OUVPOINTDEVENTE", "MODIFPOINTDEVENTE", "CLOTUREPOINTDEVENTE"}),
    }
    for family, (module, tags) in expected.items():
        assert {tag for tag, model in EVENT_TYPES.items() if model.family == family} == tags
        for tag in tags:
            assert EVENT_TYPES[tag] is getattr(module, tag)


def test_elements_are_declared_in_schema_order():
    assert list(lottery.LOTIMISE.model_fields)[9:] == [
        "Supervision", "Tech", "TechJeu", "Jackpot", "Desc", "Selection", "SoldeAvant",
        "SoldeMouvement", "SoldeApres", "MiseAbond", "BonusAvant", "BonusMouvement",
        "BonusApres", "BonusNom", "Unite", "Tel", "Info",
    ]  # fmt: skip
    assert list(fantasy.FAINSCRIT.model_fields)[-17:] == [
        "Inscription", "Tech", "Description", "Sport", "Cat", "Evnt", "Disc", "Format",
        "SoldeAvant", "SoldeMouvement", "SoldeApres", "BonusAvant", "BonusMouvement",
        "BonusApres", "Info", "Unite", "Tel",
    ]  # fmt: skip


# --------------------------------------------------------------------------- the regulator's samples (cross-checks)


@pytest.mark.parametrize("path", sample_params("LOTI"))
def test_loti_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


@pytest.mark.parametrize("path", sample_params("LOJI"))
def test_loji_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


@pytest.mark.parametrize("path", sample_params("FA"))
def test_fa_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


@pytest.mark.parametrize("path", sample_params("MO"))
def test_mo_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


@pytest.mark.parametrize("path", sample_params("PDV"))
def test_pdv_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


def test_regulators_files_holding_several_events_are_split(reference_dir):
    for name in ("LOTI/LOTIGAIN2.xml", "LOTI/LOTIMISE3.xml"):
        events = [normalize(raw) for raw in documents(reference_dir / "samples" / name)]
        assert len(events) == 2 and events[0].Tech != events[1].Tech


# --------------------------------------------------------------------------- the fixture files


@pytest.mark.parametrize("name", ["LOTIGAIN-two", "LOTIMISE-two"])
def test_files_holding_several_events_are_split(name):
    events = [normalize(raw) for raw in split_documents(fixture(name))]  # a JSON list, XML one after another
    assert len(events) == 2 and events[0].Tech != events[1].Tech
    assert [e.IDEvt for e in events] == [events[0].IDEvt, events[0].IDEvt + 1]


@pytest.mark.parametrize("path", OWN_AND_SAMPLES_XML)
def test_input_order_does_not_matter(path):
    for raw in documents(path):
        root = etree.fromstring(raw)
        reference = canonical_bytes(normalize(raw))
        for seed in range(5):
            mixed = etree.tostring(shuffled(root, random.Random(seed)), encoding="UTF-8")
            assert canonical_bytes(normalize(mixed)) == reference


@pytest.mark.parametrize("path", OWN_AND_SAMPLES)
def test_round_trip(path):
    for raw in documents(path):
        event = normalize(raw)
        assert normalize(canonical_bytes(event)) == event
        assert normalize(to_json(event)) == event


# --------------------------------------------------------------------------- coffre's own events


@pytest.mark.parametrize("name", OWN_EVENTS)
def test_own_event_validates_and_reads_back(name, optional_schema_set):
    event = normalize(OWN_EVENTS[name])
    data = canonical_bytes(event)
    assert_schema_valid(optional_schema_set, event.family, data)
    assert normalize(data) == event
    assert normalize(to_json(event)) == event


@pytest.mark.parametrize("name", OWN_EVENTS)
def test_own_event_input_order_does_not_matter(name):
    raw = OWN_EVENTS[name]
    reference = canonical_bytes(normalize(raw))
    root = etree.fromstring(raw)
    for seed in range(10):
        mixed = etree.tostring(shuffled(root, random.Random(seed)), encoding="UTF-8")
        assert canonical_bytes(normalize(mixed)) == reference


def test_lottery_normalizations():
    event = normalize(LOTIMISE)
    assert event.DateEvt == "260502183000"
    assert event.HashJoueur == HASH.upper()
    assert event.IPJoueur == "2001:db8:0:0:0:0:0:7"  # Common.xsd's IP has no "::"
    assert event.SoldeMouvement == Decimal("2.50")
    assert [t.IDTirage for t in event.Desc.Tirage] == ["T-0502"]
    assert event.Selection.Option == ["option-a", "option-b"]
    assert normalize(LOJIMISE).Tel is True


def test_pdv_test_marker_as_attribute_or_element():
    as_attribute = normalize(OUVPOINTDEVENTE.replace(b"<OUVPOINTDEVENTE>", b'<OUVPOINTDEVENTE test="true">'))
    as_element = normalize(OUVPOINTDEVENTE.replace(b"</Taille>", b"</Taille><Test/>"))
    assert as_attribute == as_element and as_element.Test
    assert b"<Test></Test>" in canonical_bytes(as_element)
    assert not normalize(OUVPOINTDEVENTE).Test


def test_pdv_address_lines_keep_their_order():
    assert normalize(OUVPOINTDEVENTE).Ad == ["Bar des Sports", "2 place du Marché"]


def test_fa_leading_zeros_of_idevt_and_optional_codes():
    event = normalize(FAINSCRIT.replace(b"<IDEvt>31</IDEvt>", b"<IDEvt>0000031</IDEvt>"))
    assert event.IDEvt == 31 and event.Cat is None and event.Disc is None


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            FAANNUL.replace(b"<Motif>MSE</Motif>", b"<Motif>Annulation du match</Motif>"),
            ("INVALID_VALUE", "/FAANNUL/Motif"),
            id="fa-cancel-motif-not-in-enumeration",
        ),
        pytest.param(
            FAANNUL.replace(b"<Motif>MSE</Motif>", b"<Motif>NombreJoueurs</Motif>"),
            ("INVALID_VALUE", "/FAANNUL/Motif"),
            id="fa-cancel-motif-of-poker",
        ),
        pytest.param(
            LOTIANNUL.replace(b"<Motif>Tirage</Motif>", b"<Motif>Jeu</Motif>"),
            ("INVALID_VALUE", "/LOTIANNUL/Motif"),
            id="loti-cancel-motif-of-loji",
        ),
        pytest.param(
            LOTIMISE.replace(b"</Selection>", b"</Selection><Grille>1</Grille>"),
            ("UNEXPECTED_ELEMENT", "/LOTIMISE/Grille"),
            id="loti-unknown-element",
        ),
        pytest.param(
            re.sub(rb"<Selection>.*</Selection>", b"", LOTIMISE),
            ("MISSING_ELEMENT", "/LOTIMISE/Selection"),
            id="loti-missing-selection",
        ),
        pytest.param(
            LOJIMISE.replace(b"</Desc>", b"</Desc><Selection><Nombre>1</Nombre></Selection>"),
            ("UNEXPECTED_ELEMENT", "/LOJIMISE/Selection"),
            id="loji-has-no-selection",
        ),
        pytest.param(
            LOJIMISE.replace(b"<Tel/>", b"<Tel/><Tel/>"),
            ("TOO_MANY_OCCURRENCES", "/LOJIMISE/Tel"),
            id="loji-marker-twice",
        ),
        pytest.param(
            LOTIMISE.replace(b"<Tech>TK-77</Tech>", b""),
            ("MISSING_ELEMENT", "/LOTIMISE/Tech"),
            id="loti-missing-tech",
        ),
        pytest.param(
            LOTIMISE.replace(
                b"<Tirage><DateHeure>260502200000</DateHeure><IDTirage>T-0502</IDTirage></Tirage>", b""
            ),
            ("MISSING_ELEMENT", "/LOTIMISE/Desc/Tirage"),
            id="loti-desc-without-tirage",
        ),
        pytest.param(
            LOTIMISE.replace(
                b"</Tirage>",
                b"</Tirage>"
                + b"<Tirage><DateHeure>260502200000</DateHeure><IDTirage>T</IDTirage></Tirage>" * 64,
            ),
            ("TOO_MANY_OCCURRENCES", "/LOTIMISE/Desc/Tirage"),
            id="loti-65-tirages",
        ),
        pytest.param(
            LOTIMISE.replace(b"<Option>option-a</Option>", b"<Option>x</Option>" * 64),
            ("TOO_MANY_OCCURRENCES", "/LOTIMISE/Selection/Option"),
            id="loti-65-options",
        ),
        pytest.param(
            LOTIMISE.replace(b"<DateHeure>260502200000", b"<DateHeure>260230200000"),
            ("INVALID_DATE", "/LOTIMISE/Desc/Tirage[1]/DateHeure"),
            id="loti-impossible-draw-date",
        ),
        pytest.param(
            LOTIMISE.replace(b"<Clair>Grille du samedi", b"<Clair>Grille {samedi}"),
            ("INVALID_VALUE", "/LOTIMISE/Desc/Clair"),
            id="loti-clair-outside-fr-charset",
        ),
        pytest.param(
            LOTIMISE.replace(b"<IDSession>sess-7", b"<IDSession>" + b"s" * 257),
            ("TOO_LONG", "/LOTIMISE/IDSession"),
            id="loti-session-over-256",
        ),
        pytest.param(
            LOJIGAIN.replace(b"<GainAbond>0.40", b"<GainAbond>-0.40"),
            ("NEGATIVE_AMOUNT", "/LOJIGAIN/GainAbond"),
            id="loji-negative-gain-abond",
        ),
        pytest.param(
            LOJIGAIN.replace(b"<SoldeMouvement>5", b"<SoldeMouvement>-5"),
            ("NEGATIVE_AMOUNT", "/LOJIGAIN/SoldeMouvement"),
            id="loji-negative-movement",
        ),
        pytest.param(
            LOJIGAIN.replace(b"<DateMise>260503095500", b"<DateMise>2605030955"),
            ("INVALID_DATE", "/LOJIGAIN/DateMise"),
            id="loji-short-date",
        ),
        pytest.param(
            FAINSCRIT.replace(b"<Format>3/1/0/S</Format>", b"<Format>3/1</Format>"),
            ("INVALID_FORMAT_CODE", "/FAINSCRIT/Format"),
            id="fa-bad-format",
        ),
        pytest.param(
            FAINSCRIT.replace(b"<Sport>FOO</Sport>", b"<Sport>FO</Sport>"),
            ("INVALID_VALUE", "/FAINSCRIT/Sport"),
            id="fa-sport-code-of-two",
        ),
        pytest.param(
            FAINSCRIT.replace(b"<Evnt>CHAMP-2026</Evnt>", b"<Evnt>" + b"E" * 65 + b"</Evnt>"),
            ("TOO_LONG", "/FAINSCRIT/Evnt"),
            id="fa-event-code-over-64",
        ),
        pytest.param(
            FAINSCRIT.replace(b"<Evnt>CHAMP-2026</Evnt>", b""),
            ("MISSING_ELEMENT", "/FAINSCRIT/Evnt"),
            id="fa-missing-event-code",
        ),
        pytest.param(
            FAINSCRIT.replace(b"<SoldeApres>45</SoldeApres>", b""),
            ("INCOMPLETE_GROUP", "/FAINSCRIT/SoldeApres"),
            id="fa-incomplete-finance",
        ),
        pytest.param(
            FABILAN.replace(b"<Points>88</Points>", b""),
            ("MISSING_ELEMENT", "/FABILAN/Points"),
            id="fa-final-without-points",
        ),
        pytest.param(
            FABILAN.replace(b"<Classement>3</Classement>", b"<Classement>-3</Classement>"),
            ("INVALID_INTEGER", "/FABILAN/Classement"),
            id="fa-negative-rank",
        ),
        pytest.param(
            FAJEU.replace(b"<Info>Gardienne</Info>", b""),
            ("MISSING_ELEMENT", "/FAJEU/Composition/Choix[1]/Info"),
            id="fa-choice-without-role",
        ),
        pytest.param(
            re.sub(rb"<Composition>.*</Composition>", b"<Composition/>", FAJEU, flags=re.DOTALL),
            ("MISSING_ELEMENT", "/FAJEU/Composition/Choix"),
            id="fa-empty-composition",
        ),
        pytest.param(
            TYPEMONNAIE.replace(b"<Valeur>0.10", b"<Valeur>-0.10"),
            ("NEGATIVE_AMOUNT", "/TYPEMONNAIE/Valeur"),
            id="mo-negative-value",
        ),
        pytest.param(
            TYPEMONNAIE.replace(b"<Nom>Jeton vert</Nom>", b""),
            ("MISSING_ELEMENT", "/TYPEMONNAIE/Nom"),
            id="mo-missing-name",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace(b"<Ad>Bar des Sports</Ad>", b"<Ad>ligne</Ad>" * 8),
            ("TOO_MANY_OCCURRENCES", "/OUVPOINTDEVENTE/Ad"),
            id="pdv-nine-address-lines",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace("<Ad>Bar des Sports</Ad><Ad>2 place du Marché</Ad>".encode(), b""),
            ("MISSING_ELEMENT", "/OUVPOINTDEVENTE/Ad"),
            id="pdv-no-address-line",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace(b"<CP>2A004</CP>", b"<CP>2C004</CP>"),
            ("INVALID_VALUE", "/OUVPOINTDEVENTE/CP"),
            id="pdv-bad-postal-code",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace(b"<DateOuverture>20260115", b"<DateOuverture>20260230"),
            ("INVALID_DATE", "/OUVPOINTDEVENTE/DateOuverture"),
            id="pdv-impossible-opening-date",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace(b"<Taille>35.5", b"<Taille>-1"),
            ("NEGATIVE_AMOUNT", "/OUVPOINTDEVENTE/Taille"),
            id="pdv-negative-size",
        ),
        pytest.param(
            OUVPOINTDEVENTE.replace(b"OUVPOINTDEVENTE", b"MODIFPOINTDEVENTE"),
            ("UNEXPECTED_ELEMENT", "/MODIFPOINTDEVENTE/DateOuverture"),
            id="pdv-modification-has-no-opening-date",
        ),
    ],
)
def test_refusal(raw, expected):
    assert only(rejected(raw)) == expected
