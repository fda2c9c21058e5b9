"""The functional forms that make sessions: an agent run on a user session, a one-off run.

They sit with the session layer because each makes a session; :func:`plait.run.prompt`
(which only drives one) is the loop's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from plait.errors import InvalidArgumentError
from plait.providers import Provider
from plait.records import JSONValue
from plait.run import Approval, EventHook, Question, RunResult
from plait.session.host import SessionHost
from plait.session.session import Session
from plait.store import MemoryStore
from plait.tools import BUILTIN_TOOLS, Tool

__all__ = ["prompt_once", "run_session"]


async def run_session(
    agent: Session,
    user: Session,
    *,
    provider: Provider | str | None = None,
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
    messages = user.history()
    if not messages or messages[-1].role != "user":
        raise InvalidArgumentError("the user session must end with a user request to run")
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise InvalidArgumentError(f"max_steps must be a positive int, got {max_steps!r}")
    out = agent.merge(user, operator="Session.run")
    out.close_sandbox()  # the agent's handle, if one was open: the run uses the user's
    if user.sandbox is not None and not user.sandbox.closed:
        out.with_sandbox(user.sandbox)
    elif user.sandbox_backend is not None:
        target = user.settings.get("sandbox")
        spec = target.get("spec") if isinstance(target, dict) else None
        out.to(user.sandbox_backend, spec=spec if isinstance(spec, str) else None)
    result = await out.resume(
        provider=provider,
        tools=tools,
        on_approval=on_approval,
        on_event=on_event,
        max_steps=max_steps,
    )
    return out, result


async def prompt_once(
    text: str,
    *,
    provider: Provider | str | None = None,
    system: str | None = None,
    tools: Sequence[Tool] = BUILTIN_TOOLS,
    on_approval: Approval | None = None,
    on_question: Question | None = None,
    on_event: EventHook | None = None,
    timeout: float | None = None,
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
    session = host.create_session(messages).to("local")
    try:
        return await session.prompt(
            text,
            provider=provider,
            tools=tools,
            on_approval=on_approval,
            on_question=on_question,
            on_event=on_event,
            timeout=timeout,
            max_steps=max_steps,
        )
    finally:
        session.close_sandbox()
        store.close()
