"""The demo's events (coffre/demo/events): every one normalizes and validates, the annex ones
hold exactly the annex's facts, and the tournament adds up, hand by hand and account by account."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from coffre.demo import DemoEvent, DemoEventError, load_demo
from coffre.domain.annex import annex_examples, reference_annex_path
from coffre.domain.audit.hand import audit_hand
from coffre.domain.catalogue.poker import VARIANTS
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize


@pytest.fixture(scope="module")
def demo() -> list[DemoEvent]:
    return load_demo()


def story(demo: list[DemoEvent], name: str) -> list:
    return [e.event for e in demo if e.story == name]


def test_the_demo_is_the_annex_examples_then_a_tournament(demo):
    assert [e.story for e in demo] == ["annex"] * 6 + ["cash"] * 5 + ["mixed"] * 40 + ["tournament"] * 21
    assert [e.event.xml_tag for e in demo[:6]] == [
        "POINSCRIT",
        "POACHAT",
        "POGAIN",
        "POBILAN",
        "POANNUL",
        "POJEU",
    ]
    assert Counter(e.xml_tag for e in story(demo, "tournament")) == {
        "CPTEALIM": 1,
        "POINSCRIT": 5,
        "POANNUL": 1,
        "POJEU": 5,
        "POACHAT": 1,
        "POGAIN": 3,
        "POBILAN": 4,
        "CPTERETRAIT": 1,
    }
    assert {(e.IDOper, e.IDCoffre) for e in story(demo, "annex")} == {("0099", 1)}
    assert {(e.IDOper, e.IDCoffre) for e in story(demo, "tournament")} == {("0099", 2)}


def test_every_demo_event_validates_against_the_regulators_schemas(demo, schema_set):
    for e in demo:
        assert schema_set.errors(e.event.family, canonical_bytes(e.event)) == [], e.name


def test_the_annex_events_hold_exactly_the_annex_examples_facts(demo):
    path = reference_annex_path()
    if not path.is_file():
        pytest.skip(f"the annex text is not at {path} (set COFFRE_DET_ANNEX)")
    ours = {e.name.split("-")[0]: canonical_bytes(e.event) for e in demo if e.story == "annex"}
    theirs = {
        f"1.4.3.{letter}": canonical_bytes(normalize(raw)) for letter, raw in annex_examples(path).items()
    }
    assert ours == theirs


def test_each_event_tells_its_story(demo):
    lines = [e.line for e in demo]
    assert lines[0] == (
        "annex 1.4.3.a: arjel-demo01 registers for NPT16 and pays 100.00 (balance 1000.00 -> 900.00)"
    )
    assert (
        "tournament 09: hand 2 of T-42, 4 players, Texas Hold'em No Limit (50-100): bruno wins 1350 jetons at showdown; chloe is bust"
        in lines
    )
    assert "tournament 20: bruno ends T-42 in place 1 and is paid 26.00 (balance 29.50 -> 55.50)" in lines


# -- the tournament adds up ------------------------------------------------------------------------

DEBITS = {"POINSCRIT", "POACHAT", "CPTERETRAIT"}  # the player pays; every other movement is paid to them


def test_each_players_balance_follows_from_their_previous_event(demo):
    balances: dict[str, Decimal] = {}
    for event in story(demo, "tournament"):
        if event.xml_tag == "POJEU":
            continue
        sign = -1 if event.xml_tag in DEBITS else 1
        assert event.SoldeApres == event.SoldeAvant + sign * event.SoldeMouvement, event.IDEvt
        if event.IDJoueur in balances:
            assert event.SoldeAvant == balances[event.IDJoueur], event.IDEvt
        balances[event.IDJoueur] = event.SoldeApres
    paid = sum(e.SoldeMouvement for e in story(demo, "tournament") if e.xml_tag in ("POGAIN", "POBILAN"))
    taken = sum(e.SoldeMouvement for e in story(demo, "tournament") if e.xml_tag in ("POINSCRIT", "POACHAT"))
    refunded = sum(e.SoldeMouvement for e in story(demo, "tournament") if e.xml_tag == "POANNUL")
    assert (taken - refunded, paid) == (Decimal("50.00"), Decimal("45.00"))  # the operator keeps 10 %


def test_registrations_cancellation_and_results_trace_to_each_other(demo):
    events = story(demo, "tournament")
    registered = {e.Inscription: e.IDJoueur for e in events if e.xml_tag == "POINSCRIT"}
    cancelled = {e.Inscription for e in events if e.xml_tag == "POANNUL"}
    assert cancelled == {"T42-emma"} and cancelled <= registered.keys()
    playing = registered.keys() - cancelled
    for e in events:
        if e.xml_tag in ("POACHAT", "POGAIN", "POBILAN"):
            assert e.Inscription in playing and registered[e.Inscription] == e.IDJoueur
        if e.xml_tag == "POJEU":
            assert {j.Inscription for j in e.Participants.Joueur} <= playing
    places = {e.IDJoueur: e.Classement for e in events if e.xml_tag == "POBILAN"}
    assert places == {"david": 4, "chloe": 3, "alice": 2, "bruno": 1}


def test_every_hand_audits_clean_but_the_falsified_one(demo):
    """The hands pokerkit played (T-77, all eleven variants), T-42's scripted ones and the annex's
    replay without a finding (cards, order, legal sizes, money, showdown: coffre.domain.audit.hand);
    CG-9's hand, falsified on purpose, is flagged where the falsification is: the payoffs."""
    hands = [e for e in demo if e.event.xml_tag == "POJEU"]
    assert len(hands) >= 31
    assert {e.event.Regle for e in hands if e.story == "mixed"} == set(VARIANTS)
    for e in hands:
        findings = audit_hand(e.event)
        if e.story == "cash":
            assert {f.code for f in findings} == {"PAYOFF_WRONG"}, findings
            assert {f.seat for f in findings} == {j.Siege for j in e.event.Participants.Joueur}
        else:
            assert findings == [], (e.story, e.name, findings)


def test_chips_carry_over_from_hand_to_hand(demo):
    """A hand starts with the chips the previous one ended with, plus 1500 for a re-buy; a player
    left with none plays no further hand unless they buy again."""
    chips: dict[str, Decimal] = {}
    for event in story(demo, "tournament"):
        if event.xml_tag == "POINSCRIT":
            chips[event.IDJoueur] = Decimal(1500)
        elif event.xml_tag == "POANNUL":
            del chips[event.IDJoueur]
        elif event.xml_tag == "POACHAT":
            chips[event.IDJoueur] += 1500
        elif event.xml_tag == "POJEU":
            players = {j.IDJoueur: j.Finance for j in event.Participants.Joueur}
            assert {name for name, n in chips.items() if n} == players.keys(), event.Pool
            for name, finance in players.items():
                assert finance.CaveAvant == chips[name], (event.Pool, name)
                chips[name] = finance.CaveApres
    assert chips == {"alice": 0, "bruno": 7500, "chloe": 0, "david": 0}


# -- a bad demo event -------------------------------------------------------------------------------


def test_a_demo_event_that_does_not_normalize_is_named(tmp_path):
    (tmp_path / "story").mkdir()
    good = next(e for e in load_demo() if e.story == "tournament").raw
    (tmp_path / "story" / "01-good.json").write_bytes(good)
    (tmp_path / "story" / "02-bad.xml").write_bytes(b"<POINSCRIT><IDOper>099</IDOper></POINSCRIT>")
    with pytest.raises(DemoEventError) as refused:
        load_demo(tmp_path)
    assert refused.value.problems[0].startswith("story/02-bad.xml: INVALID_OPERATOR_ID /POINSCRIT/IDOper: ")
    with pytest.raises(DemoEventError, match="no event file"):
        load_demo(tmp_path / "story")
