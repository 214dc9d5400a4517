"""The HTTP listener's socket, as asyncio serves it."""

import asyncio
import socket

import pytest

from memsvc.core.errors import InvalidSetting
from memsvc.http.listener import _bind


def test_accepted_connections_send_without_nagle_delay():
    """Without TCP_NODELAY a reply's later segments wait for the client's delayed ACK, ~40 ms a call."""
    async def accepted_nodelay() -> int:
        listener = _bind("127.0.0.1:0")
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(accepted_nodelay()) != 0


@pytest.mark.parametrize("address", ["8080", "localhost", ":8080", "host:port"])
def test_an_address_that_is_not_host_port_is_refused(address):
    with pytest.raises(InvalidSetting, match="HOST:PORT"):
        _bind(address)
