"""Seed 000 steps 5-7 and its troubleshooting table: targets, lazy handles, shared handles."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError, NoSandboxError, SandboxClosedError
from plait.sandbox import Sandbox
from plait.session._part import head_of


def test_step5_to_local_sets_the_target_and_opens_nothing() -> None:
    user = Session.from_user_message("List files in the sandbox.")
    assert user.to("local") is user  # chainable
    assert user.sandbox_backend == "local"
    assert user.sandbox is None


def test_step6_the_context_manager_opens_and_closes_the_handle() -> None:
    user = Session.from_user_message("List files in the sandbox.").to("local")
    with user:
        sandbox = user.require_sandbox()
        assert sandbox.backend.name == "local"
        assert user.sandbox is sandbox
        assert not sandbox.closed
        root = sandbox.root
        (root / "note.txt").write_text("hi")  # exercise 3: write inside the block
    assert user.sandbox is None
    assert sandbox.closed
    assert not root.exists()  # the managed workspace was deleted on close


def test_step7_fork_shares_an_open_handle() -> None:
    source = Session.from_user_message("inspect").to("local")
    with source:
        source_sandbox = source.require_sandbox()
        forked = source.fork()
        assert source.sandbox is source_sandbox
        assert forked.sandbox is source_sandbox
        assert source_sandbox.refcount == 2
        assert forked.sandbox_backend == "local"
    # The sandbox closes only when every owner has released it.
    assert not source_sandbox.closed and source_sandbox.refcount == 1
    forked.close_sandbox()
    assert source_sandbox.closed


def test_detach_merge_share_and_retarget_gives_a_branch_its_own_runtime(tmp_path: Path) -> None:
    base = Session.from_user_message("x").to("local")
    with base:
        handle = base.require_sandbox()
        detached = base.detach()
        other = base.fork()
        merged = base.merge(other)
        assert detached.sandbox is handle and merged.sandbox is handle
        assert handle.refcount == 4
        other.to("local", spec=str(tmp_path))  # retarget: its own runtime from now on
        assert other.sandbox is None and handle.refcount == 3
        assert other.require_sandbox().root == tmp_path.resolve()
    for s in (detached, merged, other):
        s.close_sandbox()
    assert handle.closed


def test_a_folder_given_as_spec_is_used_and_never_deleted(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("important")
    s = Session.from_user_message("x").to("local", spec=str(tmp_path))
    with s:
        assert s.require_sandbox().root == tmp_path.resolve()
        assert not s.require_sandbox().managed
    assert (tmp_path / "keep.txt").read_text() == "important"


def test_troubleshooting_errors() -> None:
    bare = Session.from_user_message("no target")
    with pytest.raises(NoSandboxError, match="no sandbox to take"):
        bare.require_sandbox()
    with pytest.raises(RuntimeError), bare:  # the seed's RuntimeError
        pass
    s = Session.from_user_message("x").to("local")
    handle = s.require_sandbox()
    other = Session.from_user_message("y").with_sandbox(handle)
    assert other.sandbox is handle and handle.refcount == 2
    s.close_sandbox()
    other.close_sandbox()
    assert handle.closed
    stale = Session.from_user_message("z")
    head_of(stale).binding.hold(handle)  # bound to a handle someone else closed
    with pytest.raises(SandboxClosedError, match="session sandbox is closed"):
        stale.require_sandbox()
    with pytest.raises(SandboxClosedError):
        Session.from_user_message("w").with_sandbox(handle)
    with pytest.raises(InvalidArgumentError):
        s.to("mars")
    missing = Session.from_user_message("v").to("local", spec="/nonexistent/x")
    with pytest.raises(InvalidArgumentError):
        missing.require_sandbox()


def test_the_target_is_stored_and_inherited(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Client(tmp_path, store=path) as client:
        s = client.sessions.create([{"role": "user", "content": "x"}]).to("local")
        sid = s.id
        assert s.fork().sandbox_backend == "local"
    with Client(tmp_path, store=path) as client:
        again = client.open(sid)
        assert again.sandbox_backend == "local" and again.sandbox is None
        assert isinstance(again.require_sandbox(), Sandbox)
        again.close_sandbox()
