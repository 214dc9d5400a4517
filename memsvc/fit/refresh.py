"""Keeping the model table current: the feeds (model_table_url, and the
/models list of model_info_base_url) fetched in the background, and the last
good copy of each on disk.

Owns the one refresher thread and its schedule: a feed is fetched at most
once per refresh period, counting from its copy on disk, so a restart within
the period fetches nothing; a failed fetch is retried after a backoff of 1,
2, 4... minutes, never more often than the period. What arrives is checked
before it replaces anything, then written to disk (atomically) and swapped
in; a bad or failed fetch keeps the last good copy. Must never fetch on a
request's thread: lookups read the current snapshot and never wait. The
thread never dies of an error: it logs it and tries again later.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.http import Provider, ProviderFailure
from memsvc.core.layout import Layout
from memsvc.fit.table import Entries, InvalidTable, Table, Window, parse_models_list, parse_table

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 60.0
FETCH_TIMEOUT_SECONDS = 10.0
MODELS_PATH = "/models"
SHIPPED = "models.json"


def shipped_entries() -> Entries:
    """The table in the package, for well-known models."""
    return parse_table((resources.files("memsvc.fit") / SHIPPED).read_bytes())


class Feed:
    """One source fetched in the background: GET `path` on `provider`, checked by `parse`."""

    def __init__(self, name: str, provider: Provider, path: str, parse: Callable[[bytes], Any], copy: Path):
        self.name = name
        self.provider = provider
        self.path = path
        self.parse = parse
        self.copy = copy
        "The last good copy; its name holds a hash of the URL, so a changed URL starts afresh."
        self.value: Any = None
        self.due = 0.0
        "time.time() of the next fetch."
        self.failures = 0

    def fetch(self) -> bytes:
        return self.provider.get(self.path, timeout=FETCH_TIMEOUT_SECONDS, max_retries=0)


def from_settings(settings: Settings, clock: Callable[[], float] = time.time) -> ModelTable:
    """The table of the settings: shipped, plus model_table_url and model_info_base_url when set."""
    store_dir = Layout(settings.data_dir).store_dir
    durable.ensure_dir(store_dir)
    table = _feed("model_table_url", settings.model_table_url, "", parse_table, store_dir)
    listed = _feed("model_info_base_url", settings.model_info_base_url.rstrip("/"), MODELS_PATH, parse_models_list,
                   store_dir)
    return ModelTable(shipped_entries(), table, listed, refresh_seconds=settings.model_table_refresh_seconds,
                      fallback=settings.default_context_window, clock=clock)


def _feed(setting: str, url: str, path: str, parse: Callable[[bytes], Any], store: Path) -> Feed | None:
    if not url:
        return None
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    provider = Provider(url, setting=setting, timeout=FETCH_TIMEOUT_SECONDS, max_retries=0)
    return Feed(setting, provider, path, parse, store / f"{setting.removesuffix('_url')}.{digest}.json")


class ModelTable:
    """The merged table readers see; refreshed by a background thread."""

    def __init__(self, shipped: Entries, table: Feed | None, models_list: Feed | None, *,
                 refresh_seconds: float, fallback: int, clock: Callable[[], float] = time.time):
        self.shipped = shipped
        self.table_feed, self.list_feed = table, models_list
        self.feeds = [feed for feed in (table, models_list) if feed is not None]
        self.refresh_seconds = refresh_seconds
        self.fallback = fallback
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for feed in self.feeds:
            self._load_copy(feed)
        self.current = self._merged()

    def window(self, vendor: str, model: str) -> Window:
        return self.current.window(vendor, model, self.fallback)

    def start(self) -> None:
        if self.feeds:
            self._thread = threading.Thread(target=self._run, name="model-table", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(FETCH_TIMEOUT_SECONDS * 2)
        for feed in self.feeds:
            feed.provider.close()

    def refresh_due(self) -> None:
        """Fetch every feed that is due; the thread's one step (tests call it to step by hand)."""
        changed = False
        for feed in self.feeds:
            if self.clock() >= feed.due:
                changed |= self._fetch(feed)
        if changed:
            self.current = self._merged()

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = FIRST_RETRY_SECONDS
            try:
                self.refresh_due()
                wait = min(feed.due for feed in self.feeds) - self.clock()
            except Exception:  # never let the thread die: the copies in use stay, it tries again later
                log.exception("model table refresh failed")
            self._stop.wait(max(0.05, wait))

    def _fetch(self, feed: Feed) -> bool:
        try:
            body = feed.fetch()
            value = feed.parse(body)
        except Exception as exc:  # whatever went wrong, the next try waits its backoff
            feed.failures += 1
            feed.due = self.clock() + min(self.refresh_seconds, FIRST_RETRY_SECONDS * 2 ** (feed.failures - 1))
            log.warning("model table fetch failed; the last good copy stays in use",
                        extra={"feed": feed.name, "error": str(exc), "retry_seconds": round(feed.due - self.clock())},
                        exc_info=not isinstance(exc, (ProviderFailure, InvalidTable, OSError)))
            return False
        feed.failures = 0
        feed.due = self.clock() + self.refresh_seconds
        try:
            durable.atomic_write(feed.copy, body)
        except OSError as exc:
            log.warning("model table copy not saved; in use until the next start",
                        extra={"feed": feed.name, "error": str(exc)})
        feed.value = value
        log.info("model table fetched", extra={"feed": feed.name, "models": len(value)})
        return True

    def _load_copy(self, feed: Feed) -> None:
        """The last good copy, and when it is due again: one period after it was fetched."""
        try:
            feed.value = feed.parse(feed.copy.read_bytes())
            feed.due = feed.copy.stat().st_mtime + self.refresh_seconds
        except FileNotFoundError:
            feed.due = 0.0
        except (InvalidTable, OSError) as exc:
            log.warning("model table copy unreadable, fetching anew", extra={"feed": feed.name, "error": str(exc)})
            feed.due = 0.0

    def _merged(self) -> Table:
        return Table(self.shipped, self.table_feed.value if self.table_feed else None,
                     self.list_feed.value if self.list_feed else None)
