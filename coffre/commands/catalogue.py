"""``coffre catalogue``: the event types coffre accepts, with their elements in schema order."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    """List the event families and types coffre accepts, with their fields in schema order."""
    from coffre.domain.catalogue import EVENT_TYPES, families

    for family, tags in families().items():
        print(f"{family}: {', '.join(tags)}")
        if args.fields:
            for tag in tags:
                print(f"  {tag}: {' '.join(EVENT_TYPES[tag].model_fields)}")
    return 0
