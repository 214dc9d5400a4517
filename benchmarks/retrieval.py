"""Retrieval on real conversations: every match mode of a real memsvc server
on its default settings, side by side in one run with three baselines
computed here, on RealMem and on both halves of MADial (English, Chinese);
then the default embedder's cost beside the torch path.

    make bench-retrieval                  (ARGS="--personas Kenta_Tanaka" for a quick run)
    .venv/bin/python benchmarks/retrieval.py [--data ../shared/data/realmem] [--madial ../shared/data/madial]
        [--personas A,B] [--cache DIR] [--with-reranker] [--cost-rounds 100]

RealMem (benchmarks/realmem.py): each persona is one session holding all its
turns; each query is asked with until_unix_nano = its own time, so only
earlier turns can be returned. MADial (benchmarks/madial.py): each user's
memories are one session; a query is the dialogue before a test turn. Every
query is asked with include_window, so the window skips nothing.

Modes, through gRPC on two servers over the same messages: the default
server (`memsvc serve` with no embedder flag, what `make serve` gives: the
all-minilm-l6-v2 embedder): keyword, semantic, hybrid and a Search naming no
match (hybrid); and a builtin server (`embedder = builtin`, the
tiny-footprint setting): semantic and hybrid. With --with-reranker, a third
server (the default server's data, plus `reranker = http` to a loopback
/v1/rerank server scoring with the default model: no cross-encoder ships its
weights in a package, so this measures the reranker path's cost, not a
reranker's gain). Every query runs once per mode, the modes in alternating
order, beside a health Check (the floor).

Baselines (benchmarks/baselines.py), over the same message texts: FTS5
bm25() over an OR of the query's words (default tokenizer; trigram for
Chinese, over the query's character triples); the same with porter and
English stop words dropped; exact cosine with the default embedder, memsvc's
own MiniLMEmbedder in this process (the vectors the default server stores),
which semantic search must match: the index loses nothing.

Reported per set and mode: recall@5 and @8 of the matches (context excluded);
RealMem also with the 2-before/1-after expansion; p50/p99 latency on RealMem.
One persona (Kenta_Tanaka, when it is among those run) is also reported alone,
beside `memsvc eval` (the real CLI, a subprocess) run on the same session of
the same servers with the questions examples/eval/realmem.py writes. The CJK
set (benchmarks/cjk.py) runs too. Last, with the servers stopped, the default
embedder's cost beside torch's (benchmarks/vectors.py's `cost`: query
embedding p50, messages per second on one core, .venv growth, server RSS).
Results: benchmarks/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cjk
import grpc
import madial
import msgspec
import numpy as np
import realmem
from baselines import DEFAULT, MODELS, Embedded, Fts5, dense_exact
from common import ServerProcess, percentiles, save
from grpc_health.v1 import health_pb2, health_pb2_grpc
from vectors import cost as embedder_cost

from memsvc_client import Client
from tests.support.rerank_server import RerankServer

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 8
KS = (5, 8)
CHUNK = 500
DENSE = "dense-exact"
NO_MODE = "hybrid, no match named"
PERSONA = "Kenta_Tanaka"
"The RealMem persona also reported alone, beside `memsvc eval` on its session."
EVAL_MODES = {"default": {"keyword": "keyword", "semantic": "semantic", "hybrid": "hybrid"},
              "builtin": {"semantic": "semantic builtin", "hybrid": "hybrid builtin"}}
"Per server, `memsvc eval`'s mode -> the row of this benchmark it measures again."


class Said(msgspec.Struct, frozen=True):
    role: str
    content: str
    send_at: int
    name: int
    "What the set's gold calls it: a RealMem turn's position, a MADial memory's id."


class Asked(msgspec.Struct, frozen=True):
    session: str
    text: str
    until: int
    "0: no bound."
    gold: list[list[int]]
    "Evidence items, each found when any of its names is returned."
    position: int = -1
    "RealMem: the query's position, for the expansion among earlier turns."


class Yardstick(msgspec.Struct):
    name: str
    sessions: dict[str, list[Said]]
    "Session id -> messages in time order."
    cases: list[Asked]
    trigram: bool = False
    "Text without spaces: the FTS5 baseline uses the trigram tokenizer."


def yardsticks(args: argparse.Namespace) -> list[Yardstick]:
    personas = realmem.load(args.data, [n for n in args.personas.split(",") if n])
    sets = [Yardstick("realmem", {p.name: [Said(t.role, t.content, t.send_at, at) for at, t in enumerate(p.turns)
                                           if t.content.strip()] for p in personas},
                      [Asked(p.name, c.text, p.turns[c.position].send_at, [sorted(g.positions) for g in c.gold],
                             c.position) for p in personas for c in p.queries])]
    for language in madial.LANGUAGES:
        half = madial.load(args.madial, language)
        sets.append(Yardstick(f"madial-{language}", {
            f"madial-{language}-{user}": [Said("user", m.content, m.send_at, m.id) for m in memories]
            for user, memories in half.sessions.items()},
            [Asked(f"madial-{language}-{c.user}", c.text, 0, [[id_] for id_ in sorted(c.gold)]) for c in half.cases],
            trigram=language == "zh"))
    return sets


def ingest(client: Client, session: str, messages: list[Said]) -> dict[int, int]:
    """The messages into their session; memsvc id -> name."""
    found = {}
    for start in range(0, len(messages), CHUNK):
        chunk = messages[start:start + CHUNK]
        reply = client.append(session, [{"role": m.role, "content": m.content, "send_at_unix_nano": m.send_at}
                                        for m in chunk])
        found.update({message.id: m.name for m, message in zip(chunk, reply.messages, strict=True)})
    return found


def settle(client: Client, session: str) -> None:
    """Wait until every message is embedded, so no timed search embeds a backlog."""
    while client.search(session, "settle", match="semantic", include_window=True, limit=1, timeout=600).unsearched:
        time.sleep(1.0)


class Ranked:
    """What one mode returned for one query: names best first, and everything returned."""

    def __init__(self, best: list[int], returned: set[int]):
        self.best, self.returned = best, returned


def ask(client: Client, ids: dict[int, int], case: Asked, match: str | None) -> Ranked:
    hits = client.search(case.session, case.text, match=match, limit=LIMIT, include_window=True,
                         until_unix_nano=case.until, timeout=60).hits
    matched = sorted((h for h in hits if not h.is_context), key=lambda h: -h.score)
    return Ranked([ids[h.message.id] for h in matched], {ids[h.message.id] for h in hits})


def recall(case: Asked, returned: list[int] | set[int]) -> float:
    found = set(returned)
    return sum(1 for item in case.gold if found.intersection(item)) / len(case.gold)


def scores(runs: dict[str, list[Ranked]], cases: list[Asked]) -> dict[str, dict[str, float]]:
    table = {}
    for name, answers in runs.items():
        row = {}
        for k in KS:
            row[f"recall@{k}"] = statistics.mean(recall(c, a.best[:k]) for c, a in zip(cases, answers, strict=True))
            if cases[0].position >= 0:
                row[f"recall@{k}+expansion"] = statistics.mean(
                    recall(c, realmem.expanded(a.best[:k], c.position)) for c, a in zip(cases, answers, strict=True))
        table[name] = {key: round(value, 4) for key, value in row.items()}
    return table


def baselines(yardstick: Yardstick, embedded: Embedded) -> dict[str, list[Ranked]]:
    """FTS5, stemmed FTS5 and exact cosine, each query seeing only the messages sent before its bound."""
    runs: dict[str, list[Ranked]] = {name: [] for name in ("fts5", "fts5-porter", DENSE)}
    by_session: dict[str, list[Asked]] = {}
    for case in yardstick.cases:
        by_session.setdefault(case.session, []).append(case)
    answers: dict[int, dict[str, list[int]]] = {}
    for session, cases in by_session.items():
        messages = yardstick.sessions[session]
        engines = {"fts5": Fts5("trigram" if yardstick.trigram else "unicode61"), "fts5-porter": Fts5("porter")}
        for at, message in enumerate(messages):
            for engine in engines.values():
                engine.add(at, message.role.capitalize(), message.content)
        matrix = embedded([message.content for message in messages], False)
        vectors = embedded([case.text for case in cases], True)
        send_at = [message.send_at for message in messages]
        for case, vector in zip(cases, vectors, strict=True):
            before = bisect.bisect_left(send_at, case.until) if case.until else len(messages)
            found = {name: engine.search(case.text, LIMIT, before=before) for name, engine in engines.items()}
            found[DENSE] = dense_exact(matrix, vector, before, LIMIT)
            answers[id(case)] = {name: [messages[at].name for at in ats] for name, ats in found.items()}
    for case in yardstick.cases:
        for name, best in answers[id(case)].items():
            runs[name].append(Ranked(best, set(best)))
    return runs


def modes(builtin: Client, default: Client, reranked: Client | None) -> dict[str, tuple[Client, str | None]]:
    found: dict[str, tuple[Client, str | None]] = {
        "keyword": (default, "keyword"), "semantic builtin": (builtin, "semantic"),
        "hybrid builtin": (builtin, "hybrid"), "semantic": (default, "semantic"), "hybrid": (default, "hybrid"),
        NO_MODE: (default, None)}
    if reranked is not None:
        found["hybrid+reranker"] = (reranked, "hybrid")
    return found


def serve(servers: list[ServerProcess], yardstick: Yardstick, ids: dict[str, dict[int, int]]
          ) -> tuple[dict[str, list[Ranked]], dict[str, dict]]:
    """Every query once per mode, modes alternating, beside a health check on the default server."""
    runs: dict[str, list[Ranked]] = {}
    samples: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(server.client()) for server in servers]
        health = health_pb2_grpc.HealthStub(stack.enter_context(grpc.insecure_channel(servers[1].tcp)))
        asked = modes(clients[0], clients[1], clients[2] if len(clients) > 2 else None)
        calls: dict[str, Callable[[Asked], Ranked | None]] = {
            name: lambda case, client=client, match=match: ask(client, ids[case.session], case, match)
            for name, (client, match) in asked.items()}
        calls["health_check"] = lambda case: health.Check(health_pb2.HealthCheckRequest()) and None
        for index, case in enumerate(yardstick.cases):
            for name in (list(calls) if index % 2 == 0 else list(calls)[::-1]):
                started = time.perf_counter()
                answer = calls[name](case)
                samples.setdefault(name, []).append(time.perf_counter() - started)
                if answer is not None:
                    runs.setdefault(name, []).append(answer)
    return runs, {name: percentiles(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=realmem.DEFAULT_DATA)
    parser.add_argument("--madial", type=Path, default=madial.DEFAULT_DATA)
    parser.add_argument("--personas", default="", help="comma-separated RealMem names (default: all ten)")
    parser.add_argument("--cache", type=Path, default=None, help="reuse embeddings between runs (not in the repo)")
    parser.add_argument("--with-reranker", action="store_true", help="also hybrid + a loopback reranker (slower)")
    parser.add_argument("--cost-rounds", type=int, default=100, help="query embedding rounds of the cost rows")
    args = parser.parse_args()
    sets = yardsticks(args)
    load_start = os.getloadavg()
    started = time.perf_counter()
    embedded = Embedded(DEFAULT, args.cache)
    known: dict[str, np.ndarray] = {}

    def rerank(query: str, documents: list[str]) -> list[float]:
        """A stand-in rerank model: cosine by the default embedder, each document embedded once."""
        new = [text for text in dict.fromkeys(documents) if text not in known]
        if new:
            known.update(zip(new, embedded(new, False), strict=True))
        question = embedded([query], True)[0]
        return [float(known[text] @ question) for text in documents]

    report: dict = {"embedder": DEFAULT, "embedder_package": MODELS[DEFAULT][0], "sets": {}}
    with tempfile.TemporaryDirectory(prefix="memsvc-bench-retrieval-") as tmp, RerankServer(rerank) as reranker:
        root = Path(tmp)
        servers = [ServerProcess(root / "builtin").start(),
                   ServerProcess(root / "default", default_embedder=True).start(120)]
        ids: dict[str, dict[int, int]] = {}
        with servers[0].client() as one, servers[1].client() as two:
            for yardstick in sets:
                for session, messages in yardstick.sessions.items():
                    ids[session] = ingest(one, session, messages)
                    ingest(two, session, messages)
            # The servers embed in the background meanwhile: the baselines' embedding runs beside them.
            base = {yardstick.name: baselines(yardstick, embedded) for yardstick in sets}
            print(f"baselines: {time.perf_counter() - started:.0f} s", flush=True)
            for session in ids:
                settle(one, session)
                settle(two, session)
        print(f"stored and embedded: {time.perf_counter() - started:.0f} s", flush=True)
        report["servers_embedders"] = {"builtin": stored_embedder(root / "builtin"),
                                       "default": stored_embedder(root / "default")}
        if args.with_reranker:
            servers[1].terminate()
            shutil.copytree(root / "default", root / "reranked")
            servers[1].start(timeout=120)
            servers.append(ServerProcess(root / "reranked", "--reranker", "http", "--reranker-base-url",
                                         reranker.base_url, "--reranker-timeout-seconds", "10",
                                         default_embedder=True).start(timeout=120))
        try:
            for yardstick in sets:
                served, latency = serve(servers, yardstick, ids)
                quality = scores({**base[yardstick.name], **served}, yardstick.cases)
                report["sets"][yardstick.name] = {"queries": len(yardstick.cases), "quality": quality,
                                                  "hybrid_over_better_part_recall@8": over_parts(quality)}
                if yardstick.name == "realmem":
                    report["sets"][yardstick.name]["latency"] = latency
                    if PERSONA in yardstick.sessions:
                        report["session"] = one_session(args.data, root, {"builtin": servers[0],
                                                                          "default": servers[1]},
                                                        yardstick, served, ids[PERSONA])
            report["cjk"] = cjk.run(servers[1], servers[0])
        except Exception:
            for server in servers:
                print("".join(server.log_lines[-15:]))
            raise
        finally:
            for server in servers:
                server.terminate()
    report.update({"personas": sorted(sets[0].sessions), "embedding": {"texts": embedded.texts,
                                                                       "seconds": round(embedded.seconds, 1)},
                   "seconds": round(time.perf_counter() - started), "cpus": os.cpu_count(),
                   "load_average": {"start": load_start[0], "end": os.getloadavg()[0]}})
    # With every server stopped, so the embedders' cost is measured on a machine this run no longer loads.
    report["embedder_cost"] = embedder_cost(args.cost_rounds)
    report["seconds_with_cost"] = round(time.perf_counter() - started)
    show(report)
    save("retrieval", report)


def stored_embedder(data_dir: Path) -> list[str]:
    """The embedders a server's vector manifests name: proof of what it ran, whatever its flags said."""
    return sorted({json.loads(path.read_text())["embedder"]
                   for path in data_dir.glob(".store/vectors/**/manifest.json")})


def one_session(data: Path, root: Path, servers: dict[str, ServerProcess], yardstick: Yardstick,
                served: dict[str, list[Ranked]], names: dict[int, int]) -> dict:
    """PERSONA's recall@8 per mode as this benchmark measured it, beside `memsvc eval` run on the same
    session of the same servers with examples/eval/realmem.py's questions, and how many questions' matches
    differ between the two."""
    cases = [case for case in yardstick.cases if case.session == PERSONA]
    alone = scores({name: [answer for case, answer in zip(yardstick.cases, answers, strict=True)
                           if case.session == PERSONA] for name, answers in served.items()}, cases)
    files = root / "eval"
    subprocess.run([sys.executable, str(ROOT / "examples" / "eval" / "realmem.py"), PERSONA, str(files),
                    "--data", str(data)], check=True, cwd=ROOT)
    rows: dict[str, dict] = {}
    for label, modes_of in EVAL_MODES.items():
        written = files / f"report-{label}.json"
        subprocess.run([sys.executable, "-m", "memsvc", "--target", servers[label].tcp, "--timeout", "600", "eval",
                        PERSONA, str(files / "questions.jsonl"), "-k", str(LIMIT), "--report", str(written),
                        *(flag for mode in modes_of for flag in ("--mode", mode))], check=True, cwd=ROOT)
        evaluated = json.loads(written.read_text())
        for found in evaluated["modes"]:
            row = modes_of[found["mode"]]
            ours = [answer.best[:LIMIT] for case, answer in zip(yardstick.cases, served[row], strict=True)
                    if case.session == PERSONA]
            theirs = [[names[id_] for id_ in asked["found_ids"]] for asked in found["questions"]]
            rows[row] = {"bench_recall@8": alone[row]["recall@8"], "eval_recall@8": round(found["recall_at_k"], 4),
                         "bench_questions": len(cases), "eval_questions": evaluated["questions"],
                         "questions_with_other_matches": differing(cases, ours, found["questions"], theirs)}
    return {"persona": PERSONA, "quality": alone, "beside_eval": rows}


def differing(cases: list[Asked], ours: list[list[int]], asked: list[dict], theirs: list[list[int]]) -> int:
    """Questions whose best matches differ between this benchmark and eval, each eval question paired with
    the next case of the same text (eval leaves out questions with nothing left to find)."""
    count, at = 0, 0
    for question, found in zip(asked, theirs, strict=True):
        while cases[at].text != question["question"]:
            at += 1
        count += ours[at] != found
        at += 1
    return count


def over_parts(quality: dict[str, dict[str, float]]) -> dict[str, float]:
    """Hybrid's recall@8 over the better of its own parts (keyword and the same server's semantic)."""
    return {"default": round(quality["hybrid"]["recall@8"] / max(quality["keyword"]["recall@8"],
                                                                 quality["semantic"]["recall@8"]), 3),
            "builtin": round(quality["hybrid builtin"]["recall@8"] / max(quality["keyword"]["recall@8"],
                                                                         quality["semantic builtin"]["recall@8"]), 3)}


def show(report: dict) -> None:
    for name, found in report["sets"].items():
        quality, latency = found["quality"], found.get("latency", {})
        print(f"\n{name} ({found['queries']} queries)")
        table(quality, latency)
        print(f"hybrid / better of its parts, recall@8: {found['hybrid_over_better_part_recall@8']}")
    if "session" in report:
        session = report["session"]
        print(f"\n{session['persona']} alone")
        table(session["quality"], {})
        print(f"\n{'beside memsvc eval':30s} {'bench recall@8':>15s} {'eval recall@8':>14s} {'questions':>10s} "
              f"{'other matches':>14s}")
        for mode, row in session["beside_eval"].items():
            print(f"{mode:30s} {row['bench_recall@8']:15.4f} {row['eval_recall@8']:14.4f} "
                  f"{row['bench_questions']:>4d}/{row['eval_questions']:<5d} {row['questions_with_other_matches']:14d}")
    print(f"\nCJK: {report['cjk']['summary']}\nservers' stored embedders: {report['servers_embedders']}")
    cost = report["embedder_cost"]
    print(f"\nembedder cost (load {cost['load']:.1f} -> {cost['load_after']:.1f}) {'':8s}"
          + "".join(f"{name:>32s}" for name in cost["messages_per_second_one_core"]))
    rows = {"query embedding p50 ms": {name: timing["p50_ms"] for name, timing in cost["query_embedding"].items()},
            "messages/s, one core": cost["messages_per_second_one_core"],
            ".venv growth MB": {name: grown["mb"] for name, grown in cost["venv_mb"].items()},
            "server RSS MB": {name: cost["server_rss_mb"][server] for name, server in
                              (("numpy (default)", "all-minilm-l6-v2"),
                               ("torch (sentence-transformers)", "sentence-transformers"))
                              if server in cost["server_rss_mb"]}}
    for label, row in rows.items():
        print(f"{label:44s}" + "".join(f"{value:32.1f}" for value in row.values()))
    print(f"server RSS MB, builtin: {cost['server_rss_mb']['builtin']:.1f}")
    print(f"\n{report['seconds']} s (+ cost rows: {report['seconds_with_cost']} s) on {report['cpus']} CPUs")


def table(quality: dict[str, dict[str, float]], latency: dict[str, dict]) -> None:
    print(f"{'':30s} " + "  ".join(f"{key:>20s}" for key in quality["keyword"]) + "   p50 ms  p99 ms")
    for mode, row in quality.items():
        timing = latency.get(mode)
        print(f"{mode:30s} " + "  ".join(f"{value:20.4f}" for value in row.values())
              + (f"  {timing['p50_ms']:7.2f} {timing['p99_ms']:7.2f}" if timing else ""))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
