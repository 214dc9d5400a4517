"""Which Host names the HTTP listener answers: the guard against DNS rebinding.

A page on any web site can point its own name at 127.0.0.1 and then read
what a listener there answers as if it were of the same origin. Without a
bearer token (token_file) nothing else would stop it reading every
conversation, so the listener then answers only a Host that is an IP
address, `localhost` (or a name under it), or a name listed in
`http_allowed_hosts`. With a token every Host is answered: such a page
cannot present it. Must never answer a refused request with anything but
the refusal.
"""

from __future__ import annotations

import ipaddress


def host_name(header: str) -> str:
    """The name in a Host header, without its port, brackets or trailing dot, lowercased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    name, colon, port = header.rpartition(":")
    has_port = colon and port.isdigit() and ":" not in name  # else a bare IPv6 address
    return (name if has_port else header).rstrip(".")


class AllowedHosts:
    def __init__(self, names: list[str], token_required: bool):
        self.any = token_required or "*" in names
        self.names = {host_name(name) for name in names}

    def admits(self, header: str | None) -> bool:
        if self.any:
            return True
        if not header:
            return False
        name = host_name(header)
        if name == "localhost" or name.endswith(".localhost") or name in self.names:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # a rebinding page needs a name of its own; an address is what the client dialled

    def refusal(self, header: str | None) -> str:
        return (f"this listener does not answer the host {host_name(header or '')!r}: add it to http_allowed_hosts, "
                "set token_file, or call it by IP address or localhost")
