"""``plait chat``, the interactive terminal conversation, and ``plait run``, one request.

Both run the agent loop on a stored session (``Session.stream``) and print it
as it happens: the reply's text as it is written, each tool call and its
result. Before a tool runs, the user is asked (``y``/``n``) unless ``--yes``.
Ctrl-C during a reply stops the run; the transcript stays valid and
``/retry`` (or ``plait run --resume``) picks it up.

Chat commands (``/help`` lists them): ``/resume [ID]``, ``/retry``, ``/fork``,
``/rename TITLE``, ``/name``, ``/history``, ``/export [PATH]``, ``/context``,
``/compact``, ``/uncompact``, ``/ask QUESTION``, ``/quit``.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Console
from rich.text import Text

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    console,
    local_time,
    open_client,
    pass_settings,
)
from plait.cli._render import print_messages
from plait.cli.context import print_report
from plait.client import Client
from plait.errors import NothingToDoError, PlaitError, RunInterruptedError
from plait.providers import TextDelta
from plait.records import JSONValue, ToolCall
from plait.run import Run, RunEvent, RunResult, event_json
from plait.session import Session

__all__ = ["chat_command", "run_command"]

HELP: Final = """\
/resume [N|ID]    continue a stored session (alone: list the recent ones, numbered)
/retry            pick up an interrupted request (session.resume())
/fork             branch this conversation and continue on the branch
/rename TITLE     give it a title          /name   let the model name it
/history          the messages the model works with
/export [PATH]    write the conversation as an HTML page (.md for Markdown)
/context          where the context window goes, by source
/compact          fold the older messages into a summary now   /uncompact  undo it
/ask QUESTION     a side question that adds nothing to the conversation
/quit             leave (Ctrl-D works too)"""


class _Printer:
    """Prints a run's events: text as it streams, tool calls and their results."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.mid_line = False

    def _newline(self) -> None:
        if self.mid_line:
            self.out.print()
            self.mid_line = False

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta):
            self.out.print(Text(event.text), end="", soft_wrap=True)
            self.mid_line = not event.text.endswith("\n")
        elif event.type == "tool_start":
            self._newline()
            args = json.dumps(dict(event.call.arguments), ensure_ascii=False)
            self.out.print(Text(f"-> {event.call.name} {args}", style="yellow"), soft_wrap=True)
        elif event.type == "tool_end":
            first = event.content.strip().splitlines()[0] if event.content.strip() else ""
            mark, style = ("ok", "green") if event.ok else ("failed", "red")
            self.out.print(Text(f"   {mark}: {first[:200]}", style=style), soft_wrap=True)
        elif event.type == "finish":
            self._newline()


def _approver(yes: bool) -> Callable[[ToolCall], bool] | None:
    if yes:
        return None

    def approve(call: ToolCall) -> bool:
        args = json.dumps(dict(call.arguments), ensure_ascii=False)
        return click.confirm(f"run {call.name} {args}?", default=False, err=True)

    return approve


async def _drive(run: Run, printer: _Printer) -> RunResult:
    async for event in run:
        printer(event)
    return await run


def _run_turn(out: Console, start: Callable[[], Run]) -> None:
    """Run one request, printing it; Ctrl-C stops it and leaves the transcript valid."""
    printer = _Printer(out)
    try:
        asyncio.run(_drive(start(), printer))
    except (KeyboardInterrupt, RunInterruptedError):
        printer._newline()
        out.print(Text("interrupted: /retry picks the request up", style="yellow"))


def _session_for(client: Client, session_id: str | None, resume_latest: bool) -> Session:
    if session_id is not None:
        return client.sessions.open(session_id)
    if resume_latest:
        latest = client.sessions.latest()
        if latest is not None:
            return latest
    return client.session


def _setup(session: Session, directory: Path | None, system: str | None) -> None:
    """Point the sandbox at ``directory`` and set a system prompt on a new session."""
    if system is not None and not session.stored:
        session.inject({"role": "system", "content": system})
    if directory is not None:
        session.to("local", spec=str(directory))


_model_option = click.option(
    "--model",
    "-m",
    metavar="SPEC",
    default=None,
    help="provider[:model], e.g. openai:gpt-4o-mini (default: $PLAIT_MODEL, an API key "
    "in the environment, else the embedded model).",
)
_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The folder tools work in (default: a temporary folder, deleted afterwards).",
)
_yes_option = click.option("--yes", "-y", is_flag=True, help="Run tool calls without asking.")
_system_option = click.option("--system", metavar="TEXT", help="A system prompt for a new session.")


@click.command("run", context_settings=CONTEXT_SETTINGS)
@click.argument("text", required=False)
@click.option("--session", "session_id", metavar="ID", help="Continue this stored session.")
@click.option("--continue", "-c", "resume_latest", is_flag=True, help="Continue the latest one.")
@click.option("--resume", "resume_run", is_flag=True, help="Pick up an interrupted request.")
@_model_option
@_dir_option
@_yes_option
@_system_option
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds allowed.")
@click.option("--max-steps", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines.")
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
) -> None:
    """Send TEXT to a session's model and run its tool calls until it is done.

    With --json every event is printed as one JSON object per line (text and
    tool-call deltas, records, tool starts and ends ...), then a ``result`` line
    (session id, text, steps, finish reason, usage).
    """
    if (text is None) == (not resume_run):
        raise click.UsageError("give TEXT, or --resume to pick up an interrupted request")
    client = open_client(settings)
    session = _session_for(client, session_id, resume_latest)
    _setup(session, directory, system)
    options: dict[str, Any] = {
        "provider": model,
        "on_approval": _approver(yes),
        "timeout": timeout,
        "max_steps": max_steps,
    }

    def start() -> Run:
        if resume_run:
            return session.resume_stream(**options)
        return session.stream(str(text), **options)

    try:
        if as_json:
            result = asyncio.run(_json_lines(start()))
            click.echo(json.dumps(_result_json(session, result), ensure_ascii=False))
            return
        out = console()
        _run_turn(out, start)
        out.print(Text(f"session {session.id}", style="dim"))
    finally:
        session.close_sandbox()


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
        "usage": dict(result.usage),
    }


@click.command("chat", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="[ID]", required=False)
@click.option("--continue", "-c", "resume_latest", is_flag=True, help="Continue the latest one.")
@_model_option
@_dir_option
@_yes_option
@_system_option
@pass_settings
def chat_command(
    settings: Settings,
    session_id: str | None,
    resume_latest: bool,
    model: str | None,
    directory: Path | None,
    yes: bool,
    system: str | None,
) -> None:
    """Talk with an agent in the terminal; every turn is stored as it happens.

    Starts a new session, or continues ID (or the latest with -c). Lines that
    begin with / are commands: /help lists them.
    """
    client = open_client(settings)
    out = console()
    chat = _Chat(client, out, model, directory, yes)
    session = _session_for(client, session_id, resume_latest)
    _setup(session, None, system)  # the folder is set by switch(), after the system prompt
    chat.switch(session)
    out.print(Text("plait chat: /help for commands, /quit to leave", style="dim"))
    try:
        while True:
            try:
                line = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
            except (EOFError, click.Abort):
                out.print()
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not chat.command(line):
                    break
                continue
            chat.prompt(line)
    finally:
        chat.session.close_sandbox()


class _Chat:
    """The state of one ``plait chat``: the client, the current session, the options."""

    def __init__(
        self, client: Client, out: Console, model: str | None, directory: Path | None, yes: bool
    ) -> None:
        self.client, self.out, self.model, self.directory = client, out, model, directory
        self.approve = _approver(yes)
        self.session = client.session
        self.listed: list[str] = []  # the ids the last bare /resume showed, for /resume N

    def switch(self, session: Session) -> None:
        if session is not self.session:
            self.session.close_sandbox()
        self.session = session
        if self.directory is not None and session.sandbox_backend is None:
            session.to("local", spec=str(self.directory))
        label = session.title or "(untitled)" if session.stored else "(new)"
        self.out.print(Text(f"session {session.id} {label}", style="dim"), soft_wrap=True)

    def prompt(self, text: str) -> None:
        """Run one turn; a failure (the model, the sandbox) is printed and the chat goes on."""
        self.out.print(Text("assistant:", style="bold cyan"))
        try:
            _run_turn(
                self.out,
                lambda: self.session.stream(text, provider=self.model, on_approval=self.approve),
            )
        except (PlaitError, OSError) as exc:
            self.out.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
            if self.session.stored and self.session.resumable() is not None:
                self.out.print(Text("/retry picks the request up", style="dim"))

    def command(self, line: str) -> bool:
        """Do one slash command; False means leave."""
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        name, args = words[0].lower(), words[1:]
        rest = line[len(words[0]) :].strip()
        handler = self._COMMANDS.get(name)
        if handler is None:
            self.out.print(Text(f"unknown command {name}; /help lists them", style="red"))
            return True
        try:
            return handler(self, args, rest) is not False
        except NothingToDoError as exc:
            self.out.print(Text(str(exc), style="yellow"), soft_wrap=True)
        except (PlaitError, OSError) as exc:
            self.out.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        return True

    def _help(self, args: list[str], rest: str) -> None:
        self.out.print(Text(HELP))

    def _quit(self, args: list[str], rest: str) -> bool:
        return False

    def _resume(self, args: list[str], rest: str) -> None:
        if args:
            choice = args[0]
            if choice.isdigit() and 1 <= int(choice) <= len(self.listed):
                choice = self.listed[int(choice) - 1]
            self.switch(self.client.sessions.open(choice))
            print_messages(self.out, self.session.history()[-6:], indent="  ")
            return
        self.listed = []
        for n, info in enumerate(self.client.sessions.list(limit=10), start=1):
            self.listed.append(info.id)
            title = info.title or "(untitled)"
            line = f"  {n:>2}. {info.id}  {local_time(info.updated_at)}  {title}"
            self.out.print(Text(line), soft_wrap=True)
        if self.listed:
            self.out.print(Text("/resume N or /resume ID continues one", style="dim"))
        else:
            self.out.print(Text("no stored sessions in this workspace", style="dim"))

    def _retry(self, args: list[str], rest: str) -> None:
        info = self.session.resumable()
        if info is None:
            raise NothingToDoError("nothing was interrupted")
        self.out.print(Text(f"{info.kind}: {info.description}", style="dim"), soft_wrap=True)
        self.out.print(Text("assistant:", style="bold cyan"))
        _run_turn(
            self.out,
            lambda: self.session.resume_stream(provider=self.model, on_approval=self.approve),
        )

    def _fork(self, args: list[str], rest: str) -> None:
        self._stored()
        self.switch(self.session.fork())

    def _rename(self, args: list[str], rest: str) -> None:
        self._stored()
        title = self.session.rename(rest)
        self.out.print(Text(f"renamed to {title!r}"), soft_wrap=True)

    def _name(self, args: list[str], rest: str) -> None:
        title = asyncio.run(self.session.name_it(provider=self.model))
        self.out.print(Text(f"title: {self.session.title or title or '(none yet)'}"))

    def _history(self, args: list[str], rest: str) -> None:
        if not print_messages(self.out, self.session.history() if self.session.stored else []):
            self.out.print(Text("(nothing yet)", style="dim"))

    def _export(self, args: list[str], rest: str) -> None:
        self._stored()
        target = args[0] if args else None
        if target is not None and target.endswith(".md"):
            path = self.session.export_markdown(target)
        else:
            path = self.session.export(target)
        self.out.print(Text(f"wrote {path}"), soft_wrap=True)

    def _context(self, args: list[str], rest: str) -> None:
        self._stored()
        named = self.model.split(":", 1)[1] if self.model and ":" in self.model else None
        report = self.session.context(model=named)  # None: the newest reply's model
        if report is None:
            self.out.print(Text("no reply yet: nothing to measure", style="dim"))
        else:
            print_report(self.out, report)

    def _compact(self, args: list[str], rest: str) -> None:
        self._stored()
        done = asyncio.run(self.session.compact())
        if done is None:
            self.out.print(Text("nothing worth folding"))
        else:
            self.out.print(
                Text(f"folded {done.compressed} messages into a summary, kept {done.kept}")
            )

    def _uncompact(self, args: list[str], rest: str) -> None:
        self._stored()
        self.session.uncompact()
        self.out.print(Text("the last compaction is undone"))

    def _ask(self, args: list[str], rest: str) -> None:
        if not rest:
            raise NothingToDoError("/ask needs a question")

        async def answer() -> None:
            async for piece in self.session.ask_stream(rest, provider=self.model):
                self.out.print(Text(piece), end="", soft_wrap=True)
            self.out.print()

        asyncio.run(answer())

    def _stored(self) -> None:
        if not self.session.stored:
            raise NothingToDoError("nothing is stored yet: say something first")

    _COMMANDS: Final[dict[str, Callable[[_Chat, list[str], str], bool | None]]] = {
        "/help": _help,
        "/quit": _quit,
        "/exit": _quit,
        "/resume": _resume,
        "/retry": _retry,
        "/fork": _fork,
        "/rename": _rename,
        "/name": _name,
        "/history": _history,
        "/export": _export,
        "/context": _context,
        "/compact": _compact,
        "/uncompact": _uncompact,
        "/ask": _ask,
    }
