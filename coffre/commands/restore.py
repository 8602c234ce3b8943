"""``coffre restore``: the vault's journals rebuilt from its archive after the loss of its volume, and its
offsets rewound."""

from __future__ import annotations

import argparse
import sys

from coffre.logs import setup_logging


def run(args: argparse.Namespace) -> int:
    """Rebuild the vault's journals from its archive (after losing its volume), then rewind
    its offsets so that what was recorded but not yet sealed is read again from Kafka."""
    import asyncio
    import datetime as dt

    from coffre_vault.restore import RestoreRefused, restore_journals, rewind

    from coffre.config import load_settings

    settings = load_settings()
    setup_logging(settings.log_level, "text")
    owns = None  # vault replicas share every partition through their group
    try:
        coffres = restore_journals(settings, owns)
    except RestoreRefused as exc:
        print(f"coffre restore: {exc}", file=sys.stderr)
        return 1
    for c in coffres:
        what = "restored" if c.restored else "kept (a journal exists)"
        print(f"coffre {c.id_oper}/{c.id_coffre}: {c.lots} lot(s), IDEvt 1..{c.last_id_evt}: {what}")
    restored = [c for c in coffres if c.restored]
    if args.rewind == "none" or not restored:
        print("offsets left as they are" if restored else "nothing to restore")
        return 0
    since = None
    if args.rewind == "auto":
        seals = [c.last_sealed_at for c in restored if c.last_sealed_at is not None]
        margin = dt.timedelta(seconds=settings.lot_max_age_seconds + args.margin)
        since = min(seals) - margin if seals else None
    try:
        offsets = asyncio.run(rewind(settings, since, owns))
    except RestoreRefused as exc:
        print(f"coffre restore: the journals are restored, the offsets are not: {exc}", file=sys.stderr)
        return 1
    start = "the beginning" if since is None else since.isoformat(timespec="seconds")
    print(f"vault offsets on {settings.topics.normalized} rewound to {start}: {offsets}")
    return 0
