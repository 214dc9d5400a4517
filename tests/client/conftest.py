"""A recording proxy in front of the test's real server."""

import pytest

from tests.support.grpc_proxy import RecordingProxy


@pytest.fixture
def proxy(server):
    with RecordingProxy(server.tcp) as running:
        yield running
