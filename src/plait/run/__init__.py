"""The agent loop on a session: model call, tool calls (with approval), results, until done.

Importing this package registers the loop with the session layer, which is what
makes ``Session.prompt``, ``stream``, ``run`` and ``resume`` work (``import
plait`` does it). Every step is appended to the transcript as it happens, so the
transcript is valid whenever a run stops; see :mod:`plait.run.loop`.
"""

from plait._runtypes import (
    Approval,
    EventHook,
    IterationEnd,
    Question,
    RecordAdded,
    Run,
    RunEvent,
    RunOptions,
    RunResult,
    RunSpec,
    ToolFinished,
    ToolStarted,
    current_id,
    event_json,
)
from plait.run.loop import ASK_USER, CONTINUE, INTERRUPTED, drive, prompt, prompt_once, run_session

__all__ = [
    "ASK_USER",
    "CONTINUE",
    "INTERRUPTED",
    "Approval",
    "EventHook",
    "IterationEnd",
    "Question",
    "RecordAdded",
    "Run",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "RunSpec",
    "ToolFinished",
    "ToolStarted",
    "current_id",
    "drive",
    "event_json",
    "prompt",
    "prompt_once",
    "run_session",
]
