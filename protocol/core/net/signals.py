"""The exception a SIGTERM becomes in a fedhh process, and a deadline that lets every
cancellation (a Ctrl-C, a SIGTERM) through."""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

T = TypeVar("T")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is (as Python raises KeyboardInterrupt for
    SIGINT), so that every clean-up that runs on Ctrl-C runs on SIGTERM too; ``fedhh``
    exits 143 (128 + SIGTERM) with one line."""


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw`` with a deadline of ``timeout`` seconds (none for ``None``), raising
    ``TimeoutError`` past it: what ``asyncio.wait_for`` does from Python 3.12 on.

    Python 3.11's ``asyncio.wait_for`` loses a cancellation that arrives in the loop
    iteration in which the awaited operation completes (it returns the result instead),
    so a Ctrl-C or SIGTERM, which :func:`~protocol.core.net.processes.run_async` turns
    into one cancellation of the process's main task, was at times ignored until the
    process's work was done (seen with a helper interrupted during a 5,000-device job:
    it finished the job, then exited). This one, on ``asyncio.timeout``, lets every
    cancellation through (``tests/protocol/test_net_signals.py``)."""
    if timeout is None:
        return await aw
    async with asyncio.timeout(timeout):
        return await aw
