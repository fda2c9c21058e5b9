"""The Markdown document: transcript text stays in code, where Markdown shows it as written."""

from __future__ import annotations

import re
from html import unescape

import pytest
from markdown_it import MarkdownIt

from plait.records import (
    AssistantRecord,
    EventRecord,
    SummaryRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)
from plait.render import LineageBox, code_block, code_span, render_markdown

from ._pages import HOSTILE, hostile_page, page_of

# CommonMark with raw HTML passed through: the most permissive common setting.
MD = MarkdownIt("commonmark", {"html": True})


@pytest.mark.parametrize(
    "text",
    ["plain", "`tick`", "a `` b", "```", " lead and trail ", "<b>x</b>", "[a](javascript:x)"],
)
def test_code_span_shows_any_text_as_written(text: str) -> None:
    html = MD.renderInline(code_span(text))
    assert html.startswith("<code>") and html.endswith("</code>")
    assert unescape(html[len("<code>") : -len("</code>")]) == text
    assert "<b>" not in html and "<a" not in html


def test_code_span_flattens_lines_and_marks_empty() -> None:
    assert "\n" not in code_span("a\nb\r\nc")
    assert code_span("") == "*(empty)*"


def test_code_block_fence_outlasts_any_backticks_inside() -> None:
    text = "before\n````\n```\n<script>x</script>\nafter"
    block = code_block(text)
    assert block.startswith("`````text\n")
    html = MD.render(block)
    assert html.count("<pre>") == 1 and "&lt;script&gt;" in html and "<script" not in html


def test_a_hostile_transcript_renders_to_no_markup_and_no_links() -> None:
    document = render_markdown(hostile_page())
    html = MD.render(document).lower()
    for needle in ("<script", "<a ", "<img", "<iframe", "<svg", "<style", "<!--"):
        assert needle not in html, needle
    tags = set(re.findall(r"<([a-z0-9]+)", html))
    assert tags <= {"h1", "h2", "h3", "ul", "li", "p", "code", "pre", "em", "strong"}, tags
    text = unescape(re.sub(r"<[^>]*>", "", MD.render(document)))
    for bad in HOSTILE:
        assert bad in text, bad


def test_hostile_strings_are_all_in_the_document_as_written() -> None:
    document = render_markdown(hostile_page())
    for bad in HOSTILE:
        assert bad in document


def test_the_document_has_the_transcript_the_request_and_the_lineage() -> None:
    records = [
        UserRecord(seq=0, content="old question"),
        AssistantRecord(seq=1, content="calling", tool_calls=(ToolCall("c1", "ls", {"p": 1}),)),
        ToolRecord(seq=2, content="boom", tool_call_id="c1", tool_name="ls", ok=False),
        SummaryRecord(seq=3, content="THE SUMMARY", folds_from=0, folds_to=3),
        UserRecord(seq=4, content="new question"),
        EventRecord(seq=5, name="client_attached"),
    ]
    lineage = [
        LineageBox("root", title="first", messages=2),
        LineageBox("sid-1", operator="Session.fork", parent_ids=("root",), messages=5),
    ]
    doc = render_markdown(
        page_of(records, lineage=lineage, parent_ids=("root",), operator="Session.fork")
    )
    transcript, request = doc.split("## Next request", 1)
    assert "### #2 tool ` ls ` [` c1 `] (**failed**)" in transcript
    assert "→ call ` ls ` [` c1 `]" in transcript
    assert "*#5 event* ` client_attached `" in transcript
    assert transcript.count("folded into the summary at #3") == 3
    assert "THE SUMMARY" in request and "new question" in request
    assert "old question" not in request
    assert "- made by: fork of ` root `" in doc
    odd = render_markdown(page_of(records, operator="Session.<b>x</b>"))
    assert "- made by: ` <b>x</b> `" in odd
    assert "generation 1: ` sid-1 ` fork, 5 msgs ← ` root ` **(this session)**" in doc
    assert "generation 0: ` root ` root ` first `, 2 msgs" in doc
