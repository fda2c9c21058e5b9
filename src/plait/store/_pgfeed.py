"""The PostgreSQL change feed: LISTEN on the channel every committed write notifies."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from plait.errors import StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["ChangeFeed"]


class ChangeFeed:
    """One store's listening connection, opened on first use and kept for the next.

    Args:
        conninfo: how to connect (never through the pool: a listening connection
            stays with its listener).
        kwargs: the connection options.
        channel: the channel to LISTEN on.
        guard: turns driver errors into the store's errors, naming what failed.
    """

    def __init__(
        self,
        conninfo: str,
        kwargs: dict[str, Any],
        channel: str,
        guard: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._channel = channel
        self._guard = guard
        self._mutex = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False

    def listen(self, timeout: float | None = None) -> Iterator[str]:
        """Start listening now (see ``PostgresStore.changes``) and iterate what arrives."""
        with self._mutex, self._guard("listen"):
            conn = self._conn
            if conn is None or conn.broken:
                import psycopg
                from psycopg import sql

                conn = psycopg.connect(self._conninfo, **self._kwargs)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self._conn = conn
        return self._iterate(conn, timeout)

    def _iterate(
        self, conn: psycopg.Connection[tuple[Any, ...]], timeout: float | None
    ) -> Iterator[str]:
        while True:
            with self._mutex:
                if self._closed or conn.closed:
                    return
                try:
                    with self._guard("listen"):
                        got = [n.payload for n in conn.notifies(timeout=timeout, stop_after=1)]
                except StoreError:
                    if self._closed:  # closed from another thread while waiting
                        return
                    raise
            if not got:
                return
            yield from got

    def close(self) -> None:
        """Close the listening connection; an iteration in progress ends."""
        import psycopg

        self._closed = True
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
