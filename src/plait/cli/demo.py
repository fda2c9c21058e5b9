"""``plait demo``: a walkthrough of sessions and their lineage, offline and in a second.

It writes to the store the other commands read (the default file unless
``--store`` or ``$PLAIT_STORE`` names another), so the user can inspect what it
made afterwards with ``plait sessions ...``. No model is called: the assistant's
turns are injected as recorded messages.
"""

from __future__ import annotations

from collections.abc import Mapping

import click
from rich.console import Console
from rich.text import Text

from plait.cli._common import CONTEXT_SETTINGS, Settings, console, open_client, pass_settings
from plait.cli._render import print_messages, print_tree, tree_lines
from plait.records import JSONValue, Message, Record
from plait.session import Session

__all__ = ["CONVERSATION", "demo_command"]

CONVERSATION: tuple[Mapping[str, JSONValue], ...] = (
    {"role": "system", "content": "You are a careful coding agent. Use tools to look things up."},
    {"role": "user", "content": "How many Python files are in this project?"},
    {
        "role": "assistant",
        "content": "Let me list them.",
        "tool_calls": [{"id": "call_1", "name": "glob", "arguments": {"pattern": "**/*.py"}}],
    },
    {
        "role": "tool",
        "content": "src/app.py\nsrc/util.py\ntests/test_app.py",
        "tool_call_id": "call_1",
        "tool_name": "glob",
    },
    {"role": "assistant", "content": "There are 3 Python files: two in src/, one in tests/."},
)
"""The agent session the demo records: a system prompt, a question, a tool call, its
result and the answer."""


def _step(out: Console, n: int, title: str, session: Session | None = None) -> None:
    line = Text(f"{n}. ", style="bold")
    line.append(title, style="bold")
    if session is not None:
        line.append(f"  {session.id}", style="cyan")
        count = session.length
        line.append(f"  ({count} message{'' if count == 1 else 's'})", style="dim")
    out.print(line, soft_wrap=True)


def _show(out: Console, records: list[Record]) -> None:
    messages = [Message.from_record(r) for r in records if r.is_message]
    print_messages(out, messages, indent="   ")


@click.command("demo", context_settings=CONTEXT_SETTINGS)
@pass_settings
def demo_command(settings: Settings) -> None:
    """Walk through sessions: record one, rename it, fork, fork_at, detach, merge, draw.

    Runs offline with no API key; writes to the store the other commands read,
    so the sessions it makes can be inspected afterwards.
    """
    out = console()
    client = open_client(settings)
    out.rule("plait demo")
    out.print(Text(f"store:     {client.store.location}", style="dim"), soft_wrap=True)
    out.print(Text(f"workspace: {client.workspace}", style="dim"), soft_wrap=True)
    out.print()

    session = client.session
    records = [session.inject(message) for message in CONVERSATION]
    _step(out, 1, "recorded an agent session", session)
    _show(out, records)

    title = session.rename("  Count the   Python files ")
    _step(out, 2, f"renamed it to {title!r} (white space is trimmed)")

    followup = session.fork()
    added = [
        followup.inject({"role": "user", "content": "And how many are tests?"}),
        followup.inject({"role": "assistant", "content": "One: tests/test_app.py."}),
    ]
    _step(out, 3, "fork: a branch sharing all 5 messages (no copy), then a follow-up", followup)
    _show(out, added)

    retry = session.fork_at(2)
    added = [
        retry.inject(
            {"role": "assistant", "content": "I cannot see the files, but I can guess: 3."}
        )
    ]
    _step(out, 4, "fork_at 2: a branch keeping the system prompt and question only", retry)
    _show(out, added)

    detached = session.detach()
    _step(out, 5, "detach: the same transcript as a new lineage root (no parents)", detached)

    merged = followup.merge(retry)
    _step(out, 6, "merge: the follow-up branch joined with the fork_at branch", merged)
    out.print(
        Text(f"   parents: {', '.join(merged.parent_session_ids)}", style="dim"), soft_wrap=True
    )
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
