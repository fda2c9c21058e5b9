"""Portable session bundles: one versioned JSON envelope a session can leave the machine in.

Seed 003's "Portable session bundles": transcript sections, tool-call records,
permission/approval evidence, replay fixtures, trace spans and a redaction
manifest, in one envelope::

    {
      "schema": "plait.bundle.v1",
      "created_at": "2026-...+00:00",
      "mode": "sanitized" | "local" | "replay-only",
      "plait_version": "0.1.0",
      "session": {"id", "title", "created_at", "lineage_operator",
                  "parent_session_ids", "metadata"},
      "lineage": [{"id", "parent_session_ids", "lineage_operator", "title",
                   "relation": "ancestor" | "descendant"}, ...],
      "transcript": [{"seq", "kind", "created_at", "role", "content", ...}, ...],
      "events": [{"seq", "name", "data", "meta", "created_at"}, ...],
      "tool_calls": [{"id", "name", "arguments", "result", "ok",
                      "call_seq", "result_seq"}, ...],
      "approvals": [{"seq", "name", "data", "created_at"}, ...],
      "replay": {"responses": [{"seq", "content", "tool_calls", "usage"?}, ...]},
      "trace": [],
      "redactions": [{"where": "transcript/3/content", "kind": "openai_api_key",
                      "count": 1}, ...]
    }

Every ``transcript`` entry without its ``seq``, ``kind`` and ``created_at`` is a
message dict :func:`plait.records.record_from_message` accepts; a summary's
``folds`` count transcript entries (as in :func:`plait.interop.to_jsonl`), not
``seq`` numbers. Events (which the model never sees) are in ``events``;
``approvals`` repeats those whose name mentions a permission or an approval, as
evidence. ``replay.responses`` is every assistant reply in order, with its tool
calls and ``meta["usage"]`` when recorded, so a scripted provider can play the
run back offline. ``trace`` holds one span per model call and per tool call
that a run timed (their records' ``meta["timing"]``), named and attributed as
the OpenTelemetry GenAI conventions name them (``chat {model}``,
``execute_tool {name}``): ``{"name", "seq", "start_us", "end_us",
"duration_us", "attributes"}``; a transcript written without runs has none.

The modes:

``sanitized`` (the default)
    For support and sharing. Every string anywhere in the bundle (titles,
    metadata, text, tool arguments and results, event data, dict keys) is
    scanned for secrets -- API keys (``sk-``, ``sk-ant-``, ``AKIA``,
    ``ghp_``/``github_pat_``, ``xoxb-``/``xoxp-``, ``AIza``), JWTs, bearer
    tokens and ``Authorization:`` headers, PEM private key blocks, passwords in
    URLs, ``password=``/``secret=``/``token=`` pairs, the value of any key named
    like a credential, and the caller's ``redact`` patterns -- and each is
    replaced by ``[REDACTED:<kind>]``. The host folders the session's settings
    name (its sandbox's spec, workspace anchor, mounted roots' paths) become
    ``[REDACTED:host_path]``. The ``redactions`` manifest says where
    and what kind, and how many; never the secret nor a hash of it.
``local``
    Everything as stored, for use inside one trust boundary; no manifest.
``replay-only``
    For a host that needs replay evidence without prompt or tool payload text.
    What the user, the system prompt or a tool supplied is removed and replaced
    by its length: ``content`` becomes ``null`` beside ``content_chars``, tool
    ``arguments`` and ``result`` become ``null`` beside ``arguments_chars`` /
    ``result_chars``, event ``data`` becomes ``null``, titles become ``null``,
    the source records an import kept unmapped
    (``metadata.seeded_from_jsonl.unmapped``) become ``null`` beside
    ``unmapped_chars``, and ``meta`` keeps only ``usage``. Tool names, ids, ``ok`` flags, usage and
    the order of everything stay. The model's own replies are kept **only** in
    ``replay.responses`` (a scripted provider cannot replay without them), and
    they are sanitized as above. Such a bundle cannot be imported: there is no
    prompt text to restore.

:func:`import_bundle` makes a new session from a ``sanitized`` or ``local``
bundle with ``client.sessions.create`` (one transaction: a bundle that fails
any check stores nothing). Events are evidence, not messages: they are not
restored, so the new session's ``seq`` numbers count messages only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias, cast, get_args

from plait._files import export_target, write_atomically
from plait._time import now_micros
from plait.client import Client
from plait.errors import (
    BundleVersionError,
    ImportFormatError,
    InvalidArgumentError,
    InvalidMessageError,
    SessionNotFoundError,
    shown,
)
from plait.interop._bundle_sections import (
    _entry,
    _event,
    _iso,
    _lineage,
    _plait_version,
    _response,
    _strip_payloads,
    _tool_calls,
    _trace_span,
)
from plait.interop._read import read_head, read_source
from plait.interop._redact import Redactor, hide_host_paths, redaction_patterns
from plait.interop._skim import skim_object
from plait.records import (
    AssistantRecord,
    EventRecord,
    JSONValue,
)
from plait.session import Session

__all__ = [
    "BUNDLE_SCHEMA",
    "BundleMode",
    "export_bundle",
    "import_bundle",
    "is_bundle_file",
    "read_bundle",
    "write_bundle",
]

BUNDLE_SCHEMA: Final = "plait.bundle.v1"
"""The ``schema`` :func:`export_bundle` writes and the only one :func:`import_bundle` reads."""

_SCHEMA_PREFIX: Final = "plait.bundle."

BundleMode: TypeAlias = Literal["sanitized", "local", "replay-only"]
"""How much of the session a bundle carries (see the module docstring)."""

MODES: Final[tuple[str, ...]] = get_args(BundleMode)

_APPROVAL: Final = re.compile(r"permission|approv", re.IGNORECASE)
"""Event names that are permission / approval evidence."""

_MESSAGE_KINDS: Final = frozenset({"system", "user", "assistant", "tool", "summary", "opaque"})


# -- export ----------------------------------------------------------------------------
# Each section is built from the records by a helper in _bundle_sections.py.


def export_bundle(
    session: Session,
    *,
    mode: BundleMode = "sanitized",
    redact: Iterable[str | re.Pattern[str]] = (),
    include_lineage: bool = True,
) -> dict[str, JSONValue]:
    """Return a stored session as a portable bundle (the envelope in the module docstring).

    Args:
        session: a stored session; its records in view are exported.
        mode: ``sanitized`` (secrets replaced, the default), ``local`` (as stored)
            or ``replay-only`` (no prompt or tool payload text).
        redact: more regular expressions to redact (kind ``custom``), for
            ``sanitized`` and ``replay-only``.
        include_lineage: list the ancestors and descendants the store knows.

    Returns:
        The bundle, a JSON-ready dict.

    Raises:
        InvalidArgumentError: not a Session, an unknown mode, a bad pattern, or
            patterns with ``local``.
        SessionNotFoundError: the session is not stored.
    """
    if not isinstance(session, Session):
        raise InvalidArgumentError(f"a bundle is made of a Session, not {type(session).__name__}")
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(MODES)}, got {shown(mode)}")
    patterns = redaction_patterns(redact)
    if mode == "local" and patterns:
        raise InvalidArgumentError("a local bundle redacts nothing; drop redact or pick sanitized")
    snap = session.transcript.snapshot()
    if snap is None:
        raise SessionNotFoundError(session.id, "not stored")
    records = list(snap.records)
    messages = [r for r in records if r.kind != "event"]
    seqs = [r.seq for r in messages]
    events = [r for r in records if isinstance(r, EventRecord)]
    body: dict[str, Any] = {
        "session": {
            "id": snap.id,
            "title": snap.title,
            "created_at": snap.created_at.isoformat(),
            "lineage_operator": snap.lineage_operator,
            "parent_session_ids": list(snap.parent_session_ids),
            "metadata": json.loads(json.dumps(dict(snap.metadata))),
        },
        "lineage": _lineage(session) if include_lineage else [],
        "transcript": [_entry(r, seqs) for r in messages],
        "events": [_event(r) for r in events],
        "tool_calls": _tool_calls(records),
        "approvals": [
            {k: v for k, v in _event(r).items() if k != "meta"}
            for r in events
            if _APPROVAL.search(r.name)
        ],
        "replay": {"responses": [_response(r) for r in messages if isinstance(r, AssistantRecord)]},
        "trace": [span for span in map(_trace_span, messages) if span is not None],
    }
    manifest: list[JSONValue] = []
    if mode == "replay-only":
        _strip_payloads(body)
    if mode != "local":
        redactor = Redactor(patterns)
        hide_host_paths(body["session"]["metadata"], redactor)
        body = {key: redactor.walk(value, key) for key, value in body.items()}
        manifest = redactor.manifest()
    return {
        "schema": BUNDLE_SCHEMA,
        "created_at": _iso(now_micros()),
        "mode": mode,
        "plait_version": _plait_version(),
        **body,
        "redactions": manifest,
    }


def write_bundle(
    session: Session,
    path: str | os.PathLike[str] | None = None,
    *,
    mode: BundleMode = "sanitized",
    redact: Iterable[str | re.Pattern[str]] = (),
    include_lineage: bool = True,
    follow_symlinks: bool = False,
) -> str:
    """Write :func:`export_bundle`'s bundle as a JSON file; return its absolute path.

    Args:
        session: a stored session.
        path: where to write. Default: ``plait-<id8>.bundle.json`` (``_files.default_name``)
            in the session's workspace. A relative path is taken from the working
            directory; missing folders are made; an existing file is replaced.
        mode: see :func:`export_bundle`.
        redact: see :func:`export_bundle`.
        include_lineage: see :func:`export_bundle`.
        follow_symlinks: a symlink at ``path`` is written through to the regular file
            it names (by default a symlink there is refused).

    Returns:
        The absolute path written.

    Raises:
        InvalidArgumentError: as :func:`export_bundle`, or ``path`` is not a usable file path.
        SessionNotFoundError: the session is not stored.
    """
    bundle = export_bundle(session, mode=mode, redact=redact, include_lineage=include_lineage)
    target = export_target(
        path, session.workspace.name, session.id, "bundle.json", follow_symlinks=follow_symlinks
    )
    text = json.dumps(bundle, ensure_ascii=False, indent=2) + "\n"
    return write_atomically(target, text)


# -- import ----------------------------------------------------------------------------


def _check(bundle: object, where: str | None) -> dict[str, JSONValue]:
    """Validate a bundle's envelope and transcript; return it as a dict."""

    def bad(reason: str) -> ImportFormatError:
        return ImportFormatError(where, None, f"not a plait bundle: {reason}")

    if not isinstance(bundle, Mapping):
        raise bad(f"expected a JSON object, got {type(bundle).__name__}")
    schema = bundle.get("schema")
    if not isinstance(schema, str) or not schema.startswith(_SCHEMA_PREFIX):
        raise bad(f"'schema' must be {BUNDLE_SCHEMA!r}, got {schema!r}")
    if schema != BUNDLE_SCHEMA:
        raise BundleVersionError(schema, BUNDLE_SCHEMA)
    mode = bundle.get("mode")
    if mode not in MODES:
        raise bad(f"'mode' must be one of {', '.join(MODES)}, got {mode!r}")
    session = bundle.get("session")
    if not isinstance(session, Mapping) or not isinstance(session.get("id"), str):
        raise bad("'session' must be an object with a string 'id'")
    title = session.get("title")
    if title is not None and not isinstance(title, str):
        raise bad("'session.title' must be a string or null")
    parents = session.get("parent_session_ids", [])
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise bad("'session.parent_session_ids' must be a list of ids")
    for key in ("transcript", "lineage", "events", "tool_calls", "approvals", "trace"):
        if not isinstance(bundle.get(key, []), list):
            raise bad(f"{key!r} must be a list")
    if "transcript" not in bundle:
        raise bad("no 'transcript'")
    for i, entry in enumerate(bundle["transcript"]):
        if not isinstance(entry, Mapping):
            raise bad(f"transcript/{i} is not an object")
        if entry.get("kind", entry.get("role")) not in _MESSAGE_KINDS:
            raise bad(f"transcript/{i}: unknown kind {entry.get('kind')!r}")
    if not isinstance(bundle.get("replay", {}), Mapping):
        raise bad("'replay' must be an object")
    return dict(bundle)


_IMPORTED: Final = frozenset({"schema", "mode", "session", "transcript"})
"""The keys :func:`import_bundle` reads; the rest of a bundle file is checked, not built."""

_SKIPPED_AS: Final[dict[str, JSONValue]] = {"array": [], "object": {}, "string": "", "other": None}
"""What a skipped value stands as for the envelope's checks: its kind, empty."""


def read_bundle(
    path: str | os.PathLike[str], *, keep: Collection[str] | None = None
) -> dict[str, JSONValue]:
    """Read and validate a bundle file.

    The file is read within a memory bound proportional to what is kept: the envelope's
    top level is walked, and a key not in ``keep`` is skipped without building its value
    (it is checked for its kind and balanced brackets only).

    Args:
        path: the bundle file.
        keep: the top-level keys to decode (``schema``, ``mode``, ``session`` and
            ``transcript`` are always kept); None decodes the whole bundle. A skipped
            key stands in the result as an empty value of its kind.

    Returns:
        The bundle.

    Raises:
        ImportFormatError: the file cannot be read, is not JSON, or is not a bundle.
        BundleVersionError: a bundle of a schema this plait does not read (a newer one).
    """
    name = str(os.fspath(path))
    data = read_source(path)
    wanted = None if keep is None else _IMPORTED | set(keep)
    try:
        skimmed = skim_object(data, wanted)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] != b"{":
            raise ImportFormatError(name, None, f"not a plait bundle: {exc}") from exc
        raise ImportFormatError(name, None, f"not JSON: {exc}") from exc
    bundle: dict[str, Any] = {
        key: skimmed.values[key] if key in skimmed.values else _SKIPPED_AS[kind]
        for key, kind in skimmed.kinds.items()
    }
    return _check(bundle, name)


_HEAD_BYTES: Final = 1 << 16
_BUNDLE_HEAD: Final = re.compile(r'"schema"\s*:\s*"plait\.bundle\.')


def is_bundle_file(path: str | os.PathLike[str]) -> bool:
    """Whether a file looks like a bundle: a JSON object whose ``schema`` starts ``plait.bundle.``.

    Only the first 64 KiB are read (:func:`write_bundle` puts ``schema`` first);
    an unreadable file is not a bundle (the importer will say why).
    """
    raw = read_head(path, _HEAD_BYTES)
    if raw is None:
        return False
    head = raw.decode("utf-8", "replace")
    return head.lstrip("\ufeff \t\r\n").startswith("{") and bool(_BUNDLE_HEAD.search(head))


def _message(entry: Mapping[str, JSONValue], i: int, where: str | None) -> dict[str, JSONValue]:
    message = {k: v for k, v in entry.items() if k not in ("seq", "kind", "created_at")}
    message.setdefault("role", entry.get("kind"))
    if message["role"] == "opaque":
        return message  # format and item, checked by record_from_message
    if not isinstance(message.get("content"), str):
        raise ImportFormatError(where, None, f"transcript/{i}: 'content' must be a string")
    return message


def import_bundle(
    client: Client,
    source: str | os.PathLike[str] | Mapping[str, JSONValue],
    *,
    session_id: str | None = None,
) -> Session:
    """Create a new session from a ``local`` or ``sanitized`` bundle, all or nothing.

    The session gets the bundle's messages (with their ``meta``) and title,
    ``lineage_operator="Session.import"`` and
    ``metadata["imported_bundle"] = {schema, mode, source_session_id, lineage,
    source_metadata}``, where ``lineage`` is the source's parent ids (provenance:
    those sessions are usually not in this store). Events are not restored.

    Args:
        client: the client whose store and workspace get the session.
        source: a bundle file's path, or a bundle dict.
        session_id: the new session's id (default: a new one; the source's id is
            kept in the provenance, never reused silently).

    Returns:
        The new session (it does not become current).

    Raises:
        ImportFormatError: not a bundle, malformed, or a message in it is invalid.
        BundleVersionError: the bundle's schema is not one this plait reads.
        InvalidArgumentError: a ``replay-only`` bundle (no prompt text to restore),
            or a bad ``session_id``.
        SessionExistsError: ``session_id`` is taken.
    """
    if isinstance(source, str | os.PathLike):
        where: str | None = str(os.fspath(source))
        bundle = read_bundle(source, keep=_IMPORTED)
    else:
        where = None
        bundle = _check(source, None)
    if bundle["mode"] == "replay-only":
        raise InvalidArgumentError(
            "a replay-only bundle carries no prompt or tool text to restore; "
            "export the session as a local or sanitized bundle to import it"
        )
    # _check made the session an object and the transcript a list of objects.
    meta = cast("Mapping[str, JSONValue]", bundle["session"])
    transcript = cast("list[Mapping[str, JSONValue]]", bundle["transcript"])
    parents, title = meta.get("parent_session_ids"), meta.get("title")
    messages = [_message(e, i, where) for i, e in enumerate(transcript)]
    if not messages:
        # A session of nothing is not an import: say so rather than make an empty one.
        raise ImportFormatError(where, None, "the bundle's transcript holds no messages")
    provenance: dict[str, JSONValue] = {
        "schema": bundle["schema"],
        "mode": bundle["mode"],
        "source_session_id": meta["id"],
        "lineage": list(parents) if isinstance(parents, list) else [],
        "source_metadata": meta.get("metadata") or {},
    }
    try:
        return client.sessions.create(
            messages,
            session_id=session_id,
            title=title if isinstance(title, str) else None,
            lineage_operator="Session.import",
            metadata={"imported_bundle": provenance},
        )
    except InvalidMessageError as exc:
        raise ImportFormatError(where, None, f"transcript: {exc}") from exc
