"""``seed_from_jsonl``: a new stored session from a transcript file (seed 003).

The whole file is read and checked before anything is stored; the session is
then created with its messages in one transaction
(:meth:`plait.client.SessionCollection.create`), so an import either creates a
complete session or nothing.

What raises and what returns ``ok=False``:

* bad arguments raise (``TypeError`` for an unknown keyword,
  :class:`~plait.errors.UnknownOptionError` for an unknown key of ``options``,
  :class:`~plait.errors.InvalidArgumentError` for a bad value); a
  ``rename_session`` id that is taken raises
  :class:`~plait.errors.SessionExistsError`;
* a file that cannot be read as its format raises
  :class:`~plait.errors.ImportFormatError` naming the line;
* a file that was read but cannot be seeded as asked returns
  ``SeedResult(ok=False, error=...)``: provider or model guardrail mismatch,
  a ``provider_responses_only`` source with ``validate=True``, no
  prompt-visible messages.

``validate=True`` (the default) requires an exact replay source: every line
must be a JSON object of the format, every message well formed, every tool
result must answer a call made earlier in the transcript (and only once).
``validate=False`` is best effort and tolerates, each time marking the result
``partial=True`` and listing the problem in ``source["problems"]``:

* lines that are not JSON or not objects (a file cut off mid-line ends that way),
  and records of the format whose shape is wrong: skipped;
* tool-call arguments that are not a JSON object: kept as ``{"_raw": text}``;
* a tool result whose call is not in the transcript: kept as a user message
  ``[result of tool call <id>] ...`` so the transcript stays valid for a provider;
  a second result for the same call: dropped;
* ``provider_responses_only`` sources: the assistant replies are imported.

Things a format records that the model never saw (progress lines, UI events,
sidechains, abandoned branches) are left out of the messages in both modes:
that is not partial. ``source["skipped"]`` counts them by record type, and the
records themselves are kept verbatim in ``metadata["seeded_from_jsonl"]["unmapped"]``
(``{line, kind, record}``, up to ``_source.UNMAPPED_MAX_BYTES`` of JSON; any beyond
are counted in ``source["unmapped_not_kept"]``), so a later, better importer can
map them. ``docs/importers.md`` lists, per agent and record type, what is kept,
mapped or skipped.
"""

from __future__ import annotations

import hashlib
import os
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from plait._ids import is_session_id
from plait._time import from_micros, now_micros
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    SessionExistsError,
    UnknownOptionError,
)
from plait.interop._detect import FORMATS, PARSERS, detect
from plait.interop._parts import calls_in
from plait.interop._read import read_source
from plait.interop._source import Item, Parsed, ProgressCallback, Source
from plait.records import JSONValue, dumps, record_from_message

if TYPE_CHECKING:
    from plait.client import Client

__all__ = ["SEED_SOURCE_SCHEMA", "SeedResult", "seed_from_jsonl"]

SEED_SOURCE_SCHEMA: Final = "plait.session_seed_source.v1"
"""The ``schema`` of the ``source`` dict a seeded session records."""
_DEFAULTS: Final[dict[str, Any]] = {
    "format": "auto",
    "truncate_to_last": None,
    "drop_tool_calls": False,
    "rename_session": None,
    "validate": True,
    "provider": None,
    "model": None,
    "source_agent": None,
    "source_session_id": None,
    "source_label": None,
    "source_kind": None,
    "source_provenance": None,
    "recommend_compaction": False,
    "title": None,
}
_BOOLS: Final = ("drop_tool_calls", "validate", "recommend_compaction")
_STRINGS: Final = (
    "provider",
    "model",
    "source_agent",
    "source_session_id",
    "source_label",
    "source_kind",
    "title",
)


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What :func:`seed_from_jsonl` did (seed 003's result shape).

    ``ok`` is False, with ``error`` saying why, when the file was read but could
    not be seeded as asked; nothing was stored then.
    """

    ok: bool
    """Whether a session was created."""
    session_id: str | None = None
    """The new session's id."""
    turns_loaded: int = 0
    """User messages loaded: the turns a person (or a harness) started."""
    messages_loaded: int = 0
    """Messages stored in the new session (system, user, assistant, tool, summary)."""
    source_records: int = 0
    """Records read from the file: non-blank JSONL lines, or elements of a JSON document."""
    source_format: str | None = None
    """``message_events``, ``request_snapshots`` or ``provider_responses_only``."""
    partial: bool = False
    """Something unreadable was skipped (``validate=False`` only; see ``source['problems']``)."""
    truncated: bool = False
    """``truncate_to_last`` left earlier messages out."""
    provider: str | None = None
    """The provider the transcript records, else the ``provider`` option."""
    model: str | None = None
    """The model of the transcript's newest reply, else the ``model`` option."""
    tool_format: str | None = None
    """``native`` when the session holds structured tool calls, ``none`` when it holds none."""
    source: Mapping[str, JSONValue] | None = None
    """Provenance, schema ``plait.session_seed_source.v1``; also in the session's metadata."""
    recommend_compaction: bool = False
    """The host should offer or run compaction before resuming."""
    error: str | None = None
    """Why nothing was seeded, when ``ok`` is False."""

    def to_dict(self) -> dict[str, JSONValue]:
        """The result as a JSON object (seed 003's dict)."""
        out = asdict(self)
        out["source"] = dict(self.source) if self.source is not None else None
        return out


@dataclass(slots=True)
class _Options:
    format: str
    truncate_to_last: int | None
    drop_tool_calls: bool
    rename_session: str | None
    validate: bool
    provider: str | None
    model: str | None
    source_agent: str | None
    source_session_id: str | None
    source_label: str | None
    source_kind: str | None
    source_provenance: dict[str, JSONValue] | None
    recommend_compaction: bool
    title: str | None


def _options(given: dict[str, Any], options: Mapping[str, Any] | None) -> _Options:
    values = dict(given)
    if options is not None:
        if not isinstance(options, Mapping):
            raise InvalidArgumentError("options must be a mapping of option names to values")
        unknown = [str(k) for k in options if k not in _DEFAULTS]
        if unknown:
            raise UnknownOptionError("seed_from_jsonl", unknown, list(_DEFAULTS))
        for key, value in options.items():
            if values[key] != _DEFAULTS[key] and values[key] != value:
                raise InvalidArgumentError(f"seed_from_jsonl: {key!r} given twice, differently")
            values[key] = value
    for key in _BOOLS:
        if not isinstance(values[key], bool):
            raise InvalidArgumentError(f"{key} must be a bool, got {values[key]!r}")
    for key in _STRINGS:
        value = values[key]
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidArgumentError(f"{key} must be a non-empty string, got {value!r}")
    fmt = values["format"]
    if fmt != "auto" and fmt not in FORMATS:
        raise InvalidArgumentError(
            f"format must be 'auto' or one of {', '.join(FORMATS)}, got {fmt!r}"
        )
    n = values["truncate_to_last"]
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise InvalidArgumentError(f"truncate_to_last must be a positive int, got {n!r}")
    sid = values["rename_session"]
    if sid is not None and not is_session_id(sid):
        raise InvalidArgumentError(f"rename_session: {sid!r} is not a valid session id")
    prov = values["source_provenance"]
    if prov is not None:
        if not isinstance(prov, Mapping):
            raise InvalidArgumentError("source_provenance must be a JSON object")
        try:
            dumps(prov)
        except InvalidMessageError as exc:
            raise InvalidArgumentError(f"source_provenance: {exc}") from exc
        values["source_provenance"] = dict(prov)
    return _Options(**values)


def _pair(
    src: Source, items: list[tuple[int, Item]], *, fill_names: bool
) -> list[tuple[int, Item]]:
    """Check that every tool result answers an earlier call, once (see the module docstring).

    A result answers the newest call with its id; with ``fill_names`` it is given
    that call's tool name when it names none (not for plait's own files, which are
    kept exactly as written).
    """
    calls: dict[str, bool] = {}  # call id -> answered
    names: dict[str, str] = {}  # call id -> tool name
    out: list[tuple[int, Item]] = []
    for pos, item in items:
        msg = item.message
        role = msg.get("role")
        if role == "assistant":
            for call in calls_in(msg):
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(call, dict) and isinstance(call_id, str):
                    # An id may come back once its call was answered (SWE-agent replays do).
                    if calls.get(call_id) is False:
                        src.bad(
                            item.line, f"tool call id {call_id!r} is reused before it was answered"
                        )
                    calls[call_id] = False
                    if isinstance(name := call.get("name"), str):
                        names[call_id] = name
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in calls:
                src.bad(
                    item.line,
                    f"a tool result answers call {call_id!r}, which no earlier message made",
                    kind="orphan tool result",
                )
                content = msg.get("content")
                meta = msg.get("meta")
                meta = dict(meta) if isinstance(meta, Mapping) else {}
                text = content if isinstance(content, str) else dumps(content)
                msg = {
                    "role": "user",
                    "content": f"[result of tool call {call_id}]\n{text}",
                    "meta": {**meta, "orphan_tool_result": str(call_id)},
                }
                item = Item(msg, item.line)
            elif calls[call_id]:
                src.bad(
                    item.line,
                    f"a second result for tool call {call_id!r}",
                    kind="duplicate tool result",
                )
                continue
            else:
                calls[call_id] = True
                if fill_names and not msg.get("tool_name") and call_id in names:
                    # Formats that do not repeat the tool's name on its result (OpenAI's
                    # is optional, SWE-agent has none) get it from the call.
                    item = Item({**msg, "tool_name": names[call_id]}, item.line)
        out.append((pos, item))
    return out


def _valid(src: Source, items: list[tuple[int, Item]]) -> list[tuple[int, Item]]:
    out: list[tuple[int, Item]] = []
    for pos, item in items:
        try:
            record_from_message(item.message, seq=pos)
        except InvalidMessageError as exc:
            reason = str(exc).split(": ", 1)[-1]
            src.bad(item.line, f"not a valid message: {reason}", kind="invalid message")
            continue
        except (TypeError, AttributeError) as exc:
            # record_from_message lets these through for some shapes (an unhashable content
            # part "type"); a file must never turn them into anything but a format error.
            src.bad(item.line, f"not a valid message: {exc}", kind="invalid message")
            continue
        out.append((pos, item))
    return out


def _drop_tools(items: list[tuple[int, Item]]) -> list[tuple[int, Item]]:
    out: list[tuple[int, Item]] = []
    for pos, item in items:
        msg = item.message
        if msg.get("role") == "tool":
            continue
        if msg.get("role") == "assistant" and "tool_calls" in msg:
            msg = {k: v for k, v in msg.items() if k != "tool_calls"}
            if not msg.get("content") and not msg.get("images"):
                continue
            item = Item(msg, item.line)
        out.append((pos, item))
    return out


def _truncate(items: list[tuple[int, Item]], n: int) -> list[tuple[int, Item]]:
    kept = items[-n:]
    calls = {
        call_id
        for _, item in kept
        for call in calls_in(item.message)
        if isinstance(call, Mapping) and isinstance(call_id := call.get("id"), str)
    }
    # Never start on a tool result whose call was cut: a provider would refuse it.
    while kept and kept[0][1].message.get("role") == "tool":
        if kept[0][1].message.get("tool_call_id") in calls:
            break
        kept = kept[1:]
    return kept


def _renumber(items: list[tuple[int, Item]]) -> list[dict[str, JSONValue]]:
    """The final messages, each summary's ``folds`` moved to the positions that were kept."""
    positions = [pos for pos, _ in items]
    out: list[dict[str, JSONValue]] = []
    for _, item in items:
        msg = item.message
        folds = msg.get("folds")
        ends = folds if isinstance(folds, list | tuple) and len(folds) == 2 else (None, None)
        if msg.get("role") == "summary" and isinstance(ends[0], int) and isinstance(ends[1], int):
            lo, hi = bisect_left(positions, ends[0]), bisect_left(positions, ends[1])
            msg = {**msg, "folds": [lo, hi]}
        out.append(msg)
    return out


def _unmapped(src: Source) -> tuple[list[JSONValue], int]:
    """The unmapped records to keep on the session, and how many did not fit the limit."""
    return list(src.unmapped), src.unmapped_over


def _is_turn(message: Mapping[str, JSONValue]) -> bool:
    """A user message that starts a turn: not context an agent injected (an attachment)."""
    if message.get("role") != "user" or message.get("added") is not None:
        return False
    meta = message.get("meta")
    source = meta.get("source") if isinstance(meta, Mapping) else None
    return not (isinstance(source, Mapping) and "attachment" in source)


def _same(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def _clean_title(title: str | None) -> str | None:
    if title is None:
        return None
    cleaned = " ".join(title.split())[:200]
    return cleaned or None


def seed_from_jsonl(
    client: Client,
    path: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
    *,
    format: str = "auto",
    truncate_to_last: int | None = None,
    drop_tool_calls: bool = False,
    rename_session: str | None = None,
    validate: bool = True,
    provider: str | None = None,
    model: str | None = None,
    source_agent: str | None = None,
    source_session_id: str | None = None,
    source_label: str | None = None,
    source_kind: str | None = None,
    source_provenance: Mapping[str, JSONValue] | None = None,
    recommend_compaction: bool = False,
    title: str | None = None,
    progress: ProgressCallback | None = None,
) -> SeedResult:
    """Create a new stored session from a transcript file (seed 003's ``seed_from_jsonl``).

    Reads plait JSONL, OpenAI chat messages (JSON or JSONL), Claude Code
    session files, Codex rollouts, Gemini CLI recordings, OpenHands event
    streams, SWE-agent trajectories, openai-agents items and pydantic-ai
    message dumps; the module docstrings of ``plait.interop`` and
    ``docs/importers.md`` say how each maps to plait messages. Only a regular
    file of at most ``MAX_SOURCE_BYTES`` is read. The
    session is created in one transaction with lineage operator
    ``Session.import``, and records where it came from in
    ``metadata["seeded_from_jsonl"]``.

    Args:
        client: the client whose store and workspace receive the session.
        path: the transcript file.
        options: the same options as a mapping; an unknown key raises
            :class:`~plait.errors.UnknownOptionError`.
        format: ``auto`` (detect), or one of :data:`~plait.interop.FORMATS`
            (``plait``, ``openai``, ``claude-code``, ``codex``, ``gemini-cli``,
            ``openhands``, ``swe-agent``, ``openai-agents``, ``pydantic-ai``).
        truncate_to_last: keep only the last N messages (then drop a leading tool
            result whose call was cut).
        drop_tool_calls: leave out tool calls and tool results, keeping user and
            assistant text (an assistant message left empty is dropped).
        rename_session: the new session's id (default: a new UUIDv7).
        validate: require an exact replay source (see the module docstring for
            what ``False`` tolerates).
        provider: guardrail: the transcript's recorded provider must be this.
        model: guardrail: the model of the transcript's newest reply must be this
            (exact, case-insensitive). Guardrails pass when the format records nothing.
        source_agent: provenance: the agent that wrote the file (default: the
            format's slug, ``claude-code``, ``codex``, ``gemini-cli``).
        source_session_id: provenance: its id for the session (default: the id
            the file records, for those agents).
        source_label: provenance: a label a UI can show.
        source_kind: default ``external_agent_session`` when an agent or session
            id is known, ``plait_jsonl`` for plait's own files, else
            ``external_transcript``.
        source_provenance: provenance: adapter-specific, non-secret JSON.
        recommend_compaction: record that a host should compact before resuming.
        title: the new session's title (default: the title the file records).
        progress: called with (bytes read, total bytes) while the file is read.

    Returns:
        The :class:`SeedResult`.

    Raises:
        TypeError: an unknown keyword argument.
        UnknownOptionError: an unknown key in ``options``.
        InvalidArgumentError: an option of the wrong type or range.
        SessionExistsError: ``rename_session`` is taken.
        ImportFormatError: the file cannot be read, is not a regular file, is
            too big, or does not fit its format (the error names the line).
    """
    opts = _options(
        {
            "format": format,
            "truncate_to_last": truncate_to_last,
            "drop_tool_calls": drop_tool_calls,
            "rename_session": rename_session,
            "validate": validate,
            "provider": provider,
            "model": model,
            "source_agent": source_agent,
            "source_session_id": source_session_id,
            "source_label": source_label,
            "source_kind": source_kind,
            "source_provenance": source_provenance,
            "recommend_compaction": recommend_compaction,
            "title": title,
        },
        options,
    )
    if opts.rename_session is not None and client.exists(opts.rename_session):
        raise SessionExistsError(opts.rename_session)
    data = read_source(path)
    src = Source(data, path=os.fspath(path), strict=opts.validate, progress=progress)
    fmt = detect(src) if opts.format == "auto" else opts.format
    parsed = PARSERS[fmt](src)
    return _seed(client, src, parsed, opts, data)


def _seed(client: Client, src: Source, parsed: Parsed, opts: _Options, data: bytes) -> SeedResult:
    items = list(enumerate(parsed.items))
    items = _pair(src, _valid(src, items), fill_names=parsed.format != "plait")
    total = len(items)
    if opts.drop_tool_calls:
        items = _drop_tools(items)
    truncated = False
    if opts.truncate_to_last is not None and len(items) > opts.truncate_to_last:
        items = _truncate(items, opts.truncate_to_last)
        truncated = True
    messages = _renumber(items)
    provider = parsed.provider or opts.provider
    model = parsed.model or opts.model
    has_tools = any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)
    tool_format = "native" if has_tools else "none"

    def failed(error: str) -> SeedResult:
        return SeedResult(
            ok=False,
            source_records=src.records,
            source_format=parsed.source_format,
            partial=src.partial,
            truncated=truncated,
            provider=provider,
            model=model,
            tool_format=tool_format,
            recommend_compaction=opts.recommend_compaction,
            error=error,
        )

    if parsed.source_format == "provider_responses_only" and opts.validate:
        return failed(
            "the file holds only provider responses: the user and tool turns cannot be "
            "rebuilt from it (validate=False imports the replies, best effort)"
        )
    if opts.provider is not None and parsed.provider and not _same(parsed.provider, opts.provider):
        return failed(
            f"provider guardrail: the transcript was recorded with {parsed.provider!r}, "
            f"not {opts.provider!r}"
        )
    if opts.model is not None and parsed.model and not _same(parsed.model, opts.model):
        return failed(
            f"model guardrail: the transcript's newest reply is from {parsed.model!r}, "
            f"not {opts.model!r}"
        )
    if not messages:
        # Read as the wrong format, a file holds no messages too: the format is named.
        why = f"none read as {parsed.format}" if not total else "none are left after the options"
        return failed(f"no prompt-visible messages to seed: {why}")

    agent = opts.source_agent or parsed.agent
    session_ref = opts.source_session_id or (parsed.session_id if parsed.agent else None)
    if opts.source_kind is not None:
        kind = opts.source_kind
    elif agent or session_ref:
        kind = "external_agent_session"
    elif parsed.format == "plait":
        kind = "plait_jsonl"
    else:
        kind = "external_transcript"
    name = Path(src.path).name if src.path else None
    source: dict[str, JSONValue] = {
        "schema": SEED_SOURCE_SCHEMA,
        "kind": kind,
        "format": parsed.format,
        "source_format": parsed.source_format,
        "agent": agent,
        "session_id": session_ref,
        "label": opts.source_label,
        "provenance": opts.source_provenance or {},
        "file": name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "records": src.records,
        "recorded_provider": parsed.provider,
        "recorded_model": parsed.model,
        "details": parsed.details,
        "skipped": dict(sorted(src.skipped.items())),
        "problems": list(src.problems),
        "unmapped": len(src.unmapped) + src.unmapped_over,
        "imported_at": from_micros(now_micros()).isoformat(),
    }
    unmapped, over = _unmapped(src)
    if over:
        source["unmapped_not_kept"] = over
    seeded: dict[str, JSONValue] = {
        "source": source,
        "unmapped": unmapped,
        "source_format": parsed.source_format,
        "provider": provider,
        "model": model,
        "tool_format": tool_format,
        "partial": src.partial,
        "truncated": truncated,
        "recommend_compaction": opts.recommend_compaction,
    }
    session = client.sessions.create(
        messages,
        session_id=opts.rename_session,
        title=opts.title if opts.title is not None else _clean_title(parsed.title),
        lineage_operator="Session.import",
        metadata={"seeded_from_jsonl": seeded},
    )
    # Counted now, as a writer does before a request: lists then know which messages no
    # history shows (the context the agent added) without reading the transcript.
    session.context()
    return SeedResult(
        ok=True,
        session_id=session.id,
        turns_loaded=sum(1 for m in messages if _is_turn(m)),
        messages_loaded=len(messages),
        source_records=src.records,
        source_format=parsed.source_format,
        partial=src.partial,
        truncated=truncated,
        provider=provider,
        model=model,
        tool_format=tool_format,
        source=source,
        recommend_compaction=opts.recommend_compaction,
        error=None,
    )
