"""The money trail across events: the demo tournament gives no finding (read in file order); each
check finds its inconsistency when one event of the demo is changed or moved; a Tech's state is
pruned when it closes, and the balances chain per player across families."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from coffre.domain.audit.events import audit_event
from coffre.domain.audit.findings import CODES
from coffre.domain.audit.trail import CLOSED_TECHS_KEPT, MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.normalize import normalize

from events import fixture

DEMO = Path(__file__).resolve().parents[2] / "coffre" / "demo" / "events" / "tournament"


def demo() -> list[Event]:
    return [normalize(p.read_bytes()) for p in sorted(DEMO.iterdir()) if p.suffix in (".xml", ".json")]


def by_name(events: list[Event], tag: str, who: str | None = None) -> int:
    for i, e in enumerate(events):
        if e.xml_tag == tag and (who is None or getattr(e, "IDJoueur", None) == who):
            return i
    raise LookupError(tag)


def numbered(events: list[Event], start: int = 1) -> list[Event]:
    """The events with IDEvt start, start + 1…: a coffre's whole context (the trail judges the rules
    that need earlier events only when its events come from IDEvt 1 with no gap)."""
    return [e.model_copy(update={"IDEvt": start + i}) for i, e in enumerate(events)]


def run(events: list[Event], trail: MoneyTrail | None = None) -> list[tuple[int, str]]:
    trail = trail or MoneyTrail()
    return [(e.IDEvt, f.code) for e in events for f in trail.observe(e)]


def test_the_demo_tournament_gives_no_finding_and_leaves_only_the_players():
    trail = MoneyTrail()
    events = demo()
    assert len(events) >= 20
    assert [(e.IDEvt, f.code) for e in events for f in audit_event(e, trail)] == []
    keys = sorted(trail.store)
    assert all("/player/" in k for k in keys if not k.endswith(("/closed", "/ctx"))), keys
    assert trail.store["0099/2/closed"] == [["T-42", events[-2].IDEvt]]
    assert trail.store["0099/2/ctx"] == [events[-1].IDEvt, True, 1]  # every event from IDEvt 1, no gap
    assert trail.not_checked == {}


def test_every_code_is_registered_in_its_family():
    for code in (
        "BALANCE_CHAIN_BROKEN",
        "BONUS_CHAIN_BROKEN",
        "PARTICIPANT_NOT_REGISTERED",
        "CAVE_CHAIN_BROKEN",
        "PLAY_AFTER_SETTLEMENT",
        "POBILAN_REPEATED",
        "POANNUL_NOT_OPEN",
        "RANKING_CONTRADICTS_ELIMINATIONS",
    ):
        assert CODES[code][0] == "trail"
    assert CODES["HASHJOUEUR_CHANGED"][0] == "identity"


def _replace(events: list[Event], index: int, **changes) -> list[Event]:
    return [*events[:index], events[index].model_copy(update=changes), *events[index + 1 :]]


def test_a_balance_that_does_not_chain():
    events = demo()
    i = by_name(events, "POINSCRIT", "alice")
    changed = _replace(events, i, SoldeAvant=Decimal("49.00"), SoldeApres=Decimal("39.00"))
    found = run(changed)
    # the registration does not chain to the deposit, and alice's next event (her POGAIN) does not
    # chain to the registration's new after: each break is found where it is
    nxt = next(e.IDEvt for e in events[i + 1 :] if getattr(e, "IDJoueur", None) == "alice")
    assert found == [(events[i].IDEvt, "BALANCE_CHAIN_BROKEN"), (nxt, "BALANCE_CHAIN_BROKEN")]


def test_a_hand_player_without_registration_and_with_a_wrong_cave():
    events = demo()
    hand = by_name(events, "POJEU")
    pojeu = events[hand]
    players = list(pojeu.Participants.Joueur)
    players[0] = players[0].model_copy(update={"Inscription": "T42-nobody"})
    changed = _replace(events, hand, Participants=pojeu.Participants.model_copy(update={"Joueur": players}))
    found = run(changed)
    assert (pojeu.IDEvt, "PARTICIPANT_NOT_REGISTERED") in found

    second = by_name(events, "POJEU") + 1
    second = next(i for i in range(second, len(events)) if events[i].xml_tag == "POJEU")
    pojeu2 = events[second]
    players = list(pojeu2.Participants.Joueur)
    finance = players[1].Finance.model_copy(update={"CaveAvant": players[1].Finance.CaveAvant + 1})
    players[1] = players[1].model_copy(update={"Finance": finance})
    changed = _replace(
        events, second, Participants=pojeu2.Participants.model_copy(update={"Joueur": players})
    )
    assert (pojeu2.IDEvt, "CAVE_CHAIN_BROKEN") in run(changed)


def test_another_operators_player_is_not_looked_for():
    events = demo()
    hand = by_name(events, "POJEU")
    pojeu = events[hand]
    players = list(pojeu.Participants.Joueur)
    players[0] = players[0].model_copy(
        update={"IDOper": None, "Oper": "Mare Nostrum", "Inscription": "elsewhere"}
    )
    changed = _replace(events, hand, Participants=pojeu.Participants.model_copy(update={"Joueur": players}))
    assert all(code != "PARTICIPANT_NOT_REGISTERED" for _, code in run(changed))


def test_settlement_twice_play_after_it_and_a_cancellation_of_a_settled_one():
    events = demo()
    bilan = by_name(events, "POBILAN", "david")
    repeat = events[bilan].model_copy(update={"IDEvt": 999})
    found = run([*events[: bilan + 1], repeat])
    assert (999, "POBILAN_REPEATED") in found

    achat = by_name(events, "POACHAT")
    late = events[achat].model_copy(update={"IDEvt": 998, "Inscription": "T42-david", "IDJoueur": "david"})
    found = run([*events[: bilan + 1], late])
    assert (998, "PLAY_AFTER_SETTLEMENT") in found

    cancel = by_name(events, "POANNUL")
    annul = events[cancel].model_copy(update={"IDEvt": 997, "Inscription": "T42-david", "IDJoueur": "david"})
    assert (997, "POANNUL_NOT_OPEN") in run([*events[: bilan + 1], annul])
    unknown = events[cancel].model_copy(update={"Inscription": "T42-ghost"})
    assert (bilan + 2, "POANNUL_UNREGISTERED") in run(numbered([*events[: bilan + 1], unknown]))


def test_a_hand_after_the_tournament_closed():
    events = demo()
    last_hand = max(i for i, e in enumerate(events) if e.xml_tag == "POJEU")
    again = events[last_hand].model_copy(update={"IDEvt": 995})
    found = run([*events, again])
    assert (995, "PLAY_AFTER_SETTLEMENT") in found


def test_a_gain_before_registration_and_a_buy_in_the_format_forbids():
    events = demo()
    gain = by_name(events, "POGAIN")
    early = events[gain].model_copy(update={"IDEvt": 2})
    assert (2, "OPERATION_OUTSIDE_PARTICIPATION") in run([events[0], early])
    registrations = [
        e.model_copy(update={"Format": "T/G"}) if e.xml_tag == "POINSCRIT" else e for e in events
    ]
    found = run(registrations)
    assert (events[by_name(events, "POACHAT")].IDEvt, "FORMAT_FORBIDS_OPERATION") in found
    assert all(code != "FORMAT_FORBIDS_OPERATION" or i != events[gain].IDEvt for i, code in found)


def test_ranks_that_contradict_the_eliminations():
    events = demo()
    first_out = by_name(events, "POBILAN", "david")  # out first, ranked 4th
    changed = _replace(events, first_out, Classement=1)
    found = run(changed)
    assert any(code == "RANKING_CONTRADICTS_ELIMINATIONS" for _, code in found), found


def test_a_player_of_another_inscription():
    events = demo()
    achat = by_name(events, "POACHAT")
    changed = _replace(events, achat, IDJoueur="alice", SoldeAvant=Decimal(0), SoldeApres=Decimal(0))
    assert (events[achat].IDEvt, "INSCRIPTION_PLAYER_MISMATCH") in run(changed)


def _cash_game(pay: str) -> list[Event]:
    """Two players sit at a cash table (Format CG) and leave with their last hand's chips."""
    events = demo()
    keep = []
    for e in events:
        if e.xml_tag == "POINSCRIT" and e.IDJoueur in ("alice", "bruno"):
            keep.append(e.model_copy(update={"Format": "CG"}))
    hand = events[by_name(events, "POJEU")]
    players = [p for p in hand.Participants.Joueur if p.IDJoueur in ("alice", "bruno")]
    keep.append(
        hand.model_copy(update={"Participants": hand.Participants.model_copy(update={"Joueur": players})})
    )
    bilan = events[by_name(events, "POBILAN", "alice")]
    alice_out = next(p for p in players if p.IDJoueur == "alice").Finance.CaveApres
    amount = Decimal(pay) if pay else alice_out
    keep.append(
        bilan.model_copy(
            update={
                "Classement": None,
                "SoldeAvant": Decimal(0),
                "SoldeMouvement": amount,
                "SoldeApres": amount,
            }
        )
    )
    return numbered(keep)


def test_a_cash_game_pays_out_the_chips_left_with():
    assert [c for _, c in run(_cash_game(""))] == [
        "BALANCE_CHAIN_BROKEN"
    ]  # alice's balance moved, chips out OK
    assert "CASH_GAME_BILAN_MISMATCH" in [c for _, c in run(_cash_game("1"))]


def test_hashjoueur_must_not_change_without_modifinfoperso():
    events = demo()
    i = by_name(events, "POBILAN", "alice")
    changed = _replace(events, i, HashJoueur="A94A8FE5CCB19BA61C4C0873D391E987982FBBD3")
    assert (events[i].IDEvt, "HASHJOUEUR_CHANGED") in run(changed)


def test_account_events_bets_and_poker_chain_in_one_account():
    deposit = normalize(fixture("CPTEALIM")).model_copy(update={"IDEvt": 1})
    after = deposit.SoldeApres
    bet = normalize(fixture("PASPMISE"))
    bet = bet.model_copy(
        update={
            "IDOper": deposit.IDOper,
            "IDCoffre": deposit.IDCoffre,
            "IDEvt": 2,
            "IDJoueur": deposit.IDJoueur,
            "HashJoueur": deposit.HashJoueur,
            "SoldeAvantMise": after,
            "SoldeApresMise": after - bet.Mise,
        }
    )
    trail = MoneyTrail()
    assert trail.observe(deposit) == [] and trail.observe(bet) == []
    broken = bet.model_copy(update={"IDEvt": 3, "SoldeAvantMise": after})
    assert [f.code for f in trail.observe(broken)] == ["BALANCE_CHAIN_BROKEN"]
    closing = normalize(fixture("CLOTUREDEM")).model_copy(
        update={
            "IDOper": deposit.IDOper,
            "IDCoffre": deposit.IDCoffre,
            "IDEvt": 4,
            "IDJoueur": deposit.IDJoueur,
            "HashJoueur": deposit.HashJoueur,
            "SoldeClos": Decimal("0.01"),
        }
    )
    assert [f.code for f in trail.observe(closing)] == ["BALANCE_CHAIN_BROKEN"]


def test_tests_and_retransmissions_are_not_followed():
    events = demo()
    i = by_name(events, "POBILAN", "david")
    repeat = events[i].model_copy(update={"IDEvt": 990, "retransmission": True})
    assert run([*events[: i + 1], repeat]) == []


@pytest.mark.parametrize("techs", [3])
def test_closed_techs_are_remembered_up_to_the_bound(techs, monkeypatch):
    from coffre.domain.audit import trail as module

    monkeypatch.setattr(module, "CLOSED_TECHS_KEPT", 2)
    events = demo()
    trail = MoneyTrail()
    for n in range(techs):
        for e in events:
            update = {"Tech": f"T-{n}"} if hasattr(e, "Tech") else {}
            trail.observe(e.model_copy(update={**update, "IDEvt": e.IDEvt + 100 * n}))
    closed = trail.store["0099/2/closed"]
    assert [c[0] for c in closed] == ["T-1", "T-2"]
    assert not any("/ins/" in k or "/tech/" in k for k in trail.store)
    assert CLOSED_TECHS_KEPT == 4096


def test_the_codes_table_of_the_docs_is_the_registered_one():
    import re

    import coffre.domain.audit.events  # noqa: F401  (every checking module registers its codes)

    text = (Path(__file__).resolve().parents[2] / "docs" / "money-trail.md").read_text(encoding="utf-8")
    documented = dict(re.findall(r"^\| `([A-Z_]+)` \| (trail|identity) \|", text, re.MULTILINE))
    registered = {code: family for code, (family, _) in CODES.items() if family in ("trail", "identity")}
    assert documented == registered
