"""``plait db keygen`` and ``plait db rotate-key``: an encrypted store from the terminal."""

from __future__ import annotations

import base64
from pathlib import Path

from plait import Client

from ._helpers import Run


def test_keygen_prints_a_new_key_each_time(run: Run) -> None:
    first, second = run("db", "keygen"), run("db", "keygen")
    assert first.exit_code == 0 and second.exit_code == 0
    key = first.stdout.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32 and key != second.stdout.strip()


def test_commands_open_an_encrypted_store_with_the_key_in_the_environment(
    run: Run, db_path: Path, workspace: Path
) -> None:
    key = run("db", "keygen").stdout.strip()
    with Client(workspace, store=db_path, encryption_key=key) as client:
        client.sessions.new().inject({"role": "user", "content": "hello zebra"})
    listed = run("sessions", "list", env={"PLAIT_ENCRYPTION_KEY": key})
    assert listed.exit_code == 0, listed.output
    refused = run("sessions", "list", env={"PLAIT_ENCRYPTION_KEY": ""})
    assert refused.exit_code != 0
    assert "the store is encrypted; give its key" in refused.stderr


def test_rotate_key_rewraps_and_the_old_key_is_refused(
    run: Run, db_path: Path, workspace: Path
) -> None:
    old, new = run("db", "keygen").stdout.strip(), run("db", "keygen").stdout.strip()
    with Client(workspace, store=db_path, encryption_key=old) as client:
        s = client.sessions.new()
        s.inject({"role": "user", "content": "hello zebra"})
        s.fork()
    missing = run("db", "rotate-key", env={"PLAIT_ENCRYPTION_KEY": old})
    assert missing.exit_code != 0 and "PLAIT_NEW_ENCRYPTION_KEY" in missing.stderr
    done = run(
        "db",
        "rotate-key",
        env={"PLAIT_ENCRYPTION_KEY": old, "PLAIT_NEW_ENCRYPTION_KEY": new},
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("re-wrapped 2 session key(s)")
    assert run("db", "check", env={"PLAIT_ENCRYPTION_KEY": new}).stdout == "ok\n"
    stale = run("db", "check", env={"PLAIT_ENCRYPTION_KEY": old})
    assert stale.exit_code != 0 and "not this store's" in stale.stderr
    with Client(workspace, store=db_path, encryption_key=new) as client:
        [first, _] = sorted(client.sessions.list(), key=lambda i: i.created_at)
        assert client.open(first.id).history()[0].text == "hello zebra"
