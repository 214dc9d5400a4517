"""How a client command reaches its server: `--target`, `--token-file`, `--tenant`, `--timeout` and the TLS
files, given before the command (`memsvc --target H:P sessions`), after it (`memsvc sessions --target H:P`)
or as `MEMSVC_*` variables (`MEMSVC_TARGET`, `MEMSVC_TOKEN_FILE`, `MEMSVC_CA_FILE`...), as kubectl and
docker users expect.

Owns these options, the order they win in (after the command > before it > the variable > the default) and
turning them into the client's keyword arguments. Must never connect: the commands do.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_TARGET = "127.0.0.1:50051"
BEFORE = "before_"
"""Prefix of where the top-level parser keeps an option given before the command, so that a command's own
defaults (`memsvc serve --token-file` is a server setting) can never overwrite it unseen."""
ACCEPTS = "connection_options"
"""The namespace attribute naming the connection options the chosen command takes."""


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    default: str | None = None
    kind: type = str

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def variable(self) -> str:
        return "MEMSVC_" + self.dest.upper()


OPTIONS = (
    Option("--target", "the server: HOST:PORT or unix:///path", DEFAULT_TARGET),
    Option("--token-file", "file holding the bearer token (token_file's, or one of the server's tenants file)",
           kind=Path),
    Option("--tenant", "the tenant to act for, with an admin token of every tenant", ""),
    Option("--timeout", "seconds each call may take", "10", float),
    Option("--ca-file", "PEM CA of a TLS server (TCP targets)", kind=Path),
    Option("--cert-file", "PEM client certificate, for a server requiring mTLS", kind=Path),
    Option("--key-file", "PEM key of --cert-file", kind=Path),
)


def _described(option: Option) -> str:
    default = f", else {option.default}" if option.default else ""
    return f"{option.help} (default ${option.variable}{default})"


def add_before_command(parser: argparse.ArgumentParser) -> None:
    """The options on the `memsvc` parser itself, for `memsvc --target H:P COMMAND`."""
    group = parser.add_argument_group("connection, for the commands that talk to a server (also after the "
                                      "command)")
    for option in OPTIONS:
        group.add_argument(option.flag, dest=BEFORE + option.dest, metavar=option.dest.upper(),
                           default=argparse.SUPPRESS, help=_described(option))


def add_connection_arguments(parser: argparse.ArgumentParser, target: bool = True) -> None:
    """The options on a command that talks to a server; `target=False` for one naming its servers otherwise
    (`memsvc reshard`)."""
    taken = tuple(option for option in OPTIONS if target or option.flag != "--target")
    group = parser.add_argument_group("connection (also before the command, or from MEMSVC_* variables)")
    for option in taken:
        group.add_argument(option.flag, default=argparse.SUPPRESS, help=_described(option))
    parser.set_defaults(**{ACCEPTS: tuple(option.dest for option in taken)})


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> None:
    """Settle every connection option the command takes on `args` (typed), and refuse one given before a
    command that does not take it. Raises ValueError naming the option or variable at fault."""
    environ = os.environ if environ is None else environ
    accepted = getattr(args, ACCEPTS, ())
    for option in OPTIONS:
        before = getattr(args, BEFORE + option.dest, None)
        if BEFORE + option.dest in vars(args):
            delattr(args, BEFORE + option.dest)
        if option.dest not in accepted:
            if before is not None:
                raise ValueError(f"{option.flag} is not an option of `memsvc {args.command}`")
            continue
        if option.dest in vars(args):
            value, source = getattr(args, option.dest), option.flag
        elif before is not None:
            value, source = before, option.flag
        elif environ.get(option.variable):
            value, source = environ[option.variable], option.variable
        else:
            value, source = option.default, option.flag
        setattr(args, option.dest, _typed(option, value, source))


def _typed(option: Option, value: str | None, source: str) -> Any:
    if value is None:
        return None
    try:
        return option.kind(value)
    except ValueError:
        raise ValueError(f"{source} must be a {option.kind.__name__}, not {value!r}") from None


def client_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of memsvc_client.Client / AsyncClient for the resolved options."""
    def read(path: Path | None) -> bytes | None:
        return path.read_bytes() if path else None
    token = args.token_file.read_text().strip() if args.token_file else None
    return {"timeout": args.timeout, "token": token or None, "tenant": args.tenant or None,
            "root_certificates": read(args.ca_file),
            "certificate_chain": read(args.cert_file), "private_key": read(args.key_file)}
