"""Pages for the render tests, built from records alone (no store)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from plait.records import (
    AssistantRecord,
    EventRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)
from plait.render import ExportPage, LineageBox
from plait.views import history, system_prompt

HOSTILE = [
    "<script>window.__pwned = 1; alert('x')</script>",
    '<img src=x onerror="window.__pwned=2">',
    "[click](javascript:window.__pwned=3)",
    '<a href="javascript:window.__pwned=4">link</a>',
    "</style><script>window.__pwned=5</script>",
    "<!-- comment --><svg onload=window.__pwned=6>",
    "<![CDATA[ ]]><script>window.__pwned=7</script>",
    "``` ` `` </textarea>&amp; \" ' <iframe srcdoc='<script>parent.__pwned=8</script>'>",
]
"""Strings that would run a script or make a link if they reached the page unescaped."""

EVIL = " ".join(HOSTILE)
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def hostile_records() -> list[Record]:
    """A transcript with hostile text in every field a page shows."""
    return [
        SystemRecord(seq=0, id=f"s0{EVIL}", content=f"system {EVIL}"),
        UserRecord(seq=1, content=f"user {EVIL}", meta={EVIL: EVIL}),
        AssistantRecord(
            seq=2,
            content=f"assistant {EVIL}",
            tool_calls=(ToolCall(f"call{EVIL}", f"tool{EVIL}", {EVIL: [EVIL, 1]}),),
            meta={"usage": {"input_tokens": 3, "note": EVIL}},
            tokens=7,
        ),
        ToolRecord(
            seq=3,
            content=f"result {EVIL}",
            tool_call_id=f"call{EVIL}",
            tool_name=f"tool{EVIL}",
            ok=False,
        ),
        EventRecord(seq=4, name=f"event{EVIL}", data={EVIL: EVIL}),
        SummaryRecord(seq=5, content=f"summary {EVIL}", folds_from=0, folds_to=2),
        AssistantRecord(seq=6, content=f"after {EVIL}"),
    ]


def page_of(
    records: Sequence[Record],
    *,
    title: str | None = None,
    lineage: Sequence[LineageBox] = (),
    session_id: str = "sid-1",
    workspace: str = "/ws",
    parent_ids: tuple[str, ...] = (),
    operator: str | None = None,
) -> ExportPage:
    """An ExportPage as Session.export builds it."""
    return ExportPage(
        session_id=session_id,
        title=title,
        workspace=workspace,
        operator=operator,
        parent_ids=parent_ids,
        status="open",
        created_at=WHEN,
        updated_at=WHEN,
        records=records,
        system_prompt=system_prompt(records),
        request=history(records),
        lineage=lineage,
    )


def hostile_page() -> ExportPage:
    """Hostile text everywhere: records, title, ids, workspace, lineage."""
    sid = f"sid{EVIL}"
    return page_of(
        hostile_records(),
        title=f"title {EVIL}",
        session_id=sid,
        workspace=f"/ws/{EVIL}",
        parent_ids=(f"parent{EVIL}",),
        operator=f"Session.fork{EVIL}",
        lineage=[
            LineageBox(f"parent{EVIL}", title=f"ptitle{EVIL}", messages=1),
            LineageBox(
                sid,
                title=f"title {EVIL}",
                operator="Session.fork",
                parent_ids=(f"parent{EVIL}",),
                messages=6,
            ),
        ],
    )
