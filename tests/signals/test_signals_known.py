"""Each signal's known answer on a small history written by hand (tests/signals/signals_handmade.py).

The scores are computed here from their definitions (docs/signals.md) with the counts the
histories were written to give, so that a change in what is counted, or in the statistic, fails."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest
from signals_handmade import T0, Hand, account, events

from coffre.domain.signals.facts import facts_of
from coffre.domain.signals.scores import Subject, Thresholds, evaluate, surprise_high, surprise_low
from coffre.domain.signals.state import SignalState

IP = {
    name: f"198.51.100.{i}"
    for i, name in enumerate(["D", "R", "X", "S1", "S2", "E", "F", "bot", "Y", "hum"], 10)
}


def fed(documents: list[dict]) -> SignalState:
    state = SignalState()
    for event in events(documents):
        state.add_event(facts_of(event), (event.id_oper, event.id_coffre, event.id_evt))
    return state


def maybe_subject(subjects: list[Subject], *players: str) -> Subject | None:
    keys = tuple(sorted(f"0099/{p}" for p in players))
    return next((s for s in subjects if tuple(sorted(s.players)) == keys), None)


def subject(subjects: list[Subject], *players: str) -> Subject:
    found = maybe_subject(subjects, *players)
    assert found is not None, f"no subject {players}"
    return found


def signal(s: Subject, name: str):
    (found,) = [x for x in s.signals if x.name == name]
    return found


def dumping_history() -> list[dict]:
    """D (7-2) calls R's (aces) raise and every bet to the river, 14 times; against X (aces too)
    D folds the 7-2 to the raise, 20 times: 56 weak calls of 56 facing R, 0 bad of 20 facing X."""
    documents = []
    at = T0
    for _i in range(14):
        hand = Hand({1: ("D", IP["D"]), 2: ("R", IP["R"])}, {1: "7c 2d", 2: "As Ah"}, "Kd 9s 4c 3h Jh")
        hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
        hand.round("pre-flop", ("call", 1, "0.05"), ("raise", 2, "0.30"), ("call", 1, "0.30"))
        hand.round("flop", ("bet", 2, "0.50"), ("call", 1, "0.50"))
        hand.round("turn", ("bet", 2, "1.00"), ("call", 1, "1.00"))
        hand.round("river", ("bet", 2, "2.00"), ("call", 1, "2.00"))
        documents.append(hand.event(len(documents) + 1, at, "t1", winner=2))
        at += timedelta(minutes=3)
    for _ in range(20):
        hand = Hand({1: ("D", IP["D"]), 2: ("X", IP["X"])}, {1: "7c 2d", 2: "As Ah"}, "Kd 9s 4c 3h Jh")
        hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
        hand.round("pre-flop", ("call", 1, "0.05"), ("raise", 2, "0.30"), ("fold", 1))
        documents.append(hand.event(len(documents) + 1, at, "t2", winner=2))
        at += timedelta(minutes=3)
    return documents


def test_chip_dumping_known_answer() -> None:
    state = fed(dumping_history())
    pair = state.pairs["0099/D|0099/R"]
    assert pair.facing[0] == [56, 56, 0]  # D facing R: 56 decisions, all weak calls
    assert state.players["0099/D"].facing == [76, 56, 0]
    assert pair.flow == pytest.approx(14 * 3.90)  # D's 3.90 a hand, all to R
    found = signal(subject(evaluate(state), "D", "R"), "chip_dumping")
    expected = 56 * math.log10(22)  # P(X >= 56 | n=56, p=(0+1)/(20+2))
    assert found.score == pytest.approx(expected)
    assert found.crossed and found.metrics["from"] == "0099/D" and found.metrics["to"] == "0099/R"
    assert {ref[2] for _, ref in found.evidence} <= set(range(1, 15))  # R's hands against D
    assert len(found.evidence) == 12
    # the same history read the other way round is no signal for X, who only beat D
    assert maybe_subject(evaluate(state), "D", "X") is None


def test_folding_the_best_hand_counts_as_dumping() -> None:
    """D folds aces on the river to R's bet, 13 times: best-hand folds, each one of 13 decisions."""
    documents = []
    at = T0
    for _ in range(13):
        hand = Hand({1: ("D", IP["D"]), 2: ("R", IP["R"])}, {1: "As Ah", 2: "7c 2d"}, "Kd 9s 4c 3h Jh")
        hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
        hand.round("pre-flop", ("call", 1, "0.05"), ("check", 2))
        hand.round("flop", ("check", 2), ("check", 1))
        hand.round("turn", ("check", 2), ("check", 1))
        hand.round("river", ("bet", 2, "0.80"), ("fold", 1))
        documents.append(hand.event(len(documents) + 1, at, "t1", winner=2))
        at += timedelta(minutes=3)
    state = fed(documents)
    assert state.pairs["0099/D|0099/R"].facing[0] == [13, 0, 13]
    found = signal(subject(evaluate(state), "D", "R"), "chip_dumping")
    assert found.score == pytest.approx(13 * math.log10(2))  # no decision against others: p = 1/2
    assert not found.crossed  # 3.9 < 6: thirteen folds alone, with nothing to compare, are not enough
    assert found.metrics["best_hand_folds"] == 13


def soft_history() -> list[dict]:
    """S1 and S2 check every street to the showdown, 14 times (4 decisions each, one opponent live);
    against X each raises pre-flop and bets the flop, 10 times each."""
    documents = []
    at = T0
    for _i in range(14):
        hand = Hand({1: ("S1", IP["S1"]), 2: ("S2", IP["S2"])}, {1: "Qc Jd", 2: "9s 9h"}, "2d 5s 7c 3h Kh")
        hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
        hand.round("pre-flop", ("call", 1, "0.05"), ("check", 2))
        for street in ("flop", "turn", "river"):
            hand.round(street, ("check", 2), ("check", 1))
        documents.append(hand.event(len(documents) + 1, at, "t3", winner=2))
        at += timedelta(minutes=3)
    for soft in ("S1", "S2"):
        for _ in range(10):
            hand = Hand({1: (soft, IP[soft]), 2: ("X", IP["X"])}, {1: "Qc Jd", 2: "9s 8h"}, "2d 5s 7c 3h Kh")
            hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
            hand.round("pre-flop", ("raise", 1, "0.35"), ("call", 2, "0.30"))
            hand.round("flop", ("check", 2), ("bet", 1, "0.50"), ("fold", 2))
            documents.append(hand.event(len(documents) + 1, at, "t4", winner=1))
            at += timedelta(minutes=3)
    return documents


def test_soft_play_known_answer() -> None:
    state = fed(soft_history())
    pair = state.pairs["0099/S1|0099/S2"]
    assert pair.meetings == 14
    assert pair.aggression == [[[56, 0], [0, 0], [0, 0]], [[56, 0], [0, 0], [0, 0]]]
    assert state.players["0099/S1"].aggression == [[76, 20], [0, 0], [0, 0]]
    subjects = evaluate(state)
    found = signal(subject(subjects, "S1", "S2"), "soft_play")
    assert found.score == pytest.approx(56 * math.log10(22))  # P(X <= 0 | 56, 21/22), both ways
    assert found.crossed
    # X, never aggressive, against S1's bets: no soft play (the pair's weaker direction is S1's)
    assert all(s.name != "soft_play" for s in getattr(maybe_subject(subjects, "S1", "X"), "signals", ()))


def test_identity_signals_known_answers() -> None:
    h1, h2, h3 = "1" * 40, "2" * 40, "3" * 40
    documents = [
        account(1, T0, "A", h1, "s1"),
        account(2, T0 + timedelta(hours=1), "B", h1, "s2"),
        account(3, T0 + timedelta(hours=2), "C", h2, "s3"),
        account(4, T0 + timedelta(hours=3), "C", h3, "s4"),
        account(5, T0 + timedelta(hours=4), "E", "4" * 40, "s9"),
        account(6, T0 + timedelta(hours=5), "F", "5" * 40, "s9"),
        account(7, T0 + timedelta(hours=5), "G", h1, "s10", oper="0100"),  # A's person, another operator
    ]
    hand = Hand(
        {1: ("E", "203.0.113.9"), 2: ("F", "203.0.113.9"), 3: ("Y", IP["Y"])},
        {1: "Qc Jd", 2: "9s 9h", 3: "2c 3c"},
    )
    hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"))
    hand.round("pre-flop", ("fold", 3), ("fold", 1))
    documents.append(hand.event(8, T0 + timedelta(hours=6), "t5", winner=2))
    subjects = evaluate(fed(documents))
    same = signal(subject(subjects, "A", "B"), "same_hash")
    assert (same.score, same.crossed) == (2, True)
    assert [ref for _, ref in same.evidence] == [("0099", 1, 2)]
    several = signal(subject(subjects, "C"), "several_hashes")
    assert (several.score, several.crossed) == (2, True)
    assert sorted(ref for _, ref in several.evidence) == [("0099", 1, 3), ("0099", 1, 4)]
    pair = subject(subjects, "E", "F")
    assert (signal(pair, "shared_session").score, signal(pair, "shared_ip").score) == (1, 1)
    assert [ref for _, ref in signal(pair, "shared_ip").evidence] == [("0099", 1, 8)]
    # one person may hold an account at each operator: A (0099) and G (0100) are no signal
    assert not any(set(s.players) == {"0099/A", "0100/G"} for s in subjects)
    assert maybe_subject(subjects, "E", "Y") is None


def robot_history(seed: int = 5) -> list[dict]:
    """'bot' folds its small blind every five minutes for two days (midnight to midnight, UTC) without rest, on one table, and
    on nine tables in one five-minute slot; each of its rounds lasts exactly 2 s. 'hum' plays
    three hours a day, its rounds lasting from 1 to 40 s."""
    rng = random.Random(seed)
    documents: list[dict] = []

    def fold_hand(player: str, tech: str, at, seconds: int) -> None:
        hand = Hand({1: (player, IP[player]), 2: ("Y", IP["Y"])}, {1: "7c 2d", 2: "As Ah"})
        hand.round("bet", ("small blind", 1, "0.05"), ("big blind", 2, "0.10"), seconds=1)
        hand.round("pre-flop", ("fold", 1), seconds=seconds)
        documents.append(hand.event(len(documents) + 1, at, tech, winner=2))

    midnight = T0.replace(hour=0)
    for k in range(2 * 24 * 12):
        fold_hand("bot", "b1", midnight + timedelta(minutes=5 * k), 2)
    for table in range(2, 10):
        fold_hand("bot", f"b{table}", midnight + timedelta(hours=3, seconds=20 * table), 2)
    for day in range(2):
        for k in range(3 * 12):
            fold_hand("hum", "h1", T0 + timedelta(days=day, hours=10, minutes=5 * k), rng.randint(1, 40))
    return documents


def test_robot_signals_known_answers() -> None:
    subjects = evaluate(fetched := fed(robot_history()))
    bot = subject(subjects, "bot")
    assert signal(bot, "long_sessions").score == pytest.approx(48.0)  # 576 slots, no pause
    assert signal(bot, "many_tables").score == 9
    assert signal(bot, "around_the_clock").score == 2
    timing = signal(bot, "regular_timing")
    assert timing.score == 0.0 and timing.crossed and timing.metrics["rounds"] == 584
    assert bot.crossed == 4
    hum = subject(subjects, "hum")
    assert signal(hum, "long_sessions").score == pytest.approx(3.0)
    assert signal(hum, "many_tables").score == 1
    assert all(s.name != "around_the_clock" for s in hum.signals)  # it rested 21 hours a day
    assert hum.crossed == 0
    assert fetched.players["0099/hum"].timing[0] == 72
    # ranked first: four signals crossed
    assert subjects[0].players == ("0099/bot",)


def test_thresholds_are_configurable() -> None:
    state = fed(robot_history())
    lenient = Thresholds().with_values({"long_sessions": "60", "many_tables": "10"})
    bot = subject(evaluate(state, lenient), "bot")
    assert not signal(bot, "long_sessions").crossed and not signal(bot, "many_tables").crossed
    with pytest.raises(ValueError, match="no threshold"):
        Thresholds().with_values({"nonsense": "1"})


def test_binomial_tails() -> None:
    assert surprise_high(3, 3, 0.5) == pytest.approx(3 * math.log10(2))
    assert surprise_low(0, 3, 0.5) == pytest.approx(3 * math.log10(2))
    # P(X >= 2 | 3, 0.5) = 4/8
    assert surprise_high(2, 3, 0.5) == pytest.approx(-math.log10(0.5))
    assert surprise_high(1, 10, 0.5) == 0.0  # fewer than expected: no surprise
    assert surprise_low(9, 10, 0.5) == 0.0


def test_state_round_trip_and_merge_give_the_same_signals(tmp_path) -> None:
    documents = dumping_history() + soft_history()[:20]
    for i, d in enumerate(documents, start=1):
        d["POJEU"]["IDEvt"] = i
    whole = fed(documents)
    path = tmp_path / "state.json.gz"
    whole.save(path)
    again = SignalState.load(path)
    first, second = fed(documents[:17]), fed(documents[17:])
    first.merge(second)
    expected = [s.as_json() for s in evaluate(whole)]
    assert [s.as_json() for s in evaluate(again)] == expected
    assert [s.as_json() for s in evaluate(first)] == expected


def test_a_hand_that_deals_a_card_twice_is_read_without_its_equities() -> None:
    """The audit's CARD_DEALT_TWICE hand: the signals read it (seats, decisions, money) and pass over
    the equities its cards cannot give, rather than failing."""
    from coffre.domain.normalize import normalize

    from audit_hands import duplicated_card_hand

    event = normalize(duplicated_card_hand())
    state = SignalState()
    state.add_event(facts_of(event), (event.id_oper, event.id_coffre, event.id_evt))
    assert state.hands == 1 and state.players
