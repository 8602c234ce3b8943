"""`coffre up` and `coffre publish` run as a person would: subprocesses, real broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from coffre.domain.annex import default_annex_path

from events import POINSCRIT

ACQUITTED = re.compile(
    r"^annex 1\.4\.3\.([a-e]): (\w+) recorded, acquitted: IDOper 0099 IDCoffre 1 IDEvt (\d+) chain [0-9a-f]{64}$"
)
UNACQUITTED = re.compile(
    r"^annex 1\.4\.3\.f: POJEU recorded without acquittal \(synthesis event\): .* IDEvt (\d+) chain"
)


def coffre(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffre.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def demo_ids(output: str) -> list[int]:
    lines = output.splitlines()
    acquitted = [m for m in map(ACQUITTED.match, lines) if m]
    assert [m.group(2) for m in acquitted] == ["POINSCRIT", "POACHAT", "POGAIN", "POBILAN", "POANNUL"], output
    pojeu = [m for m in map(UNACQUITTED.match, lines) if m]
    assert len(pojeu) == 1, output
    return [int(m.group(3)) for m in acquitted] + [int(pojeu[0].group(1))]


def test_up_demo_once_twice_on_one_data_folder(tmp_path):
    """The README's run command. The second run starts a new in-memory broker whose offsets
    begin at 0 again: its events are new inputs (not redeliveries), and IDEvt goes on from the
    data folder's state."""
    if not default_annex_path().is_file():
        pytest.skip("the annex text is absent")
    first = coffre("up", "--demo", "--once", "--data", str(tmp_path))
    assert first.returncode == 0, first.stdout + first.stderr
    assert demo_ids(first.stdout) == [1, 2, 3, 4, 5, 6]
    assert "stopped: {'ingest': 0, 'vault': 0, 'acquittal': 0}" in first.stdout
    # the vault sealed what it recorded before it stopped, and the archive verifies
    assert f"archive: {tmp_path}/archive" in first.stdout
    assert f"certificate: {tmp_path}/keys/signing-cert.pem" in first.stdout
    assert "  coffre 0099/1: 1 lot(s), 6 event(s), 1 checkpoint(s): OK" in first.stdout, first.stdout
    second = coffre("up", "--demo", "--once", "--data", str(tmp_path))
    assert second.returncode == 0, second.stdout + second.stderr
    assert demo_ids(second.stdout) == [7, 8, 9, 10, 11, 12]
    assert "  coffre 0099/1: 2 lot(s), 12 event(s), 2 checkpoint(s): OK" in second.stdout, second.stdout
    verify = coffre(
        "verify", str(tmp_path / "archive"), "--cert", str(tmp_path / "keys" / "signing-cert.pem")
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_publish_prints_each_outcome_and_fails_on_a_rejection(stack, tmp_path):
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "a-good.xml").write_bytes(POINSCRIT)
    (folder / "b-bad.xml").write_bytes(POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099"))
    (folder / "c-json.json").write_text('{"POINSCRIT": "not an event"}')
    env = {"COFFRE_TOPIC_PREFIX": stack.settings.topic_prefix}
    run = coffre("publish", "--bootstrap", stack.bootstrap, "--timeout", "60", str(folder), env=env)
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert len(lines) == 3, run.stdout
    assert lines[0].startswith(
        f"{folder}/a-good.xml: POINSCRIT recorded, acquitted: IDOper 0099 IDCoffre 7 IDEvt 1 "
    )
    assert lines[1].startswith(f"{folder}/b-bad.xml: rejected: INVALID_OPERATOR_ID ")
    assert lines[2].startswith(f"{folder}/c-json.json: rejected: ")

    good = coffre("publish", "--bootstrap", stack.bootstrap, str(folder / "a-good.xml"), env=env)
    assert good.returncode == 0 and "IDEvt 2 " in good.stdout, good.stdout + good.stderr
