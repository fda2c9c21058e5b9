"""What ``plait chat`` and ``plait run`` share: printing a run, asking before a tool runs.

A run's events are printed as they happen (the reply's text as it streams, each
tool call and the first line of its result), every stored text through
:func:`plait.cli._terminal.safe`.

Before a tool runs the user is asked, unless ``--yes`` or the tool was allowed
for the session ("always"). Without a terminal nobody can answer, so the call
is denied without asking and recorded as denied: the model reads that and the
run goes on. Ctrl-C at the question denies the call and stops the run.

SIGTERM (a supervisor, ``kill``, a container stopping) is handled as Ctrl-C is
(:class:`TermAsInterrupt`): the reply streamed so far is kept, marked interrupted,
and the run can be resumed; the command then ends with status 143 (128 + 15).

The question is asked inside the run's event loop, which ``asyncio.run`` has
taught to turn Ctrl-C into a cancellation it delivers at the next ``await``; a
blocking ``input()`` never reaches one, so Ctrl-C would wait for Enter. While
asking, the default SIGINT handler is put back, so Ctrl-C interrupts the
question itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import click
from rich.console import Console
from rich.text import Text

from plait._prefix import resolve_session_id
from plait.cli._terminal import safe, safe_text
from plait.client import Client
from plait.errors import InvalidArgumentError, PlaitError, RunInterruptedError
from plait.providers import ModelSettings, ReasoningDelta, TextDelta, parse_model_spec
from plait.records import JSONValue, ToolCall
from plait.run import Denied, Run, RunEnded, RunEvent, RunResult
from plait.session import Session
from plait.tools import BUILTIN_TOOLS, Tool

__all__ = [
    "TERMINATED",
    "Approver",
    "Printer",
    "TermAsInterrupt",
    "answer_input",
    "checked_spec",
    "describe_model",
    "dir_option",
    "drive",
    "is_terminal",
    "model_option",
    "run_turn",
    "session_for",
    "setup",
    "system_option",
    "yes_option",
]

_ANSWERS: Final = {
    "y": "yes",
    "yes": "yes",
    "n": "no",
    "no": "no",
    "": "no",
    "a": "always",
    "always": "always",
}


def is_terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is an interactive terminal (False for a closed or missing one)."""
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # closed
        return False


class Printer:
    """Prints a run's events: text as it streams, tool calls and their results, its end.

    The model's reasoning, when its provider streams it, is printed dim as it comes,
    to ``thinking`` (the same console in a chat; stderr for ``plait run``, whose stdout
    is the reply alone), and a line ends between it and the reply.

    How the run ended is said in words on ``notices`` (``thinking`` unless given):
    done, the step limit, the output limit, the content filter, with the tool calls
    denied on the way and ``retry``, the command that goes on, when one would. A run
    that stops by a timeout, a cancel or an error raises it after its last event, and
    the command says that ending where it handles the error.
    """

    def __init__(
        self,
        out: Console,
        thinking: Console | None = None,
        *,
        notices: Console | None = None,
        retry: str = "/retry",
    ) -> None:
        self.out = out
        self.thinking = thinking if thinking is not None else out
        self.notices = notices if notices is not None else self.thinking
        self.retry = retry
        self.mid_line = False
        self.mid_thought = False
        self.ended: RunEnded | None = None

    def newline(self) -> None:
        """End a line of streamed text or reasoning, if one is open."""
        self._end_thought()
        if self.mid_line:
            self.out.print()
            self.mid_line = False

    def _end_thought(self) -> None:
        if self.mid_thought:
            self.thinking.print()
            self.mid_thought = False

    def __call__(self, event: RunEvent) -> None:
        """Print one event (the kinds a person reads; the others are skipped)."""
        if isinstance(event, ReasoningDelta):
            if not self.mid_thought and self.mid_line and self.thinking is self.out:
                self.out.print()
                self.mid_line = False
            self.thinking.print(safe_text(event.text, "dim italic"), end="", soft_wrap=True)
            self.mid_thought = bool(event.text) and not event.text.endswith("\n")
        elif isinstance(event, TextDelta):
            self._end_thought()
            self.out.print(safe_text(event.text), end="", soft_wrap=True)
            self.mid_line = not event.text.endswith("\n")
        elif event.type == "tool_start":
            self.newline()
            args = json.dumps(dict(event.call.arguments), ensure_ascii=False)
            self.out.print(safe_text(f"-> {event.call.name} {args}", "yellow"), soft_wrap=True)
        elif event.type == "tool_end":
            first = event.content.strip().splitlines()[0] if event.content.strip() else ""
            mark, style = ("ok", "green") if event.ok else ("failed", "red")
            self.out.print(safe_text(f"   {mark}: {first[:200]}", style), soft_wrap=True)
        elif event.type == "finish":
            self.newline()
        elif isinstance(event, RunEnded):
            self.ended = event
            if event.reason in _RAISED:
                return  # said where its error is handled, with what to do next
            self.newline()
            words = event.words
            if event.reason == "length":
                words += f"; {self.retry} continues it"
            elif event.reason == "max_steps":
                words += f"; {self.retry} goes on"
            quiet = event.complete and not event.denied
            self.notices.print(safe_text(words, "dim" if quiet else "yellow"), soft_wrap=True)


_RAISED: Final = frozenset({"timeout", "cancelled", "error"})
"""Endings a run raises an error for, after its last event."""


@contextmanager
def _interruptible() -> Iterator[None]:
    """Let Ctrl-C raise KeyboardInterrupt at once (see the module docstring)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: nothing to put back
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class TermAsInterrupt:
    """While entered, SIGTERM is delivered as SIGINT, so it stops a run as Ctrl-C does.

    ``asyncio.run`` turns SIGINT into a cancellation of the run, which records the text
    streamed so far and leaves the transcript resumable; raising SIGINT from the SIGTERM
    handler takes exactly that path, wherever the command is (streaming, asking, idle).
    ``received`` tells the command to end (status :data:`TERMINATED`) rather than go on.
    """

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None
        self._installed = False

    def _on_term(self, signum: int, frame: object) -> None:
        self.received = True
        signal.raise_signal(signal.SIGINT)

    def __enter__(self) -> TermAsInterrupt:
        try:
            self._previous = signal.signal(signal.SIGTERM, self._on_term)
            self._installed = True
        except ValueError:  # not the main thread: signals are not ours to handle
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False


TERMINATED: Final = 128 + signal.SIGTERM
"""The exit status after a SIGTERM, as a shell reports a process that signal ended."""


class Approver:
    """The ``on_approval`` callback of a CLI run: ask, allow always, or deny unasked.

    Args:
        yes: run every tool call without asking (``--yes``).
        err: where questions and notices go (stderr, so ``--json`` output stays clean).
        ask: whether a person can answer (default: stdin and stderr are terminals).
    """

    def __init__(self, yes: bool, err: Console, *, ask: bool | None = None) -> None:
        self.yes = yes
        self.err = err
        self.ask = ask if ask is not None else is_terminal(sys.stdin) and is_terminal(sys.stderr)
        self.always: dict[str, set[str]] = {}  # session id -> tool names allowed for it
        self.session_id = ""
        self.run: Run | None = None  # the run asking, cancelled by Ctrl-C at the question

    def allowed(self) -> set[str]:
        """The tools allowed without asking in the current session."""
        return self.always.setdefault(self.session_id, set())

    def __call__(self, call: ToolCall) -> bool | Denied:
        """Whether ``call`` may run (a :class:`Denied` says why not, to the model)."""
        if self.yes or call.name in self.allowed():
            return True
        args = json.dumps(dict(call.arguments), ensure_ascii=False)
        if not self.ask:
            self.err.print(
                safe_text(
                    f"denied {call.name} {args}: no terminal to ask at (--yes runs tool calls)",
                    "yellow",
                ),
                soft_wrap=True,
            )
            return Denied(
                "there was no terminal to ask the user at, so this call was not run "
                "(--yes runs tool calls unasked)"
            )
        question = f"run {safe(call.name)} {safe(args)}? [y]es, [n]o, [a]lways for this session: "
        while True:
            try:
                with _interruptible():
                    answer = _ANSWERS.get(input_line(question, self.err).strip().lower())
            except KeyboardInterrupt:
                self.err.print(Text("\ndenied; the run stops (Ctrl-C)", style="yellow"))
                if self.run is not None:
                    self.run.cancel()
                return False
            except EOFError:
                answer = "no"
            if answer is not None:
                break
        if answer == "always":
            self.allowed().add(call.name)
            self.err.print(safe_text(f"{call.name} runs unasked in this session now", "dim"))
        return answer != "no"


def input_line(prompt: str, err: Console) -> str:
    """Read one line from the terminal, the prompt on stderr (readline edits it if loaded)."""
    err.file.write(prompt)
    err.file.flush()
    return answer_input()


def answer_input(prompt: str = "") -> str:
    """``input(prompt)`` for an answer (y/n/a, a number), kept out of readline's history.

    Readline keeps every line typed at a terminal; an answer kept there would be what
    the up arrow brings back at ``you>`` instead of the last message.
    """
    readline = sys.modules.get("readline")  # loaded by plait chat on a terminal only
    before = readline.get_current_history_length() if readline is not None else 0
    line = input(prompt)
    if readline is not None and readline.get_current_history_length() > before:
        readline.remove_history_item(before)
    return line


async def drive(run: Run, printer: Callable[[RunEvent], None]) -> RunResult:
    """Pass every event of ``run`` to ``printer``; return its result."""
    async for event in run:
        printer(event)
    return await run


def run_turn(
    out: Console,
    start: Callable[[], Run],
    approver: Approver,
    thinking: Console | None = None,
    retry: str = "/retry",
    *,
    printer: Printer | None = None,
) -> RunResult | None:
    """Run one request, printing it; Ctrl-C stops it and leaves the transcript valid.

    Args:
        out: where the reply, tool calls and notices are printed.
        start: starts the run (called inside the interruptible part).
        approver: asked before each tool call; it is told the run while it lasts.
        thinking: where the model's reasoning goes (default: ``out``).
        retry: the command that picks an interrupted request up, as the notice names it.
        printer: prints the events (default: a :class:`Printer` on ``out`` and ``thinking``).

    Returns:
        The run's result, or None when it was interrupted.
    """
    if printer is None:
        printer = Printer(out, thinking, retry=retry)
    try:
        run = start()
        approver.run = run
        return asyncio.run(drive(run, printer))
    except (KeyboardInterrupt, RunInterruptedError):
        printer.newline()
        out.print(Text(f"interrupted: {retry} picks the request up", style="yellow"))
        return None
    finally:
        approver.run = None


def session_for(client: Client, session_id: str | None, resume_latest: bool) -> Session:
    """The session a command works on: ID (a prefix or ``latest``), the latest, or a new one."""
    if session_id is not None:
        return client.sessions.open(resolve_session_id(client, session_id))
    if resume_latest:
        latest = client.sessions.latest()
        if latest is not None:
            return latest
    return client.session


def setup(session: Session, directory: Path | None, system: str | None) -> None:
    """Point the sandbox at ``directory`` and set a system prompt on a new session."""
    if system is not None and not session.transcript.stored:
        session.inject({"role": "system", "content": system})
    if directory is not None:
        session.to("local", spec=str(directory))


def describe_model(spec: str | None, session: Session, env: Mapping[str, str] = os.environ) -> str:
    """Which model a run will use, as the provider choice will make it (nothing is loaded)."""
    if spec:
        return spec
    stored = session.settings.get("model") if session.transcript.stored else None
    if isinstance(stored, str) and stored:
        return f"{stored} (the session's)"
    if (env.get("PLAIT_MODEL") or "").strip():
        return f"{env['PLAIT_MODEL'].strip()} ($PLAIT_MODEL)"
    if env.get("OPENAI_API_KEY"):
        return "openai ($OPENAI_API_KEY)"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic ($ANTHROPIC_API_KEY)"
    return "local (the embedded model)"


def checked_spec(ctx: click.Context, param: click.Parameter, spec: str | None) -> str | None:
    """A ``--model`` that is no model spec is refused before anything is opened."""
    if spec is not None:
        try:
            parse_model_spec(spec)
        except InvalidArgumentError as exc:
            raise click.BadParameter(str(exc), ctx, param) from exc
    return spec


model_option = click.option(
    "--model",
    "-m",
    metavar="SPEC",
    default=None,
    callback=checked_spec,
    help="provider[:model], e.g. openai:gpt-4o-mini (default: $PLAIT_MODEL, an API key "
    "in the environment, else the embedded model).",
)
"""``--model/-m SPEC``."""
dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The folder tools work in (default: a temporary folder, deleted afterwards).",
)
"""``--dir DIR``: where tools run."""
yes_option = click.option("--yes", "-y", is_flag=True, help="Run tool calls without asking.")
"""``--yes/-y``."""
system_option = click.option(
    "--system", "-s", metavar="TEXT", help="A system prompt for a new session."
)
"""``--system/-s TEXT``."""


def _setting_value(raw: str) -> JSONValue:
    """``-o`` values are JSON when they parse as JSON (20, 0.5, ["a"]), else text."""
    try:
        value: JSONValue = json.loads(raw)
    except ValueError:
        return raw
    return value


def model_settings_from(pairs: tuple[tuple[str, str], ...]) -> dict[str, JSONValue] | None:
    """The ``-o KEY VALUE`` pairs as a model-settings object, checked; None when none given.

    Raises:
        click.BadParameter: a key that is not a setting, or a bad value.
    """
    if not pairs:
        return None
    found: dict[str, JSONValue] = {}
    for key, raw in pairs:
        found[key] = _setting_value(raw)
    try:
        return ModelSettings.from_json(found).to_json()
    except PlaitError as exc:
        raise click.BadParameter(str(exc), param_hint="-o") from None


def tools_from(no_tools: bool, names: str | None) -> list[Tool] | None:
    """The tools ``--no-tools`` / ``--tools a,b`` offer; None for the built-in four.

    Raises:
        click.BadParameter: a name that is not a built-in tool.
    """
    if no_tools:
        return []
    if names is None:
        return None
    by_name = {t.name: t for t in BUILTIN_TOOLS}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise click.BadParameter(
            f"no tool named {', '.join(unknown)}; the tools are {', '.join(by_name)}",
            param_hint="--tools",
        )
    return [by_name[n] for n in wanted]


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``-o KEY VALUE`` (model settings), ``--no-tools`` and ``--tools a,b``."""
    func = click.option(
        "--tools",
        "tool_names",
        metavar="NAMES",
        help="Offer only these built-in tools (comma-separated: shell,read_file,...).",
    )(func)
    func = click.option("--no-tools", is_flag=True, help="Offer the model no tools.")(func)
    return click.option(
        "-o",
        "--option",
        "settings_pairs",
        type=(str, str),
        multiple=True,
        metavar="KEY VALUE",
        help="A model setting: max_tokens, temperature, top_p, tool_choice, stop, seed, "
        "timeout, max_retries, prompt_cache (kept by the session, like the model).",
    )(func)


def backend_line(session: Session) -> str:
    """Where a session's tools run, and whether that isolates them."""
    backend = session.sandbox_backend or "local"
    if backend == "local":
        return "local backend, which does not isolate"
    return f"{backend} backend"
