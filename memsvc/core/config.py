"""One typed settings object, and how it is read.

Owns the names and defaults of every setting and the precedence
flags > MEMSVC_* environment > TOML file > defaults. Each setting has one
name used three ways: `max_history_bytes` is the TOML key,
`--max-history-bytes` the flag and `MEMSVC_MAX_HISTORY_BYTES` the variable.
Must never read settings from anywhere else, or hold secrets' values (only
the paths of files that hold them).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
from cronsim import CronSim, CronSimError

from memsvc.core.errors import InvalidSetting
from memsvc.core.replies import DEFAULT_MAX_REPLY_BYTES, MESSAGE_OVERHEAD

ENV_PREFIX = "MEMSVC_"
SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "memsvc")


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    data_dir: str = msgspec.field(default_factory=default_data_dir)
    "Root of all stored data: sessions/<id>/ for tier 1, .store/ for the indexes."
    listen: list[str] = msgspec.field(default_factory=lambda: ["127.0.0.1:50051"])
    "Addresses to serve on: HOST:PORT or unix:///path (repeatable; port 0 picks a free one)."
    max_history_messages: int = 16
    "Messages in the context window."
    max_history_bytes: int = 4 * 1024 * 1024
    "history.json size that triggers auto compaction (trimmed to 80%)."
    max_message_bytes: int = 1024 * 1024
    "Largest message content in bytes (the document ceiling)."
    max_request_bytes: int = 8 * 1024 * 1024
    "Largest request on the wire in bytes."
    max_messages_per_request: int = 1000
    "Most messages in one Append."
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    ("Largest reply carrying stored messages (GetContext, Search, ListMessages, DeleteMessages) in bytes; past it a "
     "reply leaves its oldest or lowest-ranked messages out and says so. The default keeps 64 KiB under a client's "
     "default 4 MiB receive limit; the server's send limit is this plus 64 KiB.")
    max_open_sessions: int = 1024
    "Sessions kept in memory; the least recently used are closed past this."
    max_sessions: int = 100_000
    "Sessions stored on this server; an Append creating one more is RESOURCE_EXHAUSTED (SESSION_QUOTA_EXCEEDED)."
    max_held_sessions: int = 1000
    "Sessions held at once for moves between shards; HoldSession past this is RESOURCE_EXHAUSTED (HOLD_QUOTA_EXCEEDED)."
    hold_lease_seconds: float = 600.0
    """How long a hold lasts unless HoldSession renews it (memsvc reshard does, every third of it); then it lapses
    by itself: a move's target aborts its import, and a source serves the session again 50% later."""
    stream_idle_seconds: float = 120.0
    """How long an export waits for its reader to take each part, and an import for its client's next part,
    before the stream ends (an export lets its session go; an import stores nothing)."""
    max_concurrent_rpcs: int = 256
    "RPCs in flight on the main listeners; calls past this are refused with RESOURCE_EXHAUSTED, never queued."
    max_connections: int = 1024
    ("Connections open at once on each listener (the gRPC listeners together, http_listen); the health and metrics "
     "ports take at most 32 each. Lowered at start so that all fit the descriptor limit less reserved_fds.")
    reserved_fds: int = 64
    "File descriptors connections never take: kept for storage (history files, the archive, vector builds)."
    connection_idle_seconds: float = 60.0
    "A connection with no call in flight for this long is closed (gRPC max_connection_idle, HTTP keep-alive)."
    header_timeout_seconds: float = 10.0
    "Time a new connection has for its handshake (HTTP/2, TLS), and an HTTP request for its headers."
    body_timeout_seconds: float = 60.0
    "Time an HTTP request has to send its whole body once its headers are in."
    archive_commit_seconds: float = 1.0
    "Longest time the archive gathers appended messages before one commit."
    embedder: Literal["all-minilm-l6-v2", "builtin", "sentence-transformers", "openai"] = "all-minilm-l6-v2"
    "Embedding provider for semantic search: all-minilm-l6-v2 (the model, run without torch; Chinese and Japanese "
    "text keeps the builtin features), builtin (feature hashing: words, not meaning; smallest), sentence-transformers "
    "(torch; the local-model extra), openai (an HTTP endpoint)."
    embedding_model: str = ""
    "Embedding model name (sentence-transformers or openai)."
    embedding_base_url: str = ""
    "Base URL of an OpenAI-compatible /v1/embeddings endpoint."
    embedding_dimensions: int = 256
    "Embedding dimension requested from the provider."
    embedding_api_key_file: str = ""
    "File holding the embedding API key (else MEMSVC_EMBEDDING_API_KEY)."
    embedding_timeout_seconds: float = 30.0
    "Seconds one embedding request may take before it counts as failed (then retried with backoff)."
    reranker: Literal["none", "http"] = "none"
    "Reorders hybrid search's fused candidates: none, or http (a /v1/rerank endpoint of the Cohere/Jina/vLLM shape)."
    reranker_base_url: str = ""
    "Base URL of the rerank endpoint (POST {reranker_base_url}/rerank)."
    reranker_model: str = ""
    "Model name sent to the rerank endpoint."
    reranker_api_key_file: str = ""
    "File holding the rerank endpoint's API key (else MEMSVC_RERANKER_API_KEY)."
    reranker_timeout_seconds: float = 2.0
    "Seconds a rerank may take; past it (or on any failure) the fused order is returned."
    vector_rebuild_rows: int = 1024
    "Vectors past the last Annoy build that start a background rebuild (or 5% of the index, if more)."
    vector_trees: int = 100
    "Annoy trees per build: more gives better recall and slower, bigger builds."
    vector_search_k: int = 15000
    "Annoy nodes inspected per query: more gives better recall and slower queries."
    llm_base_url: str = ""
    "Base URL of an OpenAI-compatible chat-completions endpoint."
    llm_api_key_file: str = ""
    "File holding the LLM API key (else MEMSVC_LLM_API_KEY)."
    summary_model: str = ""
    "Model that writes the rolling summary; empty disables summarization."
    decision_model: str = ""
    "Model that filters noise and picks relevant summary entries; optional."
    reply_lang: str = "auto"
    "Language of the summary text; auto follows the conversation."
    llm_timeout_seconds: float = 120.0
    "Seconds one LLM call may take before it counts as failed."
    llm_max_retries: int = 3
    "Retries of an LLM call after a 429, a 5xx or a network error, with backoff; never after another 4xx."
    summary_schedule: str = "*/15 * * * *"
    "Cron expression (local time) of the summary job."
    summary_chunk_chars: int = 32000
    "Most characters of conversation sent in one summary call."
    relevance_timeout_seconds: float = 15.0
    "Seconds GetContext waits for the decision model before keeping every summary entry."
    # -- in-run compaction (FitContext) --
    fit_threshold: float = 0.8
    "Share of a model's context window a run may fill before FitContext compacts it (CheckThreshold)."
    default_context_window: int = 128_000
    "Context window in tokens of a model no table or endpoint lists."
    model_table_url: str = ""
    "URL of a JSON model table (vendor -> model -> {\"in\": window}) merged over the shipped one; empty: shipped only."
    model_info_base_url: str = ""
    "Base URL of an OpenAI-compatible API whose GET /models reports context_length or max_model_len; fills gaps."
    fit_max_summary_calls: int = 16
    ("Most summary calls one FitContext makes to fold a run's older turns into the rolling summary; past it the "
     "reply says SUMMARY_CALL_LIMIT, and calling again folds more.")
    model_table_refresh_seconds: float = 3600.0
    "Seconds between background fetches of model_table_url and model_info_base_url (the last good copy stays on disk)."
    error_ttl_days: float = 90.0
    "Days an error-memory lesson lives after its last hit."
    error_purge_schedule: str = "17 * * * *"
    "Cron expression (local time) of the job deleting expired error-memory lessons."
    lessons_backend: Literal["sqlite", "postgres"] = "sqlite"
    "Where error memory keeps lessons: sqlite (.store/lessons.sqlite3, this server's) or postgres (shared by servers)."
    lessons_dsn: str = ""
    "PostgreSQL connection string (libpq keywords or postgresql:// URI) for lessons_backend=postgres, no password."
    lessons_password_file: str = ""
    "File holding the PostgreSQL password of lessons_dsn (else MEMSVC_LESSONS_PASSWORD)."
    lessons_pool_size: int = 4
    "Most PostgreSQL connections this server holds for error memory."
    clock_offset_seconds: float = 0.0
    "Seconds added to the clock error memory uses for hits and expiry (for tests and drills; keep 0)."
    token_file: str = ""
    "File holding the bearer token every RPC but health must carry: one admin of tenant default; empty = no auth."
    tenants_file: str = ""
    """TOML file of bearer tokens (their SHA-256) with each one's tenant and role, and tenants' quotas; read again
    when it changes. Instead of token_file, for a server shared by tenants."""
    tls_cert_file: str = ""
    "PEM certificate chain for TCP listeners; with tls_key_file it turns TLS on (unix sockets stay plaintext)."
    tls_key_file: str = ""
    "PEM private key of tls_cert_file."
    tls_client_ca_file: str = ""
    "PEM CA certificates; when set, TCP clients must present a certificate they signed (mTLS)."
    health_listen: str = ""
    "Extra HOST:PORT serving only the health service, for probes."
    metrics_listen: str = ""
    "HOST:PORT serving Prometheus metrics."
    tracing_endpoint: str = ""
    ("OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces) that OpenTelemetry spans of every RPC and its "
     "stages are exported to; needs the tracing extra; empty: tracing off.")
    http_listen: str = ""
    "HOST:PORT serving every RPC as HTTP/JSON (the Connect protocol) and the web dashboard at /."
    http_allowed_hosts: list[str] = msgspec.field(default_factory=list)
    ("Host names the HTTP listener answers without token_file, besides IP addresses and localhost (a guard "
     "against DNS rebinding); * answers any.")
    shard_name: str = ""
    "This server's name as a shard behind a proxy (its server name there), told by GetServerInfo; empty: none."
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    "Lowest log level written (JSON lines on stderr)."
    shutdown_grace_seconds: float = 10.0
    "How long SIGTERM waits for in-flight calls before cancelling them."


def _field_docs() -> dict[str, str]:
    """Setting name -> help text, from the docstrings in the class body."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Settings))
    docs: dict[str, str] = {}
    settings_class = tree.body[0]
    assert isinstance(settings_class, ast.ClassDef)
    for node, following in itertools.pairwise(settings_class.body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)):
            docs[node.target.id] = following.value.value
    return docs


FIELDS = msgspec.structs.fields(Settings)
LIST_FIELDS = {"listen", "http_allowed_hosts"}
"Settings given as a repeated flag or a comma-separated environment variable."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; unset flags stay None so lower layers show through."""
    docs = _field_docs()
    parser.add_argument("--config", help="TOML settings file (MEMSVC_CONFIG)")
    for field in FIELDS:
        flag = "--" + field.name.replace("_", "-")
        env = ENV_PREFIX + field.name.upper()
        text = f"{docs.get(field.name, '')} [env {env}]".replace("%", "%%")
        if field.name in LIST_FIELDS:
            parser.add_argument(flag, action="append", dest=field.name, help=text)
        else:
            parser.add_argument(flag, dest=field.name, help=text)


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for field in FIELDS:
        value = environ.get(ENV_PREFIX + field.name.upper())
        if value is None:
            continue
        found[field.name] = value.split(",") if field.name in LIST_FIELDS else value
    return found


def load(flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Merge defaults < TOML file < environment < flags into one Settings."""
    environ = dict(os.environ if environ is None else environ)
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    merged: dict[str, Any] = {}
    config_path = flags.pop("config", None) or environ.get(ENV_PREFIX + "CONFIG")
    if config_path:
        try:
            merged.update(tomllib.loads(Path(config_path).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InvalidSetting(f"cannot read settings file {config_path}: {exc}") from exc
    merged.update(_from_env(environ))
    merged.update(flags)
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidSetting(f"invalid setting: {exc}") from exc
    _check(settings)
    return settings


def _check(settings: Settings) -> None:
    positive = ("max_history_messages", "max_history_bytes", "max_message_bytes", "max_request_bytes",
                "max_messages_per_request", "max_reply_bytes", "max_open_sessions", "embedding_dimensions",
                "llm_timeout_seconds",
                "embedding_timeout_seconds", "reranker_timeout_seconds", "vector_rebuild_rows", "vector_trees",
                "vector_search_k", "summary_chunk_chars", "relevance_timeout_seconds", "max_sessions",
                "max_concurrent_rpcs", "lessons_pool_size", "max_held_sessions", "hold_lease_seconds",
                "stream_idle_seconds", "fit_max_summary_calls", "max_connections", "reserved_fds",
                "connection_idle_seconds", "header_timeout_seconds", "body_timeout_seconds")
    for name in positive:
        if getattr(settings, name) <= 0:
            raise InvalidSetting(f"{name} must be positive, got {getattr(settings, name)}")
    if settings.max_message_bytes > settings.max_history_bytes:
        raise InvalidSetting("max_message_bytes must not exceed max_history_bytes")
    if settings.max_reply_bytes < settings.max_message_bytes + MESSAGE_OVERHEAD:
        # Then a message's content always fits a reply: a message too large with its payload reads without it.
        raise InvalidSetting(f"max_reply_bytes ({settings.max_reply_bytes}) must leave room for one message of "
                             f"max_message_bytes ({settings.max_message_bytes}) and {MESSAGE_OVERHEAD} bytes more")
    if settings.archive_commit_seconds < 0:
        raise InvalidSetting("archive_commit_seconds must not be negative")
    if settings.llm_max_retries < 0:
        raise InvalidSetting("llm_max_retries must not be negative")
    if settings.error_ttl_days <= 0:
        raise InvalidSetting("error_ttl_days must be positive")
    if settings.lessons_backend == "postgres" and not settings.lessons_dsn:
        raise InvalidSetting("lessons_backend = postgres needs lessons_dsn, the database's connection string")
    if settings.lessons_backend == "sqlite" and (settings.lessons_dsn or settings.lessons_password_file):
        raise InvalidSetting("lessons_dsn and lessons_password_file are for lessons_backend = postgres; "
                             "set lessons_backend too, or drop them")
    if settings.shard_name and not SHARD_NAME.fullmatch(settings.shard_name):
        raise InvalidSetting(f"shard_name {settings.shard_name!r} is not a name: use 1-64 characters of "
                             "A-Z a-z 0-9 . _ -, starting with a letter or digit")
    if not settings.listen:
        raise InvalidSetting("at least one --listen address is needed")
    if settings.token_file and settings.tenants_file:
        raise InvalidSetting("set token_file or tenants_file, not both: token_file is the one-tenant shorthand of a "
                             "tenants file holding one admin token of tenant default")
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise InvalidSetting("tls_cert_file and tls_key_file go together: set both or neither")
    if settings.tls_client_ca_file and not settings.tls_cert_file:
        raise InvalidSetting("tls_client_ca_file needs tls_cert_file and tls_key_file: mTLS is TLS first")
    if not 0 < settings.fit_threshold <= 1:
        raise InvalidSetting(f"fit_threshold must be above 0 and at most 1, got {settings.fit_threshold}")
    if settings.default_context_window <= 0 or settings.model_table_refresh_seconds <= 0:
        raise InvalidSetting("default_context_window and model_table_refresh_seconds must be positive")
    if settings.tracing_endpoint:
        _check_tracing_endpoint(settings.tracing_endpoint)
    for name in ("summary_schedule", "error_purge_schedule"):
        try:
            CronSim(getattr(settings, name), datetime.now())
        except CronSimError as exc:
            raise InvalidSetting(f"{name} {getattr(settings, name)!r} is not a cron expression ({exc})") from exc


def _check_tracing_endpoint(url: str) -> None:
    """An absolute http(s) URL, the whole path included: the OTLP exporter posts to it as it is."""
    parsed = urlsplit(url)
    try:
        parsed.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        raise InvalidSetting(f"tracing_endpoint {url!r} has a bad port ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not parsed.hostname or any(c.isspace() for c in url):
        raise InvalidSetting(f"tracing_endpoint {url!r} must be an http:// or https:// URL with a host, such as "
                             "http://127.0.0.1:4318/v1/traces (the OTLP/HTTP traces path)")
