"""The session's rewind verbs, as one face of :class:`Session`.

:class:`RewindVerbs` is a base of :class:`~plait.session.Session`: rewinding in place
and its undo (:mod:`plait.session.rewinding`, D115), with the files when asked
(:mod:`plait.session.checkpoints`, D149), the hidden heads rewinds leave, and erase
(D117).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from plait.errors import InvalidArgumentError
from plait.session import checkpoints, rewinding

if TYPE_CHECKING:
    from plait.session._head import Head
    from plait.session.session import Session

__all__ = ["RewindVerbs"]


class RewindVerbs:
    """Rewind in place, undo a rewind, list the hidden heads, erase."""

    __slots__ = ()
    _head: Head

    def _session(self) -> Session:
        # A Session is the only class built on this one.
        return cast("Session", self)

    def rewind(
        self, keep_first: int, *, expect_version: int | None = None, files: bool = False
    ) -> str:
        """Move the head back in place: keep the first ``keep_first`` messages, keep the id.

        Messages are counted as :meth:`fork_at` counts them (events are not messages;
        opaque items are). The session keeps its id, title, settings and view state
        (a compaction undone stays undone); what it held before stays reachable as a
        *hidden head* in the lineage, so :meth:`undo_rewind` can bring it back. Atomic,
        and its cost does not grow with the transcript or the number of sessions.

        Args:
            keep_first: how many messages to keep.
            expect_version: rewind only if the head is still this version.
            files: also bring the workspace back to the files as they were after those
                messages (from the workspace checkpoints); the files as they are now are
                saved first, so ``undo_rewind(files=True)`` brings them back (D149).

        Returns:
            The id of the hidden head that keeps the old head.

        Raises:
            InvalidArgumentError: a negative count, or more messages than the session has.
            NothingToDoError: nothing lies past that message.
            SessionBusyError: a run is driving the session.
            SessionClosedError: the session is closed.
            StaleSessionError: ``expect_version`` is not the head.
            NothingToDoError: with ``files``, no checkpoint tells the files at that message.
        """
        if not isinstance(files, bool):
            raise InvalidArgumentError(f"files is True or False, not {files!r}")
        if files:
            return checkpoints.rewind_with_files(
                self._session(),
                keep_first,
                expect_version,
                lambda version: rewinding.rewind(self._head, keep_first, version),
            )
        return rewinding.rewind(self._head, keep_first, expect_version)

    def undo_rewind(
        self,
        branch_id: str | None = None,
        *,
        expect_version: int | None = None,
        files: bool = False,
    ) -> str:
        """Give the id back to a hidden head (the newest by default), undoing a rewind.

        What the session held until now becomes a hidden head in turn. With
        ``files=True`` the workspace gets back the files that head ends with (what a
        ``rewind(..., files=True)`` saved), after the files as they are now are saved.

        Returns:
            The id of the hidden head that keeps what the session held until now.

        Raises:
            NothingToDoError: there is no rewind to undo.
            InvalidArgumentError: ``branch_id`` is not one of the session's hidden heads.
        """
        if not isinstance(files, bool):
            raise InvalidArgumentError(f"files is True or False, not {files!r}")
        if files:
            return checkpoints.undo_rewind_with_files(
                self._session(),
                branch_id,
                expect_version,
                lambda version: rewinding.undo_rewind(self._head, branch_id, version),
            )
        return rewinding.undo_rewind(self._head, branch_id, expect_version)

    def hidden_heads(self) -> list[str]:
        """The ids of the heads earlier rewinds left hidden, the most recent first."""
        return [row.id for row in rewinding.hidden_heads(self._head)]

    def erase(self) -> None:
        """Delete this session and remove its records (see :meth:`SessionCollection.erase`).

        Raises:
            SessionNotFoundError: the session is not stored.
            SessionLockedError: another process has it open for writing.
        """
        rewinding.erase(self._head)
