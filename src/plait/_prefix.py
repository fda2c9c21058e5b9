"""How people find a session: a unique prefix of its id, ``latest``, its first prompt.

A session id is a 36-character UUIDv7; people type the first few characters
they see. :func:`resolve_session_id` turns what they typed into the one id it
names, through the public client API only, so the CLI and the server resolve
the same way. :func:`short_id_length` says how many characters a list must show
for every id it holds to stay a unique prefix. :func:`describe` adds what a
list needs to tell untitled sessions apart: the first prompt and the agent
that wrote the transcript.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from plait.client import Client, SessionInfo
from plait.errors import (
    AmbiguousSessionIdError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreCorruptWarning,
)
from plait.records import JSONValue, UserRecord

__all__ = [
    "CUT_MARK",
    "LATEST",
    "MIN_SHORT",
    "Described",
    "describe",
    "resolve_session_id",
    "short_id",
    "short_id_length",
    "source_agent",
]

LATEST: Final = "latest"
"""The word that names the workspace's most recently active session."""

MIN_SHORT: Final = 8
"""The fewest characters a list shows of an id (a UUIDv7's first 8 change every ~65 s)."""

_SCAN: Final = 1_000_000
"""How many sessions a prefix is matched against (every one a store is likely to hold)."""

_SHOWN: Final = 10
"""How many candidates an ambiguity error names."""

_PREFIX: Final = re.compile(r"^[0-9a-f-]+$")


def resolve_session_id(client: Client, text: str, *, all_workspaces: bool = False) -> str:
    """The full id of the session ``text`` names.

    Args:
        client: whose store to look in. A prefix is matched against every
            workspace's sessions (an id is unique in the store); ``latest`` is
            the most recently active session of the client's workspace.
        text: a full id, a unique prefix of one (any case), or ``latest``.
        all_workspaces: ``latest`` is the most recently active session of any
            workspace (a server whose scope is the whole store).

    Returns:
        The stored session's full id.

    Raises:
        SessionNotFoundError: no stored session matches (also for text that
            could be no id's prefix, or ``latest`` in an empty workspace).
        AmbiguousSessionIdError: several sessions start with ``text``; its
            ``candidates`` name them.
    """
    if client.exists(text):
        return text
    wanted = text.strip().removesuffix(CUT_MARK).lower()  # a cut id pasted with its mark
    if wanted == LATEST:
        newest = client.sessions.list(1, all_workspaces=all_workspaces)
        if not newest:
            where = "the store" if all_workspaces else client.workspace
            raise SessionNotFoundError(text, f"no sessions in {where}")
        return newest[0].id
    if not wanted or not _PREFIX.match(wanted):
        raise SessionNotFoundError(text)
    found = [sid for sid in _every_id(client) if sid.startswith(wanted)]
    if not found:
        raise SessionNotFoundError(text)
    if len(found) > 1:
        raise AmbiguousSessionIdError(text, tuple(found[:_SHOWN]))
    return found[0]


def _every_id(client: Client) -> list[str]:
    """Every session id in the store (the rows alone: nothing is counted)."""
    return [row.id for row in client.store.recent(None, _SCAN)]


def short_id_length(ids: Iterable[str], minimum: int = MIN_SHORT) -> int:
    """The fewest characters (at least ``minimum``) that keep every id's prefix unique.

    Args:
        ids: every id the prefixes must tell apart (the store's, not only those shown).
        minimum: never fewer than this.
    """
    unique = set(ids)
    longest = max((len(i) for i in unique), default=minimum)
    for n in range(minimum, longest + 1):
        if len({i[:n] for i in unique}) == len(unique):
            return n
    return longest


CUT_MARK: Final = "…"
"""What a list puts after an id it cut (a prefix that works wherever an id is taken)."""


def short_id(session_id: str, length: int) -> str:
    """``session_id`` cut to ``length`` characters (a dash is never the last one shown).

    Only an id a prefix can name (plait's own: hex digits and dashes) is cut. Any other
    (``user/123/retry``, a framework's key) is shown whole: a prefix of it names nothing,
    and ``user/123/`` would read as another id.
    """
    if not _PREFIX.match(session_id):
        return session_id
    cut = session_id[:length]
    if cut.endswith("-") and len(session_id) > length:
        cut = session_id[: length + 1]
    return cut


_LOOK: Final = 32
"""How many records from the start of a session are searched for its first prompt."""
_FIRST: Final = 120
"""How many characters of a first prompt a list shows (a longer one ends in an ellipsis)."""


def _shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True, slots=True)
class Described:
    """A listed session with what a person recognises it by."""

    info: SessionInfo
    """The session as ``sessions.list()`` gives it."""
    short: str
    """Its id cut to a prefix that is unique in the store."""
    first_prompt: str | None
    """The first user message the person typed, on one line (None when there is none near
    the start); context an agent added (``UserRecord.added``) is not it."""
    source: str
    """The agent that wrote the transcript: ``plait``, the importer's (``claude-code`` ...)
    or the framework's whose adapter wrote it (``openai-agents``, ``google-adk`` ...)."""

    @property
    def cut(self) -> bool:
        """Whether ``short`` is a cut of the id (a list marks it with :data:`CUT_MARK`)."""
        return self.short != self.info.id

    @property
    def shown_id(self) -> str:
        """The id as a list shows it: ``short``, marked when it is a cut."""
        return self.short + CUT_MARK if self.cut else self.short

    @property
    def label(self) -> str:
        """The title, else the first prompt, else ``(empty)``."""
        return self.info.title or self.first_prompt or "(empty)"


_FRAMEWORKS: Final = (
    ("google_adk", "google-adk"),
    ("pydantic_ai", "pydantic-ai"),
    ("claude_agent_sdk", "claude-agent-sdk"),
    ("openai-agents", "openai-agents"),
    ("pydantic-ai", "pydantic-ai"),
    ("langgraph", "langgraph"),
)
"""Each adapter's metadata key (or lineage operator, or its prefix before a dot) and the
name a person sees for its framework."""


def source_agent(metadata: Mapping[str, JSONValue], operator: str | None = None) -> str:
    """The agent a session's transcript came from: an importer's, a framework's, or plait.

    Args:
        metadata: the session's metadata (an import's provenance, an adapter's key).
        operator: its lineage operator (an adapter names the sessions it makes:
            ``openai-agents``, ``google_adk.create_session`` ...).
    """
    family = (operator or "").split(".", 1)[0]
    for key, name in _FRAMEWORKS:
        if key in metadata or family == key:
            return name
    seeded = metadata.get("seeded_from_jsonl")
    if isinstance(seeded, dict):
        # seed_from_jsonl records the agent (or, for a plain transcript, the format
        # it was read as) in its ``source`` provenance.
        source = seeded.get("source")
        if isinstance(source, dict):
            for key in ("agent", "format"):
                value = source.get(key)
                if isinstance(value, str) and value and value != "auto":
                    return value
        return "import"
    if "imported_bundle" in metadata:
        return "bundle"
    return "plait"


def describe(
    client: Client, infos: Iterable[SessionInfo], *, short_ids: bool = True
) -> list[Described]:
    """Describe listed sessions: a unique short id, the first prompt, the source agent.

    Args:
        client: whose store to read.
        infos: the sessions, as ``sessions.list()`` gives them.
        short_ids: cut each id to a prefix unique over every session in the store,
            so each one works wherever an id is taken (this lists the store's ids);
            False leaves the ids whole.

    Reads one row and a few records per session.
    """
    infos = list(infos)
    length = 36
    if short_ids:
        every = _every_id(client)
        length = short_id_length(every + [i.id for i in infos])
    store = client.store
    out: list[Described] = []
    for info in infos:
        first: str | None = None
        source = "plait"
        try:
            row = store.get(info.id)
            if row is not None:
                source = source_agent(row.metadata, row.lineage_operator)
                lo = row.layout.view_start
                for record in store.read(row, lo, min(row.layout.end_seq, lo + _LOOK)):
                    # The person's first words: not the context an agent put first.
                    if isinstance(record, UserRecord) and record.added is None:
                        text = " ".join(record.content.split())
                        first = _shorten(text, _FIRST) or None
                        break
        except StoreCorruptError as exc:
            # Listed all the same: one damaged session does not hide the others.
            first = "(cannot be read: see `plait db check --deep`)"
            warnings.warn(StoreCorruptWarning(str(exc)), stacklevel=2)
        out.append(Described(info, short_id(info.id, length), first, source))
    return out
