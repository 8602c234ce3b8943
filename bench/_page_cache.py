"""Files out of the OS page cache, for the benchmarks' cold measures (``posix_fadvise(DONTNEED)``:
no root needed; the files must be clean, fsynced, for their pages to go)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def evict(paths: Iterable[Path]) -> None:
    """Drop each existing file's pages from the page cache: the next read comes from the disk."""
    for path in paths:
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
