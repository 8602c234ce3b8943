"""`coffre up` and `coffre publish` run as a person would: subprocesses, real broker (``coffre up``'s
own Apache Kafka, its log under the data folder)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coffre.adapters.broker import free_port_block

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


def up_env() -> dict[str, str]:
    """``coffre up``'s broker on free ports; nothing of the regulator's read."""
    return {
        "COFFRE_ARJEL_REFERENCE": "/nonexistent",
        "COFFRE_DET_ANNEX": "/nonexistent",
        "COFFRE_BROKER_PORT": str(free_port_block(2)),
    }


def start_up(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """``coffre up`` (running on, not ``--once``), once it printed that it runs."""
    up = subprocess.Popen(
        [sys.executable, "-m", "coffre.cli", "up", "--data", str(tmp_path), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    assert up.stdout is not None
    lines = []
    deadline = time.monotonic() + 240
    for line in up.stdout:
        lines.append(line)
        if line.startswith("running; Ctrl-C or SIGTERM stops it") or time.monotonic() > deadline:
            break
    up.started_output = "".join(lines)  # type: ignore[attr-defined]
    assert "running; Ctrl-C" in up.started_output, up.started_output  # type: ignore[attr-defined]
    return up


def test_up_demo_then_sigterm_then_a_second_run_on_one_data_folder(tmp_path):
    """The README's run command: the packaged demo, nothing else needed, on coffre up's own Apache
    Kafka. Stopped with SIGTERM, then run again on the same folder: its broker goes on from its log
    (the first run's inputs are not read again), and IDEvt goes on from where the first run left."""
    env = up_env()
    up = start_up(tmp_path, env, "--demo")
    up.send_signal(signal.SIGTERM)
    rest, _ = up.communicate(timeout=120)
    first = subprocess.CompletedProcess(up.args, up.returncode, up.started_output + rest, "")  # type: ignore[attr-defined]
    assert first.returncode == 0, first.stdout
    assert (tmp_path / "kafka" / "data" / "meta.properties").is_file()  # the broker's log, durable
    assert b"Kafka Server started" in (tmp_path / "logs" / "broker.log").read_bytes()
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
    # the auditor kept the players' balances of the first run (its changelog is on the broker)
    assert "the demo was played before on this data folder" in second.stdout, second.stdout
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


def test_events_in_flight_when_coffre_up_stops_are_recorded_when_it_starts_again(tmp_path):
    """A platform (librdkafka) publishes 600 events without waiting; ``coffre up`` is stopped with
    SIGTERM while they go through the pipeline (some on events.in, some beyond), then started again on the same
    folder: every event is acquitted once in the end, IDEvt 1..n per coffre with no gap (the broker's
    log kept what was published and not yet acknowledged)."""
    import threading

    from confluent_kafka import Producer

    from pipeline.acquittals import read_acquittals

    env = {**up_env(), "COFFRE_OPS_PORT": "0", "COFFRE_API_PORT": "0", "COFFRE_PARTITIONS": "3"}
    bootstrap = f"127.0.0.1:{env['COFFRE_BROKER_PORT']}"
    up = start_up(tmp_path, env)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    sent = []
    for n in range(600):
        coffre_id = 31 + n % 3
        raw = POINSCRIT.replace(b"<IDCoffre>7</IDCoffre>", f"<IDCoffre>{coffre_id}</IDCoffre>".encode())
        producer.produce(
            "coffre.events.in",
            raw,
            key=str(coffre_id).encode(),
            headers=[("correlation-id", f"f-{n}".encode())],
        )
        sent.append(f"f-{n}")
    assert producer.flush(60) == 0
    up.send_signal(signal.SIGTERM)  # the 600 are on events.in, a few already through
    rest, _ = up.communicate(timeout=120)
    assert up.returncode == 0, rest
    again = start_up(tmp_path, env)
    answered: dict = {}
    stop = threading.Event()
    reader = threading.Thread(
        target=read_acquittals,
        args=({"bootstrap.servers": bootstrap, "group.id": "t"}, "coffre.acquittals", 3, answered, stop),
    )
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while len(answered) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        reader.join()
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=120)
    assert set(answered) == set(sent), f"{len(set(sent) - set(answered))} never acquitted"
    ids: dict[int, list[int]] = {}
    for _, acquittal in answered.values():
        assert acquittal.status == "recorded"
        ids.setdefault(acquittal.id_coffre, []).append(acquittal.id_evt)
    assert {c: sorted(v) for c, v in ids.items()} == {c: list(range(1, 201)) for c in (31, 32, 33)}


def descendants(pid: int) -> dict[int, str]:
    """Every process under ``pid`` (children, theirs…): pid → command line."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = alive(child) or ""
                frontier.append(child)
    return found


def alive(pid: int) -> str | None:
    """The command line of ``pid`` while it runs (not a zombie), else None."""
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return None
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_coffre_up_takes_its_whole_stack_with_it(tmp_path):
    """``kill -9`` of ``coffre up`` (a timeout, the OOM killer): its broker, witness and services die
    with it (before, all six ran on with parent PID 1, and the next ``coffre up`` found its ports
    taken); ``coffre up`` then starts again on the same ports and the same folder."""
    env = up_env()
    up = start_up(tmp_path, env)
    stack = descendants(up.pid)
    names = " ".join(stack.values())
    for part in ("kafka.Kafka", "coffre.cli ingest", "coffre.cli vault", "coffre.cli acquittal", "witness"):
        assert part in names, stack
    up.kill()
    up.wait(timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(alive(pid) for pid in stack):
        time.sleep(0.2)
    assert not {pid: alive(pid) for pid in stack if alive(pid)}
    again = start_up(tmp_path, env)  # the broker's, the witness's and the ops ports are free again
    try:
        assert f"Kafka at 127.0.0.1:{env['COFFRE_BROKER_PORT']}" in again.started_output  # type: ignore[attr-defined]
    finally:
        again.send_signal(signal.SIGTERM)
        rest, _ = again.communicate(timeout=120)
    assert again.returncode == 0, rest
    assert (
        "stopped: {'ingest': 0, 'vault': 0, 'acquittal': 0, 'regulator': 0, 'auditor': 0, 'witness': 0}"
        in rest
    )


def test_without_a_jvm_coffre_up_says_how_to_get_one_and_falls_back_to_the_memory_broker(tmp_path):
    """No java on the PATH (and no JAVA_HOME): one line saying how to get one, one saying what the
    memory-only broker cannot do, and the demo runs on it all the same."""
    env = {**up_env(), "PATH": str(Path(sys.executable).parent), "JAVA_HOME": ""}
    run = coffre("up", "--demo", "--once", "--data", str(tmp_path), env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Apache Kafka needs a Java runtime, and none is installed: install a Java runtime" in run.stderr
    assert "warning: falling back to the embedded broker (Tansu) keeps everything in memory" in run.stderr
    assert "all of it is lost when coffre up stops" in run.stderr
    assert "coffre 0099/3: 1 lot(s), 40 event(s)" in run.stdout, run.stdout
    assert not (tmp_path / "kafka").exists()


def test_up_with_the_memory_broker_when_asked(tmp_path):
    """``--broker tansu``: the warning with its limits, then the stack on the embedded broker."""
    run = coffre("up", "--broker", "tansu", "--once", "--data", str(tmp_path), env=up_env())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "warning: the embedded broker (Tansu) keeps everything in memory" in run.stderr
    assert "stalls for good within minutes" in run.stderr
    assert "coffre is up: Kafka at 127.0.0.1:" in run.stdout


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
