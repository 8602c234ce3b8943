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


def _xs_datetime_by_timezone(text: str):
    """xs:dateTime read as coffre read it before issue 34: the local time in its zone, then
    ``astimezone(UTC)`` (the reference the faster reading is held to)."""
    from datetime import timezone

    m = types_module._XS_DATETIME.fullmatch(text)
    if not m:
        return None
    hour, extra = int(m["h"]), timedelta(0)
    if hour == 24 and m["mi"] == "00" and m["s"] == "00":
        hour, extra = 0, timedelta(days=1)
    tz = UTC
    if m["tz"] and m["tz"] != "Z":
        sign = 1 if m["tz"][0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(m["tz"][1:3]), minutes=int(m["tz"][4:6])))
    try:
        local = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), hour, int(m["mi"]), int(m["s"]), tzinfo=tz)
    except ValueError:
        return None
    return (local + extra).astimezone(UTC)


def _outcome(read, text: str):
    try:
        return ("value", read(text))
    except Exception as exc:  # the same kind of failure either way (a bad zone, an overflow)
        return (type(exc).__name__,)


def test_xs_datetimes_read_as_before_zones_midnight_24_and_bad_dates_included():
    rng = random.Random(34)
    zones = ["", ".5", "Z", "+01:00", "-23:59", "+24:00", "-99:99", "+00:00", "-12:30", "+14:00"]
    valid = 0
    for _ in range(20_000):
        text = (
            f"{rng.choice(['0001', '2026', '9999', '2000'])}-{rng.randrange(0, 14):02d}-{rng.randrange(0, 33):02d}"
            f"T{rng.choice([rng.randrange(0, 26), 24]):02d}:{rng.choice([0, rng.randrange(0, 61)]):02d}"
            f":{rng.choice([0, rng.randrange(0, 61)]):02d}{rng.choice(zones)}"
        )
        expected = _outcome(_xs_datetime_by_timezone, text)
        assert _outcome(types_module._parse_xs_datetime, text) == expected, text
        valid += expected[0] == "value" and expected[1] is not None
    assert valid > 3_000  # the draw reaches real dates, not only refusals
