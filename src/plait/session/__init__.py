"""The session layer: the :class:`Session` handle and the parts behind it.

``Session`` is a thin facade holding the seeds' verbs, with five parts for the
rest (D400): :class:`SessionTranscript`, :class:`SessionWorkspace`,
:class:`SessionSettings`, :class:`SessionScratchpad` and :class:`SessionLive`.
Each concern has its own module working through the session's
:class:`~plait.session._head.Head`: ``writes`` (title, view, close, scratchpad),
``branching``, ``settings`` (settings, metadata, workspace and roots),
``binding`` (the sandbox), ``context`` and ``counting`` (the context report,
requests, compaction), ``runs`` (starting runs, the run board, usage),
``reading`` (snapshot, ancestry, resume state, view reads), ``streaming`` (reads
a batch at a time) and ``export``.
:class:`SessionHost` keeps one handle per id over a store.
"""

from plait.session._live_part import SessionLive
from plait.session._part import host_of
from plait.session._scratchpad_part import SessionScratchpad
from plait.session._settings_part import SessionSettings
from plait.session._transcript_part import SessionTranscript
from plait.session._turns import DEFAULT_LOCK_TIMEOUT, WRITER_LOCK_MODES, WriterLockMode
from plait.session._values import (
    MAX_TITLE,
    RootResult,
    ScratchpadUpdate,
    SessionUsage,
    Snapshot,
    validate_workspace_policy,
)
from plait.session._workspace_part import SessionWorkspace
from plait.session.functional import prompt_once, run_session
from plait.session.host import SessionHost
from plait.session.runs import RunBoard
from plait.session.session import ChunkTable, Session

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "MAX_TITLE",
    "WRITER_LOCK_MODES",
    "ChunkTable",
    "RootResult",
    "RunBoard",
    "ScratchpadUpdate",
    "Session",
    "SessionHost",
    "SessionLive",
    "SessionScratchpad",
    "SessionSettings",
    "SessionTranscript",
    "SessionUsage",
    "SessionWorkspace",
    "Snapshot",
    "WriterLockMode",
    "host_of",
    "prompt_once",
    "run_session",
    "validate_workspace_policy",
]
