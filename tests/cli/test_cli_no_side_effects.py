"""Reading never makes anything: no store from a typo, no folders from an export, and the
hints after damage name the store they are about.

Each command runs as a script would, in its own process with standard input at /dev/null.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from plait import Client
from tests.store.test_damage import _fill, _zero_page_holding

from ._helpers import conversation


def _plait(db: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plait", "--store", str(db), "--workspace", str(ws), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SOME_ID = "01a2271e-0000-7000-8000-000000000000"


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["sessions", "list", "--json"],
        ["sessions", "show", SOME_ID],
        ["sessions", "tree", SOME_ID],
        ["sessions", "rename", SOME_ID, "a title"],
        ["sessions", "rm", SOME_ID, "--yes"],
        ["export", SOME_ID],
        ["stats"],
        ["context", SOME_ID],
        ["compact", SOME_ID],
        ["uncompact", SOME_ID],
        ["tools", "--session", SOME_ID],
        ["token", "purge"],
        ["db", "check"],
        ["db", "prune-checkpoints"],
        ["db", "retain", "--older-than", "30d"],
    ],
    ids=lambda args: " ".join(a for a in args if a != SOME_ID),
)
def test_a_store_that_is_not_there_is_an_error_and_nothing_is_made(
    tmp_path: Path, args: list[str]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "nodir" / "x.db"
    done = _plait(db, ws, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: no store at {db} (nor is its folder {db.parent})"), last
    assert "nothing was created" in last
    assert not (tmp_path / "nodir").exists()
    # Beside an existing folder, no file appears either.
    done = _plait(tmp_path / "x.db", ws, *args)
    assert done.returncode == 1 and "no store at" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


def test_a_file_that_was_never_a_database_is_not_called_damaged(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping: milk, eggs\n" * 50)
    for args in (["sessions", "list"], ["db", "check"], ["db", "check", "--deep"],
                 ["run", "hello", "--model", "scripted"]):
        done = _plait(notes, ws, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert f"{notes} is not a plait store: it is not a SQLite database file" in said
        assert "damaged" not in said and "recover" not in said and "Traceback" not in said
    assert notes.read_text() == "shopping: milk, eggs\n" * 50  # untouched


def test_an_export_creates_no_folders(tmp_path: Path) -> None:
    ws, db = tmp_path / "ws", tmp_path / "plait.db"
    ws.mkdir()
    with Client(ws, store=db) as client:
        sid = conversation(client).id
    for args in (["-o", str(tmp_path / "missing" / "dir" / "x.html")],
                 ["--md", "-o", str(tmp_path / "missing" / "x.md")],
                 ["--bundle", "local", "-o", str(tmp_path / "missing" / "b.json")],
                 ["--as", "openai", "-o", str(tmp_path / "missing" / "o.json")]):
        done = _plait(db, ws, "export", sid, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "does not exist (an export creates no folders)" in done.stderr
        assert not (tmp_path / "missing").exists()


def test_the_hint_after_damage_names_the_store_it_is_about(tmp_path: Path) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        ids = [_fill(client, tag).id for tag in ("alpha", "bravo")]
    _zero_page_holding(db, "<bravo-030>")
    shown = _plait(db, ws, "sessions", "show", ids[1])
    assert shown.returncode == 1
    assert f"`plait --store {db} db check --deep`" in shown.stderr, shown.stderr
    checked = _plait(db, ws, "db", "check")
    hints = [line for line in checked.stdout.splitlines() if line.startswith("hint: ")]
    assert hints and all("`plait db" not in h and "`plait sessions" not in h for h in hints)
    assert any(f"`plait --store {db} db recover recovered.db`" in h for h in hints)
    assert any(f"`plait --store {db} db check --deep`" in h for h in hints)
