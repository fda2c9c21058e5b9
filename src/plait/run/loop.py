"""One request, run to the end: :func:`prompt`."""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from plait.errors import InvalidArgumentError
from plait.providers import Provider, Request, StreamEvent, ToolSpec, complete
from plait.records import JSONValue, Message, Record, ToolCall
from plait.session import Session, SessionHost
from plait.store import MemoryStore
from plait.tools import BUILTIN_TOOLS, Tool, ToolContext, ToolOutcome
from plait.views import history, system_prompt

__all__ = ["Approval", "RunResult", "prompt", "prompt_once", "run_session"]

Approval = Callable[[ToolCall], "bool | Awaitable[bool]"]
"""Asked before each tool call runs; False denies it (the model reads that it was denied)."""

EventHook = Callable[[StreamEvent], object]


@dataclass(frozen=True, slots=True)
class RunResult:
    """What :func:`prompt` did."""

    text: str
    """The final reply's text."""
    records: tuple[Record, ...]
    """Every record the run appended, in order."""
    steps: int
    """Model calls made."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens summed over the run's replies (``input_tokens``, ``output_tokens``, ...)."""
    finish_reason: str = "stop"
    """Why the last reply ended; ``max_steps`` when the run stopped at the step limit."""


class _Tee:
    """A provider that passes every streamed event to a hook on its way."""

    def __init__(self, inner: Provider, hook: EventHook) -> None:
        self._inner, self._hook = inner, hook

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def model(self) -> str:
        return self._inner.model

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(request):
            self._hook(event)
            yield event


def _model_view(session: Session) -> list[Message]:
    """The request the next turn sends: the newest system prompt, then ``history()``."""
    records = session.records
    sp = system_prompt(records)
    return ([Message("system", sp)] if sp is not None else []) + history(records)


async def _approve(on_approval: Approval | None, call: ToolCall) -> bool:
    if on_approval is None:
        return True
    answer = on_approval(call)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


async def prompt(
    session: Session,
    text: str,
    *,
    provider: Provider,
    tools: Sequence[Tool] = BUILTIN_TOOLS,
    on_approval: Approval | None = None,
    on_event: EventHook | None = None,
    max_steps: int = 20,
) -> RunResult:
    """Send ``text`` to the session's model and run the tool calls it makes until it is done.

    The session's sandbox (``to("local")`` unless another target is set) is
    where tools run; its roots and mount modes apply.

    Args:
        session: a stored session this process may write.
        text: what the user says.
        provider: the model (see :func:`plait.providers.select_provider`).
        tools: the tools offered (default: shell, read_file, write_file, list_files).
        on_approval: asked before each tool call; False records a denied result.
        on_event: called with every streamed event (text and tool-call deltas, usage).
        max_steps: the most model calls this request may make.

    Returns:
        The final text, the records appended and the usage.

    Raises:
        InvalidArgumentError: bad arguments (nothing is written).
        SessionLockedError, SessionClosedError: as for any write.
        ProviderError: the model could not answer (what was recorded before stays valid).
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError("a prompt needs some text")
    _check_run(tools, max_steps)
    first = session.inject({"role": "user", "content": text})
    return await _loop(session, [first], provider, tools, on_approval, on_event, max_steps)


def _check_run(tools: Sequence[Tool], max_steps: int) -> None:
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise InvalidArgumentError(f"max_steps must be a positive int, got {max_steps!r}")
    if len({t.name for t in tools}) != len(tools):
        raise InvalidArgumentError("tool names must be unique")


async def _loop(
    session: Session,
    appended: list[Record],
    provider: Provider,
    tools: Sequence[Tool],
    on_approval: Approval | None,
    on_event: EventHook | None,
    max_steps: int,
) -> RunResult:
    """Call the model and run its tool calls until it stops asking, or ``max_steps``."""
    by_name = {t.name: t for t in tools}
    specs = [ToolSpec.from_dict(t.spec()) for t in tools]
    model: Provider = _Tee(provider, on_event) if on_event is not None else provider
    usage: dict[str, int] = {}
    reply_text, finish = "", "max_steps"
    for step in range(1, max_steps + 1):
        request = Request(_model_view(session), tools=specs)
        reply = await complete(model, request)
        meta: dict[str, JSONValue] = {
            "provider": provider.name,
            "model": provider.model,
            "finish_reason": reply.finish_reason,
        }
        if reply.usage is not None:
            meta["usage"] = reply.usage.to_json()
            for key, value in reply.usage.to_json().items():
                if isinstance(value, int):
                    usage[key] = usage.get(key, 0) + value
        appended.append(
            session.inject(
                {
                    "role": "assistant",
                    "content": reply.text,
                    "tool_calls": [c.to_json() for c in reply.tool_calls],
                    "meta": meta,
                }
            )
        )
        reply_text = reply.text
        if not reply.tool_calls:
            finish = reply.finish_reason
            return RunResult(reply_text, tuple(appended), step, usage, finish)
        ctx = _context(session)
        for call in reply.tool_calls:
            if not await _approve(on_approval, call):
                outcome = ToolOutcome(False, "the user denied this tool call")
            elif call.name not in by_name:
                outcome = ToolOutcome(False, f"there is no tool named {call.name!r}")
            else:
                outcome = await by_name[call.name].call(ctx, dict(call.arguments))
            appended.append(
                session.inject(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "tool_name": call.name,
                        "content": outcome.content,
                        "ok": outcome.ok,
                    }
                )
            )
    return RunResult(reply_text, tuple(appended), max_steps, usage, finish)


def _context(session: Session) -> ToolContext:
    if session.sandbox is None and session.sandbox_backend is None:
        session.to("local")
    return ToolContext.from_roots(session.require_sandbox().root, session.list_roots())


async def run_session(
    agent: Session,
    user: Session,
    *,
    provider: Provider,
    tools: Sequence[Tool] = BUILTIN_TOOLS,
    on_approval: Approval | None = None,
    on_event: EventHook | None = None,
    max_steps: int = 20,
) -> tuple[Session, RunResult]:
    """Seed 000's functional form: run an agent session on a user session.

    The output is a new session whose parents are both (``Session.run``): the
    agent's transcript (shared, not copied) followed by the user's messages, then
    the run's steps. It shares the *user* session's open sandbox handle (or takes
    the user's sandbox target), so the tools work where the user's did. Neither
    input changes.

    Returns:
        The output session and what the run did.

    Raises:
        InvalidArgumentError: the user session's last message is not a user request.
    """
    _check_run(tools, max_steps)
    messages = user.history()
    if not messages or messages[-1].role != "user":
        raise InvalidArgumentError("the user session must end with a user request to run")
    out = agent._join((user,), dst=None, operator="Session.run")
    out.close_sandbox()  # the agent's handle, if one was open: the run uses the user's
    if user.sandbox is not None and not user.sandbox.closed:
        out.with_sandbox(user.sandbox)
    elif user.sandbox_backend is not None:
        target = user.settings.get("sandbox")
        spec = target.get("spec") if isinstance(target, dict) else None
        out.to(user.sandbox_backend, spec=spec if isinstance(spec, str) else None)
    result = await _loop(out, [], provider, tools, on_approval, on_event, max_steps)
    return out, result


async def prompt_once(
    text: str,
    *,
    provider: Provider,
    system: str | None = None,
    tools: Sequence[Tool] = BUILTIN_TOOLS,
    on_approval: Approval | None = None,
    on_event: EventHook | None = None,
    max_steps: int = 20,
) -> RunResult:
    """Run one request with no stored session: nothing is persisted (seed 003).

    The run happens in a private in-memory store that is thrown away afterwards,
    with a managed temporary sandbox deleted at the end.
    """
    store = MemoryStore()
    host = SessionHost(store, os.getcwd())
    messages: list[dict[str, JSONValue]] = (
        [{"role": "system", "content": system}] if system is not None else []
    )
    session = host._create_with(
        messages, session_id=None, title=None, operator=None, metadata=None
    ).to("local")
    try:
        return await prompt(
            session,
            text,
            provider=provider,
            tools=tools,
            on_approval=on_approval,
            on_event=on_event,
            max_steps=max_steps,
        )
    finally:
        session.close_sandbox()
        store.close()
