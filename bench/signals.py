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


def _cpu_of_children() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _signals_cli(args: list[str]) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds of ``coffre signals ARGS --json`` (start-up included), and its JSON."""
    import subprocess

    start, cpu = time.perf_counter(), _cpu_of_children()
    done = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "signals", *args, "--json"], capture_output=True, text=True
    )
    seconds, cpu_seconds = time.perf_counter() - start, _cpu_of_children() - cpu
    if done.returncode not in (0, 1):
        raise SystemExit(f"coffre signals failed: {done.stderr[-2000:]}")
    return seconds, cpu_seconds, json.loads(done.stdout)


def scale(args: argparse.Namespace) -> int:
    """``coffre signals`` on a signed archive of real hands: a fresh run, then the same archive grown
    by one lot read through ``--state`` (only the new lot is read), and the hours 10 million hands
    take at the fresh run's CPU per hand."""
    import tempfile

    from coffre.domain.codec import canonical_bytes

    from audit_hands import seal_archive

    events = real_hands(args.hands)
    lot = max(1, min(args.lot, len(events) // 4))
    canonical = [canonical_bytes(e) for e in events]  # IDEvt 1..n, as real_hands numbers them
    with tempfile.TemporaryDirectory(prefix="coffre-bench-signals-") as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "before").mkdir()
        (scratch / "after").mkdir()
        before, cert_before = seal_archive(scratch / "before", {1: canonical[:-lot]}, lot_events=lot)
        after, cert_after = seal_archive(scratch / "after", {1: canonical}, lot_events=lot)
        state = scratch / "state.json.gz"
        fresh_s, fresh_cpu, fresh = _signals_cli([str(after), "--cert", str(cert_after), "--jobs", "1"])
        two_s, two_cpu, two = _signals_cli([str(after), "--cert", str(cert_after), "--jobs", "2"])
        _signals_cli([str(before), "--cert", str(cert_before), "--state", str(state), "--jobs", "1"])
        grown_s, grown_cpu, grown = _signals_cli(
            [str(after), "--cert", str(cert_after), "--state", str(state), "--jobs", "1"]
        )
        state_bytes = state.stat().st_size
    same = grown["alerts"] == fresh["alerts"] and grown["near_misses"] == fresh["near_misses"]
    same_jobs = two == fresh
    per_hand = fresh_cpu / len(events)
    print(f"coffre signals on a signed archive of {len(events):,} real hands (lots of {lot}):")
    print(
        f"  fresh, --jobs 1        {fresh_s:6.1f} s wall {fresh_cpu:7.1f} s CPU  {per_hand * 1e6:6.0f} µs CPU a hand"
    )
    print(
        f"  fresh, --jobs 2        {two_s:6.1f} s wall {two_cpu:7.1f} s CPU  ({fresh_s / two_s:.2f} times as fast "
        f"as --jobs 1; the same output: {same_jobs})"
    )
    print(
        f"  one lot added, --state {grown_s:6.1f} s wall {grown_cpu:7.1f} s CPU  ({grown['fed_by_this_run']} events "
        f"read; the same signals as the fresh run: {same})"
    )
    print(
        f"  state file             {state_bytes / 1e6:7.2f} MB for {fresh['players']} players, {fresh['pairs']} pairs"
    )
    print(
        f"  10 million hands at this CPU per hand: {per_hand * 1e7 / 3600:.1f} h on one core, "
        f"{per_hand * 1e7 / 3600 / 2:.1f} h on two (--jobs 2, if the equities are the work)"
    )
    return 0 if same and same_jobs else 1


def planted_run(players: int, hands: int, days: int, tournaments: int, seed: int) -> dict[str, Any]:
    """A world of honest players and planted cheats (coffre's own engine), its signals, and for each
    cheat its rank, the signals it crossed, and the honest subjects' alerts."""
    from coffre.domain.signals.planted import play_world

    started = time.perf_counter()
    world = play_world(players, hands, days=days, tournaments=tournaments, seed=seed)
    generated = time.perf_counter() - started
    state = SignalState()
    started = time.perf_counter()
    for raw in world.events:
        _feed(state, normalize(raw))
    fed = time.perf_counter() - started
    subjects = evaluate(state)
    cheats = world.planted.subjects()
    planted_subjects = set(cheats.values())
    cheaters = world.planted.cheaters()
    honest = [
        s
        for s in subjects
        if tuple(sorted(s.players)) not in planted_subjects and not set(s.players) & cheaters
    ]
    ranks = {kind: _rank(subjects, players) for kind, players in cheats.items()}
    first_honest = next((rank for rank, s in enumerate(subjects, 1) if s in honest), None)
    per_signal: dict[str, list[int]] = {}
    for s in honest:
        for signal in s.signals:
            counts = per_signal.setdefault(signal.name, [0, 0])
            counts[0] += 1
            counts[1] += signal.crossed
    honest_players = [p for p in state.players if p not in cheaters]
    honest_pairs = [k for k in state.pairs if not set(k.split("|")) & cheaters]
    return {
        "world": world,
        "state": state,
        "subjects": subjects,
        "ranks": ranks,
        "crossed": {
            kind: sorted(x.name for x in subjects[rank - 1].signals if x.crossed) if rank else []
            for kind, rank in ranks.items()
        },
        "first_honest_rank": first_honest,
        "honest_alerts": [s for s in honest if s.crossed],
        "honest_players": len(honest_players),
        "honest_pairs": len(honest_pairs),
        "per_signal": per_signal,
        "generated_s": generated,
        "fed_s": fed,
    }


def planted(args: argparse.Namespace) -> int:
    result = planted_run(args.players, args.hands, args.days, args.tournaments, args.seed)
    world, state = result["world"], result["state"]
    print(
        f"planted cheats: {world.hands:,} hands, {len(world.events):,} events, {len(state.players)} players, "
        f"{len(state.pairs)} pairs (generated in {result['generated_s']:.1f} s, read and fed in {result['fed_s']:.1f} s)"
    )
    print(f"{'cheat':13} {'rank':>5}  signals crossed")
    for kind, rank in result["ranks"].items():
        print(f"{kind:13} {rank if rank else '-':>5}  {', '.join(result['crossed'][kind]) or '(none)'}")
    alerts = result["honest_alerts"]
    honest_subjects = result["honest_players"] + result["honest_pairs"]
    print(
        f"first honest subject at rank {result['first_honest_rank']}; honest alerts: {len(alerts)} of "
        f"{result['honest_players']} honest players and {result['honest_pairs']} honest pairs "
        f"({len(alerts) / max(1, honest_subjects):.2%})"
    )
    print(f"{'signal':17} {'honest scored':>13} {'crossed':>8} {'rate':>7}")
    for name, (scored, crossed) in sorted(result["per_signal"].items()):
        print(f"{name:17} {scored:13} {crossed:8} {crossed / max(1, scored):7.2%}")
    for s in alerts[:10]:
        crossed = ", ".join(f"{x.name} {x.score:.3g}" for x in s.signals if x.crossed)
        print(f"  honest alert: {' & '.join(s.players)}: {crossed}")
    ranked_above = all(
        rank is not None and (result["first_honest_rank"] is None or rank < result["first_honest_rank"])
        for rank in result["ranks"].values()
    )
    print(f"every planted cheat ranks above every honest subject: {ranked_above}")
    import gzip

    packed = len(gzip.compress(json.dumps(state.as_json(), separators=(",", ":")).encode(), 3))
    print(
        f"state: {packed / 1e6:.2f} MB of gzip JSON ({len(state.players)} players, {len(state.pairs)} pairs)"
    )
    return 0 if ranked_above else 1


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
    p = sub.add_parser("scale")
    p.add_argument("--hands", type=int, default=None, help="real hands in the archive (default: all)")
    p.add_argument("--lot", type=int, default=1000, help="events per lot (the lot added incrementally)")
    p = sub.add_parser("planted")
    p.add_argument("--players", type=int, default=200)
    p.add_argument("--hands", type=int, default=100_000)
    p.add_argument("--days", type=int, default=14)
    p.add_argument("--tournaments", type=int, default=10)
    p.add_argument("--seed", type=int, default=33)
    args = parser.parse_args(argv)
    return {"real": real, "scale": scale, "planted": planted}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
