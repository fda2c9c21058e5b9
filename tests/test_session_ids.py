"""Ids are keys, not paths: any printable id works, and no file it names lands elsewhere."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Client
from plait._files import default_name
from plait._ids import id_slug, is_session_id
from plait.cli import cli
from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.interop import write_bundle
from plait.store.sqlite import _shardlocks as shard_locks

HOSTILE = [
    "../../etc/passwd",
    "a/b/../c",
    "user/123",
    "/abs/path",
    "tenant:acme:chat-9",
    "a\\b",
    "über/日本 ✓",
    "-starts-with-a-dash",
    "x" * 200,
    "é" * 200,
    "...",
    "~",
]
REFUSED = ["x" * 201, "\x00", "a\x00b", "\n", "new\nline", "tab\t", "", " x", "x ", ".", ".."]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_the_slug_is_a_safe_distinct_file_name() -> None:
    slugs = {id_slug(i) for i in HOSTILE}
    assert len(slugs) == len(HOSTILE)
    for sid in HOSTILE:
        slug = id_slug(sid)
        assert slug and len(slug) <= 57 and slug[0].isalnum()
        assert set(slug) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-")
        assert "/" not in default_name(sid) and ".." not in default_name(sid)
    # Ordinary ids read as they are; ids that differ only in case never share a name.
    assert id_slug("0190f4a0-0000-7000-8000-000000000000").startswith("0190f4a0")
    assert id_slug("incident-debug") == "incident-debug"
    assert id_slug("Incident-Debug") != id_slug("incident-debug")
    # A chosen id can never take another id's hashed slug (those hold a "_", ids kept as
    # they are never do).
    assert id_slug(id_slug("user/123")) != id_slug("user/123")
    assert default_name("0190f4a0-0000-7000-8000-000000000000") == "0190f4a0"


@pytest.mark.parametrize("sid", HOSTILE)
def test_a_hostile_id_is_created_opened_written_and_exported_in_place(
    tmp_path: Path, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, here = tmp_path / "ws", tmp_path / "here"
    ws.mkdir()
    here.mkdir()
    monkeypatch.chdir(here)
    db = tmp_path / "store" / "plait.db"
    db.parent.mkdir()
    before = files_under(tmp_path.parent)
    with Client(ws, store=db) as client:
        assert is_session_id(sid)
        made = client.sessions.create([{"role": "user", "content": "hi"}], session_id=sid)
        assert made.id == sid and client.exists(sid)
        s = client.open(sid)
        assert s is made
        s.inject({"role": "assistant", "content": "hello"})  # takes the writer lock: a file
        assert client.sessions.open(sid).transcript.length == 2
        assert [i.id for i in client.sessions.list()] == [sid]
        fork = s.fork(dst=sid[:190] + "/fork")
        assert fork.parent_session_ids == (sid,)
        page = Path(s.export())
        assert page.parent == ws and page.name == f"plait-{default_name(sid)}.html"
        md = Path(s.export(format="markdown"))
        assert md.parent == ws and md.suffix == ".md"
        bundle = Path(write_bundle(s))
        assert bundle.parent == ws and bundle.name.endswith(".bundle.json")
    runner = CliRunner()
    base = ["--store", str(db), "--workspace", str(ws)]
    for extra in ([], ["--md"], ["--bundle", "local"]):
        done = runner.invoke(cli, [*base, "export", *extra, "--", sid])
        assert done.exit_code == 0, done.output
        written = Path(done.stdout.strip())
        assert written.parent == here and written.name.startswith(f"plait-{id_slug(sid)}")
    shown = runner.invoke(cli, [*base, "sessions", "show", "--", sid])
    assert shown.exit_code == 0 and "hello" in shown.stdout
    # Every new file is where it belongs: the workspace, the working directory, or the
    # store's own folder (the database and its lock files: shards, or named by a hash).
    for new in files_under(tmp_path.parent) - before:
        assert new.parent in (ws, here) or db.parent in new.parents, new
        if new.parent.name == db.name + "-locks":
            assert _is_lock_file(new.name), new.name


def _is_lock_file(name: str) -> bool:
    if shard_locks.AVAILABLE:  # bytes of a shard file: ids name bytes, never paths
        return re.fullmatch(r"writers-[0-9a-f]{2}\.lock", name) is not None
    return re.fullmatch(r"[0-9a-f]{32}\.lock", name) is not None


@pytest.mark.parametrize("bad", REFUSED)
def test_an_id_that_is_no_key_is_a_typed_error(tmp_path: Path, bad: str) -> None:
    with Client(tmp_path, store=tmp_path / "x.db") as client:
        assert not is_session_id(bad) and not client.exists(bad)
        with pytest.raises(InvalidArgumentError):
            client.sessions.create([], session_id=bad)
        with pytest.raises(InvalidArgumentError):
            client.open(bad)
        with pytest.raises(SessionNotFoundError):
            client.sessions.open(bad)
        s = client.open("fine")
        s.inject({"role": "user", "content": "x"})
        with pytest.raises(InvalidArgumentError):
            s.fork(dst=bad)
        assert [i.id for i in client.sessions.list()] == ["fine"]
    assert not [p for p in tmp_path.iterdir() if p.name not in {"x.db", "x.db-locks"}
                and not p.name.startswith("x.db-")]


def test_ids_are_compared_exactly(tmp_path: Path) -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    with Client(tmp_path, store=tmp_path / "x.db") as client:
        for sid in ("user/1", "User/1", "user/1/", composed, decomposed):
            client.sessions.create([{"role": "user", "content": sid}], session_id=sid)
        for sid in ("user/1", "User/1", "user/1/", composed, decomposed):
            assert client.sessions.history_of(sid)[0].text == sid
        assert not client.exists("user")


def test_a_lock_on_a_hostile_id_locks_that_session_only(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with Client(tmp_path, store=db) as client:
        handles = [client.open(sid) for sid in ("../../x", "x", "a/b")]
        for h in handles:
            h.inject({"role": "user", "content": h.id})
        locks = os.listdir(str(db) + "-locks")
        assert 1 <= len(locks) <= 3 and all(_is_lock_file(n) for n in locks)
        assert all(h.live.holds_lock for h in handles)
        assert not (tmp_path.parent / "x").exists() and not (tmp_path / "a").exists()
