"""bench/console_search.py in its quick form: a tiny synthetic console index, built, then every kind
of search answered (timing goals live in bench/, not here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KINDS: dict[str, set[str]] = {
    "player (busy)": {"IDJoueur"},
    "player (busy), page 2": {"IDJoueur"},
    "player (rare)": {"IDJoueur"},
    "HashJoueur": {"HashJoueur"},
    "Inscription": {"Inscription"},
    "Tech (cash table)": {"Tech"},
    "Tech (tournament)": {"Tech"},
    "Pool": {"Pool"},
    "finding": {"finding"},
    "finding (rarest code)": {"finding"},
    "type POINSCRIT": {"type"},
    "type POINSCRIT, page 2": {"type"},
    "date (one day)": {"date"},
    "coffre + IDEvt range": {"IDEvt"},
    "oper + coffre + IDEvt": {"IDEvt"},
    "text (rare word)": {"text"},
    "text (common word)": {"text"},
    # a combination is driven by whichever of its indexes has the fewest rows for it
    "player + type": {"IDJoueur", "type"},
    "player (rare) + type": {"IDJoueur", "type"},
    "player + date (day)": {"IDJoueur", "date"},
    "finding + date (day)": {"finding", "date"},
    "type + date (day)": {"type", "date"},
    "type + coffre": {"IDEvt", "type"},
    "type + Tech": {"Tech", "type"},
    "player + Inscription": {"Inscription", "IDJoueur"},
    "finding + type": {"finding", "type"},
    "player + Tech": {"IDJoueur", "Tech"},
    "player + type (none)": {"IDJoueur", "type"},
    "player + finding": {"IDJoueur", "finding"},
    "player + finding, page 2": {"IDJoueur", "finding"},
    "type + word (none)": {"type", "text"},
    "type + word (none), page 2": {"type", "text"},
}
MAY_BE_EMPTY = {
    "finding + date (day)",
    "player (rare) + type",
    "player + date (day)",
    "player + Inscription",
    "player + Tech",
    "player + type (none)",
    "player + finding",
    "player + finding, page 2",
    "type + word (none)",
    "type + word (none), page 2",
}
"""Kinds whose one day or one rare player may hold no such event in a tiny index."""
SECOND_PAGES = {"player + finding, page 2", "type + word (none), page 2"}
"""Second pages measured only when the first has a next one (not in a tiny index)."""


def test_a_tiny_console_index_answers_every_kind_of_search(tmp_path: Path) -> None:
    index = tmp_path / "console.sqlite"
    argv = [sys.executable, str(ROOT / "bench" / "console_search.py"), "--events", "20000"]
    argv += ["--players", "5000", "--repeats", "1", "--path", str(index), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["events"] == 20000 and not summary["reused"] and summary["index_bytes"] > 0
    results = {r["kind"]: r for r in summary["results"]}
    assert set(KINDS) - SECOND_PAGES <= set(results) <= set(KINDS)
    for kind, drivers in KINDS.items():
        if kind not in results:
            continue
        assert results[kind]["driver"] in drivers, kind
        if kind not in MAY_BE_EMPTY:
            assert results[kind]["rows"] > 0, kind
    for kind in ("player (busy)", "type POINSCRIT", "text (common word)", "date (one day)"):
        assert results[kind]["rows"] > 0
    assert results["player + type (none)"]["rows"] == 0
    assert results["player (busy)"]["rows"] == results["player (busy), page 2"]["rows"] == 50
    # the same index again: reused, not built twice
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reused"]


def test_the_bench_answers_alike_on_sqlite_and_postgresql() -> None:
    """``--backend both``: the same synthetic index in SQLite and in a PostgreSQL server of the
    bench's own, every kind of search driven by the same index and answering as many rows."""
    from postgres import require_postgresql

    require_postgresql()
    argv = [
        sys.executable,
        str(ROOT / "bench" / "console_search.py"),
        "--events",
        "5000",
        "--backend",
        "both",
    ]
    argv += ["--players", "2000", "--repeats", "1", "--json"]  # in a folder of its own, removed after
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    backends = json.loads(done.stdout)["backends"]
    assert set(backends) == {"sqlite", "postgresql"}
    lite, pg = backends["sqlite"], backends["postgresql"]
    assert lite["probes"] == pg["probes"] and lite["index_bytes"] > 0 and pg["index_bytes"] > 0
    answers = [[(r["kind"], r["driver"], r["rows"]) for r in run["results"]] for run in (lite, pg)]
    assert answers[0] == answers[1] and len(answers[0]) >= len(KINDS) - len(SECOND_PAGES)
