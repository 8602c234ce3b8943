"""The HTTPS client of a ``coffre witness`` (and of an RFC 3161 TSA, which is a POST too).

Blocking calls on the standard library (``urllib`` with an ``ssl`` context), meant for threads:
the vault's evidence collector submits checkpoints, ``coffre verify --witness URL`` reads
what the witness cosigned. Every answer is bounded in size and every call in time.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from coffre.domain.limits import MAX_ID
from coffre.domain.witness import AddCheckpoint, Refusal, parse_origin

MAX_ANSWER_BYTES = 16 << 20
"""The largest answer read from a witness (the list of every coffre it witnesses) or a TSA."""


class Unreachable(Exception):
    """No answer (refused, timed out, TLS failure) or an answer that is not the protocol's:
    worth retrying later."""


@dataclass(frozen=True, slots=True)
class WitnessedCheckpoint:
    """The newest checkpoint a witness says it cosigned for one coffre (its cosigned note is
    checked by whoever holds the witness's public key)."""

    id_oper: str
    id_coffre: int
    size: int
    root: bytes
    note: bytes


def ssl_context(ca: Path | None) -> ssl.SSLContext:
    """Verify the server against ``ca`` (a PEM bundle), or the system's CAs when None."""
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def post(
    url: str, body: bytes, content_type: str, *, context: ssl.SSLContext | None, timeout: float
) -> tuple[int, str, bytes]:
    """(status, content type, body) of a POST; :class:`Unreachable` when there is no HTTP answer."""
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    return _send(request, context, timeout)


def get(url: str, *, context: ssl.SSLContext | None, timeout: float) -> tuple[int, str, bytes]:
    return _send(urllib.request.Request(url, method="GET"), context, timeout)


def _send(
    request: urllib.request.Request, context: ssl.SSLContext | None, timeout: float
) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), _read(answer)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", ""), _read(exc)
    except (OSError, ValueError) as exc:  # URLError, timeouts, TLS errors, a reset
        raise Unreachable(f"{request.full_url}: {getattr(exc, 'reason', exc)}") from None


def _read(answer: object) -> bytes:
    data = answer.read(MAX_ANSWER_BYTES + 1)  # type: ignore[attr-defined]
    if len(data) > MAX_ANSWER_BYTES:
        raise Unreachable(f"an answer of more than {MAX_ANSWER_BYTES} bytes")
    return data


class WitnessClient:
    """One witness, at ``url`` (its base, e.g. ``https://witness.anj.example:8444``)."""

    def __init__(self, url: str, *, ca: Path | None = None, timeout: float = 5.0) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"a witness URL is https://…: {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.context = ssl_context(ca) if url.startswith("https://") else None

    def add_checkpoint(self, request: AddCheckpoint) -> bytes:
        """The witness's signature line(s) over the checkpoint; :class:`Refusal` (the witness's
        kind, message and, for a ``conflict``, its size) when it will not cosign."""
        status, content_type, body = post(
            f"{self.url}/add-checkpoint",
            request.encode(),
            "text/plain",
            context=self.context,
            timeout=self.timeout,
        )
        if status == 200:
            return body
        text = body.decode("utf-8", "replace").strip()
        if status == 409 and content_type.startswith("text/x.tlog.size"):
            if not text.isdigit():
                raise Unreachable(f"a 409 whose size is not a number: {text[:80]!r}")
            raise Refusal("conflict", f"the witness holds {text} events", size=int(text))
        kind, _, message = text.partition(": ")
        if kind in Refusal.STATUS and Refusal.STATUS[kind] == status:
            raise Refusal(kind, message)
        raise Unreachable(f"the witness answered {status}: {text[:200]}")

    def checkpoints(self) -> list[WitnessedCheckpoint]:
        """Every coffre's newest cosigned checkpoint, as the witness lists them."""
        status, _, body = get(f"{self.url}/checkpoints", context=self.context, timeout=self.timeout)
        if status != 200:
            raise Unreachable(f"GET /checkpoints answered {status}")
        try:
            entries = json.loads(body)["coffres"]
            return [_entry(entry) for entry in entries]
        except (ValueError, KeyError, TypeError) as exc:
            raise Unreachable(f"GET /checkpoints: not the witness's list: {exc}") from None

    def checkpoint(self, id_oper: str, id_coffre: int) -> WitnessedCheckpoint | None:
        status, _, body = get(
            f"{self.url}/checkpoints/{id_oper}/{id_coffre}", context=self.context, timeout=self.timeout
        )
        if status == 404:
            return None
        if status != 200:
            raise Unreachable(f"GET /checkpoints/{id_oper}/{id_coffre} answered {status}")
        try:
            return _entry(json.loads(body))
        except (ValueError, KeyError, TypeError) as exc:
            raise Unreachable(f"not the witness's entry: {exc}") from None


def _entry(entry: dict[str, object]) -> WitnessedCheckpoint:
    coffre = parse_origin(str(entry["origin"]))
    size, root = entry["tree_size"], bytes.fromhex(str(entry["root"]))
    if coffre is None or not isinstance(size, int) or not 0 < size <= MAX_ID or len(root) != 32:
        raise ValueError("an entry without a coffre origin, a size or a root")
    return WitnessedCheckpoint(coffre[0], coffre[1], size, root, str(entry["note"]).encode())
