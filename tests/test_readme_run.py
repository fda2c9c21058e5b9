"""The README's run snippet does what its comments say: its tools work in the folder it
names, and how each run ended is said. Its model is a stand-in that answers by the
request's words (the embedded model picks tools too erratically to test against)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import plait.session.runs as runs_module
from plait.providers import Finish, Request, StreamEvent, TextDelta, ToolCallDelta

README = Path(__file__).resolve().parents[1] / "README.md"


def _run_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (snippet,) = [b for b in blocks if "async def main" in b and "s.prompt(" in b]
    return snippet


class ByWords:
    """Lists the folder when asked to, then reads a file that is not there, again and again."""

    name = "bywords"
    model = "bywords-1"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        last = request.messages[-1]
        asked = next(m for m in reversed(request.messages) if m.role == "user").text
        if "title" in request.messages[0].text.lower():
            yield TextDelta("Files here")
        elif "list the files" in asked and last.role != "tool":
            yield ToolCallDelta(0, "c1", "list_files", '{"path": "."}')
            yield Finish("tool_calls")
            return
        elif "read the first one" in asked:
            n = len(request.messages)
            yield ToolCallDelta(0, f"c{n}", "read_file", '{"path": "no-such-file.txt"}')
            yield Finish("tool_calls")
            return
        else:
            yield TextDelta("Done.")
        yield Finish("stop")


def test_the_readme_run_snippet_works_in_its_folder_and_says_how_runs_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes-in-the-folder.txt").write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(runs_module, "select_provider", lambda *a, **k: ByWords())
    temp = tmp_path / "temp"  # where a temporary sandbox folder would be made
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(_run_snippet(), str(README), "exec"), namespace)
    out = capsys.readouterr().out
    # The model read the folder the snippet names, not a temporary one.
    from plait import Client

    with Client(tmp_path, store=str(tmp_path / "home" / "plait.db")) as client:
        (info,) = client.sessions.list()
        records = client.open(info.id).transcript.records
    listed = next(r for r in records if r.kind == "tool" and r.tool_name == "list_files")
    assert "notes-in-the-folder.txt" in listed.text
    assert not list(temp.glob("plait-sandbox-*"))
    # The second run is stopped (the same failing read, three times) and says so.
    assert "the model made the same failing read_file call 3 times in a row" in out
    reads = [r for r in records if r.kind == "tool" and r.tool_name == "read_file"]
    assert len(reads) == 3 and not any(r.ok for r in reads)
    assert info.title == "Files here"
