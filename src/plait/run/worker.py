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
import atexit
import contextlib
import contextvars
import os
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, Final, Generic, TypeVar

__all__ = ["StoreWorker", "default_worker"]

_T = TypeVar("_T")

_NAME: Final = "plait-store"


class _Call(Generic[_T]):
    """One call handed to the worker: what to run, and what came of it."""

    __slots__ = ("context", "done", "fn", "loop", "ok", "value", "waiter")

    def __init__(
        self, fn: Callable[[], _T], loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]
    ) -> None:
        self.fn: Callable[[], _T] | None = fn
        self.context: contextvars.Context | None = contextvars.copy_context()
        self.loop = loop
        self.waiter = waiter  # what the caller awaits now (a cancelled wait makes another)
        self.done = False  # set on the loop's thread, with the outcome already in place
        self.ok = False
        self.value: Any = None


def _finish(call: _Call[Any]) -> None:
    # On the caller's loop: the outcome is in place before `done` says so.
    call.done = True
    if not call.waiter.done():
        call.waiter.set_result(None)


def _serve(queue: SimpleQueue[_Call[Any] | None]) -> None:
    """The worker thread: run each call in its caller's context, in order, until told to end.

    It holds the queue, not the worker: a worker nobody refers to any more ends it.
    """
    while (call := queue.get()) is not None:
        fn, context = call.fn, call.context
        call.fn = call.context = None
        assert fn is not None and context is not None
        try:
            call.value = context.run(fn)
            call.ok = True
        except BaseException as exc:  # handed back to the caller, who raises it
            call.value = exc
        # Let go of what the call ran, and its context, before its caller wakes: an
        # object the caller drops next (a session and the sandbox it holds) must go
        # in the caller's thread then, not later in this one.
        del fn, context
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for the outcome
            call.loop.call_soon_threadsafe(_finish, call)
        del call  # the outcome is the caller's now; the thread keeps nothing of it


_live: weakref.WeakSet[StoreWorker] = weakref.WeakSet()
_every: weakref.WeakSet[StoreWorker] = weakref.WeakSet()  # made, with a thread or not


def _after_fork_in_child() -> None:
    # A forked child has none of its parent's threads, and a worker's lock may have been
    # held by one of them at the fork: each worker takes a lock of its own (its thread
    # starts anew on its next call, as the process id says).
    for worker in list(_every):
        worker._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _drain_at_exit() -> None:
    # The worker thread is a daemon (an idle one must not keep the process alive), so at
    # exit the calls already handed over are run to their end first.
    for worker in list(_live):
        worker.close()


class StoreWorker:
    """One thread that runs store calls in order for the event loops awaiting them.

    The thread starts with the first call and is left to end with :meth:`close`
    (or with the process, once the calls handed over have run). Calls run in a copy of
    the caller's context, so context variables (the session a run drives, the acting
    principal) read the same there. A call costs one hand-over through a queue and one
    wake-up of the caller's loop.
    """

    def __init__(self) -> None:
        self._queue: SimpleQueue[_Call[Any] | None] | None = None
        self._worker: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()
        _every.add(self)

    def _submit(self, call: _Call[Any]) -> None:
        with self._lock:
            # A forked child inherits the queue but not the thread: it starts its own.
            if self._queue is None or self._pid != os.getpid():
                self._queue = SimpleQueue()
                self._pid = os.getpid()
                self._worker = threading.Thread(
                    target=_serve, args=(self._queue,), name=_NAME, daemon=True
                )
                self._worker.start()
                weakref.finalize(self, self._queue.put, None)
                _live.add(self)
            self._queue.put(call)

    @property
    def on_worker(self) -> bool:
        """Whether the calling thread is this worker's (a call from there runs at once)."""
        worker = self._worker
        return worker is not None and worker.ident == threading.get_ident()

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
        loop = asyncio.get_running_loop()
        call: _Call[_T] = _Call(fn, loop, loop.create_future())
        self._submit(call)
        cancelled: asyncio.CancelledError | None = None
        while not call.done:
            try:
                await call.waiter
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
                if not call.done:  # the wait was cancelled, not the call: wait again
                    call.waiter = loop.create_future()
        if not call.ok:
            if cancelled is not None:
                raise cancelled
            raise call.value
        return call.value, cancelled

    def close(self) -> None:
        """Let the calls handed over run, then end the thread (a later call starts another)."""
        with self._lock:
            queue, self._queue = self._queue, None
            worker, self._worker = self._worker, None
            mine = self._pid == os.getpid()
        if queue is None or worker is None or not mine:
            return
        queue.put(None)
        if worker.ident != threading.get_ident():
            worker.join()


_DEFAULT = StoreWorker()


def default_worker() -> StoreWorker:
    """The worker of a run whose target names none (one for the process)."""
    return _DEFAULT
