"""Reading deploy/: the Dockerfile's instructions and environment, and the settings a container of a
Kubernetes manifest runs memsvc with. Shared by tests/e2e/test_deploy.py (the sidecar) and
tests/e2e/test_deploy_sharded.py (shards behind a proxy)."""

from __future__ import annotations

import shlex

from memsvc.cli import build_parser
from memsvc.core import config
from tests.support import ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        if line.strip():
            instruction, _, arguments = line.strip().partition(" ")
            found.append((instruction.upper(), " ".join(arguments.split())))
    return found


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(index for index, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[last_from:]


def image_environment() -> dict[str, str]:
    environment: dict[str, str] = {}
    for name, arguments in final_stage():
        if name == "ENV":
            environment.update(item.split("=", 1) for item in shlex.split(arguments))
    return environment


def memsvc_variables(environment: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in environment.items() if key.startswith(config.ENV_PREFIX)}


def port(address: str) -> int:
    return int(address.rpartition(":")[2])


def container_environment(container: dict) -> dict[str, str]:
    """The container's literal variables (those taken from the pod, valueFrom, are not here)."""
    return {variable["name"]: variable["value"] for variable in container.get("env", []) if "value" in variable}


def container_settings(container: dict, environment: dict[str, str] | None = None) -> config.Settings:
    """What memsvc runs with in `container`: the image's environment, the container's over it (with
    `environment` over both: values a manifest takes from the pod), its args as flags."""
    merged = {**memsvc_variables(image_environment()), **container_environment(container), **(environment or {})}
    flags = vars(build_parser().parse_args(["serve", *container.get("args", [])]))
    flags.pop("command")
    return config.load(flags, environ=merged)
