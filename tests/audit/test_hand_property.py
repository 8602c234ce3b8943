"""Property: every hand pokerkit plays (any variant), written as a POJEU and read back by normalize(),
audits clean; each single mutation of it (a card duplicated, an amount changed, two actions
swapped, a winner swapped) gives at least one finding."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coffre.domain.audit.play import MAX_PLAYERS, play_hand
from coffre.domain.audit.variants import ENGINE_VARIANTS

from hands import audit, swap_winner

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def hands(draw: Any) -> dict[str, Any]:
    """A hand played by pokerkit: its variant, seats, stacks, antes, rake and style drawn by hypothesis.
    (The game is played here, not inside the strategy: pokerkit shuffles its deck with the global
    random module, which hypothesis forbids in strategies; the deck coffre deals from is ``rng``'s.)"""
    regle = draw(st.sampled_from(sorted(ENGINE_VARIANTS)))
    kind = ENGINE_VARIANTS[regle].kind
    n = draw(st.integers(2, min(MAX_PLAYERS[regle], 7)))
    seed = draw(st.integers(0, 2**32))
    ante = draw(st.sampled_from(["0", "0.01"])) if kind != "stud" else "0.01"
    rake = draw(st.sampled_from(["0", "0.05"]))
    aggression = draw(st.floats(0.1, 0.6))
    return {"regle": regle, "n": n, "seed": seed, "ante": ante, "rake": rake, "aggression": aggression}


def played(p: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(p["seed"])
    seats = {s: Decimal(rng.randint(40, 900)) / 100 for s in rng.sample(range(1, 11), p["n"])}
    return play_hand(p["regle"], seats, rng, ante=p["ante"], rake=p["rake"], aggression=p["aggression"]).event


@SETTINGS
@given(hands())
def test_a_hand_pokerkit_played_audits_clean(params):
    event = played(params)
    assert [f.as_dict() for f in audit(event)] == []


def _tours(event: dict[str, Any]) -> list[dict[str, Any]]:
    return event["POJEU"]["Jeu"]["Tour"]


@SETTINGS
@given(hands(), st.data())
def test_a_card_dealt_twice_is_found(params, data):
    event = played(params)
    draws = [a["Draw"] for t in _tours(event) for a in t["Action"] if "Draw" in a]
    one, other = data.draw(st.lists(st.sampled_from(range(len(draws))), min_size=2, max_size=2, unique=True))
    draws[other]["Valeur"] = draws[one]["Valeur"]
    assert audit(event)


@SETTINGS
@given(hands(), st.data(), st.sampled_from([Decimal("0.01"), Decimal("-0.01"), Decimal("0.10")]))
def test_an_amount_changed_is_found(params, data, delta):
    event = played(params)
    # Bets: only calls. A bet's or a blind's uncalled part comes back to its player (a walk, a bet
    # nobody calls), so changing it leaves no trace; a call changed is a raise or falls short.
    bets = [a["Bet"] for t in _tours(event) for a in t["Action"] if "Bet" in a and a["Bet"]["name"] == "call"]
    players = [j["Finance"] for j in event["POJEU"]["Participants"]["Joueur"]]
    fields = [(b, "Valeur") for b in bets] + [(f, k) for f in players for k in ("Total", "CaveApres", "Net")]
    fields += [(t, "Total") for t in _tours(event) if "Total" in t]
    where, key = data.draw(st.sampled_from(fields))
    changed = Decimal(where[key]) + delta
    if changed < 0 and key != "Net":
        changed = Decimal(where[key]) + abs(delta)
    where[key] = str(changed)
    assert audit(event)


@SETTINGS
@given(hands(), st.data())
def test_two_actions_swapped_are_found(params, data):
    """Two consecutive actions of two different seats in one betting round."""
    event = played(params)
    pairs = []
    for t in _tours(event):
        acts = t["Action"]
        for k in range(len(acts) - 1):
            a, b = acts[k], acts[k + 1]
            kinds = {next(iter(a)), next(iter(b))}
            if not kinds <= {"Bet", "Check", "Fold"}:
                continue
            forced = "ante" in json.dumps([a, b]) or "blind" in json.dumps([a, b])
            seats = {next(iter(a.values()))["Siege"], next(iter(b.values()))["Siege"]}
            if not forced and len(seats) == 2:
                pairs.append((acts, k))
    if not pairs:
        return
    acts, k = data.draw(st.sampled_from(pairs))
    acts[k], acts[k + 1] = acts[k + 1], acts[k]
    assert audit(event)


@SETTINGS
@given(hands())
def test_a_winner_swapped_is_found(params):
    event = played(params)
    if swap_winner(event, lambda others: others[0]):
        assert audit(event)
