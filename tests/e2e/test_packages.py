"""Each client package as its users get it: built from the tree, installed alone where nothing
of the repo is, and its README's quick start run against a real server. Every package carries
the contract's version (proto/VERSION) and the Apache-2.0 licence.

Python: `python -m build` (an sdist, then the wheel from it) into a fresh venv. Node: `npm pack` of
a copy of the client, then `npm install` of the tarball into an empty project. Go: the package copied into a fresh
GOPATH and `go build` in GOPATH mode (DESIGN: no module proxy here), with Debian's grpc-go.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import memsvc_client
from tests.support import ROOT
from tests.support.runners import required

pytestmark = pytest.mark.in_process

CONTRACT_VERSION = (ROOT / "proto" / "VERSION").read_text().strip()
CLIENT_PROJECT = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
SERVER_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NODE_PACKAGE = json.loads((ROOT / "clients" / "node" / "package.json").read_text())
GO_CLIENT = ROOT / "clients" / "go"
INSTALL_TIMEOUT = 600
# What `pip install` of the client may bring: itself and grpcio's and protobuf's own.
CLIENT_DISTRIBUTIONS = {"memsvc-client", "grpcio", "grpcio-status", "protobuf", "googleapis-common-protos",
                        "typing-extensions", "pip", "setuptools"}


def quick_start(readme: Path, language: str) -> str:
    """The first code block in `language` under the README's "## Quick start"."""
    section = readme.read_text().split("## Quick start", 1)[1]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_every_package_carries_the_contract_version():
    go_version = re.search(r'const Version = "([^"]+)"', (GO_CLIENT / "version.go").read_text()).group(1)  # type: ignore[union-attr]
    assert CLIENT_PROJECT["version"] == memsvc_client.__version__ == NODE_PACKAGE["version"] == go_version == \
        CONTRACT_VERSION
    assert f"memsvc-client=={CONTRACT_VERSION}" in SERVER_PROJECT["dependencies"], "the server needs its stubs"


def test_every_package_is_apache_2():
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert SERVER_PROJECT["license"] == CLIENT_PROJECT["license"] == NODE_PACKAGE["license"] == "Apache-2.0"
    for package in ("python", "node", "go"):
        assert (ROOT / "clients" / package / "LICENSE").read_text() == licence, package


def test_the_python_client_installs_alone_and_its_quick_start_runs(server, tmp_path):
    run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(ROOT / "clients" / "python")],
        cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob(f"memsvc_client-{CONTRACT_VERSION}-*.whl"))
    assert next((tmp_path / "dist").glob(f"memsvc_client-{CONTRACT_VERSION}.tar.gz"))
    run([sys.executable, "-m", "venv", str(tmp_path / "venv")], cwd=tmp_path)
    python = str(tmp_path / "venv" / "bin" / "python")
    run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], cwd=tmp_path)
    installed = {entry["name"].lower().replace("_", "-") for entry in json.loads(
        run([python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"], cwd=tmp_path))}
    assert installed <= CLIENT_DISTRIBUTIONS, f"more than the client's own: {installed - CLIENT_DISTRIBUTIONS}"
    example = quick_start(ROOT / "clients" / "python" / "README.md", "python").replace("127.0.0.1:50051", server.tcp)
    (tmp_path / "example.py").write_text(example)
    output = run([python, "example.py"], cwd=tmp_path).splitlines()  # run outside the repo: no source on the path
    assert output[0] == "['We deploy on Fridays?', 'No: never on Fridays.']"
    assert sorted(output[1:]) == ["recent assistant No: never on Fridays.", "recent user We deploy on Fridays?"]
    # The framework adapters come with the wheel, their frameworks only with the extras.
    for module, extra in (("langchain", "langchain"), ("openai_agents", "openai-agents"), ("llamaindex", "llamaindex")):
        failed = subprocess.run([python, "-c", f"import memsvc_client.{module}"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=60, check=False)
        assert failed.returncode == 1 and f"pip install 'memsvc-client[{extra}]'" in failed.stderr, failed.stderr
    metadata = run([python, "-c", "from importlib.metadata import metadata; "
                                  "print(metadata('memsvc-client').get_all('Provides-Extra'))"], cwd=tmp_path)
    assert metadata.strip() == "['langchain', 'openai-agents', 'llamaindex']"


def test_the_node_client_packs_installs_and_its_quick_start_runs(server, tmp_path):
    npm = shutil.which("npm")
    if npm is None or not (ROOT / "clients" / "node" / "node_modules").is_dir():
        required("node", "npm or clients/node/node_modules is missing (make node-install)")
    # Packed from a copy: `npm pack` rebuilds dist/ (prepack), which the tree's conformance runner and the
    # other workers' tests use meanwhile.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "clients" / "node", source, ignore=shutil.ignore_patterns("dist", "node_modules"))
    (source / "node_modules").symlink_to(ROOT / "clients" / "node" / "node_modules")
    run([npm, "pack", "--silent", "--pack-destination", str(tmp_path)], cwd=source)
    tarball = tmp_path / f"memsvc-client-{CONTRACT_VERSION}.tgz"
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "agent", "private": True, "type": "module"}))
    run([npm, "install", "--no-audit", "--no-fund", "--prefer-offline", "--omit=dev", str(tarball)], cwd=app)
    assert not (app / "node_modules" / "typescript").exists(), "dev dependencies stay out"
    installed = json.loads((app / "node_modules" / "@memsvc" / "client" / "package.json").read_text())
    assert installed["version"] == CONTRACT_VERSION and installed["license"] == "Apache-2.0"
    example = quick_start(ROOT / "clients" / "node" / "README.md", "js").replace("127.0.0.1:50051", server.tcp)
    (app / "example.mjs").write_text(example)
    output = run(["node", "example.mjs"], cwd=app).splitlines()
    assert output[0] == '["We deploy on Fridays?","No: never on Fridays."]'
    assert sorted(output[1:]) == ["RECENT ASSISTANT No: never on Fridays.", "RECENT USER We deploy on Fridays?"]


def test_the_go_client_builds_from_a_copy_and_its_quick_start_runs(server, tmp_path):
    go = shutil.which("go")
    if go is None or not Path("/usr/share/gocode/src/google.golang.org/grpc").is_dir():
        required("go", "go or Debian's grpc-go is missing (make go-tools)")
    package = tmp_path / "gopath" / "src" / "memsvc.dev" / "clients" / "go"
    shutil.copytree(GO_CLIENT, package, ignore=shutil.ignore_patterns("*_test.go", "internal", "conformance"))
    example = tmp_path / "gopath" / "src" / "agent"
    example.mkdir()
    (example / "main.go").write_text(quick_start(GO_CLIENT / "README.md", "go").replace("127.0.0.1:50051", server.tcp))
    env = {"GO111MODULE": "off", "GOFLAGS": "", "GOPATH": f"{tmp_path / 'gopath'}:/usr/share/gocode",
           "GOCACHE": str(ROOT / "build" / "go-cache")}
    run([go, "build", "-o", str(tmp_path / "agent"), "agent"], cwd=example, env=env)
    output = run([str(tmp_path / "agent")], cwd=tmp_path).splitlines()
    assert output[0] == "[We deploy on Fridays? No: never on Fridays.]"
    assert sorted(output[1:]) == ["recent assistant No: never on Fridays.", "recent user We deploy on Fridays?"]
