"""``coffre signals --html``'s report (coffre/commands/signals_report.py): self-contained (no
script, no external asset, a Content-Security-Policy), every operator's text escaped, each evidence
event linked to the console's page and proof with ``--console``, and otherwise named by the
``coffre proof`` command that proves it, which does. In chromium: tests/browser/test_report_screenshot.py."""

from __future__ import annotations

import re
import shlex

import lxml.html
import pytest

from coffre.cli import main
from coffre.commands.signals import signals_paths
from coffre.commands.signals_report import CSP, render_report

from audit_hands import DEMO, normalized, seal_archive
from signal_events import signal_events

HOSTILE = "<script>alert(1)</script>\"'&"
CONSOLE = "https://regulator.example:8443"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> dict:
    """A run over event files whose shared-IP partner's IDJoueur is hostile markup."""
    folder = tmp_path_factory.mktemp("hostile")
    for n, raw in enumerate(signal_events(partner=HOSTILE), start=1):
        (folder / f"{n:02d}.json").write_bytes(raw)
    result = signals_paths([str(folder)]).as_json()
    assert {s["signal"] for a in result["alerts"] for s in a["signals"] if s["crossed"]} == {
        "shared_ip",
        "same_hash",
    }
    return result


def hrefs(page: str) -> list[str]:
    return [a.get("href") for a in lxml.html.fromstring(page).iter("a")]


def test_a_hostile_idjoueur_is_escaped_everywhere(hostile_run):
    page = render_report(hostile_run, CONSOLE)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;" in page
    tree = lxml.html.fromstring(page)
    assert not tree.xpath("//script | //*[@onerror] | //*[@onload] | //iframe | //object | //embed")
    text = tree.text_content()
    assert f"0099/{HOSTILE}" in text  # the player's key, as recorded, in the alert's heading
    assert f"of 0099/{HOSTILE} and 0099/ana from one IPJoueur" in text  # and in its detail sentence
    # the player's link to the console quotes it in the URL
    assert f"{CONSOLE}/console/player?oper=0099&id=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26" in hrefs(
        page
    )


def test_a_metric_keyed_by_a_player_is_escaped():
    """Soft play's metrics are keyed by the players (operator's text): written as a table's headers."""
    signal = {
        "signal": "soft_play",
        "score": 5.0,
        "threshold": 4.0,
        "crossed": True,
        "comparison": "at least",
        "detail": HOSTILE,
        "source": "s",
        "metrics": {HOSTILE: {"heads_up_decisions": 20, "rate_against_partner": 0.05}, "meetings": 30},
        "evidence": [{"weight": 1.0, "id_oper": HOSTILE, "id_coffre": 1, "id_evt": 2}],
    }
    result = {"alerts": [{"kind": "pair", "players": [HOSTILE, "0099/x"], "signals": [signal]}]}
    for console in (None, CONSOLE):
        page = render_report(result, console)
        assert "<script" not in page.lower()
        tree = lxml.html.fromstring(page)
        assert HOSTILE in [th.text_content() for th in tree.iter("th")]
    # the operator's identifier quoted in the event's path
    assert f"{CONSOLE}/console/event/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%26/1/2" in hrefs(
        render_report(result, CONSOLE)
    )


def test_every_evidence_event_links_to_its_console_page_and_proof(hostile_run):
    page = render_report(hostile_run, CONSOLE + "/")
    links = set(hrefs(page))
    evidence = {
        (e["id_oper"], e["id_coffre"], e["id_evt"])
        for subject in hostile_run["alerts"] + hostile_run["near_misses"]
        for s in subject["signals"]
        for e in s["evidence"]
    }
    assert ("0099", 5, 2) in evidence and ("0099", 5, 3) in evidence  # the deposit, a hand
    for oper, coffre, id_evt in evidence:
        assert f"{CONSOLE}/console/event/{oper}/{coffre}/{id_evt}" in links
        assert f"{CONSOLE}/console/event/{oper}/{coffre}/{id_evt}/proof.json" in links
    assert {link for link in links if "/console/event/" in link} == {
        f"{CONSOLE}/console/event/{o}/{c}/{i}{suffix}"
        for o, c, i in evidence
        for suffix in ("", "/proof.json")
    }
    assert "coffre proof" not in page


def test_no_script_no_external_asset_and_a_csp(hostile_run):
    page = render_report(hostile_run)
    tree = lxml.html.fromstring(page)
    (meta,) = tree.xpath("//meta[@http-equiv='Content-Security-Policy']")
    assert meta.get("content") == CSP == "default-src 'none'; style-src 'unsafe-inline'"
    assert not tree.xpath("//script | //link | //img | //iframe | //object | //embed | //*[@src]")
    assert not re.search(r"url\(|@import|https?://", "".join(s.text_content() for s in tree.iter("style")))
    assert not hrefs(page)  # without --console: nothing to follow
    assert "A signal is a reason to look, not a finding." in tree.text_content()


def test_without_the_console_the_proof_command_proves_the_event(tmp_path):
    """Over an archive, each evidence event is named by the ``coffre proof`` command, which proves
    it from that archive once given the certificate."""
    root, cert = seal_archive(tmp_path, {("0099", 5): normalized(signal_events())})
    report = tmp_path / "report.html"
    assert main(["signals", str(root), "--cert", str(cert), "--html", str(report)]) == 1
    text = lxml.html.fromstring(report.read_text()).text_content()
    commands = sorted(set(re.findall(r"coffre proof .*?--id-evt \d+", text)))
    assert f"coffre proof {root} --cert PEM --coffre 0099/5 --id-evt 2" in commands
    assert len(commands) >= 5  # the deposit and the four hands
    proof = shlex.split(commands[0].replace("--cert PEM", f"--cert {cert}"))
    assert main(proof[1:]) == 0


def test_the_console_option(tmp_path, capsys):
    folder = tmp_path / "events"
    folder.mkdir()
    for n, raw in enumerate(signal_events(), start=1):
        (folder / f"{n:02d}.json").write_bytes(raw)
    report = tmp_path / "report.html"
    assert main(["signals", str(folder), "--html", str(report), "--console", CONSOLE]) == 1
    assert f"{CONSOLE}/console/event/0099/5/2/proof.json" in hrefs(report.read_text())
    capsys.readouterr()
    assert main(["signals", str(folder), "--console", CONSOLE]) == 2  # nothing to link without --html
    assert "--html" in capsys.readouterr().err
    for bad in ("javascript:alert(1)", "regulator.example", "https://x.example/?q=1"):
        assert main(["signals", str(folder), "--html", str(report), "--console", bad]) == 2
        assert "--console" in capsys.readouterr().err


def test_the_report_of_a_clean_run_says_so():
    result = signals_paths([str(DEMO / "mixed")]).as_json()
    assert not result["alerts"] and result["near_misses"]
    text = lxml.html.fromstring(render_report(result)).text_content()
    assert "no signal crossed its threshold" in text and "No subject crossed a threshold." in text
    assert f"Near misses ({len(result['near_misses'])})" in text
