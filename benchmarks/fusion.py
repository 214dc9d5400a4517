"""How hybrid search fuses, chosen by measurement: candidate pools of memsvc's
keyword search and of exact dense search, gathered once per RealMem query,
then fused every way considered (weighted reciprocal rank over weights, k and
pool sizes, with and without neighbour smoothing; min-max normalized score
fusion over weights), and the embedding models compared on the same queries
(recall, CPU seconds per message, and hit@k on the CJK set of cjk.py).

    .venv/bin/python benchmarks/fusion.py [--data ../shared/data/realmem] [--models all-MiniLM-L6-v2,...]

Keyword pools come from memsvc's own KeywordSearch (archive + recent index,
in process: the ranking the server serves); dense pools from numpy over the
model's vectors of each turn's content (what the server's exact scan returns
below 20,000 vectors). Results: benchmarks/results/fusion.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import realmem
from baselines import MODELS, Embedded, Fts5, available, dense_exact
from common import save
from vectors import DATA, QUERIES

from memsvc.app import App
from memsvc.core import config
from memsvc.search.hybrid import fuse
from memsvc.search.query import Bounds, Query
from memsvc.window.incoming import NewMessage

POOL = 200
KS = (5, 8)


def keyword_pools(persona: realmem.Persona, data_dir: Path) -> dict[int, tuple[list[int], list[float]]]:
    """memsvc keyword search's top POOL earlier turns (positions, scores) for each query, in process.

    As in benchmarks/retrieval.py, the whole conversation is stored and each query bounded by its own time.
    """
    app = App(config.load({"data_dir": str(data_dir), "embedder": "builtin"}))
    try:
        stored = [p for p, turn in enumerate(persona.turns) if turn.content.strip()]
        position_of: dict[int, int] = {}
        for start in range(0, len(stored), 500):  # empty turns cannot be appended (nothing to find there)
            chunk = stored[start:start + 500]
            appended = app.tenant().appender.append(persona.name, [NewMessage(
                role=persona.turns[p].role, content=persona.turns[p].content, send_at=persona.turns[p].send_at)
                for p in chunk])
            position_of.update({record.id: p for p, record in zip(chunk, appended.records, strict=True)})
        app.tenant().archive.flush(timeout=600)
        pools = {}
        for case in persona.queries:
            until = persona.turns[case.position].send_at
            query = Query(session_id=persona.name, text=case.text, match="keyword")
            found = app.tenant().searcher.keyword.ranked(query, Bounds(POOL, 0, until))
            pools[case.position] = ([position_of[hit.record.id] for hit in found.hits],
                                    [hit.score for hit in found.hits])
    finally:
        app.close()
    return pools


def minmax(ids: list[int], scores: list[float], weight: float) -> dict[int, float]:
    if not ids:
        return {}
    low, high = min(scores), max(scores)
    span = (high - low) or 1.0
    return {id_: weight * (score - low) / span for id_, score in zip(ids, scores, strict=True)}


def neighbours(fused: dict[int, float], share: float) -> dict[int, float]:
    """Each candidate also gets `share` of its better neighbour's score (the turn before or after)."""
    return {id_: score + share * max(fused.get(id_ - 1, 0.0), fused.get(id_ + 1, 0.0)) for id_, score in fused.items()}


def fusions(keyword: dict[int, tuple[list[int], list[float]]], dense: dict[int, tuple[list[int], list[float]]],
            cases: list[realmem.QueryCase]) -> dict[str, dict[int, list[int]]]:
    runs: dict[str, dict[int, list[int]]] = {}
    for pool, k, weight in itertools.product((50, 100, 200), (10, 30, 60, 100), (0.5, 0.75, 1.0, 1.5, 2.0)):
        name = f"rrf pool={pool} k={k} keyword_weight={weight}"
        runs[name] = {}
        for case in cases:
            fused = fuse([(keyword[case.position][0][:pool], weight), (dense[case.position][0][:pool], 1.0)], k)
            runs[name][case.position] = sorted(fused, key=lambda id_: (-fused[id_], -id_))
    for pool, k, weight, spread in itertools.product((50, 100), (10, 30, 60), (1.0, 1.5), (0.25, 0.5, 0.75)):
        name = f"rrf+neighbours pool={pool} k={k} keyword_weight={weight} neighbour_share={spread}"
        runs[name] = {}
        for case in cases:
            fused = fuse([(keyword[case.position][0][:pool], weight), (dense[case.position][0][:pool], 1.0)], k)
            near = neighbours(fused, spread)
            runs[name][case.position] = sorted(near, key=lambda id_: (-near[id_], -id_))
    for pool, weight in itertools.product((50, 100, 200), (0.2, 0.3, 0.4, 0.5, 0.7)):
        name = f"minmax pool={pool} keyword_weight={weight}"
        runs[name] = {}
        for case in cases:
            kid, ksc = keyword[case.position]
            did, dsc = dense[case.position]
            fused = minmax(kid[:pool], ksc[:pool], weight)
            for id_, score in minmax(did[:pool], dsc[:pool], 1 - weight).items():
                fused[id_] = fused.get(id_, 0.0) + score
            runs[name][case.position] = sorted(fused, key=lambda id_: (-fused[id_], -id_))
    return runs


def cjk_hits(embedded: Embedded) -> dict[str, float]:
    """hit@5 and @8 of exact cosine on the CJK set of benchmarks/cjk.py (chatterbot-corpus, BSD-3-Clause)."""
    dialogues = [d for d in json.loads(DATA.read_text())["dialogues"] if d["key"].startswith(("chinese/", "japanese/"))]
    lines = [(d["key"], text) for d in dialogues for text in d["lines"]]
    queries = [(text, set(keys)) for kind, text, keys in QUERIES if kind in ("chinese", "japanese")]
    matrix = embedded([text for _, text in lines], False)
    found = {5: [], 8: []}
    for (_, wanted), vector in zip(queries, embedded([text for text, _ in queries], True), strict=True):
        order = np.argsort(-(matrix @ vector))
        for k, hits in found.items():
            hits.append(bool({lines[at][0] for at in order[:k]} & wanted))
    return {f"hit@{k}": round(statistics.mean(hits), 3) for k, hits in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=realmem.DEFAULT_DATA)
    parser.add_argument("--personas", default="", help="comma-separated names (default: all)")
    parser.add_argument("--models", default="all-MiniLM-L6-v2", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--cache", type=Path, default=None, help="keep embeddings here between runs (not in the repo)")
    args = parser.parse_args()
    personas = realmem.load(args.data, [n for n in args.personas.split(",") if n])
    cases = [case for persona in personas for case in persona.queries]
    models = [name for name in args.models.split(",") if available(name)]
    runs: dict[str, dict[int, list[int]]] = {}
    keyword: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
    dense: dict[str, dict[tuple[str, int], tuple[list[int], list[float]]]] = {name: {} for name in models}
    cost = {}
    embedded = {name: Embedded(name, args.cache) for name in models}
    for persona in personas:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="memsvc-fusion-") as tmp:
            for position, pool in keyword_pools(persona, Path(tmp)).items():
                keyword[(persona.name, position)] = pool
        baselines = {"fts5": Fts5(porter=False), "fts5-porter": Fts5(porter=True)}
        for position, turn in enumerate(persona.turns):
            for engine in baselines.values():
                engine.add(position, "User" if turn.role == "user" else "Assistant", turn.content)
        for case in persona.queries:
            for name, engine in baselines.items():
                runs.setdefault(name, {})[(persona.name, case.position)] = engine.search(case.text, POOL,
                                                                                        before=case.position)
        for name in models:
            matrix = embedded[name]([turn.content for turn in persona.turns], False)
            queries = embedded[name]([case.text for case in persona.queries], True)
            for case, vector in zip(persona.queries, queries, strict=True):
                ids = dense_exact(matrix, vector, case.position, POOL)
                dense[name][(persona.name, case.position)] = (ids, [float(matrix[i] @ vector) for i in ids])
        print(f"{persona.name}: {len(persona.queries)} queries, {time.perf_counter() - started:.0f} s", flush=True)
    report: dict[str, object] = {}
    # Runs are keyed by (persona, position) while gathering; by case index from here on.
    index = {(c.persona, c.position): i for i, c in enumerate(cases)}
    rekeyed = [realmem.QueryCase(c.persona, i, c.text, c.gold) for i, c in enumerate(cases)]

    def by_case(run: dict[tuple[str, int], list[int]]) -> dict[int, list[int]]:
        return {index[key]: ids for key, ids in run.items()}

    positions = {i: c.position for i, c in enumerate(cases)}
    table = {name: by_case(run) for name, run in runs.items()}
    table["memsvc keyword"] = by_case({key: pool[0] for key, pool in keyword.items()})
    for name in models:
        table[f"dense {name}"] = by_case({key: pool[0] for key, pool in dense[name].items()})
    report["lists"] = _measure_by_case(table, cases, positions)
    best_model = max(models, key=lambda name: report["lists"][f"dense {name}"]["recall@8"])  # type: ignore[index]
    k_pools = by_case_pools(keyword, index)
    report["fusions"] = {}
    for name in models:
        fused = fusions(k_pools, by_case_pools(dense[name], index), rekeyed)
        measured = _measure_by_case(fused, cases, positions)
        report["fusions"][name] = dict(sorted(measured.items(), key=lambda item: -item[1]["recall@8"]))  # type: ignore[index]
    report["cjk"] = {name: cjk_hits(Embedded(name, args.cache)) for name in models}
    for name in models:
        cost[name] = {"texts": embedded[name].texts, "seconds": round(embedded[name].seconds, 1),
                      "ms_per_message": round(1e3 * embedded[name].seconds / max(1, embedded[name].texts), 2),
                      "package": MODELS[name][0]}
    report["models"] = cost
    report["best_dense_model"] = best_model
    for name, row in report["lists"].items():  # type: ignore[union-attr]
        print(f"{name:40s} {row}")
    for name in models:
        for label, row in list(report["fusions"][name].items())[:5]:  # type: ignore[index]
            print(f"{name} {label:45s} {row}")
    print(cost)
    save("fusion", report)


def by_case_pools(pools: dict[tuple[str, int], tuple[list[int], list[float]]],
                  index: dict[tuple[str, int], int]) -> dict[int, tuple[list[int], list[float]]]:
    return {index[key]: pool for key, pool in pools.items()}


def _measure_by_case(runs: dict[str, dict[int, list[int]]], cases: list[realmem.QueryCase],
                     positions: dict[int, int]) -> dict[str, dict[str, float]]:
    report = {}
    for name, ranked in runs.items():
        row = {}
        for k in KS:
            row[f"recall@{k}"] = statistics.mean(realmem.recall(c, ranked[i][:k]) for i, c in enumerate(cases))
            row[f"recall@{k}+expansion"] = statistics.mean(
                realmem.recall(c, realmem.expanded(ranked[i][:k], positions[i])) for i, c in enumerate(cases))
        report[name] = {key: round(value, 4) for key, value in row.items()}
    return report


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
