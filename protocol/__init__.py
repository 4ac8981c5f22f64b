"""fedhh.protocol: the aggregation contract, transports, wire codec, engine and CLI.

This is the only package that knows about bytes on a wire, processes and time.
"""
