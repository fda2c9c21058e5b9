"""The session layer's value types and argument checks (no store, no handle)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from plait._checks import clean_title as checked_title
from plait._files import usable_path
from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.providers import Usage
from plait.records import AssistantRecord, JSONValue, Record, as_json
from plait.store.base import LiveClientRow

__all__ = [
    "MAX_TITLE",
    "MOUNT_MODES",
    "SETTINGS",
    "RootResult",
    "ScratchpadUpdate",
    "SessionUsage",
    "Snapshot",
    "check_count",
    "clean_title",
    "folder_path",
    "json_object",
    "validate_workspace_policy",
]

MAX_TITLE: Final = 200
"""The longest title :meth:`Session.rename` accepts, in characters."""

MOUNT_MODES: Final = ("read_only", "read_write")
"""How a root may be mounted."""

SETTINGS: Final = "settings"
"""The metadata key of the settings a branch inherits (close state and provenance are not)."""

_POLICY_KEYS: Final = frozenset({"default_mount_mode"})


def check_count(value: object, name: str) -> int:
    """Return ``value`` if it is a non-negative int, else raise InvalidArgumentError."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"{name} must be >= 0, got {value}")
    return value


def json_object(value: object, what: str) -> dict[str, JSONValue]:
    """Return ``value`` as a dict of plain JSON types (a deep copy) if it is a JSON object.

    Raises:
        InvalidArgumentError: ``value`` is not a mapping.
        InvalidMessageError: a value in it is not JSON (as :func:`plait.records.dumps`).
    """
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{what} must be a dict, not {type(value).__name__}")
    out = as_json(dict(value), what)
    assert isinstance(out, dict)  # a mapping with str keys reads back as an object
    return out


def folder_path(folder: object) -> str:
    """``folder`` as an absolute path the file system can name (str or PathLike).

    Raises:
        InvalidArgumentError: another type, empty, a NUL, or text it cannot encode.
    """
    if not isinstance(folder, str | os.PathLike):
        raise InvalidArgumentError(f"a folder is a str or a path, not {type(folder).__name__}")
    raw = os.fspath(folder)
    return os.path.abspath(usable_path(raw, folder))


def clean_title(title: object) -> str:
    """Collapse white space and trim; blank, over MAX_TITLE characters or control text is an error.

    A title is drawn in terminals, pages and SVG: no NUL, ESC or other control character.
    """
    return checked_title(title, MAX_TITLE)


def validate_workspace_policy(policy: object) -> dict[str, JSONValue]:
    """Check a workspace policy ``{default_mount_mode}`` and return it as a dict.

    Raises:
        UnknownOptionError: a key other than ``default_mount_mode``.
        InvalidArgumentError: a mount mode other than ``read_only`` / ``read_write``.
    """
    out = json_object(policy, "workspace_policy")
    unknown = set(out) - _POLICY_KEYS
    if unknown:
        raise UnknownOptionError("workspace_policy", list(unknown), list(_POLICY_KEYS))
    mode = out.get("default_mount_mode", "read_write")
    if mode not in MOUNT_MODES:
        raise InvalidArgumentError(
            f"default_mount_mode must be one of {', '.join(MOUNT_MODES)}, not {mode!r}"
        )
    return out


@dataclass(frozen=True, slots=True)
class RootResult:
    """What ``add_root`` and ``remove_root`` return: seed 003's ``{ok, mounted_at?, error?}``."""

    ok: bool
    """Whether the change was made."""
    mounted_at: str | None
    """Where the root is (or was) mounted."""
    error: str | None
    """Why not, when ``ok`` is False."""


@dataclass(frozen=True, slots=True)
class ScratchpadUpdate:
    """What ``set_scratchpad`` and ``clear_scratchpad`` return: ``{ok, version, scratchpad}``."""

    ok: bool
    """Whether the change was stored."""
    version: int
    """The scratchpad version after the change."""
    scratchpad: Mapping[str, JSONValue] | None
    """The scratchpad now stored (None after a clear)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A read-only picture of a session: its transcript plus seed 003's fields."""

    id: str
    title: str | None
    length: int
    """Messages in view (events not counted)."""
    created_at: datetime
    updated_at: datetime
    status: str
    system_prompt: str | None
    """The newest system prompt in view."""
    tool_format: str
    """How tools are presented to the model (``native`` unless set)."""
    actor_chain: Mapping[str, JSONValue] | None
    """The RFC 8693 actor chain (bound by the service layer; None until then)."""
    scratchpad: Mapping[str, JSONValue] | None
    scratchpad_version: int
    parent_id: str | None
    parent_session_ids: tuple[str, ...]
    child_ids: tuple[str, ...]
    lineage_operator: str | None
    branched_at_event_index: int | None
    """For a ``fork_at`` branch: how many messages it kept."""
    version: int
    """The head version (changes with every write)."""
    records: tuple[Record, ...]
    """Every record in view, events included."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    live_clients: tuple[LiveClientRow, ...] = ()
    """The live clients attached (seed 003; see :mod:`plait.live`), in the order they attached."""
    live_controller_id: str | None = None
    """The attached controller's client id, or None."""


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """Tokens a session's replies cost (seed 001's ``session.usage``)."""

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Tokens the model wrote."""
    cached_tokens: int = 0
    """The part of ``input_tokens`` served from the provider's cache."""
    replies: int = 0
    """Replies that reported usage."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: SessionUsage) -> SessionUsage:
        return SessionUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.replies + other.replies,
        )

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> SessionUsage:
        """Add up the ``meta["usage"]`` of the assistant records."""
        i = o = c = n = 0
        for record in records:
            if isinstance(record, AssistantRecord):
                usage = record.meta.get("usage")
                if isinstance(usage, dict):
                    counted = Usage.from_json(usage)
                    i, o, c, n = (
                        i + counted.input_tokens,
                        o + counted.output_tokens,
                        c + counted.cached_tokens,
                        n + 1,
                    )
        return cls(i, o, c, n)
