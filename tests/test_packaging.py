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


RUN_TIME_DATA = (
    "coffre/domain/audit/rules.md",  # the rules table the console shows (docs/rules.md links to it)
    "services/regulator/locale/fr/LC_MESSAGES/findings.po",  # the finding codes' French meanings
    "services/regulator/templates/rules.html",
)
"""Files read at run time that are not Python: a wheel has them only if package-data names them."""


def test_the_files_read_at_run_time_are_package_data():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {name: ROOT / path for name, path in setuptools["package-dir"].items()}

    def folder(package: str) -> Path:
        top, *rest = package.split(".")
        return folders.get(top, ROOT / top).joinpath(*rest)

    shipped = {
        path.resolve()
        for package, patterns in setuptools["package-data"].items()
        for pattern in patterns
        for path in folder(package).glob(pattern)
    }
    for name in RUN_TIME_DATA:
        file = ROOT / name
        assert file.is_file() and not file.is_symlink(), name  # a link would ship only on some builds
        assert file.resolve() in shipped, name
