"""Every exception plait raises on purpose.

All of them derive from one base, so ``except PlaitError`` catches whatever the
library meant to tell you. Errors about bad input also derive from the builtin
you would expect (``ValueError``, ``LookupError``), so code written against the
seeds' documented ``ValueError`` keeps working.

The hierarchy::

    PlaitError
    ├── InvalidArgumentError (ValueError)      bad input; nothing was written
    │   ├── UnknownOptionError                 an option key plait does not know
    │   ├── InvalidMessageError                a message without a role, an unknown role, ...
    │   ├── SearchQueryError                   a search query the full-text engine cannot parse
    │   ├── ImportFormatError                  a transcript to import is malformed (names the line)
    │   ├── ToolSchemaError                    a tool function's parameters JSON cannot describe
    │   ├── BundleVersionError                 a session bundle of a schema this plait cannot read
    │   └── WorkspaceTooDeepError              folders nest deeper than plait walks
    ├── SessionNotFoundError (LookupError)     unknown, unreadable, or leaves the store
    │   └── AmbiguousSessionIdError            an id prefix that several sessions share
    ├── SessionExistsError                     a new session's id is already taken
    ├── SessionClosedError                     a write to a session that was closed
    ├── SessionLockedError                     another process has the session open for writing
    │   ├── SessionLockTimeoutError (TimeoutError)  still taken after lock_timeout
    │   ├── WriterLockLostError                this process's lock was lost and taken by another
    │   └── ThreadConflictError                another run continued a LangGraph thread first
    ├── NothingToDoError                       the verb had nothing to act on (says why)
    ├── SessionBusyError                       a run is already in progress on this session/client
    ├── RunTimeoutError (TimeoutError)         a run passed its timeout; resume() picks it up
    ├── RunInterruptedError                    a run was cancelled; the transcript stays valid
    ├── NoSandboxError (RuntimeError)          "no sandbox to take": no target, no handle
    ├── SandboxClosedError (RuntimeError)      "session sandbox is closed"
    ├── SandboxUnavailableError (RuntimeError) a backend cannot confine tools here (says why)
    ├── MissingDependencyError (ImportError)   an optional extra is not installed
    ├── AdapterClosedError (RuntimeError)      a framework adapter used after its close()
    ├── ToolError                              raised in a tool: a failure the model reads
    ├── ToolServerError                        an MCP tool server could not be started or listed
    ├── ProviderError                          a model provider could not answer
    │   ├── MissingCredentialsError            no API key: names the variable to set
    │   ├── ProviderResponseError              it answered with something unusable
    │   │   ├── ToolArgumentsError             a tool call's arguments are not a JSON object
    │   │   └── ReplyTooLargeError             a reply passed its cap (text, arguments, calls)
    │   ├── ProviderStalledError (TimeoutError)  the stream sent nothing new for its idle timeout
    │   └── ScriptExhaustedError               the scripted provider ran out of replies
    ├── StoreError                             the store itself could not do its job
    │   ├── StaleSessionError                  compare-and-set on the session head failed
    │   ├── SchemaTooNewError                  the database was written by a newer plait
    │   ├── SchemaOutdatedError                the database needs ``plait db migrate``
    │   ├── StoreCorruptError                  a stored row could not be decoded
    │   ├── StoreNotFoundError (FileNotFoundError)  a reader named a store file that is not there
    │   ├── NotAStoreError                     the file named is not a SQLite database at all
    │   ├── StorePartMissingError              the store offers no part the verb needs
    │   └── EncryptionKeyError                 the store's master key is missing or wrong
    │       ├── EncryptionKeyMissingError      an encrypted store opened without a key
    │       └── EncryptionKeyMismatchError     not the store's key (its check value differs)
    ├── AuthError                              a credential or actor chain was refused
    │   └── ScopeViolationError                a child actor claims scopes its parent lacks
    └── LiveClientError                        a live client may not do that
        ├── ControllerConflictError            a second controller without takeover
        ├── NotControllerError                 only the active controller injects or routes
        └── ClientNotAttachedError (LookupError)  the client is not attached

A warning is drawn apart, since it is issued, not raised (``warnings.warn``)::

    PlaitError
    └── StoreCorruptWarning (UserWarning)      a listing left out rows it could not decode
"""

from __future__ import annotations

import reprlib
import sys
from typing import Any

__all__ = [
    "AdapterClosedError",
    "AmbiguousSessionIdError",
    "AuthError",
    "BundleVersionError",
    "ClientNotAttachedError",
    "ControllerConflictError",
    "LiveClientError",
    "NotControllerError",
    "ScopeViolationError",
    "ImportFormatError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "SearchQueryError",
    "StorePartMissingError",
    "MissingDependencyError",
    "NoSandboxError",
    "NothingToDoError",
    "SandboxClosedError",
    "SandboxUnavailableError",
    "PlaitError",
    "ProviderError",
    "MissingCredentialsError",
    "ProviderResponseError",
    "SchemaOutdatedError",
    "ScriptExhaustedError",
    "SchemaTooNewError",
    "RunInterruptedError",
    "RunTimeoutError",
    "SessionBusyError",
    "SessionClosedError",
    "SessionExistsError",
    "SessionLockTimeoutError",
    "SessionLockedError",
    "SessionNotFoundError",
    "StaleSessionError",
    "ThreadConflictError",
    "StoreCorruptError",
    "EncryptionKeyError",
    "EncryptionKeyMismatchError",
    "EncryptionKeyMissingError",
    "StoreNotFoundError",
    "NotAStoreError",
    "StoreCorruptWarning",
    "StoreError",
    "ToolArgumentsError",
    "ReplyTooLargeError",
    "ProviderStalledError",
    "ToolError",
    "ToolSchemaError",
    "ToolServerError",
    "UnknownOptionError",
    "WorkspaceTooDeepError",
    "WriterLockLostError",
]


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 210, 120, 60


def shown(value: object) -> str:
    """``repr(value)`` bounded for an error message: a few levels deep, long parts elided.

    A caller's value may be anything (a list nested a thousand deep, a
    gigabyte string, a huge int): its plain ``repr`` could raise
    ``RecursionError`` or fill a log. A string of up to 200 characters (any
    session id) is shown whole.
    """
    try:
        return _REPR.repr(value)
    except Exception:  # a hostile __repr__: say what it was, not what it says
        return f"<{type(value).__name__}>"


class PlaitError(Exception):
    """The base of every error plait raises on purpose.

    Every one pickles and unpickles whole, attributes included (a worker process or a
    task queue sends errors back that way): most take other arguments than the message
    their base class keeps in ``args``, so unpickling rebuilds them without calling
    their ``__init__`` again.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def _rebuilt(cls: type[PlaitError], args: tuple[Any, ...], state: dict[str, Any]) -> PlaitError:
    """A pickled error, made again from its message arguments and attributes."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidArgumentError(PlaitError, ValueError):
    """An argument is out of range or of the wrong shape; nothing was written."""


class UnknownOptionError(InvalidArgumentError):
    """An options mapping holds a key the verb does not accept.

    Attributes:
        keys: the unknown keys, sorted.
    """

    def __init__(self, verb: str, keys: list[str], allowed: list[str]) -> None:
        self.keys = sorted(keys)
        super().__init__(
            f"{verb}: unknown option(s) {', '.join(map(repr, self.keys))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )


class InvalidMessageError(InvalidArgumentError):
    """A message to inject is malformed: no role, an unknown role, a bad field."""


class SearchQueryError(InvalidArgumentError):
    """A search query the store's full-text engine cannot parse.

    An unclosed quote, a stray operator: nothing was searched.
    """


class ImportFormatError(InvalidArgumentError):
    """A transcript file to import cannot be read as the format it claims to be.

    Nothing was imported: an importer reads and checks the whole file before it
    creates a session.

    Attributes:
        path: the file (as given), or None for text that came from no file.
        line: the 1-based line the problem is on, or None when it concerns the whole file.
        reason: what is wrong, without the location.
    """

    def __init__(self, path: str | None, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = path if path is not None else "<transcript>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {reason}")


class WorkspaceTooDeepError(InvalidArgumentError):
    """A workspace's (or a checkpoint's) folders nest deeper than plait walks.

    A checkpoint of such a folder is not taken (a run goes on without one) and
    a checkpoint tree that deep is not restored; nothing was written.

    Attributes:
        limit: the deepest nesting plait walks, in folders.
    """

    def __init__(self, what: str, limit: int) -> None:
        self.limit = limit
        super().__init__(f"{what} nests folders more than {limit} deep; plait walks {limit}")


class BundleVersionError(InvalidArgumentError):
    """A session bundle's ``schema`` is one this plait does not read (usually a newer one).

    Nothing was imported.

    Attributes:
        schema: the bundle's schema, e.g. ``plait.bundle.v2``.
        supported: the schema this plait reads.
    """

    def __init__(self, schema: str, supported: str) -> None:
        self.schema = schema
        self.supported = supported
        super().__init__(
            f"bundle schema {shown(schema)} is not one this plait reads ({supported}); "
            "upgrade plait, or export the bundle again with this version"
        )


class SessionNotFoundError(PlaitError, LookupError):
    """No readable session has this id in this store.

    Raised for an id that does not exist, one that cannot be read, one that was
    deleted, and one that is not a valid session id at all (a path such as
    ``../x``, an absolute path, a NUL byte): such an id could never name a
    session in the store, so it is treated as unknown rather than resolved.

    Attributes:
        session_id: the id asked for (as given).
    """

    def __init__(self, session_id: object, reason: str = "no such session") -> None:
        self.session_id = session_id
        super().__init__(f"session {shown(session_id)}: {reason}")


class AmbiguousSessionIdError(SessionNotFoundError):
    """An id prefix names more than one session, so it names none.

    Attributes:
        session_id: the prefix asked for (as given).
        candidates: the ids it matches (most recently active first, possibly cut short).
    """

    def __init__(self, session_id: str, candidates: tuple[str, ...]) -> None:
        self.candidates = candidates
        super().__init__(session_id, f"ambiguous, it matches {', '.join(candidates)}")


class SessionExistsError(PlaitError):
    """A session was to be created under an id that is already taken."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {shown(session_id)} already exists")


class SessionClosedError(PlaitError):
    """A write was attempted on a closed session; call ``session.transcript.reopen()`` first."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {shown(session_id)} is closed; reopen() it or fork() it to continue"
        )


class SessionLockedError(PlaitError):
    """Another process has the session open for writing; this one may only read it.

    Reading (history, snapshot, stats) never needs the lock. The lock dies with
    the process that holds it, however it ends.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"session {shown(session_id)} is open for writing in another process; "
            "it can be read here but not changed"
        )


class SessionLockTimeoutError(SessionLockedError, TimeoutError):
    """A writer waited its whole ``lock_timeout`` for a session's writer lock.

    Raised by a client in ``writer_lock="write"`` mode, where writers of several
    processes take the lock in turn: another one kept it the whole time.

    Attributes:
        session_id: the session.
        timeout: the seconds waited.
    """

    def __init__(self, session_id: str, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(session_id)
        self.args = (
            f"session {shown(session_id)}: another process held its writer lock for all "
            f"of lock_timeout={timeout:g} s; nothing was written",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class WriterLockLostError(SessionLockedError):
    """The writer lock this process held on a session was lost, and another writer took it.

    A lock can be lost while its holder lives (PostgreSQL: the connection holding it
    was cut by an idle timeout, a proxy, a failover or ``pg_terminate_backend``). The
    store then refuses the holder's writes, before anything is written: each carries
    the epoch the lock was taken at, and the session's epoch moved on when the other
    writer took it. A run stops with this error; the next write takes the lock again
    (if free) and reads the session first.

    Attributes:
        session_id: the session.
        epoch: the epoch of the hold that was lost.
    """

    def __init__(self, session_id: str, epoch: int) -> None:
        self.epoch = epoch
        super().__init__(session_id)
        self.args = (
            f"session {shown(session_id)}: this process's writer lock (epoch {epoch}) was "
            "lost and another writer took it; nothing was written",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class ThreadConflictError(SessionLockedError):
    """Another run continued a LangGraph thread from the same checkpoint first.

    Raised by :class:`plait.integrations.langgraph.PlaitSaver` when a run stores a
    checkpoint (or a task's writes) after a checkpoint that another run has already
    continued: two runs of one thread at once would otherwise both commit and fork
    its history silently. Nothing of this run was written; invoke the thread again
    to continue from the other run's end (or take turns with ``PlaitSaver.turn``).

    Attributes:
        session_id: the namespace's session.
        thread_id: the LangGraph thread.
        checkpoint_id: the checkpoint the run continued (None for a thread's first).
    """

    def __init__(self, session_id: str, thread_id: str, checkpoint_id: str | None) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        super().__init__(session_id)
        after = f"checkpoint {shown(checkpoint_id)}" if checkpoint_id else "its start"
        self.args = (
            f"LangGraph thread {shown(thread_id)}: another run continued it from {after} "
            "first; nothing of this run was written (invoke again to continue from there)",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class NothingToDoError(PlaitError):
    """The verb found nothing to act on.

    Attributes:
        reason: why there was nothing to do, in words a user can read.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class SessionBusyError(PlaitError):
    """A run is already in progress: a client (and a session) runs one thing at a time.

    Attributes:
        session_id: the session that is busy.
    """

    def __init__(self, session_id: str, what: str = "a run") -> None:
        self.session_id = session_id
        super().__init__(f"session {shown(session_id)} is busy: {what} is in progress")


class RunTimeoutError(PlaitError, TimeoutError):
    """A run went past its ``timeout``.

    The transcript is left valid (an interrupted tool call gets a result saying
    so); ``await session.resume()`` picks the request up.

    Attributes:
        session_id: the session whose run timed out.
        timeout: the limit, in seconds.
    """

    def __init__(self, session_id: str, timeout: float) -> None:
        self.session_id = session_id
        self.timeout = timeout
        super().__init__(
            f"the run on session {shown(session_id)} passed its timeout of {timeout:g} s; "
            "resume() picks it up"
        )


class RunInterruptedError(PlaitError):
    """A run was cancelled before it finished; what it recorded stays valid.

    Attributes:
        session_id: the session whose run stopped.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"the run on session {shown(session_id)} was interrupted; resume() picks it up"
        )


class NoSandboxError(PlaitError, RuntimeError):
    """A sandbox was required but the session has neither a target nor a handle.

    Call ``session.to("local")`` or ``session.with_sandbox(handle)`` first.
    """


class SandboxClosedError(PlaitError, RuntimeError):
    """The session is bound to a sandbox handle that was closed.

    Call ``to(...)`` again or bind a new sandbox.
    """


class SandboxUnavailableError(PlaitError, RuntimeError):
    """A backend cannot confine tools on this machine (a missing program, a refusing kernel).

    Raised when the sandbox opens, never later, and never answered by running
    unconfined instead; the message says what to install or change.
    """


class MissingDependencyError(PlaitError, ImportError):
    """An optional dependency is not installed; the message has the install command."""

    def __init__(self, feature: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{feature} needs an optional extra: pip install 'plait[{extra}]'")


class AdapterClosedError(PlaitError, RuntimeError):
    """A framework adapter (``plait.integrations``) was used after its ``close()``."""


class ToolError(PlaitError):
    """Raised inside a tool for a failure the model should read.

    ``Tool.call`` turns it into a failed result (``ok=False``) with this message;
    it never ends the run.
    """


class ToolSchemaError(InvalidArgumentError):
    """A function cannot be a tool: a parameter without a type, or of a type JSON cannot carry.

    Raised when the tool is made (``@tool``), never when the model calls it.
    """


class ToolServerError(PlaitError):
    """An MCP tool server could not be started, reached, or asked for its tools.

    A run that offers its tools fails with this before the model is asked; a
    server that fails *during* a call is a failed tool result instead.
    """


class AuthError(PlaitError):
    """A credential, a principal binding or an actor chain was refused (HTTP 401/403)."""


class ScopeViolationError(AuthError):
    """An actor chain claims, for a child actor, scopes its parent does not hold.

    Attributes:
        violations: one :class:`plait.auth.ScopeViolation` per offending link.
    """

    def __init__(self, violations: tuple[object, ...], message: str) -> None:
        self.violations = violations
        super().__init__(message)


class LiveClientError(PlaitError):
    """A live client may not do what it asked (see ``plait.live``)."""


class ControllerConflictError(LiveClientError):
    """A second controller tried to attach without ``takeover`` (HTTP 409).

    Attributes:
        session_id: the session.
        controller_id: the client that is the controller now.
    """

    def __init__(self, session_id: str, controller_id: str) -> None:
        self.session_id = session_id
        self.controller_id = controller_id
        super().__init__(
            f"session {shown(session_id)} already has controller {shown(controller_id)}; "
            "attach with takeover=True or call takeover() to replace it"
        )


class NotControllerError(LiveClientError):
    """Only the active controller may inject a prompt or route a permission (HTTP 403).

    Attributes:
        session_id: the session.
        client_id: the client that asked.
        controller_id: the active controller, or None when there is none.
    """

    def __init__(self, session_id: str, client_id: str, controller_id: str | None) -> None:
        self.session_id = session_id
        self.client_id = client_id
        self.controller_id = controller_id
        now = (
            f"the controller is {shown(controller_id)}" if controller_id else "it has no controller"
        )
        super().__init__(
            f"client {shown(client_id)} is not the controller of session "
            f"{shown(session_id)} ({now})"
        )


class ClientNotAttachedError(LiveClientError, LookupError):
    """A heartbeat, release, inject or route from a client that is not attached (HTTP 404).

    Attributes:
        session_id: the session.
        client_id: the client.
    """

    def __init__(self, session_id: str, client_id: str) -> None:
        self.session_id = session_id
        self.client_id = client_id
        super().__init__(
            f"client {shown(client_id)} is not attached to session {shown(session_id)}"
        )


# The leaf groups live in private siblings so this module stays readable; they are
# imported last because they derive from PlaitError above. Their classes keep
# ``plait.errors`` as their module, so tracebacks, reprs and pickles name them as before.
from plait._errors_provider import (  # noqa: E402
    MissingCredentialsError,
    ProviderError,
    ProviderResponseError,
    ProviderStalledError,
    ReplyTooLargeError,
    ScriptExhaustedError,
    ToolArgumentsError,
)
from plait._errors_store import (  # noqa: E402
    EncryptionKeyError,
    EncryptionKeyMismatchError,
    EncryptionKeyMissingError,
    NotAStoreError,
    SchemaOutdatedError,
    SchemaTooNewError,
    StaleSessionError,
    StoreCorruptError,
    StoreCorruptWarning,
    StoreError,
    StoreNotFoundError,
    StorePartMissingError,
)

# Every error class of the two leaf groups is shown as this module's (tracebacks, docs,
# pickles), whichever file defines it.
for _group in ("plait._errors_provider", "plait._errors_store"):
    for _value in list(vars(sys.modules[_group]).values()):
        if isinstance(_value, type) and _value.__module__ == _group:
            _value.__module__ = __name__
del _group, _value
