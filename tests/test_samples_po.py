"""PO: the regulator's samples normalize and validate, POJEU's known defects included (a
cross-check: it skips without ../shared); the same defects, written in coffre's own POJEU
fixture, are normalized the same way (always runs)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from lxml import etree

from coffre.domain.codec import canonical_bytes, to_json
from coffre.domain.normalize import normalize

from conftest import assert_sample_normalizes, assert_schema_valid, sample_params
from events import canonical, fixture


@pytest.mark.parametrize("path", sample_params("PO"))
def test_po_sample_normalizes_and_validates(path, schema_set):
    assert_sample_normalizes(path, schema_set)


def test_pojeu_players_in_the_annex_order_and_without_pays_are_completed(optional_schema_set):
    """IDJoueur before Pays, no Pays for the operator's own players (as in the regulator's
    POJEU sample), Stackin/Stackout and the annex's "Slege": schema order, Pays FR, schema names."""
    event = normalize(fixture("POJEU"))
    players = event.Participants.Joueur
    assert [(p.IDOper, p.Oper, p.Pays, p.IDJoueur) for p in players] == [
        ("0731", None, "FR", "chloe.b"),
        ("0731", None, "FR", "khaddad"),
        (None, "Mare Nostrum Poker", "IT", "MNP-88213"),
    ]
    assert [(p.Siege, p.Finance.CaveAvant, p.Finance.CaveApres) for p in players] == [
        (Decimal(1), Decimal("25.00"), Decimal("25.85")),
        (Decimal(4), Decimal("12.10"), Decimal("11.70")),
        (Decimal(6), Decimal("40.00"), Decimal("39.50")),
    ]
    out = canonical_bytes(event)
    assert out == canonical("POJEU")
    second = etree.fromstring(out).find("Participants/Joueur[2]")
    assert [c.tag for c in second] == [
        "IDOper",
        "Pays",
        "IDJoueur",
        "IPJoueur",
        "Siege",
        "Inscription",
        "Finance",
    ]
    assert [c.tag for c in second.find("Finance")] == ["Net", "Total", "CaveAvant", "CaveApres"]
    for annex_only in (b"Stackin", b"Stackout", b"Slege", b"05HPL"):
        assert annex_only not in out
    assert_schema_valid(optional_schema_set, "PO", out)


def test_pojeu_rounds_keep_their_actions_in_order_and_dates_become_utc():
    event = normalize(fixture("POJEU"))
    assert event.Regle == "O5HPL" and event.DateEvt == "260511183107"
    assert [(t.name, t.Timestamp) for t in event.Jeu.Tour] == [
        ("bet", "260511182900"),
        ("pre-flop", "260511182905"),
        ("flop", "260511182940"),
        ("reveal", "260511183102"),
    ]
    flop = event.Jeu.Tour[2].Action
    assert [type(a).__name__ for a in flop] == ["Draw", "Draw", "Draw", "Check", "Bet", "Bet", "Fold"]
    assert [str(a.card) for a in flop[:3]] == ["R de Cœur", "5 de Carreau", "8 de Trèfle"]
    assert all(a.commune and a.ouverte and a.board == 1 for a in flop[:3])
    assert event.Jeu.Tour[0].Action[0].name == "small blind"  # "Small Blind" as sent
    assert normalize(to_json(event)) == event


def test_pojeu_as_json_with_the_annex_regle_of_seven_card_stud():
    event = normalize(fixture("POJEU-stud"))
    assert (event.Regle, event.IDEvt, event.test) == ("7SJL", 211, True)
    assert [p.Pays for p in event.Participants.Joueur] == ["FR", "FR"]
    assert [type(a).__name__ for a in event.Jeu.Tour[2].Action] == [
        "Draw",
        "Draw",
        "Bet",
        "Bet",
        "Discard",
        "Fold",
    ]
    assert canonical_bytes(event) == canonical("POJEU-stud")
