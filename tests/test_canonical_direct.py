"""The canonical bytes written directly (:func:`coffre.domain.xmlmodel.canonical_text`) are lxml's
exclusive C14N of the tree :func:`~coffre.domain.xmlmodel.to_element` builds, byte for byte: on
every event coffre ships or tests with, under another IDEvt, and on the characters C14N escapes.
(tests/test_roundtrip_property.py holds them to it on generated events of every poker shape.)"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from coffre.domain import types as types_module
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.codec import canonical_bytes, canonical_bytes_by_tree, split_documents
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize

from events import POINSCRIT, fixture_inputs, pojeu


def _shipped_events() -> list:
    from pathlib import Path

    import coffre.demo

    files = [*fixture_inputs(), *Path(coffre.demo.__file__).parent.joinpath("events").rglob("*.*")]
    found = []
    for path in files:
        for raw in split_documents(path.read_bytes()):
            try:
                found.append(normalize(raw))
            except Rejected:
                continue
    return found


EVENTS = _shipped_events()


def test_the_shipped_events_are_many_and_of_many_types():
    assert len(EVENTS) > 100
    assert len({e.xml_tag for e in EVENTS}) > 20


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e.xml_tag}-{e.id_coffre}-{e.id_evt}")
def test_direct_bytes_are_lxml_c14n(event):
    assert canonical_bytes(event) == canonical_bytes_by_tree(event)
    assert canonical_bytes(event, id_evt=918_273) == canonical_bytes_by_tree(event.with_id_evt(918_273))


def test_escapes_are_c14n_escapes_in_text_and_attributes():
    tricky = "a&b<c>d\"e'f\r\ng\th ]]> é 😀"
    raw = POINSCRIT.replace(b"<Description>Tournoi du dimanche</Description>", b"<Description/>")
    event = normalize(raw)
    event = event.model_copy(update={"Description": tricky})
    assert canonical_bytes(event) == canonical_bytes_by_tree(event)
    assert b"a&amp;b&lt;c&gt;d\"e'f&#xD;\ng\th ]]&gt; \xc3\xa9 \xf0\x9f\x98\x80" in canonical_bytes(event)
    hand = normalize(pojeu())
    rounds = list(hand.Jeu.Tour)  # a round's name is an attribute
    named = rounds[0].model_copy(update={"name": tricky})
    hand = hand.model_copy(update={"Jeu": hand.Jeu.model_copy(update={"Tour": [named, *rounds[1:]]})})
    assert isinstance(hand, POJEU)
    assert canonical_bytes(hand) == canonical_bytes_by_tree(hand)
    assert (
        b'name="a&amp;b&lt;c>d&quot;e\'f&#xD;&#xA;g&#x9;h ]]> \xc3\xa9 \xf0\x9f\x98\x80"'
        in canonical_bytes(hand)
    )


def test_a_character_xml_cannot_carry_is_refused_as_lxml_refuses_it():
    event = normalize(POINSCRIT).model_copy(update={"Description": "bell \x07"})
    with pytest.raises(ValueError, match="XML compatible"):
        canonical_bytes_by_tree(event)
    with pytest.raises(ValueError, match="XML compatible"):
        canonical_bytes(event)


def test_a_negative_idevt_is_refused():
    with pytest.raises(ValueError):
        canonical_bytes(normalize(POINSCRIT), id_evt=-1)


@pytest.mark.parametrize(("digits", "fmt"), [(12, "%y%m%d%H%M%S"), (10, "%y%m%d%H%M")])
def test_compact_dates_are_strftime(digits, fmt):
    write = types_module._compact_writer(fmt)
    rng = random.Random(34)
    start = datetime(2000, 1, 1, tzinfo=UTC)
    for _ in range(2000):
        moment = start + timedelta(seconds=rng.randrange(100 * 366 * 86400))
        assert write(moment) == moment.strftime(fmt)
