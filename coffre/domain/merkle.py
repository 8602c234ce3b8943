"""Merkle tree hashing per RFC 9162 (Certificate Transparency v2) section 2.1, with SHA-256.

Pure functions, no I/O. The hash chain (:mod:`coffre.domain.chain`) proves order but needs
every event to check one; a Merkle tree over the same events lets a verifier check that one
event is in a signed root (inclusion proof, O(log n) hashes) and that a later root extends an
earlier one (consistency proof), as Certificate Transparency logs do.

Leaves and interior nodes are hashed with distinct prefixes (0x00, 0x01) so that a leaf can
never be passed off as an interior node (second-preimage resistance). Trees that are not a
power of two in size split at the largest power of two smaller than ``n``, so the tree of the
first ``m`` leaves is a set of perfect subtrees of every later tree: that is what makes
append-only consistency provable.

The functions that build proofs take leaf *hashes* (see :func:`leaf_hash`), not leaf data,
and raise :class:`ValueError` on misuse; the ``verify_*`` functions take untrusted input and
answer False, never raise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

HASH_SIZE = 32
"""Bytes in a Merkle hash (SHA-256)."""

_sha256 = hashlib.sha256
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

EMPTY_ROOT = _sha256(b"").digest()
"""MTH({}): the root of the empty tree, SHA-256 of the empty string (RFC 9162 2.1.1)."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 ‖ data): the hash of one leaf, domain-separated from interior nodes."""
    return _sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 ‖ left ‖ right): the hash of an interior node from its children's hashes."""
    return _sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n`` >= 2): where MTH splits."""
    return 1 << ((n - 1).bit_length() - 1)


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes | bytearray | memoryview) or len(value) != HASH_SIZE:
        raise ValueError(f"a {what} is {HASH_SIZE} bytes")


def _fold(frontier: list[bytes]) -> bytes:
    """Root of a tree given its perfect subtree roots, largest (leftmost) first.

    MTH's split at the largest power of two means the tree of ``n`` leaves is the perfect
    subtrees of the binary decomposition of ``n``, joined from the right.
    """
    if not frontier:
        return EMPTY_ROOT
    result = frontier[-1]
    for left in reversed(frontier[:-1]):
        result = _sha256(_NODE_PREFIX + left + result).digest()
    return result


def _range_root(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH(D[start:end]) in O(end - start) time and O(log n) memory, without slicing."""
    frontier: list[bytes] = []
    for count, i in enumerate(range(start, end)):
        h = leaf_hashes[i]
        _check_hash(h, "leaf hash")
        # Every trailing 1 bit of the count of leaves already folded is a perfect subtree of
        # the same size as the one being built: merge them.
        while count & 1:
            h = _sha256(_NODE_PREFIX + frontier.pop() + h).digest()
            count >>= 1
        frontier.append(bytes(h))
    return _fold(frontier)


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH(D[n]) over already-computed leaf hashes (RFC 9162 2.1.1); :data:`EMPTY_ROOT` for none."""
    return _range_root(leaf_hashes, 0, len(leaf_hashes))


def inclusion_proof(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]) (RFC 9162 2.1.3.1): sibling hashes from the leaf up to the root.

    Walks down from the root keeping the subtree that holds ``index``; the siblings met are
    the proof, in reverse. Costs O(n) hashing (each sibling is recomputed) and O(log n) memory.
    """
    n = len(leaf_hashes)
    if not 0 <= index < n:
        raise ValueError(f"leaf index {index} is outside a tree of {n} leaves")
    proof: list[bytes] = []
    lo, hi = 0, n
    while hi - lo > 1:
        mid = lo + _split(hi - lo)
        if index < mid:
            proof.append(_range_root(leaf_hashes, mid, hi))
            hi = mid
        else:
            proof.append(_range_root(leaf_hashes, lo, mid))
            lo = mid
    if n == 1:
        _check_hash(leaf_hashes[0], "leaf hash")
    proof.reverse()
    return proof


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes | bytearray | memoryview) and len(value) == HASH_SIZE


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def verify_inclusion(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    """Whether ``proof`` shows the leaf ``leaf_hash`` at ``index`` in the tree of ``size``
    leaves whose root is ``root`` (RFC 9162 2.1.3.2). False, never an exception, on any
    malformed input: the proof comes from whoever wants to be believed."""
    try:
        if not (_is_hash(leaf_hash) and _is_hash(root) and _is_size(index) and _is_size(size)):
            return False
        if not 0 <= index < size:
            return False
        proof = list(proof)
        if not all(_is_hash(p) for p in proof):
            return False
        fn, sn = index, size - 1
        r = bytes(leaf_hash)
        for p in proof:
            if sn == 0:
                return False  # proof longer than the path to the root
            p = bytes(p)
            if fn & 1 or fn == sn:
                r = _sha256(_NODE_PREFIX + p + r).digest()
                # A rightmost node with no right sibling is promoted unchanged: skip levels.
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
            else:
                r = _sha256(_NODE_PREFIX + r + p).digest()
            fn >>= 1
            sn >>= 1
        return sn == 0 and r == bytes(root)
    except Exception:
        return False


def consistency_proof(old_size: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) (RFC 9162 2.1.4.1): the hashes showing that the tree of the first
    ``old_size`` leaves is a prefix of the tree of all ``n`` leaves; [] when ``old_size == n``."""
    n = len(leaf_hashes)
    if not 0 < old_size <= n:
        raise ValueError(f"old size {old_size} is not in 1..{n}")
    return _consistency_path(old_size, n, lambda lo, hi: _range_root(leaf_hashes, lo, hi))


def extension_proof(old: MerkleAccumulator, new_leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[m + k]) from the tree of the first ``m`` leaves, kept as an accumulator, and
    the ``k`` leaves that follow, without the first ``m`` leaves: every hash of the proof left of
    the old tree's end is one of the old tree's perfect subtrees (the accumulator's frontier),
    every one right of it is a subtree of the new leaves. Costs O(k + log m) hashing."""
    m = old.size
    if m == 0:
        raise ValueError("no consistency proof from the empty tree")
    kept: dict[tuple[int, int], bytes] = {}
    start = 0
    for bit, node in zip(
        (b for b in range(m.bit_length() - 1, -1, -1) if m >> b & 1), old._frontier, strict=True
    ):
        kept[(start, start + (1 << bit))] = node
        start += 1 << bit

    def subtree(lo: int, hi: int) -> bytes:
        if hi <= m:
            return kept[(lo, hi)]
        if lo >= m:
            return _range_root(new_leaves, lo - m, hi - m)
        raise AssertionError(f"a proof node [{lo}, {hi}) across the old tree's end {m}")  # pragma: no cover

    return _consistency_path(m, m + len(new_leaves), subtree)


def _consistency_path(old_size: int, n: int, subtree: Callable[[int, int], bytes]) -> list[bytes]:
    """Iterative form of SUBPROOF: walk down from the root toward the old tree's last leaf,
    collecting the sibling subtree met at each step (appended in reverse at the end)."""
    lo, hi, m = 0, n, old_size
    whole_old_subtree = True  # SUBPROOF's b: is the current subtree's prefix the whole old tree?
    tail: list[bytes] = []
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            tail.append(subtree(lo + k, hi))
            hi = lo + k
        else:
            tail.append(subtree(lo, lo + k))
            lo += k
            m -= k
            whole_old_subtree = False
    proof = [] if whole_old_subtree else [subtree(lo, hi)]
    proof.extend(reversed(tail))
    return proof


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows the tree of ``old_size`` leaves with root ``old_root`` to be a
    prefix of the tree of ``new_size`` leaves with root ``new_root`` (RFC 9162 2.1.4.2).

    Equal sizes need an empty proof and equal roots. The empty tree is a prefix of every tree:
    ``old_size == 0`` holds with an empty proof when ``old_root`` is :data:`EMPTY_ROOT` (this
    says nothing about ``new_root``). False, never an exception, on any malformed input.
    """
    try:
        if not (_is_size(old_size) and _is_size(new_size) and _is_hash(old_root) and _is_hash(new_root)):
            return False
        if not 0 <= old_size <= new_size:
            return False
        path = list(proof)
        if not all(_is_hash(p) for p in path):
            return False
        old_root, new_root = bytes(old_root), bytes(new_root)
        path = [bytes(p) for p in path]
        if old_size == 0:
            return not path and old_root == EMPTY_ROOT
        if old_size == new_size:
            return not path and old_root == new_root
        if not path:
            return False
        # The old tree is then itself a perfect subtree of the new one, and the proof omits it.
        if old_size & (old_size - 1) == 0:
            path.insert(0, old_root)
        fn, sn = old_size - 1, new_size - 1
        while fn & 1:
            fn >>= 1
            sn >>= 1
        fr = sr = path[0]
        for c in path[1:]:
            if sn == 0:
                return False  # proof longer than the path to the root
            if fn & 1 or fn == sn:
                fr = _sha256(_NODE_PREFIX + c + fr).digest()
                sr = _sha256(_NODE_PREFIX + c + sr).digest()
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
            else:
                sr = _sha256(_NODE_PREFIX + sr + c).digest()
            fn >>= 1
            sn >>= 1
        return sn == 0 and fr == old_root and sr == new_root
    except Exception:
        return False


class MerkleAccumulator:
    """The root of a growing tree without keeping its leaves.

    Keeps only the "frontier" (compact range): the roots of the perfect subtrees given by the
    binary decomposition of the size, largest first, so O(log n) memory and amortized O(1)
    hashing per append; :meth:`root` folds them in O(log n). An appender (the vault) can thus
    sign a Merkle root after every lot while streaming events.
    """

    __slots__ = ("_frontier", "_size")

    def __init__(self) -> None:
        self._frontier: list[bytes] = []
        self._size = 0

    def append(self, leaf_hash: bytes) -> None:
        """Add the next leaf (its hash, see :func:`leaf_hash`)."""
        _check_hash(leaf_hash, "leaf hash")
        h = bytes(leaf_hash)
        count = self._size
        frontier = self._frontier
        while count & 1:
            h = _sha256(_NODE_PREFIX + frontier.pop() + h).digest()
            count >>= 1
        frontier.append(h)
        self._size += 1

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    def root(self) -> bytes:
        """MTH of all the leaves appended so far: equals :func:`root` over them."""
        return _fold(self._frontier)

    @property
    def frontier(self) -> tuple[bytes, ...]:
        """The roots of the perfect subtrees, largest first (one per bit set in the size)."""
        return tuple(self._frontier)

    @classmethod
    def from_frontier(cls, size: int, frontier: list[bytes] | tuple[bytes, ...]) -> MerkleAccumulator:
        """The accumulator of a tree of ``size`` leaves from its :attr:`frontier` (ValueError when the
        count of subtrees is not the count of bits set in ``size``). Check :meth:`root` against a
        signed root before trusting it: a frontier that folds to the signed root is the real one."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"a tree size is a natural number, not {size!r}")
        if len(frontier) != size.bit_count():
            raise ValueError(
                f"a tree of {size} leaves has {size.bit_count()} subtree roots, not {len(frontier)}"
            )
        for h in frontier:
            _check_hash(h, "subtree root")
        accumulator = cls()
        accumulator._frontier = [bytes(h) for h in frontier]
        accumulator._size = size
        return accumulator

    def copy(self) -> MerkleAccumulator:
        """An independent accumulator in the same state (e.g. to fork a tentative root)."""
        other = MerkleAccumulator()
        other._frontier = list(self._frontier)
        other._size = self._size
        return other

    def __repr__(self) -> str:
        return f"MerkleAccumulator(size={self._size}, root={self.root().hex()})"
