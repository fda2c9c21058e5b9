"""Views over a transcript: what the model works with, and what was written.

Pure: no I/O. ``records`` is everything in a session's view; these functions
pick the prompt-visible part of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from plait._collector import paused as paused_collector
from plait.records import (
    CUT_OFF,
    AssistantRecord,
    EventRecord,
    Message,
    OpaqueRecord,
    Record,
    SummaryRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
    hidden_summaries,
    is_cut_off,
    newest_summary,
)

__all__ = [
    "CUT_OFF",
    "ResumeInfo",
    "ResumeKind",
    "ViewItem",
    "full_history",
    "history",
    "model_messages",
    "newest_summary",
    "resume_info",
    "shown",
    "system_prompt",
]  # re-exported

_NOT_IN_HISTORY = frozenset({"event", "system"})
_MESSAGES = frozenset({Message})

ViewItem: TypeAlias = Record | Message
"""What a view reads: records, or (from a store's view read) messages standing for theirs."""


def shown(
    items: Iterable[ViewItem],
    reads: Collection[str],
    hidden: Collection[int] = (),
    *,
    context: bool = False,
) -> list[Message]:
    """Return the messages of ``items`` a history shows: an opaque item only to its readers.

    A message a view read made is shown as it is; a summary at a position in
    ``hidden`` is left out, and so is a user message an agent added (its ``added``)
    unless ``context`` (what a request sends) keeps it.
    """
    if type(items) is list and set(map(type, items)) <= _MESSAGES:
        # A view read of messages alone (most transcripts): no record to look at.
        if context:
            return [m for m in items if m.role != "system"]
        return [m for m in items if m.role != "system" and m.added is None]
    out: list[Message] = []
    add = out.append
    view = Message.from_record
    # A message per record, all kept: collections would find nothing to free.
    with paused_collector():
        for r in items:
            if isinstance(r, Message):
                if r.role != "system" and (context or r.added is None):
                    add(r)
                continue
            kind = r.kind
            if kind in _NOT_IN_HISTORY:
                continue
            if kind == "user" and not context and isinstance(r, UserRecord) and r.added:
                continue
            if kind == "opaque":
                if isinstance(r, OpaqueRecord) and r.format in reads:
                    add(Message("opaque", "", seq=r.seq, item=r.item, format=r.format))
                continue
            if kind == "summary" and r.seq in hidden:
                continue
            add(view(r))
    return out


def history(
    records: Sequence[ViewItem], reads: Collection[str] = (), *, context: bool = False
) -> list[Message]:
    """Return the messages the model works with: the newest summary, then what it kept.

    A summary folds the records ``[folds_from, folds_to)``; everything from
    ``folds_to`` on (the records the compaction kept and those written since)
    follows it. Events, system prompts, older summaries and opaque items are left
    out; an opaque item whose ``format`` is in ``reads`` (what a provider can read)
    is kept, as a ``Message`` with role ``opaque``. A user message the person did not
    type (an agent's context, ``added``) is left out too: a history shows what was
    said; ``context=True`` keeps it, as a request sends it. ``records`` may hold
    messages in place of their records (a store's view read).
    """
    summary = newest_summary(records)
    if summary is None:
        return full_history(records, reads, context=context)
    after = (r for r in records if r.seq >= summary.folds_to and not isinstance(r, SummaryRecord))
    return [Message.from_record(summary), *shown(after, reads, context=context)]


def full_history(
    records: Sequence[ViewItem], reads: Collection[str] = (), *, context: bool = False
) -> list[Message]:
    """Return every prompt-visible message as written, each summary where its compaction ran.

    A summary an ``uncompact`` hid is left out: that compaction was undone. Opaque
    items are left out unless their ``format`` is in ``reads``; a user message an
    agent added unless ``context``. ``records`` may hold messages in place of their
    records (a store's view read).
    """
    return shown(records, reads, hidden_summaries(records), context=context)


def system_prompt(records: Sequence[Record]) -> str | None:
    """Return the newest system prompt in ``records``, or None."""
    for record in reversed(records):
        if record.kind == "system":
            return record.text
    return None


def model_messages(
    records: Sequence[Record], fallback_system: str | None = None, reads: Collection[str] = ()
) -> list[Message]:
    """Return the request the next model call sends: the newest system prompt, then ``history()``.

    The context an agent added (user messages with ``added``) is kept. A reply that
    was cut off is left out: the model starts that answer again.
    ``fallback_system`` is sent when ``records`` hold no system prompt (the
    session layer passes the one a trim or reset hid). Opaque items go only to a
    provider that reads their ``format`` (``reads``).
    """
    sp = system_prompt(records)
    if sp is None:
        sp = fallback_system
    kept = [r for r in records if not is_cut_off(r)] if any(map(is_cut_off, records)) else records
    # The context an agent added (a hook's notice, the environment) is sent as it was.
    return ([Message("system", sp)] if sp is not None else []) + history(kept, reads, context=True)


ResumeKind: TypeAlias = Literal[
    "call_model", "recover_tools", "retry_response", "continue_response"
]
"""How an interrupted request is picked up (seed 001)."""


@dataclass(frozen=True, slots=True)
class ResumeInfo:
    """What :meth:`plait.Session.resume` would do (seed 001)."""

    kind: ResumeKind
    """``call_model``, ``recover_tools``, ``retry_response`` or ``continue_response``."""
    description: str
    """The same, in words a user can read."""
    missing: tuple[ToolCall, ...] = ()
    """For ``recover_tools``: the calls that have no result."""
    unstarted: tuple[ToolCall, ...] = ()
    """Those of ``missing`` known never to have started: their approval was asked and
    never answered (a tool runs only once approved), so resume asks again and runs them."""


APPROVAL_ASKED: Final = "live_session_permission_route"
"""The event that asks a call's approval (seed 003's permission route)."""
APPROVAL_ANSWERED: Final = "live_session_permission_decision"
"""The event that records the answer (or the timeout) of an asked approval."""


def _unstarted(records: Sequence[Record], missing: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The missing calls whose approval was asked, with no answer recorded after it."""
    asked: set[str] = set()
    for record in records:
        if not isinstance(record, EventRecord):
            continue
        data = record.data
        if record.name == APPROVAL_ASKED:
            request = data.get("request")
            call_id = request.get("id") if isinstance(request, dict) else None
            if isinstance(call_id, str):
                asked.add(call_id)
        elif record.name == APPROVAL_ANSWERED:
            call_id = data.get("call_id")
            if isinstance(call_id, str):
                asked.discard(call_id)
    return tuple(c for c in missing if c.id in asked)


def resume_info(records: Sequence[Record]) -> ResumeInfo | None:
    """Say whether a transcript's last request was interrupted, and how to pick it up.

    Pure: reads the records only. ``None`` when the conversation was not
    interrupted (it is empty, or ends with a finished reply).
    """
    last: Record | None = None
    answered: set[str] = set()
    for record in reversed(records):
        if record.kind in ("event", "system", "summary", "opaque"):  # none of them is a turn
            continue
        if isinstance(record, ToolRecord):
            answered.add(record.tool_call_id)
            continue
        last = record
        break
    if last is None:
        if answered:  # tool results with no call before them: the model can read them
            return ResumeInfo("call_model", "tool results wait for the model's next call")
        return None
    if isinstance(last, AssistantRecord):
        reason = last.meta.get("finish_reason")
        if reason in CUT_OFF:
            return ResumeInfo(
                "retry_response",
                f"the reply was cut off ({reason}); the model is asked to start it again",
            )
        missing = tuple(c for c in last.tool_calls if c.id not in answered)
        if missing:
            names = ", ".join(c.name for c in missing)
            unstarted = _unstarted(records, missing)
            if len(unstarted) == len(missing):
                how = "each waited for its approval and never started: it is asked again"
            else:
                how = (
                    "each gets a result saying it was interrupted and may or may not have "
                    "run, and is not run again (unless its tool is idempotent)"
                )
                if unstarted:
                    how += "; those that waited for their approval are asked again"
            return ResumeInfo(
                "recover_tools",
                f"{len(missing)} tool call(s) have no result ({names}); {how}",
                missing,
                unstarted,
            )
        if last.tool_calls:
            return ResumeInfo("call_model", "every tool call has its result; the model is next")
        if reason == "length":
            return ResumeInfo(
                "continue_response",
                "the reply reached the output limit; the model is asked to continue",
            )
        return None
    # A user request with no reply after it.
    return ResumeInfo("call_model", "the request has no reply yet; the model is next")
