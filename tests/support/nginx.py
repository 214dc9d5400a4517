"""A real nginx for the sharding tests: Debian's `nginx` (scripts/install-proxies.sh, run by
`make test`) running deploy/nginx/nginx.conf with only its addresses moved (listeners to free
loopback ports, shards to the test servers', the pid file to a temp directory). Our own child,
dying with us. Without the package the tests that need it are skipped, unless
MEMSVC_REQUIRE_NGINX is set (`make test` sets it): then they fail."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support import ROOT, free_port
from tests.support.haproxy import accepts

CONFIG = ROOT / "deploy" / "nginx" / "nginx.conf"
INSTALL = "scripts/install-proxies.sh"


def require() -> None:
    if shutil.which("nginx") is None:
        reason = f"nginx is not installed (run {INSTALL} as root, or make test)"
        if os.environ.get("MEMSVC_REQUIRE_NGINX"):
            pytest.fail(f"MEMSVC_REQUIRE_NGINX is set, but {reason}")
        pytest.skip(reason)


class Nginx:
    def __init__(self, shards: Mapping[str, str]):
        self.root = Path(tempfile.mkdtemp(prefix="memsvc-nginx-"))
        ports = {"50051": free_port(), "50052": free_port()}
        self.target, self.next_target = (f"127.0.0.1:{ports[listen]}" for listen in ("50051", "50052"))
        config = CONFIG.read_text().replace("pid /run/nginx.pid;", f"pid {self.root / 'nginx.pid'};")
        for listen, local in ports.items():
            config = re.sub(rf"(?m)^(\s*listen ){listen}\b", rf"\g<1>127.0.0.1:{local}", config)
        for name, address in shards.items():
            config = re.sub(rf"(?m)^(\s*server ){re.escape(name)}:\d+\b", rf"\g<1>{address}", config)
        self.config_path = self.root / "nginx.conf"
        self.config_path.write_text(config)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Nginx:
        log = (self.root / "nginx.log").open("ab")
        self.process = subprocess.Popen(["setpriv", "--pdeathsig=SIGTERM", "--", "nginx", "-p", str(self.root), "-c",
                                         str(self.config_path), "-g", "daemon off;"],
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not accepts(self.target):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("nginx did not start:\n" + (self.root / "nginx.log").read_text(errors="replace"))
            time.sleep(0.05)
        return self

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)
