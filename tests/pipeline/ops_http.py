"""Reading a service's /healthz, /readyz and /metrics in tests."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

from coffre.commands.stack import Stack


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def wait_ready(stack: Stack, name: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        status, body = get(f"http://127.0.0.1:{stack.ops_port(name)}/readyz")
        if status == 200:
            return json.loads(body)
        time.sleep(0.3)
    raise AssertionError(f"{name} not ready after {timeout}s: {body}")


def metric(stack: Stack, name: str, metric_name: str, labels: str = "") -> float:
    """The sum of a metric's samples whose labels contain ``labels`` (e.g. 'reason="X"')."""
    status, text = get(f"http://127.0.0.1:{stack.ops_port(name)}/metrics")
    assert status == 200
    total = 0.0
    for line in text.splitlines():
        if re.match(rf"{metric_name}(\{{.*\}})? ", line) and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
