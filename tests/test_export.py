"""Session.export (HTML and Markdown, seed 001 "Exporting") and client.session_stats."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from plait import Client, Session
from plait.client import SessionStats
from plait.errors import InvalidArgumentError, SessionNotFoundError


def _conversation(session: Session, *, usage: bool = False) -> None:
    def meta(i: int, o: int, c: int) -> dict[str, Any]:
        return {"usage": {"input_tokens": i, "output_tokens": o, "cached_tokens": c}}

    session.transcript.inject_many(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "How many files?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
                **({"meta": meta(100, 10, 0)} if usage else {}),
            },
            {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "c1", "tool_name": "ls"},
            {
                "role": "assistant",
                "content": "Two files.",
                **({"meta": meta(300, 5, 200)} if usage else {}),
            },
        ]
    )


def _svg_ids(page: str) -> set[str]:
    return set(re.findall(r'<text class="sid" x="[\d.]+" y="[\d.]+">([^<]+)</text>', page))


# -- where the file goes ------------------------------------------------------------------


def test_default_name_and_place_is_the_workspace(client: Client) -> None:
    s = client.sessions.new()
    _conversation(s)
    path = s.export()
    assert path == os.path.join(client.workspace, f"plait-{s.id[:8]}.html")
    assert os.path.isabs(path)
    page = Path(path).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Two files." in page
    md = s.export(format="markdown")
    assert md == os.path.join(client.workspace, f"plait-{s.id[:8]}.md")
    assert "Two files." in Path(md).read_text(encoding="utf-8")
    # No temporary file is left beside them.
    assert sorted(os.listdir(client.workspace)) == sorted([Path(path).name, Path(md).name])


def test_a_relative_path_is_taken_from_the_working_directory(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = client.sessions.new()
    _conversation(s)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # An export makes no folders: a missing one is refused, and nothing is left behind.
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        s.export("reports/refactor.html")
    assert list(elsewhere.iterdir()) == []
    (elsewhere / "reports").mkdir()
    path = s.export("reports/refactor.html")
    assert path == str(elsewhere / "reports" / "refactor.html")
    assert Path(path).is_file()
    assert s.export(Path("notes.md"), format="markdown") == str(elsewhere / "notes.md")
    absolute = tmp_path / "abs.html"
    assert s.export(absolute) == str(absolute)
    Path(path).write_text("old")
    s.export("reports/refactor.html")  # an existing file is replaced
    assert "Two files." in Path(path).read_text(encoding="utf-8")


def test_nothing_stored_is_a_value_error(client: Client, tmp_path: Path) -> None:
    fresh = client.sessions.new()
    for form in ("html", "markdown"):
        with pytest.raises(ValueError, match="nothing stored"):
            fresh.export(format=form)
    empty = client.open("no-records")  # stored, but holds no record
    assert empty.transcript.stored
    with pytest.raises(InvalidArgumentError, match="no records in view"):
        empty.export()
    with pytest.raises(InvalidArgumentError, match="no records in view"):
        empty.export(format="markdown")
    assert not list(Path(client.workspace).iterdir())


def test_bad_paths_and_deleted_sessions(client: Client, tmp_path: Path) -> None:
    s = client.sessions.new()
    _conversation(s)
    with pytest.raises(InvalidArgumentError, match="folder"):
        s.export(tmp_path)
    for bad in ("", 3, b"x.html", "a\0b.html"):
        with pytest.raises(InvalidArgumentError):
            s.export(bad)  # type: ignore[arg-type]
    client.sessions.delete(s.id)
    with pytest.raises(SessionNotFoundError):
        s.export()


def test_export_takes_no_writer_lock(client: Client, tmp_path: Path) -> None:
    s = client.sessions.new()
    _conversation(s)
    s.live.release()
    reader = client.open(s.id)
    reader.export(tmp_path / "x.html")
    assert not reader.live.holds_lock


# -- what the page shows ------------------------------------------------------------------


def test_the_side_panel_shows_what_the_model_works_with(client: Client, tmp_path: Path) -> None:
    s = client.sessions.new()
    _conversation(s)
    s.inject({"role": "summary", "content": "USER ASKED; TWO FILES", "folds": [1, 5]})
    s.inject({"role": "user", "content": "and now?"})
    page = Path(s.export(tmp_path / "p.html")).read_text(encoding="utf-8")
    aside = page.split("<aside>", 1)[1].split("</aside>", 1)[0]
    main = page.split("<main>", 1)[1].split("</main>", 1)[0]
    assert "USER ASKED; TWO FILES" in aside and "and now?" in aside and "You are terse." in aside
    assert "How many files?" not in aside and "Two files." not in aside
    assert [m.text for m in s.history()] == ["USER ASKED; TWO FILES", "and now?"]
    assert "How many files?" in main and "folded into the summary at #5" in main
    md = Path(s.export(tmp_path / "p.md", format="markdown")).read_text(encoding="utf-8")
    request = md.split("## Next request", 1)[1]
    assert "USER ASKED; TWO FILES" in request and "How many files?" not in request


def test_the_page_shows_calls_results_and_events(client: Client, tmp_path: Path) -> None:
    s = client.sessions.new()
    _conversation(s)
    s.inject(
        {"role": "tool", "content": "denied", "tool_call_id": "c2", "tool_name": "rm", "ok": False}
    )
    s.rename("Files <b>today</b>")
    s.close("done")
    page = Path(s.export(tmp_path / "p.html")).read_text(encoding="utf-8")
    assert "<h1>Files &lt;b&gt;today&lt;/b&gt;</h1>" in page
    assert (
        '<span class="name">ls</span><span class="args">({&quot;path&quot;: &quot;.&quot;})' in page
    )
    assert 'tool ls [c1] (<span class="state ok">ok</span>)' in page
    assert 'tool rm [c2] (<span class="state failed">failed</span>)' in page
    assert 'class="event"' in page and "agent_session_closed" in page
    assert "<dt>status</dt><dd>closed</dd>" in page


def test_the_lineage_has_a_box_per_session(client: Client, tmp_path: Path) -> None:
    root = client.sessions.new()
    _conversation(root)
    a = root.fork()
    a.inject({"role": "user", "content": "branch a"})
    b = root.fork_at(2)
    m = a.merge(b)
    unrelated = client.sessions.new()
    _conversation(unrelated)
    detached = root.detach()
    family = {root.id, a.id, b.id, m.id}
    for session in (root, a, b, m):
        page = Path(session.export(tmp_path / "p.html")).read_text(encoding="utf-8")
        assert _svg_ids(page) == family, session.id
        assert page.count('<g class="node mark">') == 1
        assert page.count('<path class="merge"') == 2  # the merge has two parents
    lone = Path(detached.export(tmp_path / "d.html")).read_text(encoding="utf-8")
    assert _svg_ids(lone) == {detached.id}
    md = Path(a.export(tmp_path / "a.md", format="markdown")).read_text(encoding="utf-8")
    assert f"` {m.id} ` merge" in md and f"` {a.id} ` fork" in md and unrelated.id not in md


def test_a_deleted_parent_is_still_drawn(client: Client, tmp_path: Path) -> None:
    root = client.sessions.new()
    _conversation(root)
    child = root.fork()
    client.sessions.delete(root.id)
    page = Path(child.export(tmp_path / "c.html")).read_text(encoding="utf-8")
    assert _svg_ids(page) == {root.id, child.id}
    assert '<g class="node deleted">' in page


# -- session_stats ------------------------------------------------------------------------


def test_stats_add_up_the_replies_usage(client: Client) -> None:
    s = client.sessions.new()
    _conversation(s, usage=True)
    s.transcript.log_event("note")
    (stats,) = client.session_stats()  # the current session
    assert stats == SessionStats(s.id, 6, 2, 400, 15, 200, 0.5)
    plain = client.sessions.new()
    _conversation(plain)
    assert client.session_stats([plain.id, s.id]) == [
        SessionStats(plain.id, 5, 0, 0, 0, 0, 0.0),
        stats,
    ]


def test_stats_count_what_is_in_view(client: Client) -> None:
    s = client.sessions.new()
    _conversation(s, usage=True)
    s.trim(1)  # only "Two files." stays, plus the trim event
    (stats,) = client.session_stats([s.id])
    assert (stats.entries, stats.replies, stats.input_tokens, stats.cached_tokens) == (
        2,
        1,
        300,
        200,
    )
    assert stats.cache_share == pytest.approx(2 / 3)


def test_stats_of_a_new_session_and_bad_ids(client: Client) -> None:
    current = client.session
    assert client.session_stats() == [SessionStats(current.id, 0, 0, 0, 0, 0, 0.0)]
    assert client.session_stats([current.id]) == client.session_stats()
    with pytest.raises(SessionNotFoundError):
        client.session_stats(["nope"])
    with pytest.raises(SessionNotFoundError):
        client.session_stats(["../x"])
    with pytest.raises(InvalidArgumentError):
        client.session_stats("abc")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        client.session_stats([1])  # type: ignore[list-item]
    assert client.session_stats([]) == []


def test_odd_usage_values_count_as_zero(client: Client) -> None:
    s = client.sessions.new()
    s.transcript.inject_many(
        [
            {"role": "assistant", "content": "a", "meta": {"usage": {"input_tokens": "12"}}},
            {
                "role": "assistant",
                "content": "b",
                "meta": {"usage": {"input_tokens": True, "output_tokens": -4}},
            },
            {"role": "assistant", "content": "c", "meta": {"usage": "lots"}},
            {"role": "user", "content": "d", "meta": {"usage": {"input_tokens": 50}}},
        ]
    )
    assert client.session_stats([s.id]) == [SessionStats(s.id, 4, 2, 0, 0, 0, 0.0)]


def test_stats_read_a_session_only_when_it_changed(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = client.sessions.new(), client.sessions.new()
    _conversation(a, usage=True)
    _conversation(b)
    reads: list[str] = []
    real_read = client.store.read

    def counting(row: Any, lo: int, hi: int) -> Any:
        reads.append(row.id)
        return real_read(row, lo, hi)

    monkeypatch.setattr(client.store, "read", counting)
    first = client.session_stats([a.id, b.id])
    assert sorted(reads) == sorted([a.id, b.id])
    reads.clear()
    assert client.session_stats([a.id, b.id]) == first
    assert reads == []  # nothing changed: one stamp read each, no records read
    a.inject({"role": "assistant", "content": "more", "meta": {"usage": {"input_tokens": 1}}})
    again = client.session_stats([a.id, b.id])
    assert reads == [a.id]  # only the session that changed is read
    assert (again[0].entries, again[0].replies, again[0].input_tokens) == (6, 3, 401)
    assert again[1] == first[1]
    reads.clear()
    a.rename("renamed")  # any write moves the stamp
    client.session_stats([a.id])
    assert reads == [a.id]
    # Another client (a fresh cache) reads again.
    with Client(client.workspace, store=client.store) as other:
        monkeypatch.setattr(other.store, "read", counting)
        reads.clear()
        other.session_stats([b.id])
        assert reads == [b.id]
