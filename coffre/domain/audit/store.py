"""Where the checks across events keep their state: a key/value store of JSON-able values (a dict in
``coffre audit``, the auditor's faust tables in the service), shared by the money trail and the
tournament's checks."""

from __future__ import annotations

from typing import Any, Protocol


class TrailStore(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...

    def __setitem__(self, key: str, value: Any) -> None: ...


def forget(store: TrailStore, key: str) -> None:
    """Delete ``key`` where the store can (a dict, a faust table); else leave a null in its place."""
    try:
        del store[key]  # type: ignore[attr-defined]
    except KeyError:
        pass
    except (AttributeError, TypeError):
        store[key] = None
