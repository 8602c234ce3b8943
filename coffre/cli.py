"""The ``coffre`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from .domain.catalogue import EVENT_TYPES, families
from .domain.codec import canonical_bytes, pretty_xml, split_documents, to_json
from .domain.errors import Rejected
from .domain.normalize import normalize


def _inputs(paths: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    """(label, bytes) for each event in the files and folders named (folders recursively)."""
    for name in paths:
        path = Path(name)
        files = (
            sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".xml", ".json"))
            if path.is_dir()
            else [path]
        )
        for file in files:
            documents = split_documents(file.read_bytes())
            for index, raw in enumerate(documents, start=1):
                yield (f"{file}#{index}" if len(documents) > 1 else str(file)), raw


def cmd_normalize(args: argparse.Namespace) -> int:
    """Print each input's normalized event, or its reason codes; exit 0 only if all were accepted."""
    accepted = rejected = 0
    next_id = args.id_evt_start
    out = sys.stdout.buffer
    for label, raw in _inputs(args.files):
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


def cmd_catalogue(args: argparse.Namespace) -> int:
    """List the event families and types coffre accepts, with their fields in schema order."""
    for family, tags in families().items():
        print(f"{family}: {', '.join(tags)}")
        if args.fields:
            for tag in tags:
                print(f"  {tag}: {' '.join(EVENT_TYPES[tag].model_fields)}")
    return 0


def cmd_annex_examples(args: argparse.Namespace) -> int:
    """Write the annex 1.4.3 examples (read from the annex text) into a folder."""
    from .domain.annex import annex_examples

    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for letter, raw in annex_examples(args.annex).items():
        target = folder / f"1.4.3.{letter}.xml"
        target.write_bytes(raw)
        print(target)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coffre", description="coffre-fort for French licensed gambling operators"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("normalize", help="normalize events (XML or JSON files, or folders) and print them")
    p.add_argument("files", nargs="+", help="event files or folders; a file may hold several events")
    p.add_argument(
        "--format",
        choices=("canonical", "pretty", "json"),
        default="canonical",
        help="canonical: the exclusive-C14N bytes the vault hashes (default); pretty: indented XML; json",
    )
    p.add_argument(
        "--id-evt-start",
        type=int,
        default=None,
        metavar="N",
        help="assign IDEvt N, N+1, … to accepted events (as ingest does) instead of keeping the input's",
    )
    p.set_defaults(func=cmd_normalize)

    p = sub.add_parser("catalogue", help="list the event types coffre accepts")
    p.add_argument("--fields", action="store_true", help="also list each event's elements in schema order")
    p.set_defaults(func=cmd_catalogue)

    p = sub.add_parser("annex-examples", help="extract the annex 1.4.3 example events into a folder")
    p.add_argument(
        "--annex", default=None, help="the annex Markdown (default: $COFFRE_DET_ANNEX or ../shared/spec/…)"
    )
    p.add_argument("--out", default="var/annex-examples", help="folder to write them to")
    p.set_defaults(func=cmd_annex_examples)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
