"""protocol.core.net.signals.wait_for: a deadline that never loses a cancellation (the
one a Ctrl-C or SIGTERM becomes), unlike Python 3.11's asyncio.wait_for."""
from __future__ import annotations

import asyncio
import pathlib
import sys

import pytest

from protocol.core.net.signals import wait_for


async def _swallowed(wf, trials: int = 200) -> int:  # noqa: ANN001
    """How many of ``trials`` cancellations ``wf`` loses when the cancellation arrives
    in the loop iteration in which the awaited future completes."""
    loop = asyncio.get_running_loop()
    lost = 0
    for _ in range(trials):
        fut = loop.create_future()

        async def main(fut: asyncio.Future = fut) -> str:
            await wf(fut, 10)
            return "went on"

        task = asyncio.ensure_future(main())
        await asyncio.sleep(0)      # main now waits on fut
        fut.set_result(1)           # the awaited message arrives ...
        task.cancel()               # ... in the same iteration as the signal
        try:
            lost += await task == "went on"
        except asyncio.CancelledError:
            pass
    return lost


def test_a_cancellation_racing_completion_is_never_lost() -> None:
    assert asyncio.run(_swallowed(wait_for)) == 0
    if sys.version_info < (3, 12):  # the harness sees the race it guards against
        assert asyncio.run(_swallowed(asyncio.wait_for)) > 0


def test_deadline_result_and_no_deadline() -> None:
    async def go() -> None:
        assert await wait_for(asyncio.sleep(0, "x"), 1) == "x"
        assert await wait_for(asyncio.sleep(0.01, "y"), None) == "y"
        with pytest.raises(TimeoutError):
            await wait_for(asyncio.sleep(5), 0.05)
        ev = asyncio.Event()
        with pytest.raises(asyncio.TimeoutError):  # the same class since Python 3.11
            await wait_for(ev.wait(), 0)

    asyncio.run(go())


def test_the_network_code_uses_no_asyncio_wait_for() -> None:
    """Every deadline of the network processes goes through signals.wait_for."""
    root = pathlib.Path(__file__).resolve().parents[2] / "protocol"
    users = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if "asyncio.wait_for(" in p.read_text(encoding="utf-8")]
    assert users == []
