"""Runs on a session: starting one, the board of runs in progress, subscribers, usage.

The loop itself is :func:`plait.run.drive`, one layer below; this part checks a
request, marks the session busy on its host's :class:`RunBoard`, and makes the
:class:`~plait.run.Run` whose body is the loop driving the session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from plait._checks import check_int
from plait.errors import (
    InvalidArgumentError,
    NothingToDoError,
    PlaitError,
    SessionBusyError,
    SessionClosedError,
    SessionLockedError,
    StorePartMissingError,
)
from plait.providers import (
    ModelSettings,
    Provider,
    Request,
    TextDelta,
    bounded,
    select_provider,
)
from plait.records import JSONValue, Message
from plait.run import (
    Approval,
    EventHook,
    Question,
    Run,
    RunEvent,
    RunResult,
    RunSpec,
    RunTarget,
    check_timeout,
    drive,
)
from plait.run.events import DEFAULT_REPEAT_LIMIT
from plait.session._values import SessionUsage
from plait.tools import BUILTIN_TOOLS, Offered, Tool, Toolset
from plait.tools.mcp import servers_from_settings

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = [
    "REPEAT_LIMIT",
    "RunBoard",
    "name_it",
    "name_prompt",
    "provider_for",
    "repeat_limit",
    "start_run",
    "steer",
    "text_stream",
    "title_from",
    "usage",
]

_log = logging.getLogger("plait")

_AUTO_TITLE_MAX: Final = 80  # a title the model gives is cut here (rename() allows MAX_TITLE)

NAME_IT_PROMPT: Final = (
    "Give the conversation below a short title: at most six words, no quotes, no "
    "trailing punctuation. Answer with the title only."
)
"""The system prompt ``name_it`` asks the model with."""


class RunBoard:
    """A host's runs in progress (one per session) and their subscribers."""

    def __init__(self) -> None:
        self.exclusive = False
        """True: one run at a time on the whole host (a client, seed 001)."""
        self._runs: dict[str, Run] = {}
        self._subscribers: dict[str, list[EventHook]] = {}
        self._lock = threading.Lock()

    def running(self, session_id: str) -> bool:
        """Whether a run is in progress on the session."""
        return session_id in self._runs

    def get(self, session_id: str) -> Run | None:
        """The run in progress on the session, or None."""
        return self._runs.get(session_id)

    def in_progress(self) -> list[Run]:
        """Every run in progress on this host."""
        with self._lock:
            return list(self._runs.values())

    def check_idle(self, session_id: str) -> None:
        """Raise SessionBusyError if a run is in progress here (or anywhere, when exclusive)."""
        with self._lock:
            self._check(session_id)

    def _check(self, session_id: str) -> None:
        runs = self._runs
        if session_id in runs or (self.exclusive and runs):
            raise SessionBusyError(session_id if session_id in runs else next(iter(runs)))

    def claim(self, session_id: str, make: Callable[[], Run]) -> Run:
        """Check the session is idle and register the run ``make`` builds, atomically."""
        with self._lock:
            self._check(session_id)
            run = self._runs[session_id] = make()
        return run

    def ended(self, session_id: str) -> None:
        """The session's run ended."""
        self._runs.pop(session_id, None)

    def subscribe(self, session_id: str, callback: EventHook) -> Callable[[], None]:
        """Add a subscriber to the session's runs; returns the function that removes it."""
        subscribers = self._subscribers.setdefault(session_id, [])
        subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                subscribers.remove(callback)

        return unsubscribe

    def notify(self, session_id: str, event: RunEvent) -> None:
        """Pass a run's event to the session's subscribers (a failing one is skipped)."""
        for callback in tuple(self._subscribers.get(session_id, ())):
            try:
                callback(event)
            except Exception:  # a subscriber's bug must not break the run it watches
                _log.exception("subscriber of session %s failed on %s", session_id, event.type)


def provider_for(head: Head, provider: Provider | str | None) -> Provider:
    """Explicit provider or spec > the session's stored ``model`` setting > the default."""
    if provider is not None and not isinstance(provider, str):
        return provider
    if provider is not None:
        return select_provider(provider)
    stored = head.settings().get("model") if head.row is not None else None
    if isinstance(stored, str):
        try:
            return select_provider(stored)
        except PlaitError:  # the configuration no longer has it (seed 001): the default
            _log.info("session %s: model %r is unavailable; the default", head.id, stored)
    return select_provider(None)


REPEAT_LIMIT: Final = "repeat_limit"
"""The settings key of how many times in a row a run lets the model make the same failing
tool call (:data:`~plait.run.events.DEFAULT_REPEAT_LIMIT` when not set)."""


def repeat_limit(settings: Mapping[str, object]) -> int:
    """The repeat limit a session's settings set, else the default.

    Raises:
        InvalidArgumentError: a stored value that is not a positive int.
    """
    value = settings.get(REPEAT_LIMIT)
    if value is None:
        return DEFAULT_REPEAT_LIMIT
    return check_int(value, REPEAT_LIMIT, lo=1)


def start_run(
    head: Head,
    target: RunTarget,
    text: str | None,
    *,
    streamed: bool,
    provider: Provider | str | None = None,
    tools: Sequence[Offered] | None = None,
    on_approval: Approval | None = None,
    on_question: Question | None = None,
    on_event: EventHook | None = None,
    timeout: float | None = None,
    keep_events: bool = False,
    max_steps: int = 20,
    model_settings: ModelSettings | Mapping[str, JSONValue] | None = None,
    run_id: str | None = None,
) -> Run:
    """Check everything, mark the session busy, and make the :class:`Run` driving ``target``."""
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise InvalidArgumentError("a prompt needs some text")
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise InvalidArgumentError(f"max_steps must be a positive int, got {max_steps!r}")
    offered: tuple[Offered, ...] = tuple(BUILTIN_TOOLS if tools is None else tools)
    if not all(isinstance(t, Tool | Toolset) for t in offered):
        raise InvalidArgumentError("tools must be plait Tools or toolsets (see plait.tools.tool)")
    named = [t.name for t in offered if isinstance(t, Tool)]
    if len(set(named)) != len(named):
        raise InvalidArgumentError("tool names must be unique")
    check_timeout(timeout)
    given = ModelSettings.from_json(model_settings) if model_settings is not None else None
    board = head.host.runs
    row = head.fresh() if head.row is not None else None
    if row is not None and row.status == "closed":
        raise SessionClosedError(head.id)
    if not head.lock.takes_turns and _locked_elsewhere(head):
        raise SessionLockedError(head.id)  # a writer taking turns waits for it instead
    model = provider_for(head, provider)
    board.check_idle(head.id)
    settings = head.settings(row) if row is not None else {}
    if tools is None:  # the default offer includes the servers the session names
        offered += tuple(servers_from_settings(settings))
    stored = stored_model_settings(settings)
    effective = given.over(stored) if given is not None else stored
    if not any(isinstance(t, Toolset) for t in offered):  # else checked once they are listed
        effective.check_tools(named)
    changes: dict[str, JSONValue] = {}
    if isinstance(provider, str) and settings.get("model") != provider:
        changes["model"] = provider  # seed 001: it continues on the model it was last given
    # Kept like the model spec, except a tool choice: it describes one request.
    kept = replace(effective, tool_choice=stored.tool_choice)
    if given is not None and kept != stored:
        changes[MODEL_SETTINGS] = kept.to_json() or None
    if changes:
        from plait.session.settings import set_settings

        set_settings(head, **changes)
    spec = RunSpec(
        model,
        offered,
        text,
        on_approval,
        on_question,
        max_steps,
        effective,
        repeat_limit=repeat_limit(settings),
    )
    hooks = [h for h in (on_event,) if h is not None]
    hooks.append(lambda event: board.notify(head.id, event))

    async def body(run: Run) -> RunResult:
        # The run is one turn: the writer lock is held from its first write to its end.
        calls = head.host.store_calls
        # A session not stored yet is locked by its first write (the create).
        taken = head.row is not None and await head.lock.take_turn(calls)
        try:
            return await drive(target, spec, run, worker=calls)
        finally:
            if taken:  # else there is nothing to end, and no store call to make
                await calls.run(lambda: head.lock.end_turn(taken))

    def make() -> Run:
        return Run(
            target,
            body,
            timeout=timeout,
            keep_events=keep_events,
            streamed=streamed,
            hooks=hooks,
            on_done=lambda: board.ended(head.id),
            run_id=run_id,
        )

    run = board.claim(head.id, make)
    owner = head.owner()
    if owner is not None:
        head.host.make_current(owner)  # seed 001: the handle a run uses becomes current again
    return run


MODEL_SETTINGS: Final = "model_settings"
"""The settings key of the model settings a session keeps."""


def _locked_elsewhere(head: Head) -> bool:
    """Whether another process writes the session; False where the store cannot say.

    A store without writer locks cannot see another process: a run there is guarded by
    the transcript's compare-and-set alone (D420).
    """
    try:
        return head.locked_elsewhere()
    except StorePartMissingError:
        return False


def stored_model_settings(settings: Mapping[str, JSONValue]) -> ModelSettings:
    """The model settings a session keeps (none set when it keeps none)."""
    raw = settings.get(MODEL_SETTINGS)
    return ModelSettings.from_json(raw) if isinstance(raw, Mapping) else ModelSettings()


def steer(head: Head, message: str) -> None:
    """Send a message to the session's run in progress (NothingToDoError when none)."""
    run = head.host.runs.get(head.id)
    if run is None or run.done:
        raise NothingToDoError(f"no run is in progress on session {head.id}")
    run.steer(message)


def title_from(reply: str, messages: Sequence[Message]) -> str:
    """A clean title from the model's answer; the first request's words when it gave none.

    Nor when its answer is an error: a line a failed tool call or a failed reply said
    (a small model asked for a title repeats what it read last), or one that reads as
    an error (``Error: ...``, a traceback).
    """
    line = next((ln for ln in reply.strip().splitlines() if ln.strip()), "")
    line = line.strip().strip("\"'`*#").strip().rstrip(".:;!")
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    if not line or _an_error(line, messages):
        first = next(m.text for m in messages if m.role == "user")
        line = " ".join(first.split()[:6]) or "Untitled"
    return line[:_AUTO_TITLE_MAX]


_ERROR_WORDS: Final = ("error:", "traceback", "exception:", "fatal:", "[", "{", "<")
"""How an error's text starts (and a tool's JSON or markup), never a title's."""


def _an_error(line: str, messages: Sequence[Message]) -> bool:
    """Whether a title candidate is an error's text rather than a name for the talk."""
    low = " ".join(line.lower().split())
    if low.startswith(_ERROR_WORDS):
        return True
    for m in messages:
        if m.role == "tool" and m.ok is False and low in " ".join(m.text.lower().split()):
            return True
    return False


def name_prompt(messages: Sequence[Message]) -> Request:
    """The request ``name_it`` sends: the instruction, then the last turns as text.

    What the person and the model said: tool output (an error, a file) names no
    conversation, and a small model would take it for the title.
    """
    said = [m for m in messages if m.role in ("user", "assistant") and m.text]
    transcript = "\n".join(f"{m.role}: {m.text[:500]}" for m in said[-12:])
    return Request([Message("system", NAME_IT_PROMPT), Message("user", transcript)], max_tokens=32)


async def text_stream(model: Provider, request: Request) -> AsyncIterator[str]:
    """The text pieces of one model call (tool calls ignored), held to the request's bounds."""
    events = bounded(model, request)
    try:
        async for event in events:
            if isinstance(event, TextDelta) and event.text:
                yield event.text
    finally:
        await events.aclose()


async def name_it(head: Head, provider: Provider | str | None) -> str | None:
    """Title the session by asking the model, unless it has one; None before an exchange."""
    from plait.session.writes import rename
    from plait.views import history

    if head.row is None:
        return None
    row = head.fresh()
    if row.title is not None:
        return row.title
    messages = history(head.store.read(row, row.layout.view_start, row.layout.end_seq))
    roles = {m.role for m in messages}
    if "user" not in roles or "assistant" not in roles:
        return None
    model = provider_for(head, provider)
    pieces = [p async for p in text_stream(model, name_prompt(messages))]
    return rename(head, title_from("".join(pieces), messages))


def usage(head: Head) -> SessionUsage:
    """The session's usage in view, summed from where the host's last sum stopped."""
    if head.row is None:
        return SessionUsage()
    row = head.fresh()
    lay = row.layout
    caches = head.host.caches
    start, base = caches.usage_sum(row) or (lay.view_start, SessionUsage())
    if start > lay.end_seq:  # cannot happen for one row; start over rather than trust it
        start, base = lay.view_start, SessionUsage()
    total = base + SessionUsage.from_records(head.store.read(row, start, lay.end_seq))
    caches.remember_usage(row, lay.end_seq, total)
    return total
