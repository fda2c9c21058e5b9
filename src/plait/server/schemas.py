"""The request and response bodies of the HTTP API, as pydantic models.

The OpenAPI document is generated from the same code that checks the requests.

Request bodies forbid unknown keys: a misspelt option is a 422, never ignored
(principle 4, fail loud).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field

from plait.errors import PlaitError
from plait.providers import ModelSettings
from plait.server._schemas_base import _NON_BLANK, JsonObject, _In, _Out
from plait.server._schemas_live import (
    MAX_CLIENT_METADATA,
    ApprovalIn,
    ApprovalOut,
    ApprovalsOut,
    AttachIn,
    AuthSessionIn,
    AuthSessionOut,
    ClientInjectIn,
    ClientsOut,
    HeartbeatIn,
    LiveChangeOut,
    LiveClientOut,
    PendingApprovalOut,
    PermissionIn,
    PermissionOut,
    ReleaseIn,
    TakeoverIn,
    WhoAmIOut,
)
from plait.server._schemas_live import ClientId as ClientId
from plait.server._schemas_live import ClientMetadata as ClientMetadata

__all__ = [
    "ModelSettingsIn",
    "UncompactIn",
    "ModelSettingsOut",
    "ApprovalIn",
    "ApprovalOut",
    "ApprovalsOut",
    "AttachIn",
    "AuthSessionIn",
    "AuthSessionOut",
    "ClientInjectIn",
    "ClientsOut",
    "CompactIn",
    "CompactOut",
    "ContextOut",
    "ContextReportOut",
    "CloseIn",
    "CreateSessionIn",
    "ErrorInfo",
    "ErrorResponse",
    "ForkAtIn",
    "ForkIn",
    "HeartbeatIn",
    "MAX_CLIENT_METADATA",
    "LineageBoxOut",
    "LineageOut",
    "LiveChangeOut",
    "LiveClientOut",
    "MessageOut",
    "MessagesIn",
    "MessagesOut",
    "OkOut",
    "PendingApprovalOut",
    "PermissionIn",
    "PermissionOut",
    "RecordOut",
    "RecordsOut",
    "ReleaseIn",
    "RenameIn",
    "ResumeIn",
    "RunIn",
    "RunOut",
    "RunStateOut",
    "SessionDetail",
    "SessionListOut",
    "SessionOut",
    "ShareOut",
    "SteerIn",
    "TakeoverIn",
    "WhoAmIOut",
]

# The live clients, approvals and authentication bodies are in _schemas_live.py.


# -- errors -----------------------------------------------------------------------------


class ErrorInfo(_Out):
    """What went wrong."""

    code: str = Field(description="A stable code clients branch on (e.g. session_not_found).")
    message: str = Field(description="What went wrong, for people; may change.")
    details: Any = Field(default=None, description="More, when there is more (e.g. which field).")


class ErrorResponse(_Out):
    """The one shape of every error the service answers."""

    error: ErrorInfo


class OkOut(_Out):
    """A verb that succeeded and has nothing else to say."""

    ok: bool = True


# -- sessions ---------------------------------------------------------------------------


class SessionOut(_Out):
    """A stored session as lists show it."""

    id: str
    title: str | None
    created_at: str
    updated_at: str
    length: int = Field(description="Messages in view (events not counted).")
    workspace: str
    parent_session_ids: list[str]
    lineage_operator: str | None
    status: str
    running: bool = Field(description="Whether a run is in progress on it in this server.")
    short_id: str | None = Field(
        default=None, description="The shortest prefix of the id that is unique in the store."
    )
    first_prompt: str | None = Field(
        default=None, description="The first user message's text on one line (lists tell by it)."
    )
    source: str | None = Field(
        default=None, description="The agent that wrote the transcript (plait, claude-code ...)."
    )


class SearchHitOut(_Out):
    """One message a search found, in one session that shows it."""

    session_id: str
    title: str | None
    position: int = Field(description="The message's position (a record seq) in the session.")
    message: int = Field(description="The message's number in the session's view, from 0.")
    role: str
    snippet: str = Field(description="The matched text; each matched term between « and ».")
    created_at: str


class SessionListOut(_Out):
    """``GET /sessions``."""

    sessions: list[SessionOut]
    hits: list[SearchHitOut] | None = Field(
        default=None,
        description="With ``q``: the messages found, newest first; ``sessions`` are theirs.",
    )


class SessionDetail(SessionOut):
    """One session: seed 003's snapshot fields (without the transcript) and its live clients."""

    version: int
    system_prompt: str | None
    tool_format: str
    actor_chain: JsonObject | None
    scratchpad: JsonObject | None
    scratchpad_version: int
    parent_id: str | None
    child_ids: list[str]
    branched_at_event_index: int | None
    metadata: JsonObject
    end_seq: int = Field(description="The seq the next record will have.")
    live_clients: list[LiveClientOut]
    live_controller_id: str | None


class CreateSessionIn(_In):
    """``POST /sessions``: open (idempotent) or create a session."""

    id: str | None = Field(default=None, description="Open this id, creating it if unknown.")
    title: str | None = Field(default=None, min_length=1, max_length=200, pattern=_NON_BLANK)
    messages: list[JsonObject] | None = Field(
        default=None, description="Messages to start with (a new id only), all or nothing."
    )
    workspace_anchor: str | None = Field(default=None, min_length=1)
    workspace_policy: JsonObject | None = None
    client_id: str | None = Field(
        default=None,
        description="With a live controller attached, it must be the caller to change an "
        "existing session's workspace anchor or policy.",
    )


class RenameIn(_In):
    """``PATCH /sessions/{id}``."""

    title: str = Field(min_length=1, max_length=200, pattern=_NON_BLANK)


class ForkIn(_In):
    """``POST /sessions/{id}/fork``.

    The branch is bound to the caller's principal; an agent principal's branch
    instead pushes the agent onto the parent's actor chain (scopes checked).
    """

    dst: str | None = Field(default=None, description="The new session's id (default: minted).")


class ForkAtIn(_In):
    """``POST /sessions/{id}/fork_at``."""

    keep_first: int = Field(ge=0, description="Messages the branch keeps.")
    dst: str | None = None


class CloseIn(_In):
    """``POST /sessions/{id}/close``."""

    status: str | JsonObject | None = Field(
        default=None, description="A reason (``timeout``) or a dict such as {reason: ...}."
    )
    client_id: str | None = Field(
        default=None, description="The live controller, when one is attached (else 403)."
    )


class CompactIn(_In):
    """``POST /sessions/{id}/compact``: the model-free default strategy."""

    dry_run: bool = Field(default=False, description="Say what would be folded; write nothing.")
    keep_last: int | None = Field(
        default=None, ge=0, le=100_000, description="Keep the last N messages (default 12)."
    )
    client_id: str | None = Field(
        default=None, description="With a live controller attached, it must be the caller."
    )


class UncompactIn(_In):
    """``POST /sessions/{id}/uncompact`` (a body is optional)."""

    client_id: str | None = Field(
        default=None, description="With a live controller attached, it must be the caller."
    )


class RewindIn(_In):
    """``POST /sessions/{id}/rewind``: move the head back in place, or undo a rewind."""

    keep_first: int | None = Field(
        default=None, ge=0, le=2**31, description="Messages to keep (omit with ``undo``)."
    )
    undo: bool = Field(default=False, description="Bring back what the newest rewind hid.")
    client_id: str | None = Field(
        default=None, description="With a live controller attached, it must be the caller."
    )


class RewindOut(_Out):
    """The session after a rewind, and the hidden head that keeps what it held."""

    session_id: str
    length: int = Field(description="Messages the session has now.")
    version: int
    hidden_head: str = Field(description="The id of the hidden head holding the old head.")


class CompactOut(_Out):
    """What a compaction folded (or, with ``dry_run``, would fold)."""

    session_id: str
    dry_run: bool
    compressed: int = Field(description="Messages folded into the summary.")
    kept: int = Field(description="Messages kept as they are after it.")
    folds: list[int] = Field(description="The folded positions: [from, to).")
    summary: str | None = Field(description="The summary written (null for a dry run).")


class ShareOut(_Out):
    """One source's part of the context."""

    name: str
    tokens: int
    items: int


class ContextReportOut(_Out):
    """Seed 001's context report; the shares add up to ``used``."""

    window: int
    used: int
    free: int
    fraction: float
    from_provider: bool
    measured_by: str
    partial: bool
    shares: list[ShareOut]
    window_source: Literal["table", "server", "environment", "settings", "guess"] = Field(
        description="Where the window came from: the model family's table, the model's "
        "server, an environment variable or the session's model_info setting; guess when "
        "none of them knew the model (the window is plait's default)."
    )


class ContextOut(_Out):
    """``GET /sessions/{id}/context``."""

    session_id: str
    report: ContextReportOut | None = Field(description="Null before the first reply.")


class MessageOut(_Out):
    """A prompt-visible message (seed 001's fields)."""

    role: str
    text: str
    tool_calls: list[JsonObject]
    tool_call_id: str | None
    tool_name: str | None
    ok: bool | None
    images: int
    seq: int


class MessagesOut(_Out):
    """``GET /sessions/{id}/history``."""

    session_id: str
    full: bool
    messages: list[MessageOut]


class MessagesIn(_In):
    """``POST /sessions/{id}/messages``: inject messages (seed 003 ``inject``), all or nothing."""

    messages: list[JsonObject] = Field(min_length=1, max_length=1000)
    client_id: str | None = Field(
        default=None, description="The live client writing; must be the controller if there is one."
    )


class RecordOut(_Out):
    """One record of a transcript."""

    seq: int
    id: str
    kind: str
    created_at: str
    created_at_us: int
    payload: JsonObject
    meta: JsonObject
    tokens: int | None


class RecordsOut(_Out):
    """``GET /sessions/{id}/records``."""

    session_id: str
    records: list[RecordOut]
    end_seq: int = Field(description="The seq the next record will have.")
    head: str | None = Field(
        default=None,
        description=(
            "The head these seqs count on: resume its event stream from here with "
            "``Last-Event-ID: <seq>~<head>``, which notices a rewind in between."
        ),
    )


class LineageBoxOut(_Out):
    """One session in a lineage drawing."""

    id: str
    title: str | None
    operator: str | None
    parent_ids: list[str]
    messages: int | None
    deleted: bool


class LineageOut(_Out):
    """``GET /sessions/{id}/lineage``: the sessions around this one, and the drawing."""

    session_id: str
    boxes: list[LineageBoxOut]
    svg: str = Field(description="An SVG picture of the lineage; every text in it is escaped.")


# -- runs -------------------------------------------------------------------------------


def _model_settings(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Checked by the one typed object every face uses; stored in its own JSON form."""
    if value is None:
        return None
    try:
        return dict(ModelSettings.from_json(value).to_json())
    except PlaitError as exc:
        raise ValueError(str(exc)) from None


_SETTING_NAMES: Final = ", ".join(ModelSettings.__dataclass_fields__)

ModelSettingsJson = Annotated[
    JsonObject | None,
    AfterValidator(_model_settings),
    Field(
        description=f"Model settings ({_SETTING_NAMES}); laid over the ones the session "
        "keeps, and kept for its next runs (a tool_choice only for this run). Else 422."
    ),
]


class RunIn(_In):
    """``POST /sessions/{id}/runs``."""

    text: str = Field(min_length=1, max_length=1_000_000, pattern=_NON_BLANK)
    client_id: str | None = Field(
        default=None, description="The live client asking; must be the controller if there is one."
    )
    max_steps: int = Field(default=20, ge=1, le=100)
    timeout: float | None = Field(default=None, gt=0, le=86_400)
    stream: bool = Field(
        default=False,
        description="Answer with the run's events as text/event-stream instead of 202 JSON.",
    )
    model_settings: ModelSettingsJson = None


class ResumeIn(_In):
    """``POST /sessions/{id}/resume``."""

    client_id: str | None = None
    max_steps: int = Field(default=20, ge=1, le=100)
    timeout: float | None = Field(default=None, gt=0, le=86_400)
    stream: bool = False
    model_settings: ModelSettingsJson = None


class ModelSettingsIn(_In):
    """``PUT /sessions/{id}/model-settings``: replace the settings the session keeps."""

    model_settings: ModelSettingsJson = None
    client_id: str | None = Field(
        default=None, description="With a live controller attached, it must be the caller."
    )


class ModelSettingsOut(_Out):
    """The model settings a session keeps (an empty object: none)."""

    session_id: str
    model_settings: JsonObject


class RunOut(_Out):
    """A run that was started: follow it on ``GET /sessions/{id}/events``."""

    session_id: str
    run_id: str
    running: bool
    events_url: str


class RunStateOut(_Out):
    """``GET /sessions/{id}/runs/current``."""

    session_id: str
    running: bool
    run_id: str | None
    replica_id: str | None = Field(
        default=None, description="The replica driving the run in progress (null: none)."
    )
    started_at: str | None = Field(
        default=None, description="When the run in progress started (RFC 3339; null: none)."
    )
    resumable: JsonObject | None = Field(
        description="How resume would pick up an interrupted request, or null."
    )


class SteerIn(_In):
    """``POST /sessions/{id}/runs/current/steer``."""

    message: str = Field(min_length=1, max_length=1_000_000, pattern=_NON_BLANK)
    client_id: str | None = None
