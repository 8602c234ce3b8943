"""``coffre normalize`` on each hostile class finishes within a second and under 200 MB: the work
is bounded by coffre's limits, whatever the input (it took 15 s and 3 GB on a JSON amount
``1E+999999999`` before them)."""

from __future__ import annotations

import pytest

from hostile import Case, hostile_cases, measure_coffre

SECONDS = 1.0
MEGABYTES = 200


@pytest.mark.parametrize("case", [c for c in hostile_cases() if not c.headers], ids=lambda c: c.name)
def test_normalize_answers_each_class_within_a_second_and_200_mb(tmp_path, case: Case):
    path = tmp_path / "input.xml"
    path.write_bytes(case.value)
    run = measure_coffre(["normalize", str(path)], cwd=tmp_path)
    code, seconds, megabytes, output = run.code, run.seconds, run.megabytes, run.stdout
    assert megabytes is not None, run.stderr[-2000:]
    assert code == 1 and b"REJECTED" in output, output[-2000:]
    assert case.code is None or case.code.encode() in output
    assert len(output) < 100_000  # the answer is bounded too
    assert seconds < SECONDS, f"{case.name}: {seconds:.2f}s"
    assert megabytes < MEGABYTES, f"{case.name}: {megabytes:.0f} MB"
