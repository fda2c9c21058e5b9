"""``session.scratchpad``: the session's scratchpad and its versions (seed 003).

:class:`SessionScratchpad` is called for the scratchpad as it is now, and sets,
clears and lists its versions through :mod:`~plait.session.writes` and the store.
"""

from __future__ import annotations

from collections.abc import Mapping

from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.records import JSONLike, JSONValue
from plait.session import writes
from plait.session._part import Part
from plait.session._values import ScratchpadUpdate
from plait.store.base import ScratchpadEntry

__all__ = ["SessionScratchpad"]


class SessionScratchpad(Part):
    """The scratchpad: call it for the current one; ``set``, ``clear`` and ``history``.

    Reached as ``session.scratchpad``; made on each access, it holds only the handle.
    """

    __slots__ = ()

    def __call__(self) -> dict[str, JSONValue] | None:
        """Return the session's scratchpad, or None (seed 003).

        Raises:
            SessionNotFoundError: the session is not stored.
        """
        if self._head.row is None:
            raise SessionNotFoundError(self._head.id, "not stored yet")
        pad = self._head.fresh().scratchpad
        return dict(pad) if pad is not None else None

    def set(
        self,
        scratchpad: Mapping[str, JSONLike],
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONLike] | None = None,
    ) -> ScratchpadUpdate:
        """Store a new scratchpad version: a JSON object, who wrote it and why (seed 003).

        Args:
            scratchpad: the new scratchpad.
            source: who wrote it.
            reason: why.
            metadata: more about the change.

        Returns:
            The version stored.

        Raises:
            InvalidArgumentError: ``scratchpad`` is not a JSON object.
            SessionClosedError: the session was closed.
        """
        if scratchpad is None:
            raise InvalidArgumentError("scratchpad must be a dict, not NoneType")
        return writes.set_pad(self._head, scratchpad, source, reason, metadata)

    def clear(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONLike] | None = None,
    ) -> ScratchpadUpdate:
        """Clear the scratchpad, storing that as a new version (seed 003).

        Args:
            source: who cleared it.
            reason: why.
            metadata: more about the change.

        Returns:
            The version stored.

        Raises:
            SessionClosedError: the session was closed.
        """
        return writes.set_pad(self._head, None, source, reason, metadata)

    def history(self) -> list[ScratchpadEntry]:
        """Return every version the scratchpad has had, oldest first.

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        self._head.require()
        return self._head.store.scratchpad_history(self._head.id)
