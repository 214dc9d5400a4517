"""FitContext's own cost against the no-op floor (a health Check on the same
server), for runs of 10, 100 and 1,000 messages, measured side by side.

Two paths, each run for both a model counted exactly (gpt-4o, o200k_base)
and one counted by the estimate (claude-3-5-sonnet):

- `fits`: the run is under budget, the cost of every iteration of an agent
  loop: decode, count, reply.
- `compacts`: the run is over budget and every stage that can runs against a
  summary model on loopback that answers at once (ExtractOldHistories folds
  the older turns, one call; ToolHistory summarizes the oldest exchanges, one
  call). Nothing is subtracted: the loopback model's two HTTP round trips
  and summary.json's fsyncs are part of the figure; one such call, made from
  this process as memsvc makes it, is timed beside them for scale.

The client encodes each run's messages once, before timing.

    .venv/bin/python benchmarks/fit.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import grpc
from common import ServerProcess, interleaved, save
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.core.http import Provider
from memsvc.summary import llm as llm_endpoint
from memsvc_client import Client
from tests.support.llm_server import LLMServer, summary_reply

SIZES = (10, 100, 1000)
TEXT = ("The deploy of build {n} touched the scheduler, the cache warmer and two migrations; "
        "the checks passed except a flaky integration test that we re-ran. ") * 2


def run_of(size: int, salt: int = 0) -> list[str]:
    """A realistic run: a system message, older turns (two fifths), the user's request, tool exchanges.

    A different `salt` gives different texts: messages the server has never counted.
    """
    messages = [{"role": "system", "content": f"You are a careful agent #{salt}. Use the tools; cite file paths."}]
    older = (size * 2) // 5 // 2 * 2
    for n in range(older):
        messages.append({"role": "user" if n % 2 == 0 else "assistant", "content": TEXT.format(n=n + salt * size)})
    messages.append({"role": "user", "content": "Why did last night's deploy restart the app?"})
    n = 0
    while len(messages) < size:
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "read_log", "arguments": json.dumps(
                {"service": "app", "page": n})}}]})
        if len(messages) < size:
            messages.append({"role": "tool", "tool_call_id": f"call_{n}",
                             "content": TEXT.format(n=n + salt * size) * 3})
        n += 1
    return [json.dumps(message) for message in messages[:size]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--compact-rounds", type=int, default=40)
    args = parser.parse_args()
    llm = LLMServer().start()
    llm.script("sum", *[lambda request: summary_reply(["Do: cite file paths"]) if "rolling summary" in request.system
                        else "read_log pages 0-3: the scheduler restarted the app after migration 2."] * 100_000)
    runs = {size: run_of(size) for size in SIZES}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            server = ServerProcess(Path(tmp) / "data", "--llm-base-url", llm.base_url, "--summary-model", "sum",
                                   "--llm-max-retries", "0").start()
            try:
                with grpc.insecure_channel(server.tcp) as channel, Client(server.tcp) as client:
                    client.append("bench", [("user", "hello"), ("assistant", "hi")])
                    health = health_pb2_grpc.HealthStub(channel)
                    check = health_pb2.HealthCheckRequest()

                    def fit(size: int, model: str, **options: object):
                        return lambda: client.fit_context("bench", "", model, runs[size], **options)

                    sizes = {size: client.fit_context("bench", "openai", "gpt-4o", runs[size]) for size in SIZES}
                    for size, reply in sizes.items():
                        assert reply.fits and not reply.changed, size
                    fits = {"health_check": lambda: health.Check(check)}
                    for model in ("gpt-4o", "claude-3-5-sonnet"):
                        fits |= {f"fits_{size}_{model}": fit(size, model) for size in SIZES}
                    # Every call a run the server has not seen: each message counted afresh.
                    fresh = iter([run_of(1000, salt) for salt in range(1, args.rounds + 11)])
                    fits["fits_1000_gpt-4o_never_seen"] = lambda: client.fit_context("bench", "", "gpt-4o", next(fresh))
                    fitting = interleaved(fits, rounds=args.rounds, warmup=10)

                    # One call of the loopback model as memsvc makes it, for scale: compacts make two.
                    endpoint = llm_endpoint.Endpoint(Provider(llm.base_url, setting="bench", timeout=10,
                                                              max_retries=0))
                    compacts = {"health_check": lambda: health.Check(check),
                                "loopback_summary_call": lambda: endpoint.complete("sum", [
                                    llm_endpoint.ChatMessage("system", "rolling summary"),
                                    llm_endpoint.ChatMessage("user", TEXT)])}
                    for model in ("gpt-4o", "claude-3-5-sonnet"):
                        for size in SIZES:
                            # A window of half the run: over budget, so both stages run.
                            window = sizes[size].tokens_before // 2
                            compacts[f"compacts_{size}_{model}"] = fit(size, model, context_window=window)
                    for name, call in compacts.items():
                        if name.startswith("compacts_"):
                            probe = call()
                            assert [s.outcome for s in probe.stages[1:]] == ["compacted"] * 2, (name, probe.stages)
                    compacting = interleaved(compacts, rounds=args.compact_rounds, warmup=3)
            finally:
                server.terminate()
    finally:
        llm.stop()
    report = {"messages": {str(size): {"tokens_gpt_4o": sizes[size].tokens_before,
                                       "bytes": sum(map(len, runs[size]))} for size in SIZES}}
    for name, results in (("fits", fitting), ("compacts", compacting)):
        floor = results["health_check"]["p50_ms"]
        report[name] = {"latency": results,
                        "ratios_to_floor_p50": {key: round(r["p50_ms"] / floor, 2) for key, r in results.items()}}
        for key, r in results.items():
            print(f"{key:34s} p50 {r['p50_ms']:8.3f} ms  p99 {r['p99_ms']:8.3f} ms  "
                  f"x{report[name]['ratios_to_floor_p50'][key]} floor")
    report["summary_model_calls"] = len(llm.calls())
    report["method"] = ("p50/p99 of each call, interleaved round by round with a health Check on the same server; "
                        "compacts include the loopback summary model's instant replies, nothing subtracted")
    save("fit", report)


if __name__ == "__main__":
    main()
