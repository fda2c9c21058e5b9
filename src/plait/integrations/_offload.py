"""Running plait's plain (synchronous) store calls from a framework's event loop.

plait's store calls are plain calls (D1): they block for one round trip. A
framework that awaits its session interface must not block its event loop on
them, so each call runs off the loop, on the client's store worker
(:class:`plait.run.StoreWorker`, D202): the thread on which the client's runs and
server make their store calls too, one at a time and in order, because a client's
session handles keep the last row they read and are not meant to be written from
two threads at once. A call, once started, is waited for even when the caller is
cancelled, and the cancellation is raised after its outcome is known, so a cancelled
caller never retries a write that in fact went through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from plait.client import Client

__all__ = ["in_thread", "settled"]

_T = TypeVar("_T")


async def in_thread(owner: Client, fn: Callable[[], _T]) -> _T:
    """Run ``fn`` (a read or a write) on ``owner``'s store worker.

    Raises:
        asyncio.CancelledError: the caller was cancelled; raised only once ``fn`` finished.
    """
    return await owner.host.store_calls.run(fn)


settled = in_thread
"""Run a write on the store worker: the same wait through cancellation, named for the reader."""
