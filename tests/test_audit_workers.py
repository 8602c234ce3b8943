"""coffre audit's workers send a hand the main process only feeds to the money trail as its trail
view (coffre/adapters/audit_workers.py): the trail must find exactly what it finds on the whole hand."""

from __future__ import annotations

import random
from typing import Any

from coffre.adapters.audit_workers import dumps, loads, trail_view
from coffre.commands.inputs import inputs
from coffre.domain.audit.play import play_hand
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.audit.variants import ENGINE_VARIANTS
from coffre.domain.catalogue.base import Event
from coffre.domain.catalogue.poker import POJEU
from coffre.domain.errors import Rejected
from coffre.domain.normalize import normalize

from audit_hands import DEMO


def _demo_events() -> list[Event]:
    events = []
    for _label, raw in inputs([str(DEMO)]):
        try:
            events.append(normalize(raw))
        except Rejected:
            continue
    return events


def _played_hands() -> list[Event]:
    """Hands of every variant, their participants of the hands' operator (the trail follows them)."""
    rng = random.Random(31)
    out = []
    for k, regle in enumerate(list(ENGINE_VARIANTS) * 3):
        seats = {s: f"{rng.randint(200, 2000) / 100:.2f}" for s in rng.sample(range(1, 7), rng.randint(2, 6))}
        kind = ENGINE_VARIANTS[regle].kind
        hand = play_hand(regle, seats, rng, ante="0.02" if kind == "stud" else 0, header={"IDEvt": k + 1})
        out.append(normalize(hand.json()))
    return out


def _trail(
    events: list[Event],
) -> tuple[list[list[dict[str, Any]]], dict[str, Any], dict[str, int], list[Any]]:
    trail = MoneyTrail()
    found = [[f.as_dict() for f in trail.observe(event)] for event in events]
    return (
        found,
        dict(trail.store),
        dict(trail.not_checked),
        [(a, b, c, f.as_dict()) for a, b, c, f in trail.finish()],
    )


def test_the_trail_finds_the_same_on_views_as_on_whole_events():
    demo = _demo_events()
    hands = _played_hands()
    # the demo twice over (repeated registrations, broken chains of balances and chips), then hands
    streams = [demo, demo + demo, demo + hands + demo]
    for events in streams:
        views = [loads(dumps(trail_view(event))) for event in events]
        whole = _trail(events)
        assert whole[0] and any(whole[0]), "the stream has findings to compare"
        assert _trail(views) == whole


def test_a_view_drops_only_the_later_rounds_actions():
    hands = [e for e in _demo_events() + _played_hands() if isinstance(e, POJEU) and len(e.Jeu.Tour) > 2]
    assert hands
    for hand in hands:
        view = trail_view(hand)
        assert type(view) is POJEU and view.Participants == hand.Participants
        assert [t.Action for t in view.Jeu.Tour[:2]] == [t.Action for t in hand.Jeu.Tour[:2]]
        assert all(t.Action == [] for t in view.Jeu.Tour[2:])
        assert [(t.name, t.Timestamp, t.Total) for t in view.Jeu.Tour] == [
            (t.name, t.Timestamp, t.Total) for t in hand.Jeu.Tour
        ]
        assert hand.Jeu.Tour[2].Action, "the event itself is left whole"
