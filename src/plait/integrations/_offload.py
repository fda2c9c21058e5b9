"""Running plait's plain (synchronous) store calls from a framework's event loop.

plait's store calls are plain calls (D1): they block for one round trip. A
framework that awaits its session interface must not block its event loop on
them, so each call runs in a worker thread (``asyncio.to_thread``). Calls made
through one :class:`plait.Client` take turns on one lock, because a client's
session handles keep the last row they read and are not meant to be written
from two threads at once. A write, once started, is waited for even when the
caller is cancelled, and the cancellation is raised after its outcome is known,
so a cancelled caller never retries a write that in fact went through.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_thread", "settled"]

_T = TypeVar("_T")

_locks: weakref.WeakKeyDictionary[object, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def _lock_for(owner: object) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get(owner)
        if lock is None:
            lock = _locks[owner] = threading.Lock()
        return lock


def _serialized(owner: object, fn: Callable[[], _T]) -> Callable[[], _T]:
    lock = _lock_for(owner)

    def call() -> _T:
        with lock:
            return fn()

    return call


async def in_thread(owner: object, fn: Callable[[], _T]) -> _T:
    """Run ``fn`` (a read) in a worker thread, one call per ``owner`` at a time."""
    return await asyncio.to_thread(_serialized(owner, fn))


async def settled(owner: object, fn: Callable[[], _T]) -> _T:
    """Run ``fn`` (a write) in a worker thread and wait for its outcome through cancellation.

    Raises:
        asyncio.CancelledError: the caller was cancelled; raised only once ``fn`` finished.
    """
    task = asyncio.ensure_future(asyncio.to_thread(_serialized(owner, fn)))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so the loop does not report it as lost
        raise cancelled
    return task.result()
