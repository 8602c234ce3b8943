"""``coffre verify``: an archive folder, checked offline, coffre by coffre (see coffre.domain.verify)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from .adapters.storage import TMP_PREFIX
from .domain.catalogue import EVENT_TYPES
from .domain.lot import LotFormatError, check_document_size, parse_document, parse_lot_name, read_checkpoint
from .domain.proofs import prove_consistency, prove_inclusion
from .domain.schema import SchemaSet
from .domain.signing import TrustStore
from .domain.verify import CoffreReport, SchemaCheck, Source, verify_coffre


@dataclass
class ArchiveReport:
    coffres: list[CoffreReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Failures outside any coffre (a file named like no lot or checkpoint, an unreadable
    ``--checkpoint``)."""
    ignored: list[str] = field(default_factory=list)
    """Files that are not part of the archive and were not read (not failures): temporary files
    an interrupted write left, files with another extension."""

    @property
    def ok(self) -> bool:
        return bool(self.coffres) and not self.problems and all(not c.failures for c in self.coffres)

    def lines(self) -> list[str]:
        out = list(self.problems)
        for coffre in self.coffres:
            out += [str(failure) for failure in coffre.failures]
        out += self.ignored
        for coffre in self.coffres:
            verdict = "OK" if not coffre.failures else f"{len(coffre.failures)} failure(s)"
            out.append(
                f"coffre {coffre.id_oper}/{coffre.id_coffre}: {coffre.lots} lot(s), {coffre.events} event(s), "
                f"{coffre.checkpoints} checkpoint(s): {verdict}"
            )
        if not self.coffres and not self.problems:
            out.append("no lot found")
        return out


def schema_check(xsd_dir: Path) -> SchemaCheck:
    schemas = SchemaSet(xsd_dir)

    def check(canonical: bytes) -> list[str]:
        element = etree.fromstring(canonical)
        model = EVENT_TYPES.get(element.tag)
        if model is None:
            return [f"{element.tag} is not an event of the schema set"]
        return schemas.errors(model.family, element)

    return check


def verify_archive(
    path: Path,
    certificates: Sequence[Path],
    *,
    older_checkpoint: Path | None = None,
    xsd_dir: Path | None = None,
) -> ArchiveReport:
    """Every coffre whose lots are under ``path`` (the archive's root, or any folder inside it).

    Files are read one at a time as the check reaches them. A ``.tmp-*`` file (what a crash
    while sealing leaves, see :mod:`coffre.adapters.storage`) or a file that is not ``.xml`` is
    not part of the archive: it is listed as ignored, not read, and is no failure. A
    ``--checkpoint`` of a coffre the archive does not hold is checked against an empty coffre:
    a ``truncation`` failure when its signature holds."""
    report = ArchiveReport()
    trust = TrustStore.from_pem_files(list(certificates))
    lots: dict[tuple[str, int], list[tuple[str, Source]]] = {}
    checkpoints: dict[tuple[str, int], list[tuple[str, Source]]] = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path).as_posix()
        if any(part.startswith(TMP_PREFIX) for part in file.relative_to(path).parts):
            report.ignored.append(f"{relative}: ignored: a temporary file an interrupted write left")
            continue
        if file.suffix != ".xml":
            report.ignored.append(f"{relative}: ignored: not a lot or checkpoint (.xml)")
            continue
        parsed = parse_lot_name(file.name)
        if parsed is None:
            report.problems.append(f"{relative}: location: not a lot or checkpoint file name")
            continue
        into = checkpoints if file.parent.name == "checkpoints" else lots
        into.setdefault((parsed[0], parsed[1]), []).append((relative, _reader(file)))
    older: dict[tuple[str, int], tuple[str, bytes]] = {}
    if older_checkpoint is not None:
        try:
            document = _reader(older_checkpoint)()
            checkpoint = read_checkpoint(parse_document(document))  # its signature is checked with its coffre
        except LotFormatError as exc:
            report.problems.append(f"{older_checkpoint}: format: {exc}")
        else:
            older[(checkpoint.id_oper, checkpoint.id_coffre)] = (str(older_checkpoint), document)
    schema = schema_check(xsd_dir) if xsd_dir is not None else None
    for key in sorted(lots.keys() | checkpoints.keys() | older.keys()):
        report.coffres.append(
            verify_coffre(
                key[0],
                key[1],
                lots.get(key, []),
                checkpoints.get(key, []),
                trust,
                older_checkpoint=older.get(key),
                schema=schema,
            )
        )
    return report


def _reader(file: Path) -> Callable[[], bytes]:
    """Reads ``file`` when called, refusing (``format``) one larger than any lot may be."""

    def read() -> bytes:
        check_document_size(file.stat().st_size)
        return file.read_bytes()

    return read


def archive_proof(
    path: Path,
    certificates: Sequence[Path],
    id_oper: str,
    id_coffre: int,
    *,
    id_evt: int | None = None,
    since_size: int | None = None,
) -> dict[str, object]:
    """An inclusion proof for ``id_evt``, or a consistency proof from the tree of ``since_size``
    events to the archive's whole tree, computed from an archive that verifies."""
    report = verify_archive(path, certificates)
    coffre = next((c for c in report.coffres if (c.id_oper, c.id_coffre) == (id_oper, id_coffre)), None)
    if coffre is None:
        raise ValueError(f"no lot of coffre {id_oper}/{id_coffre} under {path}")
    if not report.ok:
        raise ValueError("the archive does not verify: " + "; ".join(report.lines()[:5]))
    if id_evt is not None:
        for number, first, last in coffre.spans:
            if first <= id_evt <= last:
                return prove_inclusion(
                    id_oper, id_coffre, id_evt, number, first, coffre.leaves[first - 1 : last], coffre.leaves
                ).to_dict()
        raise ValueError(f"IDEvt {id_evt} is not in the archive of coffre {id_oper}/{id_coffre}")
    if since_size is None:
        raise ValueError("an IDEvt or an older tree size is needed")
    return prove_consistency(id_oper, id_coffre, since_size, coffre.leaves).to_dict()
