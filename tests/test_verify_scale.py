"""coffre verify at scale (issue 34): memory that does not grow with a coffre's events, ``--jobs``
over the lots of a single coffre, and bench/verify.py's quick run.

The memory test is not timed: it measures what Python allocates (tracemalloc's peak) verifying
archives of the same coffres with 3 times as many events per coffre, and what the reports keep.
Keeping the 64 bytes an event the verifier kept before (a leaf and a chain hash) would make the
larger archive's peak grow by that much per added event; the listing of the files and the
checkpoints read before the walk (O(lots), about 2 KB a lot) stay well under it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from test_archive import build, keypair, lots

from coffre.commands import verify as verify_command
from coffre.commands.verify import verify_archive

EVENTS_PER_LOT = 200
COFFRES = 2  # test_archive's build: coffres 7 and 8
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def signer(tmp_path_factory):
    return keypair(tmp_path_factory.mktemp("keys"), "scale")


@pytest.fixture(scope="module")
def archives(tmp_path_factory, signer) -> dict[int, Path]:
    """Archives of 10 and 30 lots of 200 events per coffre."""
    return {
        count: build(
            tmp_path_factory.mktemp(f"lots{count}"),
            signer[0],
            events=count * EVENTS_PER_LOT,
            max_events=EVENTS_PER_LOT,
        )
        for count in (10, 30)
    }


def peak(archive: Path, cert: Path, **options) -> tuple[int, object]:
    verify_archive(archive, [cert], **options)  # warm: the coffres' shapes learnt, modules imported
    tracemalloc.start()
    try:
        report = verify_archive(archive, [cert], **options)
        return tracemalloc.get_traced_memory()[1], report
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_events(archives, signer):
    small, small_report = peak(archives[10], signer[1])
    large, large_report = peak(archives[30], signer[1])
    assert small_report.ok and large_report.ok
    added_events = COFFRES * 20 * EVENTS_PER_LOT
    assert sum(c.events for c in large_report.coffres) - sum(c.events for c in small_report.coffres) == (
        added_events
    )
    # 64 bytes an event kept would add 512 KB here: the whole growth must stay under half of it
    assert large - small < 32 * added_events, (small, large)
    for coffre in large_report.coffres:
        assert (len(coffre.leaves), len(coffre.chain)) == (0, 0)
        # per lot, not per event: each lot's span and root for its seal note, each checkpoint's tree
        assert len(coffre.spans) == 30
        assert set(coffre.roots) == set(coffre.chains) == {n * EVENTS_PER_LOT for n in range(1, 31)}
    # with every event's hashes kept (proofs), the growth is there: the measure can fail
    kept_small, _ = peak(archives[10], signer[1], keep=True)
    kept_large, kept = peak(archives[30], signer[1], keep=True)
    assert kept_large - kept_small > 64 * added_events
    assert kept.lines() == large_report.lines()
    assert len(kept.coffres[0].leaves) == 30 * EVENTS_PER_LOT


def test_one_coffre_s_lots_are_read_by_every_worker(archives, signer, tmp_path, monkeypatch):
    """``--jobs 2`` on an archive of a single coffre: its lots are read in 2 worker processes,
    and the report is the serial one, also with a lot tampered with."""
    archive = archives[10]
    single = tmp_path / "single"
    (single / "0099").mkdir(parents=True)
    shutil.copytree(archive / "0099" / "7", single / "0099" / "7")
    pids = []

    class Feed(verify_command._LotFeed):
        def take(self, numbered):
            yield from super().take(numbered)
            pids.extend(self._executor._processes)

    serial = verify_archive(single, [signer[1]], jobs=1)
    assert serial.ok and len(serial.coffres) == 1
    monkeypatch.setattr(verify_command, "_LotFeed", Feed)
    parallel = verify_archive(single, [signer[1]], jobs=2)
    assert parallel.lines() == serial.lines()
    assert len(set(pids)) == 2
    path = lots(single)[4]
    path.chmod(0o644)
    path.write_bytes(path.read_bytes().replace(b"<IDJoueur>", b"<IDJoueur>x", 1))
    serial = verify_archive(single, [signer[1]], jobs=1)
    assert not serial.ok
    assert verify_archive(single, [signer[1]], jobs=2).lines() == serial.lines()


def test_bench_verify_quick_runs():
    done = subprocess.run(
        [sys.executable, str(HERE.parent / "bench" / "verify.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["same_report"]
    assert {row["mode"] for row in out["rows"]} == {"serial", "parallel"}
    assert all(row["events"] == 600 and row["events_per_cpu_s"] > 0 for row in out["rows"])
    assert out["yardstick"]["jobs"] == 2 and out["yardstick"]["cpu_minutes"] > 0
