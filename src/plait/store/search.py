"""Full-text search across every session: the optional store protocol and its hits.

A store that keeps a full-text index of its records (both of plait's SQL stores,
D275) offers :class:`SearchStore`; ``client.sessions.search``, ``plait sessions
search`` and ``GET /sessions?q=`` use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

__all__ = ["MARK_END", "MARK_START", "SearchHit", "SearchStore"]

MARK_START: Final = "\u00ab"
"""What a snippet puts before a matched term (``«``)."""
MARK_END: Final = "\u00bb"
"""What a snippet puts after a matched term (``»``)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message that matched a search, in one live session that holds it."""

    session_id: str
    """The session whose transcript holds the message."""
    title: str | None
    """The session's title, or None."""
    position: int
    """The message's position in that session (a record position, as ``records`` reads)."""
    message: int
    """The message's number among the messages the session's view shows, from 0 (as
    ``plait sessions show`` numbers them; events are not counted)."""
    role: str
    """``user``, ``assistant``, ``tool`` or ``summary``."""
    snippet: str
    """The matched text around the terms, each matched term between ``«`` and ``»``."""
    created_at_us: int
    """When the message was written, microseconds since the epoch (UTC)."""


@runtime_checkable
class SearchStore(Protocol):
    """A store that searches the text of every session's messages (optional)."""

    def search(self, query: str, limit: int = 20, workspace: str | None = None) -> list[SearchHit]:
        """Return up to ``limit`` hits for ``query`` in live sessions, newest message first.

        A message that several live sessions show (forks share their prefix) is a hit
        in each; a deleted session, a hidden head and a position a session's view
        hides (trim, reset, rewind) are none.

        Args:
            query: words (all must match) and ``"quoted phrases"``, in the engine's syntax.
            limit: at most this many hits (a positive int).
            workspace: only this workspace's sessions; None for every workspace.

        Raises:
            InvalidArgumentError: an empty query or a bad limit.
            SearchQueryError: a query the engine cannot parse.
            StoreError: the store has no full-text index, or the read failed.
        """
        ...

    def reindex(self) -> None:
        """Rebuild the full-text index from the records.

        Raises:
            StoreError: the store has no full-text index, or the rebuild failed.
        """
        ...
