"""Offline verification of a coffre's archive: what ``coffre verify`` runs, on bytes only.

Every check of docs/archive-format.md ("Verifying an archive"), each failure named by its
lot, its IDEvt when it concerns one event, and the check that failed. A lot whose signature
does not hold is still read, so that the report also says what in it was changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lxml import etree

from .chain import GENESIS, chain_hash
from .lot import (
    NO_DIGEST,
    Checkpoint,
    Lot,
    LotFormatError,
    digest,
    event_leaf,
    parse_document,
    parse_lot_name,
    parse_time,
    read_checkpoint,
    read_lot,
)
from .merkle import MerkleAccumulator
from .merkle import root as merkle_root
from .signing import SignatureInvalid, TrustStore, verify

SchemaCheck = Callable[[bytes], list[str]]
"""Schema errors of one event's canonical bytes (empty when it validates)."""


@dataclass(frozen=True, slots=True)
class Failure:
    where: str
    check: str
    message: str
    id_evt: int | None = None

    def __str__(self) -> str:
        event = f" IDEvt {self.id_evt}:" if self.id_evt is not None else ""
        return f"{self.where}:{event} {self.check}: {self.message}"


@dataclass
class CoffreReport:
    id_oper: str
    id_coffre: int
    lots: int = 0
    events: int = 0
    checkpoints: int = 0
    failures: list[Failure] = field(default_factory=list)
    leaves: list[bytes] = field(default_factory=list)
    """The coffre's RFC 9162 leaf hashes in IDEvt order, as read (for proofs and older checkpoints)."""
    chain: list[bytes] = field(default_factory=list)
    """The chain hash of each IDEvt, as recomputed."""
    roots: dict[int, bytes] = field(default_factory=dict)
    """The coffre tree's root at the end of each lot read, by tree size."""
    spans: list[tuple[int, int, int]] = field(default_factory=list)
    """(lot number, first IDEvt, last IDEvt) of each lot read, in order."""
    complete: bool = True
    """False once a lot could not be read: the coffre's tree is then unknown past it."""

    def fail(self, where: str, check: str, message: str, id_evt: int | None = None) -> None:
        self.failures.append(Failure(where, check, message, id_evt))


def _open_signed(
    name: str,
    document: bytes,
    trust: TrustStore,
    report: CoffreReport,
    read_at: Callable[[etree._Element], datetime],
) -> etree._Element | None:
    """The document's root: verified when its signature holds, else as read (after reporting why).

    The signing certificate must be valid at the document's own time (a lot's seal time); when
    that cannot be read, at the time of the check. A format error is the caller's to report."""
    try:
        unverified = parse_document(document)
    except LotFormatError as exc:
        report.fail(name, "format", str(exc))
        return None
    try:
        at = read_at(unverified)
    except LotFormatError:
        at = datetime.now(UTC)
    try:
        return verify(document, trust, at)
    except SignatureInvalid as exc:
        report.fail(name, "signature", str(exc))
        return unverified


def _lot_time(root: etree._Element) -> datetime:
    """The seal time alone: the lot is read whole only once its signature holds."""
    return parse_time((root.findtext("Entete/DateScellement") or "").strip(), "DateScellement")


def _checkpoint_time(root: etree._Element) -> datetime:
    return parse_time((root.findtext("Date") or "").strip(), "Date")


def verify_coffre(
    id_oper: str,
    id_coffre: int,
    lots: Iterable[tuple[str, bytes]],
    checkpoints: Iterable[tuple[str, bytes]],
    trust: TrustStore,
    *,
    older_checkpoint: tuple[str, bytes] | None = None,
    schema: SchemaCheck | None = None,
) -> CoffreReport:
    """Verify one coffre from its lot files and checkpoint files, given as (path, bytes).

    Paths are relative to the archive's root (``0099/1/2026/11/22/0099-1-0000000001.xml``) or
    at least end with ``YYYY/MM/DD/<file>``; they locate failures and are checked against the
    headers (a lot moved to another coffre, another number or another day is caught).
    """
    report = CoffreReport(id_oper, id_coffre)
    numbered: list[tuple[int, str, bytes]] = []
    for path, document in lots:
        parsed = parse_lot_name(path)
        if parsed is None:
            report.fail(path, "location", "not a lot file name (<IDOper>-<IDCoffre>-<10 digits>.xml)")
            continue
        numbered.append((parsed[2], path, document))
    numbered.sort()

    tree = MerkleAccumulator()
    previous_digest = NO_DIGEST
    previous_chain = GENESIS
    expected_number = 1
    expected_id = 1
    last_lot: tuple[str, Lot, bytes] | None = None
    rebase = False
    for number, path, document in numbered:
        report.lots += 1
        root = _open_signed(path, document, trust, report, _lot_time)
        try:
            if root is None:
                raise LotFormatError("unreadable")
            lot = read_lot(root)
        except LotFormatError as exc:
            if root is not None:
                report.fail(path, "format", str(exc))
            # What follows cannot be linked to this lot: the next lot is checked on its own header,
            # and the coffre's tree (hence the checkpoints) can no longer be recomputed.
            expected_number, rebase = number + 1, True
            report.complete = False
            continue
        h = lot.header
        if rebase:
            previous_digest, previous_chain, expected_id = (
                h.previous_lot_digest,
                h.previous_chain_hash,
                h.first_id_evt,
            )
            rebase = False
        _check_location(
            report, path, h.id_oper, h.id_coffre, h.number, number, h.sealed_at, id_oper, id_coffre
        )
        if number != expected_number:
            missing = "" if number < expected_number else f"; lot(s) {expected_number}..{number - 1} missing"
            report.fail(
                path, "lot sequence", f"lot {number} where lot {expected_number} was expected{missing}"
            )
        expected_number = number + 1
        if h.previous_lot_digest != previous_digest:
            report.fail(path, "lot link", "EmpreinteLotPrecedent is not the SHA-256 of the previous lot file")
        if h.previous_chain_hash != previous_chain:
            report.fail(
                path, "chain link", "HashChainePrecedent is not the chain hash the previous lot ends with"
            )
        if h.first_id_evt != expected_id:
            report.fail(
                path, "IDEvt continuity", f"the lot starts at IDEvt {h.first_id_evt}, expected {expected_id}"
            )
        ids = [e.id_evt for e in lot.events]
        declared = range(h.first_id_evt, h.last_id_evt + 1)
        if ids != list(declared):
            missing = sorted(set(declared) - set(ids))
            if missing:
                report.fail(
                    path, "IDEvt continuity", f"missing from the lot ({len(missing)} missing)", missing[0]
                )
            else:
                at = next(
                    (found for want, found in zip(declared, ids, strict=False) if want != found), ids[-1]
                )
                report.fail(
                    path,
                    "IDEvt continuity",
                    f"events {_span(ids)} where {_span(list(declared))} were declared",
                    at,
                )
        chain = h.previous_chain_hash
        leaves = []
        for event in lot.events:
            chain = chain_hash(chain, event.canonical)
            if chain != event.chain_hash:
                report.fail(
                    path, "chain", "the chain hash does not recompute from the event's bytes", event.id_evt
                )
                chain = event.chain_hash  # report each broken link once, not every event after it
            leaf = event_leaf(event.canonical)
            leaves.append(leaf)
            tree.append(leaf)
            report.chain.append(chain)
            if schema is not None:
                for error in schema(event.canonical)[:3]:
                    report.fail(path, "schema", error, event.id_evt)
        report.leaves.extend(leaves)
        report.spans.append((h.number, h.first_id_evt, h.last_id_evt))
        report.events += len(lot.events)
        if lot.events and h.last_chain_hash != lot.events[-1].chain_hash:
            report.fail(path, "chain", "HashChaineDernier is not the last event's chain hash", h.last_id_evt)
        if merkle_root(leaves) != h.merkle_root:
            report.fail(path, "merkle root", "RacineMerkle does not recompute from the lot's events")
        report.roots[tree.size] = tree.root()
        if report.complete and (h.tree_size != tree.size or h.tree_root != report.roots[tree.size]):
            report.fail(
                path,
                "coffre tree",
                f"RacineArbreCoffre/TailleArbreCoffre do not recompute (size {tree.size} read)",
            )
        previous_digest, previous_chain = digest(document), h.last_chain_hash
        expected_id = max(expected_id, h.last_id_evt) + 1
        last_lot = (path, lot, document)

    _check_checkpoints(report, checkpoints, trust, last_lot)
    if older_checkpoint is not None:
        _checked_checkpoint(report, *older_checkpoint, trust)
    return report


def _check_location(
    report: CoffreReport,
    path: str,
    oper: str,
    coffre: int,
    number: int,
    file_number: int,
    sealed_at: datetime,
    id_oper: str,
    id_coffre: int,
) -> None:
    parts = path.replace("\\", "/").split("/")
    if (oper, coffre) != (id_oper, id_coffre):
        report.fail(
            path, "location", f"a lot of coffre {oper}/{coffre} among the lots of {id_oper}/{id_coffre}"
        )
    if number != file_number:
        report.fail(path, "location", f"the file is named lot {file_number}, its header says lot {number}")
    if len(parts) >= 4 and parts[-4:-1] != [f"{sealed_at:%Y}", f"{sealed_at:%m}", f"{sealed_at:%d}"]:
        report.fail(
            path, "location", f"sealed on {sealed_at:%Y-%m-%d} but filed under {'/'.join(parts[-4:-1])}"
        )
    if len(parts) >= 6 and parts[-6:-4] != [oper, str(coffre)]:
        report.fail(
            path, "location", f"filed under {'/'.join(parts[-6:-4])}, its header says {oper}/{coffre}"
        )


def _check_checkpoints(
    report: CoffreReport,
    checkpoints: Iterable[tuple[str, bytes]],
    trust: TrustStore,
    last_lot: tuple[str, Lot, bytes] | None,
) -> None:
    newest: Checkpoint | None = None
    for path, document in sorted(checkpoints):
        checkpoint = _checked_checkpoint(report, path, document, trust)
        if checkpoint is None:
            continue
        if newest is None or checkpoint.tree_size > newest.tree_size:
            newest = checkpoint
    if last_lot is None:
        return
    path, lot, document = last_lot
    if newest is None or newest.lot_number < lot.header.number:
        report.fail(path, "checkpoint", f"no checkpoint covers lot {lot.header.number}, the newest")
    elif newest.lot_number == lot.header.number and newest.lot_digest != digest(document):
        report.fail(path, "checkpoint", "the newest checkpoint names another file for this lot")


def _check_against_archive(report: CoffreReport, path: str, checkpoint: Checkpoint) -> None:
    """A checkpoint must describe a prefix of the archive as read: same size, root and chain hash."""
    if (checkpoint.id_oper, checkpoint.id_coffre) != (report.id_oper, report.id_coffre):
        report.fail(path, "checkpoint", f"a checkpoint of coffre {checkpoint.id_oper}/{checkpoint.id_coffre}")
        return
    size = checkpoint.tree_size
    if not report.complete:
        return  # already reported: a lot that cannot be read
    if size > len(report.leaves):
        report.fail(
            path,
            "truncation",
            f"the checkpoint holds {size} events, the archive {len(report.leaves)}: events were removed",
        )
        return
    if size == 0:
        return
    root = report.roots.get(size) or merkle_root(report.leaves[:size])  # checkpoints fall on lot ends
    if root != checkpoint.tree_root:
        report.fail(
            path, "rewriting", f"the archive's first {size} events are not those the checkpoint signed"
        )
    elif report.chain[size - 1] != checkpoint.chain_hash or checkpoint.last_id_evt != size:
        report.fail(
            path, "rewriting", f"the chain hash of IDEvt {size} is not the one the checkpoint signed", size
        )


def _checked_checkpoint(
    report: CoffreReport, path: str, document: bytes, trust: TrustStore
) -> Checkpoint | None:
    """A checkpoint (in the archive, or one kept from before), its signature and its agreement
    with the archive checked; None when it cannot be read."""
    report.checkpoints += 1
    root = _open_signed(path, document, trust, report, _checkpoint_time)
    if root is None:
        return None
    try:
        checkpoint = read_checkpoint(root)
    except LotFormatError as exc:
        report.fail(path, "format", str(exc))
        return None
    _check_against_archive(report, path, checkpoint)
    return checkpoint


def _span(ids: list[int]) -> str:
    return f"{ids[0]}..{ids[-1]} ({len(ids)})" if ids else "none"


__all__ = ["CoffreReport", "Failure", "SchemaCheck", "verify_coffre"]
