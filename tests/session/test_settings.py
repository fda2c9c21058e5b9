"""``settings.set_metadata`` and ``SessionHost.get``: the public ways the service layers use."""

from __future__ import annotations

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.records import EventRecord
from plait.session import SessionHost


def test_set_metadata_sets_replaces_and_removes(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    version = s.live.version
    s.settings.set_metadata("provenance", {"from": "test"})
    assert s.settings.metadata["provenance"] == {"from": "test"} and s.live.version > version
    s.settings.set_metadata("provenance", ["replaced"])
    assert client.open(s.id).settings.metadata["provenance"] == ["replaced"]
    assert "provenance" not in s.fork().settings.metadata  # unlike settings, not inherited
    s.settings.set_metadata("provenance", None)
    assert "provenance" not in s.settings.metadata


def test_set_metadata_refuses_bad_input_and_writes_nothing(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    version = s.live.version
    for key in ("", "  ", "settings"):
        with pytest.raises(InvalidArgumentError):
            s.settings.set_metadata(key, 1)
    with pytest.raises(InvalidArgumentError):
        s.settings.set_metadata("bad", {"x": object()})  # type: ignore[dict-item]
    assert s.live.version == version
    with pytest.raises(SessionNotFoundError):
        client.session.settings.set_metadata("k", 1)  # never stored


def test_a_host_hands_out_one_handle_per_id(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    host: SessionHost = client.host
    assert host.get(s.id) is s
    with pytest.raises(SessionNotFoundError):
        host.get("0190c0de-0000-7000-8000-000000000000")


def test_log_event_compare_and_set_and_the_lock_verbs(client: Client) -> None:
    from plait.errors import StaleSessionError

    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.live.refresh()
    head = s.live.version
    first = s.transcript.log_event("decided", {"n": 1}, expect_version=head)
    assert first.name == "decided"
    with pytest.raises(StaleSessionError):
        s.transcript.log_event("decided", {"n": 2}, expect_version=head)  # the head moved
    assert [r.name for r in s.transcript.records if r.kind == "event"] == ["decided"]  # type: ignore[attr-defined]
    assert s.live.holds_lock  # the write took it
    s.live.release()
    assert not s.live.holds_lock
    s.live.acquire()
    assert s.live.holds_lock and not s.locked


def test_settings_that_are_not_an_object_read_as_none_and_are_replaced(client: Client) -> None:
    """Settings stored as something else (an import's metadata) are overwritten, not a crash."""
    s = client.sessions.create([{"role": "user", "content": "hi"}], metadata={"settings": "x"})
    assert s.settings == {}
    s.settings.set(tool_format="text")
    assert client.open(s.id).settings == {"tool_format": "text"}


def test_a_workspace_policy_that_is_not_an_object_is_replaced(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.settings.set(workspace_policy=5)
    s.workspace.set_policy({"default_mount_mode": "read_only"})
    assert s.settings["workspace_policy"] == {"default_mount_mode": "read_only"}


def test_a_callers_sequences_are_kept_as_json_and_not_shared(client: Client) -> None:
    """Any sequence or mapping the caller holds is kept as plain JSON, copied when written."""
    s = client.sessions.create([{"role": "user", "content": "hi"}], metadata={"tags": ("a",)})
    tags = ["x", "y"]
    s.settings.set_metadata("tags", tags)
    s.settings.set(tool_names=("read", "write"))
    pad = {"todo": ["one"]}
    s.scratchpad.set(pad, metadata={"seen": ("now",)})
    s.transcript.log_event("noted", {"ids": (1, 2)})
    s.close({"reason": ("done",)})
    tags.append("z")  # the caller's objects change after the writes
    pad["todo"].append("two")
    again = client.open(s.id)
    assert again.settings.metadata["tags"] == ["x", "y"]
    assert s.settings.metadata["tags"] == ["x", "y"]  # the writer's own handle too
    assert again.settings["tool_names"] == ["read", "write"]
    assert again.scratchpad() == {"todo": ["one"]}
    assert again.scratchpad.history()[-1].metadata == {"seen": ["now"]}
    events = [r for r in again.transcript.records if isinstance(r, EventRecord)]
    noted = [r for r in events if r.name == "noted"]
    assert [r.data for r in noted] == [{"ids": [1, 2]}]
    assert again.settings.metadata["closed"]["status"] == {"reason": ["done"]}  # type: ignore[index,call-overload]
