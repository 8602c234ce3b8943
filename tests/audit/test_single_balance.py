"""The checks of one event alone: every balance group of the catalogue, in the direction its event
type gives it (coffre.domain.audit.single.MOVEMENTS), on coffre's fixtures, on hand-made wrong
amounts, and on the regulator's samples (whose six known arithmetic defects are found, and only
those); and what they cost per event (ingest runs them on every event)."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from coffre.domain.audit.findings import CODES
from coffre.domain.audit.single import MOVEMENTS, Direction, balances, check_event
from coffre.domain.catalogue.base import EVENT_TYPES
from coffre.domain.codec import split_documents
from coffre.domain.normalize import normalize

from events import fixture, fixture_inputs

BALANCE_WORDS = ("Solde", "Bonus", "Mise", "Gain", "Monnaie", "Ajust", "Abond", "Rembours", "MontantAchat")
NOT_A_MOVEMENT = {
    ("PREFCPTE", "MiseMax"),  # a limit the player sets, not a movement
    ("CLOTUREDEM", "SoldeClos"),
    (
        "CPTERETRAIT",
        "SoldeDemande",
    ),  # the amount asked for; SoldeMouvement is what was paid  # a balance with no movement: chained by the trail
    ("PASPMISE", "MiseAbond"),  # the part of the stake paid by the operator: in no compartment
    ("PAHIMISE", "MiseAbond"),
    ("LOTIMISE", "MiseAbond"),
    ("LOJIMISE", "MiseAbond"),
    ("PASPGAIN", "GainAbond"),  # counted or not with the gain (Movement.also)
    ("PAHIGAIN", "GainAbond"),
    ("LOTIGAIN", "GainAbond"),
    ("LOJIGAIN", "GainAbond"),
}


def _amount(name: str) -> bool:
    """A field named like an amount (not ``BonusNom``, ``DateMise``, ``TypeAjust``, ``IDMonnaie``)."""
    return (
        any(w in name for w in BALANCE_WORDS)
        and "Nom" not in name
        and not name.startswith(("Date", "Type", "ID"))
    )


def test_every_balance_field_of_the_catalogue_is_in_a_group_or_known_not_to_be():
    """A new event type with a balance group must get its line in the direction table."""
    grouped = {
        (tag, name)
        for tag, groups in MOVEMENTS.items()
        for g in groups
        for name in (g.before, g.movement, g.after)
    }
    for tag, model in EVENT_TYPES.items():
        for name in model.model_fields:
            if _amount(name) and (tag, name) not in NOT_A_MOVEMENT:
                assert (tag, name) in grouped, f"{tag}.{name} is in no balance group of MOVEMENTS"
    for tag, groups in MOVEMENTS.items():
        for g in groups:
            for name in (g.before, g.movement, g.after):
                assert name in EVENT_TYPES[tag].model_fields, f"{tag} has no {name}"


def test_the_codes_are_registered():
    for code in ("BALANCE_ARITHMETIC", "BONUS_ARITHMETIC", "CURRENCY_ARITHMETIC"):
        assert CODES[code][0] == "trail"


@pytest.mark.parametrize("path", fixture_inputs(), ids=lambda p: f"{p.parent.name}-{p.name}")
def test_coffres_own_fixtures_add_up(path):
    for raw in split_documents(path.read_bytes()):
        assert check_event(normalize(raw)) == []


def _with(name: str, **changes: str):
    event = normalize(fixture(name))
    return event.model_copy(update={k: Decimal(v) for k, v in changes.items()})


@pytest.mark.parametrize(
    ("name", "changes", "code", "expected"),
    [
        # debits: registration, buy-in, stake, withdrawal, virtual currency bought
        ("POINSCRIT", {"SoldeApres": "202.00"}, "BALANCE_ARITHMETIC", "= 158.00"),
        ("POACHAT", {"BonusApres": "99"}, "BONUS_ARITHMETIC", "BonusApres 99 ≠"),
        ("FAINSCRIT", {"SoldeMouvement": "1"}, "BALANCE_ARITHMETIC", "SoldeMouvement 1"),
        ("CPTERETRAIT", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "SoldeApres 0 ≠ SoldeAvant"),
        ("PASPMISE", {"SoldeApresMise": "0"}, "BALANCE_ARITHMETIC", "SoldeAvantMise"),
        ("PAHIMISE", {"Mise": "0.01"}, "BALANCE_ARITHMETIC", "− Mise 0.01"),
        ("LOTIMISE", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "−"),
        ("ACHATMONNAIE", {"MonnaieApres": "0"}, "CURRENCY_ARITHMETIC", "MonnaieAvant"),
        # credits: gains, settlements, cancellations, deposits, operator's money
        ("POBILAN", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ SoldeMouvement"),
        ("POANNUL", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ SoldeMouvement"),
        ("POGAIN", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+"),
        ("CPTEALIM", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ SoldeMouvement"),
        ("CPTEABOND", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ MontAbond"),
        ("CPTEALIMOPE", {"BonusApres": "0"}, "BONUS_ARITHMETIC", "+ BonusMouvement"),
        ("PASPGAIN", {"SoldeApresGain": "0"}, "BALANCE_ARITHMETIC", "+ Gain"),
        ("PASPANNUL", {"SoldeApresRembours": "0"}, "BALANCE_ARITHMETIC", "+ MontantRembours"),
        ("PAHIANNUL", {"SoldeApresRembours": "0"}, "BALANCE_ARITHMETIC", "+ MontantRembours"),
        ("LOJIANNUL", {"BonusApres": "0"}, "BONUS_ARITHMETIC", "+ BonusMouvement 3.00"),
        ("LOTIANNUL", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ SoldeMouvement 2.20"),
        # signed: the adjustment carries its sign
        ("CPTEAJUSTOPE", {"SoldeApres": "0"}, "BALANCE_ARITHMETIC", "+ Ajustement"),
    ],
)
def test_a_wrong_amount_is_found_in_its_direction(name, changes, code, expected):
    event = _with(name, **changes)
    findings = check_event(event)
    assert [f.code for f in findings] == [code], findings
    assert expected in findings[0].message
    assert findings[0].player == event.IDJoueur


def test_the_direction_is_the_event_types():
    """The same three amounts add up as a registration and not as a settlement, and conversely."""
    registration = _with("POINSCRIT", SoldeAvant="100", SoldeMouvement="10", SoldeApres="90")
    settlement = normalize(fixture("POBILAN"))
    settlement = settlement.model_copy(
        update={"SoldeAvant": Decimal(100), "SoldeMouvement": Decimal(10), "SoldeApres": Decimal(90)}
    )
    assert check_event(registration) == []
    assert [f.code for f in check_event(settlement)] == ["BALANCE_ARITHMETIC"]
    assert {g.direction for g in MOVEMENTS["POINSCRIT"]} == {Direction.DEBIT}
    assert {g.direction for g in MOVEMENTS["POBILAN"]} == {Direction.CREDIT}
    assert {g.direction for g in MOVEMENTS["CPTEAJUSTOPE"]} == {Direction.SIGNED}


def test_a_negative_adjustment_adds_its_sign():
    event = _with("CPTEAJUSTOPE", SoldeAvant="10", Ajustement="-20", SoldeApres="-10")
    assert check_event(event) == []
    assert [f.code for f in check_event(event.model_copy(update={"SoldeApres": Decimal(30)}))] == [
        "BALANCE_ARITHMETIC"
    ]


def test_gainabond_may_be_counted_with_the_gain_or_not():
    """The texts do not say whether GainAbond is credited with Gain (the regulator's PASPGAIN3 counts
    it): both readings are accepted, anything else is a finding."""
    base = _with("PASPGAIN", SoldeAvantGain="45.83", Gain="8.20")
    assert check_event(base.model_copy(update={"SoldeApresGain": Decimal("54.03")})) == []
    with_abond = base.model_copy(update={"GainAbond": Decimal("5.00")})
    assert check_event(with_abond.model_copy(update={"SoldeApresGain": Decimal("59.03")})) == []
    assert check_event(with_abond.model_copy(update={"SoldeApresGain": Decimal("54.03")})) == []
    wrong = check_event(with_abond.model_copy(update={"SoldeApresGain": Decimal("60")}))
    assert [f.code for f in wrong] == ["BALANCE_ARITHMETIC"] and "GainAbond 5.00" in wrong[0].message


def test_an_absent_group_is_not_checked():
    event = _with("CPTEAJUSTOPE")
    groups = [g.compartment for g, *_ in balances(event)]
    assert groups == ["solde"]  # the fixture has no bonus group


SAMPLE_DEFECTS = {
    ("LOJIANNUL.xml", 0): "SoldeApres 1745.83 ≠ SoldeAvant 45.83 + SoldeMouvement 1.00 = 46.83",
    ("LOTIANNUL.xml", 0): "SoldeApres 1745.83 ≠ SoldeAvant 45.83 + SoldeMouvement 1.00 = 46.83",
    ("PAHIMISE4.xml", 1): "SoldeApresMise 22.33 ≠ SoldeAvantMise 27.83 − Mise 0.50 = 27.33",
    ("PAHIMISE6.xml", 0): "SoldeApresMise 22.33 ≠ SoldeAvantMise 27.33 − Mise 10 = 17.33",
    ("PAHIMISE7.xml", 0): "SoldeApresMise 22.33 ≠ SoldeAvantMise 27.33 − Mise 10 = 17.33",
    ("PASPMISE13.xml", 0): "SoldeApresMise 45.98 ≠ SoldeAvantMise 47.33 − Mise 1.50 = 45.83",
}
"""The regulator's samples whose amounts do not add up (copied amounts): found, as they should be."""


@pytest.mark.reference
def test_the_regulators_samples_add_up_but_for_their_known_defects(reference_dir):
    found = {}
    checked = 0
    for path in sorted((reference_dir / "samples").glob("*/*.xml")):
        for i, raw in enumerate(split_documents(path.read_bytes())):
            event = normalize(raw)
            checked += len(balances(event))
            for finding in check_event(event):
                assert finding.code == "BALANCE_ARITHMETIC", finding
                found[(path.name, i)] = finding.message.split(": ", 1)[1]
    assert found == SAMPLE_DEFECTS
    assert checked >= 70  # every family's groups were read


def test_what_the_checks_cost_per_event():
    """Ingest runs check_event on every accepted event: a few µs (about 9 µs measured on a shared
    2-core machine over coffre's fixtures, the identity hashes included); bounded loosely here."""
    events = [normalize(raw) for path in fixture_inputs() for raw in split_documents(path.read_bytes())]
    rounds = 50
    start = time.perf_counter()
    for _ in range(rounds):
        for event in events:
            check_event(event)
    per_event = (time.perf_counter() - start) / (rounds * len(events))
    print(f"check_event: {per_event * 1e6:.1f} µs/event over {len(events)} events")
    assert per_event < 200e-6
