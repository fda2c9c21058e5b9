"""``plait sessions ...``: list, show, tree, fork, rename, rm."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from plait import Client

from ._helpers import Run, assert_clean_error, conversation

# -- list ---------------------------------------------------------------------------------


def test_list_shows_sessions_most_recent_first(run: Run, api: Client) -> None:
    a, b, c = (conversation(api, q) for q in ("first?", "second?", "third?"))
    a.rename("Alpha")
    b.inject({"role": "user", "content": "bump"})  # b is now the most recently active
    result = run("sessions", "list")
    assert result.exit_code == 0, result.output
    out = result.stdout
    rows = out.splitlines()[1:]
    assert out.splitlines()[0].split() == [
        *("id", "title", "/", "first", "prompt"),
        *("source", "msgs", "active"),
    ]
    # Short ids: made within a second, the three share their first 8 characters.
    # Each is marked as cut.
    assert all(row.split()[0].endswith("…") for row in rows)
    shorts = [row.split()[0].removesuffix("…") for row in rows]
    ids = (a.id, b.id, c.id)
    assert [next(i for i in ids if i.startswith(x)) for x in shorts] == [b.id, a.id, c.id]
    assert all(len(x) < 36 for x in shorts)
    assert "Alpha" in rows[1]
    # An untitled session shows its first prompt instead, and its source agent.
    assert "second?" in rows[0] and "plait" in rows[0]
    assert " 6 " in rows[0] and rows[0].rstrip().endswith("just now")


@pytest.mark.parametrize("columns", ["80", "60"])
def test_list_never_cuts_an_id_on_a_narrow_or_no_terminal(
    run: Run, api: Client, columns: str
) -> None:
    # Without a terminal (a script, a pipe) the console is 80 columns wide: a long first
    # prompt and the workspace column are what get cut, never the ids a script pastes back.
    sessions = [conversation(api, "Read the file notes.txt and tell me what it says " * 3)]
    sessions.append(sessions[0].fork())
    for flags in ([], ["--all"]):
        result = run("sessions", "list", *flags, env={"COLUMNS": columns})
        assert result.exit_code == 0, result.output
        header, *rows = result.stdout.splitlines()
        assert header.split()[0] == "id"
        # A cut id ends in one mark, and what stands before it is a prefix that works.
        assert all(row.split()[0].count("…") == 1 for row in rows)
        shorts = [row.split()[0].removesuffix("…") for row in rows]
        assert all("…" not in x for x in shorts)
        assert sorted(next(s.id for s in sessions if s.id.startswith(x)) for x in shorts) == (
            sorted(s.id for s in sessions)
        )
        assert all("…" in row.split("  ")[1] for row in rows)
        if columns == "80":
            assert header.split()[1:5] == ["title", "/", "first", "prompt"]
            assert header.split()[5:8] == ["source", "msgs", "active"]
            assert all(" plait " in row and len(row) <= 80 for row in rows)


def test_list_json_has_the_fields(run: Run, api: Client) -> None:
    root = conversation(api)
    root.rename("Root")
    branch = root.fork_at(2)
    result = run("sessions", "list", "--json")
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)
    assert [i["id"] for i in items] == [branch.id, root.id]
    assert set(items[0]) == {
        "id",
        "title",
        "created_at",
        "updated_at",
        "length",
        "workspace",
        "parent_session_ids",
        "lineage_operator",
        "short_id",
        "first_prompt",
        "source",
    }
    first, second = items
    assert first["first_prompt"] == "How many files?" and first["source"] == "plait"
    assert branch.id.startswith(first["short_id"])
    assert first["parent_session_ids"] == [root.id]
    assert first["lineage_operator"] == "Session.fork_at"
    assert first["length"] == 2
    assert first["title"] is None
    assert second == {
        **second,
        "title": "Root",
        "length": 5,
        "parent_session_ids": [],
        "lineage_operator": None,
        "workspace": api.workspace,
    }
    for key in ("created_at", "updated_at"):
        moment = datetime.fromisoformat(second[key])
        assert moment.utcoffset() == timedelta(0)


def test_list_limit(run: Run, api: Client) -> None:
    sessions = [conversation(api, str(i)) for i in range(3)]
    result = run("sessions", "list", "--json", "--limit", "2")
    assert [i["id"] for i in json.loads(result.stdout)] == [sessions[2].id, sessions[1].id]


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_list_limit_must_be_a_positive_int(run: Run, bad: str) -> None:
    result = run("sessions", "list", "--limit", bad)
    assert result.exit_code == 2
    assert "--limit" in result.stderr
    assert "Traceback" not in result.output


def test_list_is_per_workspace_unless_all(
    run: Run, api: Client, db_path: Path, tmp_path: Path
) -> None:
    mine = conversation(api)
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    with Client(other_ws, store=db_path) as other_client:
        theirs = conversation(other_client)
    ids = [i["id"] for i in json.loads(run("sessions", "list", "--json").stdout)]
    assert ids == [mine.id]
    everything = json.loads(run("sessions", "list", "--json", "--all").stdout)
    assert [i["id"] for i in everything] == [theirs.id, mine.id]
    assert everything[0]["workspace"] == str(other_ws.resolve())
    table = run("sessions", "list", "--all").stdout
    assert "workspace" in table.splitlines()[0] and everything[0]["short_id"] in table


def test_list_by_id_prefix(run: Run, api: Client) -> None:
    for sid in ("app/u1/a", "app/u1/b", "app/u10/a", "other/u1/a"):
        api.sessions.create([{"role": "user", "content": sid}], session_id=sid)
    listed = json.loads(run("sessions", "list", "--json", "--prefix", "app/u1/").stdout)
    assert [i["id"] for i in listed] == ["app/u1/b", "app/u1/a"]
    table = run("sessions", "list", "--prefix", "app/").stdout
    assert "app/u10/a" in table and "other/u1/a" not in table
    none = run("sessions", "list", "--prefix", "nobody/")
    assert none.exit_code == 0 and "no sessions with an id starting 'nobody/'" in none.stdout


def test_list_empty(run: Run, api: Client) -> None:
    result = run("sessions", "list")
    assert result.exit_code == 0
    assert "no sessions" in result.stdout
    assert json.loads(run("sessions", "list", "--json").stdout) == []


def test_store_from_env(api: Client, db_path: Path, workspace: Path) -> None:
    from click.testing import CliRunner

    from plait.cli import cli

    s = conversation(api)
    result = CliRunner().invoke(
        cli,
        ["--workspace", str(workspace), "sessions", "list", "--json"],
        env={"PLAIT_STORE": str(db_path)},
    )
    assert result.exit_code == 0, result.output
    assert [i["id"] for i in json.loads(result.stdout)] == [s.id]


# -- show ---------------------------------------------------------------------------------


def test_show_prints_the_messages(run: Run, api: Client) -> None:
    s = conversation(api)
    s.rename("Files")
    result = run("sessions", "show", s.id)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(s.id) and '"Files"' in lines[0]
    # Numbered as fork --at counts: the system prompt is #0 and is shown.
    assert lines[1:] == [
        "#0 system: You are terse.",
        "#1 user: How many files?",
        "#2 assistant: Checking.",
        '     -> call ls({"path": "."}) [c1]',
        "#3 tool ls [c1] (ok): a.txt b.txt",
        "#4 assistant: Two files.",
    ]
    assert "5 messages" in lines[0]


def test_show_json_is_the_history(run: Run, api: Client) -> None:
    s = conversation(api)
    messages = json.loads(run("sessions", "show", s.id, "--json").stdout)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["tool_calls"] == [{"id": "c1", "name": "ls", "arguments": {"path": "."}}]
    assert messages[3]["tool_call_id"] == "c1" and messages[3]["ok"] is True
    assert [m["seq"] for m in messages] == [0, 1, 2, 3, 4]
    assert [m["n"] for m in messages] == [0, 1, 2, 3, 4]


def test_show_full_shows_what_a_summary_folded(run: Run, api: Client) -> None:
    s = conversation(api)
    s.inject({"role": "summary", "content": "They listed two files.", "folds": [1, 4]})
    s.inject({"role": "user", "content": "Thanks"})
    short = run("sessions", "show", s.id).stdout
    assert "summary: They listed two files." in short
    assert "How many files?" not in short and "Two files." in short and "Thanks" in short
    full = run("sessions", "show", s.id, "--full").stdout
    assert "How many files?" in full and "summary: They listed two files." in full
    full_json = json.loads(run("sessions", "show", s.id, "--full", "--json").stdout)
    assert len(full_json) == 7  # the system prompt, five messages, the summary


def test_show_tail_shows_the_last_messages_with_their_events(run: Run, api: Client) -> None:
    s = conversation(api)
    s.transcript.log_event("checkpoint", {"n": 1})
    result = run("sessions", "show", s.id, "--tail", "1")
    assert result.exit_code == 0, result.output
    body = result.stdout.splitlines()[1:]
    assert body == ["#4 assistant: Two files.", '   event checkpoint {"n": 1}']
    records = json.loads(run("sessions", "show", s.id, "--tail", "2", "--json").stdout)
    assert [r["kind"] for r in records] == ["tool", "assistant", "event"]
    assert records[-1]["payload"] == {"name": "checkpoint", "data": {"n": 1}}
    assert {"seq", "n", "id", "kind", "created_at", "tokens", "meta", "payload"} == set(records[0])
    assert [r["n"] for r in records] == [3, 4, None]


def test_show_tail_and_full_conflict(run: Run, api: Client) -> None:
    s = conversation(api)
    result = run("sessions", "show", s.id, "--tail", "2", "--full")
    assert result.exit_code == 2
    assert run("sessions", "show", s.id, "--tail", "0").exit_code == 2


def test_show_prints_markup_literally(run: Run, api: Client) -> None:
    s = api.sessions.new()
    s.inject({"role": "user", "content": "[bold]not bold[/bold] [red]"})
    out = run("sessions", "show", s.id).stdout
    assert "user: [bold]not bold[/bold] [red]" in out


# -- tree ---------------------------------------------------------------------------------


def test_tree_shows_forks_fork_at_and_merges(run: Run, api: Client) -> None:
    root = conversation(api)
    root.rename("Root")
    fork = root.fork()
    fork.inject({"role": "user", "content": "more"})
    cut = root.fork_at(2)
    merged = fork.merge(cut)
    result = run("sessions", "tree", merged.id)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f'{root.id} root "Root" (5 msgs)'
    assert f"├── {fork.id} Session.fork (6 msgs)" in lines
    fork_at_line = next(line for line in lines if cut.id in line and "fork_at" in line)
    assert fork_at_line.startswith("└── ") and "(2 msgs)" in fork_at_line
    merge_line = next(line for line in lines if line.strip(" │").startswith(f"└── {merged.id}"))
    assert "Session.merge" in merge_line and merge_line.endswith(" *")
    assert f"merged with {cut.id}" in merge_line
    # The merge is referenced under its second parent too.
    assert lines[-1].endswith("(merged; drawn above)")
    assert sum(line.endswith(" *") for line in lines) == 1


def test_tree_marks_the_asked_session(run: Run, api: Client) -> None:
    root = conversation(api)
    child = root.fork()
    lines = run("sessions", "tree", child.id).stdout.splitlines()
    assert lines[0].startswith(root.id) and not lines[0].endswith("*")
    assert lines[1].startswith(f"└── {child.id}") and lines[1].endswith(" *")
    lines = run("sessions", "tree", root.id).stdout.splitlines()
    assert lines[0].endswith(" *") and not lines[1].endswith("*")


def test_tree_of_a_detached_session_is_its_own_root(run: Run, api: Client) -> None:
    root = conversation(api)
    root.fork()
    detached = root.detach()
    lines = run("sessions", "tree", detached.id).stdout.splitlines()
    assert lines == [f"{detached.id} Session.detach (5 msgs) [detached from {root.id}] *"]


# -- fork ---------------------------------------------------------------------------------


def test_fork_prints_the_new_id(run: Run, api: Client) -> None:
    s = conversation(api)
    result = run("sessions", "fork", s.id)
    assert result.exit_code == 0, result.output
    new_id = result.stdout.strip()
    branch = api.open(new_id)
    assert branch.parent_session_ids == (s.id,)
    assert branch.lineage_operator == "Session.fork"
    assert branch.transcript.length == 5


def test_fork_at_keeps_n_messages(run: Run, api: Client) -> None:
    s = conversation(api)
    new_id = run("sessions", "fork", s.id, "--at", "3").stdout.strip()
    branch = api.open(new_id)
    assert branch.transcript.length == 3
    assert branch.transcript.branched_at == 3
    assert branch.lineage_operator == "Session.fork_at"
    assert [m.text for m in branch.history()] == ["How many files?", "Checking."]
    assert s.transcript.length == 5


def test_fork_takes_the_id_it_is_given(run: Run, api: Client) -> None:
    s = conversation(api)
    result = run("sessions", "fork", s.id, "--id", "adk/app/ann/what-if")
    assert result.exit_code == 0, result.output
    assert result.stdout == "adk/app/ann/what-if\n"
    assert api.open("adk/app/ann/what-if").parent_session_ids == (s.id,)
    at = run("sessions", "fork", s.id, "--at", "3", "--id", "short")
    assert at.stdout == "short\n" and api.open("short").transcript.length == 3
    # Taken, or no id at all: refused, and nothing is made.
    assert_clean_error(run("sessions", "fork", s.id, "--id", "short"), "short")
    bad = run("sessions", "fork", s.id, "--id", " padded")
    assert bad.exit_code == 2 and "is not a session id" in bad.output
    assert len(api.sessions.list(limit=10)) == 3


def test_fork_at_out_of_range(run: Run, api: Client) -> None:
    s = conversation(api)
    assert_clean_error(run("sessions", "fork", s.id, "--at", "6"), "cannot keep the first 6")
    assert run("sessions", "fork", s.id, "--at", "-1").exit_code == 2


# -- rename -------------------------------------------------------------------------------


def test_rename_trims_and_prints_the_stored_title(run: Run, api: Client) -> None:
    s = conversation(api)
    result = run("sessions", "rename", s.id, "   A   new\ttitle  ")
    assert result.exit_code == 0, result.output
    assert result.stdout == "A new title\n"
    assert s.title == "A new title"


def test_rename_blank_is_a_clean_error(run: Run, api: Client) -> None:
    s = conversation(api)
    assert_clean_error(run("sessions", "rename", s.id, "   "), "blank")
    assert s.title is None


# -- rm -----------------------------------------------------------------------------------


def test_rm_yes_deletes_and_show_then_fails(run: Run, api: Client) -> None:
    s = conversation(api)
    keep = s.fork()
    result = run("sessions", "rm", s.id, "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"deleted {s.id}\n"
    assert not api.exists(s.id)
    assert_clean_error(run("sessions", "show", s.id), s.id, "no such session")
    # The branch keeps the records it shared.
    assert api.open(keep.id).transcript.length == 5


def test_rm_asks_first(run: Run, api: Client) -> None:
    s = conversation(api)
    refused = run("sessions", "rm", s.id, input="n\n")
    assert refused.exit_code == 1
    assert "Delete session" in refused.stderr
    assert refused.stderr.splitlines()[-1] == "Error: not deleted"
    assert api.exists(s.id)
    # A script with nothing to answer (end of input) is told how to delete unasked.
    unanswered = run("sessions", "rm", s.id, "--erase", input="")
    assert_clean_error(unanswered, "not erased: no answer (--yes erases without asking)")
    assert "Aborted" not in unanswered.output
    assert api.exists(s.id)
    accepted = run("sessions", "rm", s.id, input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert not api.exists(s.id)


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["01a2271e-0000-7000-8000-000000000000", "../x", "/etc/passwd"])
@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "show"],
        ["sessions", "tree"],
        ["sessions", "fork"],
        ["sessions", "rm", "--yes"],
        ["sessions", "rename", "{id}", "title"],
    ],
)
def test_unknown_id_is_a_clean_error(
    run: Run, api: Client, command: list[str], bad_id: str
) -> None:
    args = [a.replace("{id}", bad_id) for a in command]
    if "{id}" not in command:
        args.append(bad_id)
    result = run(*args)
    assert_clean_error(result, repr(bad_id))
    assert result.stdout == ""


def test_a_file_that_is_not_a_store_is_a_clean_error(run: Run, db_path: Path) -> None:
    db_path.write_bytes(b"this is not a database" * 100)
    result = run("sessions", "list")
    assert_clean_error(result, "is not a plait store", "not a SQLite database")
    assert "damaged" not in result.output
    assert db_path.read_bytes() == b"this is not a database" * 100


def test_unknown_store_scheme_is_a_clean_error(workspace: Path) -> None:
    from click.testing import CliRunner

    from plait.cli import cli

    result = CliRunner().invoke(cli, ["--store", "postgres://h/db", "sessions", "list"])
    assert_clean_error(result, "postgres")


def test_keeping_more_messages_than_there_are_says_so_in_the_command_s_words(
    run: Run, api: Client
) -> None:
    s = conversation(api)
    for args in (["sessions", "fork", s.id, "--at", "9"], ["sessions", "rewind", s.id, "9"]):
        result = run(*args)
        assert_clean_error(result, "cannot keep the first 9 messages: the session has only 5")
        assert "keep_first" not in result.stderr
    assert [i.id for i in api.sessions.list()] == [s.id] and api.open(
        s.id
    ).transcript.length == 5
