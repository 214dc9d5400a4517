"""The HTTP/JSON edge: the contract over the Connect protocol, and the web dashboard.

Translation only. Every RPC reaches the domain through the very servicers the
gRPC server runs (memsvc/rpc), and every error through rpc/status.py's one
mapping; this package adds only what HTTP needs: routes, headers, the
listener. Never imported by memsvc/rpc: the command line hands the listener
to the server's lifecycle.
"""
