"""``coffre proof --check``: a proof saved from the API or ``coffre proof`` checked offline, its
roots against the signed checkpoints of the known-answer archive."""

from __future__ import annotations

import json
from pathlib import Path

from coffre.cli import main

KNOWN = Path(__file__).parent / "known_answer"
ARCHIVE = KNOWN / "archive"
CERT = str(KNOWN / "test-only-signing-cert.pem")
CHECKPOINTS = [str(ARCHIVE / f"0099/7/checkpoints/0099-7-000000000{n}.xml") for n in (1, 2)]


def saved(tmp_path: Path, capsys, *how: str) -> Path:  # type: ignore[no-untyped-def]
    assert main(["proof", str(ARCHIVE), "--cert", CERT, "--coffre", "0099/7", *how]) == 0
    path = tmp_path / "proof.json"
    path.write_text(capsys.readouterr().out)
    return path


def check(path: Path, *checkpoints: str) -> int:
    extra = [arg for c in checkpoints for arg in ("--checkpoint", c)]
    return main(["proof", "--check", str(path), *extra, *(["--cert", CERT] if checkpoints else [])])


def test_a_saved_consistency_proof_checks_against_both_checkpoints(tmp_path, capsys) -> None:
    path = saved(tmp_path, capsys, "--since-size", "2")
    assert check(path, *CHECKPOINTS) == 0
    assert "consistency proof: OK, against 2 signed checkpoint(s)" in capsys.readouterr().out
    proof = json.loads(path.read_text())
    proof["path"][0] = "00" * 32  # a changed hash
    path.write_text(json.dumps(proof))
    assert check(path) == 1
    assert "is not a prefix" in capsys.readouterr().out


def test_an_inclusion_proof_of_another_tree_fails_against_the_signed_root(tmp_path, capsys) -> None:
    from coffre.domain.merkle import node_hash

    path = saved(tmp_path, capsys, "--id-evt", "1")
    assert check(path, CHECKPOINTS[1]) == 0
    capsys.readouterr()
    proof = json.loads(path.read_text())
    # a proof that holds on its own, of another tree of 2 events: event 1 and a made-up one
    other = bytes(32)
    proof.update(
        tree_size=2,
        tree_path=[other.hex()],
        tree_root=node_hash(bytes.fromhex(proof["leaf_hash"]), other).hex(),
    )
    path.write_text(json.dumps(proof))
    assert check(path) == 0
    assert "checked against nothing signed" in capsys.readouterr().out
    assert check(path, CHECKPOINTS[0]) == 1
    assert "the root of the tree of size 2 is not the one its checkpoint signed" in capsys.readouterr().out
    assert check(path, CHECKPOINTS[1]) == 1  # a checkpoint of another size proves nothing
    assert "no checkpoint given is of the proof's tree size 2" in capsys.readouterr().out


def test_a_checkpoint_whose_signature_fails_is_refused(tmp_path, capsys) -> None:
    path = saved(tmp_path, capsys, "--since-size", "2")
    forged = tmp_path / "forged.xml"
    forged.write_bytes(Path(CHECKPOINTS[0]).read_bytes().replace(b"<TailleArbre>2<", b"<TailleArbre>9<"))
    assert check(path, str(forged)) == 1
    assert "forged.xml" in capsys.readouterr().err
    assert main(["proof", "--check", str(path), "--checkpoint", CHECKPOINTS[0]]) == 2  # no --cert
