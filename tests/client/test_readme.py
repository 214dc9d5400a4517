"""The client README's adapter examples, run as written (only the server's address replaced) in a
fresh interpreter against a real server; the Agents SDK's model is the Responses stand-in on
loopback, reached through the environment variables the OpenAI client reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.responses_server import message

pytestmark = pytest.mark.in_process

README = ROOT / "clients" / "python" / "README.md"


def example(section: str) -> str:
    """The first Python code block under the README's heading `section`."""
    text = README.read_text().split(f"\n{section}\n", 1)[1]
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]


def run(code: str, directory: Path, env: dict[str, str] | None = None) -> list[str]:
    (directory / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], cwd=directory, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(("section", "printed"), [
    ("### LangChain", ["['What does billing run on?', 'On Postgres 16.', 'Where is it deployed?', 'In eu-west-1.']"]),
    ("### LlamaIndex", ["['What does billing run on?', 'On Postgres 16.']"]),
])
def test_an_adapter_example_runs_as_written(server, tmp_path, section, printed):
    assert run(example(section).replace("127.0.0.1:50051", server.tcp), tmp_path) == printed


def test_the_agents_sdk_example_runs_as_written(server, responses_server, tmp_path):
    answers = ["It is in Paris.", "It is 330 metres tall."]
    responses_server.script = lambda body: [message(answers[sum(item.get("role") == "user" for item in body["input"])
                                                            - 1], "msg_1")]
    env = {"OPENAI_BASE_URL": responses_server.base_url, "OPENAI_API_KEY": "k", "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    code = example("### OpenAI Agents SDK").replace("127.0.0.1:50051", server.tcp)
    assert run(code, tmp_path, env) == [*answers, "4"]
    assert [len(body["input"]) for body in responses_server.requests] == [1, 3], "the second run saw the first"
