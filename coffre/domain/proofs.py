"""RFC 9162 proofs over a coffre's archive, as JSON documents anyone can check.

An **inclusion proof** shows that an event is in a lot (against the lot header's
``RacineMerkle``) and in the coffre's history (against the tree a checkpoint signs:
``RacineArbreCoffre`` of the lot, ``RacineArbre`` of its checkpoint). A **consistency proof**
shows that the coffre's tree at one checkpoint is a prefix of the tree at a later one: nothing
recorded before was changed or removed. The roots come from signed documents; a proof only
needs them and the event's bytes. Format: docs/archive-format.md, "Proofs".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .lot import event_leaf
from .merkle import consistency_proof, inclusion_proof, verify_consistency, verify_inclusion
from .merkle import root as merkle_root


@dataclass(frozen=True, slots=True)
class InclusionProof:
    id_oper: str
    id_coffre: int
    id_evt: int
    lot: int
    lot_index: int
    """0-based position of the event in its lot."""
    lot_size: int
    lot_path: list[str]
    lot_root: str
    """The lot header's RacineMerkle."""
    tree_size: int
    """The coffre's tree the proof is against: TailleArbreCoffre of a lot, TailleArbre of a checkpoint."""
    tree_path: list[str]
    tree_root: str
    leaf_hash: str

    def to_dict(self) -> dict[str, object]:
        return {"type": "inclusion", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> InclusionProof:
        fields = {k: v for k, v in data.items() if k != "type"}
        return cls(**fields)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    id_oper: str
    id_coffre: int
    old_size: int
    old_root: str
    new_size: int
    new_root: str
    path: list[str]

    def to_dict(self) -> dict[str, object]:
        return {"type": "consistency", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ConsistencyProof:
        fields = {k: v for k, v in data.items() if k != "type"}
        return cls(**fields)  # type: ignore[arg-type]


def prove_inclusion(
    id_oper: str,
    id_coffre: int,
    id_evt: int,
    lot: int,
    lot_first_id_evt: int,
    lot_leaves: Sequence[bytes],
    coffre_leaves: Sequence[bytes],
) -> InclusionProof:
    """The proof for IDEvt ``id_evt`` of lot ``lot`` (whose leaves start at ``lot_first_id_evt``),
    against that lot's root and the coffre's tree over ``coffre_leaves`` (IDEvt 1..len)."""
    index = id_evt - lot_first_id_evt
    if not 0 <= index < len(lot_leaves) or id_evt > len(coffre_leaves):
        raise ValueError(f"IDEvt {id_evt} is not in lot {lot}")
    return InclusionProof(
        id_oper,
        id_coffre,
        id_evt,
        lot,
        index,
        len(lot_leaves),
        [h.hex() for h in inclusion_proof(index, lot_leaves)],
        merkle_root(lot_leaves).hex(),
        len(coffre_leaves),
        [h.hex() for h in inclusion_proof(id_evt - 1, coffre_leaves)],
        merkle_root(coffre_leaves).hex(),
        lot_leaves[index].hex(),
    )


def prove_consistency(
    id_oper: str, id_coffre: int, old_size: int, coffre_leaves: Sequence[bytes]
) -> ConsistencyProof:
    """That the coffre's tree at ``old_size`` is a prefix of its tree over ``coffre_leaves``."""
    if not 0 < old_size <= len(coffre_leaves):
        raise ValueError(f"old size {old_size} is not within 1..{len(coffre_leaves)}")
    return ConsistencyProof(
        id_oper,
        id_coffre,
        old_size,
        merkle_root(coffre_leaves[:old_size]).hex(),
        len(coffre_leaves),
        merkle_root(coffre_leaves).hex(),
        [h.hex() for h in consistency_proof(old_size, coffre_leaves)],
    )


def check_inclusion(proof: InclusionProof, event: bytes | None = None) -> list[str]:
    """What does not hold in ``proof`` (empty when it holds). With ``event`` (its canonical
    bytes), also that the proof is about that event. The caller compares ``lot_root`` and
    ``tree_root`` with the signed lot or checkpoint it trusts."""
    problems = []
    try:
        leaf = bytes.fromhex(proof.leaf_hash)
        lot_path = [bytes.fromhex(h) for h in proof.lot_path]
        tree_path = [bytes.fromhex(h) for h in proof.tree_path]
        lot_root, tree_root = bytes.fromhex(proof.lot_root), bytes.fromhex(proof.tree_root)
    except (ValueError, TypeError):
        return ["a hash is not hexadecimal"]
    if event is not None and event_leaf(event) != leaf:
        problems.append("the event's leaf hash is not the proof's")
    if not verify_inclusion(leaf, proof.lot_index, proof.lot_size, lot_path, lot_root):
        problems.append(f"the event is not at position {proof.lot_index} of the lot's tree")
    if not verify_inclusion(leaf, proof.id_evt - 1, proof.tree_size, tree_path, tree_root):
        problems.append(
            f"the event is not IDEvt {proof.id_evt} of the coffre's tree of size {proof.tree_size}"
        )
    return problems


def check_consistency(proof: ConsistencyProof) -> list[str]:
    try:
        path = [bytes.fromhex(h) for h in proof.path]
        old_root, new_root = bytes.fromhex(proof.old_root), bytes.fromhex(proof.new_root)
    except (ValueError, TypeError):
        return ["a hash is not hexadecimal"]
    if not verify_consistency(proof.old_size, proof.new_size, old_root, new_root, path):
        return [f"the tree of size {proof.old_size} is not a prefix of the tree of size {proof.new_size}"]
    return []


def check_proof(data: object, signed_roots: dict[int, bytes] | None = None) -> tuple[str, list[str]]:
    """Check a proof document as the API or ``coffre proof`` writes it: its kind and what does
    not hold (empty when it holds). ``signed_roots`` maps tree sizes to the roots signed
    checkpoints state: every root of the proof at one of those sizes must be the signed one."""
    if not isinstance(data, dict) or data.get("type") not in ("inclusion", "consistency"):
        return "unknown", ["not an inclusion or consistency proof (its 'type')"]
    kind = str(data["type"])
    try:
        proof: InclusionProof | ConsistencyProof = (
            InclusionProof.from_dict(data) if kind == "inclusion" else ConsistencyProof.from_dict(data)
        )
    except TypeError as exc:
        return kind, [f"not a {kind} proof: {exc}"]
    if isinstance(proof, InclusionProof):
        problems = check_inclusion(proof)
        roots = [(proof.tree_size, proof.tree_root)]
    else:
        problems = check_consistency(proof)
        roots = [(proof.old_size, proof.old_root), (proof.new_size, proof.new_root)]
    if signed_roots:
        compared = [(size, root, signed_roots[size]) for size, root in roots if size in signed_roots]
        if not compared:
            sizes = " or ".join(str(size) for size, _ in roots)
            problems.append(f"no checkpoint given is of the proof's tree size {sizes}")
        for size, root, signed in compared:
            if signed.hex() != root:
                problems.append(f"the root of the tree of size {size} is not the one its checkpoint signed")
    return kind, problems
