"""A session as one Markdown document: transcript, next request, lineage.

Pure: no I/O. Markdown passes raw HTML through and turns many things into
links, so escaping here means keeping transcript text out of Markdown's
reach: every piece of it (titles, ids, tool names, arguments, results,
metadata, event data) is inside a code span or a fenced code block whose
fence is longer than any run of backticks in the text. There HTML, link
syntax and bare URLs are shown as written, never interpreted. Only plait's
own words (headings, labels, counts) are Markdown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final

from plait.records import (
    AssistantRecord,
    EventRecord,
    JSONLike,
    Message,
    OpaqueRecord,
    Record,
    SummaryRecord,
    ToolCall,
    ToolRecord,
)
from plait.render.graph import LineageBox, layout_lineage
from plait.render.page import (
    ExportPage,
    count_line,
    folded_by_newest_summary,
    folds_of,
    opaque_label,
    plural,
)

__all__ = ["code_block", "code_span", "render_markdown"]

_BACKTICKS: Final = re.compile(r"`+")
_LINE_BREAKS: Final = re.compile(r"\r\n|\r|\n")


def _longest(pattern: re.Pattern[str], text: str) -> int:
    return max((len(m) for m in pattern.findall(text)), default=0)


def code_span(text: str) -> str:
    """``text`` as an inline code span, shown exactly as written (on one line).

    The delimiter is one backtick longer than the longest run inside, and the
    text is padded with a space on each side (which Markdown strips), so a
    backtick at either end cannot close the span early.
    """
    flat = _LINE_BREAKS.sub(" ", str(text))
    if not flat:
        return "*(empty)*"
    fence = "`" * (_longest(_BACKTICKS, flat) + 1)
    return f"{fence} {flat} {fence}"


def code_block(text: str, info: str = "text") -> str:
    """``text`` as a fenced code block, shown exactly as written.

    The fence is at least three backticks and longer than any run of
    backticks in the text, so no line of the text can close it.
    """
    text = str(text)
    fence = "`" * max(3, _longest(_BACKTICKS, text) + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def _json(value: JSONLike, indent: int | None = None) -> str:
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    try:
        return json.dumps(
            value,
            ensure_ascii=False,
            separators=(",", ": ") if indent else (", ", ": "),
            indent=indent,
            default=str,
        )
    except ValueError:  # a circular structure, which a decoded record never holds
        return repr(value)


def _count(value: object) -> str:
    """A stored count as a plain number, or in a code span if a foreign row holds text there."""
    return str(value) if type(value) is int else code_span(str(value))


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


# Operators plait writes, shown as plain words; anything else (an importer may name its
# own) is transcript-like text and goes in a code span.
_OPERATORS: Final = frozenset(
    {"root", "fork", "fork_at", "detach", "merge", "run", "compact", "import"}
)


def _operator(operator: str | None) -> str:
    short = operator.removeprefix("Session.") if operator else "root"
    return short if short in _OPERATORS else code_span(short)


def _calls(calls: Sequence[ToolCall]) -> list[str]:
    out: list[str] = []
    for call in calls:
        out.append(f"→ call {code_span(call.name)} [{code_span(call.id)}]\n")
        out.append(code_block(_json(call.arguments, indent=2), "json"))
    return out


def _tool_head(name: str | None, call_id: str | None, ok: bool | None) -> str:
    state = "ok" if ok is not False else "**failed**"
    return f"tool {code_span(name or '?')} [{code_span(call_id or '')}] ({state})"


def _body(text: str, images: object) -> list[str]:
    out: list[str] = []
    if text:
        out.append(code_block(text))
    if images:
        out.append(f"*[{_count(images)} image(s)]*\n")
    return out


def _record(record: Record, folded_into: int | None) -> list[str]:
    if isinstance(record, EventRecord):
        data = f" {code_span(_json(record.data))}" if record.data else ""
        return [f"*#{record.seq} event* {code_span(record.name)}{data}\n"]
    if isinstance(record, OpaqueRecord):
        return [f"*#{record.seq} {opaque_label(record)}* {code_span(_json(record.item))}\n"]
    if isinstance(record, ToolRecord):
        head = _tool_head(record.tool_name, record.tool_call_id, record.ok)
    elif isinstance(record, SummaryRecord):
        span = folds_of(record)
        head = "summary"
        if span is not None and span[1] > span[0]:
            head = f"summary of #{span[0]}..#{span[1] - 1}"
    else:
        head = record.kind
    if folded_into is not None:
        head += f" *(folded into the summary at #{folded_into})*"
    out = [f"### #{record.seq} {head}\n"]
    out += _body(record.text, getattr(record, "images", 0))
    if isinstance(record, AssistantRecord):
        out += _calls(record.tool_calls)
    if record.tokens is not None:
        out.append(f"*{_count(record.tokens)} tokens*\n")
    if record.meta:
        out.append(f"meta {code_span(_json(record.meta))}\n")
    return out


def _message(message: Message) -> list[str]:
    if message.role == "tool":
        head = _tool_head(message.tool_name, message.tool_call_id, message.ok)
    else:
        head = message.role
    return [f"### {head}\n", *_body(message.text, message.images), *_calls(message.tool_calls)]


def _lineage(boxes: Sequence[LineageBox], mark: str) -> list[str]:
    placed = layout_lineage(boxes)
    if not placed:
        return []
    out = ["## Lineage\n", "Oldest generation first; each session names its parents.\n"]
    items: list[str] = []
    for p in placed:
        box = p.box
        if box.deleted:
            line = f"{code_span(box.id)} (deleted)"
        else:
            line = f"{code_span(box.id)} {_operator(box.operator)}"
            if box.title:
                line += f" {code_span(box.title)}"
            if box.messages is not None:
                line += f", {plural(box.messages, 'msg')}"
        if box.parent_ids:
            line += " ← " + ", ".join(code_span(pid) for pid in box.parent_ids)
        if box.id == mark:
            line += " **(this session)**"
        items.append(f"- generation {p.layer}: {line}\n")
    out.append("".join(items))
    return out


def render_markdown(page: ExportPage) -> str:
    """Render a session as one Markdown document.

    The same content as :func:`plait.render.html.render_html`: facts, the
    lineage (a list, oldest generation first), the transcript (every record in view, events
    as small lines) and the request the next turn would send (the system
    prompt and ``history()``).

    Returns:
        The document, as text.
    """
    records = page.records
    title = code_span(page.title) if page.title else f"Session {code_span(page.session_id)}"
    made = _operator(page.operator)
    if page.parent_ids:
        made += " of " + ", ".join(code_span(p) for p in page.parent_ids)
    out: list[str] = [
        f"# {title}\n",
        f"- id: {code_span(page.session_id)}\n"
        f"- made by: {made}\n"
        f"- workspace: {code_span(page.workspace) if page.workspace else '(none)'}\n"
        f"- status: {code_span(page.status)}\n"
        f"- created: {_when(page.created_at)}\n"
        f"- updated: {_when(page.updated_at)}\n"
        f"- in view: {count_line(records)}\n",
    ]
    out += _lineage(page.lineage, page.session_id)
    out.append("## Transcript\n")
    if records and records[0].seq > 0:
        out.append(
            f"*Records #0..#{records[0].seq - 1} are outside this view (trimmed or reset); "
            "they are still stored.*\n"
        )
    folded = folded_by_newest_summary(records)
    for record in records:
        out += _record(record, folded.get(record.seq))
    if not records:
        out.append("*(no records)*\n")
    out.append("## Next request\n")
    n = len(page.request) + (page.system_prompt is not None)
    out.append(
        "What the next turn would send: the system prompt, then history() (the newest "
        f"summary and what followed it): {plural(n, 'message')}.\n"
    )
    if page.system_prompt is not None:
        out += ["### system\n", *_body(page.system_prompt, 0)]
    for message in page.request:
        out += _message(message)
    return "\n".join(out)
