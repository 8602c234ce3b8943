"""``coffre normalize``: each input's canonical bytes (exclusive C14N), pretty XML or JSON form, or its
reason codes."""

from __future__ import annotations

import argparse
import json
import sys

from .inputs import inputs


def run(args: argparse.Namespace) -> int:
    """Print each input's normalized event, or its reason codes; exit 0 only if all were accepted."""
    from coffre.domain.codec import canonical_bytes, pretty_xml, to_json
    from coffre.domain.errors import Rejected
    from coffre.domain.normalize import normalize

    accepted = rejected = 0
    next_id = args.id_evt_start
    out = sys.stdout.buffer
    for label, raw in inputs(args.files):
        try:
            event = normalize(raw, id_evt=next_id)
        except Rejected as exc:
            rejected += 1
            if args.format == "json":
                out.write(
                    json.dumps(
                        {"input": label, "status": "rejected", **exc.as_dict()}, ensure_ascii=False
                    ).encode()
                    + b"\n"
                )
            else:
                for p in exc.problems:
                    out.write(f"{label}: REJECTED {p.code} {p.path}: {p.message}\n".encode())
            continue
        accepted += 1
        if next_id is not None:
            next_id += 1
        if args.format == "json":
            out.write(to_json(event) + b"\n")
        elif args.format == "pretty":
            out.write(f"<!-- {label} -->\n".encode() + pretty_xml(event))
        else:
            out.write(canonical_bytes(event) + b"\n")
    print(f"{accepted} accepted, {rejected} rejected", file=sys.stderr)
    return 0 if rejected == 0 and accepted > 0 else 1
