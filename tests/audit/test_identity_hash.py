"""HashJoueur from the identity fields: the regulator's worked sample, every sample carrying the
identity (reference), the readings coffre accepts (accents, apostrophes, first word), and a wrong
hash found on OUVINFOPERSO and MODIFINFOPERSO."""

from __future__ import annotations

import hashlib

import pytest

from coffre.domain.audit.findings import CODES
from coffre.domain.audit.identity import accepted_hashes, hash_joueur, identity_text
from coffre.domain.audit.single import check_event
from coffre.domain.codec import split_documents
from coffre.domain.normalize import normalize

from events import fixture

SAMPLE_HASH = "9853E488E24120BC18F9A650AED9CEE0FF72B09E"


def test_the_worked_sample():
    assert identity_text("Jean-pierre", "Dupond", "19791201", "Nice") == "JEANPIERREDUPOND19791201NICE"
    assert hash_joueur("Jean-pierre", "Dupond", "19791201", "Nice") == SAMPLE_HASH
    assert CODES["HASHJOUEUR_MISMATCH"][0] == "identity"


@pytest.mark.parametrize("name", ["OUVINFOPERSO", "MODIFINFOPERSO"])
def test_coffres_fixtures_carry_their_hash_and_a_wrong_one_is_found(name):
    event = normalize(fixture(name))
    assert check_event(event) == []
    wrong = event.model_copy(update={"HashJoueur": "A94A8FE5CCB19BA61C4C0873D391E987982FBBD3"})
    findings = check_event(wrong)
    assert [f.code for f in findings] == ["HASHJOUEUR_MISMATCH"]
    expected = hash_joueur(event.Prenom[0], event.Nom, event.DateN, event.VilleN)
    assert expected in findings[0].message and findings[0].player == event.IDJoueur


def test_a_lower_case_hash_is_the_same_hash():
    event = normalize(fixture("OUVINFOPERSO"))
    assert check_event(event.model_copy(update={"HashJoueur": event.HashJoueur.lower()})) == []


@pytest.mark.parametrize(
    ("hashed", "first", "last", "town"),
    [
        ("HÉLÈNEDARC19900101SAINTÉTIENNE", "Hélène", "d'Arc", "Saint-Étienne"),  # accents kept, ' removed
        ("HELENED'ARC19900101SAINTETIENNE", "Hélène", "d'Arc", "Saint-Étienne"),  # accents stripped, ' kept
        ("HELENEDARC19900101SAINTETIENNE", "Hélène", "d'Arc", "Saint-Étienne"),  # both removed
        ("HÉLÈNED'ARC19900101SAINTÉTIENNE", "Hélène", "d'Arc", "Saint-Étienne"),  # the rule as written
        ("JEANDUPOND19791201NICE", "Jean Pierre", "Dupond", "Nice"),  # first word of the first Prenom
        ("JEANPIERREDUPOND19791201NICE", "Jean Pierre", "Dupond", "Nice"),  # the whole first Prenom
        ("OEDIPEDUPOND19791201NICE", "Œdipe", "Dupond", "Nice"),  # ligature written out
    ],
)
def test_the_readings_coffre_accepts(hashed, first, last, town):
    wanted = hashlib.sha1(hashed.encode()).hexdigest().upper()
    assert wanted in set(
        accepted_hashes([first, "Autre"], last, "19900101" if "1990" in hashed else "19791201", town)
    )


def test_latin1_bytes_are_accepted_and_other_names_are_not():
    latin1 = hashlib.sha1("HÉLÈNEDUPOND19900101NICE".encode("latin-1")).hexdigest().upper()
    assert latin1 in set(accepted_hashes(["Hélène"], "Dupond", "19900101", "Nice"))
    assert hash_joueur("Hélène", "Dupond", "19900101", "Nice") not in set(
        accepted_hashes(["Helena"], "Dupond", "19900101", "Nice")
    )
    # the second Prenom is never part of the hash
    second = hashlib.sha1(b"GUILLAUMEJACQUESDUPOND19791201NICE").hexdigest().upper()
    assert second not in set(
        accepted_hashes(["Jean-pierre", "Guillaume Jacques"], "Dupond", "19791201", "Nice")
    )


@pytest.mark.reference
def test_every_sample_carrying_the_identity_reproduces_its_hash(reference_dir):
    checked = []
    for path in sorted((reference_dir / "samples").glob("*/*.xml")):
        for raw in split_documents(path.read_bytes()):
            event = normalize(raw)
            if getattr(event, "Nom", None) is None or getattr(event, "Prenom", None) is None:
                continue
            assert hash_joueur(event.Prenom[0], event.Nom, event.DateN, event.VilleN) == event.HashJoueur
            assert check_event(event) == []
            checked.append(path.name)
    assert checked == ["MODIFINFOPERSO.xml", "OUVINFOPERSO.xml"]
