"""What several commands read: the events of files and folders named on the command line."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path, PurePath, PurePosixPath
from typing import Any


def _order(path: PurePath) -> Any:
    """``sorted(paths)``'s order without ``Path.__lt__``'s cost: the parts on POSIX."""
    return path.parts if isinstance(path, PurePosixPath) else path


def inputs(paths: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    """(label, bytes) for each event in the files and folders named (folders recursively)."""
    from coffre.domain.codec import split_documents

    for name in paths:
        path = Path(name)
        files = (
            sorted(
                (p for p in path.rglob("*") if p.suffix.lower() in (".xml", ".json") and p.is_file()),
                key=_order,
            )
            if path.is_dir()
            else [path]
        )
        for file in files:
            documents = split_documents(file.read_bytes())
            for index, raw in enumerate(documents, start=1):
                yield (f"{file}#{index}" if len(documents) > 1 else str(file)), raw
