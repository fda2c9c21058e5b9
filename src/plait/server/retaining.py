"""A server's retention: the sessions idle past a configured age removed every so often.

``plait serve --retain-older-than 30d`` (``create_app(retain_older_than=...)``) runs
``client.sessions.retain`` every ``retain_every`` seconds over the server's scope. A pass
reads the whole store (every layout, and the checkpoints kept sessions name), so it runs
on a thread of its own through a client of its own on the server's store object: the
store worker that serves requests (D202) is never held by it, and the writer-lock holds
of this process are counted per store (D174), so a session the server is running is
seen as held and kept.

On a fleet every replica may run it: that is harmless (D313). Each removal takes the
session's writer lock and reads its idleness again under it, so two replicas never
both erase one session and a session written meanwhile stays; each replica's log says
what it removed. The first pass waits a random part of the period, so replicas started
together do not all scan at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import timedelta
from typing import Final

from plait.client import Client
from plait.errors import InvalidArgumentError, PlaitError
from plait.session.retention import Retained, parse_age

__all__ = ["DEFAULT_RETAIN_EVERY", "Retention", "keep_retaining"]

_log = logging.getLogger("plait.server.retention")
"""What each pass removed; ``plait serve`` shows it on stderr beside uvicorn's own lines."""

DEFAULT_RETAIN_EVERY: Final = 3600.0
"""Seconds between two retention passes of a server, by default."""


class Retention:
    """A server's retention setting: how old an idle session must be, how often to look.

    Args:
        older_than: see :func:`plait.session.retention.parse_age`.
        every: seconds between passes (at least 1).

    Raises:
        InvalidArgumentError: a bad age or period.
    """

    __slots__ = ("every", "older_than")

    def __init__(self, older_than: object, every: object = DEFAULT_RETAIN_EVERY) -> None:
        self.older_than: timedelta = parse_age(older_than, "retain_older_than")
        seconds = (
            parse_age(every, "retain_every").total_seconds()
            if isinstance(every, str)
            else every
        )
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 1 <= seconds < float("inf")
        ):
            raise InvalidArgumentError(
                f"retain_every is a number of seconds, at least 1, not {every!r}"
            )
        self.every: float = float(seconds)


def retain_once(client: Client, retention: Retention, all_workspaces: bool) -> Retained:
    """One pass on this thread, through a client of its own over ``client``'s store."""
    own = Client(client.workspace, store=client.store, writer_lock="write", lock_timeout=0)
    try:
        return own.sessions.retain(retention.older_than, all_workspaces=all_workspaces)
    finally:
        own.close()  # the store is the server's: it stays open


async def keep_retaining(client: Client, retention: Retention, all_workspaces: bool) -> None:
    """Run a retention pass every ``retention.every`` seconds, until cancelled."""
    await asyncio.sleep(retention.every * random.random())
    while True:
        try:
            done = await asyncio.to_thread(retain_once, client, retention, all_workspaces)
        except PlaitError as exc:  # the store is away: the next pass tries again
            _log.warning("retention failed: %s", exc)
        else:
            if done.sessions or done.skipped:
                _log.info(
                    "retention removed %d session(s) idle over %s: %d record(s), "
                    "%d checkpoint object(s); %d byte(s) given back (%s); %d kept in use",
                    len(done.sessions),
                    retention.older_than,
                    done.records,
                    done.checkpoint_objects,
                    done.bytes_freed,
                    done.reclaimed,
                    len(done.skipped),
                )
        await asyncio.sleep(retention.every)
