"""``plait run``: one request to a session's model, made for scripts.

It never waits for a person who is not there: without a terminal, and without
``--yes``, a tool call is denied and recorded as denied, and the run goes on.
The prompt is TEXT, or standard input when TEXT is ``-`` or not given. With
``--json`` every event is one JSON line and so is the end: a ``result`` line,
or an ``error`` line. A run that fails before the model answered leaves no
session behind when it made a new one.

How the run ended is said on stderr, in words, and in the exit status, so a
script can tell a finished answer from a cut one: 0 done (denied tool calls are
said, not failed), 3 stopped at the step limit or the output limit (or by the
content filter), 124 past ``--timeout``, 130 interrupted (143 by SIGTERM), 1 an
error.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Final, NoReturn

import click
from rich.text import Text

from plait.cli._common import CONTEXT_SETTINGS, Settings, console, open_client, pass_settings
from plait.cli._terminal import SafeConsole
from plait.cli._turns import (
    TERMINATED,
    Approver,
    Printer,
    TermAsInterrupt,
    dir_option,
    is_terminal,
    model_option,
    model_settings_from,
    run_options,
    run_turn,
    session_for,
    setup,
    system_option,
    tools_from,
    yes_option,
)
from plait.cli.tools import mcp_option, mcp_servers_from, offered_tools
from plait.client import Client
from plait.errors import NothingToDoError, PlaitError, RunInterruptedError, RunTimeoutError
from plait.records import JSONValue
from plait.run import Run, RunResult, event_json
from plait.run.events import end_reason
from plait.session import Session

__all__ = ["INCOMPLETE", "TIMED_OUT", "run_command"]

INCOMPLETE: Final = 3
"""The exit status of a run that stopped before its answer was finished (a limit)."""

TIMED_OUT: Final = 124
"""The exit status of a run past ``--timeout`` (as ``timeout(1)`` reports one)."""


def _prompt_text(text: str | None, resume_run: bool) -> str | None:
    """TEXT, or standard input for ``-`` or no TEXT (None with ``--resume``)."""
    if resume_run:
        if text is not None:
            raise click.UsageError("give TEXT or --resume, not both")
        return None
    if text is not None and text != "-":
        if not text.strip():
            raise click.UsageError("TEXT is blank: a prompt needs some text")
        return text
    if text is None and is_terminal(sys.stdin):
        raise click.UsageError("give TEXT, pipe it on standard input, or --resume")
    read = sys.stdin.read() if sys.stdin is not None else ""
    if not read.strip():
        raise click.UsageError("standard input held no prompt")
    return read.strip("\n")


@click.command("run", context_settings=CONTEXT_SETTINGS)
@click.argument("text", required=False)
@click.option("--session", "session_id", metavar="ID", help="Continue this stored session.")
@click.option("--continue", "-c", "resume_latest", is_flag=True, help="Continue the latest one.")
@click.option("--resume", "resume_run", is_flag=True, help="Pick up an interrupted request.")
@model_option
@dir_option
@yes_option
@system_option
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds allowed.")
@click.option("--max-steps", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines.")
@run_options
@mcp_option
@pass_settings
def run_command(
    settings: Settings,
    text: str | None,
    session_id: str | None,
    resume_latest: bool,
    resume_run: bool,
    model: str | None,
    directory: Path | None,
    yes: bool,
    system: str | None,
    timeout: float | None,
    max_steps: int,
    as_json: bool,
    settings_pairs: tuple[tuple[str, str], ...],
    no_tools: bool,
    tool_names: str | None,
    mcp_targets: tuple[str, ...],
) -> None:
    """Send TEXT to a session's model and run its tool calls until it is done.

    TEXT `-`, or no TEXT, reads the prompt from standard input. `-o KEY VALUE`
    sets a model setting (`-o max_tokens 200 -o temperature 0`); `--no-tools` and
    `--tools read_file,list_files` choose what is offered; `--mcp COMMAND_OR_URL`
    adds an MCP server's tools (for this run; `plait tools` lists them). Tool calls are
    asked about on a terminal; without one (and without --yes) each is denied
    and the model is told so. With --json every event is printed as one JSON
    object per line (text and tool-call deltas, records, tool starts and ends
    ...), then a `result` line (session id, text, steps, finish reason, whether
    the answer is complete, usage) or an `error` line.

    How the run ended is said on stderr and in the exit status: 0 done, 3 stopped
    at the step limit or the output limit, 124 past --timeout, 130 interrupted,
    1 an error.
    """
    prompt = _prompt_text(text, resume_run)
    tools = tools_from(no_tools, tool_names)  # bad options refuse before anything is made
    servers = mcp_servers_from(mcp_targets)
    model_settings = model_settings_from(settings_pairs)
    err = SafeConsole(stderr=True, highlight=False)
    try:
        client = open_client(settings, create=True)
        session = session_for(client, session_id, resume_latest)
        if system is not None and session.transcript.stored:
            raise click.UsageError("--system sets the prompt of a new session only")
        was_new = not session.transcript.stored
        if prompt is None and was_new:
            raise NothingToDoError(
                "--resume picks up a stored session's request: give --session ID or -c"
            )
        setup(session, directory, system)
    except PlaitError as exc:
        if as_json:
            _fail_json(exc, None)
        raise
    approver = Approver(yes, err)
    approver.session_id = session.id
    options: dict[str, Any] = {
        "provider": model,
        "on_approval": approver,
        "timeout": timeout,
        "max_steps": max_steps,
        "tools": offered_tools(tools, servers, session),
        "model_settings": model_settings,
    }

    def start() -> Run:
        if prompt is None:
            return session.resume_stream(**options)
        return session.stream(prompt, **options)

    again = f"plait run --resume --session {session.id}"
    with TermAsInterrupt() as term:  # SIGTERM stops the run as Ctrl-C does
        try:
            if as_json:
                try:
                    run = start()
                    approver.run = run
                    result = asyncio.run(_json_lines(run))
                except RunTimeoutError as exc:
                    _fail_json(exc, session.id, status=TIMED_OUT)
                except (PlaitError, OSError) as exc:
                    _fail_json(exc, _forget_if_unanswered(client, session, was_new))
                except KeyboardInterrupt as exc:
                    status = TERMINATED if term.received else 130
                    _fail_json(RunInterruptedError(session.id), session.id, exc, status=status)
                click.echo(json.dumps(_result_json(session, result), ensure_ascii=False))
                if end_reason(result.finish_reason) != "done":
                    raise SystemExit(INCOMPLETE)
                return
            out = console()
            printer = Printer(out, err, notices=err, retry=again)
            try:
                done = run_turn(out, start, approver, err, again, printer=printer)
            except RunTimeoutError:
                ended = printer.ended
                words = ended.words if ended is not None else "the run passed its timeout"
                err.print(Text(f"{words}; {again} picks it up", style="yellow"), soft_wrap=True)
                out.print(Text(f"session {session.id}", style="dim"))
                raise SystemExit(TIMED_OUT) from None
            except (PlaitError, OSError):
                made = session.transcript.stored  # False: the run failed before it wrote anything
                if made and _forget_if_unanswered(client, session, was_new) is None:
                    err.print(Text("no session was kept: the model never answered", style="dim"))
                raise
            out.print(Text(f"session {session.id}", style="dim"))
            if done is None:
                # interrupted, as a shell reports Ctrl-C (or the SIGTERM that stopped it)
                raise SystemExit(TERMINATED if term.received else 130)
            if end_reason(done.finish_reason) != "done":
                raise SystemExit(INCOMPLETE)  # the words went to stderr as it ended
        finally:
            session.close_sandbox()


def _forget_if_unanswered(client: Client, session: Session, was_new: bool) -> str | None:
    """Delete the session this run made if the model never answered; its id if it stays."""
    if not session.transcript.stored:
        return None
    if was_new and not any(r.kind == "assistant" for r in session.transcript.records):
        session.close_sandbox()
        client.sessions.delete(session.id)
        return None
    return session.id


def _fail_json(
    exc: BaseException,
    session_id: str | None,
    cause: BaseException | None = None,
    *,
    status: int = 1,
) -> NoReturn:
    """Print the error as one JSON line and end the command with ``status``."""
    line = {
        "type": "error",
        "session_id": session_id,
        "error": {"code": type(exc).__name__, "message": " ".join(str(exc).split())},
    }
    click.echo(json.dumps(line, ensure_ascii=False))
    raise SystemExit(status) from cause or exc


async def _json_lines(run: Run) -> RunResult:
    """Print every event of ``run`` as one JSON object per line; return its result."""
    async for event in run:
        click.echo(json.dumps(event_json(event), ensure_ascii=False))
    return await run


def _result_json(session: Session, result: RunResult) -> dict[str, JSONValue]:
    return {
        "type": "result",
        "session_id": session.id,
        "text": result.text,
        "steps": result.steps,
        "finish_reason": result.finish_reason,
        "complete": end_reason(result.finish_reason) == "done",
        "usage": dict(result.usage),
    }
