"""deploy/kubernetes/memsvc-sharded.yaml, checked against the real settings, the HAProxy file it
carries and itself, as tests/e2e/test_deploy.py checks the sidecar: no cluster runs here.

Each shard's settings (the image's environment, the StatefulSet's over it, shard_name from the
pod's name) load with memsvc's own settings code; the proxy's ring names every replica by that
name at its own Service; the ports, probes, volumes and secrets agree; the PostgreSQL the shards
use is the one the manifest runs; and a real server started with shard 0's settings (paths moved
under a temporary directory, the database pointed at the test PostgreSQL) serves as memsvc-0.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

import yaml

from memsvc_client import Client
from tests.support import ROOT, TEST_EMBEDDER
from tests.support.deploy import (
    container_environment,
    container_settings,
    final_stage,
    image_environment,
    memsvc_variables,
    port,
)
from tests.support.haproxy import CONFIG, FRONTENDS, ring
from tests.support.postgres import PostgresServer

MANIFEST = ROOT / "deploy" / "kubernetes" / "memsvc-sharded.yaml"


def documents() -> list[dict]:
    return list(yaml.safe_load_all(MANIFEST.read_text()))


def named(kind: str, name: str) -> dict:
    return next(document for document in documents() if document["kind"] == kind
                and document["metadata"]["name"] == name)


def shards() -> dict:
    return named("StatefulSet", "memsvc")


def shard_container() -> dict:
    return next(c for c in shards()["spec"]["template"]["spec"]["containers"] if c["name"] == "memsvc")


def pod_names() -> list[str]:
    return [f"memsvc-{index}" for index in range(shards()["spec"]["replicas"])]


def shard_settings(pod: str):
    """What the shard in pod `pod` runs with: the pod's name comes in through the downward API."""
    taken = {variable["name"]: variable["valueFrom"]["fieldRef"]["fieldPath"]
             for variable in shard_container()["env"] if "valueFrom" in variable}
    assert taken == {"MEMSVC_SHARD_NAME": "metadata.name"}
    return container_settings(shard_container(), {"MEMSVC_SHARD_NAME": pod})


def volume_of(template_spec: dict, container: dict, path: str, claims: list[dict] = ()) -> tuple[dict, str]:
    volumes = {volume["name"]: volume for volume in template_spec.get("volumes", [])}
    volumes.update({claim["metadata"]["name"]: {"claim": claim} for claim in claims})
    for mount in container["volumeMounts"]:
        if PurePosixPath(path).is_relative_to(mount["mountPath"]):
            return volumes[mount["name"]], mount["mountPath"]
    raise AssertionError(f"{path} is on no volume of {container['name']}")


def test_the_proxy_carries_the_tested_haproxy_file_unchanged():
    assert named("ConfigMap", "memsvc-proxy")["data"]["haproxy.cfg"] == CONFIG.read_text()


def test_every_replica_is_on_the_ring_by_its_shard_name_at_its_own_service():
    config = CONFIG.read_text()
    listen = {port(address) for address in shard_settings("memsvc-0").listen}
    assert len(listen) == 1
    [grpc_port] = listen
    expected = []
    for index, pod in enumerate(pod_names()):
        assert shard_settings(pod).shard_name == pod
        service = named("Service", pod)
        assert service["spec"]["selector"] == {"statefulset.kubernetes.io/pod-name": pod}
        assert [p["port"] for p in service["spec"]["ports"]] == [grpc_port]
        expected.append(f"server {pod} {pod}:{grpc_port} id {index + 1}")
    assert [line.removesuffix(" proto h2") for line in ring(config, "ring")] == expected
    assert ring(config, "ring-next") == ring(config, "ring"), "between reshardings ring-next is ring"
    assert ring(config, "any") == expected
    assert "balance hdr(memsvc-session)" in config and config.count("hash-type consistent") == 2


def test_ports_and_probes_agree_with_the_settings():
    settings = shard_settings("memsvc-0")
    container = shard_container()
    ports = {entry["name"]: entry["containerPort"] for entry in container["ports"]}
    assert ports == {"grpc": port(settings.listen[0]), "health": port(settings.health_listen),
                     "metrics": port(settings.metrics_listen)}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["grpc"]["port"] == ports["health"], probe
    annotations = shards()["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert shards()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > settings.shutdown_grace_seconds
    proxy = named("Service", "memsvc-proxy")
    binds = {frontend: int(address.lstrip(":")) for frontend, address in FRONTENDS.items()}
    assert {p["name"]: p["port"] for p in proxy["spec"]["ports"]} == {
        "grpc": binds["memsvc"], "grpc-next": binds["memsvc-next"], "stats": binds["stats"]}
    for frontend, address in FRONTENDS.items():
        assert re.search(rf"(?m)^frontend {frontend}\n\s+bind {re.escape(address)}\b", CONFIG.read_text()), frontend


def test_each_shard_keeps_its_data_on_a_volume_of_its_own_and_reads_its_secrets_from_files():
    settings = shard_settings("memsvc-0")
    template = shards()["spec"]["template"]["spec"]
    volume, _ = volume_of(template, shard_container(), settings.data_dir, shards()["spec"]["volumeClaimTemplates"])
    assert "ReadWriteOnce" in volume["claim"]["spec"]["accessModes"]
    for path, secret, key in ((settings.token_file, "memsvc-token", "token"),
                              (settings.lessons_password_file, "memsvc-postgres", "password")):
        volume, mount = volume_of(template, shard_container(), path)
        assert volume["secret"]["secretName"] == secret
        assert {"key": key, "path": str(PurePosixPath(path).relative_to(mount))} in volume["secret"]["items"]
    assert template["securityContext"]["runAsUser"] == int(dict(final_stage())["USER"].split(":")[0])


def test_the_shards_share_the_postgresql_the_manifest_runs():
    settings = shard_settings("memsvc-0")
    assert settings.lessons_backend == "postgres"
    dsn = dict(item.split("=", 1) for item in settings.lessons_dsn.split())
    database = named("StatefulSet", "postgres")["spec"]["template"]["spec"]
    [container] = database["containers"]
    environment = container_environment(container)
    assert dsn["host"] == named("Service", "postgres")["metadata"]["name"]
    assert int(dsn["port"]) == named("Service", "postgres")["spec"]["ports"][0]["port"] == \
        container["ports"][0]["containerPort"]
    assert (dsn["dbname"], dsn["user"]) == (environment["POSTGRES_DB"], environment["POSTGRES_USER"])
    volume, mount = volume_of(database, container, environment["POSTGRES_PASSWORD_FILE"])
    assert volume["secret"]["secretName"] == "memsvc-postgres", "the password memsvc reads is the server's"
    assert "password" not in settings.lessons_dsn


def test_every_variable_used_is_a_memsvc_setting():
    helped = subprocess.run([sys.executable, "-m", "memsvc", "serve", "--help"], capture_output=True, text=True,
                            check=True, cwd=ROOT, env={"COLUMNS": "1000", "PATH": ""}).stdout
    used = {variable["name"] for variable in shard_container()["env"] if variable["name"].startswith("MEMSVC_")}
    for variable in sorted(used | set(memsvc_variables(image_environment()))):
        assert f"[env {variable}]" in helped, variable


def test_a_server_started_with_shard_zeros_settings_serves_as_memsvc_0(tmp_path: Path, postgres: PostgresServer):
    settings = shard_settings("memsvc-0")
    database = postgres.create_database()
    try:
        environment = {**memsvc_variables(image_environment()), **container_environment(shard_container())}
        environment.update({
            "MEMSVC_SHARD_NAME": "memsvc-0", "MEMSVC_DATA_DIR": str(tmp_path / "data"),
            "MEMSVC_LISTEN": "127.0.0.1:0", "MEMSVC_HEALTH_LISTEN": "127.0.0.1:0", "MEMSVC_METRICS_LISTEN": "",
            "MEMSVC_TOKEN_FILE": str(tmp_path / "token"), "MEMSVC_LESSONS_DSN": postgres.dsn(database),
            "MEMSVC_LESSONS_PASSWORD_FILE": str(postgres.password_file)})
        assert set(environment) >= {f"MEMSVC_{name.upper()}" for name in ("lessons_backend", "shard_name")}
        (tmp_path / "token").write_text("shard-token\n")
        process = subprocess.Popen([sys.executable, "-m", "memsvc", "serve", *TEST_EMBEDDER],
                                   env={"PATH": "", **environment}, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        try:
            assert process.stderr is not None
            serving = next(entry for line in process.stderr if (entry := json.loads(line)).get("event") == "serving")
            with Client(serving["addresses"][0], token="shard-token") as memory:
                assert memory.get_server_info().shard_name == "memsvc-0" == settings.shard_name
                assert memory.record_error("web_fetch", "HTTP 451", "use the mirror").stored
        finally:
            process.terminate()
            process.wait(30)
    finally:
        postgres.drop_database(database)
