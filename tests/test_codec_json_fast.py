"""The JSON reader's shortcuts give what the plain code gives (issue 31's speed): the structural
limits checked level by level refuse exactly what the depth-first walk refuses, with its message;
a one-line object file is not parsed to be split; a duplicate key is named as before."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coffre.domain import codec
from coffre.domain.errors import Rejected


def _refusal(check: Any, value: Any) -> str | None:
    try:
        check(value)
    except Rejected as exc:
        return str(exc)
    return None


def _nested(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 0 and roll < 0.3:
        return [_nested(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    if depth > 0 and roll < 0.6:
        return {str(k): _nested(rng, depth - 1) for k in range(rng.randint(0, 4))}
    return rng.choice((1, "x", None, True))


def test_the_limits_checked_level_by_level_refuse_what_the_walk_refuses(monkeypatch):
    monkeypatch.setattr(codec, "MAX_DEPTH", 6)
    monkeypatch.setattr(codec, "MAX_ELEMENTS", 60)
    rng = random.Random(31)
    refused = 0
    for _ in range(20_000):
        value = _nested(rng, rng.randint(0, 9))
        walked = _refusal(codec._check_json_walk, value)
        assert _refusal(codec._check_json, value) == walked, value
        refused += walked is not None
    assert 1_000 < refused < 19_000  # both kinds of input were met


def test_a_json_file_is_split_as_before():
    rng = random.Random(32)
    pieces = [b"{", b"}", b"\n", b"\r", b"\r\n", b" ", b"\t", b"\x0b", b"\x0c", b'"a":1', b",", b"[", b"]"]
    pieces += [b"\xef\xbb\xbf", b'"b":{"c":2}', b'{"d":3}\n']
    for _ in range(50_000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        if codec.sniff(raw) == "json":
            assert codec.split_documents(raw) == codec._split_parsed_json(raw), raw


@pytest.mark.parametrize(
    ("text", "key"),
    [('{"a": 1, "b": 2, "a": 3}', "a"), ('{"x": {"b": 1, "c": 2, "c": 3, "b": 4}}', "c")],
)
def test_a_duplicate_key_is_named(text, key):
    with pytest.raises(Rejected, match=f"key '{key}' appears twice in one object"):
        codec.parse_json(text.encode())
