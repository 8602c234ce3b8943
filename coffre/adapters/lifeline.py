"""Child processes that die with their parent, even when the parent is SIGKILLed.

``coffre up`` starts a broker, a witness and the services; the tests start brokers. When the parent
is killed (a timeout, the OOM killer, ``kill -9``) nothing runs its clean-up, and children left with
parent PID 1 keep their ports and data folders: the next ``coffre up`` on the machine cannot start.

:func:`tied` wraps a command so that the kernel kills it when the process that started it ends:
a small Python shim sets ``PR_SET_PDEATHSIG`` (SIGKILL) on itself, checks that its parent is still
the one that started it (it may have died during the fork), then ``exec``\\ s the command, which keeps
the setting (Linux keeps it across ``execve`` except for set-user-ID programs). No ``preexec_fn``:
Python code between ``fork`` and ``exec`` in a threaded parent may deadlock.

The kernel sends the signal when the parent *thread* that forked the child ends, not the process: a
child started from a worker thread (a supervisor thread that restarts a service, ``asyncio.to_thread``)
would be killed when that thread ends. :func:`popen` therefore forks from the main thread, or else
from one thread of its own that lives as long as the process. Elsewhere than Linux there is no such
signal: the command runs untied (:data:`SUPPORTED` is False).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

__all__ = ["SUPPORTED", "popen", "tied"]

SUPPORTED = sys.platform.startswith("linux")

_SHIM = (
    "import ctypes,os,sys\n"
    "libc=ctypes.CDLL(None,use_errno=True)\n"
    "if libc.prctl(1,9,0,0,0)!=0:raise SystemExit('prctl(PR_SET_PDEATHSIG) failed')\n"
    "if os.getppid()!=int(sys.argv[1]):os._exit(137)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)
"""prctl option 1 is PR_SET_PDEATHSIG, signal 9 SIGKILL; a parent already gone: exit as if killed."""


def tied(argv: Sequence[str], *, python: str | None = None) -> list[str]:
    """``argv`` run so that it is SIGKILLed when this process (the thread that starts it) ends.

    ``python`` runs the shim instead of this interpreter: one that the command's user can run when
    it runs as another user (``Popen``'s ``user=``: the kernel clears the signal when the user
    changes, so the shim must set it after, as that user)."""
    if not SUPPORTED:
        return list(argv)
    # -I: isolated (no user site, no PYTHON* variables), -S: no site import (a few ms, not tens)
    return [python or sys.executable, "-I", "-S", "-c", _SHIM, str(os.getpid()), *argv]


_requests: queue.SimpleQueue[tuple[list[str], dict[str, Any], Future[subprocess.Popen[Any]]]] = (
    queue.SimpleQueue()
)
_forker: threading.Thread | None = None
_forker_lock = threading.Lock()


def popen(argv: Sequence[str], *, python: str | None = None, **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(tied(argv, python=python), **options)``, forked by a thread that ends only
    with this process: the main thread, or the one :func:`popen` keeps for calls from other threads."""
    command = tied(argv, python=python)
    if not SUPPORTED or threading.current_thread() is threading.main_thread():
        return subprocess.Popen(command, **options)
    global _forker
    with _forker_lock:
        if _forker is None or not _forker.is_alive():
            _forker = threading.Thread(target=_fork_forever, name="coffre-lifeline", daemon=True)
            _forker.start()
    started: Future[subprocess.Popen[Any]] = Future()
    _requests.put((command, options, started))
    return started.result()


def _fork_forever() -> None:
    while True:
        command, options, started = _requests.get()
        try:
            started.set_result(subprocess.Popen(command, **options))
        except BaseException as exc:  # the caller's Popen error, raised in the caller's thread
            started.set_exception(exc)
