"""pokerkit, imported with each kind of hand lookup built once.

pokerkit builds its hand lookups when ``pokerkit.hands`` is imported, one per hand class: the
standard high-hand table three times over (``StandardHighHand``, ``OmahaHoldemHand`` and
another), some 80 ms each, a third of ``coffre audit``'s start-up. This module, imported before
pokerkit (by :mod:`coffre.domain.audit`), lets the first lookup of a kind build its table and the
next ones share it: a table is never changed once built, and the entries are the same objects
the second build would have made equal. Nothing else of pokerkit is touched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

_MODULE = "pokerkit.lookups"


def share_tables(lookups: ModuleType) -> None:
    """Make each ``Lookup`` subclass build its table once and share it with its later instances."""
    lookup = lookups.Lookup
    if getattr(lookup, "_coffre_shared", False):
        return
    built: dict[type, Any] = {}
    build = lookup.__post_init__

    def __post_init__(self: Any) -> None:
        first = built.get(type(self))
        if first is None:
            build(self)
            built[type(self)] = self
            return
        self._Lookup__entries = first._Lookup__entries
        self._Lookup__entry_count = first._Lookup__entry_count

    lookup.__post_init__ = __post_init__
    lookup._coffre_shared = True


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        share_tables(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)  # once
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Before pokerkit is imported: share its tables. Already imported: nothing to gain."""
    if _MODULE not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
