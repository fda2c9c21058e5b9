"""plait: the session layer for LLM agents.

Durable, branchable, compactable, resumable transcripts, in one Python API::

    from plait import Client

    with Client(".") as client:
        s = client.session
        s.inject({"role": "user", "content": "hello"})
        branch = s.fork()
"""

from plait.client import Client, SessionCollection, SessionInfo, SessionStats
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    NoSandboxError,
    NothingToDoError,
    PlaitError,
    RunInterruptedError,
    RunTimeoutError,
    SandboxClosedError,
    SessionBusyError,
    SessionClosedError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StaleSessionError,
    UnknownOptionError,
)
from plait.interop import (
    SeedResult,
    export_bundle,
    import_bundle,
    seed_from_jsonl,
    to_jsonl,
    write_bundle,
)
from plait.lineage import Ancestry
from plait.records import (
    AssistantRecord,
    EventRecord,
    Message,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolCallInfo,
    ToolRecord,
    UserRecord,
)
from plait.run import (
    IterationEnd,
    RecordAdded,
    Run,
    RunEvent,
    RunResult,
    ToolFinished,
    ToolStarted,
    current_id,
)
from plait.sandbox import Sandbox
from plait.session import (
    ChunkTable,
    RootResult,
    ScratchpadUpdate,
    Session,
    SessionUsage,
    Snapshot,
)
from plait.store import MemoryStore, SQLiteStore, Store, open_store
from plait.views import ResumeInfo

__version__ = "0.1.0"

__all__ = [
    "Ancestry",
    "AssistantRecord",
    "ChunkTable",
    "Client",
    "EventRecord",
    "InvalidArgumentError",
    "InvalidMessageError",
    "MemoryStore",
    "Message",
    "NothingToDoError",
    "RunInterruptedError",
    "RunTimeoutError",
    "SessionBusyError",
    "PlaitError",
    "NoSandboxError",
    "Record",
    "RootResult",
    "SQLiteStore",
    "Sandbox",
    "SandboxClosedError",
    "ScratchpadUpdate",
    "SeedResult",
    "Session",
    "SessionClosedError",
    "SessionCollection",
    "SessionExistsError",
    "SessionInfo",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStats",
    "Snapshot",
    "StaleSessionError",
    "Store",
    "SummaryRecord",
    "SystemRecord",
    "ToolCall",
    "ToolCallInfo",
    "ToolRecord",
    "UnknownOptionError",
    "UserRecord",
    "IterationEnd",
    "RecordAdded",
    "Run",
    "RunEvent",
    "RunResult",
    "ToolFinished",
    "ToolStarted",
    "current_id",
    "SessionUsage",
    "ResumeInfo",
    "__version__",
    "export_bundle",
    "import_bundle",
    "open_store",
    "seed_from_jsonl",
    "to_jsonl",
    "write_bundle",
]
