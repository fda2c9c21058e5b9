"""The PostgreSQL event bus: run events passed between processes, through a table.

A batch is one row of the UNLOGGED ``plait_bus`` table, inserted with a ``NOTIFY``
naming its id in the same statement (so in one transaction): the announcement is
delivered only once the row is committed, and in commit order with every other
announcement of the database, the change feed's included. A listener reads the
batches it is told of by id, and after a reconnect those past the last id it saw.
An event may be as large as a tool's output: ``NOTIFY`` payloads stop at 8000
bytes, a row does not (D235).

A :class:`BusPublisher` sends from a thread of its own (a
:class:`~plait.store.postgres._sender.Sender`, as the change feed's ``Notifier`` does):
what is queued within 15 ms goes in one statement, a row per session holding its
events in the order queued, so a session's batches are committed one after another
and heard in that order. Every few seconds it deletes
the rows older than a minute: a listener reads a batch within milliseconds, and
one that falls a minute behind is told that batch is lost.

A :class:`BusListener` listens on the bus's channel and the change feed's on one
connection, so that what it yields, changes and batches alike, is in commit order:
a batch queued after a write committed is heard after that write's change.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import StoreError
from plait.store._bus import BusMessage
from plait.store.postgres._sender import Sender

if TYPE_CHECKING:
    import psycopg

__all__ = ["BusListener", "BusPublisher", "new_origin"]

_log = logging.getLogger("plait.store")

_SEND: Final = (
    "WITH b AS (INSERT INTO plait_bus (session_id, origin, body) "
    "SELECT t.s, %(origin)s, t.b FROM unnest(%(sids)s::text[], %(bodies)s::text[]) "
    "WITH ORDINALITY AS t(s, b, n) ORDER BY t.n RETURNING id, session_id) "
    "SELECT max(b.id), count(pg_notify(%(channel)s, b.id || ' ' || %(origin)s || ' ' "
    "|| b.session_id)) FROM b"
)
"""One batch per session, each announced by id, in one statement (one transaction)."""
_LINGER: Final = 0.015
"""Seconds the publisher waits, once woken, for more events to send together."""
_KEEP: Final = 60.0
"""Seconds a batch stays in the table (a listener that far behind has lost it)."""
_PRUNE_EVERY: Final = 10.0
"""Seconds between two deletions of old batches by one publisher."""


class BusPublisher(Sender[dict[str, list[str]]]):
    """Send queued events, batched, as rows of ``plait_bus`` announced on ``channel``.

    Args:
        conninfo: how to connect (a connection of its own, never a pooled one).
        kwargs: the connection options.
        channel: the bus's notification channel.
        origin: this store's token; its listener skips its own batches.
    """

    def __init__(self, conninfo: str, kwargs: dict[str, Any], channel: str, origin: str) -> None:
        # A run's deltas come every few milliseconds while a model streams: they go in
        # one row per linger, unless someone waits for them (a run about to start).
        super().__init__(conninfo, kwargs, name="plait-pg-bus", linger=_LINGER, busy_linger=_LINGER)
        self._channel = channel
        self._origin = origin
        self._pending: dict[str, list[str]] = {}
        self._marks: deque[tuple[float, int]] = deque()  # (when, the last id sent then)
        self._pruned = time.monotonic()

    def publish(self, session_id: str, events: Sequence[str]) -> None:
        """Queue ``events`` (JSON texts) of a session; an empty batch is sent too."""
        with self._mutex:
            if self._closed:
                return
            queued = self._pending.get(session_id)
            if queued is None:
                self._pending[session_id] = list(events)
            else:
                queued.extend(events)
            self._queued()

    def _has_pending(self) -> bool:
        return bool(self._pending)

    def _take(self) -> dict[str, list[str]]:
        batch, self._pending = self._pending, {}
        return batch

    def _send_on(
        self, conn: psycopg.Connection[tuple[Any, ...]], batch: dict[str, list[str]]
    ) -> None:
        import psycopg

        params = {
            "origin": self._origin,
            "sids": list(batch),
            "bodies": ["[" + ",".join(events) + "]" for events in batch.values()],
            "channel": self._channel,
        }
        row = conn.execute(_SEND, params, prepare=True).fetchone()
        try:
            self._prune(conn, int(row[0]) if row and row[0] is not None else None)
        except psycopg.Error as exc:  # the next prune tries again; the batch is sent
            _log.warning("could not delete old event batches: %s", exc)

    def _lost(self, batch: dict[str, list[str]], exc: Exception) -> None:
        _log.warning("could not send the events of %d sessions: %s", len(batch), exc)

    def _prune(self, conn: psycopg.Connection[tuple[Any, ...]], last: int | None) -> None:
        """Delete the batches older than :data:`_KEEP` (whoever sent them), now and then.

        Ids grow with time, so the last id this publisher sent a minute ago bounds
        the rows that old, its own and the other publishers'.
        """
        now = time.monotonic()
        if last is not None and (not self._marks or now - self._marks[-1][0] >= 1.0):
            self._marks.append((now, last))
        if now - self._pruned < _PRUNE_EVERY:
            return
        self._pruned = now
        upto = None
        while self._marks and now - self._marks[0][0] >= _KEEP:
            upto = self._marks.popleft()[1]
        if upto is not None:
            conn.execute("DELETE FROM plait_bus WHERE id <= %s", (upto,))


class BusListener:
    """One store's listening connection for the bus and the change feed.

    Args:
        conninfo: how to connect (never through the pool: a listening connection
            stays with its listener).
        kwargs: the connection options.
        channels: the change feed's channel, then the bus's.
        origin: this store's token (its own batches are not heard).
        guard: turns driver errors into the store's errors, naming what failed.
    """

    def __init__(
        self,
        conninfo: str,
        kwargs: dict[str, Any],
        channels: tuple[str, str],
        origin: str,
        guard: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._changes, self._bus = channels
        self._origin = origin
        self._guard = guard
        self._mutex = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False
        self._last: int | None = None
        """The greatest batch id heard: after a reconnect, what lies past it was missed."""

    def listen(
        self, timeout: float | None, wanted: Callable[[str], bool] | None
    ) -> Iterator[BusMessage]:
        """Start listening now, and iterate what arrives (see ``PostgresStore.events``)."""
        missed: list[tuple[int, str, str, str]] = []
        with self._mutex, self._guard("listen for events"):
            conn = self._conn
            if conn is None or conn.broken:
                import psycopg
                from psycopg import sql

                conn = psycopg.connect(self._conninfo, **self._kwargs)
                for channel in (self._changes, self._bus):
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                self._conn = conn
                if self._last is not None:
                    # Listening again: the batches sent while nobody listened are in the
                    # table (changes are not: the keep-alive tick reads the store).
                    missed = conn.execute(
                        "SELECT id, origin, session_id, body FROM plait_bus "
                        "WHERE id > %s ORDER BY id",
                        (self._last,),
                    ).fetchall()
        return self._iterate(conn, timeout, wanted, missed)

    def _iterate(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        timeout: float | None,
        wanted: Callable[[str], bool] | None,
        missed: list[tuple[int, str, str, str]],
    ) -> Iterator[BusMessage]:
        seen: set[int] = set()
        for bid, origin, sid, body in missed:
            seen.add(bid)
            self._last = max(self._last or 0, bid)
            if origin != self._origin and (wanted is None or wanted(sid)):
                yield BusMessage("events", sid, body)
        while True:
            with self._mutex:
                if self._closed or conn.closed:
                    return
                try:
                    with self._guard("listen for events"):
                        got = [
                            (n.channel, n.payload)
                            for n in conn.notifies(timeout=timeout, stop_after=1)
                        ]
                        heard = self._heard(conn, got, wanted, seen)
                except StoreError:
                    if self._closed:  # closed from another thread while waiting
                        return
                    raise
            if not got:
                return
            yield from heard

    def _heard(
        self,
        conn: psycopg.Connection[tuple[Any, ...]],
        got: list[tuple[str, str]],
        wanted: Callable[[str], bool] | None,
        seen: set[int],
    ) -> list[BusMessage]:
        """What the notifications ``got`` say, the batches among them read (one query)."""
        parsed: list[tuple[int, str] | str] = []
        for channel, payload in got:
            if channel == self._changes:
                parsed.append(payload)
                continue
            try:
                text, origin, sid = payload.split(" ", 2)
                bid = int(text)
            except ValueError:  # not a batch's announcement (someone else's NOTIFY)
                continue
            self._last = max(self._last or 0, bid)
            if bid in seen or origin == self._origin or (wanted is not None and not wanted(sid)):
                continue
            parsed.append((bid, sid))
        ids = [p[0] for p in parsed if isinstance(p, tuple)]
        bodies: dict[int, str] = {}
        if ids:
            rows = conn.execute(
                "SELECT id, body FROM plait_bus WHERE id = ANY(%s)", (ids,)
            ).fetchall()
            bodies = {int(r[0]): str(r[1]) for r in rows}
        out: list[BusMessage] = []
        for p in parsed:
            if isinstance(p, str):
                out.append(BusMessage("changed", p))
            else:
                body = bodies.get(p[0])
                out.append(
                    BusMessage("lost", p[1]) if body is None else BusMessage("events", p[1], body)
                )
        return out

    def close(self) -> None:
        """Close the listening connection; an iteration in progress ends."""
        import psycopg

        self._closed = True
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()


def new_origin() -> str:
    """A token naming one store's batches (no spaces: it is a field of a notification)."""
    return secrets.token_hex(8)
