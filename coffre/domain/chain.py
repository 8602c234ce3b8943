"""The per-coffre hash chain: ``hash(n) = SHA-256(hash(n-1) ‖ canonical bytes of event n)``.

Pure functions, no I/O. ``hash(0)`` is :data:`GENESIS` (32 zero bytes) for every coffre, so
the chain of a coffre runs unbroken from IDEvt 1 across lots and restarts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

HASH_SIZE = 32
"""Bytes in a chain hash (SHA-256)."""

GENESIS = bytes(HASH_SIZE)
"""The "previous hash" of IDEvt 1 of every coffre: 32 zero bytes."""

_sha256 = hashlib.sha256


def chain_hash(previous: bytes, canonical: bytes) -> bytes:
    """SHA-256(previous ‖ canonical): the chain hash of an event whose predecessor's hash is ``previous``."""
    if len(previous) != HASH_SIZE:
        raise ValueError(f"a previous chain hash is {HASH_SIZE} bytes, not {len(previous)}")
    return _sha256(previous + canonical).digest()


def verify_chain(pairs: Iterable[tuple[bytes, bytes]], previous: bytes = GENESIS) -> int | None:
    """The 0-based index of the first ``(canonical bytes, claimed chain hash)`` pair whose hash
    does not recompute from its predecessor (``previous`` for the first pair), or None when the
    whole chain holds. An empty chain holds."""
    if len(previous) != HASH_SIZE:
        raise ValueError(f"a previous chain hash is {HASH_SIZE} bytes, not {len(previous)}")
    for index, (canonical, claimed) in enumerate(pairs):
        computed = _sha256(previous + canonical).digest()
        if computed != claimed:
            return index
        previous = computed
    return None
