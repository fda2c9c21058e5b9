"""Codex replies carry their model call's usage, so ``plait stats`` counts them.

For every Codex rollout in ``../shared/fixtures/transcripts/codex/`` a reference
parser below reads the ``token_count`` events straight from the JSONL: each new
running total is one model call, its ``last_token_usage`` what that call used.
The import's stats must add up to the same replies and tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.interop import seed_from_jsonl
from plait.records import AssistantRecord

from .conftest import TRANSCRIPTS


@dataclass
class Calls:
    """What the rollout's own counts say: model calls and the tokens they used."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    last_input: int | None = None  # the prompt size of the last call


def _files() -> list[Any]:
    folder = TRANSCRIPTS / "codex"
    if not folder.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{folder} not found"))]
    return [pytest.param(p, id=p.name) for p in sorted(folder.iterdir()) if p.is_file()]


def _n(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and value >= 0 else 0


def _reference(path: Path) -> Calls:
    out = Calls()
    previous: Any = None
    for raw in path.read_bytes().splitlines():
        try:
            row = json.loads(raw)
        except ValueError:
            continue
        payload = row.get("payload") if isinstance(row, dict) else None
        if row.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        info = payload.get("info") if payload.get("type") == "token_count" else None
        if not isinstance(info, dict):
            continue
        total = info.get("total_token_usage")
        if total == previous:
            continue  # the running total did not move: the same count written again
        previous = total
        last = info.get("last_token_usage") or {}
        counts = (_n(last, "input_tokens"), _n(last, "output_tokens"))
        cached = _n(last, "cached_input_tokens")
        if not any(counts) and not cached:
            continue  # a call that counted nothing
        out.calls += 1
        out.input_tokens += counts[0]
        out.output_tokens += counts[1]
        out.cached_tokens += cached
        out.last_input = counts[0]
    return out


@pytest.mark.parametrize("path", _files())
def test_codex_stats_count_each_model_call(mem: Client, path: Path) -> None:
    expected = _reference(path)
    result = seed_from_jsonl(mem, path, validate=False)
    assert result.ok, result.error
    sid = result.session_id or ""
    stats = mem.session_stats([sid])[0]
    assert stats.replies == expected.calls
    assert stats.input_tokens == expected.input_tokens
    assert stats.output_tokens == expected.output_tokens
    assert stats.cached_tokens == expected.cached_tokens
    replies = [
        r for r in mem.open(sid).transcript.records if isinstance(r, AssistantRecord)
    ]
    priced = [r for r in replies if isinstance(r.meta.get("usage"), dict)]
    assert len(priced) == expected.calls
    if expected.last_input is not None:
        # The last call's prompt size is what the context report measures the window by.
        usage = priced[-1].meta["usage"]
        assert isinstance(usage, dict) and usage["input_tokens"] == expected.last_input
        if priced[-1].seq == max(r.seq for r in replies):
            report = mem.open(sid).context()
            assert report is not None and report.from_provider
