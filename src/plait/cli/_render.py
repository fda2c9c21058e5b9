"""How the CLI draws transcripts and lineage trees in the terminal.

Everything a user typed is printed as :class:`rich.text.Text`, never as rich
markup, so a message such as ``[bold]`` is shown as written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from plait.client import Client
from plait.lineage import LineageNode, draw_tree
from plait.records import EventRecord, JSONValue, Message, Record, ToolCall
from plait.store.base import SessionRow

__all__ = ["lineage_label", "print_messages", "print_records", "print_tree", "tree_lines"]

_ROLE_STYLE = {
    "system": "magenta",
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "yellow",
    "summary": "blue",
    "event": "dim",
}


def _compact(value: JSONValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _call(call: ToolCall) -> str:
    return f"{call.name}({_compact(dict(call.arguments))}) [{call.id}]"


def _line(role: str, head: str, body: str) -> Text:
    text = Text()
    text.append(head, style=_ROLE_STYLE.get(role, ""))
    if body:
        text.append(" ")
        text.append(body)
    return text


def _message_lines(message: Message) -> list[Text]:
    """One line per message, plus one per tool call an assistant made."""
    if message.role == "tool":
        state = "ok" if message.ok is not False else "error"
        head = f"tool {message.tool_name or '?'} [{message.tool_call_id}] ({state}):"
    else:
        head = f"{message.role}:"
    body = message.text
    if message.images:
        body = f"{body} [{message.images} image(s)]".strip()
    lines = [_line(message.role, head, body)]
    for call in message.tool_calls:
        lines.append(_line("tool", "  -> call", _call(call)))
    return lines


def _print_lines(out: Console, line: Text, indent: str | Text) -> None:
    """Print a possibly multi-line text, continuation lines indented under the first."""
    width = len(indent) if isinstance(indent, str) else indent.cell_len
    for i, part in enumerate(line.split("\n")):
        lead = indent if i == 0 else " " * (width + 4)
        out.print(Text.assemble(lead, part), soft_wrap=True)


def print_messages(out: Console, messages: Iterable[Message], *, indent: str = "") -> int:
    """Print messages as ``role: text`` lines, tool calls on lines of their own.

    Args:
        out: where to print.
        messages: the messages, in order.
        indent: put before every line.

    Returns:
        How many messages were printed.
    """
    count = 0
    for message in messages:
        for line in _message_lines(message):
            _print_lines(out, line, indent)
        count += 1
    return count


def print_records(out: Console, records: Iterable[Record]) -> int:
    """Print records (events included) as ``#seq kind: text`` lines.

    Returns:
        How many records were printed.
    """
    count = 0
    for record in records:
        prefix = Text(f"#{record.seq} ", style="dim")
        if isinstance(record, EventRecord):
            lines = [_line("event", f"event {record.name}", _compact(dict(record.data)))]
        else:
            lines = _message_lines(Message.from_record(record))
        for i, line in enumerate(lines):
            _print_lines(out, line, prefix if i == 0 else " " * len(prefix))
        count += 1
    return count


def lineage_label(session_id: str, row: SessionRow | None) -> LineageNode:
    """The tree label of one session: ``<id> <operator> "<title>" (<n> msgs)``.

    Full ids are shown: UUIDv7 ids made within a minute of each other share
    their first eight characters, so a short prefix would not tell them apart.

    Args:
        session_id: the session.
        row: its stored row, or None if it vanished while the tree was drawn.
    """
    if row is None:
        return LineageNode(session_id, f"{session_id} (deleted)", ())
    parts = [row.id, row.lineage_operator or "root"]
    if row.title:
        parts.append(json.dumps(row.title, ensure_ascii=False))
    n = row.layout.length
    parts.append(f"({n} msg{'' if n == 1 else 's'})")
    if row.branched_at is not None:
        parts.append(f"[kept {row.branched_at}]")
    source = row.metadata.get("detached_from")
    if isinstance(source, str):
        parts.append(f"[detached from {source}]")
    if len(row.parent_ids) > 1:
        # Drawn under its first parent; name the others, whose lines only point here.
        parts.append(f"[merged with {', '.join(row.parent_ids[1:])}]")
    return LineageNode(row.id, " ".join(parts), row.parent_ids)


def tree_lines(client: Client, session_id: str) -> list[str]:
    """Draw the lineage DAG that holds ``session_id``, from its root, marking it with ``*``.

    Raises:
        SessionNotFoundError: unknown or invalid id.
    """
    session = client.sessions.get(session_id)
    root = session.ancestry().root_id
    store = client.store
    return draw_tree(
        root,
        store.children,
        lambda sid: lineage_label(sid, store.get(sid)),
        mark=session.id,
    )


def print_tree(out: Console, lines: Iterable[str], mark: str | None = None) -> None:
    """Print tree lines, the marked session's line in bold."""
    for line in lines:
        style = "bold" if mark is not None and mark in line and line.endswith(" *") else ""
        out.print(Text(line, style=style), soft_wrap=True)
