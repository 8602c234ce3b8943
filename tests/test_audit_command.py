"""``coffre audit``: files, folders and archives audited offline; exit codes, text and JSON output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coffre.cli import main

from audit_hands import TOURNAMENT, build_archive, duplicated_card_hand


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def audit_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code, out, _ = audit(capsys, "--json", *args)
    return code, json.loads(out)


@pytest.fixture
def flagged_hand(tmp_path: Path) -> Path:
    path = tmp_path / "hand.xml"
    path.write_bytes(duplicated_card_hand())
    return path


# -- files and folders ----------------------------------------------------------------------------


def test_the_demo_tournament_gives_no_finding_and_exit_0(capsys):
    code, out, _ = audit(capsys, str(TOURNAMENT))
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "21 event(s), 5 hand(s), 0 finding(s), 0 problem(s)"


def test_a_card_dealt_twice_is_a_finding_and_exit_1(capsys, flagged_hand):
    code, out, _ = audit(capsys, str(flagged_hand))
    assert code == 1
    line = next(line for line in out.splitlines() if "CARD_DEALT_TWICE" in line)
    assert line.startswith(f"{flagged_hand}: IDEvt 1360 POJEU CARD_DEALT_TWICE round preflop seat 3: card 32")
    assert "1 hand(s)" in out.splitlines()[-1]


def test_json_output_carries_each_finding_where_it_was_found(capsys, flagged_hand):
    code, report = audit_json(capsys, str(flagged_hand), str(TOURNAMENT))
    assert code == 1
    assert set(report) >= {"findings", "hands", "events", "codes", "problems", "verified"}
    assert (report["events"], report["hands"], report["problems"], report["verified"]) == (22, 6, [], None)
    assert report["codes"].get("CARD_DEALT_TWICE") == 1
    dealt_twice = [f for f in report["findings"] if f["code"] == "CARD_DEALT_TWICE"]
    assert dealt_twice == [
        {
            "source": str(flagged_hand),
            "id_oper": "0099",
            "id_coffre": 1,
            "id_evt": 1360,
            "event_type": "POJEU",
            "code": "CARD_DEALT_TWICE",
            "message": dealt_twice[0]["message"],
            "round": "preflop",
            "seat": 3,
        }
    ]
    assert "32" in dealt_twice[0]["message"]
    assert sum(report["codes"].values()) == len(report["findings"])


def test_a_file_of_several_events_is_split_and_a_rejected_one_is_a_problem(capsys, tmp_path):
    alice, bruno = (TOURNAMENT / name for name in ("02-POINSCRIT-alice.xml", "03-POINSCRIT-bruno.xml"))
    broken = alice.read_bytes().replace(b"<IDJoueur>alice</IDJoueur>", b"")
    several = tmp_path / "several.xml"
    several.write_bytes(alice.read_bytes() + b"\n" + broken + b"\n" + bruno.read_bytes())
    code, report = audit_json(capsys, str(several))
    assert code == 1
    assert report["events"] == 2 and report["findings"] == []
    [problem] = report["problems"]
    assert problem["source"] == f"{several}#2" and problem["kind"] == "rejected"
    assert problem["codes"], problem


def test_files_feed_the_money_trail_in_sorted_path_order(capsys, tmp_path):
    """Alice's deposit, then her registration paid from it: her balances chain in that order only."""
    deposit, registration = TOURNAMENT / "01-CPTEALIM-alice.json", TOURNAMENT / "02-POINSCRIT-alice.xml"
    (tmp_path / "a.json").write_bytes(deposit.read_bytes())
    (tmp_path / "b.xml").write_bytes(registration.read_bytes())
    # named registration first: still read in path order, deposit first
    assert audit(capsys, str(tmp_path / "b.xml"), str(tmp_path / "a.json"))[0] == 0
    (tmp_path / "a.json").rename(tmp_path / "c.json")  # now the registration comes first
    code, report = audit_json(capsys, str(tmp_path / "c.json"), str(tmp_path / "b.xml"))
    # IDEvt 2 then IDEvt 1: out of the coffre's order, the chain from one to the other is no evidence
    # ("not checked, context absent"), where today's main reported BALANCE_CHAIN_BROKEN
    assert code == 0 and report["findings"] == []
    assert report["not_checked"]["BALANCE_CHAIN_BROKEN"] == 2  # IDEvt 2 first: nothing before it; then 1


def test_a_lone_hand_is_not_checked_against_registrations_it_does_not_have(capsys):
    """Issue 20 item 4: a hand audited alone gives no trail finding; the JSON counts what it could
    not check, and so does the text output."""
    hand = str(TOURNAMENT / "09-POJEU-hand-2.xml")
    code, report = audit_json(capsys, hand)
    assert code == 0 and report["findings"] == []
    assert report["not_checked"] == {
        "PARTICIPANT_NOT_REGISTERED": 4,
        "POOL_REUSED": 1,
        "BLINDS_DECREASED": 1,
        "BLIND_DODGED": 1,
        "STARTING_STACK_WRONG": 1,
        "HAND_OUT_OF_ORDER": 1,
    }
    code, out, _ = audit(capsys, hand)
    assert code == 0
    assert "not checked, context absent (events outside the audited set): " in out
    assert "PARTICIPANT_NOT_REGISTERED ×4" in out and "BLIND_DODGED ×1" in out


def test_a_registration_never_settled_is_found_at_the_end_of_the_input(capsys, tmp_path):
    """Annex 1.3.6.c.3: david is out in hand 3 and his POBILAN (13) is gone; the events are
    renumbered so that the coffre has no gap. Only the end of the input can tell."""
    import re

    files = sorted(p for p in TOURNAMENT.iterdir() if not p.name.startswith("13-"))
    for n, path in enumerate(files, start=1):
        text = re.sub(r"<IDEvt>\d+</IDEvt>", f"<IDEvt>{n}</IDEvt>", path.read_text(encoding="utf-8"))
        text = re.sub(r'"IDEvt": *\d+', f'"IDEvt": {n}', text)
        (tmp_path / f"{n:02d}{path.suffix}").write_text(text, encoding="utf-8")
    code, report = audit_json(capsys, str(tmp_path))
    assert code == 1
    assert [(f["code"], f["id_evt"], f["player"]) for f in report["findings"]] == [
        ("REGISTRATION_NEVER_SETTLED", 5, "david")
    ]


# -- usage errors ---------------------------------------------------------------------------------


def test_no_path_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit"])
    assert exc.value.code == 2


def test_a_missing_path_is_a_usage_error(capsys, tmp_path):
    code, out, err = audit(capsys, str(TOURNAMENT), str(tmp_path / "absent.xml"))
    assert code == 2 and out == ""
    assert "absent.xml" in err


@pytest.mark.parametrize("target", ["folder", "no-such-folder/report.html"])
def test_an_unwritable_html_target_is_a_usage_error_before_the_audit(capsys, tmp_path, target):
    (tmp_path / "folder").mkdir()
    code, out, err = audit(capsys, str(TOURNAMENT), "--html", str(tmp_path / target))
    assert code == 2 and out == ""
    assert "--html" in err


def test_bad_options_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", str(TOURNAMENT), "--max-pictures", "many"])
    assert exc.value.code == 2
    assert main(["audit", str(TOURNAMENT), "--max-pictures", "-1"]) == 2


# -- archives -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Path]:
    return build_archive(tmp_path_factory.mktemp("archive"))


def test_an_archive_is_verified_then_audited_coffre_by_coffre(capsys, pristine):
    root, cert = pristine
    code, report = audit_json(capsys, str(root), "--cert", str(cert))
    assert code == 1
    assert report["verified"] == [
        {"archive": str(root), "ok": True, "report": report["verified"][0]["report"]}
    ]
    assert report["inputs"] == [{"path": str(root), "kind": "archive"}]
    assert (report["events"], report["hands"], report["problems"]) == (22, 6, [])
    [finding] = [f for f in report["findings"] if f["code"] == "CARD_DEALT_TWICE"]
    assert finding["source"] == f"{root}@0099/1#1"
    assert (finding["id_oper"], finding["id_coffre"], finding["id_evt"]) == ("0099", 1, 1)


def test_an_archive_needs_a_trusted_certificate(capsys, pristine):
    code, _, err = audit(capsys, str(pristine[0]))
    assert code == 2 and "--cert" in err


def test_a_tampered_archive_is_refused_before_its_events_are_audited(capsys, pristine, tmp_path):
    root, cert = pristine
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    lot = sorted(p for p in (copy / "0099" / "2").rglob("*.xml") if p.parent.name != "checkpoints")[0]
    lot.write_bytes(lot.read_bytes().replace(b"alice", b"alicf", 1))
    code, report = audit_json(capsys, str(copy), "--cert", str(cert))
    assert code == 1
    assert report["verified"][0]["ok"] is False
    assert (report["events"], report["hands"], report["findings"]) == (0, 0, [])
    [problem] = report["problems"]
    assert problem["kind"] == "unverified" and problem["source"] == str(copy)
    assert lot.name in problem["message"]
    code, out, _ = audit(capsys, str(copy), "--cert", str(cert))
    assert f"archive {copy}: does not verify, not audited" in out


# -- --jobs: workers, the same output -------------------------------------------------------------


def _mutated_hands(folder: Path, count: int = 300) -> Path:
    """``count`` hands played by pokerkit (the eleven variants in turn, IDEvt 1, 2, … of one coffre),
    one file each but for a few files of two; some changed to give findings (a stack after the hand,
    a card dealt twice) and some that normalize rejects."""
    import random

    from coffre.domain.audit.play import MAX_PLAYERS, play_hand
    from coffre.domain.audit.variants import ENGINE_VARIANTS

    rng = random.Random(20)
    regles = list(ENGINE_VARIANTS)
    folder.mkdir()
    pending: list[dict] = []
    for k in range(count):
        regle = regles[k % len(regles)]
        seats = {
            s: f"{rng.randint(200, 2000) / 100:.2f}"
            for s in rng.sample(range(1, 10), rng.randint(3, min(6, MAX_PLAYERS[regle])))
        }
        kind = ENGINE_VARIANTS[regle].kind
        hand = json.loads(
            play_hand(
                regle, seats, rng, ante="0.02" if kind == "stud" else 0, rake="0.05", header={"IDEvt": k + 1}
            ).json()
        )
        pojeu = hand["POJEU"]
        if k % 7 == 3:  # a stack after the hand that the actions do not give
            finance = pojeu["Participants"]["Joueur"][0]["Finance"]
            finance["CaveApres"] = f"{float(finance['CaveApres']) + 1:.2f}"
        if k % 11 == 5:  # the second card dealt is the first one again
            draws = [a["Draw"] for t in pojeu["Jeu"]["Tour"] for a in t["Action"] if "Draw" in a]
            draws[1]["Valeur"] = draws[0]["Valeur"]
        if k % 29 == 7:  # not an event normalize accepts
            del pojeu["Participants"]["Joueur"][0]["IDJoueur"]
        pending.append(hand)
        if k % 17 == 0 and len(pending) == 1:
            continue  # written with the next hand, in one file of two events
        (folder / f"{k + 1:04d}.json").write_text(json.dumps(pending if len(pending) > 1 else pending[0]))
        pending = []
    return folder


@pytest.fixture(scope="module")
def mutated(tmp_path_factory) -> Path:
    return _mutated_hands(tmp_path_factory.mktemp("hands") / "hands")


def _same_with_jobs(capsys, *args: str) -> dict:
    outputs = [audit(capsys, "--json", "--jobs", jobs, *args) for jobs in ("1", "2")]
    assert outputs[0] == outputs[1]
    return json.loads(outputs[0][1])


def test_jobs_2_gives_the_serial_json_on_the_demo_events(capsys):
    from audit_hands import DEMO

    report = _same_with_jobs(capsys, str(DEMO))
    assert report["events"] > 20 and report["findings"]


def test_jobs_2_gives_the_serial_json_on_generated_hands_with_findings(capsys, mutated, tmp_path):
    report = _same_with_jobs(capsys, str(mutated), str(TOURNAMENT))
    assert report["hands"] > 250
    assert {"CARD_DEALT_TWICE", "PARTICIPANT_NOT_REGISTERED"} <= set(report["codes"])
    assert any(p["kind"] == "rejected" and "#" in p["source"] for p in report["problems"])
    # the text output and the HTML report too
    texts = [
        audit(capsys, "--jobs", jobs, str(mutated), "--html", str(tmp_path / f"{jobs}.html")) for jobs in "12"
    ]
    assert texts[0][:2] == texts[1][:2]
    import re

    pages = [re.sub(r"Written [^.]*\.", "", (tmp_path / f"{jobs}.html").read_text()) for jobs in "12"]
    assert pages[0] == pages[1]  # but for the time it was written


def test_the_house_rules_reach_workers_that_do_not_inherit_them(mutated, monkeypatch):
    """The operator's cap (COFFRE_AUDIT_FIXED_LIMIT_BETS) is given to each worker: with
    ``forkserver`` a worker starts from a fresh interpreter and inherits nothing."""
    import coffre.adapters.audit_workers
    from coffre.commands.audit.run import audit_paths
    from coffre.domain.audit.variants import HouseRules

    monkeypatch.setattr(coffre.adapters.audit_workers, "START_METHOD", "forkserver")
    strict = HouseRules(fixed_limit_bets=1)  # the big blind is the only bet: every limit raise is illegal
    runs = [audit_paths([str(mutated)], rules=strict, jobs=jobs).as_json() for jobs in (1, 2)]
    assert runs[0] == runs[1]
    default = audit_paths([str(mutated)], jobs=1).as_json()
    assert runs[0]["codes"].get("BET_ILLEGAL", 0) > default["codes"].get("BET_ILLEGAL", 0)


def test_jobs_2_gives_the_serial_json_on_an_archive(capsys, pristine, monkeypatch):
    import coffre.commands.audit.run

    root, cert = pristine
    monkeypatch.setattr(coffre.commands.audit.run, "LOT_BYTES_PER_TASK", 1024)  # lots shared between tasks
    report = _same_with_jobs(capsys, str(root), "--cert", str(cert))
    assert report["codes"].get("CARD_DEALT_TWICE") == 1 and report["hands"] == 6


def test_an_event_whose_audit_fails_in_a_worker_is_reported_as_in_the_serial_run(capsys, monkeypatch):
    """A check that raises: the event is a problem of kind ``error``, the run goes on (fork: the
    workers inherit the failing check)."""
    import coffre.adapters.audit_workers
    import coffre.domain.audit.events

    real = coffre.domain.audit.events.audit_hand

    def failing(event, rules=None):
        if event.id_evt == 9:
            raise KeyError("seat 9")
        return real(event, rules) if rules is not None else real(event)

    monkeypatch.setattr(coffre.adapters.audit_workers, "START_METHOD", "fork")
    monkeypatch.setattr(coffre.adapters.audit_workers, "audit_hand", failing)
    monkeypatch.setattr(coffre.domain.audit.events, "audit_hand", failing)
    report = _same_with_jobs(capsys, str(TOURNAMENT))
    [problem] = report["problems"]
    assert problem["kind"] == "error" and problem["message"] == "the audit failed: KeyError: 'seat 9'"
    assert problem["source"].endswith("09-POJEU-hand-2.xml")


def test_an_unreadable_file_stops_its_path_as_in_the_serial_run(capsys, tmp_path, monkeypatch):
    """The files before it are audited, the rest of its folder is not; a missing file named alone
    is unreadable too (fork: the workers inherit the failing read)."""
    import pathlib

    import coffre.adapters.audit_workers
    from coffre.commands.audit.run import audit_paths

    real = pathlib.Path.read_bytes

    def read_bytes(self):
        if self.name == "05-POINSCRIT-david.xml":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(coffre.adapters.audit_workers, "START_METHOD", "fork")
    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    report = _same_with_jobs(capsys, str(TOURNAMENT))
    assert [p["kind"] for p in report["problems"]] == ["unreadable"] and report["events"] == 4
    paths = [str(tmp_path / "absent.xml"), str(TOURNAMENT), str(tmp_path)]
    runs = [audit_paths(paths, jobs=jobs).as_json() for jobs in (1, 2)]
    assert runs[0] == runs[1]
    assert sorted(p["kind"] for p in runs[0]["problems"]) == ["empty", "unreadable", "unreadable"]


def test_few_events_are_audited_without_a_pool_unless_jobs_is_given(monkeypatch):
    import coffre.adapters.audit_workers
    from coffre.commands.audit.run import audit_paths

    def no_pool(*_args):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(coffre.adapters.audit_workers, "pool", no_pool)
    assert audit_paths([str(TOURNAMENT)], jobs=None).events == 21
    with pytest.raises(AssertionError, match="a pool was started"):
        audit_paths([str(TOURNAMENT)], jobs=2)


def test_jobs_below_1_is_a_usage_error(capsys):
    assert main(["audit", str(TOURNAMENT), "--jobs", "0"]) == 2
