"""CLI command modules; each defines ``register(cli)`` (see ``protocol.cli``)."""
