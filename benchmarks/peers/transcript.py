"""The one synthetic agent transcript every peer stores, in each peer's own item shape.

An agent loop repeats four items: a user message, an assistant tool call, the tool's
result and the assistant's answer. Texts are the ~200-character messages of
``benchmarks/cases.py``; the tool call reads a file and its result is as long as a
message. Item ``i`` is the same content for every peer, so a transcript of ``n``
items holds the same conversation whichever store holds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from cases import message

__all__ = ["CYCLE", "TOOL", "Step", "step"]

CYCLE = 4
"""Items per agent turn: user, tool call, tool result, answer."""
TOOL = "read_file"
"""The one tool the synthetic agent calls."""

Kind = Literal["user", "call", "result", "answer"]
_KINDS: tuple[Kind, ...] = ("user", "call", "result", "answer")


@dataclass(frozen=True)
class Step:
    """Item ``i`` of the transcript, before any peer gives it its shape."""

    i: int
    kind: Kind
    text: str
    """The message text (the tool result's output for ``result``; empty for ``call``)."""
    call_id: str
    """The id joining a tool call to its result (the turn's)."""
    arguments: dict[str, str]
    """The tool call's arguments (the turn's)."""

    @property
    def turn(self) -> int:
        """The agent turn this item belongs to (0-based)."""
        return self.i // CYCLE

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text an OpenAI function call carries."""
        return json.dumps(self.arguments)


def step(i: int) -> Step:
    """Return item ``i`` of the synthetic transcript."""
    kind = _KINDS[i % CYCLE]
    turn = i // CYCLE
    text = "" if kind == "call" else message(i)["content"]
    return Step(i, kind, text, f"call_{turn:07d}", {"path": f"src/module_{turn % 97}.py"})
