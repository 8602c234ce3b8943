"""Inputs that once jammed the pipeline or cost unbounded work, one per class (issue: nothing jams it).

Each case says what coffre must answer: ``rejected`` with the given reason code, or ``recorded``
for the valid extremes at the edge of coffre's limits. Shared by the domain, ingest, command-line
and pipeline tests, so every layer is tried with the same inputs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from coffre.domain.limits import (
    MAX_DECIMAL_FRACTION_DIGITS,
    MAX_DECIMAL_INTEGER_DIGITS,
    MAX_ID,
    MAX_TEXT_CHARS,
)
from coffre.domain.messages import CORRELATION_ID

from events import POINSCRIT

MIB = 1024 * 1024


def poinscrit_json(**changes: object) -> dict:
    """A valid POINSCRIT as JSON data (IDCoffre 7), with ``changes`` applied to its fields."""
    event = {
        "IDOper": "0099",
        "IDCoffre": 7,
        "DateEvt": "2026-03-01T10:00:00+01:00",
        "IDEvt": 1,
        "IDJoueur": "p-1",
        "HashJoueur": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
        "IPJoueur": "2001:db8::1",
        "IDSession": "s-1",
        "Inscription": "ins-1",
        "Tech": "T-1",
        "Description": "Tournoi du dimanche",
        "Format": "T",
        "SoldeAvant": "100.10",
        "SoldeMouvement": "10.05",
        "SoldeApres": "90.05",
    }
    event.update(changes)
    return {"POINSCRIT": event}


def _json_with_raw_number(field_name: str, literal: str) -> bytes:
    """JSON whose ``field_name`` is the number ``literal`` written as is (json.dumps cannot)."""
    marker = "__RAW__"
    text = json.dumps(poinscrit_json(**{field_name: marker}))
    return text.replace(f'"{marker}"', literal).encode()


def _xml_with(tag: str, text: str) -> bytes:
    start, end = f"<{tag}>".encode(), f"</{tag}>".encode()
    head, rest = POINSCRIT.split(start, 1)
    return head + start + text.encode() + end + rest.split(end, 1)[1]


@dataclass(frozen=True)
class Case:
    name: str
    value: bytes
    answer: str  # "rejected" | "recorded"
    code: str | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def hostile_cases(max_event_bytes: int = MIB) -> list[Case]:
    """One input per class that once stopped the pipeline or cost unbounded work."""
    attributes = " ".join(f'a{i}="1"' for i in range(50_000))
    return [
        Case(
            "json-amount-1e999999",
            _json_with_raw_number("SoldeAvant", "1e999999"),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "json-amount-1E+999999999",
            _json_with_raw_number("SoldeAvant", "1E+999999999"),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "json-amount-1E-999999999",
            _json_with_raw_number("SoldeAvant", "1E-999999999"),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "json-idcoffre-1E+999999999",
            _json_with_raw_number("IDCoffre", "1E+999999999"),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "xml-amount-of-a-million-digits",
            _xml_with("SoldeAvant", "9" * 1_000_000),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "text-just-under-the-input-limit",
            _xml_with("IDSession", "x" * (max_event_bytes - len(POINSCRIT) - 64)),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case("rejected-input-of-900-KB", b"not an event " + b"z" * 900_000, "rejected", "UNSUPPORTED_FORMAT"),
        Case(
            "input-over-the-limit-2-MiB",
            b"<POINSCRIT>" + b"a" * (2 * max_event_bytes) + b"</POINSCRIT>",
            "rejected",
            "DOCUMENT_TOO_LARGE",
        ),
        Case(
            "50000-unknown-attributes",
            POINSCRIT.replace(b"<POINSCRIT>", f"<POINSCRIT {attributes}>".encode(), 1),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "15000-unknown-elements",
            POINSCRIT.replace(b"</POINSCRIT>", b"<X/>" * 15_000 + b"</POINSCRIT>"),
            "rejected",
            "UNEXPECTED_ELEMENT",
        ),
        Case("idcoffre-of-21-digits", _xml_with("IDCoffre", "1" * 21), "rejected", "LIMIT_EXCEEDED"),
        Case(
            "idcoffre-of-26-digits",
            json.dumps(poinscrit_json(IDCoffre=int("9" * 26))).encode(),
            "rejected",
            "LIMIT_EXCEEDED",
        ),
        Case(
            "element-name-of-10-KB",
            POINSCRIT.replace(b"</POINSCRIT>", b"<" + b"N" * 10_000 + b"/></POINSCRIT>"),
            "rejected",
            "UNEXPECTED_ELEMENT",
        ),
        Case(
            "xml-nested-10000-deep",
            b"<POINSCRIT>" + b"<a>" * 10_000 + b"</a>" * 10_000 + b"</POINSCRIT>",
            "rejected",
        ),
        Case(
            "json-nested-100000-deep", b'{"POINSCRIT": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "rejected"
        ),
        Case(
            "correlation-id-of-100-KB",
            POINSCRIT,
            "rejected",
            "LIMIT_EXCEEDED",
            headers=[(CORRELATION_ID, b"c" * 100_000)],
        ),
    ]


def extreme_valid_cases() -> list[Case]:
    """Valid events at the edge of coffre's limits: they must be recorded, not refused."""
    amount = "9" * MAX_DECIMAL_INTEGER_DIGITS + "." + "9" * MAX_DECIMAL_FRACTION_DIGITS
    return [
        Case("idcoffre-of-18-digits", _xml_with("IDCoffre", str(MAX_ID)), "recorded"),
        Case(
            "amount-of-18-and-10-digits",
            json.dumps(poinscrit_json(SoldeAvant=amount, SoldeApres=amount, SoldeMouvement="0")).encode(),
            "recorded",
        ),
        Case(
            "text-of-the-largest-length",
            json.dumps(poinscrit_json(IDSession="s" * MAX_TEXT_CHARS)).encode(),
            "recorded",
        ),
    ]


# ``coffre ARGS`` in a child that reports its own peak resident memory: VmHWM, that of the process
# image since exec (getrusage would count the process it was forked from, pytest or the bench).
_MEASURED = """
import sys
from coffre.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
peak = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
sys.stderr.write(f"peak-kB {peak}\\n")
sys.exit(code)
"""


@dataclass(frozen=True)
class Measured:
    code: int
    seconds: float
    megabytes: float | None  # None when the command died before it could say
    stdout: bytes
    stderr: bytes


def measure_coffre(
    args: list[str], *, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None
) -> Measured:
    """Run ``coffre ARGS`` in ``cwd`` (not the project: ``python -c`` puts the working folder first
    on ``sys.path``); subprocess.TimeoutExpired past ``timeout``."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *args], capture_output=True, timeout=timeout, env=env, cwd=cwd
    )
    peak = [line for line in done.stderr.decode(errors="replace").splitlines() if line.startswith("peak-kB")]
    megabytes = int(peak[-1].split()[1]) / 1024 if peak else None
    return Measured(done.returncode, time.monotonic() - started, megabytes, done.stdout, done.stderr)
