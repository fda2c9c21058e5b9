"""``plait sessions ...``: list, search, show, draw, branch, rename and delete stored sessions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from plait._checks import MAX_INT
from plait._prefix import describe, resolve_session_id, source_agent
from plait._time import from_micros
from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    age,
    checked_id,
    console,
    described_json,
    echo_json,
    message_json,
    open_client,
    open_session,
    pass_settings,
    record_json,
    short_operator,
)
from plait.cli._render import (
    numbered_messages,
    print_messages,
    print_records,
    print_tree,
    tail_numbers,
    tree_lines,
)
from plait.cli._terminal import safe, safe_text
from plait.cli._turns import is_terminal
from plait.session import Session
from plait.store.search import MARK_END, MARK_START

__all__ = ["sessions_group"]


@click.group("sessions", context_settings=CONTEXT_SETTINGS)
def sessions_group() -> None:
    """List, inspect, branch, rename and delete stored sessions."""


# The narrowest a cut column gets: a few characters and the ellipsis.
_MIN_CUT = 9


@sessions_group.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1, max=MAX_INT),
    default=20,
    show_default=True,
    help="Show at most this many sessions.",
)
@click.option("--all", "all_workspaces", is_flag=True, help="List every workspace's sessions.")
@click.option(
    "--prefix",
    metavar="P",
    default=None,
    help="Only sessions whose id starts with P (a framework's key: 'my-app/user-42/').",
)
@pass_settings
def list_sessions(
    settings: Settings, as_json: bool, limit: int, all_workspaces: bool, prefix: str | None
) -> None:
    """List the workspace's sessions, most recently active first.

    Each row: the id (plait's own cut to a prefix unique in the store, marked with …:
    every command takes it; any other id whole), the title or else the first prompt,
    the agent that wrote it, its messages and when it was last active. Sessions that
    only hold a framework's state are not conversations and are not listed.
    """
    client = open_client(settings)
    infos = client.sessions.list(limit, all_workspaces=all_workspaces, prefix=prefix)
    described = describe(client, infos)
    if as_json:
        echo_json([described_json(d) for d in described])
        return
    out = console()
    if not infos:
        under = f" with an id starting {prefix!r}" if prefix else ""
        if all_workspaces:
            said = f"no sessions{under} in this store"
        else:
            # A list looks in one workspace: say which, and how to see the others'.
            said = (
                f"no sessions{under} in the workspace {client.workspace}; "
                "`plait sessions list --all` lists every workspace's"
            )
        out.print(safe_text(said, style="dim"), soft_wrap=True)
        return
    # Each session stays one row: a title (or first prompt) or workspace that does
    # not fit is cut with an ellipsis. The other columns are never cut: a cut id is
    # no id (scripts paste it back). Without a terminal rich assumes 80 columns and
    # would cut (or crop) them first, so the cut widths are worked out here.
    ages = [age(d.info.updated_at) for d in described]
    fixed = {
        "id": [d.shown_id for d in described],
        "source": [d.source for d in described],
        "msgs": [str(d.info.length) for d in described],
        "active": ages,
    }
    widths = [max(len(header), *(len(c) for c in cells)) for header, cells in fixed.items()]
    columns = len(fixed) + (2 if all_workspaces else 1)
    room = out.width - sum(widths) - 2 * (columns - 1)
    labels = [safe_text(d.label, style="" if d.info.title else "italic") for d in described]
    places = [safe_text(d.info.workspace) for d in described]
    place_width = max(len("workspace"), *(p.cell_len for p in places))
    if all_workspaces:
        # Cut from the left: the last folders tell workspaces apart.
        place_width = min(place_width, max(_MIN_CUT, room // 3))
        room -= place_width
    label_width = max(_MIN_CUT, room)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=widths[0])
    table.add_column(
        "title / first prompt", no_wrap=True, min_width=min(label_width, 20), max_width=label_width
    )
    table.add_column("source", no_wrap=True, min_width=widths[1])
    table.add_column("msgs", no_wrap=True, min_width=widths[2], justify="right")
    table.add_column("active", no_wrap=True, min_width=widths[3], justify="right")
    if all_workspaces:
        table.add_column("workspace", no_wrap=True, min_width=place_width, max_width=place_width)
    for i, d in enumerate(described):
        labels[i].truncate(label_width, overflow="ellipsis")
        cells = [safe_text(d.shown_id), labels[i], safe_text(d.source)]
        cells += [Text(str(d.info.length)), Text(ages[i])]
        if all_workspaces:
            cells.append(_left_cut(places[i], place_width))
        table.add_row(*cells)
    # Ids shown whole (a framework's can be long) may leave less than the terminal has:
    # the row is then as wide as it must be, never cut.
    need = sum(widths) + label_width + (place_width if all_workspaces else 0) + 2 * (columns - 1)
    out.print(table, width=max(out.width, need), crop=False)


def _left_cut(text: Text, width: int) -> Text:
    """``text`` cut to ``width`` cells from the left: a folder's last parts tell it apart."""
    if text.cell_len <= width:
        return text
    return Text("…" + text.plain[-(width - 1) :], style=text.style)


@sessions_group.command("search", context_settings=CONTEXT_SETTINGS)
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of lines.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1, max=MAX_INT),
    default=20,
    show_default=True,
    help="Show at most this many hits.",
)
@click.option("--all", "all_workspaces", is_flag=True, help="Search every workspace's sessions.")
@pass_settings
def search(settings: Settings, query: str, as_json: bool, limit: int, all_workspaces: bool) -> None:
    """Search the text of every session's messages, newest first.

    QUERY: words (all must match) and "quoted phrases". A message that several
    sessions share (a fork and its parent) is listed for each. Each line: the session
    id, the message's number (as `plait sessions show` numbers it), its role, when it
    was written and the matched text.
    """
    client = open_client(settings)
    hits = client.sessions.search(query, limit=limit, all_workspaces=all_workspaces)
    if as_json:
        echo_json(
            [
                {
                    "session_id": h.session_id,
                    "title": h.title,
                    "position": h.position,
                    "message": h.message,
                    "role": h.role,
                    "snippet": h.snippet,
                    "created_at": from_micros(h.created_at_us).isoformat(),
                }
                for h in hits
            ]
        )
        return
    out = console()
    if not hits:
        where = "this store" if all_workspaces else f"the workspace {client.workspace}"
        out.print(safe_text(f"no message in {where} matches {query!r}", style="dim"))
        return
    for h in hits:
        line = Text.assemble(
            safe_text(h.session_id, style="cyan"),
            f" #{h.message} ",
            safe_text(h.role, style="dim"),
            f" {age(from_micros(h.created_at_us))}  ",
        )
        # The matched terms, between the store's marks, are shown in bold.
        for i, part in enumerate(safe(h.snippet.replace("\n", " ")).split(MARK_START)):
            term, _, rest = part.partition(MARK_END) if i else ("", "", part)
            line.append(term, style="bold")
            line.append(rest)
        out.print(line, soft_wrap=True)


@sessions_group.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the messages (or records) as JSON.")
@click.option(
    "--full",
    is_flag=True,
    help="Every message as written, not only what the model works with after a compaction.",
)
@click.option(
    "--tail",
    type=click.IntRange(min=1, max=MAX_INT),
    default=None,
    metavar="N",
    help="Show the last N messages instead, with the events among and after them.",
)
@pass_settings
def show(settings: Settings, session_id: str, as_json: bool, full: bool, tail: int | None) -> None:
    """Show a session's messages, or with --tail its last N records.

    ID may be a unique prefix of the id, or `latest`. Messages are numbered
    from 0 as every command counts them: the system prompt is message #0 when
    there is one, and `plait sessions fork ID --at N` keeps #0 .. #N-1.
    """
    if full and tail is not None:
        raise click.UsageError("--full and --tail cannot be combined")
    client = open_client(settings)
    session = open_session(client, session_id)
    if tail is not None:
        records = session.transcript.tail(tail)
        numbers = tail_numbers(records, session.transcript.length)
        if as_json:
            echo_json([{**record_json(r), "n": numbers.get(r.seq)} for r in records])
        else:
            _header(session)
            print_records(console(), records, numbers)
        return
    messages, numbers = numbered_messages(session, full=full)
    if as_json:
        echo_json([{**message_json(m), "n": numbers.get(m.seq)} for m in messages])
        return
    _header(session)
    if not print_messages(console(), messages, numbers=numbers):
        console().print(Text("(no messages)", style="dim"))


def _header(session: Session) -> None:
    """Print one line naming the session: id, title, operator, length."""
    head = Text(session.id, style="bold")
    if session.title:
        head.append(" " + json.dumps(session.title, ensure_ascii=False))
    operator = session.lineage_operator
    # The agent that wrote it, named as lists name it; an adapter's own operator names
    # its framework (said once, as the source), not a plait branch.
    source = source_agent(session.settings.metadata, operator)
    framework = operator is not None and not operator.startswith("Session.")
    op = "root" if framework and not session.parent_session_ids else short_operator(operator)
    n = session.transcript.shown_length
    head.append(f"  {source}, {op}, {n} message{'' if n == 1 else 's'}", style="dim")
    console().print(head, soft_wrap=True)


@sessions_group.command("tree", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@pass_settings
def tree(settings: Settings, session_id: str) -> None:
    """Draw the lineage of a session: its root and every fork, fork_at and merge below it.

    The session asked about is marked with *. A merge (several parents) is
    drawn under its first parent and referenced under the others.
    """
    client = open_client(settings)
    full_id = resolve_session_id(client, session_id)
    print_tree(console(), tree_lines(client, full_id), mark=full_id)


@sessions_group.command("fork", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option(
    "--at",
    type=click.IntRange(min=0, max=MAX_INT),
    default=None,
    metavar="N",
    help="Keep only the first N messages (fork_at).",
)
@click.option(
    "--workspace",
    "workspace",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Give the branch its own copy of the files (as they were at N with --at) in DIR.",
)
@click.option(
    "--id",
    "new_id",
    metavar="NEW_ID",
    callback=checked_id,
    help="The branch's id (must be free; default: a new UUIDv7).",
)
@pass_settings
def fork(
    settings: Settings,
    session_id: str,
    at: int | None,
    workspace: Path | None,
    new_id: str | None,
) -> None:
    """Branch a session; print the new session's id.

    The branch shares the transcript (nothing is copied); with --at N it keeps
    only the first N messages. With --workspace DIR its tools work on their own
    copy of the files, restored from the session's workspace checkpoints. With
    --id the branch takes that id (a framework finds its sessions by theirs).
    """
    session = open_session(open_client(settings), session_id)
    if at is None:
        branch = session.fork(new_id, workspace=workspace)
    else:
        branch = session.fork_at(at, new_id, workspace=workspace)
    click.echo(branch.id)


@sessions_group.command("rewind", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.argument("keep", type=click.IntRange(min=0, max=MAX_INT), required=False, metavar="N")
@click.option("--undo", is_flag=True, help="Bring back what the newest rewind hid.")
@click.option(
    "--files",
    is_flag=True,
    help="Also bring the workspace's files back (from its checkpoints); the files as "
    "they are now are saved first, and `--undo --files` restores them.",
)
@pass_settings
def rewind(settings: Settings, session_id: str, keep: int | None, undo: bool, files: bool) -> None:
    """Move a session back to its first N messages, in place (the id stays).

    Messages are counted as `fork --at` counts them. Nothing is lost: what the
    session held stays in its lineage as a hidden head, and `--undo` brings it back.
    With --files the workspace's files go back too.
    """
    if undo == (keep is not None):
        raise click.UsageError("give N, or --undo")
    session = open_session(open_client(settings), session_id)
    if undo:
        hidden = session.transcript.undo_rewind(files=files)
        click.echo(f"undid the rewind of {session.id}: {session.transcript.length} messages")
    else:
        assert keep is not None
        hidden = session.transcript.rewind(keep, files=files)
        click.echo(f"rewound {session.id} to {session.transcript.length} messages")
    if files:
        click.echo(f"files restored in {session.workspace.tool_context().root}")
    again = " --files" if files else ""
    click.echo(
        f"the head it had is kept as {hidden} "
        f"(undo: plait sessions rewind {session.id} --undo{again})"
    )


@sessions_group.command("diff-files", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.argument("a", type=click.IntRange(min=0))
@click.argument("b", type=click.IntRange(min=0))
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@pass_settings
def diff_files(settings: Settings, session_id: str, a: int, b: int, as_json: bool) -> None:
    """What the conversation changed on disk between message A and message B.

    Messages are counted as `fork --at` counts them; the files come from the
    workspace checkpoints taken around each tool call that may change files.
    """
    session = open_session(open_client(settings), session_id)
    changes = session.workspace.diff(a, b)
    if as_json:
        rows = [{"path": c.path, "change": c.change, "kind": c.kind} for c in changes]
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    marks = {"added": "+", "removed": "-", "modified": "~"}
    for change in changes:
        click.echo(f"{marks.get(change.change, '?')} {safe(change.path)}")
    if not changes:
        click.echo("no change")


@sessions_group.command("rename", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.argument("title")
@pass_settings
def rename(settings: Settings, session_id: str, title: str) -> None:
    """Set a session's title; print the title as stored (white space trimmed)."""
    session = open_session(open_client(settings), session_id)
    click.echo(safe(session.rename(title)))


@sessions_group.command("rm", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--erase",
    is_flag=True,
    help="Also remove its records now (those no other branch shares), for data you must forget.",
)
@pass_settings
def remove(settings: Settings, session_id: str, yes: bool, erase: bool) -> None:
    """Delete a session. Branches made from it keep their messages."""
    client = open_client(settings)
    session = open_session(client, session_id)  # an unknown id fails before the prompt
    if not yes:
        title = f" ({safe(session.title)!r})" if session.title else ""
        verb = "Erase" if erase else "Delete"
        try:
            agreed = click.confirm(f"{verb} session {session.id}{title}?", err=True)
        except click.Abort:  # no answer: end of input (a script) or Ctrl-C
            agreed = None
        if not is_terminal(sys.stdin) or agreed is None:
            click.echo(err=True)  # the answer was not echoed: the error gets its own line
        if agreed is None:
            raise click.ClickException(
                f"not {verb.lower()}d: no answer (--yes {verb.lower()}s without asking)"
            )
        if not agreed:
            raise click.ClickException(f"not {verb.lower()}d")
    if erase:
        client.sessions.erase(session.id)
        click.echo(f"erased {session.id}")
    else:
        client.sessions.delete(session.id)
        click.echo(f"deleted {session.id}")
