"""The regulator's own tool, xmlsec1, as the independent check of coffre's signatures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def xmlsec1_verify(document: Path, cert: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``xmlsec1 --verify`` of ``document`` trusting ``cert`` (skips the test when xmlsec1 is absent;
    .ci/run installs it)."""
    binary = shutil.which("xmlsec1")
    if binary is None:
        pytest.skip("xmlsec1 is not installed (.ci/run installs it)")
    return subprocess.run(
        [binary, "--verify", "--enabled-key-data", "x509", "--trusted-pem", str(cert), *extra, str(document)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
