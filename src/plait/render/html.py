"""One self-contained HTML page for a session: transcript, next request, lineage.

Pure: no I/O. The page needs nothing outside itself (inline CSS, an inline
SVG, no scripts, no fonts, no images) and works without JavaScript.

Every piece of text that comes from a transcript or a store (titles, ids,
tool names, arguments, results, metadata, event data) goes through
:func:`_e`, which is ``html.escape(..., quote=True)``; nothing from a
transcript is ever put in a URL, a ``style``, an event handler or a tag
name, and the page makes no links at all. A Content-Security-Policy meta tag
(no scripts, no connections, inline styles and ``data:`` images only) is a
second line of defence should a future change forget the first.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
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

__all__ = ["CONTENT_SECURITY_POLICY", "lineage_svg", "render_html"]

CONTENT_SECURITY_POLICY: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""The page's policy: no scripts, frames, fonts or connections; inline CSS; ``data:`` images."""

# The lineage drawing, in SVG user units (pixels).
_BOX_W: Final = 300
_BOX_H: Final = 46
_GAP_X: Final = 24
_GAP_Y: Final = 34
_PAD: Final = 8
_TITLE_CHARS: Final = 40  # what fits on the first line of a box at 12px

_CSS: Final = """
:root { color-scheme: dark; --bg: #15171c; --panel: #1c1f26; --line: #2c313c; --fg: #d7dae0;
  --dim: #7f8796; --user: #7fd67f; --assistant: #6cd3e0; --tool: #e6c86e; --system: #d68fd6;
  --summary: #86a8f0; --bad: #f07d7d; --mark: #f0b86e; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
header { padding: 16px 20px 8px; border-bottom: 1px solid var(--line); }
h1 { font-size: 17px; margin: 0 0 8px; overflow-wrap: anywhere; }
h2 { font-size: 13px; margin: 0 0 8px; color: var(--dim); text-transform: uppercase;
  letter-spacing: .06em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.facts dt { color: var(--dim); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
section.lineage { padding: 12px 20px; border-bottom: 1px solid var(--line); overflow-x: auto; }
section.lineage svg { display: block; }
.cols { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); }
main { padding: 12px 20px 40px; }
aside { padding: 12px 20px 40px; background: var(--panel); border-left: 1px solid var(--line);
  position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto; }
@media (max-width: 900px) { .cols { grid-template-columns: 1fr; }
  aside { position: static; max-height: none; border-left: 0; border-top: 1px solid var(--line); } }
.rec { margin: 0 0 10px; }
.rec .head { font-weight: bold; }
.seq { color: var(--dim); margin-right: 6px; font-weight: normal; }
.body { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 0 2ch; }
.user .head { color: var(--user); }
.assistant .head { color: var(--assistant); }
.tool .head, .call .arrow { color: var(--tool); }
.system .head { color: var(--system); }
.summary { border-left: 3px solid var(--summary); padding-left: 8px; }
.summary .head { color: var(--summary); }
.tool.failed .head, .state.failed { color: var(--bad); }
.state { font-weight: normal; }
.call { margin: 2px 0 0 2ch; white-space: pre-wrap; overflow-wrap: anywhere; }
.call .name { color: var(--tool); font-weight: bold; }
.call .args, .call .id, .note, .meta, .tokens, .when { color: var(--dim); }
.meta, .tokens { margin-left: 2ch; font-size: 11px; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.event { color: var(--dim); font-size: 11px; margin: 0 0 6px; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.folded { opacity: .55; }
.folded-note { color: var(--summary); font-size: 11px; margin-left: 6px; }
.note { margin: 0 0 12px; }
.empty { color: var(--dim); font-style: italic; }
footer { padding: 10px 20px; color: var(--dim); border-top: 1px solid var(--line);
  font-size: 11px; }
svg text { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; fill: var(--fg); }
svg text.sid { font-size: 10.5px; fill: var(--dim); }
svg rect { fill: var(--panel); stroke: var(--line); stroke-width: 1.5; }
svg g.mark rect { stroke: var(--mark); stroke-width: 2.5; }
svg g.deleted rect { stroke-dasharray: 5 4; fill: none; }
svg g.deleted text { fill: var(--dim); }
svg path { fill: none; stroke: var(--dim); stroke-width: 1.5; }
svg path.merge { stroke: var(--summary); }
"""


def _e(value: object) -> str:
    """Escape anything for HTML text or a quoted attribute (``&``, ``<``, ``>``, ``"``, ``'``)."""
    return html.escape(str(value), quote=True)


def _json(value: JSONLike) -> str:
    """Compact JSON on one line, as the terminal shows arguments and event data."""
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    except ValueError:  # a circular structure, which a decoded record never holds
        return repr(value)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _short(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters (before escaping, never inside one)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _operator(operator: str | None) -> str:
    return operator.removeprefix("Session.") if operator else "root"


# -- messages and records --------------------------------------------------------------


def _calls(calls: Iterable[ToolCall]) -> str:
    return "".join(
        '<div class="call"><span class="arrow">→ call</span> '
        f'<span class="name">{_e(c.name)}</span>'
        f'<span class="args">({_e(_json(c.arguments))})</span> '
        f'<span class="id">[{_e(c.id)}]</span></div>'
        for c in calls
    )


def _body(text: str, images: object = 0) -> str:
    parts = []
    if text:
        parts.append(f'<div class="body">{_e(text)}</div>')
    if images:
        parts.append(f'<div class="body note">[{_e(images)} image(s)]</div>')
    return "".join(parts)


def _tool_state(ok: bool | None) -> tuple[str, str]:
    """(css class, word) for a tool result: ``ok`` or ``failed``."""
    return ("ok", "ok") if ok is not False else ("failed", "failed")


def _message_html(message: Message) -> str:
    """One message of the next request, drawn like the transcript draws it."""
    role = _e(message.role)
    classes = role
    if role == "tool":
        css, word = _tool_state(message.ok)
        classes = f"tool {css}"
        head = (
            f"tool {_e(message.tool_name or '?')} [{_e(message.tool_call_id or '')}] "
            f'(<span class="state {css}">{word}</span>):'
        )
    else:
        head = f"{role}:"
    return (
        f'<div class="rec {classes}"><div class="head">{head}</div>'
        f"{_body(message.text, message.images)}{_calls(message.tool_calls)}</div>"
    )


def _meta(record: Record) -> str:
    out = ""
    if record.tokens is not None:
        out += f'<div class="tokens">{_e(record.tokens)} tokens</div>'
    if record.meta:
        out += f'<div class="meta">meta {_e(_json(record.meta))}</div>'
    return out


def _record_html(record: Record, folded_into: int | None) -> str:
    """One record of the transcript: ``#seq role: text``, calls, results, events."""
    seq = f'<span class="seq">#{record.seq}</span>'
    when = _e(f"{_when(record.created_at)} · {record.id}")
    if isinstance(record, EventRecord):
        data = f" {_e(_json(record.data))}" if record.data else ""
        return (
            f'<div class="event" title="{when}">{seq}event {_e(record.name)}{data}'
            f"{_meta(record)}</div>"
        )
    if isinstance(record, OpaqueRecord):
        item = f" {_e(_json(record.item))}"
        return (
            f'<div class="event opaque" title="{when}">{seq}{_e(opaque_label(record))}{item}'
            f"{_meta(record)}</div>"
        )
    kind = _e(record.kind)
    classes = kind
    body = _body(record.text, getattr(record, "images", 0))
    calls = ""
    if isinstance(record, ToolRecord):
        css, word = _tool_state(record.ok)
        classes = f"tool {css}"
        head = (
            f"tool {_e(record.tool_name or '?')} [{_e(record.tool_call_id)}] "
            f'(<span class="state {css}">{word}</span>):'
        )
    elif isinstance(record, SummaryRecord):
        span = folds_of(record)
        head = "summary:"
        if span is not None and span[1] > span[0]:
            head = f"summary of #{span[0]}..#{span[1] - 1}:"
    else:
        head = f"{kind}:"
        if isinstance(record, AssistantRecord):
            calls = _calls(record.tool_calls)
    note = ""
    if folded_into is not None:
        classes += " folded"
        note = f'<span class="folded-note">folded into the summary at #{folded_into}</span>'
    return (
        f'<div class="rec {classes}" title="{when}"><div class="head">{seq}{head}{note}</div>'
        f"{body}{calls}{_meta(record)}</div>"
    )


# -- the lineage drawing ---------------------------------------------------------------


def lineage_svg(boxes: Sequence[LineageBox], mark: str | None = None) -> str:
    """Draw a lineage as an inline SVG: one box per session, one edge per parent link.

    A child is drawn below all its parents; a merge has an edge from each of
    them. Each box shows the operator, the title and the full id (UUIDv7 ids
    made within a minute share their first characters); a deleted parent is
    a dashed box.

    Args:
        boxes: the sessions (see :func:`plait.render.graph.collect_lineage`).
        mark: the session to outline (the one exported).

    Returns:
        An ``<svg>`` element, or an empty string when there are no boxes.
    """
    placed = layout_lineage(boxes)
    if not placed:
        return ""
    widths: dict[int, int] = {}
    for p in placed:
        widths[p.layer] = max(widths.get(p.layer, 0), p.column + 1)
    most = max(widths.values())
    layers = max(widths) + 1
    width: float = _PAD * 2 + most * _BOX_W + (most - 1) * _GAP_X
    height: float = _PAD * 2 + layers * _BOX_H + (layers - 1) * _GAP_Y
    where: dict[str, tuple[float, float]] = {}
    for p in placed:
        # Center a narrower layer under the widest one.
        offset = (most - widths[p.layer]) * (_BOX_W + _GAP_X) / 2
        x = _PAD + offset + p.column * (_BOX_W + _GAP_X)
        y = float(_PAD + p.layer * (_BOX_H + _GAP_Y))
        where[p.box.id] = (x, y)
    edges: list[str] = []
    for p in placed:
        cx, cy = where[p.box.id]
        parents = [pid for pid in dict.fromkeys(p.box.parent_ids) if pid in where]
        css = ' class="merge"' if len(p.box.parent_ids) > 1 else ""
        for pid in parents:
            px, py = where[pid]
            x1, y1 = px + _BOX_W / 2, py + _BOX_H
            x2, y2 = cx + _BOX_W / 2, cy
            mid = (y1 + y2) / 2
            edges.append(
                f'<path{css} d="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} '
                f'{x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"/>'
            )
    nodes: list[str] = []
    for p in placed:
        box = p.box
        bx, by = where[box.id]
        classes = ["node"]
        if box.id == mark:
            classes.append("mark")
        if box.deleted:
            classes.append("deleted")
            first = "(deleted)"
        else:
            first = _operator(box.operator)
            if len(box.parent_ids) > 1:
                first += f" of {len(box.parent_ids)}"
            if box.title:
                first += f" · {box.title}"
            if box.messages is not None:
                first += f" · {box.messages} msg{'' if box.messages == 1 else 's'}"
        tip = [
            box.id,
            box.title or "",
            f"parents: {', '.join(box.parent_ids)}" if box.parent_ids else "root",
        ]
        nodes.append(
            f'<g class="{" ".join(classes)}">'
            f"<title>{_e(' — '.join(t for t in tip if t))}</title>"
            f'<rect x="{bx:.1f}" y="{by:.1f}" width="{_BOX_W}" height="{_BOX_H}" rx="5"/>'
            f'<text x="{bx + 9:.1f}" y="{by + 19:.1f}">{_e(_short(first, _TITLE_CHARS))}</text>'
            f'<text class="sid" x="{bx + 9:.1f}" y="{by + 36:.1f}">{_e(box.id[:46])}</text>'
            "</g>"
        )
    return (
        f'<svg width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="lineage">'
        f"{''.join(edges)}{''.join(nodes)}</svg>"
    )


# -- the page --------------------------------------------------------------------------


def _facts(page: ExportPage) -> str:
    rows: list[tuple[str, str]] = [("id", _e(page.session_id))]
    made = _e(_operator(page.operator))
    if page.parent_ids:
        made += " of " + ", ".join(_e(p) for p in page.parent_ids)
    rows += [
        ("made by", made),
        ("workspace", _e(page.workspace or "(none)")),
        ("status", _e(page.status)),
        ("created", _e(_when(page.created_at))),
        ("updated", _e(_when(page.updated_at))),
        ("in view", _e(count_line(page.records))),
    ]
    return "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)


def _transcript(records: Sequence[Record]) -> str:
    folded = folded_by_newest_summary(records)
    parts: list[str] = []
    if records and records[0].seq > 0:
        parts.append(
            f'<p class="note">Records #0..#{records[0].seq - 1} are outside this view '
            "(trimmed or reset); they are still stored.</p>"
        )
    parts.extend(_record_html(record, folded.get(record.seq)) for record in records)
    if not records:
        parts.append('<p class="empty">(no records)</p>')
    return "".join(parts)


def _request(system: str | None, messages: Sequence[Message]) -> str:
    n = len(messages) + (system is not None)
    parts = [
        '<p class="note">What the next turn would send: the system prompt, then '
        f"history() (the newest summary and what followed it): {plural(n, 'message')}.</p>"
    ]
    if system is not None:
        parts.append(_record_like_system(system))
    parts.extend(_message_html(m) for m in messages)
    if n == 0:
        parts.append('<p class="empty">(nothing yet)</p>')
    return "".join(parts)


def _record_like_system(text: str) -> str:
    return f'<div class="rec system"><div class="head">system:</div>{_body(text)}</div>'


def render_html(page: ExportPage) -> str:
    """Render a session as one self-contained HTML page.

    The transcript (every record in view, rendered like the terminal shows
    it: roles, tool calls with their arguments, tool results with ok or
    failed, summaries, events in small grey type) sits beside the request the
    next turn would send (the system prompt and ``history()``), under the
    session's lineage drawn as an SVG.

    Args:
        page: what to show.

    Returns:
        The page, as text. It loads nothing and runs no script.
    """
    svg = lineage_svg(page.lineage, mark=page.session_id)
    lineage = f'<section class="lineage"><h2>Lineage</h2>{svg}</section>' if svg else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CONTENT_SECURITY_POLICY)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="plait">\n'
        f"<title>{_e(page.name)} · plait</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n"
        f'<header><h1>{_e(page.name)}</h1><dl class="facts">{_facts(page)}</dl></header>\n'
        f"{lineage}\n"
        '<div class="cols">\n'
        f"<main><h2>Transcript</h2>{_transcript(page.records)}</main>\n"
        f"<aside><h2>Next request</h2>{_request(page.system_prompt, page.request)}</aside>\n"
        "</div>\n"
        "<footer>Exported by plait. A static page: no scripts, no links, nothing loaded "
        "from elsewhere.</footer>\n"
        "</body>\n</html>\n"
    )
