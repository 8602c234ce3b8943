"""A tied child dies with the process that started it, even when that process is SIGKILLed.

A parent process starts a child through :func:`coffre.adapters.lifeline.tied` (as ``coffre up`` starts
its broker and services, and the tests their brokers) and is then killed with SIGKILL: the child must
be gone within moments. The same child started untied outlives its parent (the check can fail).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from coffre.adapters.lifeline import SUPPORTED, tied

pytestmark = pytest.mark.skipif(not SUPPORTED, reason="PR_SET_PDEATHSIG is Linux's")

PARENT = """
import subprocess, sys, threading, time
from coffre.adapters.lifeline import popen
command = [sys.executable, "-c", "import time; time.sleep(600)"]
if sys.argv[1] == "thread":  # from a worker thread that ends later, as a supervisor's restart
    started = []
    worker = threading.Thread(target=lambda: (started.append(popen(command)), time.sleep(1.5)))
    worker.start()
    worker.join()
    child = started[0]
else:
    child = popen(command) if sys.argv[1] == "tied" else subprocess.Popen(command)
print(child.pid, flush=True)
time.sleep(1.0)
print("alive" if child.poll() is None else f"dead {child.returncode}", flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def orphan_after_parent_killed(mode: str) -> tuple[int, bool]:
    """Start a parent that starts a child (``tied`` or not), SIGKILL the parent: the child's pid and
    whether it still runs 5 s later."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "alive"  # a second later: the thread that forked it is gone
    assert running(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and running(child):
        time.sleep(0.05)
    return child, running(child)


def test_a_tied_child_dies_with_its_sigkilled_parent() -> None:
    _, survived = orphan_after_parent_killed("tied")
    assert not survived


def test_a_child_started_from_a_thread_that_ends_lives_on_and_dies_with_its_parent() -> None:
    """The kernel signals when the *thread* that forked the child ends: a supervisor thread's restart
    must not die with that thread, and must still die with the process."""
    _, survived = orphan_after_parent_killed("thread")
    assert not survived


def test_an_untied_child_would_outlive_it() -> None:
    child, survived = orphan_after_parent_killed("untied")
    try:
        assert survived  # what coffre up's children did before: the check above can fail
    finally:
        if running(child):
            os.kill(child, signal.SIGKILL)


def test_the_tied_command_is_the_command_itself_once_started() -> None:
    """The shim execs the command in place: the pid the parent holds is the command's, its output
    and exit status are the command's."""
    child = subprocess.Popen(
        tied([sys.executable, "-c", "import os, sys; print(os.getpid()); sys.exit(7)"]),
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 7
    assert int(out) == child.pid
