"""deploy/: the Dockerfile and the Kubernetes sidecar manifest, checked against the real settings.

No container engine runs here, so the Dockerfile is checked another way: its
instructions are parsed, the files it copies are built into a wheel exactly
as its `pip install` would, and its environment is loaded by memsvc's own
settings code. The manifest's effective settings (image environment, then the
pod's) must agree with its probes, ports and volumes, and a real server
started with them (paths moved under a temporary directory) must serve.
"""

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path, PurePosixPath

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.core import config
from memsvc_client import Client
from tests.support import ROOT, TEST_EMBEDDER
from tests.support.deploy import (
    container_environment,
    container_settings,
    dockerfile_instructions,
    final_stage,
    image_environment,
    memsvc_variables,
    port,
)

MANIFEST = ROOT / "deploy" / "kubernetes" / "memsvc-sidecar.yaml"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def documents() -> dict[str, dict]:
    return {document["kind"]: document for document in yaml.safe_load_all(MANIFEST.read_text())}


def pod() -> dict:
    return documents()["Deployment"]["spec"]["template"]["spec"]


def sidecar() -> dict:
    return next(container for container in pod()["initContainers"] if container["name"] == "memsvc")


def agent() -> dict:
    return next(container for container in pod()["containers"] if container["name"] == "agent")


def sidecar_settings() -> config.Settings:
    """What memsvc runs with in the pod: the image's environment, the pod's over it, the args as flags."""
    return container_settings(sidecar())


def mounted_volume(container: dict, path: str) -> tuple[dict, str]:
    """The pod volume holding `path` in `container`, and where it is mounted."""
    volumes = {volume["name"]: volume for volume in pod()["volumes"]}
    for mount in container["volumeMounts"]:
        if PurePosixPath(path).is_relative_to(mount["mountPath"]):
            return volumes[mount["name"]], mount["mountPath"]
    raise AssertionError(f"{path} is on no volume of container {container['name']}")


@pytest.fixture(scope="module")
def serve_help() -> str:
    return subprocess.run([sys.executable, "-m", "memsvc", "serve", "--help"], capture_output=True, text=True,
                          check=True, cwd=ROOT, env={"COLUMNS": "1000", "PATH": ""}).stdout


def test_every_variable_and_flag_used_exists_in_serve_help(serve_help):
    used = set(memsvc_variables(image_environment())) | set(memsvc_variables(container_environment(sidecar())))
    assert used, "the deploy files configure memsvc through MEMSVC_* variables"
    for variable in sorted(used):
        assert f"[env {variable}]" in serve_help, f"{variable} is not a memsvc setting"
    for flag in (argument for argument in sidecar().get("args", []) if argument.startswith("--")):
        assert f"{flag.split('=')[0]} " in serve_help, f"{flag} is not a memsvc flag"
    for container in pod()["containers"]:  # the agent's own variables must not look like memsvc settings
        assert not memsvc_variables(container_environment(container))


def test_the_image_runs_memsvc_serve_with_valid_settings():
    entrypoint = json.loads(dict(final_stage())["ENTRYPOINT"])
    assert entrypoint[:2] == ["memsvc", "serve"]
    assert PYPROJECT["project"]["scripts"]["memsvc"] == "memsvc.cli:main"
    settings = config.load({}, environ=memsvc_variables(image_environment()))
    exposed = {int(item) for name, arguments in final_stage() if name == "EXPOSE" for item in arguments.split()}
    assert exposed == {port(settings.health_listen), port(settings.metrics_listen)}
    assert not settings.health_listen.startswith("127.") and not settings.metrics_listen.startswith("127.")
    volumes = [json.loads(arguments) for name, arguments in final_stage() if name == "VOLUME"]
    assert [settings.data_dir] in volumes
    socket_directory = str(PurePosixPath(settings.listen[0].removeprefix("unix://")).parent)
    prepared = " ".join(arguments for name, arguments in final_stage() if name == "RUN")
    assert f"mkdir -p {settings.data_dir} {socket_directory}" in prepared
    assert f"chown 10001:10001 {settings.data_dir} {socket_directory}" in prepared
    assert dict(final_stage())["USER"] == "10001:10001"


def test_the_image_python_satisfies_requires_python():
    bases = [arguments.split()[0] for name, arguments in dockerfile_instructions() if name == "FROM"]
    assert bases and all(base.startswith("python:") for base in bases)
    minimum = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    for base in bases:
        version = base.split(":")[1].split("-")[0]
        assert tuple(map(int, version.split("."))) >= tuple(map(int, minimum.split(".")))


def test_the_files_the_dockerfile_copies_build_the_package(tmp_path):
    copied = tmp_path / "src"
    for name, arguments in dockerfile_instructions():
        if name == "COPY" and not arguments.startswith("--from"):
            *sources, target = arguments.split()
            for source in sources:
                origin = ROOT / source
                destination = copied / PurePosixPath(target).relative_to("/src")
                destination = destination / origin.name if target.endswith("/") else destination
                destination.parent.mkdir(parents=True, exist_ok=True)
                if origin.is_dir():
                    shutil.copytree(origin, destination, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(origin, destination)
    installed = [arguments.split() for name, arguments in dockerfile_instructions()
                 if name == "RUN" and "pip install" in arguments][0]
    sources = [copied / PurePosixPath(item).relative_to("/src") for item in installed if item.startswith("/src")]
    assert sources == [copied / "clients" / "python", copied], "the client package first: the server needs it"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--wheel-dir", str(tmp_path / "wheel"), *map(str, sources)],
                   check=True, capture_output=True, timeout=300)
    client = set(zipfile.ZipFile(next((tmp_path / "wheel").glob("memsvc_client-*.whl"))).namelist())
    assert {"memsvc_client/client.py", "memsvc_client/v1/memory_pb2.py", "memsvc_client/v1/fit_pb2.py",
            "memsvc_client/py.typed"} <= client
    wheel = next((tmp_path / "wheel").glob("memsvc-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"memsvc/cli/__init__.py", "memsvc/rpc/server.py", "memsvc/py.typed",
            "memsvc/summary/prompts/summary.v1.md", "memsvc/summary/prompts/tool_history.v1.md",
            "memsvc/fit/models.json", "memsvc/http/static/index.html",
            "memsvc/http/static/dashboard.js", "memsvc/http/static/dashboard.css"} <= names
    assert not any(name.startswith("memsvc/v1/") for name in names), "the stubs live once, in the client"
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "memsvc = memsvc.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_memsvc_is_a_native_sidecar_probed_on_its_health_port():
    settings = sidecar_settings()
    assert sidecar()["restartPolicy"] == "Always"
    health_port = port(settings.health_listen)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert sidecar()[probe]["grpc"]["port"] == health_port, probe
    ports = {entry["name"]: entry["containerPort"] for entry in sidecar()["ports"]}
    assert ports == {"health": health_port, "metrics": port(settings.metrics_listen)}
    annotations = documents()["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == port(settings.metrics_listen)
    assert pod()["terminationGracePeriodSeconds"] > settings.shutdown_grace_seconds


def test_socket_data_and_token_paths_agree_between_the_containers_and_the_volumes():
    settings = sidecar_settings()
    [socket_address] = settings.listen
    socket_path = socket_address.removeprefix("unix://")
    volume, mount = mounted_volume(sidecar(), socket_path)
    assert "emptyDir" in volume
    assert mounted_volume(agent(), socket_path) == (volume, mount)
    assert container_environment(agent())["MEMORY_SERVICE_ADDRESS"] == socket_address

    volume, _ = mounted_volume(sidecar(), settings.data_dir)
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert documents()["PersistentVolumeClaim"]["metadata"]["name"] == claim

    volume, mount = mounted_volume(sidecar(), settings.token_file)
    item = PurePosixPath(settings.token_file).relative_to(mount)
    assert {"key": "token", "path": str(item)} in volume["secret"]["items"]
    assert mounted_volume(agent(), container_environment(agent())["MEMORY_SERVICE_TOKEN_FILE"]) == (volume, mount)
    assert container_environment(agent())["MEMORY_SERVICE_TOKEN_FILE"] == settings.token_file


def test_both_containers_run_as_the_uid_that_owns_the_socket():
    uid = int(dict(final_stage())["USER"].split(":")[0])
    assert pod()["securityContext"]["runAsUser"] == uid
    for container in pod()["initContainers"] + pod()["containers"]:
        assert container.get("securityContext", {}).get("runAsUser", uid) == uid


def test_a_server_started_with_the_pods_settings_serves_its_probes_and_socket(tmp_path):
    """The pod's environment, with its paths moved under tmp_path and its ports made ephemeral."""
    settings = sidecar_settings()
    moved = {path: str(tmp_path / path.strip("/").replace("/", "_"))
             for path in (settings.data_dir, str(PurePosixPath(settings.listen[0].removeprefix("unix://")).parent),
                          str(PurePosixPath(settings.token_file).parent))}

    def relocate(value: str) -> str:
        for path, local in moved.items():
            value = value.replace(path, local)
        for address in (settings.health_listen, settings.metrics_listen):
            value = value.replace(address, "127.0.0.1:0")
        return value

    environment = {key: relocate(value) for key, value in
                   {**memsvc_variables(image_environment()), **container_environment(sidecar())}.items()}
    token_file = Path(environment["MEMSVC_TOKEN_FILE"])
    token_file.parent.mkdir(parents=True)
    token_file.write_text("pod-token\n")
    process = subprocess.Popen([sys.executable, "-m", "memsvc", "serve", *sidecar().get("args", []), *TEST_EMBEDDER],
                               env={"PATH": "", **environment}, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        serving = next(entry for line in process.stderr if (entry := json.loads(line)).get("event") == "serving")
        with grpc.insecure_channel(serving["health"]) as probes:
            assert health_pb2_grpc.HealthStub(probes).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
        with Client(relocate(container_environment(agent())["MEMORY_SERVICE_ADDRESS"]), token="pod-token") as memory:
            memory.append("pod", [("user", "hello from the agent container")])
        assert (Path(environment["MEMSVC_DATA_DIR"]) / "sessions" / "pod" / "history.json").exists()
    finally:
        process.terminate()
        process.wait(30)
