"""The planted-cheats run, short form (the long form: ``bench/signals.py planted``): honest players
and tournaments played by coffre's own engine with five cheats planted among them
(:mod:`coffre.domain.signals.planted`); each cheat must rank above every honest player and pair,
and the honest population's alerts stay under the rate docs/signals.md states."""

from __future__ import annotations

import pytest

from coffre.domain.normalize import normalize
from coffre.domain.signals.facts import facts_of
from coffre.domain.signals.planted import play_world
from coffre.domain.signals.scores import evaluate
from coffre.domain.signals.state import SignalState

HONEST_ALERT_RATE = 0.02
"""At most this share of the honest players and pairs with an alert (docs/signals.md)."""

EXPECTED = {
    "chip_dumping": "chip_dumping",
    "soft_play": "soft_play",
    "same_person": "same_hash",
    "same_ip": "shared_ip",
    "robot": "long_sessions",
}
"""The signal each cheat must cross (it may cross others)."""


@pytest.mark.parametrize("seed", [33])
def test_every_planted_cheat_ranks_above_every_honest_subject(seed: int) -> None:
    world = play_world(40, 5000, days=4, tournaments=2, seed=seed)
    state = SignalState()
    for raw in world.events:
        event = normalize(raw)
        state.add_event(facts_of(event), (event.id_oper, event.id_coffre, event.id_evt))
    subjects = evaluate(state)
    keys = [tuple(sorted(s.players)) for s in subjects]
    cheats = world.planted.subjects()
    cheaters = world.planted.cheaters()
    honest_ranks = [rank for rank, s in enumerate(subjects) if not set(s.players) & cheaters]
    first_honest = min(honest_ranks)
    for kind, players in cheats.items():
        assert players in keys, f"{kind} {players}: no signal at all"
        rank = keys.index(players)
        crossed = {s.name for s in subjects[rank].signals if s.crossed}
        assert EXPECTED[kind] in crossed, f"{kind} {players} crossed only {crossed}"
        assert rank < first_honest, f"{kind} ranks {rank + 1}, an honest subject {first_honest + 1}"
    honest_alerts = [subjects[r] for r in honest_ranks if subjects[r].crossed]
    honest_players = [p for p in state.players if p not in cheaters]
    honest_pairs = [k for k in state.pairs if not set(k.split("|")) & cheaters]
    assert len(honest_alerts) <= HONEST_ALERT_RATE * (len(honest_players) + len(honest_pairs))
