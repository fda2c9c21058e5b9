"""``plait token create / expire / purge``: durable bearer tokens made from the terminal."""

from __future__ import annotations

import json
from pathlib import Path

from plait import Client
from plait.auth import DurableSessions, authenticate

from ._helpers import Run, assert_clean_error


def test_create_prints_the_token_once_and_stores_only_its_hash(
    run: Run, api: Client, db_path: Path
) -> None:
    made = run("token", "create", "alice", "--ttl", "12h", "--scope", "read", "--scope", "write")
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert len(token) >= 32 and "principal alice" in made.stderr
    who = authenticate(token, sessions=DurableSessions(api.store))
    assert who is not None and (who.principal, who.scopes) == ("alice", ("read", "write"))
    api.close()
    files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]
    assert files and all(token.encode() not in p.read_bytes() for p in files)  # hash only


def test_json_agent_expire_and_purge(run: Run, api: Client) -> None:
    made = run("token", "create", "builder-bot", "--agent", "--json")
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert record["principal"] == "builder-bot" and record["attributes"] == {"agent": True}
    token = record["id"]
    assert run("token", "expire", token).stdout == "expired\n"
    assert authenticate(token, sessions=DurableSessions(api.store)) is None
    assert_clean_error(run("token", "expire", token), "no live token")
    purged = run("token", "purge")
    assert purged.exit_code == 0 and purged.stdout == "purged 1 expired token(s)\n"


def test_bad_durations_are_usage_errors(run: Run) -> None:
    for ttl in ("0", "soon", "-5m", "3y"):
        bad = run("token", "create", "alice", "--ttl", ttl)
        assert bad.exit_code == 2 and "is not a duration" in bad.output
    blank = run("token", "create", "  ")
    assert blank.exit_code == 1 and "principal" in blank.stderr


def test_a_minted_token_never_reads_as_an_option() -> None:
    from plait.auth import new_token

    assert not any(new_token().startswith("-") for _ in range(2000))
