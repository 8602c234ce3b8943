"""Where the evidence about a checkpoint sits in the archive: the RFC 3161 time-stamp tokens
and the witnesses' cosignatures, each in its own file beside the checkpoint it is about
(docs/archive-format.md, "Evidence beside a checkpoint").

Like lots and checkpoints, every such file is written once, create-only, and never replaced:
the archive itself is the list of what is still to fetch (a checkpoint without a token from a
configured TSA is found again after a restart).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .limits import ID_COFFRE_PATTERN

NAME_PATTERN = r"[a-z0-9](?:[a-z0-9-]|\.(?=[a-z0-9-])){0,62}"
NAME_RE = re.compile(NAME_PATTERN)
"""A TSA's or a witness's name as it appears in file names: lower-case letters, digits, '-'
and '.', at most 63, starting with a letter or digit, no '..' and no final '.' (a storage key never
holds '..')."""

EvidenceKind = Literal["tsa", "witness"]
SUFFIXES: dict[EvidenceKind, str] = {"tsa": "tsr", "witness": "cosig"}

_EVIDENCE_NAME = re.compile(
    rf"(?P<oper>[0-9]{{4}})-(?P<coffre>{ID_COFFRE_PATTERN})-(?P<number>[0-9]{{10}})"
    rf"\.(?:tsa-(?P<tsa>{NAME_PATTERN})\.tsr|witness-(?P<witness>{NAME_PATTERN})\.cosig)"
)


@dataclass(frozen=True, slots=True)
class EvidenceName:
    id_oper: str
    id_coffre: int
    lot_number: int
    kind: EvidenceKind
    name: str


def check_name(name: str, what: str = "name") -> str:
    """``name`` when it may name a TSA or a witness in the archive; ValueError otherwise."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"{what} {name!r} is not [a-z0-9][a-z0-9.-]{{0,62}} without '..' or a final '.'")
    return name


def evidence_key(id_oper: str, id_coffre: int, number: int, kind: EvidenceKind, name: str) -> str:
    check_name(name)
    label = "tsa" if kind == "tsa" else "witness"
    return (
        f"{id_oper}/{id_coffre}/checkpoints/{id_oper}-{id_coffre}-{number:010d}"
        f".{label}-{name}.{SUFFIXES[kind]}"
    )


def timestamp_key(id_oper: str, id_coffre: int, number: int, name: str) -> str:
    """``<IDOper>/<IDCoffre>/checkpoints/<IDOper>-<IDCoffre>-<lot>.tsa-<name>.tsr``: the DER
    TimeStampToken TSA ``name`` gave over the checkpoint file's SHA-256."""
    return evidence_key(id_oper, id_coffre, number, "tsa", name)


def cosignature_key(id_oper: str, id_coffre: int, number: int, name: str) -> str:
    """``<IDOper>/<IDCoffre>/checkpoints/<IDOper>-<IDCoffre>-<lot>.witness-<name>.cosig``: the
    checkpoint as a signed note, cosigned by witness ``name``."""
    return evidence_key(id_oper, id_coffre, number, "witness", name)


def parse_evidence_name(path: str) -> EvidenceName | None:
    """What an evidence file's name says (its folder is not checked), or None."""
    found = _EVIDENCE_NAME.fullmatch(path.rsplit("/", 1)[-1])
    if found is None:
        return None
    kind: EvidenceKind = "tsa" if found["tsa"] is not None else "witness"
    return EvidenceName(
        found["oper"], int(found["coffre"]), int(found["number"]), kind, found["tsa"] or found["witness"]
    )
