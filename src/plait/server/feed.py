"""Wake the event hub when another process writes: a store's change feed, if it has one.

:class:`~plait.store.postgres.PostgresStore` announces every committed write on
``LISTEN/NOTIFY`` (``changes()``). A :class:`StoreFeed` listens in a thread and
asks the hub, on the server's loop, to poke the channels of the sessions that
changed, so records written by another server or the CLI reach this server's
observers at once instead of on the next keep-alive tick (decisions D84). A
store without a feed (SQLite) keeps the tick.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Final

from plait.errors import StoreError
from plait.server.sse import Hub
from plait.store import Store

__all__ = ["StoreFeed"]

_WAIT: Final = 0.5  # seconds one listen may block, so stop() is honoured promptly
_log = logging.getLogger("plait.server")


class StoreFeed:
    """Listen to a store's change feed and poke the hub's watched sessions.

    Args:
        store: the store; a feed runs only if it has ``changes(timeout=...)``.
        hub: the hub to poke.
        loop: the server's event loop (the hub is only touched there).
    """

    def __init__(self, store: Store, hub: Hub, loop: asyncio.AbstractEventLoop) -> None:
        self._changes: Callable[..., Iterator[str]] | None = getattr(store, "changes", None)
        self._hub = hub
        self._loop = loop
        self._stop = threading.Event()
        self._pending: set[str] = set()
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        """Whether the store has a change feed."""
        return self._changes is not None

    def start(self) -> None:
        """Start listening (no-op for a store without a feed)."""
        if self._changes is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="plait-store-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and wait for the thread (briefly)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(_WAIT * 4)

    def _run(self) -> None:
        assert self._changes is not None
        while not self._stop.is_set():
            try:
                for session_id in self._changes(timeout=_WAIT):
                    self._note(session_id)
                    if self._stop.is_set():
                        return
            except StoreError as exc:
                if self._stop.is_set():
                    return
                _log.warning("store change feed failed (observers fall back to the tick): %s", exc)
                self._stop.wait(1.0)

    def _note(self, session_id: str) -> None:
        with self._mutex:
            first = not self._pending
            self._pending.add(session_id)
        if first:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is closed: the server is gone
                self._stop.set()

    def _flush(self) -> None:
        with self._mutex:
            ids, self._pending = self._pending, set()
        for session_id in ids:
            self._hub.poke_watched(session_id)
