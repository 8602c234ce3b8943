"""``coffre signals`` as a regulator runs it: on a signed archive (verified first, refused when it
does not verify), on event files, going on from a state file, with its usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from signals_handmade import T0, account
from test_signals_known import dumping_history

from coffre.commands.signals import Scope, signals_paths
from coffre.domain.signals.state import SignalState

from audit_hands import normalized, seal_archive


def raw_events() -> list[bytes]:
    documents = dumping_history()
    documents += [account(35, T0, "A", "1" * 40, "s1"), account(36, T0, "B", "1" * 40, "s2")]
    return [json.dumps(d).encode() for d in documents]


def coffre(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffre.cli", "signals", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return seal_archive(tmp_path_factory.mktemp("signals"), {1: normalized(raw_events())}, lot_events=8)


def test_an_archive_gives_ranked_alerts_with_their_evidence(archive: tuple[Path, Path]) -> None:
    root, cert = archive
    done = coffre(str(root), "--cert", str(cert), "--json")
    assert done.returncode == 1, done.stderr  # alerts: exit 1, as coffre audit with findings
    result = json.loads(done.stdout)
    assert result["events"] == 36 and result["hands"] == 34
    assert result["verifications"][0]["ok"] is True
    crossed = {
        (tuple(a["players"]), s["signal"]) for a in result["alerts"] for s in a["signals"] if s["crossed"]
    }
    assert crossed == {(("0099/D", "0099/R"), "chip_dumping"), (("0099/A", "0099/B"), "same_hash")}
    dumping = next(a for a in result["alerts"] if a["players"] == ["0099/D", "0099/R"])["signals"][0]
    assert dumping["evidence"][0] == {
        "weight": 2.0,
        "id_oper": "0099",
        "id_coffre": 1,
        "id_evt": 1,
    }  # the heaviest, then the first
    assert "Smed" in dumping["source"]
    text = coffre(str(root), "--cert", str(cert))
    assert "chip_dumping" in text.stdout and "not a finding" in text.stdout
    for jobs in ("1", "2"):  # the lots read by workers: the same output
        assert json.loads(coffre(str(root), "--cert", str(cert), "--json", "--jobs", jobs).stdout) == result


def test_an_archive_that_does_not_verify_is_refused(archive: tuple[Path, Path], tmp_path: Path) -> None:
    root, cert = archive
    copy = tmp_path / "archive"
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
    lot = sorted(p for p in copy.rglob("*.xml") if "checkpoints" not in p.parts)[1]
    lot.write_bytes(lot.read_bytes().replace(b"<IDJoueur>R</IDJoueur>", b"<IDJoueur>Z</IDJoueur>", 1))
    done = coffre(str(copy), "--cert", str(cert), "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["events"] == 0 and result["alerts"] == []
    assert result["problems"][0]["kind"] == "unverified"
    assert coffre(str(root), "--json").returncode == 2  # an archive needs --cert


def test_a_state_goes_on_from_where_it_stopped(tmp_path: Path) -> None:
    raws = normalized(raw_events())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first_root, cert1 = seal_archive(tmp_path / "a", {1: raws[:17]})
    whole_root, cert2 = seal_archive(tmp_path / "b", {1: raws})
    state_file = tmp_path / "state.json.gz"
    first = coffre(str(first_root), "--cert", str(cert1), "--state", str(state_file), "--json")
    assert json.loads(first.stdout)["fed_by_this_run"] == 17
    again = coffre(str(whole_root), "--cert", str(cert2), "--state", str(state_file), "--json")
    resumed = json.loads(again.stdout)
    assert resumed["fed_by_this_run"] == 19 and resumed["events"] == 36
    fresh = json.loads(coffre(str(whole_root), "--cert", str(cert2), "--json").stdout)
    assert resumed["alerts"] == fresh["alerts"] and resumed["near_misses"] == fresh["near_misses"]
    assert SignalState.load(state_file).cursor == {"0099/1": 36}
    other_scope = coffre(str(whole_root), "--cert", str(cert2), "--state", str(state_file), "--oper", "0100")
    assert other_scope.returncode == 2 and "another scope" in other_scope.stderr


def test_event_files_and_scope(tmp_path: Path) -> None:
    folder = tmp_path / "events"
    folder.mkdir()
    for i, raw in enumerate(raw_events(), start=1):
        (folder / f"{i:03}.json").write_bytes(raw)
    run = signals_paths([str(folder)])
    assert run.state.events == 36 and any(s.players == ("0099/D", "0099/R") for s in run.alerts)
    later = signals_paths([str(folder)], scope=Scope(since=int(T0.timestamp()) + 3600))
    assert later.state.hands == 14 and not any(s.players == ("0099/D", "0099/R") for s in later.alerts)
    assert signals_paths([str(folder)], scope=Scope(opers=("0100",))).state.hands == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "chip_dumping"], "NAME=VALUE"),
        (["--threshold", "nope=1"], "no threshold"),
        (["--since", "yesterday"], "not a date"),
        (["--since", "2026-05-02", "--until", "2026-05-01"], "after --since"),
    ],
)
def test_usage_errors(args: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "e.json").write_bytes(raw_events()[0])
    done = coffre(str(tmp_path / "e.json"), *args)
    assert done.returncode == 2 and message in done.stderr
