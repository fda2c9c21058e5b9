"""Helpers for the importer tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from plait import Client
from plait.interop import SeedResult, seed_from_jsonl
from plait.records import Message
from plait.views import full_history


def seed(client: Client, path: Path, **options: object) -> tuple[SeedResult, list[Message]]:
    """Seed a session from ``path``; return the result and every message stored.

    Every message: the context an agent added (``added``) too, as a request sends it.
    """
    result = seed_from_jsonl(client, path, **options)  # type: ignore[arg-type]
    assert result.ok, result.error
    assert result.session_id is not None
    stored = client.open(result.session_id).transcript.records
    messages = full_history(stored, context=True)
    said = client.sessions.history_of(result.session_id, full=True)
    assert said == [m for m in messages if m.added is None]
    assert result.messages_loaded == len(messages) + sum(
        1 for r in client.open(result.session_id).transcript.records if r.kind == "system"
    )
    return result, messages


def roles(messages: list[Message]) -> Counter[str]:
    """How many messages of each role."""
    return Counter(m.role for m in messages)


def assert_paired(messages: list[Message]) -> None:
    """Every tool result follows the call it answers, and names that call's tool."""
    calls: dict[str, str] = {}
    for m in messages:
        for call in m.tool_calls:
            calls[call.id] = call.name
        if m.role == "tool":
            assert m.tool_call_id in calls, f"result for unknown call {m.tool_call_id}"
            assert m.tool_name == calls[m.tool_call_id]
            del calls[m.tool_call_id]
