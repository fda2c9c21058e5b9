"""``plait chat``: the interactive terminal conversation.

It runs the agent loop on a stored session (``Session.stream``) and prints it
as it happens (:mod:`plait.cli._turns`). On a terminal the input line is
edited with readline (arrow keys; history kept across chats in ``$PLAIT_HOME``);
the first line names the model, the workspace, where tools run and the store;
continuing a session (``-c``, ``ID``, ``/resume``) shows its last turns.

Ctrl-C works at every prompt: at ``you>`` it drops the line, during a reply it
stops the run (the transcript stays valid and ``/retry`` picks it up), at a
tool-call question it denies the call and stops the run. Ctrl-D leaves.

Chat commands (``/help`` lists them): ``/resume [N|ID]``, ``/retry``, ``/fork``,
``/undo``, ``/redo``, ``/rename TITLE``, ``/name``, ``/history``, ``/export [PATH]``, ``/context``,
``/compact``, ``/uncompact``, ``/ask QUESTION``, ``/quit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.text import Text

from plait._prefix import describe, resolve_session_id
from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    age,
    console,
    open_client,
    pass_settings,
)
from plait.cli._render import print_messages
from plait.cli._terminal import SafeConsole, safe_text
from plait.cli._turns import (
    TERMINATED,
    Approver,
    TermAsInterrupt,
    answer_input,
    backend_line,
    describe_model,
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
from plait.cli.context import print_report
from plait.cli.export import default_export_path
from plait.cli.tools import mcp_option, mcp_servers_from, offered_tools
from plait.client import Client
from plait.errors import NothingToDoError, PlaitError, SessionNotFoundError
from plait.records import JSONValue
from plait.run import Run
from plait.session import Session
from plait.store import default_path
from plait.tools import MCPServer, Tool

__all__ = ["chat_command"]

HELP: Final = """\
/resume [N|ID]    continue a stored session (alone: pick one of the recent ones)
/retry            pick up an interrupted request, or continue a reply cut at the limit
/fork             branch this conversation and continue on the branch
/undo             take back the last exchange (your last message and what followed)
/redo             bring back what the last /undo took back
/rename TITLE     give it a title          /name   let the model name it
/history          the messages the model works with
/export [PATH]    write the conversation as an HTML page (.md for Markdown)
/context          where the context window goes, by source
/compact          fold the older messages into a summary now   /uncompact  undo it
/ask QUESTION     a side question that adds nothing to the conversation
/quit             leave (Ctrl-D works too; Ctrl-C drops the line or stops a reply)
At a tool-call question: y runs it, n denies it, a runs that tool unasked in this session."""

_SHOWN_TURNS: Final = 6
"""How many of the last messages a continued session shows."""

_HISTORY_LINES: Final = 1000


def _readline(history: Path) -> Callable[[], None]:
    """Edit input lines with readline and keep their history in ``history``; the saver."""
    try:
        import readline
    except ImportError:  # pragma: no cover - a Python without readline
        return lambda: None
    with contextlib.suppress(OSError):  # a first chat: no history yet
        readline.read_history_file(history)
    readline.set_history_length(_HISTORY_LINES)

    def save() -> None:
        with contextlib.suppress(OSError):  # a history not kept is no reason to fail
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)

    return save


@click.command("chat", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="[ID]", required=False)
@click.option("--continue", "-c", "resume_latest", is_flag=True, help="Continue the latest one.")
@model_option
@dir_option
@yes_option
@system_option
@run_options
@mcp_option
@pass_settings
def chat_command(
    settings: Settings,
    session_id: str | None,
    resume_latest: bool,
    model: str | None,
    directory: Path | None,
    yes: bool,
    system: str | None,
    settings_pairs: tuple[tuple[str, str], ...],
    no_tools: bool,
    tool_names: str | None,
    mcp_targets: tuple[str, ...],
) -> None:
    """Talk with an agent in the terminal; every turn is stored as it happens.

    Starts a new session, or continues ID (a unique prefix works, or `latest`)
    or, with -c, the latest. Lines that begin with / are commands: /help lists
    them. `-o KEY VALUE`, `--no-tools`, `--tools` and `--mcp` are as for `plait run`
    (an MCP server is started for each turn).
    """
    tools = tools_from(no_tools, tool_names)
    servers = mcp_servers_from(mcp_targets)
    model_settings = model_settings_from(settings_pairs)
    client = open_client(settings, create=True)
    out = console()
    interactive = is_terminal(sys.stdin)
    save_history = _readline(default_path().parent / "chat_history") if interactive else None
    chat = _Chat(client, out, model, directory, Approver(yes, SafeConsole(stderr=True)))
    chat.tools, chat.servers, chat.model_settings = tools, servers, model_settings
    session = session_for(client, session_id, resume_latest)
    setup(session, None, system)  # the folder is set by switch(), after the system prompt
    chat.greet(session, settings)
    # SIGTERM stops a turn as Ctrl-C does (its streamed text kept), then ends the chat.
    with TermAsInterrupt() as term:
        try:
            while not term.received:
                try:
                    line = input("you> ")
                except EOFError:
                    out.print()
                    break
                except KeyboardInterrupt:
                    out.print()
                    if term.received:
                        break
                    out.print(
                        Text("(Ctrl-C drops the line; /quit or Ctrl-D leaves)", style="dim")
                    )
                    continue
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
            chat.forget_if_empty()
            if save_history is not None:
                save_history()
    if term.received:
        raise SystemExit(TERMINATED)


class _Chat:
    """The state of one ``plait chat``: the client, the current session, the options."""

    def __init__(
        self,
        client: Client,
        out: Console,
        model: str | None,
        directory: Path | None,
        approver: Approver,
    ) -> None:
        self.client, self.out, self.model, self.directory = client, out, model, directory
        self.approve = approver
        self.tools: list[Tool] | None = None  # None: the built-in tools
        self.servers: list[MCPServer] = []  # --mcp: offered beside them, each turn
        self.model_settings: dict[str, JSONValue] | None = None  # given once, then kept
        self.session = client.session
        self.listed: list[str] = []  # the ids the last bare /resume showed, for /resume N
        self.made: set[str] = set()  # sessions this chat started (an empty one is not kept)

    def greet(self, session: Session, settings: Settings) -> None:
        """The start-up line: model, workspace, where tools run, the store; then the session."""
        where = f"{self.directory}" if self.directory is not None else "a temporary folder"
        tools = f"tools run in {where} ({backend_line(session)})"
        if self.tools == [] and not self.servers:  # --no-tools: nothing runs anywhere
            tools = "no tools offered"
        self.out.print(
            safe_text(
                f"plait chat · model {describe_model(self.model, session)} · "
                f"workspace {self.client.workspace} · {tools} · "
                f"store {settings.store}",
                "dim",
            ),
            soft_wrap=True,
        )
        self.out.print(Text("/help for commands, /quit or Ctrl-D to leave", style="dim"))
        self.switch(session)

    def forget_if_empty(self) -> None:
        """Delete the current session if this chat made it and nothing was said in it."""
        session = self.session
        if session.id in self.made and session.transcript.stored and session.transcript.length == 0:
            self.client.sessions.delete(session.id)

    def switch(self, session: Session) -> None:
        """Make ``session`` the one the chat talks in; show its last turns if it has any."""
        if session is not self.session:
            self.session.close_sandbox()
            self.forget_if_empty()
        self.session = session
        if not session.transcript.stored:
            self.made.add(session.id)  # setting its folder below may store it, empty
        self.approve.session_id = session.id
        if self.directory is not None and session.sandbox_backend is None:
            session.to("local", spec=str(self.directory))
        label = session.title or "(untitled)" if session.transcript.stored else "(new)"
        self.out.print(safe_text(f"session {session.id} {label}", "dim"), soft_wrap=True)
        if session.transcript.stored:
            shown = session.history()[-_SHOWN_TURNS:]
            if shown:
                n = len(shown)
                last = "the last message:" if n == 1 else f"the last {n} messages:"
                self.out.print(Text(last, style="dim"))
                print_messages(self.out, shown, indent="  ")

    def _turn(self, start: Callable[[], Run]) -> None:
        """Run one request; a failure (the model, the sandbox) is printed and the chat goes on.

        How the run ended is said as it ends: done, a limit or denied calls by the
        printer, an interruption by :func:`run_turn`, a failure here.
        """
        self.out.print(Text("assistant:", style="bold cyan"))
        try:
            run_turn(self.out, start, self.approve)
        except (PlaitError, OSError) as exc:
            self.out.print(safe_text(f"error: {exc}", "red"), soft_wrap=True)
            if self.session.transcript.stored and self.session.resumable() is not None:
                self.out.print(Text("/retry picks the request up", style="dim"))

    def prompt(self, text: str) -> None:
        """Send ``text`` as the next user message and run the turn."""
        self._turn(
            lambda: self.session.stream(
                text,
                provider=self.model,
                on_approval=self.approve,
                tools=offered_tools(self.tools, self.servers, self.session),
                model_settings=self.model_settings,
            )
        )

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
            self.out.print(safe_text(str(exc), "yellow"), soft_wrap=True)
        except (PlaitError, OSError) as exc:
            self.out.print(safe_text(f"error: {exc}", "red"), soft_wrap=True)
        except KeyboardInterrupt:
            self.out.print(Text("\ninterrupted", style="yellow"))
        return True

    def _help(self, args: list[str], rest: str) -> None:
        self.out.print(Text(HELP))

    def _quit(self, args: list[str], rest: str) -> bool:
        return False

    def _resume(self, args: list[str], rest: str) -> None:
        if args:
            self._resume_to(args[0])
            return
        self.listed = []
        for n, d in enumerate(describe(self.client, self.client.sessions.list(limit=10)), 1):
            self.listed.append(d.info.id)
            line = (
                f"  {n:>2}. {d.short}  {age(d.info.updated_at):>9}  {d.source:<11} "
                f"{d.info.length:>4} msgs  {d.label[:60]}"
            )
            self.out.print(safe_text(line), soft_wrap=True)
        if not self.listed:
            self.out.print(Text("no stored sessions in this workspace", style="dim"))
            return
        if not self.approve.ask:  # nobody to pick: say how
            self.out.print(Text("/resume N or /resume ID continues one", style="dim"))
            return
        try:
            picked = answer_input("pick a number or an id (Enter: stay here): ").strip()
        except (EOFError, KeyboardInterrupt):
            self.out.print()
            return
        if picked:
            self._resume_to(picked)

    def _resume_to(self, choice: str) -> None:
        if choice.isdigit() and 1 <= int(choice) <= len(self.listed):
            choice = self.listed[int(choice) - 1]
        try:
            found = resolve_session_id(self.client, choice)
        except SessionNotFoundError:
            if not choice.isdigit():
                raise
            # A number, not in the list (or with no list yet): say what N means.
            shown = f"1 to {len(self.listed)}" if self.listed else "none yet"
            raise NothingToDoError(
                f"no session numbered {choice} (listed: {shown}); /resume lists the recent ones"
            ) from None
        self.switch(self.client.sessions.open(found))

    def _retry(self, args: list[str], rest: str) -> None:
        info = self.session.resumable()
        if info is None:
            raise NothingToDoError("nothing was interrupted")
        self.out.print(safe_text(info.description, "dim"), soft_wrap=True)
        self._turn(
            lambda: self.session.resume_stream(
                provider=self.model,
                on_approval=self.approve,
                tools=offered_tools(self.tools, self.servers, self.session),
            )
        )

    def _fork(self, args: list[str], rest: str) -> None:
        self._stored()
        self.switch(self.session.fork())

    def _undo(self, args: list[str], rest: str) -> None:
        self._stored()
        messages = [r for r in self.session.transcript.records if r.kind != "event"]
        last = max((i for i, r in enumerate(messages) if r.kind == "user"), default=None)
        if last is None:
            raise NothingToDoError("no message of yours to take back")
        self.session.transcript.rewind(last)  # the old head stays, hidden: /redo brings it back
        self.out.print(
            Text(f"took back the last exchange ({last} messages left); /redo brings it back")
        )

    def _redo(self, args: list[str], rest: str) -> None:
        self._stored()
        try:
            self.session.transcript.undo_rewind()
        except NothingToDoError:
            raise NothingToDoError("nothing to redo: /redo brings back what /undo took") from None
        self.out.print(Text(f"brought it back ({self.session.transcript.length} messages)"))

    def _rename(self, args: list[str], rest: str) -> None:
        self._stored()
        title = self.session.rename(rest)
        self.out.print(safe_text(f"renamed to {title!r}"), soft_wrap=True)

    def _name(self, args: list[str], rest: str) -> None:
        title = asyncio.run(self.session.name_it(provider=self.model))
        self.out.print(safe_text(f"title: {self.session.title or title or '(none yet)'}"))

    def _history(self, args: list[str], rest: str) -> None:
        shown = self.session.history() if self.session.transcript.stored else []
        if not print_messages(self.out, shown):
            self.out.print(Text("(nothing yet)", style="dim"))

    def _export(self, args: list[str], rest: str) -> None:
        self._stored()
        target = args[0] if args else str(default_export_path(self.session, "html"))
        if target.endswith(".md"):
            path = self.session.export(target, format="markdown")
        else:
            path = self.session.export(target)
        self.out.print(safe_text(f"wrote {path}"), soft_wrap=True)

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
        self.session.transcript.uncompact()
        self.out.print(Text("the last compaction is undone"))

    def _ask(self, args: list[str], rest: str) -> None:
        if not rest:
            raise NothingToDoError("/ask needs a question")

        async def answer() -> None:
            async for piece in self.session.ask_stream(rest, provider=self.model):
                self.out.print(safe_text(piece), end="", soft_wrap=True)
            self.out.print()

        asyncio.run(answer())

    def _stored(self) -> None:
        if not self.session.transcript.stored:
            raise NothingToDoError("nothing is stored yet: say something first")

    _COMMANDS: Final[dict[str, Callable[[_Chat, list[str], str], bool | None]]] = {
        "/help": _help,
        "/quit": _quit,
        "/exit": _quit,
        "/resume": _resume,
        "/retry": _retry,
        "/fork": _fork,
        "/undo": _undo,
        "/redo": _redo,
        "/rename": _rename,
        "/name": _name,
        "/history": _history,
        "/export": _export,
        "/context": _context,
        "/compact": _compact,
        "/uncompact": _uncompact,
        "/ask": _ask,
    }
