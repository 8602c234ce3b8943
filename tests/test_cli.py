"""`coffre normalize` and friends, run as a person would (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from events import POINSCRIT, pojeu


def coffre(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffre.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_normalize_prints_canonical_bytes_and_exits_0(tmp_path):
    (tmp_path / "a.xml").write_bytes(POINSCRIT)
    result = coffre("normalize", str(tmp_path / "a.xml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "<POINSCRIT><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><DateEvt>260301090000</DateEvt>"
    )
    assert "1 accepted, 0 rejected" in result.stderr


def test_a_file_with_several_events_is_split_and_a_rejection_fails_the_run(tmp_path):
    bad = POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099")
    (tmp_path / "many.xml").write_bytes(
        b'<?xml version="1.0" encoding="UTF-8"?>\n' + POINSCRIT + b"\n" + pojeu() + b"\n" + bad
    )
    result = coffre("normalize", str(tmp_path / "many.xml"))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("<POINSCRIT>") and lines[1].startswith("<POJEU>")
    assert (
        lines[2]
        == f"{tmp_path / 'many.xml'}#3: REJECTED INVALID_OPERATOR_ID /POINSCRIT/IDOper: operator id (4 digits) '099' does not match [0-9]{{4}}"
    )
    assert "2 accepted, 1 rejected" in result.stderr


def test_json_output_and_folder_input_with_assigned_ids(tmp_path):
    (tmp_path / "1.xml").write_bytes(POINSCRIT)
    (tmp_path / "2.xml").write_bytes(pojeu())
    result = coffre("normalize", "--format", "json", "--id-evt-start", "100", str(tmp_path))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(next(iter(e)), next(iter(e.values()))["IDEvt"]) for e in events] == [
        ("POINSCRIT", 100),
        ("POJEU", 101),
    ]


def test_rejections_as_json(tmp_path):
    (tmp_path / "x.xml").write_bytes(b"<NOPE/>")
    result = coffre("normalize", "--format", "json", str(tmp_path / "x.xml"))
    assert result.returncode == 1
    record = json.loads(result.stdout)
    assert record["status"] == "rejected" and record["problems"][0]["code"] == "UNKNOWN_EVENT"


def test_catalogue_lists_poker():
    result = coffre("catalogue")
    assert result.returncode == 0
    assert "PO: POINSCRIT, POACHAT, POGAIN, POBILAN, POANNUL, POJEU" in result.stdout
