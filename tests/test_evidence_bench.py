"""bench/pipeline.py --evidence, in its quick form (a few seconds of outage instead of a minute):
the acquittal latency of a stack without evidence and of one with a TSA and a witness, in the
same three windows (up, both stopped, back), then every checkpoint of the archive timestamped
and cosigned (issue 21). The run is the session's one tiny run of the bench
(tests/bench_pipeline_run.py), whose other figures tests/test_bench_pipeline.py reads."""

from __future__ import annotations

import json
from typing import Any

from bench_pipeline_run import tiny_run
from tsa import openssl_or_skip


def test_the_evidence_phase_fills_in_every_checkpoint_after_an_outage() -> None:
    openssl_or_skip()
    done = tiny_run()
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["errors"] == [] and out["status"] == 0
    evidence = out["evidence"]
    assert evidence["error"] is None
    for side in ("off", "on"):  # the same three windows of load, without and with evidence
        for window in ("up", "outage", "back"):
            spread = evidence["latency_ms"][side][window]
            assert spread is not None and 0 < spread["p50"] <= spread["p99"], (side, window)
            arrived, sent = evidence["arrived"][side][window]
            assert arrived == sent > 0, (side, window)  # no acquittal waited for the TSA or the witness
            assert evidence["hops_ms"][side][window], (side, window)
    assert evidence["outage_s"] >= 3
    # lots are sealed every second: the outage left checkpoints without evidence...
    assert evidence["missing_after_outage"]["untimestamped"] > 0
    assert evidence["missing_after_outage"]["uncosigned"] > 0
    # ...and every one got its token and cosignature once they were back, each verified
    archive = evidence["archive"]
    assert archive["checkpoints"] > 0 and archive["untimestamped"] == archive["uncosigned"] == 0
    assert archive["invalid"] == [] and evidence["catch_up_s"] is not None
    assert evidence["witness"]["cosigned"] >= archive["checkpoints"]
    assert set(evidence["witness"]["refusals"]) <= {"conflict"}
