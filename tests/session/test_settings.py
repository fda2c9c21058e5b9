"""``Session.set_metadata`` and ``SessionHost.get``: the public ways the service layers use."""

from __future__ import annotations

import pytest

from plait import Client, InvalidArgumentError, SessionNotFoundError
from plait.session import SessionHost


def test_set_metadata_sets_replaces_and_removes(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    version = s.version
    s.set_metadata("provenance", {"from": "test"})
    assert s.metadata["provenance"] == {"from": "test"} and s.version > version
    s.set_metadata("provenance", ["replaced"])
    assert client.sessions.get(s.id).metadata["provenance"] == ["replaced"]
    assert "provenance" not in s.fork().metadata  # unlike settings, not inherited
    s.set_metadata("provenance", None)
    assert "provenance" not in s.metadata


def test_set_metadata_refuses_bad_input_and_writes_nothing(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    version = s.version
    for key in ("", "  ", "settings"):
        with pytest.raises(InvalidArgumentError):
            s.set_metadata(key, 1)
    with pytest.raises(InvalidArgumentError):
        s.set_metadata("bad", {"x": object()})  # type: ignore[dict-item]
    assert s.version == version
    with pytest.raises(SessionNotFoundError):
        client.session.set_metadata("k", 1)  # never stored


def test_a_host_hands_out_one_handle_per_id(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    host: SessionHost = client
    assert host.get(s.id) is s
    with pytest.raises(SessionNotFoundError):
        host.get("0190c0de-0000-7000-8000-000000000000")


def test_log_event_compare_and_set_and_the_lock_verbs(client: Client) -> None:
    from plait.errors import StaleSessionError

    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.refresh()
    head = s.version
    first = s.log_event("decided", {"n": 1}, expect_version=head)
    assert first.name == "decided"
    with pytest.raises(StaleSessionError):
        s.log_event("decided", {"n": 2}, expect_version=head)  # the head moved
    assert [r.name for r in s.records if r.kind == "event"] == ["decided"]  # type: ignore[attr-defined]
    assert s.holds_lock  # the write took it
    s.release()
    assert not s.holds_lock
    s.acquire()
    assert s.holds_lock and not s.locked


def test_settings_that_are_not_an_object_read_as_none_and_are_replaced(client: Client) -> None:
    """Settings stored as something else (an import's metadata) are overwritten, not a crash."""
    s = client.sessions.create([{"role": "user", "content": "hi"}], metadata={"settings": "x"})
    assert s.settings == {}
    s.set_settings(tool_format="text")
    assert client.sessions.get(s.id).settings == {"tool_format": "text"}


def test_a_workspace_policy_that_is_not_an_object_is_replaced(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.set_settings(workspace_policy=5)
    s.set_workspace_policy({"default_mount_mode": "read_only"})
    assert s.settings["workspace_policy"] == {"default_mount_mode": "read_only"}
