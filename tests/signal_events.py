"""Events that make the signals (issue 33) cross their thresholds, for the report's and the console's
tests: hands played by coffre's own pokerkit player (coffre.domain.audit.play.play_hand), two of
whose players always sit there from one IPJoueur (``shared_ip``), and two deposits (CPTEALIM, as the
demo's) of two IDJoueur under one HashJoueur (``same_hash``)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from coffre.domain.audit.play import play_hand

SHARED_IP = "192.0.2.10"
ONE_PERSON = "7A1E5B0C9D2F4E6A8B0C1D2E3F405162738495A6"
"""The HashJoueur of both accounts of one person."""
START = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)


def deposit(
    oper: str, coffre: int, id_evt: int, player: str, session: str, when: datetime, hash_joueur: str
) -> bytes:
    """A CPTEALIM of 50.00 as the demo's (coffre/demo/events/tournament/01-CPTEALIM-alice.json)."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(
        {
            "CPTEALIM": {
                "IDOper": oper,
                "DateEvt": stamp,
                "IDEvt": id_evt,
                "IDJoueur": player,
                "HashJoueur": hash_joueur,
                "IDSession": session,
                "IPJoueur": SHARED_IP,
                "IDCoffre": coffre,
                "IDRef": f"dep-{session}",
                "DateDemande": stamp,
                "DateEffective": stamp,
                "SoldeAvant": "0.00",
                "SoldeMouvement": "50.00",
                "SoldeApres": "50.00",
                "MoyenPaiement": "CB VISA",
                "TypeMoyenPaiement": "CarteBancaire",
            }
        }
    ).encode()


def signal_events(
    oper: str = "0099",
    coffre: int = 5,
    *,
    hands: int = 4,
    partner: str = "bob",
    seed: int = 33,
    person: str = ONE_PERSON,
) -> list[bytes]:
    """Two deposits of ``ana`` and ``ana-2`` (one HashJoueur), then ``hands`` hands of ana,
    ``partner`` (both from :data:`SHARED_IP`), cy and dee at one table, in time order (JSON form,
    IDEvt 1..n). ``partner`` may be any IDJoueur (escaping tests); ``person`` is both accounts'
    HashJoueur."""
    rng = random.Random(seed)
    events = [
        deposit(oper, coffre, 1, "ana", "sess-ana-1", START - timedelta(minutes=30), person),
        deposit(oper, coffre, 2, "ana-2", "sess-ana-2", START - timedelta(minutes=20), person),
    ]
    names = {1: "ana", 2: partner, 3: "cy", 4: "dee"}
    for n in range(hands):
        players = {
            seat: {
                "IDOper": oper,
                "IDJoueur": name,
                "IPJoueur": SHARED_IP if seat in (1, 2) else f"198.51.100.{seat}",
                "Inscription": f"inscription-{seat}",
            }
            for seat, name in names.items()
        }
        played = play_hand(
            "THNL",
            dict.fromkeys(names, "10.00"),
            rng,
            blinds=("0.05", "0.10"),
            players=players,
            header={
                "IDOper": oper,
                "IDCoffre": coffre,
                "IDEvt": len(events) + 1,
                "Tech": "table-signals",
                "Pool": str(n + 1),
            },
            when=START + timedelta(minutes=3 * n),
        )
        events.append(played.json())
    return events


@contextmanager
def signals_saved_at_each_pass() -> Iterator[None]:
    """The console index's signals state saved at the end of each pass, however soon after the last
    save (in service: 5 s after, and within 5% of the time): a console server started inside shows
    every event's signals once its index caught up."""
    from coffre_regulator.index_signals import SignalsKeeper

    kept = SignalsKeeper.IDLE_SAVE_SECONDS, SignalsKeeper.SAVE_SHARE
    SignalsKeeper.IDLE_SAVE_SECONDS, SignalsKeeper.SAVE_SHARE = 0.0, 1e9
    try:
        yield
    finally:
        SignalsKeeper.IDLE_SAVE_SECONDS, SignalsKeeper.SAVE_SHARE = kept
