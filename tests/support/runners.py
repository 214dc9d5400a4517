"""The Node and Go runners of the conformance scenario (clients/conformance/scenario.json), as
the tests call them: each runs every step through its language's client against a target and
prints one proto3-JSON result per step.

`make test` builds them (clients/node/dist, build/bin). A runner that is not built is a skip,
unless MEMSVC_REQUIRE_CLIENTS names its language (`make test` sets it): then a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import ROOT

SCENARIO = ROOT / "clients" / "conformance" / "scenario.json"
NODE_RUNNER = ROOT / "clients" / "node" / "dist" / "conformance" / "run.js"
GO_RUNNER = ROOT / "build" / "bin" / "memsvc-conformance"
RUN_TIMEOUT = 120


def required(language: str, missing: str) -> None:
    """Skip for want of `missing`, or fail when MEMSVC_REQUIRE_CLIENTS names `language`."""
    if language in os.environ.get("MEMSVC_REQUIRE_CLIENTS", "").replace(",", " ").split():
        pytest.fail(f"MEMSVC_REQUIRE_CLIENTS has {language}, but {missing}")
    pytest.skip(missing)


def run_program(command: list[str], target: str, session: str) -> list[dict[str, Any]]:
    done = subprocess.run([*command, str(SCENARIO), target, session], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, cwd=ROOT, check=False)
    assert done.returncode == 0, f"{command[-1]} failed ({done.returncode}):\n{done.stderr}"
    return json.loads(done.stdout)["results"]


def scenario_runner(language: str) -> Callable[[str, str], list[dict[str, Any]]]:
    """`run(target, session)` for "node" or "go", or a skip (a failure when it is required)."""
    if language == "node":
        node = shutil.which("node")
        missing = "node is not installed" if node is None else (
            f"{NODE_RUNNER.relative_to(ROOT)} is not built (cd clients/node && npm ci && npm run build)"
            if not NODE_RUNNER.exists() else "")
        command = [node or "node", str(NODE_RUNNER)]
    else:
        missing = "" if GO_RUNNER.exists() else f"{GO_RUNNER.relative_to(ROOT)} is not built (make go-build)"
        command = [str(GO_RUNNER)]
    if missing:
        required(language, missing)
    return lambda target, session: run_program(command, target, session)
