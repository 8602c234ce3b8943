"""`coffre up` and `coffre publish` run as a person would: subprocesses, real broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from events import POINSCRIT

STORY = r"(?P<story>annex 1\.4\.3\.[a-f]|(?:cash|mixed|tournament) \d\d): .+"
COFFRE = r"IDOper 0099 IDCoffre (?P<coffre>[1-4]) IDEvt (?P<id>\d+) chain [0-9a-f]{16}…$"
ACQUITTED = re.compile(rf"^{STORY}: (?P<type>\w+) recorded, acquitted: {COFFRE}")
UNACQUITTED = re.compile(
    rf"^{STORY}: (?P<type>POJEU) recorded without acquittal \(synthesis event\): {COFFRE}"
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


def demo_ids(output: str) -> dict[int, list[int]]:
    """IDCoffre -> the IDEvt of each demo line, in the order printed; every demo event printed
    once, with its acquittal or, for a hand, its receipt."""
    lines = [
        m for m in (ACQUITTED.match(line) or UNACQUITTED.match(line) for line in output.splitlines()) if m
    ]
    assert [m["story"] for m in lines] == [
        *(f"annex 1.4.3.{c}" for c in "abcdef"),
        *(f"cash {n:02d}" for n in range(1, 6)),
        *(f"mixed {n:02d}" for n in range(1, 41)),
        *(f"tournament {n:02d}" for n in range(1, 22)),
    ], output
    assert [m["type"] for m in lines[:6]] == ["POINSCRIT", "POACHAT", "POGAIN", "POBILAN", "POANNUL", "POJEU"]
    ids: dict[int, list[int]] = {}
    for m in lines:
        ids.setdefault(int(m["coffre"]), []).append(int(m["id"]))
    return ids


def test_up_demo_once_twice_on_one_data_folder(tmp_path):
    """The README's run command: the packaged demo, nothing else needed. The second run starts a
    new in-memory broker whose offsets begin at 0 again: its events are new inputs (not
    redeliveries), and IDEvt goes on from the data folder's state."""
    env = {"COFFRE_ARJEL_REFERENCE": "/nonexistent", "COFFRE_DET_ANNEX": "/nonexistent"}
    first = coffre("up", "--demo", "--once", "--data", str(tmp_path), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert demo_ids(first.stdout) == {
        1: list(range(1, 7)),
        2: list(range(1, 22)),
        3: list(range(1, 41)),
        4: list(range(1, 6)),
    }
    assert "demo: 72 events shipped with coffre" in first.stdout
    # the auditor flagged what the demo's own audit flags, CG-9's falsified hand among them
    assert "audit: the auditor reported the 4 event(s) the demo expects flagged" in first.stdout, first.stdout
    assert "audit: coffre 0099/4 IDEvt 3 POJEU (chain " in first.stdout
    assert first.stdout.count(": PAYOFF_WRONG seat ") == 2
    # every service, the regulator API and the auditor included, stopped cleanly
    assert (
        "stopped: {'ingest': 0, 'vault': 0, 'acquittal': 0, 'regulator': 0, 'auditor': 0, 'witness': 0}"
        in first.stdout
    )
    # the vault sealed what it recorded before it stopped, and the archive verifies
    assert f"archive: {tmp_path}/archive" in first.stdout
    assert f"certificate: {tmp_path}/keys/signing-cert.pem" in first.stdout
    assert "  coffre 0099/1: 1 lot(s), 6 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in first.stdout, (
        first.stdout
    )
    assert "  coffre 0099/2: 1 lot(s), 21 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in first.stdout, (
        first.stdout
    )
    assert "  coffre 0099/3: 1 lot(s), 40 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in first.stdout, (
        first.stdout
    )
    assert "  coffre 0099/4: 1 lot(s), 5 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in first.stdout, (
        first.stdout
    )
    # the falsified hand is in the sealed archive as declared, and an offline audit of it finds it
    audit = coffre(
        "audit",
        str(tmp_path / "archive"),
        "--cert",
        str(tmp_path / "keys" / "signing-cert.pem"),
        "--json",
        env=env,
    )
    assert audit.returncode == 1, audit.stdout + audit.stderr
    report = json.loads(audit.stdout)
    assert report["events"] == 72 and report["problems"] == [] and report["verified"][0]["ok"]
    flagged = [f for f in report["findings"] if f["code"] == "PAYOFF_WRONG"]
    assert {(f["id_coffre"], f["id_evt"], f["event_type"]) for f in flagged} == {(4, 3, "POJEU")}
    second = coffre("up", "--demo", "--once", "--data", str(tmp_path), env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert demo_ids(second.stdout) == {
        1: list(range(7, 13)),
        2: list(range(22, 43)),
        3: list(range(41, 81)),
        4: list(range(6, 11)),
    }, second.stdout
    assert "  coffre 0099/1: 2 lot(s), 12 event(s), 2 checkpoint(s), 2 cosignature(s): OK" in second.stdout, (
        second.stdout
    )
    assert "  coffre 0099/2: 2 lot(s), 42 event(s), 2 checkpoint(s), 2 cosignature(s): OK" in second.stdout, (
        second.stdout
    )
    # every checkpoint of both runs cosigned by the development witness, which kept its state
    keys = tmp_path / "keys"
    verify = coffre(
        "verify",
        str(tmp_path / "archive"),
        "--cert",
        str(keys / "signing-cert.pem"),
        "--witness-key",
        str(keys / "dev-witness-key.pub.pem"),
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
