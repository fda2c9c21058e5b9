"""One JSON shape for every error the service answers, with stable codes.

Every error body is ``{"error": {"code": "...", "message": "...", "details": ...}}``.
``code`` is stable (clients branch on it); ``message`` is for people and may
change. :func:`status_and_code` maps the :mod:`plait.errors` hierarchy to an
HTTP status and a code: bad input is 4xx, never 500 (decisions D83).
"""

from __future__ import annotations

from typing import Final

from plait.errors import (
    AdapterClosedError,
    AmbiguousSessionIdError,
    AuthError,
    BundleVersionError,
    ClientNotAttachedError,
    ControllerConflictError,
    ImportFormatError,
    InvalidArgumentError,
    InvalidMessageError,
    LiveClientError,
    MissingDependencyError,
    NoSandboxError,
    NotControllerError,
    NothingToDoError,
    PlaitError,
    ProviderError,
    RunInterruptedError,
    RunTimeoutError,
    SandboxClosedError,
    SandboxUnavailableError,
    ScopeViolationError,
    SessionBusyError,
    SessionClosedError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StaleSessionError,
    StoreCorruptWarning,
    StoreError,
    StorePartMissingError,
    ToolError,
    ToolServerError,
    UnknownOptionError,
    WriterLockLostError,
)
from plait.records import JSONValue

__all__ = [
    "CODES",
    "ApiError",
    "ApprovalNotFoundError",
    "ClientNotOwnedError",
    "error_body",
    "status_and_code",
]

# Most specific first: the first class an error is an instance of decides.
_MAP: Final[tuple[tuple[type[BaseException], int, str], ...]] = (
    (AmbiguousSessionIdError, 404, "ambiguous_session_id"),
    (SessionNotFoundError, 404, "session_not_found"),
    (ClientNotAttachedError, 404, "client_not_attached"),
    (SessionExistsError, 409, "session_exists"),
    (SessionBusyError, 409, "session_busy"),
    (WriterLockLostError, 409, "writer_lock_lost"),
    (SessionLockedError, 409, "session_locked"),
    (StaleSessionError, 409, "stale_session"),
    (SessionClosedError, 409, "session_closed"),
    (ControllerConflictError, 409, "controller_conflict"),
    (NothingToDoError, 409, "nothing_to_do"),
    (RunInterruptedError, 409, "run_interrupted"),
    (NotControllerError, 403, "not_controller"),
    (ScopeViolationError, 403, "scope_violation"),
    (LiveClientError, 403, "live_client_refused"),
    (AuthError, 401, "unauthorized"),
    (UnknownOptionError, 422, "unknown_option"),
    (InvalidMessageError, 422, "invalid_message"),
    (ImportFormatError, 422, "import_format"),
    (BundleVersionError, 422, "bundle_version"),
    (InvalidArgumentError, 422, "invalid_argument"),
    (RunTimeoutError, 504, "run_timeout"),
    (MissingDependencyError, 503, "missing_dependency"),
    (ProviderError, 502, "provider_error"),
    (ToolServerError, 502, "tool_server_error"),
    (NoSandboxError, 409, "no_sandbox"),
    (SandboxClosedError, 409, "sandbox_closed"),
    (AdapterClosedError, 409, "adapter_closed"),  # a framework adapter, never the server's own
    (SandboxUnavailableError, 503, "sandbox_unavailable"),
    (StorePartMissingError, 501, "store_part_missing"),  # the store's nature, not an outage
    (StoreError, 503, "store_error"),
    (StoreCorruptWarning, 503, "store_error"),  # only when warnings are turned into errors
    (ToolError, 500, "tool_error"),
    (PlaitError, 500, "internal_error"),
)

CODES: Final[dict[str, int]] = {
    **{code: status for _, status, code in _MAP},
    "invalid_request": 422,
    "unauthorized": 401,
    "forbidden": 403,
    "read_only_credential": 403,
    "client_not_owned": 403,
    "approval_not_found": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "internal_error": 500,
}
"""Every code the service answers with, and its HTTP status."""


class ApiError(Exception):
    """An error the service raises itself (not from :mod:`plait.errors`).

    Attributes:
        status: the HTTP status.
        code: the stable code (a key of :data:`CODES`).
        message: what went wrong, for people.
        details: more, as JSON (optional).
    """

    def __init__(self, status: int, code: str, message: str, details: JSONValue = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        super().__init__(message)


class ClientNotOwnedError(ApiError):
    """A principal spoke for a live client another principal attached (403 ``client_not_owned``).

    Attributes:
        session_id: the session.
        client_id: the client.
        owner: the principal that attached it (None: attached outside the service).
    """

    def __init__(self, session_id: str, client_id: str, owner: str | None) -> None:
        self.session_id = session_id
        self.client_id = client_id
        self.owner = owner
        who = "another principal" if owner else "a process outside this service"
        super().__init__(
            403,
            "client_not_owned",
            f"live client {client_id!r} of session {session_id!r} was attached by {who}; "
            "only the principal that attached it may speak for it",
        )


class ApprovalNotFoundError(ApiError):
    """No tool call of a run here waits for an answer under that id (404 ``approval_not_found``).

    Attributes:
        session_id: the session.
        call_id: the tool call's id.
    """

    def __init__(self, session_id: str, call_id: str) -> None:
        self.session_id = session_id
        self.call_id = call_id
        super().__init__(
            404,
            "approval_not_found",
            f"no tool call {call_id!r} of session {session_id!r} is waiting for an approval",
        )


def status_and_code(exc: BaseException) -> tuple[int, str]:
    """Return the HTTP status and stable code of an exception.

    Anything that is not a :class:`~plait.errors.PlaitError` or an
    :class:`ApiError` is ``(500, "internal_error")``.
    """
    if isinstance(exc, ApiError):
        return exc.status, exc.code
    for cls, status, code in _MAP:
        if isinstance(exc, cls):
            return status, code
    return 500, "internal_error"


def error_body(code: str, message: str, details: JSONValue = None) -> dict[str, JSONValue]:
    """Return the one error shape: ``{"error": {"code", "message"[, "details"]}}``."""
    inner: dict[str, JSONValue] = {"code": code, "message": message}
    if details is not None:
        inner["details"] = details
    return {"error": inner}
