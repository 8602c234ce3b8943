"""Merkle tree (RFC 9162 section 2.1): known answers from the Certificate Transparency test data,
a differential check against a naive recursive transcription of the RFC, and properties."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coffre.domain.merkle import (
    EMPTY_ROOT,
    MerkleAccumulator,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# --- Certificate Transparency reference test data (merkle_tree_test / RFC 6962 vectors) -------

CT_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
CT_LEAF_HASHES = [leaf_hash(d) for d in CT_LEAVES]

CT_ROOTS = {  # MTH of the first n leaves
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

CT_INCLUSION = [  # (leaf index, tree size, path)
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]

CT_CONSISTENCY = [  # (old size, new size, proof)
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


# --- Naive reference: a literal, recursive, slicing transcription of RFC 9162 2.1 ----------------


def _sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def _k(n: int) -> int:
    """Largest power of two smaller than n, by counting up (independent of bit tricks)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: list[bytes]) -> bytes:
    """MTH over leaf *hashes* (RFC 2.1.1 with the leaf hashing already done)."""
    n = len(d)
    if n == 0:
        return _sha(b"")
    if n == 1:
        return d[0]
    k = _k(n)
    return _sha(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:]))


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    n = len(d)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [ref_mth(d)]
    k = _k(n)
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def ref_proof(m: int, d: list[bytes]) -> list[bytes]:
    return ref_subproof(m, d, True)


def ref_verify_inclusion(leaf: bytes, m: int, n: int, proof: list[bytes], rt: bytes) -> bool:
    """Structural verifier: undo PATH's recursion, consuming the proof from its root end."""
    if not 0 <= m < n:
        return False
    rest = list(proof)

    def rebuild(m: int, n: int) -> bytes | None:
        if n == 1:
            return leaf
        if not rest:
            return None
        sibling = rest.pop()
        k = _k(n)
        if m < k:
            sub = rebuild(m, k)
            return None if sub is None else _sha(b"\x01" + sub + sibling)
        sub = rebuild(m - k, n - k)
        return None if sub is None else _sha(b"\x01" + sibling + sub)

    got = rebuild(m, n)
    return got is not None and not rest and got == rt


def ref_verify_consistency(m: int, n: int, old: bytes, new: bytes, proof: list[bytes]) -> bool:
    """Structural verifier: undo SUBPROOF's recursion, rebuilding both roots."""
    if not 0 < m <= n:
        return m == 0 and not proof and old == _sha(b"")
    rest = list(proof)

    def rebuild(m: int, n: int, b: bool) -> tuple[bytes, bytes] | None:
        if m == n:
            if b:
                return old, old
            if len(rest) != 1:
                return None
            x = rest.pop()
            return x, x
        if not rest:
            return None
        x = rest.pop()
        k = _k(n)
        if m <= k:
            sub = rebuild(m, k, b)
            return None if sub is None else (sub[0], _sha(b"\x01" + sub[1] + x))
        sub = rebuild(m - k, n - k, False)
        return None if sub is None else (_sha(b"\x01" + x + sub[0]), _sha(b"\x01" + x + sub[1]))

    got = rebuild(m, n, True)
    return got is not None and not rest and got == (old, new)


def hashes(n: int, seed: int = 0) -> list[bytes]:
    return [leaf_hash(f"{seed}:{i}".encode()) for i in range(n)]


def flip(b: bytes, pos: int = 0) -> bytes:
    pos %= len(b)
    return b[:pos] + bytes([b[pos] ^ 0x01]) + b[pos + 1 :]


# --- Known answers ---------------------------------------------------------------------------


def test_primitives() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert root([]) == EMPTY_ROOT
    assert MerkleAccumulator().root() == EMPTY_ROOT
    assert leaf_hash(b"") == bytes.fromhex(CT_ROOTS[1])
    assert node_hash(b"a" * 32, b"b" * 32) == _sha(b"\x01" + b"a" * 32 + b"b" * 32)
    assert leaf_hash(b"x") != node_hash(b"", b"x")  # the prefixes separate leaves from nodes


@pytest.mark.parametrize("n", sorted(CT_ROOTS))
def test_ct_roots(n: int) -> None:
    expected = bytes.fromhex(CT_ROOTS[n])
    assert root(CT_LEAF_HASHES[:n]) == expected
    assert ref_mth(CT_LEAF_HASHES[:n]) == expected
    acc = MerkleAccumulator()
    for h in CT_LEAF_HASHES[:n]:
        acc.append(h)
    assert acc.size == n
    assert acc.root() == expected


@pytest.mark.parametrize(("index", "size", "path"), CT_INCLUSION)
def test_ct_inclusion(index: int, size: int, path: list[str]) -> None:
    expected = [bytes.fromhex(h) for h in path]
    d = CT_LEAF_HASHES[:size]
    assert inclusion_proof(index, d) == expected
    assert ref_path(index, d) == expected
    assert verify_inclusion(d[index], index, size, expected, bytes.fromhex(CT_ROOTS[size]))


@pytest.mark.parametrize(("old", "new", "path"), CT_CONSISTENCY)
def test_ct_consistency(old: int, new: int, path: list[str]) -> None:
    expected = [bytes.fromhex(h) for h in path]
    d = CT_LEAF_HASHES[:new]
    assert consistency_proof(old, d) == expected
    assert ref_proof(old, d) == expected
    old_root, new_root = bytes.fromhex(CT_ROOTS[old]), bytes.fromhex(CT_ROOTS[new])
    assert verify_consistency(old, new, old_root, new_root, expected)
    assert not verify_consistency(old, new, new_root, old_root, expected) or old == new


def test_ct_all_pairs_against_reference() -> None:
    """Every inclusion and consistency proof of the 8-leaf CT tree, against the reference."""
    for n in range(1, 9):
        d = CT_LEAF_HASHES[:n]
        for i in range(n):
            assert inclusion_proof(i, d) == ref_path(i, d)
        for m in range(1, n + 1):
            p = consistency_proof(m, d)
            assert p == ref_proof(m, d)
            assert verify_consistency(m, n, bytes.fromhex(CT_ROOTS[m]), bytes.fromhex(CT_ROOTS[n]), p)


# --- Exhaustive small trees against the naive reference -----------------------------------------


def test_exhaustive_small_trees() -> None:
    for n in range(1, 40):
        d = hashes(n, seed=n)
        rt = ref_mth(d)
        assert root(d) == rt
        for i in range(n):
            p = inclusion_proof(i, d)
            assert p == ref_path(i, d)
            assert verify_inclusion(d[i], i, n, p, rt)
            assert ref_verify_inclusion(d[i], i, n, p, rt)
        for m in range(1, n + 1):
            p = consistency_proof(m, d)
            assert p == ref_proof(m, d)
            old = ref_mth(d[:m])
            assert verify_consistency(m, n, old, rt, p)
            assert ref_verify_consistency(m, n, old, rt, p)


def test_wrong_sizes_agree_with_structural_reference() -> None:
    """RFC 9162's verifiers do not bind the sizes beyond the tree *shape*: e.g. a proof for
    leaf 0 of 3 leaves also verifies as leaf 0 of 4, and a 3->4 consistency proof as 6->8.
    So a wrong size must fail exactly when the structural reference says so."""
    d = hashes(12, seed=99)
    accepted_elsewhere = 0
    for n in range(1, 13):
        rt = ref_mth(d[:n])
        for i in range(n):
            p = inclusion_proof(i, d[:n])
            for i2 in range(-1, 14):
                for n2 in range(-1, 26):
                    got = verify_inclusion(d[i], i2, n2, p, rt)
                    assert got == ref_verify_inclusion(d[i], i2, n2, p, rt), (i, n, i2, n2)
                    accepted_elsewhere += got and (i2, n2) != (i, n)
        for m in range(1, n + 1):
            p = consistency_proof(m, d[:n])
            old = ref_mth(d[:m])
            for m2 in range(-1, 14):
                for n2 in range(-1, 26):
                    got = verify_consistency(m2, n2, old, rt, p)
                    assert got == ref_verify_consistency(m2, n2, old, rt, p), (m, n, m2, n2)
    assert verify_inclusion(d[0], 0, 4, inclusion_proof(0, d[:3]), ref_mth(d[:3]))
    assert verify_consistency(6, 8, ref_mth(d[:3]), ref_mth(d[:4]), consistency_proof(3, d[:4]))
    assert accepted_elsewhere > 0


def test_proof_builders_reject_bad_arguments() -> None:
    d = hashes(5)
    for bad in (-1, 5, 6):
        with pytest.raises(ValueError):
            inclusion_proof(bad, d)
    for bad in (-1, 0, 6):
        with pytest.raises(ValueError):
            consistency_proof(bad, d)
    with pytest.raises(ValueError):
        inclusion_proof(0, [])
    with pytest.raises(ValueError):
        root([b"short"])
    with pytest.raises(ValueError):
        MerkleAccumulator().append(b"short")


def test_consistency_edge_cases() -> None:
    d = hashes(5)
    rt = root(d)
    assert consistency_proof(5, d) == []
    assert verify_consistency(5, 5, rt, rt, [])
    assert not verify_consistency(5, 5, rt, flip(rt), [])
    assert not verify_consistency(5, 5, rt, rt, [rt])
    assert verify_consistency(0, 5, EMPTY_ROOT, rt, [])  # the empty tree is a prefix of any tree
    assert not verify_consistency(0, 5, rt, rt, [])
    assert not verify_consistency(0, 5, EMPTY_ROOT, rt, [rt])
    assert not verify_consistency(3, 5, root(d[:3]), rt, [])
    assert not verify_consistency(5, 3, rt, root(d[:3]), consistency_proof(3, d))


def test_accumulator_copy_is_independent() -> None:
    d = hashes(10)
    acc = MerkleAccumulator()
    for h in d[:6]:
        acc.append(h)
    fork = acc.copy()
    for h in d[6:]:
        fork.append(h)
    assert acc.size == 6 and acc.root() == root(d[:6])
    assert fork.size == 10 and fork.root() == root(d)
    assert "size=6" in repr(acc)


def test_larger_tree() -> None:
    n = 5000
    d = hashes(n, seed=7)
    acc = MerkleAccumulator()
    for h in d:
        acc.append(h)
    rt = root(d)
    assert acc.root() == rt
    for i in (0, 1, 2047, 4095, 4096, 4999):
        assert verify_inclusion(d[i], i, n, inclusion_proof(i, d), rt)
    for m in (1, 1024, 4095, 4096, 4097, 4999):
        assert verify_consistency(m, n, root(d[:m]), rt, consistency_proof(m, d))


# --- Properties -------------------------------------------------------------------------------


@settings(derandomize=True, max_examples=40, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32), data=st.data())
def test_inclusion_properties(n: int, seed: int, data: st.DataObject) -> None:
    d = hashes(n, seed)
    rt = root(d)
    for i in range(n):
        assert verify_inclusion(d[i], i, n, inclusion_proof(i, d), rt)

    i = data.draw(st.integers(0, n - 1), label="index")
    p = inclusion_proof(i, d)
    assert p == ref_path(i, d)
    leaf = d[i]
    pos = data.draw(st.integers(0, 31), label="byte")
    for j in range(len(p)):
        tampered = [*p[:j], flip(p[j], pos), *p[j + 1 :]]
        assert not verify_inclusion(leaf, i, n, tampered, rt)
    assert not verify_inclusion(flip(leaf, pos), i, n, p, rt)
    assert not verify_inclusion(leaf, i, n, p, flip(rt, pos))
    if n > 1:
        other = data.draw(st.integers(0, n - 1).filter(lambda x: x != i), label="other index")
        assert not verify_inclusion(leaf, other, n, p, rt)
        assert not verify_inclusion(d[other], i, n, p, rt)
        assert not verify_inclusion(leaf, i, n, p[:-1], rt)
        assert not verify_inclusion(leaf, i, n, [*p, p[-1]], rt)
    for n2 in {i, n - 1, n + 1, 2 * n, n + data.draw(st.integers(1, 1000), label="size delta")}:
        if n2 != n:
            assert verify_inclusion(leaf, i, n2, p, rt) == ref_verify_inclusion(leaf, i, n2, p, rt)
    assert not verify_inclusion(leaf, i, i, p, rt)  # index == size


@settings(derandomize=True, max_examples=40, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32), data=st.data())
def test_consistency_properties(n: int, seed: int, data: st.DataObject) -> None:
    d = hashes(n, seed)
    acc = MerkleAccumulator()
    roots = [EMPTY_ROOT]
    for h in d:
        acc.append(h)
        roots.append(acc.root())
    rt = roots[n]
    for m in range(1, n + 1):
        assert verify_consistency(m, n, roots[m], rt, consistency_proof(m, d)), m

    m = data.draw(st.integers(1, n), label="old size")
    p = consistency_proof(m, d)
    assert p == ref_proof(m, d)
    old = roots[m]
    pos = data.draw(st.integers(0, 31), label="byte")
    for j in range(len(p)):
        tampered = [*p[:j], flip(p[j], pos), *p[j + 1 :]]
        assert not verify_consistency(m, n, old, rt, tampered)
    assert not verify_consistency(m, n, flip(old, pos), rt, p)
    assert not verify_consistency(m, n, old, flip(rt, pos), p)
    if p:
        assert not verify_consistency(m, n, old, rt, p[:-1])
        assert not verify_consistency(m, n, old, rt, p[1:])
        assert not verify_consistency(m, n, old, rt, [*p, p[-1]])
    if m < n:
        assert not verify_consistency(m, n, old, rt, [])
        assert not verify_consistency(m, n, roots[m + 1], rt, p)  # a different old tree
    for m2, n2 in {(m - 1, n), (m + 1, n), (m, n + 1), (m, n - 1), (n, m), (m, 2 * n)}:
        if (m2, n2) != (m, n):
            got = verify_consistency(m2, n2, old, rt, p)
            assert got == ref_verify_consistency(m2, n2, old, rt, p), (m, n, m2, n2)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(leaves=st.lists(st.binary(max_size=40), max_size=300))
def test_accumulator_matches_root_at_every_size(leaves: list[bytes]) -> None:
    d = [leaf_hash(x) for x in leaves]
    acc = MerkleAccumulator()
    assert acc.root() == EMPTY_ROOT
    for k, h in enumerate(d, start=1):
        acc.append(h)
        assert acc.size == k
        assert acc.root() == root(d[:k])
    assert acc.root() == ref_mth(d)


_garbage = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.binary(max_size=70),
    st.text(max_size=5),
    st.floats(allow_nan=True),
    st.lists(st.one_of(st.binary(max_size=40), st.integers(), st.none()), max_size=6),
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(a=_garbage, b=_garbage, c=_garbage, e=_garbage, f=_garbage)
def test_verifiers_never_raise_on_garbage(a: object, b: object, c: object, e: object, f: object) -> None:
    assert verify_inclusion(a, b, c, e, f) in (True, False)  # type: ignore[arg-type]
    assert verify_consistency(a, b, c, e, f) in (True, False)  # type: ignore[arg-type]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    index=st.integers(-(2**66), 2**66),
    size=st.integers(-(2**66), 2**66),
    proof=st.lists(st.binary(min_size=0, max_size=40), max_size=70),
    h=st.binary(min_size=0, max_size=40),
    r=st.binary(min_size=0, max_size=40),
)
def test_verifiers_never_raise_on_wrong_numbers(
    index: int, size: int, proof: list[bytes], h: bytes, r: bytes
) -> None:
    assert verify_inclusion(h, index, size, proof, r) is False or len(h) == len(r) == 32
    assert verify_consistency(index, size, h, r, proof) in (True, False)
    good = leaf_hash(b"x")
    assert verify_inclusion(good, index, size, [good] * (len(proof) % 5), good) in (True, False)
    assert verify_consistency(index, size, good, good, [good] * (len(proof) % 5)) in (True, False)


def test_extension_proof_equals_the_proof_from_every_leaf() -> None:
    """The proof built from the old tree's frontier and the new leaves only is RFC 9162's PROOF."""
    from coffre.domain.merkle import MerkleAccumulator, consistency_proof, extension_proof, leaf_hash

    leaves = [leaf_hash(bytes([i % 256, i // 256])) for i in range(70)]
    for m in range(1, 40):
        old = MerkleAccumulator()
        for leaf in leaves[:m]:
            old.append(leaf)
        for n in range(m, 70):
            assert extension_proof(old, leaves[m:n]) == consistency_proof(m, leaves[:n]), (m, n)
