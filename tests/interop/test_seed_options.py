"""Every ``seed_from_jsonl`` option, with the result shape and the stored provenance."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, SessionExistsError, UnknownOptionError
from plait.interop import SEED_SOURCE_SCHEMA, SeedResult, seed_from_jsonl

from ._helpers import seed

SNIFFLY = Path("claude-code") / "sniffly_push-to-github_v1.0.17.jsonl"
POMODORO = Path("codex") / "aisessions_pomodoro_v0.47.0.jsonl"


def _write(tmp_path: Path, messages: list[dict[str, Any]], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "list"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}],
    },
    {"role": "tool", "content": "a b", "tool_call_id": "c1", "tool_name": "ls"},
    {"role": "assistant", "content": "two files"},
    {"role": "summary", "content": "listed files", "folds": [1, 5]},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": "welcome"},
]


def test_result_has_exactly_seed_003_fields() -> None:
    assert list(SeedResult.__dataclass_fields__) == [
        "ok",
        "session_id",
        "turns_loaded",
        "messages_loaded",
        "source_records",
        "source_format",
        "partial",
        "truncated",
        "provider",
        "model",
        "tool_format",
        "source",
        "recommend_compaction",
        "error",
    ]


def test_truncate_to_last_never_starts_on_an_orphaned_result(mem: Client, tmp_path: Path) -> None:
    path = _write(tmp_path, CONVERSATION)
    # The last 5 would start on the tool result whose call was cut: it goes too.
    result, messages = seed(mem, path, truncate_to_last=5)
    assert result.truncated
    assert [m.text for m in messages] == ["two files", "listed files", "thanks", "welcome"]
    assert result.messages_loaded == 4
    summary = mem.open(result.session_id or "").transcript.records[1]
    assert summary.payload["folds"] == [0, 1]  # moved with the messages that were kept
    assert [m.role for m in mem.sessions.history_of(result.session_id or "", full=False)] == [
        "summary",
        "user",
        "assistant",
    ]
    result, messages = seed(mem, path, truncate_to_last=6)
    assert [m.role for m in messages][:2] == ["assistant", "tool"]  # call and result stay
    assert result.messages_loaded == 6
    result, _ = seed(mem, path, truncate_to_last=100)
    assert not result.truncated and result.messages_loaded == 8


def test_drop_tool_calls(mem: Client, transcripts: Path) -> None:
    full, full_messages = seed(mem, transcripts / POMODORO)
    result, messages = seed(mem, transcripts / POMODORO, drop_tool_calls=True)
    assert not any(m.role == "tool" or m.tool_calls for m in messages)
    assert result.tool_format == "none" and full.tool_format == "native"
    # Assistant messages that were only tool calls are gone; text is kept.
    assert [m.text for m in messages if m.role == "assistant"] == [
        m.text for m in full_messages if m.role == "assistant" and m.text
    ]
    assert [m.text for m in messages if m.role == "user"] == [
        m.text for m in full_messages if m.role == "user"
    ]
    assert result.messages_loaded == 4 + 3  # 4 user messages and 3 replies with text


def test_rename_session(client: Client, transcripts: Path) -> None:
    result, _ = seed(client, transcripts / SNIFFLY, rename_session="audit-recovery")
    assert result.session_id == "audit-recovery"
    assert client.exists("audit-recovery")
    before = len(client.sessions.list())
    with pytest.raises(SessionExistsError):
        seed_from_jsonl(client, transcripts / SNIFFLY, rename_session="audit-recovery")
    assert len(client.sessions.list()) == before
    with pytest.raises(InvalidArgumentError):
        seed_from_jsonl(client, transcripts / SNIFFLY, rename_session=" padded")


def test_provider_and_model_guardrails(mem: Client, transcripts: Path) -> None:
    path = transcripts / SNIFFLY
    ok = seed_from_jsonl(mem, path, provider="Anthropic", model="claude-sonnet-4-20250514")
    assert ok.ok
    wrong = seed_from_jsonl(mem, path, provider="openai")
    assert not wrong.ok and wrong.session_id is None
    assert wrong.error is not None and "provider guardrail" in wrong.error
    assert "'anthropic'" in wrong.error
    wrong = seed_from_jsonl(mem, path, model="claude-opus-4")
    assert not wrong.ok
    assert wrong.error is not None and "model guardrail" in wrong.error
    assert len(mem.sessions.list()) == 1  # only the first one
    # A format that records no model passes, and reports the one given.
    mini = transcripts / "openai-chat" / "mini-swe-agent_github-issue_no-tools.json"
    result = seed_from_jsonl(mem, mini, provider="openai", model="gpt-4o")
    assert result.ok and result.provider == "openai" and result.model == "gpt-4o"


def test_source_provenance_is_returned_and_stored(mem: Client, transcripts: Path) -> None:
    result, _ = seed(
        mem,
        transcripts / POMODORO,
        source_agent="codex",
        source_session_id="7f9f9a2e",
        source_label="Pomodoro app",
        source_provenance={"picker": "recent", "rank": 1},
        recommend_compaction=True,
    )
    assert result.recommend_compaction
    source = result.source
    assert source is not None
    assert source["schema"] == SEED_SOURCE_SCHEMA == "plait.session_seed_source.v1"
    assert source["kind"] == "external_agent_session"
    assert source["agent"] == "codex"
    assert source["session_id"] == "7f9f9a2e"
    assert source["label"] == "Pomodoro app"
    assert source["provenance"] == {"picker": "recent", "rank": 1}
    assert source["file"] == "aisessions_pomodoro_v0.47.0.jsonl"
    assert len(source["sha256"]) == 64
    snap = mem.snapshot(result.session_id)
    assert snap is not None
    seeded = snap.metadata["seeded_from_jsonl"]
    assert seeded["source"] == source
    assert seeded["recommend_compaction"] is True
    assert seeded["model"] == "gpt-5-codex"
    assert result.to_dict()["source"] == source


def test_source_kind_defaults_and_override(mem: Client, transcripts: Path, tmp_path: Path) -> None:
    plain = _write(tmp_path, CONVERSATION)
    result, _ = seed(mem, plain)
    assert result.source is not None and result.source["kind"] == "plait_jsonl"
    assert result.source["agent"] is None
    result, _ = seed(mem, plain, source_agent="cursor")
    assert result.source is not None and result.source["kind"] == "external_agent_session"
    result, _ = seed(mem, plain, source_kind="fixture")
    assert result.source is not None and result.source["kind"] == "fixture"


def test_title(mem: Client, transcripts: Path) -> None:
    result, _ = seed(mem, transcripts / SNIFFLY, title="  Push   it  ")
    assert mem.open(result.session_id or "").title == "Push it"


def test_options_mapping(mem: Client, transcripts: Path) -> None:
    result = seed_from_jsonl(
        mem, transcripts / SNIFFLY, {"truncate_to_last": 3, "rename_session": "via-options"}
    )
    assert result.ok and result.session_id == "via-options" and result.truncated
    with pytest.raises(UnknownOptionError) as err:
        seed_from_jsonl(mem, transcripts / SNIFFLY, {"truncate": 3, "bogus": 1})
    assert err.value.keys == ["bogus", "truncate"]
    with pytest.raises(InvalidArgumentError, match="given twice"):
        seed_from_jsonl(mem, transcripts / SNIFFLY, {"truncate_to_last": 3}, truncate_to_last=4)
    with pytest.raises(TypeError):
        seed_from_jsonl(mem, transcripts / SNIFFLY, truncate=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("truncate_to_last", 0),
        ("truncate_to_last", True),
        ("validate", "yes"),
        ("drop_tool_calls", 1),
        ("format", "xml"),
        ("provider", ""),
        ("model", 5),
        ("source_provenance", {"f": object()}),
        ("source_provenance", ["not", "a", "dict"]),
    ],
)
def test_bad_option_values(mem: Client, transcripts: Path, option: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        seed_from_jsonl(mem, transcripts / SNIFFLY, {option: value})
    assert mem.sessions.list() == []


def test_progress_is_reported(mem: Client, transcripts: Path) -> None:
    seen: list[tuple[int, int]] = []
    seed(mem, transcripts / POMODORO, progress=lambda done, total: seen.append((done, total)))
    size = (transcripts / POMODORO).stat().st_size
    assert seen and seen[-1] == (size, size)
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(seen))
