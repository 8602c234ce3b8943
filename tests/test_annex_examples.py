"""Annex 1.4.3 (a to f): the regulator's own poker examples, read from the annex text when it
is at hand (``$COFFRE_DET_ANNEX``, or ``../shared/spec/`` beside a clone), normalize and validate.
The demo's own annex events are checked against them in ``test_demo_events.py``."""

from __future__ import annotations

from decimal import Decimal

import pytest

from coffre.domain.annex import annex_examples, reference_annex_path, stitch_fragments
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize


@pytest.fixture(scope="module")
def examples() -> dict[str, bytes]:
    path = reference_annex_path()
    if not path.is_file():
        pytest.skip(f"the annex text is not at {path} (set COFFRE_DET_ANNEX)")
    return annex_examples(path)


EXPECTED = {"a": "POINSCRIT", "b": "POACHAT", "c": "POGAIN", "d": "POBILAN", "e": "POANNUL", "f": "POJEU"}


def test_all_six_examples_are_found(examples):
    assert sorted(examples) == list("abcdef")


@pytest.mark.parametrize("letter", list("abcdef"))
def test_example_normalizes_and_validates(letter, examples, schema_set):
    event = normalize(examples[letter])
    assert event.xml_tag == EXPECTED[letter]
    assert schema_set.errors("PO", canonical_bytes(event)) == []


def test_annex_dates_become_schema_dates(examples):
    assert normalize(examples["a"]).DateEvt == "160101000000"
    pojeu = normalize(examples["f"])
    assert pojeu.DateEvt == "160101001000"
    assert [t.Timestamp for t in pojeu.Jeu.Tour][:3] == ["150101000001", "150101000001", "150101000010"]


def test_pojeu_is_assembled_whole_from_its_page_fragments(examples):
    pojeu = normalize(examples["f"])
    assert [j.IDJoueur for j in pojeu.Participants.Joueur] == [
        "999-test-999",
        "000-test-001",
        "000-test-002",
        "HP-0013232002234234",
        "123-test-456",
        "325-test-667",
    ]
    assert [t.name for t in pojeu.Jeu.Tour] == ["blinds", "preflop", "flop", "turn", "river", "reveal"]
    assert [len(t.Action) for t in pojeu.Jeu.Tour] == [2, 18, 9, 3, 4, 4]
    assert pojeu.Jeu.Tour[4].Total == Decimal("3.86")
    assert pojeu.Jeu.Tour[5].Total is None  # the annex's reveal round has no Total (optional in the schema)


def test_pojeu_annex_spellings_are_normalized(examples):
    pojeu = normalize(examples["f"])
    first, _, _, italian = pojeu.Participants.Joueur[:4]
    assert (first.Finance.CaveAvant, first.Finance.CaveApres) == (Decimal("1.52"), Decimal("1.48"))
    assert first.IPJoueur == "2001:db8::1"
    # Pays: kept when given, FR for an ARJEL operator's player, the foreign operator's own
    assert [j.Pays for j in pojeu.Participants.Joueur] == ["FR", "FR", "FR", "IT", "FR", "FR"]
    assert italian.IDOper is None and italian.Oper == "Hyper Poker (IT)"
    assert italian.Finance.Rake == Decimal("0.12")
    data = canonical_bytes(pojeu)
    assert b"Stackin" not in data and b"<CaveAvant>1.52</CaveAvant>" in data


def test_annex_free_text_motif_becomes_autre_and_is_kept_in_info(examples):
    annul = normalize(examples["e"])
    assert annul.Motif == "Autre"
    assert annul.Info == "Annulation Tournoi National Poker Tour 01 janvier 2016"


def test_stitching_drops_invented_and_repeated_closing_tags():
    pages = [
        "<A>\n  <L>\n    <I><V>1</V></I>\n  </L>\n</A>\n",  # page 1 closes everything although more follows
        "<I><V>2</V></I>\n</L>\n<B><C>x</C>",  # a further item, then the page breaks inside B
        "</B>\n</A>\n",
        "</B>\n</A>\n",  # the next page repeats the closings
    ]
    assert (
        stitch_fragments(pages).replace("\n", "").replace(" ", "")
        == "<A><L><I><V>1</V></I><I><V>2</V></I></L><B><C>x</C></B></A>"
    )
