"""``coffre witness`` in its own process, over TLS with a CA made for the test, the vault's side
played by coffre.adapters.witness_client.WitnessClient: what it cosigns, what it refuses and
keeps as evidence, and that its state survives a SIGKILL."""

from __future__ import annotations

import contextlib
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lxml import etree

from coffre.adapters.broker import free_port_block
from coffre.adapters.tls import development_tls
from coffre.adapters.witness_client import Unreachable, WitnessClient
from coffre.cli import main
from coffre.domain.lot import Checkpoint, build_checkpoint
from coffre.domain.merkle import consistency_proof, leaf_hash, root
from coffre.domain.signing import Signer, generate_key_and_certificate
from coffre.domain.witness import (
    AddCheckpoint,
    Refusal,
    WitnessKey,
    WitnessPublicKey,
    cosigned_by,
    note_body,
)

from witness.process import NAME, Witness, https, running_witness

OPER, COFFRE = "0099", 7
LEAVES = [leaf_hash(f"event {n}".encode()) for n in range(1, 31)]
OTHER_LEAVES = [leaf_hash(f"rewritten event {n}".encode()) for n in range(1, 31)]


def _signer(name: str) -> tuple[Signer, bytes]:
    key, cert = generate_key_and_certificate(name, days=30, not_before=datetime.now(UTC) - timedelta(days=1))
    return Signer.from_pem(key, cert), cert


OPERATOR, OPERATOR_CERT = _signer("operator test vault")
STRANGER, _ = _signer("someone else")


def checkpoint(
    size: int, leaves: list[bytes] = LEAVES, signer: Signer = OPERATOR, coffre: int = COFFRE
) -> bytes:
    """A signed XML checkpoint of the tree of ``leaves[:size]`` (one lot per size, for the test)."""
    fields = Checkpoint(
        OPER,
        coffre,
        size,
        size,
        size,
        bytes(32),
        root(leaves[:size]),
        bytes(32),
        datetime.now(UTC).replace(microsecond=0),
    )
    return etree.tostring(signer.sign(build_checkpoint(fields)), xml_declaration=True, encoding="UTF-8")


def request(old: int, size: int, leaves: list[bytes] = LEAVES, **kw: object) -> AddCheckpoint:
    proof = tuple(consistency_proof(old, leaves[:size])) if 0 < old < size else ()
    return AddCheckpoint(old, proof, checkpoint(size, leaves, **kw))  # type: ignore[arg-type]


def body_of(size: int, leaves: list[bytes] = LEAVES) -> bytes:
    from coffre.domain.lot import parse_document, read_checkpoint

    return note_body(read_checkpoint(parse_document(checkpoint(size, leaves))))


@pytest.fixture(scope="module")
def witness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Witness]:
    with running_witness(tmp_path_factory.mktemp("witness"), OPERATOR_CERT) as running:
        yield running


def test_keygen_writes_the_key_pair_and_prints_the_vkey(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["witness-keygen", "--name", "w.example", "--out", str(tmp_path)]) == 0
    vkey = capsys.readouterr().out.split("vkey: ")[1].strip()
    private, public = tmp_path / "witness-key.pem", tmp_path / "witness-key.pub.pem"
    assert private.stat().st_mode & 0o777 == 0o600
    key = WitnessKey.from_pem("w.example", private.read_bytes())
    assert WitnessPublicKey.from_vkey(vkey) == key.public
    assert public.read_bytes() == key.public.pem()
    assert main(["witness-keygen", "--name", "w.example", "--out", str(tmp_path)]) == 1  # never overwritten
    assert WitnessKey.from_pem("w.example", private.read_bytes()).public == key.public


def test_first_checkpoint_then_an_extension_are_cosigned(witness: Witness) -> None:
    client, public = witness.client, witness.key.private.public_key()
    line = client.add_checkpoint(request(0, 4))
    cosignature = cosigned_by(body_of(4) + b"\n" + line, body_of(4), public)
    assert cosignature.name == NAME and abs(cosignature.time - time.time()) < 60
    line = client.add_checkpoint(request(4, 7))  # with merkle.consistency_proof(4, 7)
    cosigned_by(body_of(7) + b"\n" + line, body_of(7), public)
    line = client.add_checkpoint(request(7, 7))  # the same tree again: cosigned again
    cosigned_by(body_of(7) + b"\n" + line, body_of(7), public)
    entry = client.checkpoint(OPER, COFFRE)
    assert entry is not None and (entry.size, entry.root) == (7, root(LEAVES[:7]))


def test_a_stale_old_size_is_a_conflict_with_the_witness_size(witness: Witness) -> None:
    with pytest.raises(Refusal) as refused:
        witness.client.add_checkpoint(request(4, 10))
    assert (refused.value.kind, refused.value.size) == ("conflict", 7)
    status, content_type, body = https(witness, "/add-checkpoint", request(4, 10).encode())
    assert (status, content_type.split(";")[0], body) == (409, "text/x.tlog.size", b"7\n")
    line = witness.client.add_checkpoint(request(7, 10))  # sent again from the witness's size
    cosigned_by(body_of(10) + b"\n" + line, body_of(10), witness.key.private.public_key())


def test_truncation_fork_and_rewrite_are_refused_and_kept(witness: Witness) -> None:
    before = len(witness.refusals())
    shown = {}
    for kind, status, add in (
        ("truncation", 409, request(10, 7)),
        ("fork", 409, request(10, 10, OTHER_LEAVES)),
        # a larger tree whose proof is from another history of 10 events
        ("rewrite", 422, request(10, 12, OTHER_LEAVES)),
    ):
        with pytest.raises(Refusal) as refused:
            witness.client.add_checkpoint(add)
        assert refused.value.kind == kind, refused.value
        answer = https(witness, "/add-checkpoint", add.encode())
        assert answer[0] == status and answer[2].startswith(f"{kind}: ".encode()), answer
        shown[kind] = add.checkpoint
    kept = witness.refusals()[before:]
    assert [k for k, _, _ in kept] == ["truncation", "truncation", "fork", "fork", "rewrite", "rewrite"]
    assert {k: c for k, _, c in kept[::2]} == shown  # the checkpoint shown, byte for byte
    entry = witness.client.checkpoint(OPER, COFFRE)
    assert entry is not None and entry.size == 10  # nothing moved


def test_a_checkpoint_by_an_untrusted_key_is_403(witness: Witness) -> None:
    add = request(0, 3, coffre=8, signer=STRANGER)
    with pytest.raises(Refusal) as refused:
        witness.client.add_checkpoint(add)
    assert refused.value.kind == "signature"
    status, _, body = https(witness, "/add-checkpoint", add.encode())
    assert status == 403 and body.startswith(b"signature: ")
    assert witness.client.checkpoint(OPER, 8) is None


def test_malformed_requests_are_400(witness: Witness) -> None:
    for data in (b"garbage", b"old 0\n\n<not xml", b"old x\n\n<a/>", b"old 0\n" + b"A" * 300_000):
        status, content_type, body = https(witness, "/add-checkpoint", data)
        assert status == 400 and content_type.startswith("text/plain"), (status, body)
        assert body.startswith(b"malformed: ") and body.endswith(b"\n") and body.count(b"\n") == 1
    with pytest.raises(Refusal) as refused:
        witness.client.add_checkpoint(AddCheckpoint(0, (), b"<Checkpoint/>"))
    assert refused.value.kind == "malformed"


def test_the_list_key_and_metrics(witness: Witness) -> None:
    public = witness.key.private.public_key()
    listed = witness.client.checkpoints()
    assert [(c.id_oper, c.id_coffre, c.size) for c in listed] == [(OPER, COFFRE, 10)]
    assert cosigned_by(listed[0].note, body_of(10), public).name == NAME
    assert https(witness, "/key")[2].decode().strip() == witness.key.public.vkey
    assert https(witness, "/checkpoints/0099/9")[0] == 404
    assert https(witness, "/checkpoints/99/x")[0] == 404
    metrics = https(witness, "/metrics")[2].decode()
    assert "coffre_witness_cosigned_total" in metrics
    assert 'coffre_witness_refused_total{kind="fork"} 2.0' in metrics


def test_a_client_with_another_ca_fails_tls(witness: Witness, tmp_path: Path) -> None:
    other = development_tls(tmp_path / "other-tls").ca_cert
    with pytest.raises(Unreachable):
        WitnessClient(witness.url, ca=other, timeout=10).checkpoints()


def test_a_second_witness_on_the_same_state_is_refused(witness: Witness) -> None:
    env = witness.env | {"COFFRE_WITNESS_PORT": str(free_port_block(1))}
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "witness"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "COFFRE_WITNESS_STATE_DIR" in result.stderr and "another witness process" in result.stderr


def test_the_state_survives_sigkill(witness: Witness) -> None:
    assert witness.process is not None
    witness.process.send_signal(signal.SIGKILL)
    witness.process.wait(20)
    witness.start()
    entry = witness.client.checkpoint(OPER, COFFRE)
    assert entry is not None and entry.size == 10
    assert cosigned_by(entry.note, body_of(10), witness.key.private.public_key())
    before = len(witness.refusals())
    with pytest.raises(Refusal) as refused:
        witness.client.add_checkpoint(request(10, 10, OTHER_LEAVES))
    assert refused.value.kind == "fork"
    assert [k for k, _, _ in witness.refusals()[before:]] == ["fork"]
    line = witness.client.add_checkpoint(request(10, 12))
    cosigned_by(body_of(12) + b"\n" + line, body_of(12), witness.key.private.public_key())


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("COFFRE_WITNESS_TLS_CERT", "COFFRE_WITNESS_TLS_CERT"),
        ("COFFRE_WITNESS_KEY", "COFFRE_WITNESS_KEY"),
        ("COFFRE_WITNESS_OPERATOR_CERTS", "COFFRE_WITNESS_OPERATOR_CERTS"),
        ("COFFRE_WITNESS_NAME", "COFFRE_WITNESS_NAME"),
    ],
)
def test_missing_settings_stop_it_with_exit_2(
    witness: Witness, tmp_path: Path, drop: str, message: str
) -> None:
    env = {k: v for k, v in witness.env.items() if k != drop} | {"COFFRE_WITNESS_STATE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "witness"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "coffre: configuration error: " in result.stderr and message in result.stderr, result.stderr


def test_a_client_that_sends_no_request_is_closed(witness: Witness) -> None:
    """A connection whose request head does not come is closed (REQUEST_HEAD_TIMEOUT, 10 s)."""
    import socket

    from coffre_witness.server import REQUEST_HEAD_TIMEOUT

    context = ssl.create_default_context(cafile=str(witness.ca))
    port = int(witness.url.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never ends its head
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError, ssl.SSLError):
            assert tls.recv(1) == b""  # closed without an answer (a timeout here fails the test)
        assert REQUEST_HEAD_TIMEOUT - 2 < time.monotonic() - started < REQUEST_HEAD_TIMEOUT + 5


def test_sigterm_stops_it_cleanly(witness: Witness) -> None:
    assert witness.process is not None
    witness.process.send_signal(signal.SIGTERM)
    assert witness.process.wait(30) == 0, witness.log.read_text()
    assert "witness stopping" in witness.log.read_text()


def test_a_witness_of_several_operators_binds_each_certificate_to_its_idoper(tmp_path: Path) -> None:
    """COFFRE_WITNESS_OPERATOR_CERTS=0042=operator.pem: that certificate signs 0042's checkpoints
    only, so the operator cannot have another's coffre cosigned first."""
    with running_witness(tmp_path / "bound", OPERATOR_CERT, bound_to="0042") as bound:
        with pytest.raises(Refusal) as refused:
            bound.client.add_checkpoint(request(0, 3))  # a checkpoint of 0099
        assert refused.value.kind == "signature" and "for IDOper '0099'" in refused.value.message
        assert bound.client.checkpoint(OPER, COFFRE) is None
        env = bound.env | {
            "COFFRE_WITNESS_OPERATOR_CERTS": "99=x.pem",
            "COFFRE_WITNESS_STATE_DIR": str(tmp_path),
        }
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "witness"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "an IDOper is 4 digits" in result.stderr, result.stderr
