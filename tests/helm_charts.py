"""What the chart tests share (tests/test_helm.py for the coffre chart, tests/helm/test_witness_chart.py
for the witness's): values files, their deep merge, and rendered manifests looked up by kind and name."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Deep merge, later layers win (like several `helm -f`); a None value deletes the key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            elif value is None:
                out.pop(key, None)
            else:
                out[key] = copy.deepcopy(value)
    return out


def render_manifests(
    chart: Any, values: dict[str, Any], *, name: str, namespace: str
) -> list[dict[str, Any]]:
    """Every manifest the chart renders with ``values`` (NOTES.txt left out), in path order."""
    manifests = chart.render(values, name=name, namespace=namespace)
    docs = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    return doc
