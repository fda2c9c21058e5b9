"""How the CLI draws transcripts and lineage trees in the terminal.

Everything a user typed is printed as :class:`rich.text.Text`, never as rich
markup, so a message such as ``[bold]`` is shown as written, and through
:func:`plait.cli._terminal.safe`, so no control sequence in it reaches the
terminal.

Messages are numbered as every command counts them (D132): ``#n`` is the
message's position among the messages in view, the system prompt included,
events not, so ``fork --at N`` keeps ``#0`` .. ``#N-1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from rich.console import Console
from rich.text import Text

from plait._prefix import resolve_session_id
from plait.cli._terminal import safe
from plait.client import Client
from plait.lineage import LineageNode, draw_tree
from plait.records import (
    EventRecord,
    JSONValue,
    Message,
    OpaqueRecord,
    Record,
    ToolCall,
    hidden_summaries,
)
from plait.render.page import opaque_label
from plait.session import Session
from plait.store.base import SessionRow

__all__ = [
    "lineage_label",
    "numbered_messages",
    "print_messages",
    "print_records",
    "print_tree",
    "tail_numbers",
    "tree_lines",
]

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
    text.append(safe(head), style=_ROLE_STYLE.get(role, ""))
    if body:
        text.append(" ")
        text.append(safe(body))
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


def numbered_messages(
    session: Session, *, full: bool = False
) -> tuple[list[Message], dict[int, int]]:
    """The messages ``plait sessions show`` prints, with the number of each.

    Args:
        session: a stored session.
        full: every message as written (summaries in place), not only what the
            model works with after a compaction.

    Returns:
        The system prompt(s) and ``session.history(full)``, in transcript order,
        and each one's number by its ``seq`` (see the module docstring).
    """
    numbers: dict[int, int] = {}
    systems: list[Message] = []
    for record in session.transcript.records:
        if record.is_message:
            numbers[record.seq] = len(numbers)
        if record.kind == "system":
            systems.append(Message.from_record(record))
    history = session.history(full=full)
    # A compaction's summary is written after what it folds but read first: it is
    # shown where the model reads it, before the first message it kept.
    place: dict[int, float] = {}
    for here, after in pairwise(history):
        if here.role == "summary" and here.seq > after.seq:
            place[here.seq] = after.seq - 0.5
    shown = sorted([*systems, *history], key=lambda m: place.get(m.seq, m.seq))
    return shown, numbers


def tail_numbers(records: Sequence[Record], length: int) -> dict[int, int]:
    """The number of each message among the last ``records`` of a session of ``length``."""
    numbers: dict[int, int] = {}
    n = length
    for record in reversed(records):
        if record.is_message:
            n -= 1
            numbers[record.seq] = n
    return numbers


def _number(numbers: Mapping[int, int] | None, seq: int) -> str:
    if numbers is None:
        return ""
    n = numbers.get(seq)
    return f"#{n} " if n is not None else "   "


def print_messages(
    out: Console,
    messages: Iterable[Message],
    *,
    indent: str = "",
    numbers: Mapping[int, int] | None = None,
) -> int:
    """Print messages as ``role: text`` lines, tool calls on lines of their own.

    Args:
        out: where to print.
        messages: the messages, in order.
        indent: put before every line.
        numbers: each message's number by ``seq``, shown as ``#n`` (none: no numbers).

    Returns:
        How many messages were printed.
    """
    count = 0
    for message in messages:
        lead = Text(indent) + Text(_number(numbers, message.seq), style="dim")
        for i, line in enumerate(_message_lines(message)):
            _print_lines(out, line, lead if i == 0 else " " * lead.cell_len)
        count += 1
    return count


def print_records(
    out: Console, records: Iterable[Record], numbers: Mapping[int, int] | None = None
) -> int:
    """Print records (events included) as ``#n kind: text`` lines.

    Args:
        out: where to print.
        records: the records, in order.
        numbers: each message's number by ``seq`` (events have none); without
            it, each record's ``seq``.

    Returns:
        How many records were printed.
    """
    count = 0
    records = list(records)
    hidden = hidden_summaries(records)
    for record in records:
        mark = _number(numbers, record.seq) if numbers is not None else f"#{record.seq} "
        prefix = Text(mark, style="dim")
        if isinstance(record, EventRecord):
            lines = [_line("event", f"event {record.name}", _compact(dict(record.data)))]
        elif record.seq in hidden:
            # Undone: no history shows it, so it is not drawn as part of the conversation.
            lines = [_line("event", "summary (undone by uncompact, not in the history)", "")]
        elif isinstance(record, OpaqueRecord):
            lines = [_line("event", opaque_label(record), "")]
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
    session = client.open(resolve_session_id(client, session_id))
    root = session.transcript.ancestry().root_id
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
        out.print(Text(safe(line), style=style), soft_wrap=True)
