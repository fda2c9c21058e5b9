"""Wake the event hub when another process writes or runs: a store's change feed and bus.

:class:`~plait.store.postgres.PostgresStore` announces every committed write on
``LISTEN/NOTIFY`` (``changes()``), and is an :class:`~plait.store.EventBus`
(``events()``): the same announcements, with the event batches other processes'
runs publish, in commit order on one connection. A :class:`StoreFeed` listens in
a thread and hands what it hears to the hub, on the server's loop and in the
order heard: a change pokes the session's channel if someone watches it (records
written by another server or the CLI reach this server's observers at once
instead of on the next keep-alive tick, decisions D84); a batch is relayed
(:meth:`Hub.relay`, D235), and one for a session nobody here watches is not even
read. After its connection failed, listening again, it pokes every watched
channel: what was announced meanwhile is in the store. A store without a feed
(SQLite) keeps the tick.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Final

from plait.errors import StoreError
from plait.server.sse import Hub
from plait.store import BusMessage, EventBus, Store

__all__ = ["StoreFeed"]

_WAIT: Final = 0.5  # seconds one listen may block, so stop() is honoured promptly
_log = logging.getLogger("plait.server")


class StoreFeed:
    """Listen to a store's change feed (and bus) and hand what it hears to the hub.

    Args:
        store: the store; a feed runs only if it has ``events(...)`` or
            ``changes(timeout=...)``.
        hub: the hub to poke.
        loop: the server's event loop (the hub is only touched there).
    """

    def __init__(self, store: Store, hub: Hub, loop: asyncio.AbstractEventLoop) -> None:
        self._listen: Callable[[], Iterator[BusMessage]] | None = None
        if isinstance(store, EventBus):
            bus = store
            self._listen = lambda: bus.events(timeout=_WAIT, wanted=hub.watching)
        else:
            changes: Callable[..., Iterator[str]] | None = getattr(store, "changes", None)
            if changes is not None:
                self._listen = lambda: (
                    BusMessage("changed", sid) for sid in changes(timeout=_WAIT)
                )
        self._hub = hub
        self._loop = loop
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._pending: list[BusMessage] = []
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        """Whether the store has a change feed."""
        return self._listen is not None

    def start(self) -> None:
        """Start listening (no-op for a store without a feed)."""
        if self._listen is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="plait-store-feed", daemon=True)
        self._thread.start()

    def wait_listening(self, timeout: float) -> bool:
        """Block until the feed first listens; False at once without a feed, or on ``timeout``.

        What is announced before then is not heard: a caller that starts the feed and
        then expects to hear a write made right after waits here first.
        """
        if self._listen is None or self._thread is None:
            return False
        return self._listening.wait(timeout)

    def stop(self) -> None:
        """Stop listening and wait for the thread (briefly)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(_WAIT * 4)

    def _run(self) -> None:
        assert self._listen is not None
        failed = False
        while not self._stop.is_set():
            try:
                messages = self._listen()  # listening from here on
                self._listening.set()
                if failed:  # the changes announced while nobody listened: read the store
                    failed = False
                    self._loop.call_soon_threadsafe(self._hub.poke_all)
                for message in messages:
                    self._note(message)
                    if self._stop.is_set():
                        return
            except StoreError as exc:
                if self._stop.is_set():
                    return
                _log.warning("store change feed failed (observers fall back to the tick): %s", exc)
                failed = True
                self._stop.wait(1.0)
            except RuntimeError:  # the loop is closed: the server is gone
                return

    def _note(self, message: BusMessage) -> None:
        with self._mutex:
            first = not self._pending
            self._pending.append(message)
        if first:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is closed: the server is gone
                self._stop.set()

    def _flush(self) -> None:
        with self._mutex:
            messages, self._pending = self._pending, []
        poked: set[str] = set()
        for message in messages:
            if message.kind == "changed":
                if message.session_id not in poked:  # one poke reads every change so far
                    poked.add(message.session_id)
                    self._hub.poke_watched(message.session_id)
            else:
                poked.discard(message.session_id)  # a change after a batch pokes again
                self._hub.relay(message)
