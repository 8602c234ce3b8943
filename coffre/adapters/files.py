"""Durable file primitives the adapters share: a file created once and fsynced, a directory
entry made durable."""

from __future__ import annotations

import os
from pathlib import Path


def write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` with ``mode`` (whatever the umask) and fsync it; FileExistsError if it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may be short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_directory(path: Path) -> None:
    """Make the entries created, renamed or removed in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
