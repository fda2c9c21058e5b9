"""Compaction on a session: seed 001 compact(), seed 003 options, preview and undo (issue 4)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError, NothingToDoError, UnknownOptionError
from plait.records import Message


def _conversation(client: Client, turns: int = 12) -> Session:
    s = client.sessions.create([{"role": "system", "content": "be brief"}])
    for i in range(turns):
        s.inject({"role": "user", "content": f"request {i}"})
        s.inject({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "name": "read", "arguments": {"n": i}}]})
        s.inject({"role": "tool", "tool_call_id": f"c{i}", "tool_name": "read",
                  "content": "x" * 500, "ok": i % 5 != 0})
        s.inject({"role": "assistant", "content": f"answer {i}"})
    return s


def test_compact_folds_older_messages_and_deletes_nothing(client: Client) -> None:
    s = _conversation(client)
    full_before = s.history(full=True)
    done = asyncio.run(s.compact(keep_last=4))
    assert done is not None
    assert done.compressed > 0 and done.kept == 4
    history = s.history()
    assert history[0].role == "summary" and history[0].text == done.summary
    assert [m.text for m in history[1:]] == [m.text for m in full_before[-4:]]
    # Nothing was deleted: the full history is the old one plus the summary where it ran.
    assert s.history(full=True) == [*full_before, history[0]]
    assert "request 0" in done.summary  # the default strategy keeps the user's requests
    # Compacting again at once finds nothing worth folding.
    assert asyncio.run(s.compact(keep_last=4)) is None


def test_never_folds_the_newest_request_or_half_a_tool_pair(client: Client) -> None:
    s = _conversation(client, 3)
    s.inject({"role": "user", "content": "the newest request"})
    asyncio.run(s.compact(keep_last=0))
    kept = s.history()[1:]
    assert kept[0].text == "the newest request"
    calls = {c.id for m in kept for c in m.tool_calls}
    results = {m.tool_call_id for m in kept if m.role == "tool"}
    assert calls == results


def test_options_fail_loud_and_write_nothing(client: Client) -> None:
    s = _conversation(client, 3)
    version = s.live.version
    with pytest.raises(UnknownOptionError):
        asyncio.run(s.compact({"keep_last": 2, "colour": "red"}))
    with pytest.raises(InvalidArgumentError):
        asyncio.run(s.compact(keep_last=-1))
    with pytest.raises(InvalidArgumentError):
        s.transcript.compact_preview(compact_strategy="magic")
    assert s.live.version == version


def test_preview_is_a_dry_run_of_the_same_plan(client: Client) -> None:
    s = _conversation(client, 6)
    version = s.live.version
    preview = s.transcript.compact_preview(keep_last=6)
    assert preview is not None and s.live.version == version
    done = asyncio.run(s.compact(keep_last=6))
    assert done is not None
    assert (done.folds_from, done.folds_to) == (preview.folds_from, preview.folds_to)
    assert done.compressed == preview.compressed


def test_uncompact_restores_the_view_before_the_compaction(client: Client) -> None:
    s = _conversation(client, 6)
    before = s.history()
    asyncio.run(s.compact(keep_last=4))
    branch = s.fork()  # a fork of a compacted session forks as compacted
    assert branch.history()[0].role == "summary"
    hidden = s.transcript.uncompact()
    assert hidden.kind == "summary"
    assert s.history() == before
    assert [m.role for m in s.history(full=True)].count("summary") == 0
    with pytest.raises(NothingToDoError):
        s.transcript.uncompact()
    assert branch.history()[0].role == "summary"  # the branch keeps its own view
    # Compacting again works after an undo.
    assert asyncio.run(s.compact(keep_last=4)) is not None
    assert s.history()[0].role == "summary"


def test_already_compacted_to_the_newest_message(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "only"}])
    s.inject({"role": "summary", "content": "all of it", "folds": [0, 1]})
    with pytest.raises(NothingToDoError):
        asyncio.run(s.compact())


def test_custom_and_llm_strategies(client: Client) -> None:
    s = _conversation(client, 4)

    def mine(records: Sequence[object], options: object) -> str:
        return f"custom: {len(records)} records"

    done = asyncio.run(s.compact(compact_strategy="custom", custom_compactor=mine, keep_last=4))
    assert done is not None and done.summary.startswith("custom: ")
    s.transcript.uncompact()
    seen: list[list[Message]] = []

    async def summarize(messages: list[Message]) -> str:
        seen.append(messages)
        return "a model's summary"

    done = asyncio.run(s.compact(compact_strategy="llm", keep_last=4, summarize=summarize))
    assert done is not None and done.summary == "a model's summary"
    assert seen and all(m.role != "system" for m in seen[0])
    s.transcript.uncompact()
    with pytest.raises(InvalidArgumentError):
        asyncio.run(s.compact(compact_strategy="llm", keep_last=4))  # no model to call


def test_history_views_after_two_real_compactions(client: Client) -> None:
    s = _conversation(client, 6)
    everything = s.history(full=True)
    first = asyncio.run(s.compact(keep_last=4))
    s.inject({"role": "user", "content": "next"})
    s.inject({"role": "assistant", "content": "done"})
    second = asyncio.run(s.compact(keep_last=2))
    assert first is not None and second is not None
    # history(): the newest summary, then only what it kept and what followed.
    h = s.history()
    assert h[0].role == "summary" and h[0].text == second.summary
    assert [m.text for m in h[1:]] == ["next", "done"]
    # history(full=True): every message as written, each summary where its compaction ran.
    full = s.history(full=True)
    assert [m.text for m in full if m.role != "summary"] == [
        m.text for m in everything if m.role != "summary"
    ] + ["next", "done"]
    assert [m.text for m in full if m.role == "summary"] == [first.summary, second.summary]
    assert full.index(next(m for m in full if m.text == first.summary)) == len(everything)
    # The fork of a compacted session is compacted, and measures the same.
    branch = s.fork()
    assert branch.history() == h
    assert branch.context() == s.context()


def test_a_listing_counts_each_session_as_its_own_handle_does(client: Client) -> None:
    """The page's counts, read for all sessions at once, are what each session shows."""
    undone = _conversation(client, 6)
    asyncio.run(undone.compact(keep_last=4))
    undone.transcript.uncompact()  # its summary is hidden: not a message a person sees
    trimmed = _conversation(client, 5)
    asyncio.run(trimmed.compact(keep_last=4))
    trimmed.trim(6)
    plain = _conversation(client, 2)
    undone.context("gpt-4o")  # counted: the tallies say what is hidden
    trimmed.context("gpt-4o")
    client.sessions.create([])  # an empty one
    listed = {info.id: info.length for info in client.sessions.list(limit=10)}
    for s in (undone, trimmed, plain):
        assert listed[s.id] == s.transcript.shown_length
    assert listed[undone.id] == undone.transcript.length - 1


def test_a_listing_row_whose_tally_does_not_read_falls_back_alone(tmp_path: Path) -> None:
    """One session's damaged tally costs only its own count: the page's others stay exact."""
    path = tmp_path / "plait.db"
    with Client(tmp_path, store=path) as client:
        undone = _conversation(client, 6)
        asyncio.run(undone.compact(keep_last=4))
        undone.transcript.uncompact()
        undone.context("gpt-4o")
        broken = _conversation(client, 3)
        broken.context("gpt-4o")
        pk = client.store.get(broken.id).pk  # type: ignore[union-attr]
        with sqlite3.connect(path) as db:
            db.execute("UPDATE records SET running = 'not a tally' WHERE key >> 32 = ?", (pk,))
        listed = {info.id: info.length for info in client.sessions.list(limit=10)}
        assert listed[undone.id] == undone.transcript.length - 1  # still exact
        assert listed[broken.id] == broken.transcript.length  # its view's length
