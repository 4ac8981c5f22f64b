"""The exception a SIGTERM becomes in a fedhh process."""

from __future__ import annotations


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is (as Python raises KeyboardInterrupt for
    SIGINT), so that every clean-up that runs on Ctrl-C runs on SIGTERM too; ``fedhh``
    exits 143 (128 + SIGTERM) with one line."""
