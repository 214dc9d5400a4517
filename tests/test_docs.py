"""The docs as a newcomer meets them: the README's first call runs against a real server, and every
link and file path the Markdown pages give leads to something that exists."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.in_process

SKIPPED = {".git", ".venv", "node_modules", "build"}
# Hidden folders are tools' (.pytest_cache/README.md appears after the first run, and a page collected
# by one test worker and not another stops the run).
PAGES = sorted(page for page in ROOT.rglob("*.md")
               if not any(part in SKIPPED or part.startswith(".") for part in page.relative_to(ROOT).parts))
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A path in backquotes from the repository's root, down to a file with an extension: `tests/e2e/test_deploy.py`.
FOLDERS = sorted(entry.name for entry in ROOT.iterdir() if entry.is_dir() and entry.name not in SKIPPED)
TOP = "|".join(map(re.escape, FOLDERS))
QUOTED_PATH = re.compile(rf"`((?:{TOP})/[\w./-]*\.[a-z]+)`")


def prose(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """The fragments a page's headings answer to, as GitHub renders them (repeats get -1, -2...)."""
    found: set[str] = set()
    for line in prose(page):
        if heading := re.match(r"#{1,6} (.*)", line):
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            repeat = 0
            while (slug if repeat == 0 else f"{slug}-{repeat}") in found:
                repeat += 1
            found.add(slug if repeat == 0 else f"{slug}-{repeat}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_and_path_of_a_page_exists(page):
    broken = []
    for line in prose(page):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):  # a link is never inside code
            if re.match(r"[a-z]+:", target):
                continue  # another site's address, or mailto:
            path, _, fragment = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(target)
            elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
                broken.append(target)
        broken += [path for path in QUOTED_PATH.findall(line) if not (ROOT / path).exists()]
    assert not broken, f"{page.relative_to(ROOT)} leads nowhere: {broken}"


def test_the_readme_names_its_two_commands_and_stays_short():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make serve" in readme and "make test" in readme
    assert len(readme.splitlines()) <= 200, "the reference belongs under docs/"


def test_the_readme_first_call_runs_against_a_real_server(server, tmp_path):
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick start", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    (tmp_path / "first_call.py").write_text(example.replace("127.0.0.1:50051", server.tcp))
    done = subprocess.run([sys.executable, "first_call.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    window, hits = done.stdout.splitlines()
    assert window == "['We deploy on Fridays?', 'No: never on Fridays.']"
    assert sorted(ast.literal_eval(hits)) == ["No: never on Fridays.", "We deploy on Fridays?"]
