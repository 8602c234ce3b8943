"""normalize's fast path (valid XML read without paths, repeated members remembered, the structural
limits proved rather than checked) against the full path it stands in for: the same event, the same
canonical bytes, the same rejection, on every input the tests know and on hands mutated to fail."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from lxml import etree

from coffre.demo import demo_files
from coffre.domain.audit.play import play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.catalogue import EVENT_TYPES
from coffre.domain.catalogue.poker import Round
from coffre.domain.codec import canonical_bytes, read_xml, split_documents
from coffre.domain.errors import Rejected
from coffre.domain.limits import MAX_ATTRIBUTES, MAX_DEPTH, MAX_ELEMENTS
from coffre.domain.normalize import _fast, normalize
from coffre.domain.xmlmodel import _MEMBERS, _remembered_members, shape

from events import fixture_inputs
from hostile import hostile_cases


def outcome(raw: bytes, *, fast: bool) -> tuple[Any, ...]:
    """What normalize gives, in a form to compare: the event, its class and canonical bytes, or the
    rejection's problems, event type and omitted count."""
    try:
        event = normalize(raw, fast=fast)
    except Rejected as refusal:
        return ("rejected", refusal.problems, refusal.event_type, refusal.omitted)
    return ("event", type(event), event, canonical_bytes(event))


def same_both_ways(raw: bytes) -> tuple[Any, ...]:
    full = outcome(raw, fast=False)
    assert outcome(raw, fast=True) == full
    assert outcome(raw, fast=True) == full  # again, the members now remembered
    return full


def hands(count: int, seed: int = 31) -> list[bytes]:
    """Hands of every variant the engine plays, 3 to 6 seats, as canonical XML."""
    rng = random.Random(seed)
    regles = list(ENGINE_VARIANTS)
    out = []
    for k in range(count):
        regle = regles[k % len(regles)]
        seats = {
            s: f"{rng.randint(200, 2000) / 100:.2f}" for s in rng.sample(range(1, 10), rng.randint(3, 6))
        }
        kind = ENGINE_VARIANTS[regle].kind
        played = play_hand(regle, seats, rng, ante="0.02" if kind == "stud" else 0, rake="0.05")
        out.append(canonical_bytes(normalize(played.json())))
    return out


HANDS = hands(22)


def known_inputs() -> Iterator[tuple[str, bytes]]:
    for path in fixture_inputs():
        for n, doc in enumerate(split_documents(path.read_bytes())):
            yield f"fixture/{path.parent.name}/{path.name}#{n}", doc
    for story, name, raw in demo_files():
        yield f"demo/{story}/{name}", raw
    for case in hostile_cases():
        if not case.headers:
            yield f"hostile/{case.name}", case.value


KNOWN = list(known_inputs())


@pytest.mark.parametrize("raw", [raw for _, raw in KNOWN], ids=[name for name, _ in KNOWN])
def test_every_known_input_gives_the_same_both_ways(raw: bytes):
    same_both_ways(raw)


def test_the_fast_path_is_taken_for_valid_xml_events():
    taken = 0
    for name, raw in KNOWN:
        if name.startswith("hostile/") or not raw.lstrip().startswith(b"<"):
            continue
        try:
            expected = normalize(raw, fast=False)
        except Rejected:
            continue
        root = read_xml(raw)
        if root.tag.startswith("{"):  # namespaced: left to the full path, which drops the namespaces
            assert _fast(root, raw, None) is None
            continue
        assert _fast(root, raw, None) == expected, name
        taken += 1
    for raw in HANDS:
        assert _fast(read_xml(raw), raw, None) is not None
    assert taken > 100


def test_every_event_type_is_within_the_limits_the_fast_path_proves():
    for model in EVENT_TYPES.values():
        depth, attributes = shape(model)
        assert depth <= MAX_DEPTH and attributes <= MAX_ATTRIBUTES, model.__name__
    assert _remembered_members(Round, "Action")


@pytest.mark.parametrize("raw", HANDS, ids=[f"hand{n}" for n in range(len(HANDS))])
def test_hands_give_the_same_event_both_ways_and_an_assigned_id(raw: bytes):
    assert same_both_ways(raw)[0] == "event"
    assert normalize(raw, id_evt=77) == normalize(raw, id_evt=77, fast=False)
    assert normalize(raw, id_evt=77).IDEvt == 77


def _mutations(raw: bytes) -> Iterator[tuple[str, bytes]]:
    """The hand changed in one place, each way a member, a leaf or the structure may go wrong."""
    root = etree.fromstring(raw)

    def changed(xpath: str, change: Any) -> bytes | None:
        copy = etree.fromstring(raw)
        found = copy.xpath(xpath)
        if not found:
            return None
        change(found[0], copy)
        return etree.tostring(copy)

    def text(value: str) -> Any:
        def set_text(el: etree._Element, _: etree._Element) -> None:
            el.text = value

        return set_text

    def attribute(name: str, value: str) -> Any:
        return lambda el, _: el.set(name, value)

    def append(tag: str, value: str = "1") -> Any:
        return lambda el, _: etree.SubElement(el, tag).__setattr__("text", value)

    def drop(el: etree._Element, _: etree._Element) -> None:
        el.getparent().remove(el)

    def duplicate(el: etree._Element, _: etree._Element) -> None:
        el.addnext(etree.fromstring(etree.tostring(el, with_tail=False)))

    def nest(el: etree._Element, _: etree._Element) -> None:
        inner = el
        for _n in range(MAX_DEPTH + 2):
            inner = etree.SubElement(inner, "Deeper")

    changes = {
        "card-out-of-range": ("(//Draw/Valeur)[1]", text("52")),
        "card-not-a-number": ("(//Draw/Valeur)[2]", text("x")),
        "card-spaced": ("(//Draw/Valeur)[1]", text(" 7 ")),
        "card-padded": ("(//Draw/Valeur)[1]", text(" " * 300 + "7")),
        "bet-negative": ("(//Bet/Valeur)[1]", text("-0.10")),
        "bet-amount-spaced": ("(//Bet/Valeur)[1]", text(" 0.10 ")),
        "bet-unknown-name": ("(//Bet)[1]", attribute("name", "steal")),
        "bet-name-cased": ("(//Bet)[1]", attribute("name", " Big Blind ")),
        "bet-unknown-attribute": ("(//Bet)[2]", attribute("colour", "red")),
        "bet-name-missing": ("(//Bet)[1]/@name", lambda el, _: el.getparent().attrib.pop("name")),
        "check-seat-dropped": ("(//Check/Siege)[1]", drop),
        "check-seat-twice": ("(//Check/Siege)[1]", duplicate),
        "check-extra-element": ("(//Check)[1]", append("Valeur")),
        "seat-with-child": ("(//Check/Siege)[1]", append("Inner")),
        "seat-with-attribute": ("(//Fold/Siege)[1]", attribute("x", "1")),
        "draw-without-seat": ("(//Draw[not(@commune)]/Siege)[1]", drop),
        "draw-commune-as-element": ("(//Draw[@commune])[1]", append("ouverte", "true")),
        "draw-board-bad": ("(//Draw)[1]", attribute("board", "-1")),
        "unknown-action": ("(//Tour)[2]", append("Steal")),
        "tour-empty": (
            "(//Tour)[2]",
            lambda el, _: [el.remove(a) for a in el if a.tag not in ("Timestamp",)],
        ),
        "tour-twice": ("(//Tour)[1]", duplicate),
        "tour-timestamp-bad": ("(//Tour/Timestamp)[1]", text("261301120000")),
        "player-net-bad": ("(//Finance/Net)[1]", text("1.2.3")),
        "player-ip-bad": ("(//IPJoueur)[1]", text("300.1.1.1")),
        "player-alone": (
            "(//Joueur)[2]",
            lambda el, _: [el.getparent().remove(j) for j in el.itersiblings()],
        ),
        "stackin": ("(//CaveAvant)[1]", lambda el, _: setattr(el, "tag", "Stackin")),
        "header-dropped": ("/*/IDCoffre", drop),
        "header-twice": ("/*/IDOper", duplicate),
        "regle-spaced": ("/*/Regle", lambda el, _: setattr(el, "text", " " + " ".join(el.text) + " ")),
        "too-deep": ("(//Check)[1]", nest),
        "too-many-attributes": ("(//Bet)[1]", lambda el, _: [el.set(f"a{i}", "1") for i in range(20)]),
        "comment-and-pi": (
            "(//Check)[1]",
            lambda el, _: (el.append(etree.Comment("c")), el.addprevious(etree.ProcessingInstruction("p"))),
        ),
    }
    for name, (xpath, change) in changes.items():
        mutated = changed(xpath, change)
        if mutated is not None:
            yield name, mutated
    text_ = raw.decode()
    yield "whitespace-between", text_.replace("><", ">\n  <").encode()
    yield "character-references", text_.replace("<Siege>", "<Siege>&#32;").encode()
    yield "namespaced", text_.replace(f"<{root.tag}>", f'<{root.tag} xmlns="urn:x">', 1).encode()
    yield "utf-16", ('<?xml version="1.0" encoding="UTF-16"?>' + text_).encode("utf-16")
    yield "latin-1", ('<?xml version="1.0" encoding="ISO-8859-1"?>' + text_).encode("latin-1")
    yield "declared-utf-7", b'<?xml version="1.0" encoding="UTF-7"?>' + raw
    many = "".join(f"<Check><Siege>{1 + n % 9}</Siege></Check>" for n in range(MAX_ELEMENTS // 2 + 10))
    yield "too-many-elements", text_.replace("</Tour>", many + "</Tour>", 1).encode()


MUTATED = [
    (f"hand{n}-{name}", mutated) for n, raw in enumerate(HANDS[:11]) for name, mutated in _mutations(raw)
]


@pytest.mark.parametrize("raw", [raw for _, raw in MUTATED], ids=[name for name, _ in MUTATED])
def test_mutated_hands_give_the_same_both_ways(raw: bytes):
    same_both_ways(raw)


def test_the_mutations_cover_rejections_and_the_limits():
    kinds = {name.split("-", 1)[1]: same_both_ways(raw) for name, raw in MUTATED[:40]}
    assert sum(result[0] == "rejected" for result in kinds.values()) > 10
    assert sum(result[0] == "event" for result in kinds.values()) > 3
    deep = outcome(dict(MUTATED)["hand0-too-deep"], fast=True)
    assert [p.code for p in deep[1]] == ["LIMIT_EXCEEDED"]
    crowded = outcome(dict(MUTATED)["hand0-too-many-attributes"], fast=True)
    assert [p.code for p in crowded[1]] == ["LIMIT_EXCEEDED"]
    many = outcome(dict(MUTATED)["hand0-too-many-elements"], fast=True)
    assert [p.code for p in many[1]] == ["LIMIT_EXCEEDED"]


def test_a_remembered_member_is_the_model_validation_builds():
    raw = HANDS[0]
    normalize(raw)
    remembered = {key: model for memory in _MEMBERS.values() for key, model in memory.items()}
    assert remembered
    for key, model in list(remembered.items())[:200]:
        member = type(model)
        fresh = member.model_validate({member.xml_tag: _data_of(member, etree.fromstring(key))})
        assert fresh == model and fresh.model_fields_set == model.model_fields_set


def _data_of(member: Any, el: etree._Element) -> dict[str, Any]:
    from coffre.domain.xmlmodel import element_to_data

    problems: list[Any] = []
    data = element_to_data(member, el, f"/{member.xml_tag}", problems)
    assert not problems
    return data


def test_compact_dates_are_checked_as_strptime_checks_them():
    from datetime import datetime

    from coffre.domain.types import _real_compact

    def strptime(text: str, fmt: str) -> bool:
        try:
            datetime.strptime(text, fmt)
        except ValueError:
            return False
        return True

    rng = random.Random(5)
    fields = [
        "00",
        "01",
        "09",
        "10",
        "12",
        "13",
        "19",
        "20",
        "23",
        "24",
        "28",
        "29",
        "30",
        "31",
        "32",
        "59",
        "60",
        "61",
        "99",
    ]
    years = ["0000", "0001", "1900", "2000", "2023", "2024", "2100", "9999"]
    for fmt, count in (("%Y%m%d%H%M%S", 5), ("%Y%m%d%H%M", 4), ("%Y%m%d", 2)):
        cases = [y + "".join(rng.choice(fields) for _ in range(count)) for y in years for _ in range(300)]
        cases += ["".join(rng.choice("0123456789") for _ in range(4 + 2 * count)) for _ in range(3000)]
        cases += ["2024" + "0229" + "00" * (count - 2), "2023" + "0229" + "00" * (count - 2)]
        cases += [
            "2024" + "0٢01" + "00" * (count - 2),
            "2024" + "1٢01" + "00" * (count - 2),
            "2024²" + "0" * (2 * count - 1),
        ]
        for text in cases:
            assert _real_compact(text, fmt) == strptime(text, fmt), (text, fmt)


def test_hostile_inputs_cost_the_fast_path_little_and_long_members_are_not_kept():
    import time

    from coffre.domain.xmlmodel import MEMBER_KEY_LONGEST

    for case in hostile_cases():
        if case.headers or not case.value.lstrip().startswith(b"<"):
            continue
        try:
            root = read_xml(case.value)
        except Rejected:
            continue
        started = time.process_time()
        assert _fast(root, case.value, None) is None, case.name
        assert time.process_time() - started < 1.0, case.name  # 50,000 attributes once took 10 s
    padded = dict(MUTATED)["hand0-card-padded"]
    assert same_both_ways(padded)[0] == "event"
    assert all(len(key) <= MEMBER_KEY_LONGEST for memory in _MEMBERS.values() for key in memory)
