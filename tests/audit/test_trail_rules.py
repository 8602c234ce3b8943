"""Known answers for the money trail's rules of issue 20, each written by hand from the texts on the
demo tournament T-42 (coffre/demo/events/tournament, IDEvt 1 to 21): the account in debit, the
refund of a cancelled registration, the registration never settled, one Pool per partie, the
re-entry a Format without M forbids, players out in the same hand; and the rules that need events
outside the audited set, counted "not checked, context absent" instead of firing."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from test_trail_poker import demo, numbered, run

from coffre.domain.audit import trail as trail_module
from coffre.domain.audit.events import audit_event
from coffre.domain.audit.findings import CODES
from coffre.domain.audit.single import check_event
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.catalogue.base import Event
from coffre.domain.normalize import normalize

from events import fixture

NEW_CODES = (
    "ACCOUNT_IN_DEBIT",
    "REFUND_MISMATCH",
    "REGISTRATION_NEVER_SETTLED",
    "POOL_REUSED",
    "REENTRY_FORBIDDEN",
)


def at(events: list[Event], id_evt: int) -> Event:
    return next(e for e in events if e.IDEvt == id_evt)


def codes(found: list[tuple[int, str]], code: str) -> list[int]:
    return [i for i, c in found if c == code]


def test_the_new_codes_are_registered_as_trail_codes():
    for code in NEW_CODES:
        assert CODES[code][0] == "trail"


# ---------------------------------------------------------------- ACCOUNT_IN_DEBIT (single event)


def test_a_registration_that_takes_the_balance_below_zero_is_in_debit():
    """Decree 2016-1326 art. 8 II 1°: the operators "n'acceptent aucune mise rendant le compte joueur
    débiteur". david registers (10.00) from a balance of 5.00: SoldeApres −5.00."""
    david = at(demo(), 5).model_copy(update={"SoldeAvant": Decimal("5.00"), "SoldeApres": Decimal("-5.00")})
    assert [f.code for f in check_event(david)] == ["ACCOUNT_IN_DEBIT"]
    assert "-5.00" in check_event(david)[0].message and check_event(david)[0].player == "david"


def test_a_buy_in_that_takes_the_balance_below_zero_is_in_debit():
    """Decree 2016-1326 art. 8 II 1°, for the re-buy (POACHAT, annex 1.3.6.c.4) too."""
    achat = at(demo(), 10).model_copy(update={"SoldeAvant": Decimal("4.00"), "SoldeApres": Decimal("-6.00")})
    assert [f.code for f in check_event(achat)] == ["ACCOUNT_IN_DEBIT"]


def test_a_stake_to_exactly_zero_and_a_balance_left_negative_by_others_are_not_in_debit():
    """Zero is not "débiteur"; a registration paid with nothing (a freeroll) is no stake that makes the
    account debtor; an operator's signed adjustment (CPTEAJUSTOPE) is no stake at all."""
    to_zero = at(demo(), 5).model_copy(update={"SoldeAvant": Decimal("10.00"), "SoldeApres": Decimal("0.00")})
    assert check_event(to_zero) == []
    free = at(demo(), 5).model_copy(
        update={"SoldeAvant": Decimal("-1.00"), "SoldeMouvement": Decimal(0), "SoldeApres": Decimal("-1.00")}
    )
    assert check_event(free) == []
    adjust = normalize(fixture("CPTEAJUSTOPE"))
    assert all(f.code != "ACCOUNT_IN_DEBIT" for f in check_event(adjust))


def test_a_sports_bet_in_debit_is_not_judged_by_the_poker_decree():
    """Decree 2016-1326 is the jeux de cercle's; the bets' texts are not among the seeds."""
    bet = normalize(fixture("PASPMISE"))
    bet = bet.model_copy(update={"SoldeAvantMise": bet.Mise - 1, "SoldeApresMise": Decimal(-1)})
    assert all(f.code != "ACCOUNT_IN_DEBIT" for f in check_event(bet))


# ---------------------------------------------------------------- REFUND_MISMATCH


def test_a_cancellation_that_refunds_less_than_the_registration_took():
    """Annex 1.3.6.c.6: the POANNUL "a charge de refléter le remboursement de l'inscription". emma
    paid 10.00 (IDEvt 6); her POANNUL (IDEvt 7) gives back 5.00."""
    events = demo()
    short = at(events, 7).model_copy(
        update={"SoldeMouvement": Decimal("5.00"), "SoldeApres": Decimal("55.00")}
    )
    changed = [short if e.IDEvt == 7 else e for e in events]
    assert codes(run(changed), "REFUND_MISMATCH") == [7]
    assert codes(run(events), "REFUND_MISMATCH") == []


def _chloe_cancels(refund: str) -> list[Event]:
    """chloe (registered 10.00, bought in again 10.00 at IDEvt 10) is cancelled at IDEvt 11."""
    events = demo()[:10]
    annul = at(demo(), 7).model_copy(
        update={
            "IDJoueur": "chloe",
            "HashJoueur": at(events, 4).HashJoueur,
            "Inscription": "T42-chloe",
            "SoldeAvant": Decimal("100.00"),
            "SoldeMouvement": Decimal(refund),
            "SoldeApres": Decimal("100.00") + Decimal(refund),
        }
    )
    return numbered([*events, annul])


@pytest.mark.parametrize("refund", ["10.00", "20.00"])
def test_a_refund_of_the_registration_with_or_without_its_buy_ins_is_accepted(refund):
    """Annex 1.3.6.a: "L'utilisation d'un événement CPTAJUSTOPE en complément de POANNUL peut être
    nécessaire pour compenser les achats (POACHAT) ou gains (POGAIN) intermédiaires": the POANNUL
    refunds the registration (10.00); an operator that refunds the buy-in in it too (20.00) is
    accepted."""
    assert codes(run(_chloe_cancels(refund)), "REFUND_MISMATCH") == []


def test_a_refund_that_is_neither_is_a_mismatch():
    assert codes(run(_chloe_cancels("15.00")), "REFUND_MISMATCH") == [11]


# ---------------------------------------------------------------- REGISTRATION_NEVER_SETTLED


def test_an_eliminated_inscription_never_settled_is_found_at_the_end_of_the_coffre():
    """Annex 1.3.6.c.3: a POBILAN ends each participation ("un mouvement nul" when the player lost
    everything); decree 2016-1326 art. 1 II 2°: the tournament ends when one player has won every
    stake. david is out in hand 3 (IDEvt 11) and his POBILAN (IDEvt 13) is taken away: once the
    winner is settled and the coffre's events end, his registration is still open."""
    events = numbered([e for e in demo() if e.IDEvt != 13])
    trail = MoneyTrail()
    assert codes(run(events, trail), "REGISTRATION_NEVER_SETTLED") == []  # the stream cannot know the end
    ended = trail.finish()
    assert [(o, c, i, f.code, f.player) for o, c, i, f in ended] == [
        ("0099", 2, 5, "REGISTRATION_NEVER_SETTLED", "david")
    ]
    assert "was out" in ended[0][3].message


def test_every_inscription_settled_gives_nothing_at_the_end():
    trail = MoneyTrail()
    run(demo(), trail)
    assert trail.finish() == []


def test_an_inscription_open_before_the_winner_is_settled_is_not_judged():
    """Until a POBILAN ranks someone 1st the tournament may go on beyond the audited events."""
    events = numbered([e for e in demo() if e.IDEvt not in (13, 20)])
    trail = MoneyTrail()
    run(events, trail)
    assert trail.finish() == []


# ---------------------------------------------------------------- POOL_REUSED


def test_two_different_hands_under_one_tech_and_pool():
    """Annex 1.3.6.b: "Chaque partie d'un même jeu de cercle (code Tech identique) dispose d'un code
    Pool qui est unique." Hand 3 (IDEvt 11) is given hand 2's Pool."""
    events = demo()
    changed = [e.model_copy(update={"Pool": "2"}) if e.IDEvt == 11 else e for e in events]
    assert codes(run(changed), "POOL_REUSED") == [11]
    assert codes(run(events), "POOL_REUSED") == []


def test_one_partie_described_again_is_not_a_reuse():
    """Annex 1.3.6.b: "Si plusieurs POJEU décrivent une même partie, chaque POJEU utilise le même code
    Pool"; a retransmission (attribute ``retransmission``) repeats an event already seen."""
    events = demo()
    again = at(events, 9).model_copy(update={"IDEvt": 10})
    described_twice = numbered([*events[:9], again, *events[9:]])
    assert run(described_twice) == []  # nor a broken chain of chips: the partie is followed once
    resent = at(events, 9).model_copy(update={"IDEvt": 10, "retransmission": True})
    assert run(numbered([*events[:9], resent, *events[9:]])) == []


def test_the_pools_are_forgotten_with_their_tech(monkeypatch):
    monkeypatch.setattr(trail_module, "POOLS_PER_CHUNK", 2)
    trail = MoneyTrail()
    events = demo()
    run(events[:11], trail)  # three hands: one chunk of two names, one name pending
    assert trail.store["0099/2/pools/T-42"] == {"chunks": 1, "names": ["3"]}
    assert trail.store["0099/2/pools/T-42/0"] == ["1", "2"]
    run(events[11:], trail)
    assert not any("/pool" in k for k in trail.store), sorted(trail.store)


def test_an_open_tech_remembers_its_latest_pools_only(monkeypatch):
    """A cash table that never empties: at most POOLS_KEPT Pools are remembered, the latest."""
    monkeypatch.setattr(trail_module, "POOLS_PER_CHUNK", 2)
    monkeypatch.setattr(trail_module, "POOLS_KEPT", 2)
    trail = MoneyTrail()
    run(demo()[:16], trail)  # four hands: two chunks, the first forgotten
    pools = sorted(k for k in trail.store if "/pool/" in k)
    assert pools == ["0099/2/pool/T-42|3", "0099/2/pool/T-42|4"]
    assert trail.store["0099/2/pools/T-42"] == {"chunks": 2, "names": [], "first": 1}
    run(demo()[16:], trail)
    assert not any("/pool" in k for k in trail.store), sorted(trail.store)


# ---------------------------------------------------------------- REENTRY_FORBIDDEN


def _bruno_again(format_code: str) -> list[Event]:
    """bruno registers a second time (Inscription T42-bruno-2) after hand 2, in a Tech of ``format_code``."""
    events = [e.model_copy(update={"Format": format_code}) if e.xml_tag == "POINSCRIT" else e for e in demo()]
    second = at(events, 3).model_copy(
        update={"Inscription": "T42-bruno-2", "SoldeAvant": Decimal("25.50"), "SoldeApres": Decimal("15.50")}
    )
    return numbered([*events[:9], second])


def test_a_second_registration_without_m_is_forbidden():
    """Annex 1.3.6.c.1: "Le participant peut s'inscrire une ou plusieurs fois à un jeu de cercle si le
    format le lui autorise"; Format M: "tournoi multi-entrée"."""
    assert codes(run(_bruno_again("T/AG")), "REENTRY_FORBIDDEN") == [10]


@pytest.mark.parametrize("format_code", ["T/AGM", "CG"])
def test_a_multi_entry_tournament_and_a_cash_game_allow_it(format_code):
    assert codes(run(_bruno_again(format_code)), "REENTRY_FORBIDDEN") == []


def test_registering_again_after_a_cancellation_is_no_reentry():
    """emma cancels (POANNUL, IDEvt 7) and registers again: her first registration is no entry."""
    events = demo()
    again = at(events, 6).model_copy(
        update={"Inscription": "T42-emma-2", "SoldeAvant": Decimal("60.00"), "SoldeApres": Decimal("50.00")}
    )
    assert codes(run(numbered([*events[:7], again])), "REENTRY_FORBIDDEN") == []


# ---------------------------------------------------------------- ranking: out in the same hand


def _both_out(alice: str, chloe: str, ranks: tuple[int, int]) -> list[Event]:
    """Hand 4 (IDEvt 14) knocks out alice and chloe, who start it with ``alice`` and ``chloe`` chips;
    chloe and alice are then ranked ``ranks`` and bruno 1st."""
    events = demo()
    hand = at(events, 14)
    total = Decimal(alice) + Decimal(chloe) + Decimal(2800)
    players = []
    for p in hand.Participants.Joueur:
        before = {"alice": Decimal(alice), "chloe": Decimal(chloe), "bruno": Decimal(2800)}[p.IDJoueur]
        after = total if p.IDJoueur == "bruno" else Decimal(0)
        finance = p.Finance.model_copy(
            update={"CaveAvant": before, "CaveApres": after, "Net": after - before}
        )
        players.append(p.model_copy(update={"Finance": finance}))
    hand = hand.model_copy(update={"Participants": hand.Participants.model_copy(update={"Joueur": players})})
    chloe_bilan = at(events, 16).model_copy(update={"Classement": ranks[1]})
    alice_bilan = at(events, 19).model_copy(update={"Classement": ranks[0]})
    return numbered([*events[:13], hand, chloe_bilan, alice_bilan, at(events, 20)])


def ranking(events: list[Event]) -> list[int]:
    return codes(run(events), "RANKING_CONTRADICTS_ELIMINATIONS")


def test_out_in_the_same_hand_the_bigger_stack_ranks_better():
    """Club rules 1.8: "celui qui possédait le plus gros tapis au début du coup sera le mieux classé".
    alice starts hand 4 with 3200, chloe with 1500: alice 3rd and chloe 2nd contradicts it."""
    assert ranking(_both_out("3200", "1500", (3, 2))) == [16]
    assert ranking(_both_out("3200", "1500", (2, 3))) == []


def test_out_in_the_same_hand_with_equal_stacks_rank_ex_aequo():
    """Club rules 1.8: "S'ils possédaient le même tapis ils sont alors considérés comme ex æquo"."""
    assert ranking(_both_out("1500", "1500", (2, 3))) == [16]
    assert ranking(_both_out("1500", "1500", (2, 2))) == []


def test_out_in_the_same_hand_sharing_the_place_is_accepted():
    """TDA RP-8 A: players out in one hand-for-hand hand "se partageront le gain de la place": an equal
    Classement for different stacks is not flagged."""
    assert ranking(_both_out("3200", "1500", (2, 2))) == []


# ---------------------------------------------------------------- ranking: leaving with chips


def _chloe_leaves(ranks: tuple[int, int]) -> list[Event]:
    """chloe leaves T-42 with her 1500 chips after hand 3 (IDEvt 11) and is settled (POBILAN) with
    ``ranks[0]``; alice and bruno play on heads-up, alice goes out in the next hand and is ranked
    ``ranks[1]``, bruno 1st, david 4th (out in hand 3)."""
    events = demo()
    chloe_bilan = at(events, 16).model_copy(update={"Classement": ranks[0]})
    heads_up = at(events, 17)
    players = []
    for p in heads_up.Participants.Joueur:
        before = {"alice": Decimal(3200), "bruno": Decimal(2800)}[p.IDJoueur]
        after = Decimal(6000) if p.IDJoueur == "bruno" else Decimal(0)
        finance = p.Finance.model_copy(
            update={"CaveAvant": before, "CaveApres": after, "Net": after - before}
        )
        players.append(p.model_copy(update={"Finance": finance}))
    heads_up = heads_up.model_copy(
        update={"Participants": heads_up.Participants.model_copy(update={"Joueur": players})}
    )
    alice_bilan = at(events, 19).model_copy(update={"Classement": ranks[1]})
    return numbered([*events[:13], chloe_bilan, heads_up, at(events, 18), alice_bilan, at(events, 20)])


def test_a_player_who_leaves_with_chips_ranks_as_out_when_he_left():
    """Club rules 1.7: a player who leaves the tournament « son stack est retiré et il est classé
    comme sortant au moment de sa sortie ». chloe leaves with chips after hand 3, alice goes out in
    the hand after: alice 2nd and chloe 3rd follows the texts (before the fix, chloe counted as
    still holding chips and alice's rank was reported); chloe 2nd and alice 3rd contradicts them."""
    assert ranking(_chloe_leaves((3, 2))) == []
    assert ranking(_chloe_leaves((2, 3))) == [17]


def test_leaving_with_chips_ranks_above_those_out_before():
    """david went out in hand 3 (IDEvt 11), before chloe left: david 3rd below chloe 4th contradicts
    club rules 1.7 as much as an elimination order would."""
    events = _chloe_leaves((3, 2))
    david = next(e for e in events if e.xml_tag == "POBILAN" and e.IDJoueur == "david")
    events = [e.model_copy(update={"Classement": 3}) if e is david else e for e in events]
    events = [
        e.model_copy(update={"Classement": 4}) if e.xml_tag == "POBILAN" and e.IDJoueur == "chloe" else e
        for e in events
    ]
    assert ranking(events) == [14]


# ---------------------------------------------------------------- not checked, context absent


def test_a_lone_hand_gives_no_trail_finding_and_counts_what_it_could_not_check():
    """Issue 20 item 4: a hand audited alone has no registration to look up."""
    hand = at(demo(), 9)
    trail = MoneyTrail()
    assert audit_event(hand, trail) == []
    assert trail.not_checked == Counter(
        {
            "PARTICIPANT_NOT_REGISTERED": 4,
            "POOL_REUSED": 1,
            "BLINDS_DECREASED": 1,
            "BLIND_DODGED": 1,
            "STARTING_STACK_WRONG": 1,
            "HAND_OUT_OF_ORDER": 1,
        }
    )


def test_events_that_do_not_begin_at_idevt_1_give_no_finding_of_a_missing_context():
    """The tournament from its first hand (IDEvt 8): registrations, alice's deposit are not there."""
    trail = MoneyTrail()
    assert run(demo()[7:], trail) == []
    assert trail.not_checked["PARTICIPANT_NOT_REGISTERED"] == 4 + 4 + 4 + 3 + 2  # every seat of the 5 hands
    assert trail.not_checked["OPERATION_OUTSIDE_PARTICIPATION"] == 4  # a buy-in and three bounties
    assert trail.not_checked["POBILAN_UNREGISTERED"] == 4
    assert trail.not_checked["BALANCE_CHAIN_BROKEN"] > 0
    assert trail.finish() == []


def test_a_gap_suspends_the_chains_across_it():
    """alice's bounty (IDEvt 12) is missing: her POBILAN (IDEvt 19) does not chain to her registration
    (IDEvt 2), and the gap explains it; today's BALANCE_CHAIN_BROKEN would be no evidence."""
    trail = MoneyTrail()
    found = run([e for e in demo() if e.IDEvt != 12], trail)
    assert codes(found, "BALANCE_CHAIN_BROKEN") == []
    assert trail.not_checked["BALANCE_CHAIN_BROKEN"] >= 1
    # the same break with every event there is a finding
    changed = [e.model_copy(update={"SoldeAvant": Decimal("40.00")}) if e.IDEvt == 19 else e for e in demo()]
    assert 19 in codes(run(changed), "BALANCE_CHAIN_BROKEN")


def test_a_cancellation_without_its_registration_in_a_partial_set():
    trail = MoneyTrail()
    assert run([at(demo(), 7)], trail) == []
    assert trail.not_checked == Counter(
        {"POANNUL_UNREGISTERED": 1, "REFUND_MISMATCH": 1, "BALANCE_CHAIN_BROKEN": 1, "HASHJOUEUR_CHANGED": 1}
    )


def test_a_registration_never_settled_in_a_coffre_with_a_gap_is_not_checked():
    trail = MoneyTrail()
    run([e for e in demo() if e.IDEvt != 13], trail)  # IDEvt 13 missing: a gap
    assert trail.finish() == []
    assert trail.not_checked["REGISTRATION_NEVER_SETTLED"] == 1


def test_the_tournament_checker_is_called_with_the_context(monkeypatch):
    """MoneyTrail.observe calls helper TOURNAMENT's TournamentTrail(store).observe(prefix, event,
    complete) and counts what it could not check (its ``skipped_now``) with its own."""
    calls: list[tuple[str, int, bool]] = []

    class Fake:
        def __init__(self, store):
            self.not_checked: Counter[str] = Counter()
            self.skipped_now: list[str] = []

        def observe(self, prefix, event, complete):
            calls.append((prefix, event.IDEvt, complete))
            if not complete:
                self.not_checked["BLIND_DODGED"] += 1
                self.skipped_now.append("BLIND_DODGED")
            return []

    monkeypatch.setattr(trail_module, "TournamentTrail", Fake)
    trail = MoneyTrail()
    run(demo()[:2], trail)
    run(demo()[3:4], trail)
    assert calls == [("0099/2/", 1, True), ("0099/2/", 2, True), ("0099/2/", 4, False)]
    assert trail.not_checked["BLIND_DODGED"] == 1


def test_a_cash_out_after_a_gap_is_not_judged():
    """A cash game's POBILAN is compared with the last hand seen only when no event is missing
    since that hand (a later hand or a buy-in may explain the difference)."""
    from test_trail_poker import _cash_game

    events = _cash_game("1")
    bilan = events[-1].model_copy(update={"IDEvt": events[-1].IDEvt + 5})
    trail = MoneyTrail()
    assert "CASH_GAME_BILAN_MISMATCH" not in [c for _, c in run([*events[:-1], bilan], trail)]
    assert trail.not_checked["CASH_GAME_BILAN_MISMATCH"] == 1


def test_the_demo_expects_what_the_auditor_sees_with_ingests_numbering():
    """ingest numbers each coffre's events 1, 2, … (the annex files keep the annex's 1337…1361): the
    auditor of `coffre up --demo` has every context and reports the annex's broken balance, which an
    offline audit of the files with their gaps counts not checked (coffre/demo/README.md)."""
    from coffre.commands.audit.run import audit_paths
    from coffre.demo import EVENTS, expected_findings, load_demo

    assert expected_findings(load_demo()) == [
        ("0099", 1, "POACHAT", ("FORMAT_FORBIDS_OPERATION",)),
        ("0099", 1, "POGAIN", ("FORMAT_FORBIDS_OPERATION",)),
        ("0099", 1, "POANNUL", ("BALANCE_CHAIN_BROKEN", "POANNUL_NOT_OPEN")),
        ("0099", 4, "POJEU", ("PAYOFF_WRONG", "PAYOFF_WRONG")),
    ]
    offline = audit_paths([str(EVENTS / "annex")])
    assert offline.codes == {"FORMAT_FORBIDS_OPERATION": 2, "POANNUL_NOT_OPEN": 1}
    assert offline.not_checked["BALANCE_CHAIN_BROKEN"] >= 1
