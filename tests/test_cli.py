"""`coffre normalize` and friends, run as a person would (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coffre.cli import main

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


# -- coffre up refuses bad settings and bad demo events before anything starts ----------------------


@pytest.fixture
def nothing_may_start(monkeypatch):
    """No broker, no topic, no child process: coffre up must stop before any of them."""

    def started(*args, **kwargs):
        raise AssertionError("coffre up started a broker or a service before refusing")

    monkeypatch.setattr("coffre.commands.stack.EmbeddedBroker.start", started)
    monkeypatch.setattr("coffre.commands.stack.ensure_coffre_topics", started)
    monkeypatch.setattr("coffre.commands.stack.Stack.spawn", started)
    for name in [n for n in os.environ if n.startswith("COFFRE_")]:
        monkeypatch.delenv(name)


def missing(tmp_path: Path, name: str) -> str:
    return str(tmp_path / "absent" / name)


BAD_SETTINGS = {
    "partitions": (lambda t: {"COFFRE_PARTITIONS": "0"}, "COFFRE_PARTITIONS"),
    "signing key": (
        lambda t: {"COFFRE_SIGNING_KEY": missing(t, "k.pem"), "COFFRE_SIGNING_CERT": missing(t, "c.pem")},
        "COFFRE_SIGNING_KEY",
    ),
    "trusted certificates": (
        lambda t: {"COFFRE_TRUSTED_CERTS": missing(t, "old.pem")},
        "COFFRE_TRUSTED_CERTS",
    ),
    "vault replicas": (lambda t: {"COFFRE_VAULT_REPLICAS": "2"}, "COFFRE_VAULT_REPLICAS"),
    "ops ports": (lambda t: {"COFFRE_OPS_PORT": "65534"}, "COFFRE_OPS_PORT"),
    "API certificate": (
        lambda t: {
            "COFFRE_API_TLS_CERT": missing(t, "api.pem"),
            "COFFRE_API_TLS_KEY": missing(t, "api-key.pem"),
            "COFFRE_API_CLIENT_CA": missing(t, "ca.pem"),
        },
        "COFFRE_API_TLS_CERT",
    ),
    "API subjects": (lambda t: {"COFFRE_API_ALLOWED_SUBJECTS": "not a name"}, "COFFRE_API_ALLOWED_SUBJECTS"),
    "data folder": (lambda t: {"COFFRE_DATA_DIR": str(t / "a-file" / "var")}, "COFFRE_DATA_DIR"),
}


@pytest.mark.parametrize("case", BAD_SETTINGS)
def test_up_refuses_a_bad_setting_before_starting_anything(
    case, tmp_path, monkeypatch, capsys, nothing_may_start
):
    settings, variable = BAD_SETTINGS[case]
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    for name, value in settings(tmp_path).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as stopped:
        main(["up", "--demo", "--once"])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert f"coffre: configuration error: {variable}" in err, err
    assert "coffre is up" not in out


def test_up_refuses_a_bad_demo_event_before_starting_anything(
    tmp_path, monkeypatch, capsys, nothing_may_start
):
    (tmp_path / "story").mkdir()
    (tmp_path / "story" / "01-bad.xml").write_bytes(POINSCRIT.replace(b"<IDOper>0099", b"<IDOper>099"))
    monkeypatch.setattr("coffre.demo.EVENTS", tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(["up", "--demo", "--once", "--data", str(tmp_path / "var")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "coffre up: the demo's events do not normalize:" in err
    assert "  story/01-bad.xml: INVALID_OPERATOR_ID /POINSCRIT/IDOper: " in err
    assert not (tmp_path / "var").exists()


def test_up_with_a_bad_setting_as_a_person_runs_it(tmp_path):
    """The same, as a subprocess: exit 2, one line naming the variable, no broker log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COFFRE_")}
    env |= {
        "COFFRE_SIGNING_KEY": missing(tmp_path, "k.pem"),
        "COFFRE_SIGNING_CERT": missing(tmp_path, "c.pem"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "up", "--demo", "--once", "--data", str(tmp_path / "var")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "coffre: configuration error: COFFRE_SIGNING_KEY, COFFRE_SIGNING_CERT: "
    ), result.stderr
    assert "no such file" in result.stderr and "coffre is up" not in result.stdout
    assert not (tmp_path / "var" / "logs" / "broker.log").exists()


def test_annex_examples_needs_the_annex_named(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("COFFRE_DET_ANNEX", raising=False)
    assert main(["annex-examples", "--out", str(tmp_path / "out")]) == 2
    assert (
        "name the annex text (det-annexe-poker-decision-2016-064.md) with --annex or $COFFRE_DET_ANNEX"
        in (capsys.readouterr().err)
    )
    assert not (tmp_path / "out").exists()


def test_verify_names_a_missing_certificate_or_checkpoint_file(tmp_path, capsys):
    from coffre.cli import main

    assert main(["verify", str(tmp_path), "--cert", str(tmp_path / "absent.pem")]) == 2
    assert "no file" in capsys.readouterr().err
    cert = tmp_path / "cert.pem"
    cert.write_text("")
    assert (
        main(["verify", str(tmp_path), "--cert", str(cert), "--checkpoint", str(tmp_path / "kept.xml")]) == 2
    )
