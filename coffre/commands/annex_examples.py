"""``coffre annex-examples``: the annex 1.4.3 example events, read from the annex text (a cross-check
for whoever holds the regulator's text; coffre never ships it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    """Write the annex 1.4.3 examples (read from the annex text) into a folder: a cross-check
    of the demo's annex events, for whoever holds the regulator's text."""
    import os

    from coffre.domain.annex import ANNEX_ENV, ANNEX_NAME, annex_examples

    annex = args.annex or os.environ.get(ANNEX_ENV)
    if not annex:
        print(
            f"coffre annex-examples: name the annex text ({ANNEX_NAME}) with --annex or ${ANNEX_ENV}",
            file=sys.stderr,
        )
        return 2
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for letter, raw in annex_examples(annex).items():
        target = folder / f"1.4.3.{letter}.xml"
        target.write_bytes(raw)
        print(target)
    return 0
