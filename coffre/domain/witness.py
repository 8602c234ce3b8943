"""A checkpoint as a C2SP signed note, its cosignature by a witness, and the witness's judgement.

Every trusted log of the field anchors outside its writer: a **witness** keeps the newest
checkpoint it cosigned for each log and cosigns a new one only after a consistency proof shows
that the new tree extends it. An operator who drops the newest lots, drops a coffre or rebuilds
its history can re-sign the archive with its own key, but cannot get the witness to cosign it.

coffre follows the C2SP specifications where they fit (https://c2sp.org):

* **tlog-checkpoint**: the note body of a checkpoint is ``<origin>\\n<size>\\n<base64 root>\\n``,
  the origin being ``coffre/<IDOper>/<IDCoffre>``; no extension line.
* **tlog-cosignature**: ``cosignature/v1`` with Ed25519 (signature type 0x04). The witness
  signs ``cosignature/v1\\ntime <T>\\n`` followed by the note body; its signature line is
  ``— <name> <base64(key id ‖ T as 8 bytes big-endian ‖ signature)>``, the key id being the
  first 4 bytes of SHA-256(name ‖ 0x0A ‖ 0x04 ‖ public key).
* **tlog-witness**: ``add-checkpoint``'s body is ``old <size>``, the consistency proof (one
  base64 hash per line), an empty line, then the checkpoint.

Where coffre differs: the checkpoint sent is coffre's **XML checkpoint signed with XML-DSig**
(the operator's X.509 key, docs/archive-format.md), not a note signed by the log with a note
key; the witness verifies that signature against the operator certificates it trusts and
derives the note body itself. The first checkpoint of an origin is accepted as it is (trust on
first use, as tlog-witness does for a log it is configured for). Refusals say what they saw:
a ``truncation`` (fewer events than cosigned), a ``fork`` (the same size, another root), a
``rewrite`` (a larger tree whose proof does not hold): see :class:`Refusal`.

Everything here is pure (no I/O): the witness service keeps the state, the vault sends.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .lot import Checkpoint, LotFormatError, parse_document, parse_time, read_checkpoint
from .merkle import HASH_SIZE, verify_consistency
from .signing import SignatureInvalid, TrustStore, verify

COSIGNATURE_V1 = 0x04
"""The C2SP signed-note signature type of a ``cosignature/v1`` Ed25519 cosignature."""
EM_DASH = "\u2014"
MAX_REQUEST_BYTES = 256 * 1024
"""The largest add-checkpoint body accepted (a checkpoint with an RSA certificate is ~4 KiB)."""
MAX_PROOF_HASHES = 128
"""More hashes than any consistency proof between trees of up to 2**63 leaves holds."""
MAX_NOTE_BYTES = 64 * 1024

_ORIGIN = re.compile(r"coffre/(?P<oper>[0-9]{4})/(?P<coffre>0|[1-9][0-9]{0,18})")
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
_NAME = re.compile(r"[^\s+\u2014]{1,255}")


class CosignatureInvalid(Exception):
    """A cosigned note that is malformed, is about another checkpoint, or whose signature fails."""


class ProtocolError(ValueError):
    """An add-checkpoint body that is not in the tlog-witness format."""


# -- the note -----------------------------------------------------------------------------------


def origin(id_oper: str, id_coffre: int) -> str:
    """The log's origin line: one log per coffre."""
    return f"coffre/{id_oper}/{id_coffre}"


def parse_origin(text: str) -> tuple[str, int] | None:
    found = _ORIGIN.fullmatch(text)
    return (found["oper"], int(found["coffre"])) if found else None


def note_body_of(log_origin: str, size: int, root: bytes) -> bytes:
    """The C2SP checkpoint note body: origin, tree size, base64 root hash, each line ended by \\n."""
    if len(root) != HASH_SIZE:
        raise ValueError("a root hash is 32 bytes")
    return f"{log_origin}\n{size}\n{base64.b64encode(root).decode()}\n".encode()


def note_body(checkpoint: Checkpoint) -> bytes:
    """What a witness cosigns for an XML checkpoint: its coffre, ``TailleArbre`` and ``RacineArbre``."""
    return note_body_of(
        origin(checkpoint.id_oper, checkpoint.id_coffre), checkpoint.tree_size, checkpoint.tree_root
    )


def parse_note_body(body: bytes) -> tuple[str, int, bytes]:
    """(origin, size, root) of a checkpoint note body; CosignatureInvalid if it is not one."""
    try:
        lines = body.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise CosignatureInvalid("the note is not UTF-8") from None
    if len(lines) != 4 or lines[3] != "" or not _SIZE.fullmatch(lines[1]):
        raise CosignatureInvalid("the note body is not origin, size and root hash, one per line")
    root = _b64_hash(lines[2])
    if root is None:
        raise CosignatureInvalid("the note's root hash is not 32 bytes in base64")
    return lines[0], int(lines[1]), root


def _b64_hash(text: str) -> bytes | None:
    try:
        value = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return value if len(value) == HASH_SIZE and base64.b64encode(value).decode() == text else None


# -- keys and cosignatures -------------------------------------------------------------------------


def key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """The 4-byte key id of a cosignature/v1 key: SHA-256(name ‖ 0x0A ‖ 0x04 ‖ key)[:4]."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(name.encode() + b"\n" + bytes([COSIGNATURE_V1]) + raw).digest()[:4]


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """A short name for a key whatever its witness's name: SHA-256 of its raw bytes, 16 hex digits."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _message(body: bytes, at: int) -> bytes:
    return f"cosignature/v1\ntime {at}\n".encode() + body


def check_witness_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"a witness name is 1 to 255 characters without space, '+' or '—': {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class WitnessPublicKey:
    name: str
    key: Ed25519PublicKey

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.key)

    @property
    def vkey(self) -> str:
        """The C2SP note verifier key: ``<name>+<key id hex>+<base64(0x04 ‖ key)>``."""
        raw = self.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        encoded = base64.b64encode(bytes([COSIGNATURE_V1]) + raw).decode()
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    def pem(self) -> bytes:
        return self.key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    @classmethod
    def from_vkey(cls, text: str) -> WitnessPublicKey:
        try:
            name, id_hex, encoded = text.strip().split("+", 2)
            raw = base64.b64decode(encoded, validate=True)
        except (ValueError, binascii.Error):
            raise ValueError("a vkey is <name>+<key id hex>+<base64 key>") from None
        if len(raw) != 33 or raw[0] != COSIGNATURE_V1:
            raise ValueError("not a cosignature/v1 Ed25519 vkey")
        key = cls(check_witness_name(name), Ed25519PublicKey.from_public_bytes(raw[1:]))
        if key.key_id.hex() != id_hex:
            raise ValueError("the vkey's key id does not match its name and key")
        return key


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness's signing key and name."""

    name: str
    private: Ed25519PrivateKey

    def __post_init__(self) -> None:
        check_witness_name(self.name)

    @classmethod
    def generate(cls, name: str) -> WitnessKey:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, name: str, pem: bytes) -> WitnessKey:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("a witness key is an Ed25519 private key (PKCS#8 PEM)")
        return cls(name, key)

    def private_pem(self) -> bytes:
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def public(self) -> WitnessPublicKey:
        return WitnessPublicKey(self.name, self.private.public_key())

    def cosign(self, body: bytes, at: int) -> bytes:
        """The signature line (UTF-8, ending in \\n) cosigning ``body`` at POSIX time ``at``."""
        signature = self.private.sign(_message(body, at))
        blob = self.public.key_id + struct.pack(">Q", at) + signature
        return f"{EM_DASH} {self.name} {base64.b64encode(blob).decode()}\n".encode()


def load_public_keys(pem: bytes) -> list[Ed25519PublicKey]:
    """Every Ed25519 public key of a PEM file (``--witness-key``): ValueError for anything else."""
    blocks = re.findall(rb"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", pem, re.DOTALL)
    if not blocks:
        raise ValueError("no PUBLIC KEY in the PEM file")
    keys = []
    for block in blocks:
        key = serialization.load_pem_public_key(block)
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("a witness key is an Ed25519 public key")
        keys.append(key)
    return keys


@dataclass(frozen=True, slots=True)
class SignatureLine:
    name: str
    key_id: bytes
    time: int
    signature: bytes


@dataclass(frozen=True, slots=True)
class Cosignature:
    """A cosignature that verified: by witness ``name`` (key id ``key_id``) at POSIX ``time``."""

    name: str
    key_id: bytes
    time: int


def signature_line(line: str) -> SignatureLine | None:
    """A cosignature/v1 signature line without its newline, or None when it is another kind."""
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != EM_DASH or not _NAME.fullmatch(parts[1]):
        return None
    try:
        blob = base64.b64decode(parts[2], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(blob) != 4 + 8 + 64:
        return None  # another signature type (a note key's own signature is 4 + 64)
    return SignatureLine(parts[1], blob[:4], struct.unpack(">Q", blob[4:12])[0], blob[12:])


def split_note(note: bytes) -> tuple[bytes, list[SignatureLine]]:
    """A signed note's body and its cosignature/v1 lines (other signature types are skipped)."""
    if len(note) > MAX_NOTE_BYTES:
        raise CosignatureInvalid(f"a note of {len(note)} bytes, more than {MAX_NOTE_BYTES}")
    body, sep, signatures = note.partition(b"\n\n")
    if not sep or not signatures.endswith(b"\n"):
        raise CosignatureInvalid(
            "not a signed note: no empty line before the signatures, or no final newline"
        )
    try:
        lines = signatures.decode("utf-8")[:-1].split("\n")
    except UnicodeDecodeError:
        raise CosignatureInvalid("the signatures are not UTF-8") from None
    found = []
    for line in lines:
        if not line.startswith(EM_DASH + " "):
            raise CosignatureInvalid(f"not a signature line: {line[:80]!r}")
        parsed = signature_line(line)
        if parsed is not None:
            found.append(parsed)
    return body + b"\n", found


def cosigned_by(note: bytes, body: bytes, key: Ed25519PublicKey) -> Cosignature:
    """The cosignature of ``note`` by ``key``, checked to be over ``body``; CosignatureInvalid
    (its message says why) when the note is about something else or has no valid one by ``key``."""
    note_body_read, lines = split_note(note)
    if note_body_read != body:
        raise CosignatureInvalid("the note is about another checkpoint (its origin, size or root differs)")
    ours = [line for line in lines if line.key_id == key_id(line.name, key)]
    if not ours:
        raise CosignatureInvalid(f"no cosignature by the witness key {fingerprint(key)}")
    for line in ours:
        try:
            key.verify(line.signature, _message(body, line.time))
        except InvalidSignature:
            continue
        return Cosignature(line.name, line.key_id, line.time)
    raise CosignatureInvalid(f"the cosignature by the witness key {fingerprint(key)} does not verify")


def cosigned_by_any(note: bytes, body: bytes, keys: Sequence[Ed25519PublicKey]) -> Cosignature:
    """The cosignature of ``note`` over ``body`` by the first of ``keys`` that made a valid one;
    CosignatureInvalid saying, key by key, why none did."""
    reasons = []
    for key in keys:
        try:
            return cosigned_by(note, body, key)
        except CosignatureInvalid as exc:
            reasons.append(str(exc))
    raise CosignatureInvalid("; ".join(reasons) or "no witness key given")


# -- add-checkpoint ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddCheckpoint:
    """A tlog-witness add-checkpoint request: the size the sender believes the witness has, the
    consistency proof from it, and the signed XML checkpoint."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: bytes

    def encode(self) -> bytes:
        lines = [f"old {self.old_size}"] + [base64.b64encode(h).decode() for h in self.proof]
        return ("\n".join(lines) + "\n\n").encode() + self.checkpoint

    @classmethod
    def decode(cls, body: bytes) -> AddCheckpoint:
        if len(body) > MAX_REQUEST_BYTES:
            raise ProtocolError(f"a request of {len(body)} bytes, more than {MAX_REQUEST_BYTES}")
        head, sep, checkpoint = body.partition(b"\n\n")
        if not sep or not checkpoint:
            raise ProtocolError("no empty line between the proof and the checkpoint")
        try:
            lines = head.decode("ascii").split("\n")
        except UnicodeDecodeError:
            raise ProtocolError("the proof is not ASCII") from None
        old = lines[0].removeprefix("old ")
        if old == lines[0] or not _SIZE.fullmatch(old):
            raise ProtocolError("the first line is not 'old <size>'")
        if len(lines) - 1 > MAX_PROOF_HASHES:
            raise ProtocolError(f"more than {MAX_PROOF_HASHES} proof hashes")
        proof = []
        for line in lines[1:]:
            value = _b64_hash(line)
            if value is None:
                raise ProtocolError("a proof line is not a 32-byte hash in base64")
            proof.append(value)
        return cls(int(old), tuple(proof), checkpoint)


@dataclass(frozen=True, slots=True)
class Latest:
    """The newest checkpoint a witness cosigned for one coffre."""

    id_oper: str
    id_coffre: int
    size: int
    root: bytes
    checkpoint: bytes
    """The XML checkpoint as it was shown."""

    @property
    def origin(self) -> str:
        return origin(self.id_oper, self.id_coffre)


class Refusal(Exception):
    """The witness will not cosign. ``kind`` says why, ``status`` is the HTTP answer:

    * ``malformed`` (400): not a request or not a checkpoint;
    * ``signature`` (403): not signed by a trusted operator certificate valid at its ``Date``;
    * ``conflict`` (409, body ``text/x.tlog.size``): the sender's old size is not the witness's
      (``size``): it sends again with a proof from that size;
    * ``truncation`` (409): the checkpoint holds fewer events than one already cosigned;
    * ``fork`` (409): the same number of events as the cosigned one, another root;
    * ``rewrite`` (422): more events, but the proof does not show the cosigned tree as its prefix.
    """

    STATUS: ClassVar[dict[str, int]] = {
        "malformed": 400,
        "signature": 403,
        "conflict": 409,
        "truncation": 409,
        "fork": 409,
        "rewrite": 422,
    }

    def __init__(self, kind: str, message: str, size: int | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.status = self.STATUS[kind]
        self.message = message
        self.size = size


@dataclass(frozen=True)
class OperatorTrust:
    """The operators' signing certificates a witness trusts: each one bound to the IDOper whose
    checkpoints it may sign, or (``anyone``) to every IDOper. A witness the regulator runs for
    several operators binds each certificate, so that no operator can sign, and have cosigned
    first, a checkpoint of another's coffre."""

    anyone: tuple[x509.Certificate, ...] = ()
    by_oper: Mapping[str, tuple[x509.Certificate, ...]] = field(default_factory=dict)

    def store(self, id_oper: str) -> TrustStore:
        return TrustStore([*self.anyone, *self.by_oper.get(id_oper, ())])

    def describe(self) -> str:
        bound = [f"{len(certs)} for {oper}" for oper, certs in sorted(self.by_oper.items())]
        return ", ".join([*([f"{len(self.anyone)} for any IDOper"] if self.anyone else []), *bound])


def open_checkpoint(document: bytes, trust: TrustStore | OperatorTrust) -> Checkpoint:
    """The checkpoint a signed XML document states, once its signature holds (Refusal otherwise):
    with an :class:`OperatorTrust`, by a certificate trusted for the checkpoint's IDOper."""
    try:
        unverified = parse_document(document)
        at = parse_time(unverified.findtext("Date") or "", "Date")
    except LotFormatError as exc:
        raise Refusal("malformed", f"not a checkpoint: {exc}") from None
    claimed = (unverified.findtext("IDOper") or "").strip()
    store = trust.store(claimed) if isinstance(trust, OperatorTrust) else trust
    try:
        root = verify(document, store, at)
    except SignatureInvalid as exc:
        trusted_for = f" for IDOper {claimed!r}" if isinstance(trust, OperatorTrust) else ""
        raise Refusal("signature", f"the checkpoint's signature does not hold{trusted_for}: {exc}") from None
    try:
        checkpoint = read_checkpoint(root)
    except LotFormatError as exc:
        raise Refusal("malformed", f"not a checkpoint: {exc}") from None
    if checkpoint.id_oper != claimed:  # pragma: no cover - the parsed and the signed tree agree
        raise Refusal("signature", f"IDOper {checkpoint.id_oper} signed, {claimed!r} read")
    return checkpoint


def judge(latest: Latest | None, checkpoint: Checkpoint, request: AddCheckpoint) -> Latest:
    """What the witness holds once it cosigns ``checkpoint`` (signature already checked), or the
    :class:`Refusal` that says why it will not. ``latest`` is the newest it cosigned for that coffre."""
    coffre = f"coffre {checkpoint.id_oper}/{checkpoint.id_coffre}"
    size, root = checkpoint.tree_size, checkpoint.tree_root
    if checkpoint.last_id_evt != size:
        raise Refusal(
            "malformed", f"{coffre}: TailleArbre {size} is not DernierIDEvt {checkpoint.last_id_evt}"
        )
    if latest is not None and size < latest.size:
        raise Refusal(
            "truncation",
            f"{coffre}: this checkpoint holds {size} events, the witness cosigned {latest.size}: events were removed",
        )
    if request.old_size > size:
        raise Refusal("malformed", f"old size {request.old_size} is larger than the checkpoint's {size}")
    accepted = Latest(checkpoint.id_oper, checkpoint.id_coffre, size, root, request.checkpoint)
    if latest is None:
        if request.old_size != 0:
            raise Refusal("conflict", f"{coffre}: the witness has cosigned nothing of it", size=0)
        return accepted
    if size == latest.size:
        if root != latest.root:
            raise Refusal(
                "fork",
                f"{coffre}: another tree of {size} events than the one the witness cosigned "
                f"(root {root.hex()} against {latest.root.hex()})",
            )
        return latest  # the same tree again: cosigned again, the first checkpoint shown is kept
    if request.old_size != latest.size:
        raise Refusal(
            "conflict",
            f"{coffre}: the witness holds {latest.size} events, not {request.old_size}",
            size=latest.size,
        )
    if not verify_consistency(latest.size, size, latest.root, root, request.proof):
        raise Refusal(
            "rewrite",
            f"{coffre}: the tree of {size} events does not extend the {latest.size} the witness cosigned "
            "(the consistency proof does not hold)",
        )
    return accepted


def posix_seconds(at: datetime) -> int:
    return int(at.timestamp())


__all__ = [
    "AddCheckpoint",
    "Cosignature",
    "CosignatureInvalid",
    "Latest",
    "OperatorTrust",
    "ProtocolError",
    "Refusal",
    "WitnessKey",
    "WitnessPublicKey",
    "cosigned_by",
    "cosigned_by_any",
    "judge",
    "load_public_keys",
    "note_body",
    "note_body_of",
    "open_checkpoint",
    "origin",
    "parse_note_body",
    "split_note",
]
