"""Session's public face: the seeds' verbs at the top, five parts for the rest (D400)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError, NothingToDoError, SessionNotFoundError
from plait.session import (
    SessionLive,
    SessionScratchpad,
    SessionSettings,
    SessionTranscript,
    SessionWorkspace,
)

PARTS = {
    "transcript": SessionTranscript,
    "workspace": SessionWorkspace,
    "settings": SessionSettings,
    "scratchpad": SessionScratchpad,
    "live": SessionLive,
}


def _public(cls: type) -> list[str]:
    return [n for n in dir(cls) if not n.startswith("_")]


def test_session_has_at_most_45_public_members() -> None:
    names = _public(Session)
    assert len(names) <= 45, sorted(names)
    for part in PARTS:
        assert part in names


def test_the_old_names_are_gone_without_aliases() -> None:
    gone = {
        "erase", "records", "host", "store", "head", "export_markdown", "set_scratchpad",
        "clear_scratchpad", "scratchpad_history", "set_settings", "rewind", "undo_rewind",
        "workspace_checkpoint", "restore_workspace", "diff_files", "acquire", "release",
        "version", "refresh", "subscribe", "running", "metadata", "length", "tail",
    }
    assert not gone & set(_public(Session))


def test_each_part_is_its_own_object_holding_the_handle(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    for name, cls in PARTS.items():
        part = getattr(s, name)
        assert isinstance(part, cls)
        assert part.__doc__
        for member in _public(cls):
            if not isinstance(part, Mapping) or member not in _public(Mapping):
                assert getattr(cls, member).__doc__, f"{cls.__name__}.{member}"


def test_transcript_reads_appends_compacts_and_rewinds(client: Client) -> None:
    s = client.sessions.new()
    t = s.transcript
    assert not t.stored and t.status == "open" and not t.closed and t.snapshot() is None
    s.inject({"role": "system", "content": "be brief"})
    t.inject_many([
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
        {"role": "assistant", "content": "four"},
    ])
    event = t.log_event("noted", {"k": 1})
    assert event.name == "noted"
    assert t.stored and t.length == 5 and t.shown_length == 5 and len(s) == 5
    assert [r.kind for r in t.records][-1] == "event"
    assert [r.text for r in t.tail(2) if r.kind != "event"] == ["three", "four"]
    assert list(t.iter_records(batch=2)) == t.records
    assert [m.text for m in t.iter_history(batch=1)] == [m.text for m in s.history()]
    assert t.request_messages()[0].role == "system"
    assert t.created_at <= t.updated_at
    snap = t.snapshot()
    assert snap is not None
    assert t.ancestry().parent_id is None and t.branched_at is None
    assert [box.id for box in t.lineage()] == [s.id]
    assert t.compact_preview(keep_last=1) is not None
    assert not t.compaction_due("gpt-4o")
    hidden = t.rewind(2)
    assert t.length == 2 and t.hidden_heads() == [hidden]
    t.undo_rewind()
    assert t.length == 5
    branch = s.fork_at(3)
    assert branch.transcript.branched_at == 3
    s.close("done")
    assert t.closed and t.status == "closed"
    t.reopen()
    assert not s.transcript.closed


def test_transcript_uncompact_undoes_a_compaction(client: Client) -> None:
    import asyncio

    s = client.sessions.create(
        [{"role": "user", "content": f"m{i}"} for i in range(6)]
    )
    assert asyncio.run(s.compact(keep_last=2)) is not None
    summary = s.transcript.uncompact()
    assert summary.kind == "summary"
    with pytest.raises(NothingToDoError):
        s.transcript.uncompact()


def test_workspace_names_the_folder_and_keeps_roots_and_checkpoints(
    client: Client, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", str(folder))
    w = s.workspace
    assert w.name == client.workspace
    assert w.anchor is None and w.set_anchor(str(folder)) and s.workspace.anchor == str(folder)
    with pytest.raises(InvalidArgumentError):
        w.set_anchor("")
    assert w.policy["default_mount_mode"]
    assert w.set_policy({"default_mount_mode": "read_only"})
    assert s.workspace.policy["default_mount_mode"] == "read_only"
    (tmp_path / "libs").mkdir()
    assert w.add_root(str(tmp_path / "libs")).ok
    assert [r["mounted_at"] for r in w.list_roots()["additional"]] == ["libs"]  # type: ignore[index,union-attr]
    assert w.remove_root("libs").ok
    assert Path(w.tool_context().root).resolve() == folder.resolve()
    assert w.sandbox_policy == s.workspace.sandbox_policy
    (folder / "a.txt").write_text("a")
    assert isinstance(w.checkpoint(), str)
    with pytest.raises(NothingToDoError):
        w.restore(1, tmp_path / "elsewhere")  # no tool call recorded the files
    with pytest.raises(NothingToDoError):
        w.diff(0, 1)
    w.use_checkpoints(False)
    assert w.checkpoint() is None
    with pytest.raises(InvalidArgumentError):
        w.use_checkpoints("no")  # type: ignore[arg-type]


def test_settings_is_a_read_only_mapping_with_its_verbs(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.settings.set(mode="fast")
    settings = s.settings
    assert isinstance(settings, Mapping)
    assert settings["mode"] == "fast" and settings.get("nope") is None and "mode" in settings
    assert dict(settings) == {"mode": "fast"} and settings == {"mode": "fast"}
    with pytest.raises(TypeError):
        settings["mode"] = "slow"  # type: ignore[index]
    settings.set(mode="slow", extra=1)
    assert settings["mode"] == "slow"  # the setter refreshes the mapping it was called on
    assert s.settings == {"mode": "slow", "extra": 1}
    s.settings.set(extra=None)
    assert "extra" not in s.settings and s.fork().settings == {"mode": "slow"}
    s.settings.set_model_settings({"temperature": 0.5})
    assert s.settings.model_settings.temperature == 0.5
    s.settings.set_model_settings(None)
    assert s.settings.model_settings.temperature is None
    assert s.settings.model_info("gpt-4o").window > 0
    s.settings.set_metadata("owner", "ana")
    assert s.settings.metadata["owner"] == "ana"
    s.settings.use_self_compaction(False)
    assert s.settings.self_compaction_choice is False and not s.settings.self_compaction


def test_scratchpad_is_called_and_has_set_clear_history(client: Client) -> None:
    fresh = client.sessions.new()
    with pytest.raises(SessionNotFoundError):
        fresh.scratchpad()
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    assert s.scratchpad() is None
    first = s.scratchpad.set({"todo": ["a"]}, source="agent", reason="plan")
    assert first.ok and s.scratchpad() == {"todo": ["a"]}
    assert s.scratchpad.clear(reason="done").scratchpad is None
    assert s.scratchpad() is None
    assert [(h.scratchpad, h.reason) for h in s.scratchpad.history()] == [
        ({"todo": ["a"]}, "plan"),
        (None, "done"),
    ]
    with pytest.raises(InvalidArgumentError):
        s.scratchpad.set(None)  # type: ignore[arg-type]


def test_live_tells_runs_locks_and_versions(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    live = s.live
    assert not live.running
    seen: list[object] = []
    stop = live.subscribe(seen.append)
    stop()
    with pytest.raises(InvalidArgumentError):
        live.subscribe("not callable")  # type: ignore[arg-type]
    before, stamp = live.version, live.stamp()
    s.inject({"role": "assistant", "content": "hello"})
    assert s.live.version > before and s.live.stamp() != stamp
    assert live.refresh() is s
    live.acquire()
    assert live.holds_lock and not s.locked
    live.release()
    assert not s.live.holds_lock
    assert client.sessions.new().live.version == 0


def test_export_takes_a_format(client: Client, tmp_path: Path) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    md = Path(s.export(tmp_path / "a.md", format="markdown")).read_text(encoding="utf-8")
    assert "hi" in md and "<html" not in md
    page = Path(s.export(tmp_path / "a.html")).read_text(encoding="utf-8")
    assert "<html" in page.lower()
    with pytest.raises(InvalidArgumentError, match="format"):
        s.export(tmp_path / "a.txt", format="txt")
