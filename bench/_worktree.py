"""An older revision of coffre, checked out in a temporary git worktree and importable from there.

Shared by the benchmarks' ``--baseline REV`` modes. The checkout's ``services/<name>`` folders are
made importable as ``coffre_<name>`` through a folder of symlinks (what ``pip install -e`` maps
for the current tree), and :attr:`Checkout.pythonpath` puts the checkout first. A child process
run with that ``PYTHONPATH`` and a working directory outside the project imports REV's code, not
the current checkout's (``python -m`` puts the working directory first on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SERVICE_PACKAGES = ("ingest", "vault", "acquittal", "regulator", "auditor")
"""``services/<name>`` folders linked as ``coffre_<name>`` when the revision has them."""


def git(*args: str) -> str:
    """``git -C PROJECT ARGS``' standard output, stripped (raises CalledProcessError)."""
    done = subprocess.run(["git", "-C", str(PROJECT), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def short_revision(rev: str = "HEAD") -> str:
    """The abbreviated commit of ``rev`` (``git rev-parse --short``)."""
    return git("rev-parse", "--short", f"{rev}^{{commit}}")


def dirty() -> bool:
    """Whether the current checkout has changes not committed (tracked files only)."""
    try:
        return bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return False


@dataclass(frozen=True, slots=True)
class Checkout:
    revision: str
    """As given (a tag, a branch, a commit)."""
    commit: str
    """Its abbreviated commit."""
    folder: Path
    packages: Path
    """The folder of ``coffre_<name>`` symlinks."""

    @property
    def pythonpath(self) -> str:
        return f"{self.folder}{os.pathsep}{self.packages}"

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the ``PYTHONPATH`` that imports REV."""
        return {**(os.environ if base is None else base), "PYTHONPATH": self.pythonpath}

    def read(self, path: str) -> str | None:
        """A file of the revision (relative to the project's root), or None when it has none."""
        try:
            return (self.folder / path).read_text(encoding="utf-8")
        except OSError:
            return None


def add_worktree(rev: str, folder: Path) -> Checkout:
    """REV checked out (detached) in ``folder``, which must not exist; remove it with
    :func:`remove_worktree`."""
    commit = short_revision(rev)
    git("worktree", "add", "--detach", str(folder), commit)
    packages = folder / ".bench-packages"
    packages.mkdir()
    for name in SERVICE_PACKAGES:
        if (folder / "services" / name).is_dir():
            (packages / f"coffre_{name}").symlink_to(folder / "services" / name)
    return Checkout(rev, commit, folder, packages)


def remove_worktree(folder: Path) -> None:
    """Undo :func:`add_worktree` (quietly: a failure leaves a worktree ``git worktree prune`` removes)."""
    subprocess.run(
        ["git", "-C", str(PROJECT), "worktree", "remove", "--force", str(folder)], capture_output=True
    )
    subprocess.run(["git", "-C", str(PROJECT), "worktree", "prune"], capture_output=True)


@contextlib.contextmanager
def worktree(rev: str, folder: Path) -> Iterator[Checkout]:
    """:func:`add_worktree`, removed on exit."""
    try:
        yield add_worktree(rev, folder)
    finally:
        if folder.exists():
            remove_worktree(folder)
