"""The embedded broker's producer linger that ``coffre up`` gives its services. bench/soak.py itself runs
in tests/pipeline/test_chaos_soak.py (a short soak with a hit of every kind: what it prints, its JSON,
the outside check); ``--baseline`` is not run in the suite (two stacks): see bench/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffre.adapters import kafka
from coffre.commands.stack import EMBEDDED_LINGER_MS, SERVICES, Stack
from coffre.config import Settings


def test_coffre_up_lingers_its_producers_on_the_embedded_broker_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(kafka.LINGER_VARIABLE, raising=False)
    stack = Stack(Settings(data_dir=tmp_path))
    stack._embedded_defaults()
    for name in SERVICES:
        assert stack.env(name)[kafka.LINGER_VARIABLE] == str(EMBEDDED_LINGER_MS)
    assert kafka.LINGER_VARIABLE not in Stack(Settings(data_dir=tmp_path), bootstrap="kafka:9092").env(
        "ingest"
    )

    monkeypatch.setenv(kafka.LINGER_VARIABLE, "0")  # the operator's choice wins
    stack = Stack(Settings(data_dir=tmp_path))
    stack._embedded_defaults()
    assert stack.env("vault")[kafka.LINGER_VARIABLE] == "0"


@pytest.mark.parametrize(("value", "linger"), [("", 0), ("7", 7), ("-3", 0), ("5000", 1000), ("soon", 0)])
def test_the_linger_variable(monkeypatch: pytest.MonkeyPatch, value: str, linger: int) -> None:
    monkeypatch.setenv(kafka.LINGER_VARIABLE, value)
    assert kafka._linger_ms() == linger
