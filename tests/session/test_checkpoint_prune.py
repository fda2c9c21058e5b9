"""Pruning workspace checkpoints: what no live session or branch references goes, nothing else."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Client, Session
from plait.cli import cli
from plait.errors import InvalidArgumentError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.session.checkpoints import checkpoints_of, referenced


def _write(cid: str, path: str, content: str) -> Reply:
    call = ToolCall(cid, "write_file", {"path": path, "content": content})
    return Reply(tool_calls=(call,), finish_reason="tool_calls")


def _run(s: Session, *replies: Reply) -> None:
    asyncio.run(s.prompt("go", provider=ScriptedProvider([*replies, Reply("done")])))


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def _every_position_restores(s: Session, tmp: Path) -> list[dict[str, str]]:
    """Restore the session's files at every message into fresh folders; all must be whole."""
    out = []
    for at in range(s.transcript.length + 1):
        target = tmp / f"{s.id}-{at}"
        s.workspace.restore(at, folder=target)
        out.append(_files(target))
    return out


def _parent_and_fork(client: Client, tmp_path: Path) -> tuple[Session, Session]:
    box = tmp_path / "box"
    box.mkdir()
    (box / "keep.txt").write_text("original\n")
    s = client.sessions.create([{"role": "system", "content": "s"}]).to("local", spec=str(box))
    _run(s, _write("c1", "a.txt", "shared\n"), _write("c2", "a.txt", "parent only\n"))
    # messages: system, user, assistant(c1), tool(c1), assistant(c2), tool(c2), assistant
    fork = s.fork_at(4, workspace=tmp_path / "fork")
    _run(fork, _write("c3", "b.txt", "fork only\n"))
    return s, fork


def test_forks_keep_the_checkpoints_they_share_and_the_rest_goes(
    client: Client, tmp_path: Path
) -> None:
    s, fork = _parent_and_fork(client, tmp_path)
    # A checkpoint no tool record names: the files as a person changed them afterwards.
    (tmp_path / "box" / "stray.txt").write_text("never recorded\n")
    stray = s.workspace.checkpoint()
    assert stray is not None and stray not in referenced(client.store)
    parent_files = _every_position_restores(s, tmp_path / "p1")
    fork_files = _every_position_restores(fork, tmp_path / "f1")

    # Every object is recent: the default grace keeps all of them.
    assert client.sessions.prune_checkpoints().removed == 0
    counted = client.sessions.prune_checkpoints(grace=0, dry_run=True)
    assert counted.dry_run and counted.removed > 0
    done = client.sessions.prune_checkpoints(grace=0)
    assert (done.removed, done.dry_run) == (counted.removed, False)
    assert client.sessions.prune_checkpoints(grace=0).removed == 0
    # Whatever either branch references restores as before, at every message.
    assert _every_position_restores(s, tmp_path / "p2") == parent_files
    assert _every_position_restores(fork, tmp_path / "f2") == fork_files
    # The checkpoint nobody referenced is gone.
    with pytest.raises(InvalidArgumentError, match="no checkpoint object"):
        checkpoints_of(client.store).restore(tmp_path / "stray", stray)


def test_a_deleted_parent_keeps_what_its_fork_shares(client: Client, tmp_path: Path) -> None:
    s, fork = _parent_and_fork(client, tmp_path)
    parent_only = s.transcript.records[-2].meta["workspace"]["after"]  # the tool record of c2
    fork_files = _every_position_restores(fork, tmp_path / "f1")
    client.sessions.delete(s.id)
    assert parent_only not in referenced(client.store)
    assert client.sessions.prune_checkpoints(grace=0).removed > 0
    # The fork's first four messages are the parent's rows: their checkpoints stay.
    assert _every_position_restores(fork, tmp_path / "f2") == fork_files
    assert fork_files[4] == {"a.txt": "shared\n", "keep.txt": "original\n"}


def test_pruning_refuses_a_bad_grace_or_dry_run(client: Client) -> None:
    for bad in (-1, "soon", True):
        with pytest.raises(InvalidArgumentError):
            client.sessions.prune_checkpoints(grace=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        client.sessions.prune_checkpoints(dry_run="yes")  # type: ignore[arg-type]


def test_the_cli_prunes_and_dry_runs(tmp_path: Path) -> None:
    db = tmp_path / "plait.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        s, _fork = _parent_and_fork(client, tmp_path)
        client.sessions.delete(s.id)
    runner = CliRunner()
    base = ["--store", str(db), "--workspace", str(ws), "db", "prune-checkpoints"]
    kept = runner.invoke(cli, base)
    assert kept.exit_code == 0, kept.output
    assert kept.stdout.startswith("removed 0 checkpoint object(s)")  # all within the grace
    dry = runner.invoke(cli, [*base, "--grace", "0", "--dry-run"])
    assert dry.exit_code == 0 and dry.stdout.startswith("would remove ")
    n = int(dry.stdout.split()[2])
    assert n > 0
    real = runner.invoke(cli, [*base, "--grace", "0"])
    assert real.stdout.startswith(f"removed {n} checkpoint object(s)")
    bad = runner.invoke(cli, [*base, "--grace", "-5"])
    assert bad.exit_code == 2


def test_a_foreign_bundles_checkpoint_ids_never_stop_pruning_and_db_check_names_them(
    tmp_path: Path,
) -> None:
    from plait.interop import export_bundle, import_bundle

    # A session on another store, with checkpoints this store never saw.
    box = tmp_path / "o" / "box"
    box.mkdir(parents=True)
    with Client(tmp_path / "o", store=tmp_path / "other.db") as other:
        away = other.sessions.create().to("local", spec=str(box))
        _run(away, _write("c9", "z.txt", "only elsewhere\n"))  # files this store never saw
        bundle = export_bundle(away, mode="local")
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        s, _fork = _parent_and_fork(client, tmp_path)
        client.sessions.delete(s.id)  # its own checkpoints are now prunable
        import_bundle(client, bundle)
        # Forged ids: any 64 hex, one that names a file (a blob, not a tree), not hex at all.
        space = checkpoints_of(client.store)
        blob = next(d for d in space.objects.digests() if space.objects.get(d) == b"shared\n")
        forged = [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "name": "write_file", "arguments": {}}]},
            {"role": "tool", "tool_call_id": "c", "tool_name": "write_file", "content": "ok",
             "meta": {"workspace": {"before": "ab" * 32, "after": blob}}},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "d", "name": "write_file", "arguments": {}}]},
            {"role": "tool", "tool_call_id": "d", "tool_name": "write_file", "content": "ok",
             "meta": {"workspace": {"before": "../../etc/passwd", "after": "ab" * 32}}},
        ]
        client.sessions.create(forged)
        done = client.sessions.prune_checkpoints(grace=0)
        assert done.removed > 0 and done.unheld >= 3
    runner = CliRunner()
    checked = runner.invoke(cli, ["--store", str(db), "--workspace", str(ws), "db", "check"])
    assert checked.exit_code == 0, checked.output
    notes = [line for line in checked.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and all("does not hold" in n for n in notes)
    pruned = runner.invoke(
        cli, ["--store", str(db), "--workspace", str(ws), "db", "prune-checkpoints", "--grace", "0"]
    )
    assert pruned.exit_code == 0 and "not held by this store (ignored)" in pruned.stdout
