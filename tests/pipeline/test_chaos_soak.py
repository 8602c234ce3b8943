"""The chaos soak of issue 30 in a short form: ``bench/soak.py`` on ``coffre up``'s own Apache Kafka,
two ingest and two vault replicas and the acquittal service, 100 events/s, every kind of hit once
(SIGKILL, SIGTERM and SIGSTOP of ingest, of a vault and of the acquittal service), one every 3 s
(each waits for the acquittals of every coffre to be back after the previous one: the longest, a
SIGSTOP, takes its 5 s pause and a little more), the load running HIT_WINDOW s past the last one,
a report line every REPORT_EVERY s, about a minute in all.

Asserted strictly, from the outside checker's verdict: every published event acknowledged; each in
the archive (or durable in a vault's journal past it) exactly once, IDEvt 1..n per coffre, with the
IDEvt and chain hash its acquittal carried, the chain recomputed over its bytes; ``coffre verify``
passing; no service exiting by itself. The timings (resume after each hit, latency per minute) are
printed and asserted only loosely (a resume within 60 s): the machine is 2 shared cores, and
bench/README.md has the figures of the longer runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apache_kafka import require_java

pytestmark = pytest.mark.apache_kafka

ROOT = Path(__file__).resolve().parents[2]
PLAN = [
    ("ingest", "SIGKILL"),
    ("vault", "SIGTERM"),
    ("acquittal", "SIGSTOP"),
    ("ingest-2", "SIGTERM"),
    ("vault-2", "SIGKILL"),
    ("acquittal", "SIGKILL"),
    ("ingest", "SIGSTOP"),
    ("vault", "SIGSTOP"),
    ("acquittal", "SIGTERM"),
]
RATE = 100
EVERY = 3
HIT_WINDOW = 3
"""Seconds after a hit whose events are left out of the printed 'p99 outside hits' (bench/soak.py's
--hit-window, 10 s by default: longer than EVERY, it would leave no event outside a hit), and how
long the load runs on after the last hit."""
REPORT_EVERY = 15
"""Seconds per report line: the load (at least 9 hits 3 s apart, three of them 5 s pauses) gives more
than two."""
PROCESSES = {"broker", "ingest", "ingest-2", "vault", "vault-2", "acquittal", "bench"}


def test_the_short_chaos_soak_loses_nothing_and_the_archive_holds_what_was_acknowledged(tmp_path):
    require_java()
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "soak.py"),
            "--json",
            "--rate",
            str(RATE),
            "--seconds",
            str(EVERY * len(PLAN)),
            "--report-every",
            str(REPORT_EVERY),
            "--hit-window",
            str(HIT_WINDOW),
            "--hits",
            f"every={EVERY}",
            "--plan",
            ",".join(f"{victim}:{action}" for victim, action in PLAN),
            "--seed",
            "30",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.stdout.strip(), run.stderr[-4000:]
    soak = json.loads(run.stdout)["soak"]
    print()
    for hit in soak["hits"]:
        print(
            f"  {hit['at_s']:6.1f} s  {hit['action']:7} {hit['victim']:9}  acquittals back after {hit['resume_s']} s"
            f"  (restarted {hit['down_s']} s after the signal, ready {hit['ready_s']} s later)"
        )
    for minute in soak["minutes"]:
        print(
            f"  minute {minute['minute']}: {minute['acquitted_per_s']} acquittals/s, p50 {minute['p50_ms']} ms, "
            f"p99 {minute['p99_ms']} ms, outside the hits {minute['p99_outside_hits_ms']} ms, "
            f"longest pause {minute['longest_pause_s']} s"
        )
    check = soak["check"]
    print(f"  check: {check}")
    assert soak["exits"] == [], soak["exits"]  # no service exited by itself
    assert soak["problems"] == [], run.stderr[-4000:]
    assert check["problems"] == [], run.stderr[-4000:]
    assert check["lost"] == 0 and check["duplicates"] == 0
    assert check["acknowledged"] == check["recorded"] == check["published"] == soak["published"]
    assert check["in_archive"] + check["in_journals_only"] == check["recorded"]
    assert check["idevt_gapless"] is True
    assert check["chains_as_acknowledged"] is True
    assert check["verified"] is True
    assert soak["published"] >= RATE * EVERY * (len(PLAN) - 1)  # the load ran through every hit
    assert [(h["victim"], h["action"]) for h in soak["hits"]] == PLAN
    assert all(h["resume_s"] is not None for h in soak["hits"]), soak["hits"]
    assert json.loads(run.stdout)["status"] == 0
    # what a person reads: a line per hit and per interval, the check, the summary (text on stderr)
    for words in ("seed 30", "[soak] min   1", "SIGKILL ingest: acquittals back", "[soak] check:", "summary"):
        assert words in run.stderr, (words, run.stderr[-3000:])
    assert len(soak["minutes"]) >= 2
    for minute in soak["minutes"]:
        assert set(minute["rss_mb"]) == PROCESSES and set(minute["cpu_percent"]) == PROCESSES
        assert minute["broker_disk_mb"] > 0 and minute["published"] > 0
    summary = soak["summary"]
    assert summary["lost"] == 0 and summary["duplicates"] == 0
    # by kind of hit (a replica counted with its service)
    assert set(summary["resume_by_kind"]) == {f"{action} {victim.split('-')[0]}" for victim, action in PLAN}
    assert set(summary["memory"]) == PROCESSES
    assert set(summary["met"]) == {
        "lost_0",
        "resume_within_5_s",
        "p99_outside_hits_within_1_s",
        "memory_flat",
    }
