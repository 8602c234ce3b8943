"""The TSA and the witness of the pipeline bench's evidence phase (``--evidence``), on loopback
HTTP in a process of their own (:class:`EvidenceProcess`: not in the bench's, whose event loop
measures the latencies and must not share its interpreter with a TSA's and a witness's work),
each behind a port the bench can close and open again (a service that goes down and comes back):

* the TSA is the tests' real one, ``openssl ts -reply`` (tests/tsa.py), with a CA of its own
  whose certificate the vault trusts (``COFFRE_TSA_CERTS``);
* the witness is a minimal one: the domain's ``open_checkpoint``/``judge``/``WitnessKey.cosign``
  behind the add-checkpoint protocol, its state in memory (the real ``coffre witness`` process
  is tested in tests/witness/). It trusts the stack's signing certificate, read at its first
  request (the vault makes the development key at start).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coffre.domain.evidence import cosignature_key, timestamp_key
from coffre.domain.lot import parse_document, parse_lot_name, read_checkpoint
from coffre.domain.signing import TrustStore
from coffre.domain.timestamp import TimestampInvalid, verify_token
from coffre.domain.witness import (
    CosignatureInvalid,
    WitnessKey,
    cosigned_by,
    note_body,
)

TESTS = Path(__file__).resolve().parents[1] / "tests"
TSA_NAME = "bench-tsa"
WITNESS_NAME = "bench-witness"


@dataclass
class EvidenceServices:
    """A TSA and a witness for one stack, and what the vault needs to use them."""

    folder: Path
    operator_cert: Path
    tsa: Any = None
    pki: Any = None
    tsa_server: Any = None
    witness: Any = None
    witness_server: Any = None
    ca_path: Path | None = None
    witness_key_path: Path | None = None
    down_since: float | None = None
    outages: list[float] = field(default_factory=list)

    def start(self) -> None:
        sys.path.insert(0, str(TESTS))
        try:
            from loopback import DomainWitness, Loopback  # the tests' stand-ins that go down and back
            from tsa import Pki, Tsa  # the tests' real TSA: openssl ts -reply
        finally:
            sys.path.remove(str(TESTS))
        self.folder.mkdir(parents=True, exist_ok=True)
        pki = self.pki = Pki(self.folder)
        self.ca_path = pki.cert_path
        self.tsa = Tsa(self.folder, pki.issue("coffre bench tsa"), pki)
        tsa = self.tsa
        self.tsa_server = Loopback(
            lambda path, ctype, body: (200, "application/timestamp-reply", tsa.reply(body))
        )
        key = WitnessKey.generate(WITNESS_NAME)
        self.witness_key_path = self.folder / "witness.pub.pem"
        self.witness_key_path.write_bytes(key.public.pem())
        operator_cert = self.operator_cert
        self.witness = DomainWitness(key, lambda: TrustStore.from_pem_files([operator_cert]))
        self.witness_server = Loopback(self.witness.handle)

    def settings(self, max_retry_seconds: float) -> dict[str, Any]:
        """The vault's COFFRE_TSA_* and COFFRE_WITNESS_* settings for these two."""
        assert self.tsa_server and self.witness_server
        return {
            "tsa_urls": f"{TSA_NAME}={self.tsa_server.url}/tsa",
            "tsa_certs": str(self.ca_path),
            "witness_urls": f"{WITNESS_NAME}={self.witness_server.url}",
            "witness_keys": str(self.witness_key_path),
            "evidence_max_retry_seconds": max_retry_seconds,
        }

    def down(self) -> None:
        assert self.tsa_server and self.witness_server
        self.tsa_server.stop()
        self.witness_server.stop()
        self.down_since = time.monotonic()

    def up(self) -> None:
        assert self.tsa_server and self.witness_server
        self.tsa_server.start()
        self.witness_server.start()
        if self.down_since is not None:
            self.outages.append(time.monotonic() - self.down_since)
            self.down_since = None

    def stop(self) -> None:
        for server in (self.tsa_server, self.witness_server):
            if server is not None:
                server.stop()


@dataclass
class ArchiveEvidence:
    """What a local archive holds: checkpoints, and those lacking a token or a cosignature."""

    checkpoints: int = 0
    untimestamped: int = 0
    uncosigned: int = 0
    invalid: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.checkpoints > 0 and not self.untimestamped and not self.uncosigned

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoints": self.checkpoints,
            "untimestamped": self.untimestamped,
            "uncosigned": self.uncosigned,
            "invalid": self.invalid[:10],
        }


def archive_evidence(archive: Path, services: EvidenceProcess | None = None) -> ArchiveEvidence:
    """Count the checkpoints of ``archive`` and the evidence they lack; with ``services``, check
    every token against the TSA's CA and every cosignature against the witness's key."""
    found = ArchiveEvidence()
    for path in sorted(archive.glob("*/*/checkpoints/*.xml")):
        parsed = parse_lot_name(path.name)
        if parsed is None:
            continue
        oper, coffre, number = parsed
        found.checkpoints += 1
        token_path = archive / timestamp_key(oper, coffre, number, TSA_NAME)
        note_path = archive / cosignature_key(oper, coffre, number, WITNESS_NAME)
        if not token_path.exists():
            found.untimestamped += 1
        if not note_path.exists():
            found.uncosigned += 1
        if services is None or not (token_path.exists() and note_path.exists()):
            continue
        document = path.read_bytes()
        try:
            verify_token(token_path.read_bytes(), document, services.tsa_trust)
            body = note_body(read_checkpoint(parse_document(document)))
            cosigned_by(note_path.read_bytes(), body, services.witness_key)
        except (TimestampInvalid, CosignatureInvalid) as exc:
            found.invalid.append(f"{path.name}: {exc}")
    return found


class EvidenceProcess:
    """:class:`EvidenceServices` in a child process (``python bench/_evidence.py serve``), driven
    by one JSON command per line on its stdin: ``down``, ``up``, ``stats``, ``stop``."""

    def __init__(self, folder: Path, operator_cert: Path) -> None:
        self.folder = folder
        self.operator_cert = operator_cert
        self.child: subprocess.Popen[str] | None = None
        self.info: dict[str, Any] = {}
        self.outages: list[float] = []

    def start(self) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-u", __file__, "serve", str(self.folder), str(self.operator_cert)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.info = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.child and self.child.stdout
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"the bench's TSA and witness process exited ({self.child.poll()})")
        return json.loads(line)

    def command(self, name: str) -> dict[str, Any]:
        assert self.child and self.child.stdin
        self.child.stdin.write(name + "\n")
        self.child.stdin.flush()
        return self._answer()

    def settings(self, max_retry_seconds: float) -> dict[str, Any]:
        return {
            "tsa_urls": f"{TSA_NAME}={self.info['tsa_url']}/tsa",
            "tsa_certs": self.info["ca"],
            "witness_urls": f"{WITNESS_NAME}={self.info['witness_url']}",
            "witness_keys": self.info["witness_key"],
            "evidence_max_retry_seconds": max_retry_seconds,
        }

    def down(self) -> None:
        self.command("down")

    def up(self) -> None:
        self.outages.append(self.command("up")["outage_s"])

    def stats(self) -> dict[str, Any]:
        return self.command("stats")

    @property
    def tsa_trust(self) -> list[Any]:
        from coffre.domain.timestamp import load_trust_files

        return load_trust_files([self.info["ca"]])

    @property
    def witness_key(self) -> Any:
        from coffre.domain.witness import load_public_keys

        return load_public_keys(Path(self.info["witness_key"]).read_bytes())[0]

    def stop(self) -> None:
        if self.child is None or self.child.poll() is not None:
            return
        try:
            self.command("stop")
            self.child.wait(10)
        except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired):
            self.child.kill()
            self.child.wait()


def serve(folder: Path, operator_cert: Path) -> None:
    services = EvidenceServices(folder, operator_cert)
    services.start()
    assert services.tsa_server and services.witness_server and services.witness
    print(
        json.dumps(
            {
                "tsa_url": services.tsa_server.url,
                "witness_url": services.witness_server.url,
                "ca": str(services.ca_path),
                "witness_key": str(services.witness_key_path),
            }
        )
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "down":
            services.down()
            print(json.dumps({}))
        elif command == "up":
            services.up()
            print(json.dumps({"outage_s": services.outages[-1]}))
        elif command == "stats":
            refused = [refusal.kind for refusal in services.witness.refusals]
            print(json.dumps({"cosigned": services.witness.cosigned, "refusals": refused}))
        else:
            services.stop()
            print(json.dumps({}))
            return


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    serve(Path(sys.argv[2]), Path(sys.argv[3]))
