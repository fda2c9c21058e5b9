"""A toolset is opened by the run that offers it and closed however the run ends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, ScriptExhaustedError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.tools import Tool, Toolset, tool


@tool(read_only=True)
def echo(text: str) -> str:
    """Say it back."""
    return text


class Counted(Toolset):
    """Gives ``echo`` while open, counting how often it was opened and closed."""

    def __init__(self, tools: Sequence[Tool] = (echo,)) -> None:
        self.name = "counted"
        self.tools = tuple(tools)
        self.opened = self.closed = 0

    def open(self) -> contextlib.AbstractAsyncContextManager[Sequence[Tool]]:
        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[Sequence[Tool]]:
            self.opened += 1
            try:
                yield self.tools
            finally:
                self.closed += 1

        return opened()


def test_a_run_opens_a_toolset_for_its_length(tmp_path: Path) -> None:
    toolset = Counted()
    with Client(tmp_path, store=":memory:") as client:
        s = client.session
        model = ScriptedProvider([
            Reply(tool_calls=(ToolCall("c1", "echo", {"text": "hi"}),), finish_reason="tool_calls"),
            "said hi",
        ])
        assert s.run("echo hi", provider=model, tools=[toolset]).text == "said hi"
        assert (toolset.opened, toolset.closed) == (1, 1)
        assert [t.name for t in model.requests[1].tools] == ["echo"]
        with pytest.raises(ScriptExhaustedError):  # a run that fails closes it too
            s.run("again", provider=ScriptedProvider([]), tools=[toolset])
        assert (toolset.opened, toolset.closed) == (2, 2)
        with pytest.raises(InvalidArgumentError, match="unique"):  # names clash once listed
            s.run("clash", provider=ScriptedProvider(["x"]), tools=[echo, toolset])
        assert (toolset.opened, toolset.closed) == (3, 3)
        with pytest.raises(InvalidArgumentError):
            s.run("bad", provider=ScriptedProvider(["x"]), tools=["echo"])  # type: ignore[list-item]


def test_a_long_tool_list_is_checked_for_shared_names_in_one_pass() -> None:
    """A server may list 100,000 tools: the check names each shared name once, sorted."""
    from plait.tools.base import duplicate_names

    names = [f"t{i}" for i in range(100_000)] + ["t7", "t3", "t7"]
    assert duplicate_names(iter(names)) == ["t3", "t7"]
    assert duplicate_names([]) == []
