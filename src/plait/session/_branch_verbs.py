"""The session's branching verbs, as one face of :class:`Session`.

:class:`BranchVerbs` is a base of :class:`~plait.session.Session`: ``fork``,
``fork_at``, ``detach`` and ``merge``, each one new session row planned by
:mod:`plait.session.branching` (its cost does not depend on the transcript's
length), and, when asked, the branch's own copy of the files from the workspace
checkpoints (:mod:`plait.session.checkpoints`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, cast

from plait.errors import InvalidArgumentError
from plait.records import Record
from plait.session import binding, branching, checkpoints, context
from plait.session._part import head_of
from plait.session._values import check_count, folder_path
from plait.store.base import SessionRow

if TYPE_CHECKING:
    from plait.session._head import Head
    from plait.session.session import Session

__all__ = ["BranchVerbs"]


class BranchVerbs:
    """Fork, fork at a message, detach, merge."""

    __slots__ = ()
    _head: Head

    def _me(self) -> Session:
        # A Session is the only class built on this one.
        return cast("Session", self)

    def _spawn(self, row: SessionRow, records: Iterable[Record] = ()) -> Session:
        branch = self._head.host.handle(self._head.store.create(row, list(records)))
        binding.share(self._head, head_of(branch))
        return branch

    def fork(
        self, dst: str | None = None, *, workspace: str | os.PathLike[str] | None = None
    ) -> Session:
        """Branch from the current state: one new row sharing this transcript, no records.

        Args:
            dst: the branch's id (default: a new UUIDv7).
            workspace: a folder for the branch's own copy of the files as they are now
                (the branch's tools then work there; the parent's files are untouched).

        Raises:
            SessionNotFoundError: never stored. SessionExistsError: ``dst`` is taken.
        """
        if workspace is None:
            return self._spawn(branching.fork_row(self._head, dst))
        folder = self._apart(folder_path(workspace))
        checkpoint = self._me().workspace.checkpoint()
        branch = self._spawn(branching.fork_row(self._head, dst))
        return self._own_workspace(branch, folder, checkpoint)

    def fork_at(
        self,
        keep_first: int,
        dst: str | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
    ) -> Session:
        """Branch keeping only the first ``keep_first`` messages in view (seed 003).

        Args:
            keep_first: how many messages the branch keeps.
            dst: the branch's id.
            workspace: a folder for the branch's own copy of the files as they were
                after those messages (from the workspace checkpoints).
        """
        if workspace is None:
            return self._spawn(branching.fork_at_row(self._head, keep_first, dst))
        folder = self._apart(folder_path(workspace))
        row = self._head.fresh()
        records = context.view(self._head, row)
        # Refused before anything is written: no branch without its files.
        checkpoint = checkpoints.checkpoint_at(records, check_count(keep_first, "keep_first"))
        branch = self._spawn(branching.fork_at_row(self._head, keep_first, dst))
        return self._own_workspace(branch, folder, checkpoint)

    def _apart(self, folder: str) -> str:
        """``folder``, refused if it is this session's own folder, inside it or around it.

        The branch's copy is restored there: in the session's own folder it would
        replace the files the session works on, and the two would share them.
        """
        target = self._head.settings().get("sandbox")
        spec = target.get("spec") if isinstance(target, Mapping) else None
        if isinstance(spec, str) and spec:
            mine, theirs = os.path.realpath(spec), os.path.realpath(folder)
            if (
                theirs == mine
                or mine.startswith(theirs + os.sep)
                or theirs.startswith(mine + os.sep)
            ):
                raise InvalidArgumentError(
                    f"workspace {folder!r} overlaps this session's own folder {spec!r}: "
                    "a branch's files go in a folder of their own"
                )
        return folder

    def _own_workspace(self, branch: Session, target: str, checkpoint: str | None) -> Session:
        """Point ``branch`` at ``target`` (same backend and policy), filled from ``checkpoint``."""
        if checkpoint is not None:
            checkpoints.checkpoints_of(self._head.store).restore(target, checkpoint)
        os.makedirs(target, exist_ok=True)
        backend = self._me().sandbox_backend or "local"
        return branch.to(backend, spec=target, policy=self._me().workspace.sandbox_policy)

    def detach(self, dst: str | None = None) -> Session:
        """Share this transcript in a new lineage root (``metadata["detached_from"]``).

        Args:
            dst: the new session's id (default: a new UUIDv7).

        Returns:
            The new session.

        Raises:
            SessionNotFoundError: never stored. SessionExistsError: ``dst`` is taken.
        """
        return self._spawn(branching.detach_row(self._head, dst))

    def merge(
        self, *others: Session, dst: str | None = None, operator: str = "Session.merge"
    ) -> Session:
        """Join other branches into a new session whose parents are all of them.

        The transcript is this session's (shared), then each other's records past
        the prefix it shares with this one (copied), in the order given.

        Args:
            others: the sessions to join.
            dst: the new session's id.
            operator: the lineage operator recorded (``Session.run`` for a run's output).
        """
        from plait.session.session import Session

        for other in others:
            if not isinstance(other, Session):
                raise InvalidArgumentError(f"merge takes sessions, not {type(other).__name__}")
        heads = [head_of(o) for o in others]
        return self._spawn(*branching.merge_rows(self._head, heads, dst, operator))
