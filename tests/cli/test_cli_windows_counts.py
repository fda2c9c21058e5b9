"""What ``plait context``, ``sessions list`` and ``sessions show`` say is true: the window is
the model's that wrote the replies (imported or not, a merge's too), a window nobody knows is
said to be a guess, the shares add up to ``used``, and a summary an ``uncompact`` hid is not
counted as a message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from plait import Client
from plait.cli import cli

FIXTURES = Path("/work/shared/fixtures/transcripts")
SONNET_4 = FIXTURES / "claude-code" / "ccviewer_init-command_v1.0.98.jsonl"


def _run(base: list[str], *args: str) -> Any:
    result = CliRunner().invoke(cli, [*base, *args])
    assert result.exit_code == 0, result.output
    return result


def _json(base: list[str], *args: str) -> Any:
    return json.loads(_run(base, *args, "--json").output)


def _base(tmp_path: Path) -> list[str]:
    return ["--store", str(tmp_path / "w.db"), "--workspace", str(tmp_path)]


@pytest.mark.skipif(not SONNET_4.exists(), reason=f"needs the shared fixture {SONNET_4}")
def test_an_imported_claude_sonnet_4_session_has_claudes_window(tmp_path: Path) -> None:
    # The file's replies name claude-sonnet-4-20250514 (kept as meta.source.model).
    assert '"model":"claude-sonnet-4-20250514"' in SONNET_4.read_text()
    base = _base(tmp_path)
    _run(base, "import", str(SONNET_4))
    report = _json(base, "context", "latest")
    assert (report["window"], report["window_source"]) == (200_000, "table")
    assert "/ 200,000 tokens" in _run(base, "context", "latest").output


def test_a_window_nobody_knows_is_said_to_be_a_guess(tmp_path: Path) -> None:
    base = _base(tmp_path)
    with Client(tmp_path, store=str(tmp_path / "w.db")) as client:
        client.sessions.create(
            [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi", "meta": {"model": "mystery-lm-7b"}},
            ]
        )
    report = _json(base, "context", "latest")
    assert report["window_source"] == "guess"
    text = _run(base, "context", "latest").output
    assert "a guess" in text and "PLAIT_CONTEXT_WINDOW" in text
    # A model the table knows is not a guess.
    assert _json(base, "context", "latest", "--model", "gpt-4o")["window_source"] == "table"


def test_a_merge_has_its_own_models_window(tmp_path: Path) -> None:
    """A merge whose newest reply was recorded (no model) keeps the conversation's model."""
    base = _base(tmp_path)
    with Client(tmp_path, store=str(tmp_path / "w.db")) as client:
        root = client.sessions.create(
            [
                {"role": "user", "content": "Which day?"},
                {"role": "assistant", "content": "Friday.", "meta": {"model": "gpt-4-0613"}},
            ]
        )
        follow = root.fork()
        follow.transcript.inject_many([{"role": "user", "content": "Sure?"}])
        retry = root.fork_at(1)
        retry.transcript.inject_many([{"role": "assistant", "content": "I have not read it yet."}])
        merged = follow.merge(retry)
        ids = root.id, merged.id
    for sid in ids:
        report = _json(base, "context", sid)
        assert (report["window"], report["window_source"]) == (8_192, "table"), sid


def test_a_cut_off_reply_is_neither_in_used_nor_in_the_shares(tmp_path: Path) -> None:
    """A cut-off reply stays in the transcript but no request sends it: the report of a
    session with one is the report of the same session without it."""
    db = str(tmp_path / "w.db")
    base = _base(tmp_path)
    question = {"role": "user", "content": "Write a short poem about the sea."}
    cut_off = {
        "role": "assistant",
        "content": "Waves roll in and out, the gulls cry over the grey water all day long",
        "meta": {"model": "gpt-4o", "finish_reason": "interrupted"},
    }
    answer = {"role": "assistant", "content": "Salt and foam.", "meta": {"model": "gpt-4o"}}
    with Client(tmp_path, store=db) as client:
        ids = [
            client.sessions.create([question, cut_off, answer]).id,
            client.sessions.create([question, answer]).id,
        ]
    reports = [_json(base, "context", sid) for sid in ids]
    for report in reports:
        assert report["used"] == sum(s["tokens"] for s in report["shares"])
    assert reports[0]["used"] == reports[1]["used"]
    assert reports[0]["shares"] == reports[1]["shares"]


def test_the_provider_count_and_the_shares_agree_past_a_cut_off_reply(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    base = _base(tmp_path)
    question = {"role": "user", "content": "Write a short poem about the sea."}
    cut_off = {
        "role": "assistant",
        "content": "Waves roll in and out, the gulls cry over the grey water",
        "meta": {"model": "gpt-4o", "finish_reason": "interrupted"},
    }
    answer: dict[str, Any] = {"role": "assistant", "content": "Salt and foam."}
    with Client(tmp_path, store=db) as client:
        plain = client.sessions.create([question, {**answer, "meta": {"model": "gpt-4o"}}])
        plain.context()  # counts its records: what each costs
        asked, said = (r.tokens for r in plain.transcript.records)
        assert isinstance(asked, int) and isinstance(said, int)
        # What the provider counted: the question (the cut-off reply was not sent) and
        # the reply it wrote.
        usage = {"input_tokens": asked, "output_tokens": said}
        meta = {"model": "gpt-4o", "usage": usage}
        sid = client.sessions.create([question, cut_off, {**answer, "meta": meta}]).id
    report = _json(base, "context", sid)
    assert report["from_provider"]
    shares = {x["name"]: x for x in report["shares"]}
    assert "Unattributed" not in shares
    assert report["used"] == sum(x["tokens"] for x in report["shares"]) == asked + said
    assert shares["Assistant messages"]["items"] == 1  # the reply, not the cut-off one


def test_after_compact_then_uncompact_counts_are_what_history_shows(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    base = _base(tmp_path)
    with Client(tmp_path, store=db) as client:
        s = client.sessions.create(
            [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40}
                for i in range(43)
            ]
        )
        sid = s.id
    _run(base, "compact", sid, "--strategy", "truncate", "--keep-last", "4")
    _run(base, "uncompact", sid)
    with Client(tmp_path, store=db) as client:
        shown = len(client.open(sid).history())
    assert shown == 43
    listed = _json(base, "sessions", "list")
    assert [row["length"] for row in listed] == [43]
    assert "43" in _run(base, "sessions", "list").output.split("\n")[1].split()
    assert "43 messages" in _run(base, "sessions", "show", sid).output.splitlines()[0]
    tail = _run(base, "sessions", "show", sid, "--tail", "2").output
    assert "43 messages" in tail.splitlines()[0]
    lines = tail.splitlines()[1:]
    # The last two messages, then the undone summary marked as such, not as a message.
    assert lines[0].startswith("#41 ") and lines[1].startswith("#42 ")
    assert "summary (undone" in lines[2] and "event compaction_undone" in lines[3]
    records = _json(base, "sessions", "show", sid, "--tail", "2")
    assert [r["kind"] for r in records] == ["assistant", "user", "summary", "event"]


@pytest.mark.skipif(not SONNET_4.exists(), reason=f"needs the shared fixture {SONNET_4}")
def test_plait_stats_counts_imported_replies(tmp_path: Path) -> None:
    # A reference read of the file: one reply per API response (its lines share
    # message.id and repeat its usage; the last line has the whole reply's).
    last: dict[str, dict[str, int]] = {}
    for raw in SONNET_4.read_text().splitlines():
        line = json.loads(raw)
        message = line.get("message") if line.get("type") == "assistant" else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            last[message["id"]] = message["usage"]
    assert len(last) > 1
    base = _base(tmp_path)
    _run(base, "import", str(SONNET_4))
    (stats,) = _json(base, "stats", "latest")
    prompt = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in last.values()
    )
    assert stats["replies"] == len(last)
    assert stats["input_tokens"] == prompt
    assert stats["output_tokens"] == sum(u["output_tokens"] for u in last.values())
    assert stats["cached_tokens"] == sum(u["cache_read_input_tokens"] for u in last.values())
