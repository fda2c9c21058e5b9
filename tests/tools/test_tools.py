"""The built-in tools and the @tool decorator: confinement, read-only roots, failures as results."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Literal

import pytest

from plait.errors import InvalidArgumentError
from plait.tools import (
    BUILTIN_TOOLS,
    ToolContext,
    ToolOutcome,
    list_files,
    read_file,
    shell,
    tool,
    write_file,
)
from plait.tools.base import Root


def run(coro: object) -> ToolOutcome:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "work").mkdir()
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "lib.txt").write_text("library")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    return ToolContext(tmp_path / "work", roots=(Root(tmp_path / "libs", "libs", True),))


def test_write_read_list(ctx: ToolContext) -> None:
    wrote = run(write_file.call(ctx, {"path": "a/b.txt", "content": "hello"}))
    assert wrote.ok and "5 characters" in wrote.content
    assert run(read_file.call(ctx, {"path": "a/b.txt"})) == ToolOutcome(True, "hello")
    listing = run(list_files.call(ctx, {}))
    assert listing.ok and listing.content.splitlines() == ["a/", "libs/ (mounted, read-only)"]
    assert run(read_file.call(ctx, {"path": "libs/lib.txt"})) == ToolOutcome(True, "library")


def test_paths_that_escape_are_failed_results_not_crashes(ctx: ToolContext) -> None:
    os.symlink(ctx.root.parent / "secret.txt", ctx.root / "link.txt")
    for bad in ("../secret.txt", "/etc/passwd", "link.txt", "a/../../secret.txt",
                "libs/../secret.txt"):
        out = run(read_file.call(ctx, {"path": bad}))
        assert not out.ok, bad
    assert "TOPSECRET" not in run(read_file.call(ctx, {"path": "link.txt"})).content


def test_read_only_roots_refuse_writes(ctx: ToolContext) -> None:
    out = run(write_file.call(ctx, {"path": "libs/new.txt", "content": "x"}))
    assert not out.ok and "read-only" in out.content
    assert not (ctx.roots[0].path / "new.txt").exists()


def test_shell_runs_in_the_workspace_with_a_timeout_and_an_output_cap(ctx: ToolContext) -> None:
    out = run(shell.call(ctx, {"command": "pwd; echo hi"}))
    assert out.ok and str(ctx.root.resolve()) in out.content and "hi" in out.content
    failed = run(shell.call(ctx, {"command": "exit 3"}))
    assert not failed.ok and failed.content.startswith("exit code 3")
    slow = run(shell.call(ctx, {"command": "sleep 5", "timeout": 1}))
    assert not slow.ok and "timed out" in slow.content
    small = ToolContext(ctx.root, max_output=100)
    big = run(shell.call(small, {"command": "yes | head -c 5000"}))
    assert len(big.content) < 200 and "more characters cut" in big.content


def test_bad_arguments_are_failed_results(ctx: ToolContext) -> None:
    assert not run(read_file.call(ctx, {})).ok
    assert not run(read_file.call(ctx, {"path": 5})).ok
    assert not run(read_file.call(ctx, {"path": "x", "colour": "red"})).ok
    assert not run(shell.call(ctx, {"command": "true", "timeout": 10_000})).ok


def test_the_decorator_builds_schemas_from_types(ctx: ToolContext) -> None:
    @tool
    def greet(name: str, times: int = 1, tone: Literal["warm", "dry"] = "warm",
              tags: list[str] | None = None) -> str:
        """Greet someone.

        More detail that is not the description.
        """
        return f"{tone} hello {name}" * times

    assert greet.spec() == {
        "name": "greet",
        "description": "Greet someone.",
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "times": {"type": "integer"},
                "tone": {"enum": ["warm", "dry"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    }
    assert run(greet.call(ctx, {"name": "Ada"})) == ToolOutcome(True, "warm hello Ada")
    assert not run(greet.call(ctx, {"name": "Ada", "tone": "loud"})).ok
    with pytest.raises(InvalidArgumentError):
        tool(lambda x: x)  # no annotation
    assert {t.name for t in BUILTIN_TOOLS} == {"shell", "read_file", "write_file", "list_files"}


def test_a_session_s_roots_and_mount_modes_reach_the_tools(tmp_path: Path) -> None:
    from plait import Client

    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir()
    with Client(tmp_path, store=":memory:") as client:
        s = client.open(workspace_policy={"default_mount_mode": "read_only"})
        s.workspace.add_root(str(tmp_path / "ro"))
        s.workspace.add_root(str(tmp_path / "rw"), mount_mode="read_write")
        with s.to("local"):
            ctx = ToolContext.from_roots(s.require_sandbox().root, s.workspace.list_roots())
            assert not run(write_file.call(ctx, {"path": "ro/x.txt", "content": "no"})).ok
            assert run(write_file.call(ctx, {"path": "rw/x.txt", "content": "yes"})).ok
            assert run(write_file.call(ctx, {"path": "own.txt", "content": "yes"})).ok
    assert (tmp_path / "rw" / "x.txt").read_text() == "yes"
    assert not (tmp_path / "ro" / "x.txt").exists()
