"""Helpers shared by the CLI tests."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import Result

from plait import Client, Session

Run = Callable[..., Result]


def conversation(client: Client, question: str = "How many files?") -> Session:
    """Store a session: system, user, assistant with a tool call, tool result, reply (5 msgs)."""
    s = client.sessions.new()
    s.transcript.inject_many(
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
            },
            {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "c1", "tool_name": "ls"},
            {"role": "assistant", "content": "Two files."},
        ]
    )
    return s


def assert_clean_error(result: Result, *fragments: str) -> None:
    """A non-zero exit with a one-line ``Error: ...`` on stderr and no traceback."""
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[-1]
