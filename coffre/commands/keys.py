"""``coffre keygen`` and ``coffre witness-keygen``: a signing key with its certificate, a witness's key."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def keygen(args: argparse.Namespace) -> int:
    """Write a signing key (0600) and its self-signed certificate."""
    from coffre.adapters.keys import write_key_pair

    try:
        key, cert = write_key_pair(Path(args.out), args.name, args.algorithm, args.days)
    except FileExistsError as exc:
        print(f"coffre keygen: {exc} (a key is never overwritten)", file=sys.stderr)
        return 1
    print(f"key: {key}\ncertificate: {cert}")
    return 0


def witness_keygen(args: argparse.Namespace) -> int:
    """Write a witness's Ed25519 key (0600) and its public key, and print its vkey."""
    from coffre.adapters.files import fsync_directory, write_new
    from coffre.domain.witness import WitnessKey

    try:
        key = WitnessKey.generate(args.name)
    except ValueError as exc:
        print(f"coffre witness-keygen: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    private, public = out / "witness-key.pem", out / "witness-key.pub.pem"
    for path in (private, public):
        if path.exists():
            print(f"coffre witness-keygen: {path} exists (a key is never overwritten)", file=sys.stderr)
            return 1
    write_new(private, key.private_pem(), 0o600)
    write_new(public, key.public.pem(), 0o644)
    fsync_directory(out)
    print(f"key: {private}\npublic key: {public}\nvkey: {key.public.vkey}")
    return 0
