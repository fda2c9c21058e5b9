"""What ``plait sessions list`` and ``show`` say of ids, sources and workspaces is true: a cut
id is marked and never reads as another id, a framework's id is shown whole, sessions that
only hold a framework's state are not listed, the source is the same label in lists and in
``show``, an empty list says where it looked and names ``--all``, and ``--all`` tells
workspaces apart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from plait import Client
from plait.cli import cli

STORE = "s.db"


def _run(tmp_path: Path, *args: str, cwd: Path | None = None) -> Any:
    where = ["--workspace", str(cwd)] if cwd is not None else ["--workspace", str(tmp_path)]
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / STORE), *where, *args])
    assert result.exit_code == 0, result.output
    return result


def _client(tmp_path: Path, workspace: Path | None = None) -> Client:
    return Client(workspace or tmp_path, store=str(tmp_path / STORE))


def test_a_cut_id_is_marked_and_a_framework_id_is_shown_whole(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        for sid in ("user/123", "user/123/retry"):
            client.sessions.create([{"role": "user", "content": f"words of {sid}"}], session_id=sid)
        own = client.sessions.create([{"role": "user", "content": "plait's own"}]).id
    rows = _run(tmp_path, "sessions", "list").output.splitlines()[1:]
    ids = [row.split()[0] for row in rows]
    assert ids[1:] == ["user/123/retry", "user/123"]  # whole: never "user/123/" beside it
    assert ids[0].endswith("…") and own.startswith(ids[0].removesuffix("…"))
    assert len(ids[0]) < len(own)
    # The JSON gives the short id unmarked; a cut id pasted with its mark still names it.
    listed = json.loads(_run(tmp_path, "sessions", "list", "--json").output)
    assert [r["short_id"] for r in listed][1:] == ["user/123/retry", "user/123"]
    shown = _run(tmp_path, "sessions", "show", ids[0]).output
    assert shown.startswith(own) and "plait's own" in shown


def _adk_and_agents_sessions(tmp_path: Path) -> None:
    pytest.importorskip("google.adk")
    pytest.importorskip("agents")
    from google.adk.events import Event
    from google.genai import types

    from plait.integrations.google_adk import PlaitSessionService
    from plait.integrations.openai_agents import PlaitSession

    async def write() -> None:
        store, ws = str(tmp_path / STORE), str(tmp_path)
        agents = PlaitSession("user/123", store=store, workspace=ws)
        await agents.add_items([{"role": "user", "content": "hello from agents"}])
        service = PlaitSessionService(store, workspace=ws)
        made = await service.create_session(
            app_name="app", user_id="u1", state={"user:name": "Ann", "app:v": 1}
        )
        said = types.Content(role="user", parts=[types.Part(text="hello from adk")])
        await service.append_event(made, Event(author="user", content=said))

    asyncio.run(write())


def test_state_holders_are_not_conversations_and_sources_say_the_framework(
    tmp_path: Path,
) -> None:
    _adk_and_agents_sessions(tmp_path)
    listed = json.loads(_run(tmp_path, "sessions", "list", "--json").output)
    by_id = {r["id"]: r for r in listed}
    # ADK's app and user state holders (adk/app, adk/app/u1) are no conversations.
    assert not {"adk/app", "adk/app/u1"} & set(by_id)
    assert len(by_id) == 2
    adk_id = next(i for i in by_id if i.startswith("adk/app/u1/"))
    assert by_id["user/123"]["source"] == "openai-agents"
    assert by_id[adk_id]["source"] == "google-adk"
    table = _run(tmp_path, "sessions", "list").output
    assert "google-adk" in table and "openai-agents" in table and " plait " not in table
    # show says the same label.
    for sid, label in (("user/123", "openai-agents"), (adk_id, "google-adk")):
        head = _run(tmp_path, "sessions", "show", sid).output.splitlines()[0]
        assert f"  {label}, root, 1 message" in head, head


def test_an_empty_list_says_where_it_looked_and_names_all(tmp_path: Path) -> None:
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    with _client(tmp_path, elsewhere) as client:
        client.sessions.create([{"role": "user", "content": "over there"}])
    here = tmp_path / "here"
    here.mkdir()
    said = _run(tmp_path, "sessions", "list", cwd=here).output
    assert str(here) in said and "plait sessions list --all" in said
    assert "over there" in _run(tmp_path, "sessions", "list", "--all", cwd=here).output


def test_all_tells_workspaces_apart_by_their_last_folders(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "very" / "long" / "path" / "to" / "some" / "projects"
    for name in ("alpha", "beta"):
        (deep / name).mkdir(parents=True)
        with _client(tmp_path, deep / name) as client:
            client.sessions.create([{"role": "user", "content": f"hi {name}"}])
    rows = _run(tmp_path, "sessions", "list", "--all").output.splitlines()[1:]
    places = [row.split()[-1] for row in rows]
    assert places[0] != places[1]
    assert places[0].endswith("beta") and places[1].endswith("alpha")
