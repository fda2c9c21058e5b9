"""What the agent loop needs from the session it drives: a small protocol.

The loop sits below the session layer: it never imports :mod:`plait.session`,
it drives anything with these members (a :class:`plait.Session` has them all).
Keeping the list short keeps the loop honest about what a run touches: the
transcript's head (append, tail), the request it sends, the context measure,
compaction, and where tools run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from plait.compaction import Compaction
from plait.context import ModelLimits
from plait.records import EventRecord, JSONValue, Message, Record
from plait.tools import ToolContext
from plait.views import ResumeInfo

__all__ = ["RunTarget"]


class RunTarget(Protocol):
    """The members of a session the loop calls while it drives a run."""

    @property
    def id(self) -> str:
        """The session id."""
        ...

    @property
    def self_compaction(self) -> bool:
        """Whether the self-compaction tool is offered."""
        ...

    def inject(self, message: Mapping[str, JSONValue]) -> Record:
        """Append one message; returns the stored record."""
        ...

    def log_event(self, name: str, data: Mapping[str, JSONValue] | None = None) -> EventRecord:
        """Append an event the model never sees."""
        ...

    def tail(self, n: int = 20) -> list[Record]:
        """The last ``n`` records in view."""
        ...

    def resumable(self) -> ResumeInfo | None:
        """How an interrupted request would be picked up, or None."""
        ...

    def request_messages(self, reads: Collection[str] = ()) -> list[Message]:
        """The messages the next model call sends (opaque items only of formats in ``reads``)."""
        ...

    def compaction_due(
        self,
        model: str | None = None,
        tools: Iterable[object] | None = None,
        *,
        declared: ModelLimits | None = None,
        reserve: int | None = None,
    ) -> bool:
        """Whether the context, with ``reserve`` tokens kept for the reply, is at the mark.

        ``declared`` is what the model's server says of it.
        """
        ...

    async def compact(self, *, provider: Any = None) -> Compaction | None:
        """Fold the older part of the conversation into a summary."""
        ...

    def tool_context(self) -> ToolContext:
        """Where tools run: the sandbox folder and the mounted roots."""
        ...

    def workspace_checkpoint(self, context: ToolContext) -> str | None:
        """Checkpoint the files of ``context``'s workspace now (None: none kept)."""
        ...
