"""Tenants files for tests: one writer, so every test states its tokens the same way.

A token is given as (token, tenant, role); the file holds only each token's SHA-256, as a real one must.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

Token = tuple[str, str, str]
"(bearer token, tenant or '*', role)."


def write_tenants(path: Path, tokens: Sequence[Token], *, labels: Mapping[str, str] | None = None,
                  expires: Mapping[str, str] | None = None,
                  quotas: Mapping[str, Mapping[str, int]] | None = None) -> Path:
    """Write `path` whole (a rename, so a server re-reading it never sees half a file).

    labels and expires are keyed by token (expires as RFC 3339); quotas by tenant name."""
    lines: list[str] = []
    for token, tenant, role in tokens:
        lines += ["[[tokens]]", f'sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"',
                  f'tenant = "{tenant}"', f'role = "{role}"']
        if labels and token in labels:
            lines.append(f'label = "{labels[token]}"')
        if expires and token in expires:
            lines.append(f"expires = {expires[token]}")
        lines.append("")
    for tenant, limits in (quotas or {}).items():
        lines += ["[[tenants]]", f'name = "{tenant}"', *(f"{name} = {value}" for name, value in limits.items()), ""]
    scratch = path.with_name(path.name + ".writing")
    scratch.write_text("\n".join(lines))
    os.replace(scratch, path)
    return path
