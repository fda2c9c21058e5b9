"""What a first run meets: a model that repeats a failing call is stopped and told why (a
setting with a default), ``name_it`` never titles a session with an error, and the
temporary sandbox folder of a session without a target goes when its client closes."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.run import RunEnded, event_json


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    (tmp_path / "box").mkdir()
    with Client(tmp_path, store=tmp_path / "plait.db") as client:
        s = client.sessions.create([{"role": "system", "content": "You are terse."}])
        yield s.to("local", spec=str(tmp_path / "box"))


def _reading(path: str, n: int = 20) -> ScriptedProvider:
    """A model that asks to read ``path`` (a file that is not there), again and again."""
    call = ToolCall("c", "read_file", {"path": path})
    return ScriptedProvider(
        [Reply(tool_calls=(ToolCall(f"c{i}", call.name, call.arguments),)) for i in range(n)]
    )


def _ended(session: Session, provider: ScriptedProvider) -> RunEnded:
    async def main() -> RunEnded:
        events = [e async for e in session.stream("read it", provider=provider)]
        assert isinstance(events[-1], RunEnded)
        return events[-1]

    return asyncio.run(main())


def test_the_same_failing_call_three_times_stops_the_run_and_says_why(session: Session) -> None:
    ended = _ended(session, _reading("missing.txt"))
    assert (ended.reason, ended.steps, ended.complete) == ("repeated_call", 3, False)
    assert ended.repeated == "read_file" and ended.repeats == 3
    assert "the model made the same failing read_file call 3 times in a row" in ended.words
    assert event_json(ended)["repeated"] == "read_file"
    failed = [r for r in session.transcript.records if r.kind == "tool"]
    assert len(failed) == 3 and not any(r.ok for r in failed)


def test_the_limit_is_a_setting(session: Session) -> None:
    session.settings.set(repeat_limit=5)
    assert _ended(session, _reading("missing.txt")).steps == 5
    with pytest.raises(InvalidArgumentError):
        session.settings.set(repeat_limit=0)
    result = asyncio.run(session.prompt("again", provider=_reading("missing.txt")))
    assert result.finish_reason == "repeated_call" and result.repeats == 5


def test_calls_that_change_or_succeed_are_not_stopped(session: Session) -> None:
    box = Path(session.workspace.tool_context().root)
    (box / "there.txt").write_text("here\n")
    replies = [
        Reply(tool_calls=(ToolCall(f"c{i}", "read_file", {"path": f"missing-{i}.txt"}),))
        for i in range(4)
    ]
    replies.append(Reply(tool_calls=(ToolCall("ok", "read_file", {"path": "there.txt"}),)))
    replies.append("Read it.")
    ended = _ended(session, ScriptedProvider(replies))
    assert ended.reason == "done" and ended.steps == 6


def test_name_it_never_titles_a_session_with_an_error(tmp_path: Path) -> None:
    error = "Error: [Errno 2] No such file or directory: 'notes.txt'"
    with Client(tmp_path, store=tmp_path / "plait.db") as client:
        s = client.sessions.create(
            [
                {"role": "user", "content": "Read the notes and sum them up"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "tool_name": "read_file",
                    "content": error,
                    "ok": False,
                },
                {"role": "assistant", "content": "I could not read the notes."},
            ]
        )
        # A small model asked for a title repeats the error it read.
        title = asyncio.run(s.name_it(provider=ScriptedProvider([error])))
        assert title == "Read the notes and sum them"
        other = client.sessions.create(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        )
        said = asyncio.run(other.name_it(provider=ScriptedProvider(["Traceback (most recent"])))
        assert said == "hi"


def test_a_temporary_sandbox_folder_goes_when_its_client_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    client = Client(tmp_path, store=tmp_path / "plait.db")
    s = client.sessions.new()
    provider = ScriptedProvider(
        [Reply(tool_calls=(ToolCall("c1", "list_files", {"path": "."}),)), "Nothing here."]
    )
    asyncio.run(s.prompt("list the files", provider=provider))
    made = list(temp.glob("plait-sandbox-*"))
    assert len(made) == 1 and made[0].is_dir()  # no target: a temporary folder
    client.close()
    assert not made[0].exists()
