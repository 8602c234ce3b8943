"""``coffre proof``: an RFC 9162 inclusion or consistency proof from an archive that verifies, or a saved
proof checked offline (``--check``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    """Print an RFC 9162 inclusion or consistency proof (JSON) from an archive that verifies."""
    from coffre.commands.verify import archive_proof

    if args.check:
        return check(args)
    oper, _, coffre = (args.coffre or "").partition("/")
    if args.path is None:
        print("coffre proof: name the archive (PATH), or a proof to check with --check FILE", file=sys.stderr)
        return 2
    if not coffre.isdigit() or (args.id_evt is None) == (args.since_size is None):
        print("coffre proof: --coffre IDOPER/IDCOFFRE and one of --id-evt or --since-size", file=sys.stderr)
        return 2
    try:
        proof = archive_proof(
            Path(args.path),
            [Path(c) for c in args.cert],
            oper,
            int(coffre),
            id_evt=args.id_evt,
            since_size=args.since_size,
        )
    except ValueError as exc:
        print(f"coffre proof: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(proof, indent=2))
    return 0


def check(args: argparse.Namespace) -> int:
    """``coffre proof --check FILE [--checkpoint XML --cert PEM]``: a saved proof checked offline,
    its roots against signed checkpoints when given."""
    from coffre.domain.lot import LotFormatError, parse_document, read_checkpoint
    from coffre.domain.proofs import check_proof
    from coffre.domain.signing import SignatureInvalid, TrustStore, verify

    try:
        data = json.loads(Path(args.check).read_bytes())
    except (OSError, ValueError) as exc:
        print(f"coffre proof: {args.check}: {exc}", file=sys.stderr)
        return 2
    signed: dict[int, bytes] = {}
    if args.checkpoint and not args.cert:
        print("coffre proof: --checkpoint needs the certificate(s) you trust (--cert PEM)", file=sys.stderr)
        return 2
    trust = TrustStore.from_pem_files(args.cert) if args.cert else None
    for name in args.checkpoint:
        try:
            document = Path(name).read_bytes()
            unverified = read_checkpoint(parse_document(document))
            checkpoint = read_checkpoint(verify(document, trust, unverified.at))  # type: ignore[arg-type]
        except (OSError, LotFormatError, SignatureInvalid) as exc:
            print(f"coffre proof: {name}: {exc}", file=sys.stderr)
            return 1
        signed[checkpoint.tree_size] = checkpoint.tree_root
    kind, problems = check_proof(data, signed)
    for problem in problems:
        print(f"{args.check}: {problem}")
    if problems:
        return 1
    against = (
        f", against {len(signed)} signed checkpoint(s)"
        if signed
        else " (its roots are checked against nothing signed)"
    )
    print(f"{args.check}: {kind} proof: OK{against}")
    return 0
