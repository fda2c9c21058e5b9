"""The agent loop: model call, tool calls (with approval), results, until done.

The loop sits below the session layer and drives any :class:`RunTarget` (a
:class:`plait.Session` is one): ``Session.prompt``, ``stream``, ``run`` and
``resume`` call :func:`drive` directly. Every step is appended to the transcript
as it happens, so the transcript is valid whenever a run stops; see
:mod:`plait.run.loop`.

The functional forms that make sessions (``run_session``, ``prompt_once``)
live with the session layer: ``plait.run_session``, ``plait.prompt_once``.
"""

from __future__ import annotations

from plait.run.events import (
    DENIED,
    Approval,
    Denied,
    EndReason,
    EventHook,
    IterationEnd,
    Question,
    RecordAdded,
    RunEnded,
    RunEvent,
    RunOptions,
    RunResult,
    RunSpec,
    ToolFinished,
    ToolStarted,
    event_json,
)
from plait.run.handle import Run, as_current, check_timeout, current_id
from plait.run.loop import ASK_USER, CONTINUE, INTERRUPTED, drive, prompt
from plait.run.target import RunTarget
from plait.run.worker import StoreWorker

__all__ = [
    "ASK_USER",
    "CONTINUE",
    "DENIED",
    "Denied",
    "INTERRUPTED",
    "Approval",
    "EndReason",
    "EventHook",
    "IterationEnd",
    "Question",
    "RecordAdded",
    "Run",
    "RunEnded",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "RunSpec",
    "RunTarget",
    "StoreWorker",
    "ToolFinished",
    "ToolStarted",
    "as_current",
    "check_timeout",
    "current_id",
    "drive",
    "event_json",
    "prompt",
]
