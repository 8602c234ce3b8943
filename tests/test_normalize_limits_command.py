"""``coffre normalize`` on each hostile class finishes within a second and under 200 MB: the work
is bounded by coffre's limits, whatever the input (it took 15 s and 3 GB on a JSON amount
``1E+999999999`` before them)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from hostile import Case, hostile_cases

SECONDS = 1.0
MEGABYTES = 200


# The command, run in a child that reports its own peak resident memory (VmHWM: that of the process
# image since exec; getrusage would count the pytest process it was forked from).
CHILD = """
import sys
from coffre.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
peak = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
sys.stderr.write(f"peak-kB {peak}\\n")
sys.exit(code)
"""


def run_measured(args: list[str]) -> tuple[int, float, float, bytes]:
    """Exit code, wall seconds, peak resident megabytes and output of ``coffre ARGS``."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, timeout=60)
    seconds = time.monotonic() - started
    peak = re.search(rb"peak-kB (\d+)", done.stderr)
    assert peak, done.stderr[-2000:]
    return done.returncode, seconds, int(peak[1]) / 1024, done.stdout


@pytest.mark.parametrize("case", [c for c in hostile_cases() if not c.headers], ids=lambda c: c.name)
def test_normalize_answers_each_class_within_a_second_and_200_mb(tmp_path, case: Case):
    path = tmp_path / "input.xml"
    path.write_bytes(case.value)
    code, seconds, megabytes, output = run_measured(["normalize", str(path)])
    assert code == 1 and b"REJECTED" in output, output[-2000:]
    assert case.code is None or case.code.encode() in output
    assert len(output) < 100_000  # the answer is bounded too
    assert seconds < SECONDS, f"{case.name}: {seconds:.2f}s"
    assert megabytes < MEGABYTES, f"{case.name}: {megabytes:.0f} MB"
