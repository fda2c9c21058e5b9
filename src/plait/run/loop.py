"""The agent loop: model call, tool calls (with approval), results, until done.

:func:`drive` is the body of every run: the session layer calls it for
``Session.prompt``, ``stream``, ``resume`` ... with itself as the
:class:`~plait.run.target.RunTarget`. :func:`prompt` is the functional form.

The transcript is valid after every step, and after every way a step can end:

* each reply is appended with its tool calls, then one result per call (denied,
  unknown and failing calls are failed results, never missing ones);
* a run cancelled (or timed out) while tools run gives each unanswered call a
  result saying it was interrupted and may or may not have run; a tool is never
  run again on its own;
* a reply cut off by a cancel or a provider failure is kept, marked with
  ``finish_reason`` ``interrupted`` or ``error``, and never sent to the model
  again (``views.model_messages``);
* a run that starts on a transcript a crash left with unanswered calls first
  adds those interrupted results (``recover_tools``).

Every call the loop makes on its target reads or writes the store, so each runs on
the host's :class:`~plait.run.worker.StoreWorker`, never on the event loop (D202);
a write runs to its end even when the run is cancelled meanwhile, and the record it
appended is reported before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Final, Protocol, TypeVar, Unpack

from plait._time import now_micros
from plait.compaction import (
    SELF_COMPACTION_TOOL,
    SELF_COMPACTION_TOOL_NAME,
    Compaction,
    self_compaction_result,
)
from plait.errors import (
    NothingToDoError,
    PlaitError,
    ProviderError,
    ProviderStalledError,
    ReplyTooLargeError,
    WriterLockLostError,
)
from plait.providers import (
    ModelSettings,
    Provider,
    Request,
    StreamEvent,
    TextDelta,
    ToolSpec,
    complete,
    declared_limits,
    reads_formats,
)
from plait.records import JSONValue, Message, Record, ToolCall
from plait.run.events import (
    DENIED,
    Approval,
    Denied,
    IterationEnd,
    Question,
    RecordAdded,
    RunOptions,
    RunResult,
    RunSpec,
    ToolFinished,
    ToolStarted,
)
from plait.run.handle import Run
from plait.run.target import RunTarget
from plait.run.telemetry import RunTelemetry
from plait.run.worker import StoreWorker, default_worker
from plait.tools import Tool, ToolContext, ToolOutcome, open_tools

__all__ = ["ASK_USER", "CONTINUE", "INTERRUPTED", "drive", "prompt"]

_log = logging.getLogger("plait")

_T = TypeVar("_T")

INTERRUPTED: Final = (
    "interrupted: the run stopped while this tool call was pending; it may or may not "
    "have run, and it was not run again"
)
"""The result a tool call gets when its run stopped before it had one."""

_CAPABLE: Final = frozenset({"openai", "openai-responses", "anthropic"})
"""Providers trusted to write a compaction summary (the embedded model cannot: measured)."""

CONTINUE: Final = "Continue exactly where your last reply stopped."
"""The request ``continue_response`` adds (seed 001)."""

ASK_USER: Final = ToolSpec(
    "ask_user",
    "Ask the user a question and wait for the answer.",
    {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "What to ask."}},
        "required": ["question"],
    },
)
"""The tool offered when a run has ``on_question``."""


class _Tee:
    """A provider that reports every streamed event and keeps the text so far."""

    def __init__(self, inner: Provider, run: Run) -> None:
        self._inner, self._run = inner, run
        self.text: list[str] = []

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def model(self) -> str:
        return self._inner.model

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(request):
            if isinstance(event, TextDelta):
                self.text.append(event.text)
            self._run.emit(event)
            yield event


async def _answer(callback: Callable[..., Any] | None, *args: object) -> Any:
    result = callback(*args) if callback is not None else None
    if inspect.isawaitable(result):
        result = await result
    return result


async def drive(
    session: RunTarget, spec: RunSpec, run: Run, *, worker: StoreWorker | None = None
) -> RunResult:
    """Run ``spec`` on ``session`` to the end, reporting every step through ``run``.

    The run is one trace (:mod:`plait.run.telemetry`) when OpenTelemetry is installed.
    Every call on ``session`` runs on ``worker`` (the process's own when None), off
    the event loop.

    Raises:
        NothingToDoError: a resume found nothing to pick up.
        ProviderError: the model failed (the cut-off reply is recorded first).
        ToolServerError: an MCP server offered could not be started (before anything is recorded).
        asyncio.CancelledError: the run was cancelled (the transcript is left valid).
    """
    telemetry = RunTelemetry(spec.provider, session.id)
    with telemetry.agent():
        # A toolset (an MCP server) is connected for the run and closed when it ends (D196).
        async with open_tools(spec.tools) as tools:
            calls = worker if worker is not None else default_worker()
            return await _steps(session, spec, tools, run, telemetry, calls)


async def _steps(
    session: RunTarget,
    spec: RunSpec,
    tools: Sequence[Tool],
    run: Run,
    telemetry: RunTelemetry,
    calls: StoreWorker,
) -> RunResult:
    appended: list[Record] = []

    async def in_one_call(job: Callable[[Callable[[dict[str, JSONValue]], Record]], _T]) -> _T:
        """Run ``job`` in one store call, with the append it is given; report what it appended.

        A hop to the worker costs more than most store calls, so the appends and reads
        of one step share one. The records are reported even when the job fails or the
        run is cancelled meanwhile; then the failure (or the cancellation) goes on.
        """
        written: list[Record] = []

        def inject(message: dict[str, JSONValue]) -> Record:
            record = session.inject(message)
            written.append(record)
            return record

        try:
            value, cancelled = await calls.run_through(lambda: job(inject))
        finally:
            for record in written:
                appended.append(record)
                run.emit(RecordAdded(record))
        if cancelled is not None:
            raise cancelled
        return value

    async def add(message: dict[str, JSONValue]) -> Record:
        return await in_one_call(lambda inject: inject(message))

    async def interrupted(pending: Sequence[ToolCall]) -> None:
        # One call: every pending call gets its result, even if the run is cancelled again.
        await in_one_call(lambda inject: [inject(_interrupted(call)) for call in pending])

    by_name = {t.name: t for t in tools}
    rerun: list[ToolCall] = []

    def begin(inject: Callable[[dict[str, JSONValue]], Record]) -> None:
        info = session.resumable()
        if info is not None and info.kind == "recover_tools":
            # A resume runs again a call known never to have started (its approval was
            # asked and never answered) and a call of an idempotent tool; every other
            # call without a result may have run, so it is recorded as interrupted.
            unstarted = {c.id for c in info.unstarted}
            for call in info.missing:
                found = by_name.get(call.name)
                again = call.id in unstarted or (found is not None and found.idempotent)
                if again and spec.text is None:
                    rerun.append(call)
                else:
                    inject(_interrupted(call))
        if spec.text is not None:
            inject({"role": "user", "content": spec.text})
        elif info is None:
            raise NothingToDoError(f"session {session.id} was not interrupted")
        elif info.kind == "continue_response":
            inject({"role": "user", "content": CONTINUE, "meta": {"resume": "continue_response"}})

    await in_one_call(begin)

    provider = spec.provider
    specs = [ToolSpec.from_dict(t.spec()) for t in tools]
    if spec.on_question is not None and ASK_USER.name not in by_name:
        specs.append(ASK_USER)
    # Seed 001: the self-compaction tool is offered when a request starts, if in force.
    self_compact = session.self_compaction and SELF_COMPACTION_TOOL_NAME not in by_name
    if self_compact:
        specs.append(ToolSpec.from_dict(SELF_COMPACTION_TOOL))
    summarizer = provider if provider.name in _CAPABLE else None

    async def compact() -> Compaction | None:
        """Compact now (the LLM strategy with a capable model, else the model-free default)."""
        try:
            try:
                done = await session.compact(provider=summarizer)
            except ProviderError:
                if summarizer is None:
                    raise
                # The model could not summarize: the model-free default still folds (D90).
                done = await session.compact()
        except NothingToDoError:
            return None
        if done is not None:
            run.emit(RecordAdded((await calls.run(lambda: session.tail(1)))[-1]))
        return done

    # The failing call the model made last, and how many times in a row it made it.
    failing: list[tuple[str, int]] = [("", 0)]

    def note(call: ToolCall, ok: bool) -> None:
        """Count a call that failed the same way as the one before it (name and arguments)."""
        if ok:
            failing[0] = ("", 0)
            return
        key = call.name + "\0" + json.dumps(dict(call.arguments), sort_keys=True, default=str)
        last, times = failing[0]
        failing[0] = (key, times + 1 if key == last else 1)

    async def run_tools(pending: list[ToolCall], step: int) -> None:
        """Run a reply's calls in order, each result written as it comes (interrupted ones too)."""
        try:
            ctx = await calls.run(session.tool_context)
            while pending:
                call = pending[0]
                found = by_name.get(call.name)
                changes_files = found is not None and not found.read_only
                # Taken before the call is announced: a started tool is running its own code.
                before = await _checkpoint(session, ctx) if changes_files else None
                run.emit(ToolStarted(call))
                tool_started = now_micros()
                with telemetry.tool(call.id, call.name):
                    denied = False
                    if self_compact and call.name == SELF_COMPACTION_TOOL_NAME:
                        outcome = ToolOutcome(True, self_compaction_result(await compact()))
                        ran = True
                    else:
                        outcome, ran, denied = await _call(
                            call, by_name, ctx, spec.on_approval, spec.on_question
                        )
                    # A denied or unknown call ran nothing: its result is written at once.
                    after = await _checkpoint(session, ctx) if changes_files and ran else None
                pending.pop(0)
                if len(outcome.content) > settings.tool_output_cap:
                    outcome = replace(outcome, content=_clip(outcome.content, settings))
                tool_meta: dict[str, JSONValue] = {
                    "timing": {"start_us": tool_started, "end_us": now_micros()}
                }
                if before is not None and after is not None:
                    tool_meta["workspace"] = {"before": before, "after": after}
                await add(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "tool_name": call.name,
                        "content": outcome.content,
                        "ok": outcome.ok,
                        "meta": tool_meta,
                    }
                )
                run.emit(ToolFinished(call, outcome.ok, outcome.content, denied))
                note(call, outcome.ok)
        except BaseException as exc:  # cancelled, timed out, or the sandbox/store failed
            if isinstance(exc, WriterLockLostError):
                # Another writer has the session now: this run writes nothing more.
                raise
            await interrupted(pending)
            data: dict[str, JSONValue] = {
                "step": step,
                "during": "tools",
                "error": type(exc).__name__,
            }
            await calls.run(partial(session.log_event, "run_interrupted", data))
            raise

    settings = spec.settings
    # What the model's server says of its window, asked once a run: a local server's
    # window is whatever it was started with, which no family table can know.
    declared = await declared_limits(provider)
    usage: dict[str, int] = {}
    reply_text, finish = "", "max_steps"
    reads = reads_formats(provider)
    if rerun:  # a resumed reply's calls that had not run: they run before the model is asked
        await run_tools(rerun, 0)
    for step in range(1, spec.max_steps + 1):
        steered: list[dict[str, JSONValue]] = [
            {"role": "user", "content": m, "meta": {"steered": True}} for m in run.take_steering()
        ]
        due = partial(
            session.compaction_due,
            model=provider.model,
            tools=specs,
            declared=declared,
            reserve=settings.max_tokens,
        )

        def prepare(
            inject: Callable[[dict[str, JSONValue]], Record],
            steered: list[dict[str, JSONValue]] = steered,
            due: Callable[[], bool] = due,
        ) -> list[Message] | None:
            """The steering appended, then the request's messages (None: compact first)."""
            for message in steered:
                inject(message)
            return None if due() else session.request_messages(reads)

        messages = await in_one_call(prepare)
        if messages is None:
            await compact()  # seed 001: at the model's compact_percent, by itself
            messages = await calls.run(partial(session.request_messages, reads))
        request = settings.request(messages, specs)
        tee = _Tee(provider, run)
        started = now_micros()
        try:
            with telemetry.chat(request) as chat:
                reply = await complete(tee, request)
                chat.done(reply)
        except asyncio.CancelledError:
            await _cut_off(add, tee, provider, "interrupted", started)
            raise
        except ProviderError as exc:
            # A reply past its caps, or a stream gone quiet, is recorded even when no text
            # came: the transcript then says why the run ended, and resume() asks again.
            bound = isinstance(exc, ReplyTooLargeError | ProviderStalledError)
            await _cut_off(
                add, tee, provider, "error", started, str(exc), request.max_reply_chars, bound
            )
            raise
        meta: dict[str, JSONValue] = {
            "provider": provider.name,
            "model": provider.model,
            "finish_reason": reply.finish_reason,
            "timing": {"start_us": started, "end_us": now_micros()},
        }
        if reply.model is not None and reply.model != provider.model:
            meta["response_model"] = reply.model
        if reply.response_id is not None:
            meta["response_id"] = reply.response_id
        if reply.reasoning:
            meta["reasoning"] = reply.reasoning
        if declared is not None:  # so a later report, read without the server, knows it
            meta["model_limits"] = dict(declared.to_json())
        for item in reply.items:  # kept verbatim, before the reply they came with
            await add({"role": "opaque", "format": item.format, "item": dict(item.item)})
        if reply.usage is not None:
            meta["usage"] = reply.usage.to_json()
            for key, value in reply.usage.to_json().items():
                if isinstance(value, int):
                    usage[key] = usage.get(key, 0) + value
        pending = list(reply.tool_calls)
        so_far = len(appended)
        try:
            await add(
                {
                    "role": "assistant",
                    "content": reply.text,
                    "tool_calls": [c.to_json() for c in reply.tool_calls],
                    "meta": meta,
                }
            )
        except asyncio.CancelledError:
            # Cancelled while the reply was written: its calls are answered as interrupted.
            if len(appended) > so_far and pending:
                await interrupted(pending)
            raise
        reply_text = reply.text
        if not reply.tool_calls:
            run.emit(IterationEnd(step, session.id))
            if run.steering_pending:
                continue  # a message came in while the model answered: it reads it
            finish = reply.finish_reason
            return RunResult(reply_text, tuple(appended), step, usage, finish)
        if settings.tool_choice not in (None, "auto", "none"):
            # A forced tool call was made: later calls may answer, or the run would loop.
            settings = replace(settings, tool_choice=None)
        await run_tools(pending, step)
        run.emit(IterationEnd(step, session.id))
        key, times = failing[0]
        if times >= spec.repeat_limit:
            # The model does not read the failure: asked again, it makes the call again.
            name = key.split("\0", 1)[0]
            return RunResult(
                reply_text,
                tuple(appended),
                step,
                usage,
                "repeated_call",
                repeated=name,
                repeats=times,
            )
    return RunResult(reply_text, tuple(appended), spec.max_steps, usage, finish)


def _interrupted(call: ToolCall) -> dict[str, JSONValue]:
    """The result of a call its run stopped before it had one."""
    return {
        "role": "tool",
        "tool_call_id": call.id,
        "tool_name": call.name,
        "content": INTERRUPTED,
        "ok": False,
        "meta": {"interrupted": True},
    }


async def _cut_off(
    add: Callable[[dict[str, JSONValue]], Awaitable[Record]],
    tee: _Tee,
    provider: Provider,
    reason: str,
    started: int,
    error: str | None = None,
    cap: int | None = None,
    always: bool = False,
) -> None:
    """Record the reply a cancel or a failure cut off, if any of it arrived (or ``always``).

    Its text is cut to ``cap``: a reply stopped for passing its cap keeps no more than it.
    """
    text = "".join(tee.text)
    if cap is not None and len(text) > cap:
        text = text[:cap]
    meta: dict[str, JSONValue] = {
        "provider": provider.name,
        "model": provider.model,
        "finish_reason": reason,
        "timing": {"start_us": started, "end_us": now_micros()},
    }
    if error is not None:
        meta["error"] = error
    if text or always:
        await add({"role": "assistant", "content": text, "meta": meta})


def _clip(content: str, settings: ModelSettings) -> str:
    """A tool's output cut to the run's cap, saying how much was cut."""
    cap = settings.tool_output_cap
    return f"{content[:cap]}\n[... {len(content) - cap:,} more characters cut]"


async def _checkpoint(session: RunTarget, ctx: ToolContext) -> str | None:
    """The workspace's checkpoint, taken off the event loop; None if it cannot be taken.

    A checkpoint is a record of the files, not part of the call: a file that cannot be
    read leaves the call without one rather than failing it.
    """
    try:
        return await asyncio.to_thread(session.workspace_checkpoint, ctx)
    except (PlaitError, OSError) as exc:
        _log.warning("session %s: no workspace checkpoint: %s", session.id, exc)
        return None


async def _call(
    call: ToolCall,
    by_name: dict[str, Tool],
    ctx: ToolContext,
    on_approval: Approval | None,
    on_question: Question | None,
) -> tuple[ToolOutcome, bool, bool]:
    """Run one tool call, asked for approval first; every failure is a failed result.

    Returns:
        The outcome, whether a tool ran (False when denied or unknown), and whether
        ``on_approval`` denied it.
    """
    if on_approval is not None:
        answer = await _answer(on_approval, call)
        if not bool(answer):
            reason = answer.reason if isinstance(answer, Denied) else DENIED
            return ToolOutcome(False, reason), False, True
    if call.name == ASK_USER.name and on_question is not None and call.name not in by_name:
        question = call.arguments.get("question")
        if not isinstance(question, str) or not question.strip():
            return ToolOutcome(False, "ask_user needs a non-empty 'question' string"), False, False
        answer = await _answer(on_question, question)
        return ToolOutcome(True, str(answer)), True, False
    if call.name not in by_name:
        return ToolOutcome(False, f"there is no tool named {call.name!r}"), False, False
    return await by_name[call.name].call(ctx, dict(call.arguments)), True, False


class _Promptable(Protocol):
    async def prompt(self, text: str, **options: Unpack[RunOptions]) -> RunResult: ...


async def prompt(session: _Promptable, text: str, **options: Unpack[RunOptions]) -> RunResult:
    """The functional form of :meth:`plait.Session.prompt` (same arguments, same errors)."""
    return await session.prompt(text, **options)
