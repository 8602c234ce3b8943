"""``coffre console-index``: the regulator console's index of an archive folder (docs/console.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    """Build the console's index of an archive folder (docs/console.md): brings an existing index up
    to date, or with ``--rebuild`` makes a new one from the archive alone and puts it in place."""
    import contextlib
    import time

    from coffre_regulator.event_index import Indexer, connect, is_postgresql, rebuild, shown

    from coffre.adapters.storage import LocalStorage
    from coffre.domain.signing import TrustStore

    if not args.cert:
        print("coffre console-index: name the certificate(s) you trust with --cert PEM", file=sys.stderr)
        return 2
    if not Path(args.path).is_dir():
        print(f"coffre console-index: no archive folder {args.path}", file=sys.stderr)
        return 2
    try:
        trust = TrustStore.from_pem_files(args.cert)
    except (OSError, ValueError) as exc:
        print(f"coffre console-index: {exc}", file=sys.stderr)
        return 2
    storage = LocalStorage(Path(args.path))
    index: Path | str = args.index if is_postgresql(args.index) else Path(args.index)
    started = time.monotonic()
    try:
        if args.rebuild:
            done = rebuild(index, storage, trust, jobs=args.jobs)
        else:
            with contextlib.closing(connect(index)) as db:
                indexer = Indexer(db, storage, trust, jobs=args.jobs)
                try:
                    done = indexer.catch_up()
                finally:
                    indexer.close()
    except (OSError, ValueError) as exc:
        print(f"coffre console-index: {exc}", file=sys.stderr)
        return 2
    print(
        f"{shown(index)}: {done.lots} lot(s), {done.events} event(s) added in {time.monotonic() - started:.1f} s"
    )
    for reason in done.refused:
        print(f"refused: {reason}")
    return 1 if done.refused else 0
