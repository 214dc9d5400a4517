"""The model table's feeds, against a real HTTP server on loopback and real files,
on a clock the test moves."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable

import pytest

from memsvc.core import config
from memsvc.fit import refresh
from memsvc.fit.refresh import FIRST_RETRY_SECONDS, ModelTable
from tests.support import wait_for

HOUR = 3600.0


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def model_table(tmp_path, url: str, clock: Callable[[], float], *, models_url: str = "") -> ModelTable:
    settings = config.load({"data_dir": str(tmp_path), "model_table_url": url, "model_info_base_url": models_url},
                           environ={})
    return refresh.from_settings(settings, clock)


@pytest.fixture
def clock():
    return Clock(1_000_000.0)


def test_a_fetch_is_saved_and_the_next_waits_a_period(tmp_path, json_server, clock):
    url = json_server.serve("/t.json", {"acme": {"rocket": {"in": 5000}}})
    table = model_table(tmp_path, url, clock)
    assert table.window("acme", "rocket").source == "fallback"  # nothing fetched on construction
    table.refresh_due()
    assert table.window("acme", "rocket").tokens == 5000 and json_server.count("/t.json") == 1
    [copy] = (tmp_path / ".store").glob("model_table.*.json")
    assert json.loads(copy.read_bytes()) == {"acme": {"rocket": {"in": 5000}}}
    clock.now += HOUR - 1
    table.refresh_due()
    assert json_server.count("/t.json") == 1
    clock.now += 1
    table.refresh_due()
    assert json_server.count("/t.json") == 2
    table.close()


def test_a_restart_reads_the_copy_and_counts_the_period_from_it(tmp_path, json_server, clock):
    url = json_server.serve("/t.json", {"acme": {"rocket": {"in": 5000}}})
    first = model_table(tmp_path, url, clock)
    first.refresh_due()
    first.close()
    [copy] = (tmp_path / ".store").glob("model_table.*.json")
    os.utime(copy, (clock.now - 600, clock.now - 600))  # fetched ten minutes ago
    json_server.serve("/t.json", status=503)
    second = model_table(tmp_path, url, clock)
    assert second.window("acme", "rocket").tokens == 5000
    second.refresh_due()
    assert json_server.count("/t.json") == 1
    clock.now += HOUR - 600
    second.refresh_due()
    assert json_server.count("/t.json") == 2 and second.window("acme", "rocket").tokens == 5000
    assert json.loads(copy.read_bytes()) == {"acme": {"rocket": {"in": 5000}}}


def test_failures_keep_the_last_good_table_and_back_off(tmp_path, json_server, clock):
    url = json_server.serve("/t.json", {"acme": {"rocket": {"in": 5000}}})
    table = model_table(tmp_path, url, clock)
    table.refresh_due()
    clock.now += HOUR
    for body, retry in ((b"not json", FIRST_RETRY_SECONDS), (b'{"acme": {}}', 2 * FIRST_RETRY_SECONDS)):
        json_server.serve("/t.json", raw=body)
        before = json_server.count("/t.json")
        table.refresh_due()
        assert json_server.count("/t.json") == before + 1
        assert table.window("acme", "rocket").tokens == 5000
        clock.now += retry - 1
        table.refresh_due()
        assert json_server.count("/t.json") == before + 1  # not before the backoff is over
        clock.now += 1
    json_server.serve("/t.json", {"acme": {"rocket": {"in": 6000}}})
    table.refresh_due()
    assert table.window("acme", "rocket").tokens == 6000


def test_a_changed_url_starts_afresh_and_a_models_list_fills_gaps(tmp_path, json_server, clock):
    one = json_server.serve("/one.json", {"acme": {"rocket": {"in": 5000}}})
    two = json_server.serve("/two.json", {"acme": {"rocket": {"in": 7000}}})
    json_server.serve("/v1/models", {"data": [{"id": "local", "max_model_len": 4096}]})
    table = model_table(tmp_path, one, clock)
    table.refresh_due()
    moved = model_table(tmp_path, two, clock, models_url=json_server.base_url + "/v1/")
    assert moved.window("acme", "rocket").source == "fallback"
    moved.refresh_due()
    assert moved.window("acme", "rocket").tokens == 7000
    assert moved.window("lmstudio", "local").tokens == 4096 and json_server.count("/v1/models") == 1
    assert len(list((tmp_path / ".store").glob("model_table.*.json"))) == 2


def test_the_thread_refreshes_on_its_own_and_stops(tmp_path, json_server):
    url = json_server.serve("/t.json", {"acme": {"rocket": {"in": 5000}}})
    table = model_table(tmp_path, url, time.time)
    table.start()
    wait_for(lambda: table.window("acme", "rocket").tokens == 5000, timeout=30)
    table.close()
    assert "model-table" not in [thread.name for thread in threading.enumerate()]
