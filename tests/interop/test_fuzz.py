"""Fuzzing every importer: random and mutated input gives typed plait errors, never others.

Mutations start from real sample lines (cut, flipped bytes, dropped keys, values of
the wrong type, lines dropped, doubled or swapped), run with ``validate`` on and off,
under the format's own importer and under ``auto``. Whatever happens, the only
exceptions allowed are :class:`plait.errors.PlaitError` subclasses, and a failed
import stores nothing.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import Client
from plait.errors import PlaitError
from plait.interop import FORMATS, seed_from_jsonl
from plait.store import MemoryStore

from ._handmade import FILES
from .conftest import TRANSCRIPTS

# Small samples of each format (whole files are fuzzed line by line).
SAMPLES: dict[str, list[str]] = {
    "claude-code": [
        "claude-code/spotter_short_v2.1.38.jsonl",
        "claude-code/synthetic_ccl_rewind-then-compact.jsonl",
        "claude-code/synthetic_simonw_sample_session.jsonl",
        "claude-code/synthetic_ccl_edge-cases-malformed.jsonl",
    ],
    "codex": [
        "codex/synthetic_agenthistory_compaction.jsonl",
        "codex/agenthistory_redacted-exec_v0.135.0.jsonl",
        "codex/synthetic_codemie_failed-shell-call.jsonl",
    ],
    "openai": [
        "openai-chat/openhands-sdk_nonfncall-messages_deepseek-chat.json",
        "openai-chat/openhands-sdk_litellm-completion-log.json",
    ],
    "swe-agent": ["swe-agent/swe-agent_function_calling_simple.traj.json"],
    "openhands": [
        "openhands/openhands-v0_wrong_initial_state.json",
        "openhands/openhands-sdk-v1_openagentsafety-qr-code_gpt-4o.json",
    ],
    "gemini-cli": ["gemini-cli/synthetic_agentsessions_jsonl-v0.40.jsonl"],
    "openai-agents": [],  # no real file: the hand-written ones below
    "pydantic-ai": [],
    "plait": [],  # written below from a session, so the fuzz needs no fixture for it
}
# Hand-written samples (tests/interop/_handmade.py) per format, fuzzed like the real ones.
HANDMADE: dict[str, list[str]] = {
    "codex": ["codex/event-prompts.jsonl", "codex/legacy.jsonl"],
    "gemini-cli": ["gemini-cli/recording.jsonl"],
    "openai-agents": ["openai-agents/items.json", "openai-agents/items.jsonl"],
    "pydantic-ai": ["pydantic-ai/messages.json"],
    "openhands": ["openhands/v1-events.json"],
}
# Samples the libraries wrote (tests/interop/data/generate.py).
LIBRARY_MADE: dict[str, list[str]] = {
    "openai-agents": ["openai-agents_0.24_scripted-model.json"],
    "pydantic-ai": ["pydantic-ai_2.68_function-model.json"],
}

PLAIT_SAMPLE = "\n".join(
    json.dumps(x)
    for x in [
        {"plait": 1, "session_id": "s", "title": "t", "provider": "p", "model": "m"},
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"p": "."}}],
        },
        {"role": "tool", "content": "a", "tool_call_id": "c1", "tool_name": "ls", "ok": False},
        {"role": "summary", "content": "s", "folds": [1, 4], "meta": {"k": [1, 2]}},
        {"role": "assistant", "content": "done"},
    ]
)


def _sample_lines(fmt: str) -> list[list[bytes]]:
    """Each sample of the format, as lines (a JSON document is pretty-printed first)."""
    if fmt == "plait":
        return [[line.encode() for line in PLAIT_SAMPLE.splitlines()]]
    out = []
    for rel in SAMPLES[fmt]:
        data = (TRANSCRIPTS / rel).read_bytes()
        if rel.endswith(".json"):
            data = json.dumps(json.loads(data), indent=1).encode()
        out.append(data.splitlines())
    for rel in HANDMADE.get(fmt, ()):
        out.append(FILES[rel].encode().splitlines())
    for name in LIBRARY_MADE.get(fmt, ()):
        out.append((Path(__file__).parent / "data" / name).read_bytes().splitlines())
    return out


@pytest.fixture(scope="module")
def fuzz_client() -> Iterator[Client]:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"transcript fixtures not found at {TRANSCRIPTS}")
    with tempfile.TemporaryDirectory() as ws, Client(ws, store=MemoryStore()) as c:
        yield c


def _run(client: Client, data: bytes, fmt: str, validate: bool) -> None:
    """Import ``data``; only plait errors may escape, and a failure stores nothing."""
    before = len(client.sessions.list(100, all_workspaces=True))
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(data)
        f.flush()
        try:
            result = seed_from_jsonl(client, f.name, format=fmt, validate=validate)
        except PlaitError:
            result = None
    after = len(client.sessions.list(100, all_workspaces=True))
    if result is None or not result.ok:
        assert after == before, "a failed import stored a session"
    else:
        assert after == before + 1
        stored = client.open(result.session_id or "").transcript.records
        assert len(stored) == result.messages_loaded
        client.sessions.delete(result.session_id or "")  # keep the shared store small


_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, (*path, i))


def _set(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return value


def _mutate_line(data: st.DataObject, line: bytes) -> bytes:
    how = data.draw(st.sampled_from(["cut", "flip", "drop", "retype", "bytes"]), label="how")
    if how == "cut":
        return line[: data.draw(st.integers(0, max(len(line) - 1, 0)), label="at")]
    if how == "flip":
        if not line:
            return b"\xff"
        at = data.draw(st.integers(0, len(line) - 1), label="at")
        return line[:at] + bytes([line[at] ^ data.draw(st.integers(1, 255))]) + line[at + 1 :]
    if how == "bytes":
        return data.draw(st.binary(max_size=40), label="bytes")
    try:
        value = json.loads(line)
    except ValueError:
        return line
    nodes = list(_nodes(value))
    path = data.draw(st.sampled_from(nodes), label="path")
    if how == "drop" and path:
        return json.dumps(_set(value, path, None, delete=True)).encode()
    return json.dumps(_set(value, path, data.draw(_JSON, label="new"), delete=False)).encode()


def _mutate_file(data: st.DataObject, lines: list[bytes]) -> bytes:
    lines = list(lines)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        op = data.draw(st.sampled_from(["line", "line", "line", "delete", "dup", "swap"]))
        if not lines:
            lines.append(b"{}")
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        if op == "line":
            lines[i] = _mutate_line(data, lines[i])
        elif op == "delete":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        else:
            j = data.draw(st.integers(0, len(lines) - 1), label="other")
            lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines) + data.draw(st.sampled_from([b"\n", b""]), label="end")


FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_mutated_samples_give_typed_errors_only(
    fuzz_client: Client, fmt: str, data: st.DataObject
) -> None:
    samples = _sample_lines(fmt)
    lines = data.draw(st.sampled_from(samples), label="sample")
    mutated = _mutate_file(data, lines)
    validate = data.draw(st.booleans(), label="validate")
    chosen = data.draw(st.sampled_from([fmt, "auto"]), label="format")
    _run(fuzz_client, mutated, chosen, validate)


@pytest.mark.parametrize("fmt", ["auto", *FORMATS])
@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.lists(_JSON.map(json.dumps), max_size=5).map(lambda xs: "\n".join(xs).encode()),
        _JSON.map(lambda v: json.dumps(v, indent=1).encode()),
    ),
    validate=st.booleans(),
)
def test_random_input_gives_typed_errors_only(
    fuzz_client: Client, fmt: str, raw: bytes, validate: bool
) -> None:
    _run(fuzz_client, raw, fmt, validate)


@pytest.mark.parametrize("fmt", FORMATS)
def test_unmutated_samples_import(fuzz_client: Client, fmt: str, tmp_path: Path) -> None:
    """The fuzz starts from files that import (the edge-case file only leniently)."""
    for k, lines in enumerate(_sample_lines(fmt)):
        path = tmp_path / f"{k}.jsonl"
        path.write_bytes(b"\n".join(lines))
        result = seed_from_jsonl(fuzz_client, path, format=fmt, validate=False)
        assert result.ok, result.error
