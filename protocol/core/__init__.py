"""The runtime core: the aggregation contract, randomness, wire codec, transports and the
simulation engine. It never imports mechanisms, studies or the CLI."""
