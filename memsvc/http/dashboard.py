"""The web dashboard's files, served at `/` by the HTTP listener.

Owns the built assets in `static/` (built from `dashboard/` by `make
dashboard`, committed so installing memsvc needs no network) and the headers
that keep the page's in-memory token safe: a Content-Security-Policy that
runs only these scripts and talks only to this origin, no framing, no
referrer. Must never serve anything but those files: the dashboard reaches
memsvc through the contract, like any client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
SECURITY = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                 b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-cache"),
]


def _respond(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> list[dict[str, Any]]:
    return [{"type": "http.response.start", "status": status,
             "headers": [(b"content-length", str(len(body)).encode()), *headers]},
            {"type": "http.response.body", "body": body}]


class Dashboard:
    """An ASGI application answering GET (and HEAD) for the dashboard's files."""

    def __init__(self, directory: Path = STATIC):
        # A handful of small files: read once, so a request never touches the disk.
        self.files = {f"/{path.name}": (path.read_bytes(), TYPES[path.suffix].encode())
                      for path in sorted(directory.iterdir()) if path.suffix in TYPES}
        self.files["/"] = self.files["/index.html"]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            messages = _respond(405, [(b"allow", b"GET, HEAD"), (b"content-type", b"text/plain")],
                                b"the dashboard is read with GET; RPCs are POST /memsvc.v1.<Service>/<Method>\n")
        elif scope["path"] in self.files:
            body, content_type = self.files[scope["path"]]
            messages = _respond(200, [(b"content-type", content_type), *SECURITY], body)
        else:
            messages = _respond(404, [(b"content-type", b"text/plain")], b"no such page; the dashboard is at /\n")
        if scope["method"] == "HEAD":
            messages[1]["body"] = b""
        for message in messages:
            await send(message)
