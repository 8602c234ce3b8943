"""The collusion and robot signals (issue 33): on real hands, on planted cheats, and at scale.

    python bench/signals.py real                 # the PHH corpus (tests/fixtures/phh): what the signals say
    python bench/signals.py planted [--hands N]  # honest players and planted cheats: ranks, false positives
    python bench/signals.py scale [--hands N]    # µs per hand read and fed, a lot added to a year, 10M extrapolated
    python bench/signals.py quick                # all three, small (the suite runs it: it prints, it does not time)

``real`` names each PHH player by the dataset's own name (the tests' writer numbers them by seat) and
gives each its own address; the corpus records no time of day, so only the pair signals (chip
dumping, soft play) mean anything there and the report shows only them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from coffre.domain.normalize import normalize
from coffre.domain.signals.facts import facts_of
from coffre.domain.signals.scores import Subject, Thresholds, evaluate
from coffre.domain.signals.state import SignalState

PAIR_SIGNALS = ("chip_dumping", "soft_play")


def _feed(state: SignalState, event: Any) -> None:
    state.add_event(facts_of(event), (event.id_oper, event.id_coffre, event.id_evt))


def real_hands(limit: int | None = None) -> list[Any]:
    """The corpus's hands that convert, each player named as the dataset names it."""
    from phh import corpus, writer

    events = []
    for name, hand in corpus.hands():
        try:
            pojeu = writer.to_pojeu(hand, name, id_evt=len(events) + 1)
        except writer.Skip:
            continue
        names = hand.get("players")
        joueurs = pojeu["POJEU"]["Participants"]["Joueur"]
        if not names or len(names) != len(joueurs):
            continue  # a hand whose players are not named (handhq): no pair to follow
        source = name.split("/")[0]
        for joueur, player in zip(joueurs, names, strict=True):  # the writer lists them in order
            joueur["IDJoueur"] = str(player)[:60]
            joueur["IPJoueur"] = f"2001:db8:{abs(hash(player)) % 65536:x}::1"
        pojeu["POJEU"]["Tech"] = source
        events.append(normalize(json.dumps(pojeu).encode()))
        if limit and len(events) >= limit:
            break
    return events


def real(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    events = real_hands(args.hands)
    converted = time.perf_counter() - started
    state = SignalState()
    started = time.perf_counter()
    for event in events:
        _feed(state, event)
    fed = time.perf_counter() - started
    subjects = [s for s in evaluate(state) if s.kind == "pair"]
    print(
        f"real hands: {len(events):,} hands of {len(state.players)} named players, {len(state.pairs)} pairs; "
        f"converted in {converted:.1f} s, fed in {fed:.1f} s ({fed / max(1, len(events)) * 1e6:.0f} µs a hand)"
    )
    print("pair signals (the corpus has no time of day: the robot signals are not computed on it)")
    print(f"{'pair':42} {'signal':13} {'score':>7} {'thr':>5}  detail")
    shown = 0
    for subject in subjects:
        for signal in subject.signals:
            if signal.name not in PAIR_SIGNALS:
                continue
            if shown < args.top or signal.crossed:
                mark = "ALERT" if signal.crossed else ""
                print(
                    f"{' & '.join(subject.players):42} {signal.name:13} {signal.score:7.2f} "
                    f"{signal.threshold:5g}  {mark} {signal.detail}"
                )
                shown += 1
    alerts = sum(1 for s in subjects for x in s.signals if x.name in PAIR_SIGNALS and x.crossed)
    pairs = sum(1 for p in state.pairs.values() if p.meetings >= Thresholds().min_decisions)
    print(f"{alerts} pair alert(s) among {pairs} pairs who met at least {Thresholds().min_decisions} times")
    return 0


def _rank(subjects: list[Subject], players: tuple[str, ...]) -> int | None:
    wanted = tuple(sorted(players))
    for rank, subject in enumerate(subjects, start=1):
        if tuple(sorted(subject.players)) == wanted:
            return rank
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("real")
    p.add_argument("--hands", type=int, default=None, help="at most this many hands (default: all)")
    p.add_argument("--top", type=int, default=10, help="pair signals printed besides the alerts")
    args = parser.parse_args(argv)
    return {"real": real}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
