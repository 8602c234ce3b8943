"""coffre's own Kafka records, told apart from anything else the cluster delivers.

Platforms share the cluster with coffre. They write ``events.in``, the very topic ingest forwards
its copies to, and a misconfigured or hostile client may write any topic its ACLs let it. So every
record coffre writes and later trusts (a forwarded copy, a normalized event, a rejection, a
receipt, an ingest snapshot, an audit record) carries the header ``coffre-auth``: an HMAC-SHA256,
under a key the services share (``COFFRE_RECORD_KEYS_FILE``, a Kubernetes Secret), over what the
record is for (its *purpose*: the kind of record, and the partition where the meaning depends on
it), its key, its value and every other header in order. A reader takes a record as coffre's only
when the tag verifies; anything else is a stranger's, refused and counted, never obeyed. The
vault's acknowledged position, which it keeps in its committed offsets' metadata (in its consumer
group, which another principal may write on an unsecured cluster), carries the same tag.

Rotation: the first key signs, every key verifies. Add the new key second, roll out, move it
first, roll out, and drop the old one once no topic retains a record it signed.

The MAC says *coffre wrote this*, not *this is new*: a genuine record replayed verifies. Each
reader copes with that by what it already does with a redelivery (the fold's marks drop a copy
already folded, the vault records an IDEvt once, a receipt yields the same acquittal), and the
purpose binds the partition wherever a replay elsewhere would mean something else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "AUTH",
    "RESERVED_PREFIX",
    "Purpose",
    "RecordKeyError",
    "RecordKeys",
    "reserved_headers",
]

AUTH = "coffre-auth"
"""The header holding ``<key id>:<base64 of the HMAC-SHA256>``."""
RESERVED_PREFIX = "coffre-"
"""Headers named so are coffre's own: an input carrying one that coffre did not write is refused."""
MIN_KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")
_NONE = (1 << 64) - 1  # the length written for a missing key or header value


class RecordKeyError(ValueError):
    """Record keys that cannot be used (malformed, too short, repeated ids, none at all)."""


class Purpose:
    """What a record is for, as its MAC binds it."""

    NORMALIZED = b"normalized"
    REJECTION = b"rejection"
    RECEIPT = b"receipt"
    AUDIT = b"audit"

    @staticmethod
    def forward(partition: int) -> bytes:
        """A copy forwarded to partition ``partition`` of ``events.in`` (elsewhere it means nothing)."""
        return b"forward:%d" % partition

    @staticmethod
    def snapshot(partition: int) -> bytes:
        """ingest's snapshot of partition ``partition`` of ``events.in``."""
        return b"snapshot:%d" % partition

    @staticmethod
    def acknowledged(partition: int) -> bytes:
        """The vault's acknowledged position on partition ``partition`` of the normalized topic, carried
        in its committed offset's metadata (``coffre_vault.acknowledged``): not a record, but the same tag."""
        return b"acknowledged:%d" % partition


_pack_length = struct.Struct(">Q").pack
_NONE_LENGTH = _pack_length(_NONE)


def _length(part: bytes | None) -> bytes:
    return _NONE_LENGTH if part is None else _pack_length(len(part))


@dataclass(frozen=True)
class RecordKeys:
    """The keys of one install: ``(id, secret)`` pairs, the first signs, every one verifies."""

    keys: tuple[tuple[str, bytes], ...]
    _macs: dict[str, hmac.HMAC] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise RecordKeyError("no record key")
        seen: set[str] = set()
        for key_id, secret in self.keys:
            if not _KEY_ID.fullmatch(key_id):
                raise RecordKeyError(f"record key id {key_id!r}: 1 to 32 of A-Z a-z 0-9 . _ -")
            if key_id in seen:
                raise RecordKeyError(f"record key id {key_id!r} appears twice")
            if len(secret) < MIN_KEY_BYTES:
                raise RecordKeyError(
                    f"record key {key_id!r}: {len(secret)} bytes, at least {MIN_KEY_BYTES} needed"
                )
            seen.add(key_id)
        macs = {key_id: hmac.new(secret, digestmod=hashlib.sha256) for key_id, secret in self.keys}
        object.__setattr__(self, "_macs", macs)

    @classmethod
    def parse(cls, text: str) -> RecordKeys:
        """Keys written ``id:base64``, separated by commas or new lines (blank lines and lines
        beginning with ``#`` are skipped)."""
        keys = []
        items = [
            item
            for line in text.splitlines()
            if not line.lstrip().startswith("#")
            for item in line.split(",")
        ]
        for item in items:
            item = item.strip()
            if not item:
                continue
            key_id, sep, encoded = item.partition(":")
            if not sep:
                raise RecordKeyError("a record key is written id:base64")
            try:
                secret = base64.b64decode(encoded.strip(), validate=True)
            except ValueError:
                raise RecordKeyError(f"record key {key_id.strip()!r}: not base64") from None
            keys.append((key_id.strip(), secret))
        return cls(tuple(keys))

    @staticmethod
    def new_key_line(key_id: str) -> str:
        """A fresh random key, as one line of a keys file."""
        return f"{key_id}:{base64.b64encode(secrets.token_bytes(MIN_KEY_BYTES)).decode()}"

    @property
    def signing_id(self) -> str:
        return self.keys[0][0]

    @property
    def header_bytes(self) -> int:
        """What the tag this install writes adds to a record, as :func:`coffre.domain.messages.record_size`
        counts a header: its name, the signing key's id, a colon, 44 characters of base64, two varint lengths."""
        return len(AUTH) + len(self.signing_id) + 1 + 44 + 10

    def _tag(
        self, key_id: str, purpose: bytes, key: bytes | None, value: bytes | None, headers: Iterable
    ) -> bytes:
        """HMAC-SHA256 over the purpose, key and value, then every header but ``coffre-auth``, each
        part preceded by its length (8 bytes, big-endian; all ones for a missing one). The message is
        joined first, then given to the keyed HMAC in one update, not one per part."""
        chunks: list[bytes] = []
        append = chunks.append
        for part in (purpose, key, value):
            if part is None:
                append(_NONE_LENGTH)
            else:
                append(_pack_length(len(part)))
                append(part)
        for name, data in headers:
            if name == AUTH:
                continue
            encoded = name.encode()
            append(_pack_length(len(encoded)))
            append(encoded)
            if data is None:
                append(_NONE_LENGTH)
            else:
                append(_pack_length(len(data)))
                append(data)
        mac = self._macs[key_id].copy()  # a keyed state copied: OpenSSL 3 fetches the digest per new HMAC
        mac.update(b"".join(chunks))
        return mac.digest()

    def seal(
        self, purpose: bytes, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
    ) -> list[tuple[str, bytes]]:
        """``headers`` (any ``coffre-auth`` among them left out) followed by the record's tag."""
        kept = [(name, data) for name, data in headers if name != AUTH]
        tag = self._tag(self.signing_id, purpose, key, value, kept)
        return [*kept, (AUTH, self.signing_id.encode() + b":" + base64.b64encode(tag))]

    def unknown_key_id(self, headers: Sequence[tuple[str, bytes | None]]) -> str | None:
        """The key id that a record's one ``coffre-auth`` tag names, when it is well formed and this
        install has no key by that id, else None: a record another service signed with a key this one
        lacks (the services of one install were given different ``COFFRE_RECORD_KEYS_FILE``s, or a
        rotation step reached some of them only), told apart from a tag that does not verify."""
        tags = [data for name, data in headers if name == AUTH]
        if len(tags) != 1 or not tags[0]:
            return None
        key_id, sep, _ = tags[0].partition(b":")
        try:
            name = key_id.decode("ascii")
        except ValueError:
            return None
        if not sep or not _KEY_ID.fullmatch(name) or name in self._macs:
            return None
        return name

    def authentic(
        self,
        purpose: bytes,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> bool:
        """Whether the record carries exactly one ``coffre-auth`` header whose tag one of the keys
        verifies for this purpose, key, value and headers."""
        tags = [data for name, data in headers if name == AUTH]
        if len(tags) != 1 or not tags[0]:
            return False
        key_id, sep, encoded = tags[0].partition(b":")
        try:
            name = key_id.decode("ascii")
            given = base64.b64decode(encoded, validate=True)
        except ValueError:
            return False
        if not sep or name not in self._macs:
            return False
        return hmac.compare_digest(given, self._tag(name, purpose, key, value, headers))


def reserved_headers(headers: Iterable[tuple[str, bytes | None]]) -> list[str]:
    """The names of the headers among ``headers`` that only coffre may write."""
    return [name for name, _ in headers if name.startswith(RESERVED_PREFIX)]
