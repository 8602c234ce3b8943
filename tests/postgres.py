"""A real PostgreSQL server for the tests of the console's index on PostgreSQL (docs/console.md,
"PostgreSQL"), from Debian's packages: ``initdb`` and ``postgres`` of the newest
``/usr/lib/postgresql/<version>/bin`` (or ``$COFFRE_POSTGRES_BIN``, or ``initdb`` on the ``PATH``).

:class:`LocalPostgres` makes a cluster in a temporary folder (trust authentication, UTF-8, the C
locale, no fsync: a test server), runs ``postgres`` itself (not ``pg_ctl``, which would detach it)
on a free port of 127.0.0.1 with its unix socket in that folder, tied to the test process by
:mod:`coffre.adapters.lifeline` (it dies with it, even on SIGKILL), and stops it at the end. The
tests connect through the socket. PostgreSQL refuses to run as root: as root the cluster is the
``postgres`` user's (Debian's package makes it), or ``nobody``'s.

Where PostgreSQL is missing, :func:`require_postgresql` skips the test with how to get it, except
under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from coffre.adapters import lifeline
from coffre.adapters.broker import free_port_block

HOW_TO_GET = (
    "the console index's PostgreSQL tests need PostgreSQL's server programs (initdb, postgres): "
    "apt-get install postgresql (scripts/test installs it as root on Debian), or set "
    "COFFRE_POSTGRES_BIN to the folder that holds them"
)
SUPERUSER = "coffre"
START_TIMEOUT = 60.0


def _version(bindir: Path) -> tuple[int, ...]:
    with contextlib.suppress(ValueError):
        return tuple(int(part) for part in bindir.parent.name.split("."))
    return (0,)


def bindir() -> Path | None:
    """The folder of ``initdb`` and ``postgres``, None when PostgreSQL is not installed."""
    candidates = [Path(os.environ["COFFRE_POSTGRES_BIN"])] if os.environ.get("COFFRE_POSTGRES_BIN") else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version, reverse=True)
    if found := shutil.which("initdb"):
        candidates.append(Path(found).resolve().parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    return None


def require_postgresql() -> Path:
    """PostgreSQL's programs, or a skip that says how to get them (a failure under CI)."""
    found = bindir()
    if found is not None:
        return found
    message = f"PostgreSQL not found: {HOW_TO_GET}"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {message}", pytrace=False)
    pytest.skip(message)


def _runnable_by_all(path: Path) -> bool:
    """Whether any user may run ``path`` (every folder above it searchable by all)."""
    real = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in (real, *real.parents))


class LocalPostgres:
    """One PostgreSQL cluster in a temporary folder, running until :meth:`stop`. Given a ``folder``
    (bench/console_search.py's ``--path``), the cluster is made there, or used again when it is
    there already; ``settings`` add to or replace the server's (``-c``)."""

    def __init__(
        self, programs: Path, folder: Path | None = None, settings: dict[str, str] | None = None
    ) -> None:
        self.programs = programs
        if folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="coffre-postgres-"))
        else:
            self.folder = folder
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.extra = dict(settings or {})
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.port = free_port_block(1)
        self.process: subprocess.Popen[bytes] | None = None
        self._names = itertools.count(1)
        self._as: dict[str, object] = {}
        self._python: str | None = None
        if os.geteuid() == 0:  # PostgreSQL does not run as root: as its own user
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                user = pwd.getpwnam("nobody")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            if not _runnable_by_all(Path(sys.executable)):  # the lifeline's shim runs as that user
                self._python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

    def start(self) -> LocalPostgres:
        """Make the cluster (unless it is there) and start its server; ready when this returns."""
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.folder),
            "port": str(self.port),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            **self.extra,
        }
        argv = [str(self.programs / "postgres"), "-D", str(self.data)]
        for name, value in settings.items():
            argv += ["-c", f"{name}={value}"]
        with open(self.log, "ab") as out:
            self.process = lifeline.popen(
                argv,
                python=self._python,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,  # a Ctrl-C to pytest is not the server's
                **self._as,
            )
        self._wait_ready()
        return self

    def _initdb(self) -> None:
        initdb = subprocess.run(
            [
                str(self.programs / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            cwd=self.folder,
            timeout=120,
            **self._as,  # type: ignore[arg-type]
        )
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}): {initdb.stdout}{initdb.stderr}")

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited {self.process.returncode}:\n{self.tail()}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"postgres not ready in {START_TIMEOUT:.0f} s:\n{self.tail()}"
                    ) from None
                time.sleep(0.1)

    def tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def url(self, database: str) -> str:
        """The URL of ``database`` through the server's unix socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.folder))}&port={self.port}"

    def create_database(self, prefix: str = "index") -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.split("/")[3].split("?")[0]
        with psycopg.connect(self.url("postgres"), autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self, *, remove: bool = True) -> None:
        """Stop the server (a fast shutdown: a checkpoint, then exit); its folder removed unless not ``remove``."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)
