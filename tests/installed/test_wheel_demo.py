"""A wheel of coffre, installed into a fresh virtualenv, runs the demo from an empty folder
with nothing beside it: its events are package data, not files of the clone or of ``../shared``.

The wheel is built without build isolation when this virtualenv's setuptools can make wheels
(70.1 or newer, or with the ``wheel`` package); otherwise pip fetches setuptools and wheel into
an isolated build, from its cache or the package index, as ``scripts/run`` did to install coffre.
It is installed with ``--no-deps --no-index``, and the fresh virtualenv borrows this one's
dependencies through a ``.pth`` line (a plain path: this virtualenv's own ``.pth`` files, its
editable coffre among them, are not read, so ``coffre`` can come only from the wheel).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

PROJECT = Path(__file__).resolve().parents[2]
BUILD_INPUTS = ("pyproject.toml", "README.md", "coffre", "services")  # what the Dockerfile copies too


def setuptools_builds_wheels() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def run(*command: str | Path, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None):
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """coffre's wheel, built from a copy of the project's build inputs (the work tree stays clean)."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        origin = PROJECT / name
        if origin.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
            shutil.copytree(origin, source / name, ignore=ignore)
        else:
            shutil.copy2(origin, source / name)
    dist = tmp_path_factory.mktemp("dist")
    offline = ("--no-build-isolation", "--no-index") if setuptools_builds_wheels() else ()
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    run(*pip, "wheel", "--no-deps", *offline, "-w", dist, source, cwd=source)
    (built,) = dist.glob("coffre-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed; its ``bin`` folder."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv)
    python = venv / "bin" / "python"
    purelib = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=venv).stdout
    (Path(purelib.strip()) / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python)
    run(*pip, "install", "--no-deps", "--no-index", wheel, cwd=venv)
    return venv / "bin"


def test_the_wheel_holds_every_demo_event(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    events = {
        path.relative_to(PROJECT).as_posix()
        for path in (PROJECT / "coffre" / "demo" / "events").rglob("*")
        if path.suffix in (".xml", ".json")
    }
    assert len(events) == 72
    assert events <= names, sorted(events - names)
    assert "coffre/demo/README.md" in names


def test_the_installed_wheel_runs_the_demo_from_an_empty_folder(installed, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COFFRE_", "PYTHON", "VIRTUAL_ENV"))}
    # no regulator's file anywhere; no fixed port a parallel run could hold
    env |= {"COFFRE_ARJEL_REFERENCE": "/nonexistent", "COFFRE_OPS_PORT": "0", "COFFRE_API_PORT": "0"}
    where = run(
        installed / "python", "-c", "import coffre.demo; print(coffre.demo.__file__)", cwd=empty, env=env
    )
    assert where.stdout.startswith(str(installed.parent)), where.stdout  # the wheel's, not the clone's

    result = subprocess.run(
        [installed / "coffre", "up", "--demo", "--once"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert (
        len(re.findall(r": \w+ recorded, acquitted: IDOper 0099 IDCoffre [1-4] IDEvt \d+ chain ", out)) == 41
    ), out
    assert out.count("recorded without acquittal (synthesis event)") == 31, out
    assert "stopped: {'ingest': 0, 'vault': 0, 'acquittal': 0, 'auditor': 0, 'witness': 0}" in out, (
        out
    )  # API off
    assert "audit: the auditor reported the 4 event(s) the demo expects flagged" in out, out
    assert "  coffre 0099/1: 1 lot(s), 6 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in out, out
    assert "  coffre 0099/2: 1 lot(s), 21 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in out, out
    assert "  coffre 0099/3: 1 lot(s), 40 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in out, out
    assert "  coffre 0099/4: 1 lot(s), 5 event(s), 1 checkpoint(s), 1 cosignature(s): OK" in out, out
    assert sorted(p.name for p in empty.iterdir()) == ["var"]  # the data folder, in the current folder


def test_the_installed_console_has_its_pages_and_its_french(wheel, installed, tmp_path):
    names = set(zipfile.ZipFile(wheel).namelist())
    regulator = PROJECT / "services" / "regulator"
    shipped = {
        "coffre_regulator/" + path.relative_to(regulator).as_posix()
        for pattern in ("templates/*.html", "static/*.css", "locale/*/LC_MESSAGES/*.po")
        for path in regulator.glob(pattern)
    }
    assert any(name.endswith("messages.po") for name in shipped)
    assert shipped <= names, sorted(shipped - names)
    said = run(
        installed / "python",
        "-c",
        "from coffre_regulator import i18n; print(i18n.Language('fr').gettext('Search'), i18n.__file__)",
        cwd=tmp_path,
    ).stdout.split()
    assert said[0] == "Recherche" and said[1].startswith(str(installed.parent)), said
