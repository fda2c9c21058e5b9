"""The Claude Agent SDK's SessionStore backed by plait: the SDK's own suite, and plait's view."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    get_session_messages_from_store,
    project_key_for_directory,
)
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey, SessionStore

from plait import Client
from plait.errors import InvalidArgumentError
from plait.integrations.claude_agent_sdk import ENTRY_FORMAT, PlaitSessionStore, session_id_for
from plait.interop import seed_from_jsonl
from plait.views import full_history

from .conftest import Targets, read_entries

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")


def _conversation() -> list[dict[str, Any]]:
    """One turn as Claude Code writes it: a prompt, a response in three lines, a result."""

    def assistant(uuid: str, parent: str, block: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "assistant",
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "sess",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [block],
            },
        }

    return [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "sess",
            "cwd": "/work/app",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "what is in this folder?"},
        },
        assistant("a1", "u1", {"type": "text", "text": "Let me look."}),
        assistant(
            "a2", "a1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}}
        ),
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a2",
            "sessionId": "sess",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
            },
        },
        {"type": "file-history-snapshot", "messageId": "a2", "snapshot": {"files": {}}},
        {
            "type": "assistant",
            "uuid": "a3",
            "parentUuid": "u2",
            "sessionId": "sess",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "content": [{"type": "text", "text": "One file: a.txt."}],
            },
        },
        {"type": "custom-title", "customTitle": "Folder tour", "sessionId": "sess"},
    ]


def _second_turn() -> list[dict[str, Any]]:
    return [
        {
            "type": "user",
            "uuid": "u3",
            "parentUuid": "a3",
            "sessionId": "sess",
            "message": {"role": "user", "content": "thanks"},
        },
        {
            "type": "assistant",
            "uuid": "a4",
            "parentUuid": "u3",
            "sessionId": "sess",
            "message": {"id": "msg_3", "role": "assistant", "content": "You are welcome."},
        },
    ]


KEY: SessionKey = {"project_key": "proj", "session_id": "sess"}


def test_every_optional_method_is_implemented() -> None:
    # The SDK's suite skips, silently, the contracts of a method a store leaves out.
    for name in OPTIONAL:
        assert getattr(PlaitSessionStore, name) is not getattr(SessionStore, name)


def test_the_sdk_conformance_suite(targets: Targets, tmp_path: Path) -> None:
    made: list[PlaitSessionStore] = []

    def fresh() -> PlaitSessionStore:
        store = PlaitSessionStore(targets.new(), workspace=tmp_path)
        made.append(store)
        return store

    try:
        asyncio.run(run_session_store_conformance(fresh))
    finally:
        for store in made:
            store.close()
    # The probe, then a fresh store per check; 15 only when no optional contract was skipped.
    assert len(made) == 15


def test_entries_round_trip_and_read_as_a_plait_session(tmp_path: Path) -> None:
    entries = _conversation()
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, entries[:4]))
    asyncio.run(store.append(KEY, entries[4:]))
    assert asyncio.run(store.load(KEY)) == entries

    session = store.session(KEY)
    assert session.id == "proj/sess"
    assert session.title == "Folder tour"
    history = session.history()
    assert [(m.role, m.text) for m in history] == [
        ("user", "what is in this folder?"),
        ("assistant", "Let me look."),
        ("tool", "a.txt"),
        ("assistant", "One file: a.txt."),
    ]
    assert [c.name for c in history[1].tool_calls] == ["Bash"]
    # The snapshot and the title line are kept verbatim, out of the conversation.
    opaque = [r for r in session.transcript.records if r.kind == "opaque"]
    assert [r.format for r in opaque] == [ENTRY_FORMAT, ENTRY_FORMAT]  # type: ignore[attr-defined]
    assert [r.item for r in opaque] == [entries[4], entries[6]]  # type: ignore[attr-defined]
    store.close()


def test_plait_verbs_leave_the_sdk_transcript_alone(tmp_path: Path) -> None:
    entries = [*_conversation(), *_second_turn()]
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, entries))
    session = store.session(KEY)
    branch = session.fork("proj/sess-what-if")
    branch.inject({"role": "user", "content": "and hidden files?"})
    assert asyncio.run(session.compact({"keep_last": 2})) is not None
    assert session.history()[0].role == "summary"
    # Compaction is a view and a fork is another session: the SDK resumes what it wrote.
    assert asyncio.run(store.load(KEY)) == entries
    assert session.context().used > 0
    store.close()


@pytest.mark.parametrize(
    "name",
    [
        "sniffly_push-to-github_v1.0.17.jsonl",
        "ccl_hooks-summaries_v1.0.51.jsonl",
        "ccviewer_task-subagents-inline-sidechain_v1.0.108.jsonl",
        "entire-gitsync_toolsearch-attachments_v2.1.119.jsonl",
        "entire-skills_plan-mode-toolsearch_v2.1.101.jsonl",
        "entire-gitsync_parallel-interleaved_v2.1.109.jsonl",
        # A rewind in Claude Code: a prompt hangs off an earlier line.
        "ccl_thinking-progress_v2.1.42.jsonl",
    ],
)
def test_a_sample_appended_turn_by_turn_reads_as_its_import(
    claude_samples: Path, tmp_path: Path, name: str
) -> None:
    path = claude_samples / name
    entries = read_entries(path)
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    # The SDK flushes once per turn: cut the transcript before every typed prompt.
    turns: list[list[dict[str, Any]]] = [[]]
    for entry in entries:
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("type") == "user" and isinstance(content, str) and turns[-1]:
            turns.append([])
        turns[-1].append(entry)
    assert len(turns) > 1
    for turn in turns:
        asyncio.run(store.append(KEY, turn))
    assert asyncio.run(store.load(KEY)) == entries
    with Client(tmp_path, store=str(tmp_path / "import.db")) as other:
        imported = seed_from_jsonl(other, path, validate=False)
        assert imported.session_id is not None
        expected = other.sessions.history_of(imported.session_id, full=True)
    mine = store.session(KEY).history(full=True)
    assert [(m.role, m.text, m.tool_calls) for m in mine] == [
        (m.role, m.text, m.tool_calls) for m in expected
    ]
    store.close()


def test_a_rewind_in_claude_code_is_a_rewind_in_plait(claude_samples: Path, tmp_path: Path) -> None:
    entries = read_entries(claude_samples / "ccl_thinking-progress_v2.1.42.jsonl")
    # Line 37 is a prompt that hangs off line 15: the three turns between were abandoned.
    assert entries[37]["parentUuid"] == entries[15]["uuid"]
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, entries[:37]))
    session = store.session(KEY)
    abandoned = [m.text for m in session.history()]
    asyncio.run(store.append(KEY, entries[37:]))
    assert asyncio.run(store.load(KEY)) == entries  # every line, the abandoned ones too
    texts = [m.text for m in session.history()]
    assert not any(t.startswith("I very much like this idea") for t in texts)
    assert texts[6].startswith("I actually don't like much")
    # The abandoned turns are a hidden head: the rewind can be undone from plait.
    (hidden,) = session.transcript.hidden_heads()
    held = [m.text for m in store.client.sessions.history_of(hidden)]
    assert held == abandoned
    store.close()


def test_a_subagent_transcript_is_a_child_session(claude_samples: Path, tmp_path: Path) -> None:
    main = read_entries(claude_samples / "ccl_main-with-subagent_v2.1.17.jsonl")
    sub = read_entries(claude_samples / "ccl_main-with-subagent_v2.1.17.subagent-a2271d1.jsonl")
    sub_key: SessionKey = {**KEY, "subpath": "subagents/agent-a2271d1"}
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, main))
    asyncio.run(store.append(sub_key, sub))
    assert asyncio.run(store.load(sub_key)) == sub
    assert asyncio.run(store.list_subkeys(KEY)) == ["subagents/agent-a2271d1"]
    child = store.session(sub_key)
    assert child.id == "proj/sess/subagents/agent-a2271d1"
    assert child.parent_session_ids == ("proj/sess",)
    assert child.id in store.session(KEY).transcript.ancestry().child_ids
    # The sub-agent's own conversation, mapped as the importer maps its file.
    history = child.history(full=True)
    assert history[0].text.startswith("Give me a comprehensive overview")
    assert sum(len(m.tool_calls) for m in history) == 24
    asyncio.run(store.delete(KEY))
    assert asyncio.run(store.load(sub_key)) is None
    assert not store.client.exists(child.id)
    store.close()


def test_a_subagent_written_before_its_main_transcript(tmp_path: Path) -> None:
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    sub_key: SessionKey = {**KEY, "subpath": "subagents/agent-1"}
    asyncio.run(store.append(sub_key, [{"type": "x", "n": 1}]))
    assert asyncio.run(store.load(KEY)) is None
    assert asyncio.run(store.list_sessions("proj")) == []
    asyncio.run(store.append(KEY, [{"type": "x", "n": 2}]))
    assert asyncio.run(store.load(KEY)) == [{"type": "x", "n": 2}]
    assert [s["session_id"] for s in asyncio.run(store.list_sessions("proj"))] == ["sess"]
    store.close()


def test_keys_with_slashes_and_long_parts_stay_apart(tmp_path: Path) -> None:
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    keys: list[SessionKey] = [
        {"project_key": "a/b", "session_id": "c"},
        {"project_key": "a", "session_id": "b/c"},
        {"project_key": "p" * 300, "session_id": "s" * 300},
        {"project_key": "p" * 300 + "x", "session_id": "s" * 300},
    ]
    for n, key in enumerate(keys):
        asyncio.run(store.append(key, [{"type": "x", "n": n}]))
    ids = {session_id_for(key) for key in keys}
    assert len(ids) == 4 and all(len(i) <= 200 for i in ids)
    for n, key in enumerate(keys):
        assert asyncio.run(store.load(key)) == [{"type": "x", "n": n}]
        listed = asyncio.run(store.list_sessions(key["project_key"]))
        assert [s["session_id"] for s in listed] == [key["session_id"]]
    store.close()


def test_a_summary_behind_its_transcript_is_folded_again(tmp_path: Path) -> None:
    entries = _conversation()
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, entries[:4]))
    good = asyncio.run(store.list_session_summaries("proj"))[0]["data"]
    # A writer that stopped after its records and before its summary: the records are
    # there, the summary is the previous one.
    session = store.session(KEY)
    kept = session.settings.metadata["claude_agent_sdk"]
    asyncio.run(store.append(KEY, entries[4:]))
    session.settings.set_metadata("claude_agent_sdk", kept)
    data = asyncio.run(store.list_session_summaries("proj"))[0]["data"]
    assert data != good
    assert data["custom_title"] == "Folder tour"
    store.close()


_OTHER_HOST = """
import asyncio, json, sys
from claude_agent_sdk import get_session_messages_from_store, list_sessions_from_store
from plait.integrations.claude_agent_sdk import PlaitSessionStore

path, directory, session_id = sys.argv[1:4]
store = PlaitSessionStore(path, workspace=directory)
messages = asyncio.run(get_session_messages_from_store(store, session_id, directory=directory))
listed = asyncio.run(list_sessions_from_store(store, directory=directory))
key = {"project_key": sys.argv[4], "session_id": session_id}
asyncio.run(store.append(key, [json.loads(sys.argv[5])]))
print(json.dumps({
    "messages": [[m.type, m.uuid] for m in messages],
    "listed": [[s.session_id, s.summary] for s in listed],
}))
store.close()
"""


def test_another_process_resumes_and_continues(tmp_path: Path) -> None:
    directory = str(tmp_path / "app")
    project = project_key_for_directory(directory)
    key: SessionKey = {"project_key": project, "session_id": "sess"}
    entries = _conversation()
    path = str(tmp_path / "s.db")
    store = PlaitSessionStore(path, workspace=tmp_path)
    asyncio.run(store.append(key, entries))
    expected = asyncio.run(get_session_messages_from_store(store, "sess", directory=directory))
    store.close()

    more = {
        "type": "user",
        "uuid": "u3",
        "parentUuid": "a3",
        "sessionId": "sess",
        "timestamp": "2026-01-01T00:00:04.000Z",
        "message": {"role": "user", "content": "thanks"},
    }
    out = subprocess.run(
        [sys.executable, "-c", _OTHER_HOST, path, directory, "sess", project, json.dumps(more)],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    seen = json.loads(out.stdout)
    assert seen["messages"] == [[m.type, m.uuid] for m in expected]
    assert seen["listed"] == [["sess", "Folder tour"]]

    again = PlaitSessionStore(path, workspace=tmp_path)
    assert asyncio.run(again.load(key)) == [*entries, more]
    assert again.session(key).history()[-1].text == "thanks"
    again.close()


def test_a_title_line_renames_the_session(tmp_path: Path) -> None:
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, _conversation()[:4]))
    assert store.session(KEY).title is None
    asyncio.run(store.append(KEY, [{"type": "custom-title", "customTitle": "Renamed"}]))
    assert store.session(KEY).title == "Renamed"
    store.close()


@pytest.mark.parametrize("bad", [{"type": "x", "n": float("nan")}])
def test_an_entry_plait_cannot_store_fails_the_batch_whole(tmp_path: Path, bad: Any) -> None:
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(store.append(KEY, [{"type": "x", "n": 1}]))
    with pytest.raises(InvalidArgumentError):
        asyncio.run(store.append(KEY, [{"type": "x", "n": 2}, bad]))
    assert asyncio.run(store.load(KEY)) == [{"type": "x", "n": 1}]
    store.close()


_WRITER = """
import asyncio, os, sys, time
from plait.integrations.claude_agent_sdk import PlaitSessionStore

path, name = sys.argv[1:3]
store = PlaitSessionStore(path, workspace=sys.argv[3])
key = {"project_key": "proj", "session_id": "shared"}
open(sys.argv[3] + "/ready-" + name, "w").close()
while not os.path.exists(sys.argv[3] + "/go"):  # both start writing together
    time.sleep(0.01)
for batch in range(40):
    entries = [{"type": "x", "who": name, "batch": batch, "n": n} for n in range(3)]
    asyncio.run(store.append(key, entries))
    time.sleep(0.002)  # a turn's think time: the other writer's batches come between
store.close()
"""


def test_two_processes_write_one_transcript_in_turns(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, path, name, str(tmp_path)],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    while not all((tmp_path / f"ready-{name}").exists() for name in ("a", "b")):
        assert all(w.poll() is None for w in writers), "a writer stopped before it was ready"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    store = PlaitSessionStore(path, workspace=tmp_path)
    loaded = asyncio.run(store.load({"project_key": "proj", "session_id": "shared"}))
    assert loaded is not None and len(loaded) == 240
    # Each batch is whole and in place; each writer's batches in the order it sent them.
    batches = [loaded[i : i + 3] for i in range(0, 240, 3)]
    for batch in batches:
        assert [e["n"] for e in batch] == [0, 1, 2]
        assert len({(e["who"], e["batch"]) for e in batch}) == 1
    for name in ("a", "b"):
        assert [b[0]["batch"] for b in batches if b[0]["who"] == name] == list(range(40))
    summary = asyncio.run(store.list_session_summaries("proj"))
    assert [s["session_id"] for s in summary] == ["shared"]
    store.close()


def test_the_web_service_serves_the_sdk_sessions(tmp_path: Path) -> None:
    from urllib.parse import quote

    from starlette.testclient import TestClient

    from plait.server import create_app

    path = str(tmp_path / "s.db")
    store = PlaitSessionStore(path, workspace=tmp_path)
    asyncio.run(store.append(KEY, _conversation()))
    asyncio.run(store.append({**KEY, "subpath": "subagents/agent-1"}, _conversation()[:1]))
    store.close()
    auth = {"Authorization": "Bearer k-0123456789abcdef"}
    app = create_app(path, api_keys="k-0123456789abcdef", workspace=tmp_path)
    with TestClient(app) as http:
        listed = http.get("/sessions", headers=auth).json()["sessions"]
        assert {s["id"] for s in listed} == {"proj/sess", "proj/sess/subagents/agent-1"}
        sid = quote("proj/sess", safe="")
        history = http.get(f"/sessions/{sid}/history", headers=auth).json()["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        boxes = http.get(f"/sessions/{sid}/lineage", headers=auth).json()["boxes"]
        assert "proj/sess/subagents/agent-1" in {b["id"] for b in boxes}


def _line(kind: str, uuid: str, parent: str | None, text: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": text}
    if kind == "assistant":
        message = {
            "id": f"m-{uuid}",
            "role": kind,
            "model": "m",
            "content": [{"type": "text", "text": text}],
        }
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "sess",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": message,
    }


def test_a_plait_fork_at_continued_by_the_sdk_loads_in_order(tmp_path: Path) -> None:
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    lines = [
        _line("user", "u1", None, "q1"),
        _line("assistant", "a1", "u1", "a1"),
        _line("user", "u2", "a1", "q2"),
        _line("assistant", "a2", "u2", "a2"),
        _line("user", "u3", "a2", "q3"),
    ]
    for line in lines:  # one line a batch, as the SDK's eager flush writes them
        asyncio.run(store.append(KEY, [line]))
    fork: SessionKey = {"project_key": "proj", "session_id": "alt"}
    store.session(KEY).fork_at(4, session_id_for(fork))  # with plait's API
    assert asyncio.run(store.load(fork)) == lines[:4]
    # Listed as the SDK lists a transcript it holds, with its summary.
    listed = asyncio.run(store.list_sessions("proj"))
    assert sorted(s["session_id"] for s in listed) == ["alt", "sess"]
    summaries = asyncio.run(store.list_session_summaries("proj"))
    assert sorted(s["session_id"] for s in summaries) == ["alt", "sess"]
    more = [
        _line("user", "f1", "a2", "fork q"),
        _line("assistant", "fa", "f1", "fork a"),
        _line("user", "r1", "a1", "rewound q"),  # a rewind in the fork
    ]
    for line in more:
        asyncio.run(store.append(fork, [line]))
    # What the SDK's InMemorySessionStore gives for these appends: the lines in order.
    assert asyncio.run(store.load(fork)) == lines[:4] + more
    assert asyncio.run(store.load(KEY)) == lines
    assert [m.text for m in store.session(fork).history()] == ["q1", "a1", "rewound q"]
    store.close()


def _lines(path: Path) -> list[dict[str, Any]]:
    """The transcript's lines that are JSON objects (the SDK hands the store no others)."""
    out = []
    for raw in path.read_text().splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def _batches(entries: list[dict[str, Any]], how: str, seed: int) -> list[list[dict[str, Any]]]:
    if how == "lines":
        return [[e] for e in entries]
    rng = random.Random(seed)
    out: list[list[dict[str, Any]]] = []
    at = 0
    while at < len(entries):
        n = rng.randint(1, 7)
        out.append(entries[at : at + n])
        at += n
    return out


def _sample_files() -> list[Any]:
    from .conftest import CLAUDE_SAMPLES

    if not CLAUDE_SAMPLES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{CLAUDE_SAMPLES} not found"))]
    return [pytest.param(p.name, id=p.name) for p in sorted(CLAUDE_SAMPLES.glob("*.jsonl"))]


@pytest.mark.parametrize("how", ["lines", "random"])
@pytest.mark.parametrize("name", _sample_files())
def test_lines_in_any_batches_read_as_the_import(
    claude_samples: Path, tmp_path: Path, name: str, how: str
) -> None:
    """However the SDK's flushes cut the file (one API response's lines in several
    batches too), the store's messages are the importer's of the whole file."""
    path = claude_samples / name
    entries = _lines(path)
    store = PlaitSessionStore(str(tmp_path / "s.db"), workspace=tmp_path)
    for batch in _batches(entries, how, seed=len(entries)):
        asyncio.run(store.append(KEY, batch))
    assert asyncio.run(store.load(KEY)) == entries
    if name in _TANGLED:
        store.close()
        return
    with Client(tmp_path, store=str(tmp_path / "import.db")) as other:
        imported = seed_from_jsonl(other, path, validate=False)
        if not imported.ok:  # nothing the model saw (a summary-only file)
            assert not [r for r in store.session(KEY).transcript.records if r.kind != "opaque"]
            store.close()
            return
        assert imported.session_id is not None
        expected = full_history(
            other.open(imported.session_id).transcript.records, context=True
        )
    session = store.session(KEY)
    mine = full_history(session.transcript.records, context=True)
    assert [(m.role, m.text, m.tool_calls, m.added) for m in mine] == [
        (m.role, m.text, m.tool_calls, m.added) for m in expected
    ]
    # Mapping a turn again leaves no head behind; only Claude Code's own rewinds do.
    assert len(session.transcript.hidden_heads()) == _REWINDS.get(name, 0)
    store.close()


# The files in which a prompt hangs off an earlier line (Claude Code rewound), and how often.
_REWINDS = {"ccl_thinking-progress_v2.1.42.jsonl": 1, "synthetic_ccl_rewind-then-compact.jsonl": 1}
# Hand-made damage (duplicate uuids, lines whose parents point anywhere): its lines are
# kept, but which of its branches a batch continues is not what one read of the file says.
_TANGLED = {"synthetic_ccl_edge-cases-malformed.jsonl"}
