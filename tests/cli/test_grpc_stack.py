"""memsvc's commands pick grpc's classic I/O layer before grpc is imported, unless the operator chose."""

import os
import subprocess
import sys

from memsvc.cli.grpc_stack import CLASSIC_IO
from tests.support import ROOT

# Prints the GRPC_EXPERIMENTS grpc finds when it is first imported.
WATCH = """
import os, sys
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "grpc":
            print(os.environ.get("GRPC_EXPERIMENTS"))
            sys.meta_path.remove(self)
sys.meta_path.insert(0, Watch())
import memsvc.cli  # as `memsvc serve` does, then what it runs
import memsvc.rpc.server
"""


def grpc_sees(**env: str) -> str:
    base = {name: value for name, value in os.environ.items() if name != "GRPC_EXPERIMENTS"}
    return subprocess.run([sys.executable, "-c", WATCH], env={**base, **env}, cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_grpc_is_imported_with_the_classic_io_layer():
    assert grpc_sees() == CLASSIC_IO


def test_an_operators_choice_is_kept_even_an_empty_one():
    assert grpc_sees(GRPC_EXPERIMENTS="event_engine_client") == "event_engine_client"
    assert grpc_sees(GRPC_EXPERIMENTS="") == ""
