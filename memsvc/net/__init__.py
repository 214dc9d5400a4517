"""Network plumbing every listener shares (the gRPC server, the HTTP listener, the metrics port, `memsvc mcp`).

The lowest layer: it knows nothing of memsvc, so that `memsvc mcp`, which reaches memsvc only as a client,
serves its HTTP through the same bounds as the server.
"""
