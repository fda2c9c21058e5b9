"""Store calls made from an event loop, run off it: one worker thread per session host.

A store call is a plain call (D1): on SQLite it answers in microseconds, on
PostgreSQL it is a network round trip. Code on an event loop that serves others (the
run loop, the HTTP server) hands each such call to a :class:`StoreWorker` and awaits
it, so the loop goes on serving while the store answers.

One thread, not a pool (D202): a host's session handles keep the row they last read,
the writer-lock state and a memo, and are written by the calls themselves without a
lock of their own. One worker runs a host's calls one at a time, in the order they
were made, as the one event loop thread did, so no new lock is needed anywhere below.

A call, once handed over, runs to its end: a caller cancelled meanwhile waits for it
and gets the cancellation after (a write that went through is never taken for one
that did not).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, TypeVar

__all__ = ["StoreWorker", "default_worker"]

_T = TypeVar("_T")

_NAME: Final = "plait-store"


class StoreWorker:
    """One thread that runs store calls in order for the event loops awaiting them.

    The thread starts with the first call and is left to end with :meth:`close`
    (or with the process). Calls run in a copy of the caller's context, so context
    variables (the session a run drives, the acting principal) read the same there.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._thread: int | None = None

    def _submit(self, fn: Callable[[], _T]) -> Future[_T]:
        with self._lock:
            # A forked child inherits the pool but not its thread: it starts its own.
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_NAME)
                self._pid = os.getpid()
            pool = self._pool
        context = contextvars.copy_context()
        return pool.submit(self._enter, context, fn)

    def _enter(self, context: contextvars.Context, fn: Callable[[], _T]) -> _T:
        self._thread = threading.get_ident()
        return context.run(fn)

    @property
    def on_worker(self) -> bool:
        """Whether the calling thread is this worker's (a call from there runs at once)."""
        return self._thread is not None and threading.get_ident() == self._thread

    async def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` in the worker and return its result (or raise its error).

        Raises:
            asyncio.CancelledError: the caller was cancelled; raised once ``fn`` ended.
        """
        value, cancelled = await self.run_through(fn)
        if cancelled is not None:
            raise cancelled
        return value

    async def run_through(self, fn: Callable[[], _T]) -> tuple[_T, asyncio.CancelledError | None]:
        """Run ``fn`` in the worker; return its result and the cancellation that came meanwhile.

        For a caller that must act on what a write did (report the record it
        appended) before it lets the cancellation go on.

        Raises:
            Exception: what ``fn`` raised (a cancellation meanwhile is raised instead).
        """
        if self.on_worker:  # already off the loop (a store call inside a store call)
            return fn(), None
        future = asyncio.wrap_future(self._submit(fn))
        cancelled: asyncio.CancelledError | None = None
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None and future.exception() is not None:
            raise cancelled  # the error is retrieved above, so it is not reported as lost
        return future.result(), cancelled

    def close(self) -> None:
        """Let the calls handed over run, then end the thread (a later call starts another)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=not self.on_worker)


_DEFAULT = StoreWorker()


def default_worker() -> StoreWorker:
    """The worker of a run whose target names none (one for the process)."""
    return _DEFAULT
