"""The bodies of live clients, approvals and authentication in the HTTP API.

Private: import these models from :mod:`plait.server.schemas`, which re-exports them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field

from plait._checks import check_json
from plait.server._schemas_base import _NON_BLANK, JsonObject, _In, _Out

ClientId = Field(min_length=1, max_length=200, pattern=r"^\S(.*\S)?$")

MAX_CLIENT_METADATA: Final = 4096
"""The longest a live client's metadata may be, as JSON, in characters.

Any credential may attach an observer and heartbeat, and each change is kept in
the store and the transcript: what a reader may write stays small.
"""
_CLIENT_METADATA_DEPTH: Final = 8


def _small_metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        check_json(
            value,
            "a live client's metadata",
            max_depth=_CLIENT_METADATA_DEPTH,
            max_chars=MAX_CLIENT_METADATA,
        )
    return value


ClientMetadata = Annotated[
    JsonObject | None,
    AfterValidator(_small_metadata),
    Field(
        description=f"Small JSON about the client: at most {MAX_CLIENT_METADATA} characters "
        f"as JSON, {_CLIENT_METADATA_DEPTH} levels deep (else 422)."
    ),
]


# -- live clients -----------------------------------------------------------------------


class LiveClientOut(_Out):
    """A client attached to a session."""

    session_id: str
    client_id: str
    mode: str
    attached_at: str
    last_seen_at: str
    metadata: JsonObject


class ClientsOut(_Out):
    """``GET /sessions/{id}/clients``."""

    session_id: str
    controller_id: str | None
    clients: list[LiveClientOut]


class LiveChangeOut(_Out):
    """What attach, takeover, release or heartbeat did."""

    ok: bool
    action: str
    session_id: str
    client_id: str
    mode: str | None
    controller_id: str | None
    demoted_id: str | None
    released_control: bool
    client: LiveClientOut | None
    event_seq: int


class AttachIn(_In):
    """``POST /sessions/{id}/clients``."""

    client_id: str = ClientId
    mode: Literal["observer", "controller"] = "observer"
    takeover: bool = False
    metadata: ClientMetadata = None


class TakeoverIn(_In):
    """``POST /sessions/{id}/clients/{client_id}/takeover``."""

    metadata: ClientMetadata = None


class HeartbeatIn(_In):
    """``POST /sessions/{id}/clients/{client_id}/heartbeat``."""

    metadata: ClientMetadata = None


class ReleaseIn(_In):
    """``POST /sessions/{id}/clients/{client_id}/release``."""

    reason: str | None = Field(default=None, max_length=1000)
    metadata: ClientMetadata = None


class ClientInjectIn(_In):
    """``POST /sessions/{id}/clients/{client_id}/inject``: the controller's prompt."""

    content: str = Field(min_length=1, max_length=1_000_000, pattern=_NON_BLANK)
    metadata: ClientMetadata = None


class PermissionIn(_In):
    """``POST /sessions/{id}/clients/{client_id}/permissions``."""

    request: JsonObject
    metadata: ClientMetadata = None


class PermissionOut(_Out):
    """A permission request whose routing the controller claimed."""

    ok: bool
    session_id: str
    client_id: str
    request_id: str
    request: JsonObject
    event_seq: int


# -- approvals --------------------------------------------------------------------------


class PendingApprovalOut(_Out):
    """A tool call of a run waiting for the controller's answer."""

    call_id: str
    run_id: str
    tool: str
    arguments: JsonObject
    controller_id: str = Field(description="The controller the request was routed to.")
    request_id: str = Field(description="The request_id of its permission route event.")
    requested_at: str
    timeout: float = Field(description="Seconds it waits before it is denied.")


class ApprovalsOut(_Out):
    """``GET /sessions/{id}/approvals``."""

    session_id: str
    approvals: list[PendingApprovalOut]


class ApprovalIn(_In):
    """``POST /sessions/{id}/approvals/{call_id}``: the controller's answer."""

    client_id: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^\S(.*\S)?$",
        description="The live controller answering (attached by this credential's principal).",
    )
    approve: bool = Field(description="True runs the tool call; false gives the model a denial.")


class ApprovalOut(_Out):
    """An answered approval."""

    ok: bool = True
    session_id: str
    call_id: str
    run_id: str
    tool: str
    approve: bool
    client_id: str


# -- auth -------------------------------------------------------------------------------


class WhoAmIOut(_Out):
    """``GET /auth/whoami``: who the credential stands for."""

    principal: str
    method: str
    scopes: list[str]
    expires_at: str | None


class AuthSessionIn(_In):
    """``POST /auth/sessions``: mint a durable bearer session (seed 003)."""

    principal: str = Field(min_length=1, max_length=200, pattern=_NON_BLANK)
    ttl_seconds: int = Field(gt=0, le=366 * 86_400)
    attributes: JsonObject | None = None
    scopes: list[str] | None = Field(
        default=None, description="Scopes granted; without 'write' the token is read-only."
    )


class AuthSessionOut(_Out):
    """A durable bearer session; ``id`` is the token, returned only when it is made."""

    id: str | None
    principal: str
    created_at: str
    last_seen_at: str
    expires_at: str
    attributes: JsonObject
    scopes: list[str]
    handle: str
