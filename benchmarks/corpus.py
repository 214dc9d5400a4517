"""A seeded corpus of agent conversations, and keyword queries drawn from it.

Each session is one conversation, user and assistant turns alternating; its
language is English (78% of sessions), or mostly Chinese or mostly Japanese
(11% each; there 60% of the turns are CJK, the rest English), about 13% CJK
messages in all. English words follow a Zipf law over stop words, general
and technical words and a long tail of made-up words, with identifiers, file
names, numbers, commit hashes and log lines mixed in; CJK turns are made of
common Chinese or Japanese words (kanji, kana, katakana loanwords), some with
an English term inside. Lengths are log-normal like chat turns: user turns
~12 words (~20 CJK characters) at the median, assistant turns ~45 words
(~70 characters). Each session starts on a random day of a year; its turns
are minutes apart, with occasional gaps of hours or days.

Queries are made of words of one message of their session: one or two
English words as written (the archive matches them by stem), a CJK
word of 2-4 characters, or one of each; a third carry a time range of a few
days around the message. The same seed gives the same text and queries.
"""

from __future__ import annotations

import math
import random
import re

import msgspec

from memsvc.core.records import Record

SEED = 20250101
BASE_NS = 1_735_689_600 * 10**9  # 2025-01-01 UTC
DAY_S = 86_400


def _words(text: str) -> list[str]:
    return text.split()


STOP = _words("the to of and a is in it that for you this i on with be we can are not have as at will if so or but do "
              "my was by from your an all just what use there let me here now then also it's i'll should would could "
              "one out up about which when how more no yes ok okay")
GENERAL = _words("file files run running test tests error errors fix fixed change changes update updated check build "
                 "install version code function value values line lines output input data user users server request "
                 "response issue problem result results step steps need want work works working looks like see try new "
                 "old first next last time config message messages list path name type string number default option "
                 "options command commands script process memory cache query table database field fields log logs "
                 "event events call calls return returns missing found failed failing passes passing because instead "
                 "still again before after without inside between always never maybe probably actually correct wrong "
                 "better faster slower simple small large empty full start stop restart open close read write load "
                 "save delete remove add create make keep move copy rename parse format print show explain plan idea "
                 "approach reason question answer example case cases thing problem wait done next ready sure thanks "
                 "please good great right left top bottom")
TECH = _words("deploy deployment deployed kubernetes docker container pod cluster namespace helm terraform nginx postgres "
              "redis kafka grpc http json yaml toml api endpoint timeout retry latency throughput benchmark profiler "
              "python rust golang typescript javascript node npm pip venv pytest fixture regression migration schema "
              "index tokenizer embedding vector search keyword archive session history summary compaction snapshot "
              "backup restore rollback commit branch merge rebase github pipeline workflow artifact release sandbox "
              "permission token secret certificate proxy socket thread async await mutex deadlock segfault traceback "
              "exception stacktrace dependency package module import refactor lint ruff mypy dockerfile makefile cron "
              "webhook queue worker scheduler replica shard partition checksum fsync journal")
EXTENSIONS = _words("py rs go ts js json yaml toml md sh sql")
ZH_WORDS = _words("我们 问题 测试 部署 服务器 配置 文件 错误 日志 数据库 用户 请求 响应 接口 代码 函数 版本 更新 检查 "
                  "运行 安装 环境 需要 可以 已经 现在 然后 如果 因为 所以 但是 没有 修改 重启 内存 缓存 索引 查询 搜索 "
                  "会话 历史 摘要 压缩 备份 恢复 回滚 提交 分支 合并 发布 流程 任务 超时 重试 延迟 性能 监控 告警 权限 "
                  "密钥 证书 网络 端口 容器 集群 节点 镜像 沙盒 模型 向量 关键词 上下文 对话 消息 时间 结果 步骤 方案 "
                  "原因 建议 确认 成功 失败 继续 完成 开始 结束 调试 脚本 命令 参数 路径 目录")
ZH_PARTICLES = _words("的 了 是 在 把 和 吗 呢 就 也 都 还 很 再 先 这个 那个 你 我")
JA_NOUNS = _words("設定 確認 実行 環境 問題 原因 修正 変更 更新 削除 追加 作成 テスト サーバー デプロイ ログ ファイル "
                  "エラー データベース ユーザー リクエスト レスポンス コード 関数 バージョン インストール メモリ キャッシュ "
                  "インデックス 検索 セッション 履歴 要約 圧縮 バックアップ 復元 コミット ブランチ マージ リリース タスク "
                  "タイムアウト 再試行 性能 監視 権限 証明書 ネットワーク ポート コンテナ クラスタ ノード イメージ モデル "
                  "ベクトル キーワード 文脈 会話 メッセージ 時間 結果 手順 方法 スクリプト コマンド 引数 パス 砂場")
JA_PARTICLES = _words("は が を に で の と も から まで")
JA_ENDINGS = _words("します しました してください できます ですか でした ですね になります しています と思います")
CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+")
ASCII_WORD = re.compile("[a-z][a-z0-9_]{2,}")


def _zipf(words: list[str]) -> list[float]:
    """Cumulative Zipf weights (s = 1) over `words` in rank order, for random.choices."""
    total, cumulative = 0.0, []
    for rank in range(len(words)):
        total += 1 / (rank + 2)
        cumulative.append(total)
    return cumulative


def _vocabulary() -> tuple[list[str], list[float]]:
    rng = random.Random(SEED)
    content = GENERAL + TECH
    rng.shuffle(content)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    tail = sorted({"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(30_000)})
    rng.shuffle(tail)
    identifiers = [f"{rng.choice(TECH)}_{rng.choice(GENERAL)}" for _ in range(3_000)]
    tail = tail[:20_000] + identifiers
    rng.shuffle(tail)
    words = STOP + content + tail
    return words, _zipf(words)


VOCABULARY, VOCABULARY_WEIGHTS = _vocabulary()
ZH_ALL = ZH_PARTICLES + ZH_WORDS
ZH_WEIGHTS = _zipf(ZH_ALL)
JA_WEIGHTS = _zipf(JA_NOUNS)


def _english(rng: random.Random, words: int, assistant: bool) -> str:
    sentences = []
    while words > 0:
        length = min(words, rng.randint(5, 18))
        chosen = rng.choices(VOCABULARY, cum_weights=VOCABULARY_WEIGHTS, k=length)
        extra = rng.random()
        if extra < 0.05:
            chosen.insert(rng.randrange(length), f"{rng.getrandbits(28):07x}")
        elif extra < 0.10:
            chosen.insert(rng.randrange(length), f"{rng.choice(TECH)}_{rng.choice(GENERAL)}.{rng.choice(EXTENSIONS)}")
        elif extra < 0.15:
            chosen.insert(rng.randrange(length), str(rng.randint(0, 99_999)))
        sentences.append(chosen[0].capitalize() + " " + " ".join(chosen[1:]) + rng.choice("...?,"))
        words -= length
    if assistant and rng.random() < 0.15:
        module = f"{rng.choice(TECH)}_{rng.choice(GENERAL)}"
        sentences.append(f"\nERROR {module}.py:{rng.randint(1, 900)} {rng.choice(TECH)} {rng.choice(GENERAL)} "
                         f"after {rng.randint(1, 30_000)}ms ({rng.getrandbits(28):07x})")
    return " ".join(sentences)


def _chinese(rng: random.Random, characters: int) -> str:
    parts = []
    while characters > 0:
        chosen = rng.choices(ZH_ALL, cum_weights=ZH_WEIGHTS, k=rng.randint(4, 12))
        if rng.random() < 0.3:
            chosen.insert(rng.randrange(len(chosen)), f" {rng.choice(TECH)} ")
        parts.append("".join(chosen) + rng.choice("。。，？"))
        characters -= sum(map(len, chosen))
    return "".join(parts)


def _japanese(rng: random.Random, characters: int) -> str:
    parts = []
    while characters > 0:
        nouns = rng.choices(JA_NOUNS, cum_weights=JA_WEIGHTS, k=rng.randint(1, 4))
        sentence = "".join(noun + rng.choice(JA_PARTICLES) for noun in nouns) + rng.choice(JA_ENDINGS)
        if rng.random() < 0.3:
            sentence = f"{rng.choice(TECH)} の" + sentence
        parts.append(sentence + "。")
        characters -= len(sentence)
    return "".join(parts)


def conversation(seed: int, index: int, turns: int) -> list[Record]:
    """One session's messages, oldest first; the same for the same (seed, index, turns)."""
    rng = random.Random(f"{seed}-{index}")
    language = rng.choices(("en", "zh", "ja"), weights=(78, 11, 11))[0]
    send_at = BASE_NS + int(rng.uniform(0, 330 * DAY_S) * 1e9)
    records = []
    for number in range(1, turns + 1):
        assistant = number % 2 == 0
        if assistant:
            send_at += int(rng.uniform(3, 60) * 1e9)
        else:
            pause = rng.lognormvariate(math.log(90), 1.2)
            send_at += int((rng.uniform(3_600, 3 * DAY_S) if rng.random() < 0.03 else pause) * 1e9)
        median = 45 if assistant else 12
        size = max(2, min(400, int(rng.lognormvariate(math.log(median), 0.8))))
        if language != "en" and rng.random() < 0.6:
            characters = int(size * 1.6)
            content = _chinese(rng, characters) if language == "zh" else _japanese(rng, characters)
        else:
            content = _english(rng, size, assistant)
        records.append(Record(id=number, role="assistant" if assistant else "user", content=content,
                              send_at=send_at))
    return records


def session_name(index: int) -> str:
    return f"session{index:04d}"


def _english_word(rng: random.Random, content: str, stop: set[str]) -> str | None:
    # Words as written (not the index's stems), as a person would type them.
    tokens = [t for t in re.findall(r"\w+", content.lower()) if ASCII_WORD.fullmatch(t) and t not in stop]
    return rng.choice(tokens) if tokens else None


def _cjk_word(rng: random.Random, content: str) -> str | None:
    runs = [run for run in CJK_RUN.findall(content) if len(run) >= 2]
    if not runs:
        return None
    run = rng.choice(runs)
    width = rng.randint(2, min(4, len(run)))
    start = rng.randrange(len(run) - width + 1)
    return run[start:start + width]


class Drawn(msgspec.Struct, frozen=True):
    kind: str
    "english-1, english-2, cjk or mixed; `+time` when it has a time range."
    session: int
    text: str
    since: int = 0
    "UTC Unix nanoseconds, inclusive; 0 = no bound."
    until: int = 0
    "UTC Unix nanoseconds, exclusive; 0 = no bound."


def draw_queries(sessions: list[list[Record]], count: int, seed: int, skip_last: int) -> list[Drawn]:
    """`count` queries, each made from words of one of its session's messages but the last `skip_last`."""
    rng = random.Random(seed)
    stop = set(STOP)
    with_cjk = [index for index, records in enumerate(sessions) if any(CJK_RUN.search(r.content) for r in records)]
    queries: list[Drawn] = []
    while len(queries) < count:
        kind = rng.choices(("english-1", "english-2", "cjk", "mixed"), weights=(40, 30, 20, 10))[0]
        index = rng.choice(with_cjk if kind in ("cjk", "mixed") and with_cjk else range(len(sessions)))
        records = sessions[index]
        message = rng.choice(records[:-skip_last])
        if kind == "english-1":
            parts = [_english_word(rng, message.content, stop)]
        elif kind == "english-2":
            parts = [_english_word(rng, message.content, stop), _english_word(rng, message.content, stop)]
        elif kind == "cjk":
            parts = [_cjk_word(rng, message.content)]
        else:
            parts = [_english_word(rng, message.content, stop), _cjk_word(rng, message.content)]
        if None in parts:
            continue
        if rng.random() < 1 / 3:
            since = message.send_at - int(rng.uniform(0, 3 * DAY_S) * 1e9)
            until = message.send_at + int(rng.uniform(1, 3 * DAY_S) * 1e9)
            queries.append(Drawn(kind + "+time", index, " ".join(parts), since, until))
        else:
            queries.append(Drawn(kind, index, " ".join(parts)))
    return queries

