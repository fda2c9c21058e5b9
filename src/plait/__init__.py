"""plait: the session layer for LLM agents.

Durable, branchable, compactable, resumable transcripts, in one Python API::

    from plait import Client

    with Client(".") as client:
        s = client.session
        s.inject({"role": "user", "content": "hello"})
        branch = s.fork()
"""

from plait.auth import (
    Authenticated,
    DurableSession,
    DurableSessions,
    ScopeAttenuationResult,
    ScopeViolation,
    actor_chain,
    actor_chain_validate_scope_attenuation,
    authenticate,
    bind_principal,
    push_actor,
)
from plait.client import Client, SessionCollection, SessionInfo, SessionStats
from plait.compaction import Compaction
from plait.context import ContextReport, ModelInfo, ModelLimits, Share
from plait.errors import (
    AuthError,
    ClientNotAttachedError,
    ControllerConflictError,
    InvalidArgumentError,
    InvalidMessageError,
    LiveClientError,
    NoSandboxError,
    NotControllerError,
    NothingToDoError,
    PlaitError,
    RunInterruptedError,
    RunTimeoutError,
    SandboxClosedError,
    ScopeViolationError,
    SessionBusyError,
    SessionClosedError,
    SessionExistsError,
    SessionLockedError,
    SessionLockTimeoutError,
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
from plait.live import LiveClient, LiveClientChange, LiveClients, PermissionRoute
from plait.records import (
    AssistantRecord,
    EventRecord,
    Message,
    OpaqueRecord,
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
    prompt_once,
    run_session,
)
from plait.store import MemoryStore, SQLiteStore, Store, open_store
from plait.views import ResumeInfo

__version__ = "0.1.0"

__all__ = [
    "Ancestry",
    "AssistantRecord",
    "AuthError",
    "Authenticated",
    "ClientNotAttachedError",
    "ControllerConflictError",
    "DurableSession",
    "DurableSessions",
    "LiveClient",
    "LiveClientChange",
    "LiveClientError",
    "LiveClients",
    "NotControllerError",
    "PermissionRoute",
    "ScopeAttenuationResult",
    "ScopeViolation",
    "ScopeViolationError",
    "actor_chain",
    "actor_chain_validate_scope_attenuation",
    "authenticate",
    "bind_principal",
    "prompt_once",
    "push_actor",
    "run_session",
    "ChunkTable",
    "Client",
    "EventRecord",
    "OpaqueRecord",
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
    "SessionLockTimeoutError",
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
    "Compaction",
    "ContextReport",
    "ModelInfo",
    "ModelLimits",
    "Share",
    "__version__",
    "export_bundle",
    "import_bundle",
    "open_store",
    "seed_from_jsonl",
    "to_jsonl",
    "write_bundle",
]
