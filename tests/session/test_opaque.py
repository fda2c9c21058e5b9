"""Opaque items: provider items plait does not model, kept verbatim and shown as what they are."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from plait import Client
from plait.errors import InvalidMessageError
from plait.interop import to_jsonl, to_openai_messages
from plait.providers import ScriptedProvider
from plait.records import OpaqueRecord

REASONING: dict[str, Any] = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "thinking about it"}],
    "encrypted_content": "gAAAA" + "x" * 40,
}


def _conversation(client: Client) -> Any:
    s = client.open("opaque")
    s.inject({"role": "user", "content": "hello"})
    s.inject({"role": "opaque", "format": "openai-agents", "item": REASONING, "meta": {"i": 1}})
    s.inject({"role": "assistant", "content": "hi there"})
    return s


def test_an_opaque_item_is_kept_and_returned_verbatim(client: Client) -> None:
    s = _conversation(client)
    again = client.open("opaque")
    items = [r for r in again.transcript.records if isinstance(r, OpaqueRecord)]
    assert len(items) == 1
    assert items[0].format == "openai-agents"
    assert items[0].item == REASONING
    assert dict(items[0].meta) == {"i": 1}
    assert s.transcript.length == 3  # a provider item is one position, as fork_at counts
    assert [r.kind for r in s.transcript.tail(2)] == ["opaque", "assistant"]


def test_history_and_other_agents_formats_leave_it_out(client: Client) -> None:
    s = _conversation(client)
    for view in (s.history(), s.history(full=True)):
        assert [(m.role, m.text) for m in view] == [("user", "hello"), ("assistant", "hi there")]
    assert all(m["role"] != "opaque" and m.get("content") != "" for m in to_openai_messages(s))


def test_exports_show_what_it_is_never_an_empty_message(client: Client, tmp_path: Any) -> None:
    s = _conversation(client)
    md = s.export(tmp_path / "t.md", format="markdown")
    with open(md, encoding="utf-8") as f:
        text = f.read()
    assert "provider item openai-agents reasoning" in text
    assert "### #1 opaque" not in text
    assert "2 messages, 1 provider item" in text
    with open(s.export(tmp_path / "t.html"), encoding="utf-8") as f:
        page = f.read()
    assert "provider item openai-agents reasoning" in page
    assert 'class="rec opaque"' not in page


def test_plait_jsonl_round_trips_it(client: Client, tmp_path: Any) -> None:
    s = _conversation(client)
    path = tmp_path / "s.jsonl"
    path.write_text(to_jsonl(s), encoding="utf-8")
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()[1:]]
    assert lines[1] == {"role": "opaque", "format": "openai-agents", "item": REASONING,
                        "meta": {"i": 1}}
    from plait.interop import seed_from_jsonl

    result = seed_from_jsonl(client, path)
    assert result.ok and result.session_id is not None
    copy = client.open(result.session_id)
    items = [r for r in copy.transcript.records if isinstance(r, OpaqueRecord)]
    assert [(r.format, r.item) for r in items] == [("openai-agents", REASONING)]


def test_the_context_report_counts_it_as_provider_items(client: Client) -> None:
    s = _conversation(client)
    report = s.context(model="gpt-4o-mini")
    shares = {share.name: share for share in report.shares}
    assert shares["Provider items"].items == 1
    assert shares["Provider items"].tokens > 10  # the item's JSON, as a reader would be sent


def test_only_a_provider_that_reads_its_format_is_sent_it(client: Client) -> None:
    s = _conversation(client)
    assert all(m.role != "opaque" for m in s.transcript.request_messages())
    plain = ScriptedProvider(["ok"])
    asyncio.run(s.prompt("next", provider=plain, tools=[]))
    assert all(m.role != "opaque" for m in plain.requests[0].messages)
    reader = ScriptedProvider(["ok"], reads_formats={"openai-agents"})
    asyncio.run(s.prompt("again", provider=reader, tools=[]))
    sent = [m for m in reader.requests[0].messages if m.role == "opaque"]
    assert [(m.format, m.item) for m in sent] == [("openai-agents", REASONING)]
    assert sent[0].to_dict() == {"role": "opaque", "format": "openai-agents", "item": REASONING}


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "opaque", "item": {}},
        {"role": "opaque", "format": "", "item": {}},
        {"role": "opaque", "format": "x\n", "item": {}},
        {"role": "opaque", "format": "x", "item": [1, 2]},
        {"role": "opaque", "format": "x", "item": {"a": object()}},
        {"role": "opaque", "format": "x", "item": {}, "content": "text"},
        {"role": "user", "content": "hi", "item": {}},
    ],
)
def test_a_malformed_opaque_item_is_a_typed_error_and_nothing_is_written(
    client: Client, bad: dict[str, Any]
) -> None:
    s = client.open("bad-opaque")
    s.inject({"role": "user", "content": "first"})
    with pytest.raises(InvalidMessageError):
        s.transcript.inject_many([{"role": "user", "content": "kept out"}, bad])
    assert s.transcript.length == 1
