"""How hybrid search fuses, chosen by measurement across sets: candidate pools
of memsvc's keyword search and of exact dense search, gathered once per query
of RealMem and both halves of MADial, then fused every way considered, each
family's constants chosen by leave-one-set-out (chosen on the other sets,
measured on the held-out one).

    .venv/bin/python benchmarks/fusion.py [--cache DIR] [--data ../shared/data/realmem] [--madial ../shared/data/madial]

Keyword pools come from memsvc's own KeywordSearch (archive + recent index,
in process: the ranking and BM25 scores the server serves); dense pools from
numpy over each message's vector (what the server's exact scan returns below
20,000 vectors), with all-MiniLM-L6-v2 (sentence-transformers) and with the
builtin hashed features (what text written without spaces keeps). Pairs
measured: every set with MiniLM, MADial zh with builtin as well. Beside the
lists: FTS5 and stemmed FTS5 (baselines.Fts5, as bench-retrieval runs them) over
the same messages and queries, and the in-process keyword search's p50 on these
long queries. Results: benchmarks/results/fusion.json.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import madial
import msgspec
import numpy as np
import realmem
from baselines import Embedded, Fts5, dense_exact
from common import save

from memsvc.app import App
from memsvc.core import config
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.search import hybrid
from memsvc.search.hybrid import Ranking
from memsvc.search.query import Bounds, Query
from memsvc.vectors.embedders.base import unit_length
from memsvc.vectors.embedders.builtin import BuiltinEmbedder
from memsvc.window.incoming import NewMessage

POOL = 50
"As the server: max(hybrid.POOL, 4 x limit) for limit 8."
K = 8
MINILM = "all-MiniLM-L6-v2"
BUILTIN = "builtin"
PAIRS = (("realmem", MINILM), ("madial-en", MINILM), ("madial-zh", MINILM), ("madial-zh", BUILTIN))
"(set, embedder) pairs every fusion is measured on; leave-one-set-out holds out a set with all its pairs."


class Case(msgspec.Struct):
    gold: list[list[int]]
    "Evidence items, each found when any of its ids is returned."
    keyword: Ranking
    dense: dict[str, Ranking]
    lexical: dict[str, list[int]]
    "FTS5 baselines' best K, by name."
    keyword_seconds: float
    "The in-process keyword search's time for this query."


def recall(case: Case, ranked: Sequence[int]) -> float:
    found = set(ranked[:K])
    return sum(1 for item in case.gold if found.intersection(item)) / len(case.gold)


# -- gathering ---------------------------------------------------------------------------


def stored(app: App, session: str, messages: list[tuple[str, str, int]]) -> list[int]:
    """(role, content, send_at) appended in chunks; their memsvc ids."""
    ids = []
    for start in range(0, len(messages), 500):
        chunk = messages[start:start + 500]
        appended = app.tenant().appender.append(session, [NewMessage(role=role, content=content, send_at=send_at)
                                                          for role, content, send_at in chunk])
        ids += [record.id for record in appended.records]
    return ids


def keyword_ranking(app: App, session: str, text: str, until: int, names: dict[int, int]
                    ) -> tuple[Ranking, float]:
    """The pool and its search's seconds; `names` maps this session's memsvc ids (each session numbers its
    messages from 1) to the set's own."""
    started = time.perf_counter()
    found = app.tenant().searcher.keyword.ranked(Query(session_id=session, text=text, match="keyword"),
                                                 Bounds(POOL, 0, until))
    seconds = time.perf_counter() - started
    return Ranking([names[hit.record.id] for hit in found.hits], [hit.score for hit in found.hits]), seconds


def lexical_engines(messages: Sequence[tuple[int, str, str]], trigram: bool) -> dict[str, Fts5]:
    """(position, role, content) in FTS5 and stemmed FTS5, as bench-retrieval's baselines hold them."""
    engines = {"fts5": Fts5("trigram" if trigram else "unicode61"), "fts5-porter": Fts5("porter")}
    for position, role, content in messages:
        for engine in engines.values():
            engine.add(position, role.capitalize(), content)
    return engines


def encoders(cache: Path | None) -> dict[str, Callable[[list[str], bool], np.ndarray]]:
    builtin = BuiltinEmbedder(config.Settings().embedding_dimensions)
    return {MINILM: Embedded(MINILM, cache), BUILTIN: lambda texts, _: unit_length(builtin.vectors(texts))}


def dense_ranking(matrix: np.ndarray, vector: np.ndarray, before: int, names: Sequence[int]) -> Ranking:
    found = dense_exact(matrix, vector, before, POOL)
    return Ranking([names[at] for at in found], [float(matrix[at] @ vector) for at in found])


def gather_realmem(data: Path, encode: dict, tmp: Path) -> list[Case]:
    cases = []
    for persona in realmem.load(data, []):
        started = time.perf_counter()
        app = App(config.load({"data_dir": str(tmp / persona.name), "embedder": "builtin"}))
        try:
            kept = [p for p, turn in enumerate(persona.turns) if turn.content.strip()]
            ids = stored(app, persona.name, [(persona.turns[p].role, persona.turns[p].content,
                                              persona.turns[p].send_at) for p in kept])
            names = dict(zip(ids, kept, strict=True))
            app.tenant().archive.flush(timeout=600)
            keyword = [keyword_ranking(app, persona.name, case.text, persona.turns[case.position].send_at, names)
                       for case in persona.queries]
        finally:
            app.close()
        engines = lexical_engines([(p, persona.turns[p].role, persona.turns[p].content) for p in kept], False)
        lexical = [{name: engine.search(case.text, K, before=case.position) for name, engine in engines.items()}
                   for case in persona.queries]
        dense: dict[str, list[Ranking]] = {}
        for name, encoder in encode.items():
            matrix = encoder([turn.content for turn in persona.turns], False)
            queries = encoder([case.text for case in persona.queries], True)
            dense[name] = [dense_ranking(matrix, vector, case.position, range(len(persona.turns)))
                           for case, vector in zip(persona.queries, queries, strict=True)]
        cases += [Case([sorted(item.positions) for item in case.gold], keyword[n][0],
                       {name: rankings[n] for name, rankings in dense.items()}, lexical[n], keyword[n][1])
                  for n, case in enumerate(persona.queries)]
        print(f"realmem {persona.name}: {len(persona.queries)} queries, {time.perf_counter() - started:.0f} s",
              flush=True)
    return cases


def gather_madial(data: Path, language: str, encode: dict, tmp: Path) -> list[Case]:
    half = madial.load(data, language)
    app = App(config.load({"data_dir": str(tmp / f"madial-{language}"), "embedder": "builtin"}))
    try:
        names: dict[str, dict[int, int]] = {}
        for user, memories in half.sessions.items():
            ids = stored(app, user, [("user", memory.content, memory.send_at) for memory in memories])
            names[user] = dict(zip(ids, (memory.id for memory in memories), strict=True))
        app.tenant().archive.flush(timeout=600)
        keyword = [keyword_ranking(app, case.user, case.text, NO_UPPER_BOUND, names[case.user])
                   for case in half.cases]
    finally:
        app.close()
    engines = {user: lexical_engines([(at, "user", memory.content) for at, memory in enumerate(memories)],
                                     half.language != "en")
               for user, memories in half.sessions.items()}
    lexical = [{name: [half.sessions[case.user][at].id for at in engine.search(case.text, K)]
                for name, engine in engines[case.user].items()} for case in half.cases]
    dense: dict[str, list[Ranking]] = {name: [] for name in encode}
    for name, encoder in encode.items():
        matrices = {user: encoder([memory.content for memory in memories], False)
                    for user, memories in half.sessions.items()}
        queries = encoder([case.text for case in half.cases], True)
        for case, vector in zip(half.cases, queries, strict=True):
            memories = half.sessions[case.user]
            dense[name].append(dense_ranking(matrices[case.user], vector, len(memories),
                                             [memory.id for memory in memories]))
    return [Case([[id_] for id_ in sorted(case.gold)], keyword[n][0], {name: found[n] for name, found in dense.items()},
                 lexical[n], keyword[n][1])
            for n, case in enumerate(half.cases)]


def gather(args: argparse.Namespace) -> dict[str, list[Case]]:
    path = args.cache / "fusion-pools.json" if args.cache else None
    if path is not None and path.exists():
        return msgspec.json.decode(path.read_bytes(), type=dict[str, list[Case]])
    encode = encoders(args.cache)
    with tempfile.TemporaryDirectory(prefix="memsvc-fusion-") as tmp:
        sets = {f"madial-{language}": gather_madial(args.madial, language, encode, Path(tmp))
                for language in madial.LANGUAGES}
        sets["realmem"] = gather_realmem(args.data, encode, Path(tmp))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(msgspec.json.encode(sets))
    return sets


# -- fusing ------------------------------------------------------------------------------

Fusion = Callable[[Ranking, Ranking], list[int]]


def families() -> dict[str, dict[str, Fusion]]:
    """Each family's variants by their constants; leave-one-set-out picks one per family."""
    shipped = "cosine + sqrt(share of best BM25) x weight x keyword spread ** power / cosine spread (hybrid.fuse)"
    found: dict[str, dict[str, Fusion]] = {shipped: {}, "reciprocal rank": {}, "standardized scores": {}}
    for weight, power in itertools.product((0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6), (1.0, 2.0, 3.0, 4.0, 5.0)):
        tuning = hybrid.FusionTuning(keyword_weight=weight, keyword_power=power)
        found[shipped][f"keyword_weight={weight} keyword_power={power}"] = (
            lambda kw, se, tuning=tuning: [c.id for c in hybrid.fuse(kw, se, tuning)])
    evidence: dict[str, Callable[..., Callable[[Evidence], np.ndarray]]] = {
        "cosine + fixed weight x share of best BM25 (the former hybrid.fuse)":
            lambda w: lambda e: w * e.shares + e.cosines,
        "cosine + share (itself, not its square root) x weight x keyword spread ** power / cosine spread":
            lambda w, p: lambda e: w * e.share_gap ** p / max(e.cosine_gap, 1e-3) * e.shares + e.cosines,
        "cosine + weight x share x (keyword spread / cosine spread, each as a share of its best) ** p":
            lambda w, p: lambda e: w * (e.share_gap / max(e.cosine_gap / (e.cosine_best or 1.0), 1e-3)) ** p
            * e.shares + e.cosines,
        "the same + a bonus for a candidate in both lists (CombMNZ-like)":
            lambda w, bonus: lambda e: w * e.shares + e.cosines + bonus * e.in_both,
        "the same, cosines gated by their best's gap over the median (min(1, gap / g))":
            lambda w, g: lambda e: w * e.shares + min(1.0, e.cosine_gap / g) * e.cosines,
        "cosine + weight x share ** gamma (share's curve)":
            lambda w, gamma: lambda e: w * e.shares ** gamma + e.cosines,
        "each list's evidence above its own median":
            lambda w: lambda e: (w * np.maximum(e.shares - e.share_median, 0)
                                 + np.maximum(e.cosines - e.cosine_median, 0)),
        "each list scaled to (score - median) / (best - median), weighted by its best's z-score ** p":
            lambda w, p: lambda e: w * e.keyword_z ** p * e.keyword_scaled + e.semantic_z ** p * e.semantic_scaled,
    }
    grids: dict[str, Sequence[tuple[float, ...]]] = {
        "cosine + fixed weight x share of best BM25 (the former hybrid.fuse)":
            [(w,) for w in (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75)],
        "cosine + share (itself, not its square root) x weight x keyword spread ** power / cosine spread":
            list(itertools.product((0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6), (1.0, 2.0, 3.0, 4.0, 5.0))),
        "cosine + weight x share x (keyword spread / cosine spread, each as a share of its best) ** p":
            list(itertools.product((0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5), (0.5, 1.0, 1.5))),
        "the same + a bonus for a candidate in both lists (CombMNZ-like)":
            list(itertools.product((0.15, 0.3, 0.5), (0.02, 0.05, 0.1, 0.2))),
        "the same, cosines gated by their best's gap over the median (min(1, gap / g))":
            list(itertools.product((0.15, 0.2, 0.3), (0.1, 0.15, 0.2, 0.25, 0.3))),
        "cosine + weight x share ** gamma (share's curve)":
            list(itertools.product((0.2, 0.3, 0.5, 0.75), (0.5, 2.0, 3.0))),
        "each list's evidence above its own median": [(w,) for w in (0.15, 0.2, 0.3, 0.4, 0.5, 0.75)],
        "each list scaled to (score - median) / (best - median), weighted by its best's z-score ** p":
            list(itertools.product((0.5, 0.75, 1.0, 1.5), (0.0, 1.0, 2.0))),
    }
    for family, make in evidence.items():
        names = make.__code__.co_varnames[:make.__code__.co_argcount]
        found[family] = {" ".join(f"{n}={v}" for n, v in zip(names, values, strict=True)):
                         functools.partial(_scored, score=make(*values)) for values in grids[family]}
    for k, weight in itertools.product((5, 10, 30, 60), (0.5, 0.75, 1.0, 1.5, 2.0)):
        found["reciprocal rank"][f"k={k} keyword_weight={weight}"] = (
            lambda kw, se, k=k, w=weight: _order(reciprocal_rank([(kw.ids, w), (se.ids, 1.0)], k)))
    for weight in (0.5, 0.75, 1.0, 1.5):
        found["standardized scores"][f"keyword_weight={weight}"] = (
            lambda kw, se, w=weight: _order(standardized([(kw, w), (se, 1.0)])))
    return found


class Evidence:
    """One query's union of candidates with what the score families read of each list: BM25 shares of the
    best and cosines (below 0: 0), a candidate missing from a list at the list's last, and each list's median,
    best, best's gap over it, and best's z-score within the pool."""

    def __init__(self, keyword: Ranking, semantic: Ranking):
        self.ids = np.asarray(list(dict.fromkeys(keyword.ids + semantic.ids)), dtype=np.int64)
        best = keyword.scores[0] if keyword.scores and keyword.scores[0] > 0 else 0.0
        self.shares = self._spread(keyword.ids, [s / best if best else 0.0 for s in keyword.scores])
        self.cosines = self._spread(semantic.ids, [max(0.0, s) for s in semantic.scores])
        self.in_both = np.isin(self.ids, keyword.ids) & np.isin(self.ids, semantic.ids)
        self.share_median = float(np.median(keyword.scores)) / best if best else 0.0
        self.cosine_median = max(0.0, float(np.median(semantic.scores))) if semantic.scores else 0.0
        self.cosine_best = max(0.0, semantic.scores[0]) if semantic.scores else 0.0
        self.cosine_gap = self.cosine_best - self.cosine_median
        self.share_gap = (1.0 - self.share_median) if best else 0.0
        self.keyword_z, self.keyword_scaled = self._scaled(keyword)
        self.semantic_z, self.semantic_scaled = self._scaled(semantic)

    def _spread(self, ids: list[int], values: list[float]) -> np.ndarray:
        at = dict(zip(ids, values, strict=True))
        floor = values[-1] if values else 0.0
        return np.asarray([at.get(int(id_), floor) for id_ in self.ids])

    def _scaled(self, ranking: Ranking) -> tuple[float, np.ndarray]:
        if len(ranking.scores) < 2:
            return 0.0, np.zeros(len(self.ids))
        values = np.asarray(ranking.scores)
        median = float(np.median(values))
        z = float((values[0] - values.mean()) / (values.std() or 1.0))
        return z, (self._spread(ranking.ids, ranking.scores) - median) / ((values[0] - median) or 1.0)


def _scored(keyword: Ranking, semantic: Ranking, score: Callable[[Evidence], np.ndarray]) -> list[int]:
    evidence = Evidence(keyword, semantic)
    return evidence.ids[np.lexsort((-evidence.ids, -score(evidence)))].tolist()


def standardized(rankings: Sequence[tuple[Ranking, float]]) -> dict[int, float]:
    """Weighted sum of each list's z-scores (within its pool; a candidate missing from a list gets the list's
    last): scale-free, but it makes a flat list look as decisive as any."""
    fused: dict[int, float] = {}
    parts = []
    for ranking, weight in rankings:
        values = np.asarray(ranking.scores, dtype=np.float64)
        mean, spread = (values.mean(), values.std() or 1.0) if len(values) else (0.0, 1.0)
        z = dict(zip(ranking.ids, ((values - mean) / spread).tolist(), strict=True))
        parts.append((z, float((values[-1] - mean) / spread) if len(values) else 0.0, weight))
    for id_ in {id_ for z, _, _ in parts for id_ in z}:
        fused[id_] = sum(weight * z.get(id_, floor) for z, floor, weight in parts)
    return fused


def reciprocal_rank(rankings: Sequence[tuple[Sequence[int], float]], k: int) -> dict[int, float]:
    """Weighted reciprocal rank fusion of (ids best first, weight) lists, the fusion hybrid search had
    before (equal weights, k = 10): id -> fused score."""
    fused: dict[int, float] = {}
    for ids, weight in rankings:
        for rank, id_ in enumerate(ids, start=1):
            fused[id_] = fused.get(id_, 0.0) + weight / (k + rank)
    return fused


def _order(fused: dict[int, float]) -> list[int]:
    return sorted(fused, key=lambda id_: (-fused[id_], -id_))


def measure(sets: dict[str, list[Case]], fusion: Fusion) -> dict[str, float]:
    return {f"{name}/{embedder}": statistics.mean(recall(c, fusion(c.keyword, c.dense[embedder]))
                                                  for c in sets[name] if embedder in c.dense)
            for name, embedder in PAIRS}


def lists(sets: dict[str, list[Case]]) -> dict[str, dict[str, float]]:
    """Each pair's keyword and semantic recall, over the queries it has (MiniLM may cover fewer personas)."""
    report = {}
    for name, embedder in PAIRS:
        cases = [c for c in sets[name] if embedder in c.dense]
        report[f"{name}/{embedder}"] = {
            "keyword": round(statistics.mean(recall(c, c.keyword.ids) for c in cases), 4),
            "semantic": round(statistics.mean(recall(c, c.dense[embedder].ids) for c in cases), 4),
            "queries": len(cases)}
    return report


def keyword_beside_fts5(sets: dict[str, list[Case]]) -> dict[str, dict[str, float]]:
    """Per set: memsvc keyword's recall@K beside FTS5's and stemmed FTS5's, and its p50 in process."""
    report = {}
    for name, cases in sets.items():
        row = {"keyword": statistics.mean(recall(c, c.keyword.ids) for c in cases)}
        row |= {engine: statistics.mean(recall(c, c.lexical[engine]) for c in cases) for engine in cases[0].lexical}
        row = {key: round(value, 4) for key, value in row.items()}
        report[name] = row | {"keyword_p50_ms": round(1000 * statistics.median(c.keyword_seconds for c in cases), 2),
                              "queries": len(cases)}
    return report


def gain(row: dict[str, float], parts: dict[str, dict[str, float]], pairs: Sequence[str]) -> float:
    """The worst ratio of fused recall to the better part's, over `pairs`: what has to reach 1.05."""
    return min(row[pair] / max(parts[pair]["keyword"], parts[pair]["semantic"]) for pair in pairs)


def leave_one_set_out(sets: dict[str, list[Case]], measured: dict[str, dict[str, float]],
                      parts: dict[str, dict[str, float]]) -> dict[str, dict]:
    """For each held-out set: the variant with the best worst-case gain on the other sets, and its figures there."""
    report = {}
    for held in sets:
        inside = [f"{n}/{e}" for n, e in PAIRS if n != held]
        outside = [f"{n}/{e}" for n, e in PAIRS if n == held]
        chosen = max(measured, key=lambda name: gain(measured[name], parts, inside))
        report[held] = {"chosen": chosen,
                        "chosen_worst_gain_elsewhere": round(gain(measured[chosen], parts, inside), 3),
                        **{pair: {"hybrid": round(measured[chosen][pair], 4),
                                  "x_better_part": round(gain(measured[chosen], parts, [pair]), 3)}
                           for pair in outside}}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=realmem.DEFAULT_DATA)
    parser.add_argument("--madial", type=Path, default=madial.DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=None, help="keep embeddings and pools here (not in the repo)")
    args = parser.parse_args()
    sets = gather(args)
    parts = lists(sets)
    report: dict[str, object] = {"pool": POOL, "k": K, "lists": parts, "keyword_beside_fts5": keyword_beside_fts5(sets),
                                 "families": {}}
    for family, variants in families().items():
        measured = {name: measure(sets, fusion) for name, fusion in variants.items()}
        best = sorted(measured, key=lambda name: -gain(measured[name], parts, list(parts)))
        report["families"][family] = {  # type: ignore[index]
            "leave_one_set_out": leave_one_set_out(sets, measured, parts),
            "best_everywhere": {name: {pair: round(value, 4) for pair, value in measured[name].items()}
                                | {"worst_gain": round(gain(measured[name], parts, list(parts)), 3)}
                                for name in best[:5]}}
    shipped = measure(sets, lambda kw, se: [c.id for c in hybrid.fuse(kw, se)])
    report["shipped"] = {"tuning": str(hybrid.FUSION), **{p: round(v, 4) for p, v in shipped.items()},
                         "worst_gain": round(gain(shipped, parts, list(parts)), 3)}
    print(json.dumps(report, indent=1))
    save("fusion", report)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
