"""Every refusal gives a stable reason code and the offending path; nothing crashes."""

from __future__ import annotations

import json

import pytest

from coffre.domain.codec import Limits
from coffre.domain.errors import ReasonCode, Rejected
from coffre.domain.normalize import normalize

from events import POINSCRIT, canonical, pojeu


def rejected(raw: bytes, **kwargs) -> Rejected:
    with pytest.raises(Rejected) as exc:
        normalize(raw, **kwargs)
    return exc.value


def only(exc: Rejected) -> tuple[str, str]:
    assert len(exc.problems) == 1, exc.problems
    return str(exc.problems[0].code), exc.problems[0].path


def test_malformed_xml():
    assert only(rejected(b"<POINSCRIT><IDOper>0099</IDOp"))[0] == "MALFORMED_XML"


def test_two_events_in_one_message_are_malformed():
    assert only(rejected(POINSCRIT + POINSCRIT))[0] == "MALFORMED_XML"


def test_unknown_root():
    assert only(rejected(b"<POPARTIE><IDOper>0099</IDOper></POPARTIE>")) == ("UNKNOWN_EVENT", "/POPARTIE")


def test_missing_mandatory_element():
    exc = rejected(POINSCRIT.replace(b"<Tech>T-1</Tech>", b""))
    assert only(exc) == ("MISSING_ELEMENT", "/POINSCRIT/Tech")


def test_unexpected_element_and_attribute():
    exc = rejected(POINSCRIT.replace(b"<Tech>", b'<Bogus>1</Bogus><Tech colour="red">'))
    assert {(str(p.code), p.path) for p in exc.problems} == {
        ("UNEXPECTED_ELEMENT", "/POINSCRIT/Bogus"),
        ("UNEXPECTED_ATTRIBUTE", "/POINSCRIT/Tech/@colour"),
    }


def test_element_given_twice():
    exc = rejected(POINSCRIT.replace(b"<Tech>T-1</Tech>", b"<Tech>T-1</Tech><Tech>T-2</Tech>"))
    assert only(exc) == ("TOO_MANY_OCCURRENCES", "/POINSCRIT/Tech")


@pytest.mark.parametrize("card", [52, 99, -1])
def test_card_code_outside_0_51(card):
    exc = rejected(pojeu(cards=(3, card)))
    assert only(exc) == ("CARD_OUT_OF_RANGE", "/POJEU/Jeu/Tour[2]/Draw[2]/Valeur")


def test_negative_solde_mouvement():
    exc = rejected(POINSCRIT.replace(b"<SoldeMouvement>10.05", b"<SoldeMouvement>-10.05"))
    assert only(exc) == ("NEGATIVE_AMOUNT", "/POINSCRIT/SoldeMouvement")


def test_pojeu_with_fewer_than_two_participants():
    assert only(rejected(pojeu(participants=1))) == ("TOO_FEW_PARTICIPANTS", "/POJEU/Participants/Joueur")


def test_operator_id_of_three_digits_is_refused_not_padded():
    exc = rejected(POINSCRIT.replace(b"<IDOper>0099</IDOper>", b"<IDOper>099</IDOper>"))
    assert only(exc) == ("INVALID_OPERATOR_ID", "/POINSCRIT/IDOper")


def test_short_hash_is_refused_lower_case_is_not():
    exc = rejected(
        POINSCRIT.replace(
            b"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", b"a94a8fe5ccb19ba61c4c0873d391e987982fbbd"
        )
    )
    assert only(exc) == ("INVALID_HASH", "/POINSCRIT/HashJoueur")


def test_non_hex_hash_is_refused():
    exc = rejected(
        POINSCRIT.replace(
            b"a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", b"Z94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
        )
    )
    assert only(exc)[0] == "INVALID_HASH"


def test_incomplete_finance_group():
    exc = rejected(POINSCRIT.replace(b"<SoldeMouvement>10.05</SoldeMouvement>", b""))
    assert only(exc) == ("INCOMPLETE_GROUP", "/POINSCRIT/SoldeMouvement")


def test_unknown_regle_and_bet_type():
    assert only(rejected(pojeu(regle="HORSE"))) == ("UNKNOWN_REGLE", "/POJEU/Regle")
    exc = rejected(pojeu().replace(b'name="small blind"', b'name="straddle"'))
    assert only(exc) == ("UNKNOWN_BET_TYPE", "/POJEU/Jeu/Tour[1]/Bet[1]/@name")


def test_duplicate_tour_name():
    extra = '<Tour name="bet"><Timestamp>260301100003</Timestamp><Check><Siege>2</Siege></Check></Tour>'
    assert only(rejected(pojeu(extra_round=extra))) == ("DUPLICATE_TOUR_NAME", "/POJEU/Jeu/Tour")


def test_private_card_needs_its_seat():
    raw = pojeu().replace(
        b"<Draw><Siege>1</Siege><Valeur>12</Valeur></Draw>", b"<Draw><Valeur>12</Valeur></Draw>"
    )
    assert only(rejected(raw)) == ("MISSING_SEAT", "/POJEU/Jeu/Tour[2]/Draw[1]/Siege")
    common = raw.replace(b"<Draw><Valeur>12", b'<Draw commune="true" ouverte="true"><Valeur>12')
    assert normalize(common).Jeu.Tour[1].Action[0].commune


def test_both_idoper_and_oper_for_a_player():
    raw = pojeu().replace(
        b"<IDOper>0099</IDOper><IDJoueur>p-2", b"<IDOper>0099</IDOper><Oper>X</Oper><IDJoueur>p-2"
    )
    assert only(rejected(raw)) == ("CHOICE_CONFLICT", "/POJEU/Participants/Joueur[2]/Oper")


def test_foreign_player_without_country():
    raw = pojeu().replace(b"<IDOper>0099</IDOper><IDJoueur>p-2", b"<Oper>Foreign Poker</Oper><IDJoueur>p-2")
    assert only(rejected(raw)) == ("MISSING_ELEMENT", "/POJEU/Participants/Joueur[2]/Pays")


def test_every_problem_is_reported_not_just_the_first():
    raw = POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>99").replace(
        b"<SoldeMouvement>10.05", b"<SoldeMouvement>-1"
    )
    assert sorted(rejected(raw).codes) == ["INVALID_OPERATOR_ID", "NEGATIVE_AMOUNT"]


# --------------------------------------------------------------------------- hardening

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<POINSCRIT><IDOper>&lol3;</IDOper></POINSCRIT>"""

XXE = b"""<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<POINSCRIT><Description>&xxe;</Description></POINSCRIT>"""


@pytest.mark.parametrize("payload", [BILLION_LAUGHS, XXE], ids=["billion-laughs", "external-entity"])
def test_entity_payloads_are_refused(payload):
    assert only(rejected(payload))[0] == "DTD_FORBIDDEN"


def test_entity_payload_in_utf16_is_refused_too():
    exc = rejected(
        XXE.replace(b'<?xml version="1.0"?>', b'<?xml version="1.0" encoding="UTF-16"?>')
        .decode()
        .encode("utf-16")
    )
    assert only(exc)[0] in ("DTD_FORBIDDEN", "MALFORMED_XML")


def test_oversized_document():
    big = POINSCRIT.replace(b"Tournoi du dimanche", b"x" * 2_000_000)
    assert only(rejected(big)) == ("DOCUMENT_TOO_LARGE", "/")
    assert only(rejected(POINSCRIT, limits=Limits(max_bytes=100)))[0] == "DOCUMENT_TOO_LARGE"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"", "EMPTY_INPUT"),
        (b"   \n", "EMPTY_INPUT"),
        (b"\x00\x01garbage", "UNSUPPORTED_FORMAT"),
        (b'{"POINSCRIT": {"IDOper": "0099", "IDOper": "0100"}}', "DUPLICATE_KEY"),
        (b'{"POINSCRIT": {"SoldeAvant": NaN}}', "MALFORMED_JSON"),
        (b'{"POINSCRIT": ', "MALFORMED_JSON"),
        (b"[1, 2]", "UNSUPPORTED_FORMAT"),
        (b'{"A": 1, "B": 2}', "UNSUPPORTED_FORMAT"),
        (b'{"NOPE": {}}', "UNKNOWN_EVENT"),
        (b'{"POINSCRIT": 3}', "INVALID_VALUE"),
        (b"[" * 100_000, "MALFORMED_JSON"),
    ],
)
def test_bad_envelopes(raw, code):
    assert rejected(raw).codes[0] == code


def test_json_control_character_is_refused_before_it_reaches_xml():
    doc = json.loads(json.dumps({"POINSCRIT": {"Description": "a\u0000b"}}))
    exc = rejected(json.dumps(doc).encode())
    assert ("INVALID_VALUE", "/POINSCRIT/Description") in {(str(p.code), p.path) for p in exc.problems}


def test_json_float_amount_is_exact():
    doc = b'{"POINSCRIT": {"SoldeAvant": 0.1}}'
    exc = rejected(doc)  # incomplete, but SoldeAvant itself is accepted exactly
    assert "INVALID_DECIMAL" not in exc.codes


def test_reason_codes_are_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "reason-codes.md").read_text(encoding="utf-8")
    missing = [code.value for code in ReasonCode if f"`{code.value}`" not in doc]
    assert missing == []


def test_a_substitution_group_name_is_not_an_element():
    raw = pojeu().replace(b"<Fold><Siege>1</Siege></Fold>", b"<Action><Siege>1</Siege></Action>")
    assert only(rejected(raw)) == ("UNEXPECTED_ELEMENT", "/POJEU/Jeu/Tour[2]/Action")


def test_description_and_motif_are_exclusive_in_poachat():
    raw = POINSCRIT.replace(b"POINSCRIT>", b"POACHAT>").replace(
        b"<Format>T /AS</Format>", b"<Motif>x</Motif>"
    )
    assert only(rejected(raw)) == ("CHOICE_CONFLICT", "/POACHAT/Motif")


@pytest.mark.parametrize("name", ["CPTEALIM", "PASPMISE", "LOTIGAIN", "TYPEMONNAIE", "OUVPOINTDEVENTE"])
def test_retransmission_has_no_place_in_a_common_xsd_event(name):
    raw = canonical(name)  # coffre's own fixture, in schema form
    root = raw[1 : raw.index(b">")]
    assert only(rejected(raw.replace(b"<" + root + b">", b"<" + root + b' retransmission="true">', 1))) == (
        "UNEXPECTED_ATTRIBUTE",
        f"/{root.decode()}/@retransmission",
    )
