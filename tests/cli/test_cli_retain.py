"""`plait db retain`: what a person (or a cron job, with no terminal) sees.

Each command runs in its own process with standard input at /dev/null, as a script would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait import Client

from ._helpers import conversation


def _plait(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plait", "--store", str(db), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


AGE = "20s"
"""Idle for longer than this goes: well past a command's start-up on a busy machine (the
fork written just before a command must still count as recent when the command runs)."""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A store with an old session and a fork of it, both idle for longer than AGE."""
    folder = tmp_path_factory.mktemp("template")
    db = folder / "plait.db"
    ws = folder / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        old = conversation(client, "an old question")
        old.transcript.inject_many([{"role": "user", "content": "y" * 5000} for _ in range(40)])
        fork = old.fork_at(2)
    time.sleep(20.5)
    return db, old.id, fork.id


@pytest.fixture
def store(template: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, str, str]:
    """A copy of the template whose fork was written just now (so it is kept)."""
    source, old, fork = template
    db = tmp_path / "plait.db"
    shutil.copyfile(source, db)  # closed: its log was checkpointed into the file
    with Client(tmp_path, store=db) as client:
        client.open(fork).inject({"role": "user", "content": "the fork goes on"})
    return db, old, fork


def test_dry_run_says_what_would_go_and_changes_nothing(store: tuple[Path, str, str]) -> None:
    db, old, fork = store
    before = db.read_bytes()
    done = _plait(db, "db", "retain", "--older-than", AGE, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("would remove 1 session(s) idle since before ")
    assert old in done.stdout and fork not in done.stdout
    assert "nothing changed (dry run)" in done.stdout
    assert db.read_bytes() == before


def test_retain_removes_the_idle_session_and_gives_the_space_back(
    store: tuple[Path, str, str],
) -> None:
    db, old, fork = store
    size = db.stat().st_size
    done = _plait(db, "db", "retain", "--older-than", AGE, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == [old] and report["dry_run"] is False
    assert report["records"] == 40 + 3  # past the fork's two messages, the rest went
    assert report["reclaimed"] == "incremental vacuum" and report["bytes_freed"] > 150_000
    assert db.stat().st_size < size - 150_000
    listed = _plait(db, "sessions", "list", "--all", "--json")
    assert [s["id"] for s in json.loads(listed.stdout)] == [fork]
    shown = _plait(db, "sessions", "show", fork)
    assert "an old question" in shown.stdout and "the fork goes on" in shown.stdout


def test_the_plain_report_names_what_went_and_the_bytes(store: tuple[Path, str, str]) -> None:
    db, old, _ = store
    done = _plait(db, "db", "retain", "--older-than", AGE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("removed 1 session(s) idle since before ")
    assert "43 record(s)" in lines[0] and "0 checkpoint object(s)" in lines[0]
    assert lines[1].strip() == old
    assert lines[2].startswith("gave back ") and "(incremental vacuum)" in lines[2]


@pytest.mark.parametrize(
    ("age", "said"),
    [
        ("banana", "--older-than is a duration such as 30d, 12h, 90m, 45s or 2w, not 'banana'"),
        ("-5d", "--older-than must be positive, not '-5d'"),
        ("0d", "--older-than must be positive, not '0d'"),
        ("12 parsecs", "--older-than is a duration such as 30d, 12h, 90m, 45s or 2w, not '12"),
    ],
)
def test_a_bad_age_is_a_clean_error_and_removes_nothing(
    store: tuple[Path, str, str], age: str, said: str
) -> None:
    db, _, _ = store
    before = db.read_bytes()
    done = _plait(db, "db", "retain", "--older-than", age)
    assert done.returncode == 1
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"Error: {said}")
    assert db.read_bytes() == before


def test_older_than_is_required(tmp_path: Path) -> None:
    done = _plait(tmp_path / "plait.db", "db", "retain")
    assert done.returncode == 2 and "Missing option '--older-than'" in done.stderr
