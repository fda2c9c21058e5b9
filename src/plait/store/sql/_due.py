"""A call made a set delay after it is first asked for, on one thread kept for it.

A store that queues work for later (the moves in the order its append fast path owes,
D166) needs it done within a delay even if nothing else happens. A ``threading.Timer``
per batch would start a thread each time, and ``Thread.start`` makes its caller wait
until the new thread runs: on an append path that is armed again and again (appends
alternating between sessions), that wait cost more than the appends. :class:`DueCall`
keeps one daemon thread instead, which sleeps until armed, waits the delay, makes the
call, and ends after a while with nothing asked (the next arm starts another).

The call is held weakly while nothing is asked (a store's bound method would otherwise
keep a store dropped unclosed alive for as long as the thread), and strongly from the
arm that asks for it until it is made, as a timer would. A forked child starts a thread
of its own on its first arm.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Final

__all__ = ["DueCall"]

_IDLE_FOR: Final = 5.0
"""Seconds with nothing asked after which the thread ends."""

_log = logging.getLogger("plait.store")
_every: weakref.WeakSet[DueCall] = weakref.WeakSet()


class DueCall:
    """Make ``call`` ``delay`` seconds after :meth:`arm` is first called, on a kept thread.

    Arms while a call is pending change nothing: the first one sets its time.

    Args:
        call: what to call (exceptions it raises are logged, never raised).
        delay: seconds from the first arm to the call.
        name: the thread's name.
    """

    def __init__(self, call: Callable[[], object], delay: float, *, name: str) -> None:
        self._ref: Callable[[], Callable[[], object] | None] = (
            weakref.WeakMethod(call) if inspect.ismethod(call) else lambda: call
        )
        self._delay = delay
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._armed = False
        self._keep: Callable[[], object] | None = None  # the call, from an arm until it is made
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False
        _every.add(self)

    def _forked(self) -> None:
        """In a forked child: a lock of its own and no thread (the parent's is not here)."""
        self._cond = threading.Condition(threading.Lock())
        self._thread = None

    def arm(self) -> None:
        """Ask for the call ``delay`` seconds from now (a no-op while one is pending)."""
        with self._cond:
            if self._armed or self._closed:
                return
            self._armed = True
            self._keep = self._ref()
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    def close(self) -> None:
        """Drop the pending call, if any, and end the thread (later arms do nothing)."""
        with self._cond:
            self._closed = True
            self._armed = False
            self._keep = None
            self._cond.notify()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                if not self._armed:
                    cond.wait_for(lambda: self._armed or self._closed, _IDLE_FOR)
                if self._closed or not self._armed:
                    if self._thread is threading.current_thread():
                        self._thread = None  # ended: the next arm starts another
                    return
                cond.wait_for(lambda: self._closed, self._delay)
                if self._closed:
                    return
                self._armed = False  # an arm from here on asks for the next call
                call, self._keep = self._keep, None
            if call is None:
                continue  # its owner was collected before it armed
            try:
                call()
            except Exception:  # the owner's own error; the next arm tries again
                _log.exception("a delayed store call failed")
            del call  # held only while pending


def _after_fork() -> None:
    for due in list(_every):
        due._forked()


os.register_at_fork(after_in_child=_after_fork)
