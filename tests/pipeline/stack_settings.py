"""The settings of a pipeline test: the session broker, the test's own topics and data folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coffre.config import Settings

from ingest_fold import TEST_KEYS_TEXT


def stack_settings(bootstrap: str, topic_prefix: str, data_dir: Path, **overrides: Any) -> Settings:
    """3 partitions, no ops server and no regulator API, the tests' record keys, unless ``overrides``
    say otherwise."""
    return Settings(
        bootstrap_servers=bootstrap,
        topic_prefix=topic_prefix,
        data_dir=data_dir,
        **{"partitions": 3, "ops_port": 0, "api_port": 0, "record_keys": TEST_KEYS_TEXT, **overrides},
    )


def two_coffres_per_partition(partitions: int) -> tuple[int, ...]:
    """IDCoffre values from 30 on, two on each of ``partitions`` partitions (every vault or replica
    that holds a partition has coffres to record and seal), in order."""
    from coffre.domain.routing import coffre_partition

    found: dict[int, list[int]] = {}
    for coffre in range(30, 200):
        kept = found.setdefault(coffre_partition(coffre, partitions), [])
        if len(kept) < 2:
            kept.append(coffre)
    return tuple(sorted(c for cs in found.values() for c in cs))
