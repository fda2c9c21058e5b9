"""Shapes with no real file in ``../shared``: the hand-written files of ``_handmade.py``.

Also what every reader must do on any file: keep what it does not map, verbatim.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Client
from plait.cli import cli
from plait.interop import seed_from_jsonl
from plait.records import Record

from ._handmade import FILES, OPENAI_AGENTS_ITEMS, PYDANTIC_AI_MESSAGES
from .conftest import TRANSCRIPTS


def _write(tmp_path: Path, rel: str) -> Path:
    path = tmp_path / rel.replace("/", "_")
    path.write_text(FILES[rel])
    return path


def _import(client: Client, path: Path, **options: object) -> tuple[dict, list[Record]]:  # type: ignore[type-arg]
    result = seed_from_jsonl(client, path, **options)  # type: ignore[arg-type]
    assert result.ok, result.error
    assert result.source is not None
    records = [
        r
        for r in client.open(result.session_id or "").transcript.records
        if r.kind != "event"
    ]
    return result.source, records


def _kinds(records: list[Record]) -> list[str]:
    return [r.kind for r in records]


def test_codex_prompts_only_in_event_msg_are_the_user_turns(mem: Client, tmp_path: Path) -> None:
    source, records = _import(mem, _write(tmp_path, "codex/event-prompts.jsonl"))
    assert source["format"] == "codex"
    assert _kinds(records) == [
        "user",  # the environment context item
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert [r.text for r in records if r.kind == "user"][1:] == ["list the files", "delete b.txt"]
    assert [r.ok for r in records if r.kind == "tool"] == [True, False]


def test_codex_rollout_from_before_session_meta(mem: Client, tmp_path: Path) -> None:
    path = _write(tmp_path, "codex/legacy.jsonl")
    source, records = _import(mem, path)  # auto: detected as Codex, not as plait JSONL
    assert source["format"] == "codex"
    assert source["session_id"] == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert source["details"]["layout"] == "before session_meta"
    assert _kinds(records) == ["system", "user", "assistant", "tool", "assistant"]
    assert records[0].text == "Keep changes small."
    assert records[2].meta["thinking"] == ["Run the tests first."]
    assert records[3].ok is False  # metadata.exit_code 1
    assert source["skipped"]["record_type state"] == 2
    _, again = _import(mem, path, format="codex")
    assert _kinds(again) == _kinds(records)


def test_gemini_jsonl_keeps_the_newest_state_of_each_message(mem: Client, tmp_path: Path) -> None:
    source, records = _import(mem, _write(tmp_path, "gemini-cli/recording.jsonl"))
    assert source["format"] == "gemini-cli"
    assert _kinds(records) == ["user", "assistant", "tool", "assistant"]
    assert records[2].ok is False  # the rewritten call ended in an error
    assert "File not found" in records[2].text
    assert source["skipped"] == {"$set line": 2, "header line": 1}


@pytest.mark.parametrize("rel", ["openai-agents/items.json", "openai-agents/items.jsonl"])
def test_openai_agents_items(mem: Client, tmp_path: Path, rel: str) -> None:
    source, records = _import(mem, _write(tmp_path, rel))
    assert source["format"] == "openai-agents"
    assert _kinds(records) == ["user", "assistant", "tool", "tool", "assistant"]
    calls = records[1].tool_calls
    assert [(c.id, c.arguments["city"]) for c in calls] == [
        ("call_a", "Tokyo"),
        ("call_b", "Osaka"),
    ]
    assert records[1].meta["thinking"] == ["Call the weather tool for both cities."]
    assert records[-1].text == OPENAI_AGENTS_ITEMS[-1]["content"][0]["text"]
    assert source["skipped"]["web_search_call item"] == 1


def test_pydantic_ai_messages(mem: Client, tmp_path: Path) -> None:
    source, records = _import(mem, _write(tmp_path, "pydantic-ai/messages.json"))
    assert source["format"] == "pydantic-ai"
    assert source["recorded_model"] == "gpt-4o" and source["recorded_provider"] == "openai"
    assert _kinds(records) == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [c.id for c in records[2].tool_calls] == ["call_1", "call_2"]
    assert records[2].tool_calls[1].arguments == {"expression": 4}  # a JSON string
    assert json.loads(records[3].text) == {"temp_c": 21, "sky": "clear"}
    retry = records[4]
    assert retry.ok is False and retry.tool_name == "calc"
    assert retry.text.startswith("1 validation errors:")
    assert retry.text.endswith("Fix the errors and try again.")
    assert records[5].meta["thinking"] == ["The expression must be a string."]
    assert records[-1].text == PYDANTIC_AI_MESSAGES[-1]["parts"][0]["content"]


def test_unmapped_records_are_kept_verbatim_on_the_session(mem: Client) -> None:
    path = TRANSCRIPTS / "claude-code" / "entire-graph_parallel-hooks-attachments_v2.1.210.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    result = seed_from_jsonl(mem, path)
    assert result.ok and result.source is not None
    seeded = mem.open(result.session_id or "").settings.metadata["seeded_from_jsonl"]
    unmapped = seeded["unmapped"]
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    for entry in unmapped:
        assert lines[entry["line"] - 1] == entry["record"]  # the record as the file has it
    kinds: dict[str, int] = {}
    for entry in unmapped:
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    skipped = result.source["skipped"]
    assert all(skipped[k] == n for k, n in kinds.items())
    hooks = sum(1 for r in lines if (r.get("attachment") or {}).get("type") == "hook_success")
    assert kinds["attachment hook_success"] == hooks


def test_lenient_import_lists_what_it_did_not_import_by_record_type(tmp_path: Path) -> None:
    path = TRANSCRIPTS / "claude-code" / "synthetic_ccl_edge-cases-malformed.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    ws = tmp_path / "ws"
    ws.mkdir()
    args = ["--store", str(tmp_path / "x.db"), "--workspace", str(ws), "import", "--lenient"]
    done = CliRunner().invoke(cli, [*args, str(path)])
    assert done.exit_code == 0, done.output
    assert "PARTIAL: 6 problem(s) skipped" in done.stdout
    assert "not imported as messages, by record type" in done.stdout
    counts = {
        line.split(None, 1)[1]: int(line.split(None, 1)[0])
        for line in done.stdout.splitlines()
        if line.startswith("  ") and line.strip()[:1].isdigit()
    }
    assert counts["unreadable"] == 6


DATA = Path(__file__).parent / "data"  # written by the libraries themselves (data/generate.py)


def test_a_pydantic_ai_dump_written_by_pydantic_ai(mem: Client) -> None:
    source, records = _import(mem, DATA / "pydantic-ai_2.68_function-model.json")
    assert source["format"] == "pydantic-ai"
    assert _kinds(records) == [
        "system",  # the request's instructions
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    # What pydantic-ai sends for each return (ToolReturnPart.model_response_str()).
    tools = [r for r in records if r.kind == "tool"]
    assert [r.text for r in tools] == [
        '{"temp_c":21,"sky":"clear"}',
        '{"error":[{"type":"string_type","loc":["expression"],"msg":"Input should be a valid '
        'string","input":4}]}',
        "4",
    ]
    assert [r.ok for r in tools] == [True, False, True]  # the second was retried
    assert records[6].meta["thinking"] == ["must be a string"]


def test_openai_agents_items_written_by_openai_agents(mem: Client) -> None:
    source, records = _import(mem, DATA / "openai-agents_0.24_scripted-model.json")
    assert source["format"] == "openai-agents"
    assert _kinds(records) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c.id for c in records[1].tool_calls] == ["call_a", "call_b"]
    assert [r.text for r in records[2:4]] == ["Sunny, 22C", "Rain, 18C"]
    assert records[-1].text == "Tokyo is sunny; Osaka has rain."


def test_openhands_v1_kinds_the_real_file_lacks(mem: Client, tmp_path: Path) -> None:
    source, records = _import(mem, _write(tmp_path, "openhands/v1-events.json"))
    assert source["format"] == "openhands"
    assert _kinds(records) == ["system", "user", "assistant", "tool", "summary"]
    assert records[0].text == "You are OpenHands agent."
    assert records[1].text == "run the tests\n<EXTRA_INFO>use pytest -q</EXTRA_INFO>"
    assert records[1].meta["source"]["activated_skills"] == ["testing"]
    assert records[2].text == "Running them."
    assert records[2].tool_calls[0].arguments == {"command": "pytest -q"}
    assert records[3].ok is False and records[3].text == "Command timed out"
    assert records[4].text == "The tests were run once and timed out."
    assert source["skipped"] == {"ConversationStateUpdateEvent": 1}


def test_lenient_import_keeps_the_text_of_lines_it_could_not_read(
    mem: Client, tmp_path: Path
) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n42\n{"role": "assistant", "conte')
    result = seed_from_jsonl(mem, path, validate=False)
    assert result.ok and result.partial
    unmapped = mem.open(result.session_id or "").settings.metadata["seeded_from_jsonl"][
        "unmapped"
    ]
    assert unmapped == [
        {"line": 2, "kind": "unreadable", "record": 42},
        {"line": 3, "kind": "unreadable", "record": '{"role": "assistant", "conte'},
    ]


def test_gemini_jsonl_set_of_messages_replaces_the_list(mem: Client, tmp_path: Path) -> None:
    # A rewind (or a compression) rewrites the whole list with {"$set": {"messages": [...]}};
    # what was written before it is no longer the conversation.
    rows = [
        {"sessionId": "g-2", "projectHash": "cd" * 32, "startTime": "t", "lastUpdated": "t"},
        {"id": "u1", "type": "user", "content": [{"text": "first try"}]},
        {"id": "m1", "type": "gemini", "content": "an answer that was rewound"},
        {"$set": {"messages": [{"id": "u1", "type": "user", "content": [{"text": "again"}]}]}},
        {"id": "m2", "type": "gemini", "content": "the answer kept"},
    ]
    path = tmp_path / "rewound.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source, records = _import(mem, path)
    assert source["format"] == "gemini-cli"
    assert [(r.kind, r.text) for r in records] == [
        ("user", "again"),
        ("assistant", "the answer kept"),
    ]
