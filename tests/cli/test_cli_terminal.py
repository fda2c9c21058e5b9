"""No control sequence stored in a transcript reaches the terminal raw.

A title, a message, a tool's output or an imported line may hold CSI / OSC
sequences, carriage returns, C1 controls or bidirectional overrides; every
command that prints stored text shows them as visible escapes.
"""

from __future__ import annotations

import pytest

from plait import Client
from plait.cli._terminal import safe

from ._helpers import Run

NASTY = "A\x1b]0;pwned\x07B\x1b[2J\x1b]52;c;Y2xpcA==\x1b\\C\rD\x9b31mE\u202eF\x00G"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x00")


def _stored(api: Client) -> str:
    s = api.sessions.new()
    s.transcript.inject_many(
        [
            {"role": "user", "content": NASTY},
            {
                "role": "assistant",
                "content": NASTY,
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"p": NASTY}}],
            },
            {"role": "tool", "content": NASTY, "tool_call_id": "c1", "tool_name": "ls"},
        ]
    )
    # A title holds no control character (they are refused), but it may hold a bidi
    # override, which a terminal must not act on either.
    s.rename("T\u202eF title")
    return s.id


def test_safe_shows_controls_as_escapes() -> None:
    shown = safe(NASTY)
    assert not any(c in shown for c in RAW)
    assert "\\x1b]0;pwned\\x07B" in shown and "\\u202eF" in shown and "\\x9b31m" in shown
    assert safe(shown) == shown
    assert safe("line 1\r\nline\t2\n") == "line 1\nline\t2\n"


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "show", "latest"),
        ("sessions", "show", "latest", "--tail", "5"),
        ("sessions", "list"),
        ("sessions", "tree", "latest"),
        ("sessions", "rename", "latest", "x\u202ey"),
    ],
)
def test_commands_print_stored_text_escaped(
    run: Run, api: Client, args: tuple[str, ...], color: bool
) -> None:
    _stored(api)
    result = run(*args, env={"FORCE_COLOR": "1"} if color else {"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    # With colour on, rich's own styles are escape sequences; none of the stored ones is.
    for raw in ("\x1b]", "\x07", "\x9b", "\r", "\u202e", "\x00", "\x1b[2J", "\x1b[31my"):
        assert raw not in out, (raw, out)
    if not color:
        assert "\x1b" not in out
    assert "\\x1b" in out or "\\u001b" in out or "\\u202e" in out


def test_a_title_with_control_characters_is_refused_cleanly(run: Run, api: Client) -> None:
    _stored(api)
    result = run("sessions", "rename", "latest", "x\x1b[31my")
    assert result.exit_code != 0 and "\x1b[31m" not in result.output
    assert "control characters" in result.output
