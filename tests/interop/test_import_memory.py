"""What an import holds in memory is what it keeps: records it does not keep cost nothing."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from plait import Client
from plait.interop import _source, seed_from_jsonl


def test_unmapped_records_past_the_kept_limit_are_counted_not_held(
    mem: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_source, "UNMAPPED_MAX_BYTES", 64 << 10, raising=False)
    head = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "hello"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"role": "assistant", "model": "claude-x",
                     "content": [{"type": "text", "text": "hi"}]}},
    ]
    noise = json.dumps({"type": "progress", "data": {"steps": [[], [], [], [], [], []]}})
    path = tmp_path / "session.jsonl"
    with path.open("w") as f:
        f.write("\n".join(json.dumps(r) for r in head) + "\n")
        f.write((noise + "\n") * 100_000)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        result = seed_from_jsonl(mem, path, format="claude-code")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.ok and result.messages_loaded == 2
    source = result.source
    assert source is not None
    assert source["unmapped"] == 100_000 and source["unmapped_not_kept"] > 99_000
    # Held, the 100,000 records cost many times the file; counted, the file and little more.
    assert peak < 3 * size
