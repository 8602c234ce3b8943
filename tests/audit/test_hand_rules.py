"""Known answers of the rules of poker the hand audit follows, each hand written by hand from the
texts (decree 2016-1326, TDA 2024, the club's tournament rules; see docs/hand-audit.md), never
played by pokerkit: what pokerkit gets wrong or leaves out would pass a test pokerkit both plays
and judges. Each test names its rule and article."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.variants import HouseRules
from coffre.domain.normalize import normalize

from hands import _player, bet, check, fold, reveal, tour

RANKS = "23456789TJQKA"
SUITS = "cdhs"  # trèfle, carreau, cœur, pique (annex 1.3.6.d.3)


def c(card: str) -> int:
    """The annex code of a card written as pokerkit writes it: ``"Ah"`` is 4 × 12 + 2 = 50."""
    return 4 * RANKS.index(card[0]) + SUITS.index(card[1])


def hole(seat: int, *cards: str) -> list[dict[str, Any]]:
    return [{"Draw": {"Siege": seat, "Valeur": c(x)}} for x in cards]


def up(seat: int, card: str) -> dict[str, Any]:
    return {"Draw": {"Siege": seat, "Valeur": c(card), "ouverte": True}}


def board(*cards: str) -> list[dict[str, Any]]:
    return [{"Draw": {"ouverte": True, "commune": True, "Valeur": c(x)}} for x in cards]


def shows(seat: int, *cards: str) -> list[dict[str, Any]]:
    return [reveal(seat, c(x)) for x in cards]


def hand(
    regle: str, players: dict[int, tuple[str, str, str]], tours: list[dict[str, Any]], stakes: str
) -> dict:
    """``players``: seat -> (CaveAvant, Total, CaveApres), each written by hand; Net is their difference."""
    joueurs = [
        _player(seat, before, total, after, str(Decimal(after) - Decimal(before)))
        for seat, (before, total, after) in players.items()
    ]
    return {
        "POJEU": {
            "IDOper": "0099",
            "IDCoffre": 1,
            "DateEvt": "2026-01-01T12:00:00Z",
            "IDEvt": 1,
            "Tech": "T-1",
            "Pool": "1",
            "Participants": {"Joueur": joueurs},
            "Regle": regle,
            "Description": f"{regle} ({stakes})",
            "Jeu": {"Tour": tours},
        }
    }


def found(event: dict, rules: HouseRules | None = None) -> list[str]:
    pojeu = normalize(json.dumps(event).encode())
    findings = audit_hand(pojeu) if rules is None else audit_hand(pojeu, rules=rules)
    return [f.code for f in findings]


def checks(*seats: int) -> list[dict[str, Any]]:
    return [check(s) for s in seats]


# --------------------------------------------------------------------------- big-blind ante (TDA RP-11)


def _big_blind_ante_3() -> dict:
    """THNL 100-200, big-blind ante 200: seat 1 small blind, seat 2 big blind and the ante, seat 3 the
    button. Seat 3 (A♠ A♦) raises to 600, seat 1 folds, seat 2 calls; checked down; the aces win
    the pot of 200 + 100 + 600 + 600 = 1500."""
    return hand(
        "THNL",
        {1: ("10000", "100", "9900"), 2: ("10000", "800", "9200"), 3: ("10000", "600", "10900")},
        [
            tour("bet", [bet("ante", 2, "200"), bet("small blind", 1, "100"), bet("big blind", 2, "200")]),
            tour(
                "pre-flop",
                [
                    *hole(1, "7c", "2d"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "As", "Ad"),
                    bet("raise", 3, "600"),
                    fold(1),
                    bet("call", 2, "400"),
                ],
            ),
            tour("flop", [*board("Kc", "8d", "4h"), *checks(2, 3)]),
            tour("turn", [*board("3s"), *checks(2, 3)]),
            tour("river", [*board("9c"), *checks(2, 3)]),
            tour("reveal", [*shows(2, "Qd", "Jd"), *shows(3, "As", "Ad")]),
        ],
        "100-200",
    )


def test_a_big_blind_ante_is_dead_money_the_big_blind_does_not_get_back():
    """TDA RP-11 (the big-blind ante format: one player pays the ante) and decree 2016-1326 art. 3
    (an ante is a forced bet): the big blind's ante stays in the pot; pokerkit's ante trimming
    handed it back to the big blind (PAYOFF_WRONG on today's main)."""
    assert found(_big_blind_ante_3()) == []


def test_a_big_blind_ante_heads_up_is_charged_to_the_big_blind():
    """TDA RP-11, TDA 34B (heads-up the button posts the small blind): seat 2, the big blind, posts
    the ante; pokerkit charges a heads-up player the other's ante, so the ante must be handed to it
    the other way round. Seat 1 (the button, A♠ A♦) limps, all checked, the aces win 600."""
    event = hand(
        "THNL",
        {1: ("10000", "200", "10400"), 2: ("10000", "400", "9600")},
        [
            tour("bet", [bet("ante", 2, "200"), bet("small blind", 1, "100"), bet("big blind", 2, "200")]),
            tour("pre-flop", [*hole(2, "Qd", "Jd"), *hole(1, "As", "Ad"), bet("call", 1, "100"), check(2)]),
            tour("flop", [*board("Kc", "8d", "4h"), *checks(2, 1)]),
            tour("turn", [*board("3s"), *checks(2, 1)]),
            tour("river", [*board("9c"), *checks(2, 1)]),
            tour("reveal", [*shows(2, "Qd", "Jd"), *shows(1, "As", "Ad")]),
        ],
        "100-200",
    )
    assert found(event) == []


def _pot_limit_ante(raise_by: str) -> dict:
    """THPL 100-200, big-blind ante 200: the pot before seat 3 acts is 200 + 100 + 200 = 500; a pot
    raise calls 200 and raises 700, to 900. Both blinds fold; 700 comes back uncalled."""
    return hand(
        "THPL",
        {1: ("10000", "100", "9900"), 2: ("10000", "400", "9600"), 3: ("10000", "200", "10500")},
        [
            tour(
                "bet",
                [bet("ante", 2, "200"), bet("small blind", 1, "100"), bet("big blind", 2, "200")],
                "500",
            ),
            tour(
                "pre-flop",
                [
                    *hole(1, "7c", "2d"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "As", "Ad"),
                    bet("raise", 3, raise_by),
                    fold(1),
                    fold(2),
                ],
                "200",
            ),
        ],
        "100-200",
    )


def test_a_pot_limit_raise_counts_the_big_blind_ante_in_the_pot():
    """Decree 2016-1326 art. 7 I 2° (pot limit: at most the pot) with TDA RP-11's big-blind ante:
    the ante is in the pot, so a raise to 900 is the pot (BET_ILLEGAL on today's main), and 901 is
    above it."""
    assert found(_pot_limit_ante("900")) == []
    assert found(_pot_limit_ante("901")) == ["BET_ILLEGAL"]


# --------------------------------------------------------------------------- dead small blind (TDA 32, 54B)


def test_a_dead_small_blind_hand_is_legal_and_the_big_blind_acts_first_after_the_flop():
    """TDA 32 (the dead button), 54B ("PLO, 100-200 blinds, pas de SB, BB 200"), club 4.2: the player
    who would have posted the small blind is out, so only seat 5 posts a blind. Seat 3, the seat
    before it, is the button: seat 7 acts first before the flop, seat 5 first after it. Checked
    down, seat 1's aces win (FORCED_BETS_WRONG on today's main)."""
    event = hand(
        "THNL",
        {
            1: ("1000", "200", "1400"),
            3: ("1000", "200", "800"),
            5: ("1000", "200", "800"),
            7: ("1000", "0", "1000"),
        },
        [
            tour("bet", [bet("big blind", 5, "200")], "200"),
            tour(
                "pre-flop",
                [
                    *hole(5, "Qd", "Jd"),
                    *hole(7, "7c", "2d"),
                    *hole(1, "As", "Ad"),
                    *hole(3, "Ts", "Th"),
                    fold(7),
                    bet("call", 1, "200"),
                    bet("call", 3, "200"),
                    check(5),
                ],
                "400",
            ),
            tour("flop", [*board("9c", "8d", "4h"), *checks(5, 1, 3)]),
            tour("turn", [*board("3s"), *checks(5, 1, 3)]),
            tour("river", [*board("2c"), *checks(5, 1, 3)]),
            tour("reveal", [*shows(5, "Qd", "Jd"), *shows(1, "As", "Ad"), *shows(3, "Ts", "Th")]),
        ],
        "100-200",
    )
    assert found(event) == []
    acts = event["POJEU"]["Jeu"]["Tour"][2]["Action"]
    acts[3], acts[4] = acts[4], acts[3]  # seat 1 before seat 5 on the flop
    assert found(event) == ["OUT_OF_TURN"]


def _dead_small_pot(raise_by: str) -> dict:
    return hand(
        "THPL",
        {
            1: ("1000", "0", "1000"),
            3: ("1000", "0", "1000"),
            5: ("1000", "200", "800"),
            7: ("1000", "200", "1200"),
        },
        [
            tour("bet", [bet("big blind", 5, "200")], "200"),
            tour(
                "pre-flop",
                [
                    *hole(5, "Qd", "Jd"),
                    *hole(7, "7c", "2d"),
                    *hole(1, "As", "Ad"),
                    *hole(3, "Ts", "Th"),
                    bet("raise", 7, raise_by),
                    fold(1),
                    fold(3),
                    fold(5),
                ],
                "200",
            ),
        ],
        "100-200",
    )


def test_pot_limit_before_the_flop_counts_the_dead_small_blind():
    """TDA 54B: "Pré-flop … une small blind morte, n'affectent pas le calcul du pot. Toutes les
    mises « pot » … pré-flop supposent que les blinds sont complètes. Exemple 1: PLO, 100-200 blinds,
    pas de SB, BB 200 … le « pot » du premier joueur est à 700"."""
    assert found(_dead_small_pot("700")) == []
    assert found(_dead_small_pot("701")) == ["BET_ILLEGAL"]


# --------------------------------------------------------------------------- stud: a tie by suit


def _stud_tie(opener: int, other: int, antes: tuple[int, ...] = (1, 2, 3)) -> dict:
    """7SHL, antes 5, bring-in 5, bets 20-40. Third street: seat 1's 2♣ brings in, seats 2 and 3
    call. Fourth street: seat 2 shows K♣ 9♦, seat 3 K♥ 9♥: the same hand; the K♥ is the higher
    suit, so seat 3 opens. ``opener`` bets 20, the two others fold: 20 comes back uncalled."""
    before = "1000"
    pot = 5 * len(antes) + 15
    players = {s: (before, str(5 * (s in antes) + 5), str(1000 - 5 * (s in antes) - 5)) for s in (1, 2, 3)}
    spent = 5 * (opener in antes) + 5
    players[opener] = (before, str(spent), str(1000 - spent + pot))
    return hand(
        "7SHL",
        players,
        [
            tour("bet", [bet("ante", s, "5") for s in antes]),
            tour(
                "bring-in",
                [
                    *hole(1, "5c", "6d"),
                    up(1, "2c"),
                    *hole(2, "Ac", "Ad"),
                    up(2, "Kc"),
                    *hole(3, "Qs", "Js"),
                    up(3, "Kh"),
                    bet("bring-in", 1, "5"),
                    bet("call", 2, "5"),
                    bet("call", 3, "5"),
                ],
            ),
            tour(
                "4th st",
                [up(1, "3d"), up(2, "9d"), up(3, "9h"), bet("bet", opener, "20")]
                + [fold(s) for s in (opener % 3 + 1, (opener + 1) % 3 + 1)],
            ),
        ],
        "20-40",
    )


def test_stud_a_tie_of_the_showing_hands_is_broken_by_suit():
    """Decree 2016-1326 art. 7 III: the round begins "par le joueur aux cartes découvertes les plus
    fortes ou, en cas d'égalité, en considération de la couleur des cartes les plus fortes"; TDA
    RP-10D; suits in the order trèfle < carreau < cœur < pique (annex 1.3.6.d.3). Seat 3 (K♥ 9♥)
    opens over seat 2 (K♣ 9♦): OUT_OF_TURN on today's main, which broke the tie by seat."""
    assert found(_stud_tie(3, 2)) == []
    assert found(_stud_tie(2, 3)) == ["OUT_OF_TURN"]


def test_stud_a_seat_without_an_ante_is_ante_missing():
    """Decree 2016-1326 art. 7 III: "Avant le début de chaque main, les joueurs engagent un
    « ante »", and art. 3: the antes are the forced bets "que tous les joueurs engagent avant chaque
    main". Seat 1 posts none (no finding on today's main)."""
    assert found(_stud_tie(3, 2, antes=(2, 3))) == ["ANTE_MISSING"]


# --------------------------------------------------------------------------- the fixed-limit cap (decree art. 3, TDA 48)


def _limit_preflop(raises: int) -> dict:
    """THL 1-2, three seats. Before the flop the big blind is the opening bet; seat 3 raises to 4,
    seat 1 to 6, seat 2 to 8 (the big blind and three raises: four bets), and with ``raises`` = 4
    seat 3 raises to 10 (a fifth bet); the others call. Seat 1 bets the flop, the others fold."""
    pre = [*hole(1, "7c", "2d"), *hole(2, "Qd", "Jd"), *hole(3, "As", "Ad")]
    pre += [bet("raise", 3, "4"), bet("raise", 1, "5"), bet("raise", 2, "6")]
    if raises == 4:
        pre += [bet("raise", 3, "6"), bet("call", 1, "4"), bet("call", 2, "2")]
        put = "10"
    else:
        pre += [bet("call", 3, "4"), bet("call", 1, "2")]
        put = "8"
    won = str(100 + 2 * int(put))
    return hand(
        "THL",
        {1: ("100", put, won), 2: ("100", put, str(100 - int(put))), 3: ("100", put, str(100 - int(put)))},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")]),
            tour("pre-flop", pre),
            tour("flop", [*board("Kc", "8d", "4h"), bet("bet", 1, "2"), fold(2), fold(3)]),
        ],
        "1-2",
    )


def test_the_fixed_limit_cap_counts_the_big_blind_as_the_opening_bet():
    """Decree 2016-1326 art. 3 5° (the operator sets the "nombre maximum de relance nommé « cap »"),
    TDA 48 (the tournament rules set it): four bets a round, the big blind being the first before
    the flop as the bet is after it. Today's main let the big blind and four raises pass (pokerkit
    does not count the blind)."""
    assert found(_limit_preflop(3)) == []
    assert found(_limit_preflop(4)) == ["BET_ILLEGAL"]
    assert found(_limit_preflop(4), HouseRules(fixed_limit_bets=5)) == []
    assert found(_limit_preflop(4), HouseRules(fixed_limit_bets=None)) == []


def _heads_up_raises() -> dict:
    """THL 1-2 heads-up: seat 1 (the button, small blind) limps, seat 2 checks; on the flop seat 2
    bets 2 and the two raise each other four times (a bet and four raises), seat 1 calls; the turn
    and river are checked; seat 1's aces win 24."""
    flop = [*board("Kc", "8d", "4h"), bet("bet", 2, "2"), bet("raise", 1, "4"), bet("raise", 2, "4")]
    flop += [bet("raise", 1, "4"), bet("raise", 2, "4"), bet("call", 1, "2")]
    return hand(
        "THL",
        {1: ("100", "12", "112"), 2: ("100", "12", "88")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop", [*hole(2, "Qd", "Jd"), *hole(1, "As", "Ad"), bet("call", 1, "1"), check(2)], "1"
            ),
            tour("flop", flop, "20"),
            tour("turn", [*board("3s"), *checks(2, 1)]),
            tour("river", [*board("9c"), *checks(2, 1)]),
            tour("reveal", [*shows(2, "Qd", "Jd"), *shows(1, "As", "Ad")]),
        ],
        "1-2",
    )


def test_heads_up_the_fixed_limit_cap_does_not_apply():
    """TDA 48: "Dans le heads-up final, le maximum ne s'applique plus" (while it still applies "quand
    il n'y a que 2 joueurs dans le coup"): a hand dealt to two players has no cap (BET_ILLEGAL on
    today's main); an operator whose rules cap heads-up play says so (HouseRules.heads_up)."""
    assert found(_heads_up_raises()) == []
    assert found(_heads_up_raises(), HouseRules(heads_up="never")) == ["BET_ILLEGAL"]


def test_the_cap_still_applies_when_two_of_three_players_remain():
    """TDA 48: the cap "s'applique même quand il n'y a que 2 joueurs dans le coup". THL 1-2, seat 3
    (the button) folds before the flop, seat 1 completes, seat 2 checks; on the flop seat 1 checks,
    seat 2 bets, and the two raise each other four times: the fifth bet is BET_ILLEGAL. An operator
    playing the card rooms' rule (no cap in a round two players begin) sets
    HouseRules(heads_up="round")."""
    flop = [
        *board("Kc", "8d", "4h"),
        check(1),
        bet("bet", 2, "2"),
        bet("raise", 1, "4"),
        bet("raise", 2, "4"),
    ]
    flop += [bet("raise", 1, "4"), bet("raise", 2, "4"), bet("call", 1, "2")]
    event = hand(
        "THL",
        {1: ("100", "12", "112"), 2: ("100", "12", "88"), 3: ("100", "0", "100")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop",
                [
                    *hole(1, "As", "Ad"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "7c", "2d"),
                    fold(3),
                    bet("call", 1, "1"),
                    check(2),
                ],
                "1",
            ),
            tour("flop", flop, "20"),
            tour("turn", [*board("3s"), *checks(1, 2)]),
            tour("river", [*board("9c"), *checks(1, 2)]),
            tour("reveal", [*shows(1, "As", "Ad"), *shows(2, "Qd", "Jd")]),
        ],
        "1-2",
    )
    assert found(event) == ["BET_ILLEGAL"]
    assert found(event, HouseRules(heads_up="round")) == []


# --------------------------------------------------------------------------- reopening (club 9.15, TDA 47)


def _short_all_in(answer: dict[str, Any]) -> dict:
    """THNL 1-2: seat 3 (the button) raises to 10, seat 1 calls; seat 2, the big blind, is all in
    for 13, a raise of 3 where a full raise is 8. Seat 3 then ``answer``s, seat 1 folds; seat 3's
    aces beat seat 2's hand at the showdown (both tabled: seat 2 is all in)."""
    return hand(
        "THNL",
        {1: ("1000", "10", "990"), 2: ("13", "13", "0"), 3: ("1000", "13", "1023")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop",
                [
                    *hole(1, "7c", "2d"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "As", "Ad"),
                    bet("raise", 3, "10"),
                    bet("call", 1, "9"),
                    bet("allin", 2, "11"),
                    answer,
                    fold(1),
                ],
                "33",
            ),
            tour("flop", board("Kc", "8d", "4h")),
            tour("turn", board("3s")),
            tour("river", board("9c")),
            tour("reveal", [*shows(2, "Qd", "Jd"), *shows(3, "As", "Ad")]),
        ],
        "1-2",
    )


def test_an_all_in_short_of_a_full_raise_does_not_reopen_the_betting():
    """Club 9.15 ("Relance bloquée": "le joueur qui a fait la dernière relance sera « bloqué » et ne
    pourra pas relancer"), TDA 47A: seat 3 raised, faces only seat 2's all-in raise of 3 (a full
    raise is 8) and may call, not raise (BET_ILLEGAL "Short all-in cannot be raised" on today's main,
    a size rule rather than the reopening one)."""
    assert found(_short_all_in(bet("call", 3, "3"))) == []
    assert found(_short_all_in(bet("raise", 3, "30"))) == ["BETTING_NOT_REOPENED"]


def _limp_and_short_all_in(betting: list[dict[str, Any]]) -> dict:
    """THNL 1-2, seat 4 (the button) has 3: seat 3 limps, seat 4 is all in for 3 (a raise of 1
    where a full raise is the big blind, 2: TDA 43 example 2), seat 1 completes; then ``betting``
    (seat 2 and seat 3 put in 10 each, seat 1 folds). Seat 2's aces win the main pot (12) and the
    side pot (14), all hands tabled (seat 4 is all in)."""
    return hand(
        "THNL",
        {1: ("100", "3", "97"), 2: ("100", "10", "116"), 3: ("100", "10", "90"), 4: ("3", "3", "0")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop",
                [
                    *hole(1, "7c", "2d"),
                    *hole(2, "As", "Ad"),
                    *hole(3, "Qd", "Jd"),
                    *hole(4, "9s", "8s"),
                    bet("call", 3, "2"),
                    bet("allin", 4, "3"),
                    bet("call", 1, "2"),
                    *betting,
                ],
                "23",
            ),
            tour("flop", [*board("Kc", "5d", "4h"), *checks(2, 3)]),
            tour("turn", [*board("3s"), *checks(2, 3)]),
            tour("river", [*board("Tc"), *checks(2, 3)]),
            tour("reveal", [*shows(2, "As", "Ad"), *shows(3, "Qd", "Jd"), *shows(4, "9s", "8s")]),
        ],
        "1-2",
    )


def test_after_a_limp_and_a_short_all_in_only_the_big_blind_may_raise():
    """TDA 47A: only the players "ayant déjà agi" lose the right to raise; TDA 43 (example 2: a
    blind of 100 and an all-in raise of 50, "la plus grosse mise ou relance du tour en cours est
    100"). Seat 2, the big blind, has not acted (posting a blind is not acting) and may raise to 10;
    seat 3, who limped, may not once seat 2 only calls: pokerkit counts the short all-in as a full
    raise there and let it pass (no finding on today's main)."""
    assert found(_limp_and_short_all_in([bet("raise", 2, "8"), bet("call", 3, "8"), fold(1)])) == []
    limper_raises = [bet("call", 2, "1"), bet("raise", 3, "8"), fold(1), bet("call", 2, "7")]
    assert found(_limp_and_short_all_in(limper_raises)) == ["BETTING_NOT_REOPENED"]


# --------------------------------------------------------------------------- the showdown (TDA 16, 17A, 20)


def all_in_not_shown() -> dict:
    """Heads-up, seat 1 is all in before the flop and seat 2 calls; seat 2 shows its aces, seat 1
    never reveals."""
    return hand(
        "THNL",
        {1: ("50", "50", "0"), 2: ("100", "50", "150")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop",
                [*hole(2, "As", "Ad"), *hole(1, "7c", "2d"), bet("allin", 1, "49"), bet("call", 2, "48")],
            ),
            tour("flop", board("Kc", "8d", "4h")),
            tour("turn", board("3s")),
            tour("river", board("9c")),
            tour("reveal", shows(2, "As", "Ad")),
        ],
        "1-2",
    )


def test_an_all_in_hand_must_be_tabled():
    """TDA 16 ("Lorsqu'un joueur est à tapis et que les actions sont terminées … toutes les mains
    doivent être immédiatement ouvertes"), club 10.2: seat 1's hand, all in, is never revealed
    (REPLAY_FAILED on today's main). The cards still speak: seat 2's aces win."""
    event = all_in_not_shown()
    assert found(event) == ["ALLIN_NOT_SHOWN"]
    event["POJEU"]["Jeu"]["Tour"][-1]["Action"][:0] = shows(1, "7c", "2d")
    assert found(event) == []


def _split(first_gets: str, second_gets: str) -> dict:
    """THNL 0.01-0.02: seat 3 (the button) limps, seat 1 folds its small blind, seat 2 checks; all
    checked; the board's straight 5-9 ties seats 2 and 3 over a pot of 0.05."""
    return hand(
        "THNL",
        {1: ("1.00", "0.01", "0.99"), 2: ("1.00", "0.02", first_gets), 3: ("1.00", "0.02", second_gets)},
        [
            tour("bet", [bet("small blind", 1, "0.01"), bet("big blind", 2, "0.02")], "0.03"),
            tour(
                "pre-flop",
                [
                    *hole(1, "Kc", "Kd"),
                    *hole(2, "2d", "3h"),
                    *hole(3, "2s", "3c"),
                    bet("call", 3, "0.02"),
                    fold(1),
                    check(2),
                ],
                "0.02",
            ),
            tour("flop", [*board("5c", "6d", "7h"), *checks(2, 3)]),
            tour("turn", [*board("8s"), *checks(2, 3)]),
            tour("river", [*board("9c"), *checks(2, 3)]),
            tour("reveal", [*shows(2, "2d", "3h"), *shows(3, "2s", "3c")]),
        ],
        "0.01-0.02",
    )


def test_the_odd_chip_goes_to_the_first_winner_left_of_the_button():
    """TDA 20A ("le jeton supplémentaire va au premier joueur à la gauche du bouton"), club 10.4: of
    the 0.05 split between seats 2 and 3, the odd cent goes to seat 2 (the button is seat 3). Today's
    main let it go to either."""
    assert found(_split("1.01", "1.00")) == []
    assert found(_split("1.00", "1.01")) == ["ODD_CHIP_WRONG"]


def test_the_last_aggressor_shows_first():
    """TDA 17A ("Lorsqu'il y a des mises au dernier tour d'enchères, le dernier agresseur doit
    montrer ses cartes en premier"), club 10.3: in the small hand seat 2 bets the river and seat 3
    calls; seat 3 revealing first is out of order (no finding on today's main)."""
    from hands import small_hand

    event = small_hand()
    acts = event["POJEU"]["Jeu"]["Tour"][-1]["Action"]
    acts[:] = acts[2:] + acts[:2]
    assert found(event) == ["SHOWDOWN_ORDER_WRONG"]


def test_with_no_bet_in_the_last_round_the_first_left_of_the_button_shows_first():
    """TDA 17A ("S'il n'y a pas de mise au dernier tour, le joueur qui aurait dû jouer en premier à
    ce tour doit montrer ses cartes en premier (premier joueur à gauche du bouton …)"), club 10.3."""
    event = _split("1.01", "1.00")
    acts = event["POJEU"]["Jeu"]["Tour"][-1]["Action"]
    acts[:] = acts[2:] + acts[:2]
    assert found(event) == ["SHOWDOWN_ORDER_WRONG"]


# --------------------------------------------------------------------------- 2-7 (decree art. 6 II)


def _deuce(seat_1: tuple[str, ...], seat_2: tuple[str, ...], seat_1_wins: bool) -> dict:
    """2T7TD 1-2 heads-up, nobody draws: seat 1 (the button) completes, everything is checked;
    the better 2-7 hand wins 4."""
    r1, r2 = ("102", "98") if seat_1_wins else ("98", "102")
    draws = [tour(name, checks(2, 1)) for name in ("1st draw", "2nd draw", "3rd draw")]
    return hand(
        "2T7TD",
        {1: ("100", "2", r1), 2: ("100", "2", r2)},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour("pre-draw", [*hole(2, *seat_2), *hole(1, *seat_1), bet("call", 1, "1"), check(2)], "1"),
            *draws,
            tour("reveal", [*shows(2, *seat_2), *shows(1, *seat_1)]),
        ],
        "1-2",
    )


def test_two_seven_counts_no_flush_nor_straight():
    """Decree 2016-1326 art. 6 II (for the variants of art. 7 III 3° and IV, razz and triple draw
    2-7): "il n'est pas tenu compte des combinaisons constituées d'une couleur ou d'une quinte";
    art. 7 IV: "l'As y compte toujours comme carte haute". 7-5-4-3-2 all of hearts beats 8-6-4-3-2
    (pokerkit's 2-7 counts it a flush: PAYOFF_WRONG on today's main), and 6-5-4-3-2 is a six high,
    not a straight."""
    flush = ("7h", "5h", "4h", "3h", "2h")
    eight = ("8c", "6d", "4s", "3c", "2d")
    assert found(_deuce(flush, eight, True)) == []
    assert found(_deuce(flush, eight, False)) == ["PAYOFF_WRONG", "PAYOFF_WRONG"]
    six = ("6c", "5d", "4s", "3c", "2d")
    seven = ("7h", "5h", "4h", "3h", "2h")
    assert found(_deuce(six, seven, True)) == []


def _stud_split(seat_1_gets: str, seat_2_gets: str) -> dict:
    """7SHL, antes 1, bring-in 1: seat 1's 9♣ brings in (the lowest up card, clubs before diamonds),
    seat 2 calls, seat 3 folds; every later street is checked, seat 2 opening each (its up cards tie
    seat 1's and hold the higher suit). Both make the straight 9 to K: a pot of 5 split, the odd chip
    to the straight whose king has the higher suit, seat 2's K♠."""
    streets = [("4th st", "Tc", "Td"), ("5th st", "Jd", "Jh"), ("6th st", "Qd", "Qh")]
    tours = [
        tour("bet", [bet("ante", s, "1") for s in (1, 2, 3)]),
        tour(
            "bring-in",
            [
                *hole(1, "2c", "3c"),
                up(1, "9c"),
                *hole(2, "2d", "3s"),
                up(2, "9d"),
                *hole(3, "4c", "4d"),
                up(3, "Ah"),
                bet("bring-in", 1, "1"),
                bet("call", 2, "1"),
                fold(3),
            ],
        ),
        *(tour(name, [up(1, one), up(2, two), *checks(2, 1)]) for name, one, two in streets),
        tour("7th st", [*hole(1, "Kh"), *hole(2, "Ks"), *checks(2, 1)]),
        tour("reveal", [*shows(2, "2d", "3s", "Ks"), *shows(1, "2c", "3c", "Kh")]),
    ]
    players = {1: ("100", "2", seat_1_gets), 2: ("100", "2", seat_2_gets), 3: ("100", "1", "99")}
    return hand("7SHL", players, tours, "2-4")


def test_stud_the_odd_chip_goes_by_suit():
    """TDA 20B ("En Stud et Razz, s'il y a plus d'une main gagnante, le jeton supplémentaire va à la
    main où, dans la combinaison gagnante de 5 cartes, la carte haute est la première dans l'ordre
    des couleurs"), suits as annex 1.3.6.d.3: seat 2's K♠ over seat 1's K♥. pokerkit gives it by
    seat (to seat 1), and today's main let it go to either."""
    assert found(_stud_split("100", "101")) == []
    assert found(_stud_split("101", "100")) == ["ODD_CHIP_WRONG"]


def test_an_all_in_big_blind_that_posted_the_big_blind_ante_is_all_in():
    """TDA RP-11 (big-blind ante): seat 2 posts the ante and the big blind, 400 of its 1000, then
    calls seat 3's raise to 800 with its last 600: an all-in (today's main handed the ante back to
    it and called the allin BET_NAME_MISMATCH, leaving 200 behind)."""
    event = hand(
        "THNL",
        {1: ("5000", "100", "4900"), 2: ("1000", "1000", "0"), 3: ("5000", "800", "6100")},
        [
            tour(
                "bet",
                [bet("ante", 2, "200"), bet("small blind", 1, "100"), bet("big blind", 2, "200")],
                "500",
            ),
            tour(
                "pre-flop",
                [
                    *hole(1, "7c", "2d"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "As", "Ad"),
                    bet("raise", 3, "800"),
                    fold(1),
                    bet("allin", 2, "600"),
                ],
                "1400",
            ),
            tour("flop", board("Kc", "8d", "4h")),
            tour("turn", board("3s")),
            tour("river", board("9c")),
            tour("reveal", [*shows(3, "As", "Ad"), *shows(2, "Qd", "Jd")]),
        ],
        "100-200",
    )
    assert found(event) == []


def test_stud_the_bring_in_cannot_fold():
    """Decree 2016-1326 art. 7 III: "Le joueur qui détient la carte ouverte la plus basse engage un
    « bring-in » et ne peut passer". Seat 1 (2♣) folds instead (REPLAY_FAILED on today's main)."""
    event = _stud_tie(3, 2)
    street = event["POJEU"]["Jeu"]["Tour"][1]["Action"]
    street[-3:] = [fold(1), bet("bet", 2, "20"), fold(3)]
    del event["POJEU"]["Jeu"]["Tour"][2]
    players = {j["Siege"]: j["Finance"] for j in event["POJEU"]["Participants"]["Joueur"]}
    for seat, (total, after) in {1: ("5", "995"), 2: ("5", "1010"), 3: ("5", "995")}.items():
        players[seat].update(Total=total, CaveApres=after, Net=str(int(after) - 1000))
    assert found(event) == ["FORCED_BETS_WRONG"]


def _high_low(high_gets: str, low_gets: str) -> dict:
    """O4JPL 1-2: seat 3 (the button) limps, seat 1 folds its small blind, seat 2 checks; all checked.
    Seat 2's three kings win the high half, seat 3's A-2-3-5-7 the low half of a pot of 5."""
    return hand(
        "O4JPL",
        {1: ("100", "1", "99"), 2: ("100", "2", high_gets), 3: ("100", "2", low_gets)},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop",
                [
                    *hole(1, "4c", "4h", "6c", "6s"),
                    *hole(2, "Kh", "Qc", "Jc", "Tc"),
                    *hole(3, "As", "3s", "9h", "9c"),
                    bet("call", 3, "2"),
                    fold(1),
                    check(2),
                ],
                "2",
            ),
            tour("flop", [*board("2c", "5d", "7h"), *checks(2, 3)]),
            tour("turn", [*board("Ks"), *checks(2, 3)]),
            tour("river", [*board("Kd"), *checks(2, 3)]),
            tour("reveal", [*shows(2, "Kh", "Qc", "Jc", "Tc"), *shows(3, "As", "3s", "9h", "9c")]),
        ],
        "1-2",
    )


def test_high_low_the_odd_chip_goes_to_the_high_half():
    """TDA 20C ("Pour les jeux « High-Low » avec pot partagé, le jeton non-divisible va au pot
    « High »"), decree 2016-1326 art. 6 III 2° (the high and the low hand each take half): of 5,
    the high hand takes 3 (pokerkit's split, as on today's main, which called the other way round
    PAYOFF_WRONG)."""
    assert found(_high_low("101", "100")) == []
    assert found(_high_low("100", "101")) == ["ODD_CHIP_WRONG"]


def test_a_raise_short_of_the_minimum_that_puts_every_opponent_all_in_is_a_raise():
    """A reading (no text forbids it, and a real WSOP razz hand does it): THNL 1-2 heads-up, seat 2
    (the big blind, 14) bets 10 on the flop with 2 behind; seat 1 raises to 12, 2 where a full raise
    is 10, which is all seat 2 can call: the same as a full raise whose excess comes back uncalled
    (BET_ILLEGAL on today's main). Seat 2 calls all in; seat 1's aces win."""
    event = hand(
        "THNL",
        {1: ("100", "14", "114"), 2: ("14", "14", "0")},
        [
            tour("bet", [bet("small blind", 1, "1"), bet("big blind", 2, "2")], "3"),
            tour(
                "pre-flop", [*hole(2, "Qd", "Jd"), *hole(1, "As", "Ad"), bet("call", 1, "1"), check(2)], "1"
            ),
            tour(
                "flop",
                [*board("Kc", "8d", "4h"), bet("bet", 2, "10"), bet("raise", 1, "12"), bet("allin", 2, "2")],
            ),
            tour("turn", board("3s")),
            tour("river", board("9c")),
            tour("reveal", [*shows(2, "Qd", "Jd"), *shows(1, "As", "Ad")]),
        ],
        "1-2",
    )
    assert found(event) == []
    flop = event["POJEU"]["Jeu"]["Tour"][2]["Action"]
    flop[-2:] = [bet("raise", 1, "11"), bet("call", 2, "1")]  # to 11: seat 2 keeps a chip, not a raise
    joueurs = event["POJEU"]["Participants"]["Joueur"]
    joueurs[0]["Finance"].update(Total="13", CaveApres="113", Net="13")
    joueurs[1]["Finance"].update(Total="13", CaveApres="1", Net="-13")
    assert found(event) == ["BET_ILLEGAL"]


def test_the_operators_cap_is_the_setting_coffre_audit_fixed_limit_bets(monkeypatch):
    """Decree 2016-1326 art. 3 5°: the operator sets the cap; ``COFFRE_AUDIT_FIXED_LIMIT_BETS``
    (README) is read by ``coffre audit`` and the auditor (0: no cap)."""
    import json

    from coffre.commands.audit.run import house_rules
    from coffre.domain.audit.events import audit_event

    event = normalize(json.dumps(_limit_preflop(4)).encode())
    monkeypatch.delenv("COFFRE_AUDIT_FIXED_LIMIT_BETS", raising=False)
    assert house_rules() == HouseRules()
    assert [f.code for f in audit_event(event, rules=house_rules())] == ["BET_ILLEGAL"]
    monkeypatch.setenv("COFFRE_AUDIT_FIXED_LIMIT_BETS", "5")
    assert house_rules() == HouseRules(fixed_limit_bets=5)
    assert audit_event(event, rules=house_rules()) == []
    monkeypatch.setenv("COFFRE_AUDIT_FIXED_LIMIT_BETS", "0")
    assert house_rules() == HouseRules(fixed_limit_bets=None)


def _limit_short_all_in(stack_3: str) -> dict:
    """THL 2-4 (a bet of 4 before the turn): everyone limps; on the flop seat 1 bets 4, seat 2 raises
    to 8, seat 3 is all in for the rest of ``stack_3``; then 13 (a raise of 1, a quarter of a bet)
    or 14 (a raise of 2, half a bet)."""
    reopened = stack_3 == "14"
    flop = [*board("Kc", "8d", "4h"), bet("bet", 1, "4"), bet("raise", 2, "8")]
    if reopened:  # seat 1 may raise again: half a bet reopened the betting
        flop += [bet("allin", 3, "10"), bet("raise", 1, "10"), bet("call", 2, "6")]
        one, two = ("100", "18", "132"), ("100", "18", "82")
    else:  # seat 1 calls, seat 2 (who raised) raises again: not reopened
        flop += [bet("allin", 3, "9"), bet("call", 1, "5"), bet("raise", 2, "5"), bet("call", 1, "4")]
        one, two = ("100", "17", "130"), ("100", "17", "83")
    return hand(
        "THL",
        {1: one, 2: two, 3: (stack_3, stack_3, "0")},
        [
            tour("bet", [bet("small blind", 1, "2"), bet("big blind", 2, "4")], "6"),
            tour(
                "pre-flop",
                [
                    *hole(1, "As", "Ad"),
                    *hole(2, "Qd", "Jd"),
                    *hole(3, "7c", "2d"),
                    bet("call", 3, "4"),
                    bet("call", 1, "2"),
                    check(2),
                ],
                "6",
            ),
            tour("flop", flop),
            tour("turn", [*board("3s"), *checks(1, 2)]),
            tour("river", [*board("9c"), *checks(1, 2)]),
            tour("reveal", [*shows(1, "As", "Ad"), *shows(2, "Qd", "Jd"), *shows(3, "7c", "2d")]),
        ],
        "2-4",
    )


def test_in_limit_half_a_bet_all_in_reopens_the_betting():
    """TDA 47B: "En limit, un minimum de 50% d'une mise ou relance complète est nécessaire pour que
    les joueurs qui ont déjà misé puissent relancer". Seat 3's all-in raise of 2 on a bet of 4
    reopens it: seat 1 raises again (pokerkit wants a full bet: BET_ILLEGAL on today's main); a raise
    of 1 does not: seat 2, who raised, may only call."""
    assert found(_limit_short_all_in("14")) == []
    assert found(_limit_short_all_in("13")) == ["BETTING_NOT_REOPENED"]


def test_one_seat_posting_both_blinds_is_forced_bets_wrong_not_a_failed_audit():
    """Décret art. 3: « les blindes … engagées par les deux joueurs situés immédiatement à gauche du
    donneur »: two players. Heads-up, one seat posting both blinds made the replay fail with a
    KeyError (REPLAY_FAILED) on main before this fix, found by mutating generated hands at random."""
    event = hand(
        "THNL",
        {1: ("1.00", "0.03", "0.97"), 2: ("1.00", "0", "1.03")},
        [
            tour("bet", [bet("small blind", 1, "0.01"), bet("big blind", 1, "0.02")], "0.03"),
            tour("pre-flop", [*hole(1, "2c", "3c"), *hole(2, "Ah", "As"), fold(2)], "0.03"),
        ],
        "0.01-0.02",
    )
    codes = found(event)
    assert "FORCED_BETS_WRONG" in codes, codes
    assert "REPLAY_FAILED" not in codes
