"""The gRPC edge: servicers that translate proto in, domain call, proto out.

Only this package (and the client) imports the generated protobuf modules.
"""
