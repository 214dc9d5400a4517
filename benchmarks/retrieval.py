"""Retrieval on real long conversations (RealMem): every match mode of a real
memsvc server, side by side in one run with three baselines computed here.

    make bench-retrieval                  (ARGS="--personas Kenta_Tanaka" for a quick run)
    .venv/bin/python benchmarks/retrieval.py [--data ../shared/data/realmem] [--model NAME] [--cache DIR]

Each persona is one memsvc session holding all its turns (benchmarks/realmem.py);
each query is asked with until_unix_nano = its own time, so only earlier turns
can be returned (the baselines filter the same way). Modes, through gRPC on
three servers over the same conversations: keyword; semantic with the builtin
embedder (server 1); semantic with the local model, hybrid (server 2);
hybrid + reranker (server 3: server 2's data, plus `reranker = http` to a
loopback /v1/rerank server scoring with --reranker-model: no cross-encoder
ships its weights in a package, so this is a stand-in that measures the
reranker path's cost, not a reranker's gain). Every query runs once per mode,
the modes in alternating order, beside a health Check (the floor).

Baselines (benchmarks/baselines.py), over the turns as "Speaker: content"
as RealMem's README has them: FTS5 bm25() over an OR of the query's words
(default tokenizer); the same with porter and English stop words dropped;
exact cosine with the same local model (numpy). Beside them, exact cosine
over the content alone (what memsvc embeds), which semantic search must
match: the index loses nothing.

Reported per mode: evidence recall@5 and @8, each without and with the
2-before/1-after expansion (the hits' neighbours among earlier turns), and
p50/p99 latency. The CJK set (benchmarks/cjk.py) runs on server 2.
Results: benchmarks/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cjk
import grpc
import numpy as np
import realmem
from baselines import MODELS, Embedded, Fts5, dense_exact
from common import ServerProcess, percentiles, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import Client
from tests.support.rerank_server import RerankServer

LIMIT = 8
KS = (5, 8)
DEFAULT_MODEL = "all-MiniLM-L6-v2"
CHUNK = 500


def ingest(client: Client, persona: realmem.Persona) -> dict[int, int]:
    """All the persona's turns into its session; memsvc id -> position. Empty turns cannot be stored."""
    positions = [p for p, turn in enumerate(persona.turns) if turn.content.strip()]
    found = {}
    for start in range(0, len(positions), CHUNK):
        chunk = positions[start:start + CHUNK]
        reply = client.append(persona.name, [
            {"role": persona.turns[p].role, "content": persona.turns[p].content,
             "send_at_unix_nano": persona.turns[p].send_at} for p in chunk])
        found.update({message.id: p for p, message in zip(chunk, reply.messages, strict=True)})
    return found


def settle(client: Client, persona: realmem.Persona) -> None:
    """Wait until every turn is embedded, so no timed search embeds a backlog."""
    while client.search(persona.name, "settle", include_window=True, limit=1, timeout=600).unsearched:
        time.sleep(1.0)


class Ranked:
    """What one mode returned for one query: positions best first, and everything returned."""

    def __init__(self, best: list[int], returned: set[int]):
        self.best, self.returned = best, returned


def ask(client: Client, persona: realmem.Persona, ids: dict[int, int], case: realmem.QueryCase,
        match: str) -> Ranked:
    hits = client.search(persona.name, case.text, match=match, limit=LIMIT, include_window=True,
                         until_unix_nano=persona.turns[case.position].send_at, timeout=60).hits
    matched = sorted((h for h in hits if not h.is_context), key=lambda h: -h.score)
    return Ranked([ids[h.message.id] for h in matched], {ids[h.message.id] for h in hits})


def scores(runs: dict[str, dict[int, Ranked]], cases: list[realmem.QueryCase]) -> dict[str, dict[str, float]]:
    table = {}
    for name, answers in runs.items():
        row = {}
        for k in KS:
            row[f"recall@{k}"] = statistics.mean(realmem.recall(c, answers[i].best[:k]) for i, c in enumerate(cases))
            row[f"recall@{k}+expansion"] = statistics.mean(
                realmem.recall(c, realmem.expanded(answers[i].best[:k], c.position)) for i, c in enumerate(cases))
        row["recall@8 as returned"] = statistics.mean(realmem.recall(c, answers[i].returned)
                                                      for i, c in enumerate(cases))
        table[name] = {key: round(value, 4) for key, value in row.items()}
    return table


DENSE = "dense-exact"
"The third baseline: exact cosine over the turns as the FTS5 baselines index them, 'Speaker: content'."
DENSE_SAME_TEXT = "dense-exact, memsvc's texts"
"Exact cosine over the content alone, what memsvc embeds: semantic search must lose nothing against it."


def baselines(personas: list[realmem.Persona], embedded: Embedded) -> dict[str, list[Ranked]]:
    runs: dict[str, list[Ranked]] = {name: [] for name in ("fts5", "fts5-porter", DENSE, DENSE_SAME_TEXT)}
    for persona in personas:
        engines = {"fts5": Fts5(porter=False), "fts5-porter": Fts5(porter=True)}
        speaker = {"user": "User", "assistant": "Assistant"}
        for position, turn in enumerate(persona.turns):
            for engine in engines.values():
                engine.add(position, speaker[turn.role], turn.content)
        matrices = {DENSE: embedded([f"{speaker[turn.role]}: {turn.content}" for turn in persona.turns], False),
                    DENSE_SAME_TEXT: embedded([turn.content for turn in persona.turns], False)}
        queries = embedded([case.text for case in persona.queries], True)
        for case, vector in zip(persona.queries, queries, strict=True):
            for name, engine in engines.items():
                best = engine.search(case.text, LIMIT, before=case.position)
                runs[name].append(Ranked(best, realmem.expanded(best, case.position)))
            for name, matrix in matrices.items():
                best = dense_exact(matrix, vector, case.position, LIMIT)
                runs[name].append(Ranked(best, realmem.expanded(best, case.position)))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=realmem.DEFAULT_DATA)
    parser.add_argument("--personas", default="", help="comma-separated names (default: all ten)")
    parser.add_argument("--model", default=DEFAULT_MODEL, choices=list(MODELS),
                        help="the local model (of the local-model extra) for semantic, hybrid and the dense baseline")
    parser.add_argument("--reranker-model", default=DEFAULT_MODEL, choices=list(MODELS),
                        help="what the loopback rerank server scores with (no cross-encoder ships in a package)")
    parser.add_argument("--cache", type=Path, default=None, help="reuse embeddings between runs (not in the repo)")
    args = parser.parse_args()
    personas = realmem.load(args.data, [n for n in args.personas.split(",") if n])
    cases = [case for persona in personas for case in persona.queries]
    load_start = os.getloadavg()
    embedded = Embedded(args.model, args.cache)
    started = time.perf_counter()
    base = baselines(personas, embedded)
    print(f"baselines: {len(cases)} queries, {time.perf_counter() - started:.0f} s", flush=True)
    model_flags = ["--embedder", "sentence-transformers", *local_model_flags(args.model)]
    reranker_model = Embedded(args.reranker_model, None)
    known: dict[str, np.ndarray] = {}

    def rerank(query: str, documents: list[str]) -> list[float]:
        """A stand-in rerank model: cosine by --reranker-model, each document embedded once."""
        new = [text for text in dict.fromkeys(documents) if text not in known]
        if new:
            known.update(zip(new, reranker_model(new, False), strict=True))
        question = reranker_model([query], True)[0]
        return [float(known[text] @ question) for text in documents]

    with tempfile.TemporaryDirectory(prefix="memsvc-bench-retrieval-") as tmp, RerankServer(rerank) as reranker:
        root = Path(tmp)
        builtin = ServerProcess(root / "builtin").start()
        local = ServerProcess(root / "local", *model_flags).start(timeout=120)
        ids: dict[str, dict[int, int]] = {}
        with builtin.client() as one, local.client() as two:
            for persona in personas:
                ids[persona.name] = ingest(one, persona)
                ingest(two, persona)
                settle(one, persona)
                settle(two, persona)
                print(f"{persona.name}: {len(persona.turns)} turns stored and embedded", flush=True)
        local.terminate()
        shutil.copytree(root / "local", root / "reranked")
        local.start(timeout=120)
        reranked = ServerProcess(root / "reranked", *model_flags, "--reranker", "http", "--reranker-base-url",
                                 reranker.base_url, "--reranker-timeout-seconds", "10").start(timeout=120)
        try:
            served, latency = serve(builtin, local, reranked, personas, ids)
            cjk_report = cjk.run(local, builtin)
        except Exception:
            for server in (builtin, local, reranked):
                print("".join(server.log_lines[-15:]))
            raise
        finally:
            for server in (builtin, local, reranked):
                server.terminate()
    runs = {**{name: dict(enumerate(answers)) for name, answers in base.items()}, **served}
    quality = scores(runs, cases)
    best_baseline = max(quality[name]["recall@8"] for name in ("fts5", "fts5-porter", DENSE))
    report = {"personas": [p.name for p in personas], "queries": len(cases), "model": args.model,
              "model_package": MODELS[args.model][0], "reranker_model": args.reranker_model,
              "quality": quality, "latency": latency, "cjk": cjk_report,
              "hybrid_over_best_baseline_recall@8": round(quality["hybrid"]["recall@8"] / best_baseline, 3),
              "hybrid_over_dense_same_text_recall@8": round(
                  quality["hybrid"]["recall@8"] / quality[DENSE_SAME_TEXT]["recall@8"], 3),
              "embedding": {"texts": embedded.texts, "seconds": round(embedded.seconds, 1)},
              "load_average": {"start": load_start[0], "end": os.getloadavg()[0]}, "cpus": os.cpu_count()}
    print(f"{'':34s} " + "  ".join(f"{key:>20s}" for key in next(iter(quality.values()))) + "   p50 ms  p99 ms")
    for name, row in quality.items():
        timing = latency.get(name, {})
        print(f"{name:34s} " + "  ".join(f"{value:20.4f}" for value in row.values())
              + (f"  {timing['p50_ms']:7.2f} {timing['p99_ms']:7.2f}" if timing else ""))
    print(f"health check floor: p50 {latency['health_check']['p50_ms']:.2f} ms")
    print(f"hybrid / best baseline recall@8: x{report['hybrid_over_best_baseline_recall@8']} (target >= 1.07); "
          f"/ exact cosine over memsvc's texts: x{report['hybrid_over_dense_same_text_recall@8']}")
    print(f"CJK: {cjk_report['summary']}")
    save("retrieval", report)


def local_model_flags(model: str) -> list[str]:
    """The server's embedding_model for a measured model: the local-model extra's default needs none."""
    return [] if model == DEFAULT_MODEL else ["--embedding-model", model]


def serve(builtin: ServerProcess, local: ServerProcess, reranked: ServerProcess, personas: list[realmem.Persona],
          ids: dict[str, dict[int, int]]) -> tuple[dict[str, dict[int, Ranked]], dict[str, dict]]:
    """Every query once per mode, modes alternating, beside a health check on server 2."""
    runs: dict[str, dict[int, Ranked]] = {}
    samples: dict[str, list[float]] = {}
    with builtin.client() as one, local.client() as two, reranked.client() as three, \
            grpc.insecure_channel(local.tcp) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        modes: dict[str, Callable[[realmem.Persona, realmem.QueryCase], Ranked | None]] = {
            "keyword": lambda p, c: ask(two, p, ids[p.name], c, "keyword"),
            "semantic builtin": lambda p, c: ask(one, p, ids[p.name], c, "semantic"),
            "semantic local model": lambda p, c: ask(two, p, ids[p.name], c, "semantic"),
            "hybrid": lambda p, c: ask(two, p, ids[p.name], c, "hybrid"),
            "hybrid+reranker": lambda p, c: ask(three, p, ids[p.name], c, "hybrid"),
            "health_check": lambda p, c: health.Check(health_pb2.HealthCheckRequest()) and None,
        }
        index = 0
        for persona in personas:
            for case in persona.queries:
                names = list(modes) if index % 2 == 0 else list(modes)[::-1]
                for name in names:
                    started = time.perf_counter()
                    answer = modes[name](persona, case)
                    samples.setdefault(name, []).append(time.perf_counter() - started)
                    if answer is not None:
                        runs.setdefault(name, {})[index] = answer
                index += 1
    return runs, {name: percentiles(values) for name, values in samples.items()}


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
