"""The Chinese and Japanese section of the retrieval benchmark.

Source: the Chinese and Japanese dialogues of chatterbot-corpus 1.3.3
(BSD-3-Clause; https://github.com/gunthercox/chatterbot-corpus), as kept in
benchmarks/data/conversations.json, with the Chinese and Japanese queries
written for benchmarks/vectors.py, each naming the dialogues that answer it.
All the dialogues go into one session; a query is answered at k when a line
of one of its dialogues is among the first k hits. FTS5 with its default
tokenizer is shown beside (it cannot split text written without spaces), and
with the trigram tokenizer.
"""

from __future__ import annotations

import json
import statistics
import time

from baselines import Fts5
from common import ServerProcess
from vectors import DATA, QUERIES

SESSION = "cjk"
KS = (5, 8)


def run(default: ServerProcess, builtin: ServerProcess) -> dict:
    """Every mode of a server on the default settings beside one on the builtin embedder."""
    dialogues = [d for d in json.loads(DATA.read_text())["dialogues"] if d["key"].startswith(("chinese/", "japanese/"))]
    lines = [(d["key"], text) for d in dialogues for text in d["lines"]]
    queries = [(kind, text, set(keys)) for kind, text, keys in QUERIES if kind in ("chinese", "japanese")]
    keys: dict[int, str] = {}
    for server in (default, builtin):
        with server.client() as client:
            reply = client.append(SESSION, [("user" if n % 2 == 0 else "assistant", text)
                                            for n, (_, text) in enumerate(lines)])
            keys = {message.id: key for message, (key, _) in zip(reply.messages, lines, strict=True)}
            while client.search(SESSION, "settle", match="semantic", include_window=True, limit=1).unsearched:
                time.sleep(0.5)
    answers: dict[str, list[list[str]]] = {}
    engines = {"fts5": Fts5("unicode61"), "fts5-porter": Fts5("porter"), "fts5-trigram": Fts5("trigram")}
    for position, (_, text) in enumerate(lines):
        for engine in engines.values():
            engine.add(position, "User", text)
    for name, engine in engines.items():
        answers[name] = [[lines[at][0] for at in engine.search(text, max(KS))] for _, text, _ in queries]
    modes = {"keyword": (default, "keyword"), "semantic builtin": (builtin, "semantic"),
             "semantic (default)": (default, "semantic"), "hybrid": (default, "hybrid"),
             "hybrid builtin": (builtin, "hybrid")}
    for name, (server, match) in modes.items():
        with server.client() as client:
            answers[name] = []
            for _, text, _ in queries:
                hits = client.search(SESSION, text, match=match, limit=max(KS), include_window=True).hits
                best = sorted((h for h in hits if not h.is_context), key=lambda h: -h.score)
                answers[name].append([keys[h.message.id] for h in best])
    report: dict = {"source": "chatterbot-corpus 1.3.3 (BSD-3-Clause), Chinese and Japanese dialogues",
                    "messages": len(lines), "queries": len(queries), "modes": {}}
    for name, found in answers.items():
        report["modes"][name] = {f"hit@{k}": round(statistics.mean(bool(set(got[:k]) & want) for got, (_, _, want)
                                                                   in zip(found, queries, strict=True)), 3)
                                 for k in KS}
    report["summary"] = ", ".join(f"{name} hit@5 {row['hit@5']}" for name, row in report["modes"].items())
    return report
