"""grpc's I/O layer for memsvc's processes, chosen before anything imports grpc.

grpcio 1.80+ runs Python on its new I/O layer (EventEngine); on these
machines the classic one answered a unary round trip sooner, on the server
and on the client side alike (benchmarks/README.md, "Serving stack"). So
memsvc's commands turn the new layer off through GRPC_EXPERIMENTS, unless the
operator set that variable: any value, even an empty one (grpc's default
layer), is kept as it is. Must run before grpc is imported: cli/__init__.py
imports it first.
"""

from __future__ import annotations

import os

CLASSIC_IO = "-event_engine_client,-event_engine_listener"
"The GRPC_EXPERIMENTS value memsvc runs with unless the operator chose another."

os.environ.setdefault("GRPC_EXPERIMENTS", CLASSIC_IO)
