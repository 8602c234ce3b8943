"""Every package of the source tree is in the wheel: pyproject.toml lists the packages by name
(setuptools' explicit list), and a package forgotten there is missing only from an installed coffre
(coffre/commands was, for the wheel's `coffre up --demo`: ModuleNotFoundError). The installed wheel's
demo is tests/installed/test_wheel_demo.py; this says which package is missing, at once."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_source_tree_is_listed_for_the_wheel():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {name: ROOT / path for name, path in setuptools["package-dir"].items()}
    folders["coffre"] = ROOT / "coffre"
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    assert found - listed == set()
