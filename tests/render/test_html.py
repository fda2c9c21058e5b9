"""The HTML page: escaping, the next-request panel, the lineage drawing."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

from plait.records import (
    AssistantRecord,
    EventRecord,
    SummaryRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)
from plait.render import (
    CONTENT_SECURITY_POLICY,
    LineageBox,
    lineage_svg,
    render_html,
    render_markdown,
)

from ._pages import EVIL, HOSTILE, hostile_page, hostile_records, page_of

ALLOWED_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "header",
    "h1",
    "h2",
    "dl",
    "dt",
    "dd",
    "section",
    "svg",
    "path",
    "g",
    "rect",
    "text",
    "div",
    "span",
    "main",
    "aside",
    "p",
    "footer",
}
ALLOWED_ATTRS = {
    "lang",
    "charset",
    "http-equiv",
    "content",
    "name",
    "class",
    "title",
    "width",
    "height",
    "viewbox",
    "role",
    "aria-label",
    "x",
    "y",
    "rx",
    "d",
}


class Audit(HTMLParser):
    """Every tag, attribute, text node and style body of a page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.styles: list[str] = []
        self.comments: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self.attrs += [(k, v or "") for k, v in attrs]
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        (self.styles if self._in and self._in[-1] == "style" else self.text).append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def unknown_decl(self, data: str) -> None:  # CDATA and friends
        self.comments.append(data)


def audit(page: str) -> Audit:
    a = Audit()
    a.feed(page)
    a.close()
    return a


def test_hostile_text_is_escaped_everywhere_and_shown_as_text() -> None:
    page = render_html(hostile_page())
    a = audit(page)
    assert set(a.tags) <= ALLOWED_TAGS, set(a.tags) - ALLOWED_TAGS
    assert {k for k, _ in a.attrs} <= ALLOWED_ATTRS
    assert not [k for k, _ in a.attrs if k.startswith("on")]
    assert a.tags.count("style") == 1 and len(a.styles) == 1
    assert "__pwned" not in a.styles[0] and "<" not in a.styles[0]
    assert a.comments == []
    # No link, no script, no frame, nothing loaded: the raw markup never reaches the page.
    lowered = page.lower()
    for needle in ("<script", "<a ", "<img", "<iframe", "<![cdata", "<!--", "<svg onload"):
        assert needle not in lowered, needle
    # ... but every hostile string is there, as text a reader sees.
    text = "".join(a.text)
    for bad in HOSTILE:
        assert bad in text, bad
    titles = " ".join(v for k, v in a.attrs if k == "title")
    assert EVIL in titles  # record ids go into title attributes, quotes and all


def test_every_field_goes_through_the_escaper() -> None:
    page = render_html(hostile_page())
    # Each field carries the hostile text with its own marker; all come out escaped.
    for marker in ("system ", "user ", "assistant ", "result ", "summary ", "after ", "title "):
        assert f"{marker}&lt;script&gt;window.__pwned = 1" in page, marker
    for marker in ("tool", "call", "event", "sid", "parent", "ptitle", "/ws/"):
        assert f"{marker}&lt;script&gt;" in page, marker
    assert "&quot;" in page and "&#x27;" in page  # quote=True


def test_the_page_is_self_contained_with_a_strict_policy() -> None:
    page = render_html(page_of(hostile_records()))
    elements = audit(page).elements
    # The policy is the first thing in <head> after the charset, before any text.
    assert [tag for tag, _ in elements[:4]] == ["html", "head", "meta", "meta"]
    assert elements[3][1] == {
        "http-equiv": "Content-Security-Policy",
        "content": CONTENT_SECURITY_POLICY,
    }
    assert CONTENT_SECURITY_POLICY == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert not re.search(r"https?://|url\(|@import", page)
    assert page.startswith("<!DOCTYPE html>")


def _aside(page: str) -> str:
    return page.split("<aside>", 1)[1].split("</aside>", 1)[0]


def _main(page: str) -> str:
    return page.split("<main>", 1)[1].split("</main>", 1)[0]


def test_the_side_panel_is_the_system_prompt_and_history() -> None:
    records = [
        *hostile_records()[:1],
        UserRecord(seq=1, content="old question"),
        AssistantRecord(seq=2, content="old answer"),
        SummaryRecord(seq=3, content="THE SUMMARY", folds_from=1, folds_to=3),
        UserRecord(seq=4, content="new question"),
        EventRecord(seq=5, name="client_attached"),
    ]
    page = render_html(page_of(records))
    aside, main = _aside(page), _main(page)
    assert "THE SUMMARY" in aside and "new question" in aside and "system:" in aside
    assert "old question" not in aside and "old answer" not in aside
    assert "client_attached" not in aside
    assert "3 messages" in aside  # system prompt, summary, new question
    # The transcript keeps everything, marking what the summary folded.
    for text in ("old question", "old answer", "THE SUMMARY", "new question", "client_attached"):
        assert text in main
    assert main.count("folded into the summary at #3") == 2
    assert "summary of #1..#2:" in main


def test_records_render_like_the_terminal() -> None:
    records = [
        UserRecord(seq=0, content="list them", images=2),
        AssistantRecord(seq=1, content="", tool_calls=(ToolCall("c1", "ls", {"path": "."}),)),
        ToolRecord(seq=2, content="a b", tool_call_id="c1", tool_name="ls", ok=True),
        ToolRecord(seq=3, content="no", tool_call_id="c2", tool_name="rm", ok=False),
        EventRecord(seq=4, name="session_trimmed", data={"keep_last": 2}),
    ]
    main = _main(render_html(page_of(records)))
    text = "".join(audit(main).text)
    assert "#0user:list them[2 image(s)]" in text
    assert '→ call ls({"path": "."}) [c1]' in text
    assert "#2tool ls [c1] (ok):a b" in text
    assert "#3tool rm [c2] (failed):no" in text
    assert '#4event session_trimmed {"keep_last": 2}' in text
    assert 'class="event"' in main  # events are drawn small and grey


def test_a_trimmed_view_says_what_is_outside_it() -> None:
    main = _main(render_html(page_of([UserRecord(seq=7, content="kept")])))
    assert "#0..#6 are outside this view" in main


def _nodes(svg: str) -> list[str]:
    return re.findall(r'<g class="node[^"]*">', svg)


def test_the_lineage_svg_has_a_box_per_session_and_an_edge_per_parent() -> None:
    boxes = [
        LineageBox("root", messages=3),
        LineageBox("a", operator="Session.fork", parent_ids=("root",), messages=4),
        LineageBox("b", operator="Session.fork_at", parent_ids=("root",), messages=1),
        LineageBox("m", operator="Session.merge", parent_ids=("a", "b"), messages=5),
        LineageBox("gone", deleted=True),
        LineageBox("orphan", operator="Session.fork", parent_ids=("gone",), messages=2),
    ]
    svg = lineage_svg(boxes, mark="a")
    assert len(_nodes(svg)) == 6
    assert svg.count("<path") == 5  # root->a, root->b, a->m, b->m, gone->orphan
    assert svg.count('<path class="merge"') == 2
    assert len(re.findall(r'<g class="node mark">', svg)) == 1
    assert '<g class="node deleted">' in svg
    for sid in ("root", "a", "b", "m", "gone", "orphan"):
        assert f">{sid}</text>" in svg
    assert "merge of 2" in svg and "(deleted)" in svg and "fork_at" in svg
    assert lineage_svg([]) == ""


def test_the_merge_is_drawn_below_all_its_parents() -> None:
    boxes = [
        LineageBox("root"),
        LineageBox("a", parent_ids=("root",)),
        LineageBox("a2", parent_ids=("a",)),
        LineageBox("m", parent_ids=("a2", "root")),
    ]
    svg = lineage_svg(boxes)
    ys = {
        sid: float(y)
        for y, sid in re.findall(r'<text class="sid" x="[\d.]+" y="([\d.]+)">([^<]+)</text>', svg)
    }
    assert ys["root"] < ys["a"] < ys["a2"] < ys["m"]


def test_long_titles_are_cut_before_escaping() -> None:
    title = "&" * 100
    svg = lineage_svg([LineageBox("x", title=title)])
    label = re.search(r'<text x="[\d.]+" y="[\d.]+">([^<]*)</text>', svg)
    assert label is not None
    assert label.group(1).endswith("&amp;…")  # never a half entity such as "&am…"


def test_a_foreign_row_with_odd_types_still_renders_escaped() -> None:
    # A row written by another tool may hold anything; the page escapes it all the same.
    user = UserRecord(seq=0, content="hi", images="<b>2</b>", tokens="<i>9</i>")  # type: ignore[arg-type]
    event = EventRecord(seq=1, name="e", data=["<list>"])  # type: ignore[arg-type]
    summary = SummaryRecord(seq=2, content="s", folds_from="<x>", folds_to=None)  # type: ignore[arg-type]
    page = render_html(page_of([user, event]))
    assert "&lt;b&gt;2&lt;/b&gt;" in page and "&lt;i&gt;9&lt;/i&gt;" in page
    assert "&lt;list&gt;" in page and "<b>" not in page and "<list>" not in page
    odd = replace(page_of([user, event]), records=[user, event, summary])  # history() would fail
    main = _main(render_html(odd))
    assert "#2summary:" in "".join(audit(main).text) and "&lt;x&gt;" not in main
    assert "` <b>2</b> ` image(s)" in render_markdown(odd)
