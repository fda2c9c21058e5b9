"""Counting a session's new records once, and its context report from stored tallies.

They speak only the :class:`~plait.store.base.Store` protocol and the pure
:mod:`plait.context`; the session's context part calls them.

* :func:`count_pending` counts the records no tally covers yet (the tail the append fast
  path left uncounted), in one tokenizer batch, and, for the session's writer, stores their
  counts and tallies in one ``UPDATE`` (:meth:`Store.set_tallies`). A reader counts the same
  tail in memory and writes nothing.
* :func:`context_report` reads a handful of rows (the tallies at the head and before the
  history view, the newest summary, system prompt and reply) and so costs the same for a
  transcript of ten records or of a hundred thousand (decisions D50..D52).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from plait.context import (
    SUMMARY_UNKNOWN,
    ContextReport,
    Encoding,
    ModelInfo,
    ModelLimits,
    Share,
    Tally,
    build_report,
    count_record,
    count_records,
    count_tool_specs,
    counter_name,
    encoding_for,
    limits_from_env,
    model_info,
)
from plait.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    PlaitError,
    StoreCorruptError,
    StoreError,
)
from plait.records import AssistantRecord, Record, SummaryRecord, hidden_summaries, newest_summary
from plait.session._memo import WINDOW_MAX, Memo
from plait.store import TallyBatches
from plait.store.base import SessionRow, Store

__all__ = [
    "MODEL_INFO",
    "Counted",
    "context_report",
    "count_pending",
    "counting_encoding",
    "declared_in",
    "info_for",
    "session_model",
    "shown_length",
    "shown_lengths",
    "stored_limits",
    "tool_spec_texts",
]

MODEL_INFO: Final = "model_info"
"""The settings key of the model limits a session sets (:class:`~plait.context.ModelLimits`)."""


@dataclass(slots=True)
class Counted:
    """The lineage's tally at the head, and what was counted in memory to get it."""

    head: Tally
    """The tally at the newest position (an empty tally for an empty transcript)."""
    local: dict[int, Tally] = field(default_factory=dict)
    """Tallies counted now, by position (stored too when the caller persisted them)."""
    counts: dict[int, int] = field(default_factory=dict)
    """Token counts made now, by position."""
    records: dict[int, Record] = field(default_factory=dict)
    """The records read to count them, by position (a report reuses them)."""
    partial: bool = False
    """True when no tokenizer was available, so the new records count 0."""


def session_model(row: SessionRow) -> str | None:
    """The model a session's settings name (``settings["model"]``), or None."""
    settings = row.metadata.get("settings")
    if isinstance(settings, Mapping):
        model = settings.get("model")
        if isinstance(model, str) and model:
            return model
    return None


def stored_limits(settings: Mapping[str, object]) -> ModelLimits:
    """The model limits a session's settings set (none when they set none).

    Raises:
        InvalidArgumentError: the stored ``model_info`` is not valid limits.
    """
    raw = settings.get(MODEL_INFO)
    return ModelLimits.from_json(raw) if raw is not None else ModelLimits()


def _row_settings(row: SessionRow) -> Mapping[str, object]:
    settings = row.metadata.get("settings")
    return settings if isinstance(settings, Mapping) else {}


def info_for(
    settings: Mapping[str, object], model: str | None, declared: ModelLimits | None = None
) -> ModelInfo:
    """What is known of ``model`` for a session with these settings.

    Its ``model_info`` setting wins, then the environment, then what the server declares,
    then the family table.
    """
    return model_info(
        model,
        settings=stored_limits(settings),
        env=limits_from_env(os.environ),
        declared=declared,
    )


def counting_encoding(row: SessionRow, model: str | None) -> Encoding:
    """The encoding a session's records are counted with.

    A ``tokenizer`` set in its ``model_info`` setting, else ``PLAIT_TOKENIZER``, else
    ``model``'s family's.
    """
    return (
        stored_limits(_row_settings(row)).tokenizer
        or limits_from_env(os.environ).tokenizer
        or encoding_for(model)
    )


def declared_in(record: Record) -> ModelLimits | None:
    """The window and output limit a reply's server declared (its ``meta["model_limits"]``)."""
    raw = record.meta.get("model_limits")
    if not isinstance(raw, Mapping):
        return None
    try:
        return ModelLimits.from_json(raw)
    except PlaitError:  # written by another version, or by hand: not a declaration to trust
        return None


def _meta_model(record: Record) -> str | None:
    """The model that wrote a reply, or None.

    Its ``meta["model"]``, or for an imported reply the model its source recorded
    (``meta["source"]["model"]``).
    """
    model = record.meta.get("model")
    if isinstance(model, str) and model:
        return model
    source = record.meta.get("source")
    model = source.get("model") if isinstance(source, Mapping) else None
    return model if isinstance(model, str) and model else None


_LOOK_BACK: Final = 64
"""Records read at a time when looking back for the newest reply that names its model."""


def _named_reply(store: Store, row: SessionRow, reply: Record, memo: Memo | None) -> Record:
    """The newest reply, at or before ``reply``, that names the model that wrote it.

    A reply written without a model (one a caller recorded, an ``inject``) says nothing
    of the window; the model of the conversation is the one of the reply before it.
    ``reply`` itself when none of the 1,024 records before it names one.
    """
    if _meta_model(reply) is not None:
        return reply
    hi, floor = reply.seq, max(0, reply.seq - _LOOK_BACK * 16)
    while hi > floor:
        lo = max(floor, hi - _LOOK_BACK)
        held = memo.records(lo, hi) if memo is not None else None
        for record in reversed(held if held is not None else store.read(row, lo, hi)):
            if isinstance(record, AssistantRecord) and _meta_model(record) is not None:
                return record
        hi = lo
    return reply


def _one(store: Store, row: SessionRow, seq: int, memo: Memo | None = None) -> Record:
    if memo is not None:
        held = memo.record(seq)
        if held is not None:
            return held
    found = store.read(row, seq, seq + 1)
    if not found:
        raise StoreCorruptError(f"session {row.id!r}: no record at position {seq}")
    if memo is not None:
        memo.extra[seq] = found[0]
    return found[0]


def shown_length(store: Store, row: SessionRow) -> int:
    """How many messages in the row's view a person sees.

    The summaries an ``uncompact`` hid and the user messages an agent added are left
    out: no history shows them. Two reads:
    where counting stopped, and the newest stored tally (an ``uncompact`` counts its
    event at once); a store that cannot say gives the view's length.
    """
    lay = row.layout
    if lay.length == 0:
        return 0
    try:
        end = store.counted_end(row)
        if end <= lay.view_start:
            return lay.length
        at = store.tallies(row, _shown_positions(row, end))
    except PlaitError:
        return lay.length
    return _shown(row, end, at)


def shown_lengths(store: Store, rows: Sequence[SessionRow]) -> list[int]:
    """:func:`shown_length` of each row, in two reads for all of them where the store can.

    A store offering :class:`~plait.store.TallyBatches` answers a listing's page in one
    snapshot (on PostgreSQL, one statement each for the ends and the tallies); another
    is asked a row at a time, as is every row of a page one of whose rows does not read
    (its count falls back to its view's length, the others' do not).
    """
    if not isinstance(store, TallyBatches) or len(rows) < 2:
        return [shown_length(store, row) for row in rows]
    counted = [row for row in rows if row.layout.length > 0]
    try:
        ends = dict(zip((r.pk for r in counted), store.counted_ends(counted), strict=True))
        asked = [r for r in counted if ends[r.pk] > r.layout.view_start]
        tallies = store.tallies_at([(r, _shown_positions(r, ends[r.pk])) for r in asked])
    except PlaitError:  # one damaged row: ask row by row, so only its count falls back
        return [shown_length(store, row) for row in rows]
    found = dict(zip((r.pk for r in asked), tallies, strict=True))
    return [
        _shown(row, ends[row.pk], found[row.pk]) if row.pk in found else row.layout.length
        for row in rows
    ]


def _shown_positions(row: SessionRow, end: int) -> list[int]:
    before = row.layout.view_start - 1
    return [end - 1, before] if before >= 0 else [end - 1]


def _shown(row: SessionRow, end: int, at: Mapping[int, Tally]) -> int:
    lay = row.layout
    head = at.get(end - 1)
    if head is None:
        return lay.length
    before = lay.view_start - 1
    hidden = head.hidden - (at[before].hidden if before in at else 0)
    return max(lay.length - hidden, 0)


def count_pending(
    store: Store,
    row: SessionRow,
    *,
    persist: bool,
    best_effort: bool = False,
    memo: Memo | None = None,
) -> Counted:
    """Count the records past the counted prefix, and store the counts if ``persist``.

    The encoding is the model family's (:func:`plait.context.encoding_for`): the model the
    session's settings name, else the newest reply's model in the batch or before it.

    Args:
        store: the session's store.
        row: the session row (its layout says which rows to count).
        persist: store the counts and tallies (the session's writer does; so may a reader
            when no other process is writing the session); else count in memory only.
        best_effort: a store that refuses the write (a read-only file) is not an error: the
            counts made in memory still serve.
        memo: the writer's memo of its transcript: what it counted, read and appended
            before is taken from it instead of the store, and what is counted now is
            kept in it.

    Returns:
        The head's tally and what was counted.
    """
    end = row.layout.end_seq
    if end == 0:
        return Counted(Tally())
    known = memo is not None and memo.tally is not None and memo.counted_end <= end
    start = memo.counted_end if known and memo is not None else store.counted_end(row)
    if start == end:
        head = memo.tally if known and memo is not None else None
        if head is None:
            head = store.tallies(row, [end - 1]).get(end - 1)
        if head is None:
            raise StoreCorruptError(f"session {row.id!r}: counted position {end - 1} has no tally")
        if memo is not None:
            memo.counted_end, memo.tally = end, head
        return Counted(head)
    prev = Tally()
    if start > 0:
        found = memo.tally if known and memo is not None else None
        if found is None:
            found = store.tallies(row, [start - 1]).get(start - 1)
        if found is None:
            raise StoreCorruptError(f"session {row.id!r}: counted position {start - 1} lost")
        prev = found
    held = memo.records(start, end) if memo is not None else None
    if held is not None:
        records = held
    else:
        records = store.read(row, start, end)
        if memo is not None and (memo.window_end != start or not memo.window):
            memo.seed(start, records)
        elif memo is not None:
            memo.extend(records)
    model = session_model(row)
    if model is None:
        for record in reversed(records):
            if isinstance(record, AssistantRecord) and _meta_model(record):
                model = _meta_model(record)
                break
    if model is None and prev.reply >= 0:
        model = _meta_model(_one(store, row, prev.reply))
    partial = False
    try:
        counts = count_records(records, counting_encoding(row, model))
    except MissingDependencyError:
        counts = [r.tokens or 0 for r in records]
        partial, persist = True, False
    out = Counted(prev, partial=partial)

    def summary_before(seq: int) -> int | None:
        if seq < 0:
            return -1
        tally = out.local.get(seq) or (memo.tallies.get(seq) if memo is not None else None)
        if tally is None:
            tally = store.tallies(row, [seq]).get(seq)
        return tally.summary if tally is not None else None

    batch: list[tuple[int, Tally]] = []
    tally = prev
    for record, n in zip(records, counts, strict=True):
        tally = tally.advance(record, n, summary_before)
        out.local[record.seq] = tally
        out.counts[record.seq] = n
        out.records[record.seq] = record
        batch.append((n, tally))
    out.head = tally
    stored = False
    if persist:
        # False: another writer counted these rows first; the chain stays consistent.
        try:
            store.set_tallies(row, start, batch)
            stored = True
        except StoreError:
            if not best_effort:
                raise
    if memo is not None and stored:
        memo.counted_end, memo.tally = end, tally
        memo.tallies.update(out.local)
        if len(memo.tallies) > 2 * WINDOW_MAX:  # bounded: a missing one is read again
            keep = sorted(memo.tallies)[-WINDOW_MAX:]
            memo.tallies = {p: memo.tallies[p] for p in keep}
        _fill_tokens(memo, out.counts)
    return out


def _fill_tokens(memo: Memo, counts: Mapping[int, int]) -> None:
    """The window's records counted now carry their counts, as the stored rows do."""
    lo = memo.window_lo
    for seq, n in counts.items():
        i = seq - lo
        if 0 <= i < len(memo.window) and memo.window[i].tokens is None:
            memo.window[i] = _with_tokens(memo.window[i], n)


def context_report(
    store: Store,
    row: SessionRow,
    *,
    model: str | None,
    tool_specs: Sequence[str],
    persist: bool,
    best_effort: bool = False,
    memo: Memo | None = None,
    declared: ModelLimits | None = None,
) -> tuple[ContextReport, ModelInfo] | None:
    """Build the session's context report from stored counts and tallies.

    Args:
        store: the session's store.
        row: the session row, fresh.
        model: the model the next request goes to; None for the newest reply's model.
        tool_specs: the tool schemas offered, each as compact JSON text.
        persist: store what :func:`count_pending` counts.
        best_effort: ignore a store that refuses that write (see :func:`count_pending`).
        memo: the writer's memo (see :func:`count_pending`).
        declared: what the model's server declares of it (see :func:`info_for`).

    Returns:
        The report and the model family it was measured for, or None before the first reply.
    """
    counted = count_pending(store, row, persist=persist, best_effort=best_effort, memo=memo)
    head = counted.head
    if head.reply < 0:
        return None
    lay = row.layout
    view = lay.view_start

    newest = counted.records.get(head.reply) or _one(store, row, head.reply, memo)
    reply = _named_reply(store, row, newest, memo)
    # The stored counts were made with the encoding of the session's model (its setting, else
    # its newest reply's model: count_pending's rule), whatever model this report is for; the
    # report names that counter, and counts what it adds (tool schemas) with it too.
    counting = counting_encoding(row, session_model(row) or _meta_model(reply))
    if model is None:
        model = _meta_model(reply) or session_model(row)
    if declared is None and model == _meta_model(reply):
        declared = declared_in(reply)  # what the server said when it wrote the newest reply
    info = info_for(_row_settings(row), model, declared)

    def record(seq: int) -> Record:
        found = counted.records.get(seq) or _one(store, row, seq, memo)
        if found.tokens is None:
            n = counted.counts.get(seq)
            if n is None:
                n = count_record(found, counting)
            found = _with_tokens(found, n)
        return found

    schema_tokens = count_tool_specs(list(tool_specs), counting)
    if head.summary == SUMMARY_UNKNOWN:
        report = _read_view(store, row, counted, info, counting, schema_tokens, len(tool_specs))
        return report, info
    summary = record(head.summary) if head.summary >= view else None
    hist_start = view
    if isinstance(summary, SummaryRecord):
        hist_start = max(view, summary.folds_to)
    # The newest system prompt, even one a trim or reset hid: requests keep it (D91).
    system = record(head.system) if head.system >= 0 else None
    wanted = [p for p in (hist_start - 1, head.usage) if p >= 0]
    at = {p: counted.local[p] for p in wanted if p in counted.local}
    if memo is not None:
        at.update({p: memo.tallies[p] for p in wanted if p not in at and p in memo.tallies})
    missing = [p for p in wanted if p not in at]
    if missing:
        at.update(store.tallies(row, missing))
    base = at.get(hist_start - 1, Tally()) if hist_start > 0 else Tally()
    tokens = [h - b for h, b in zip(head.tokens, base.tokens, strict=True)]
    items = [h - b for h, b in zip(head.items, base.items, strict=True)]
    cut = (head.cut[0] - base.cut[0], head.cut[1] - base.cut[1])
    values = {
        "System prompt": (system.tokens or 0, 1) if system is not None else (0, 0),
        "Environment notes": (0, 0),
        "Tool schemas": (schema_tokens, len(tool_specs)),
        "User messages": (tokens[0], items[0]),
        # A cut-off reply stays in the transcript but no request sends it (D73).
        "Assistant messages": (tokens[1] - cut[0], items[1] - cut[1]),
        "Tool output": (tokens[2], items[2]),
        "Provider items": (tokens[3], items[3]),
        "Compaction summary": (summary.tokens or 0, 1) if summary is not None else (0, 0),
    }
    shares = tuple(Share(name, t, n) for name, (t, n) in values.items() if t or n)
    measured = sum(t for t, _ in values.values())
    provider_used: int | None = None
    u = head.usage
    if u >= hist_start and (summary is None or u > summary.seq) and u in at:
        usage = (
            newest if newest.seq == u else counted.records.get(u) or _one(store, row, u, memo)
        ).meta.get("usage")
        if isinstance(usage, Mapping):
            inp, out = usage.get("input_tokens"), usage.get("output_tokens")
            if isinstance(inp, int) and isinstance(out, int) and inp >= 0 and out >= 0:
                after = sum(head.tokens) - sum(at[u].tokens) - (head.cut[0] - at[u].cut[0])
                provider_used = inp + out + after
    report = ContextReport(
        window=info.window,
        used=provider_used if provider_used is not None else measured,
        from_provider=provider_used is not None,
        measured_by=counter_name(counting),
        partial=counted.partial,
        shares=shares,
        window_source=info.source,
    )
    return report, info


def tool_spec_texts(tools: Iterable[object]) -> list[str]:
    """Return each tool's schema as the compact JSON text the context report counts.

    A tool is a mapping (``{"name", "description", "parameters"}``), an object with
    ``to_dict()`` (a provider's ``ToolSpec``) or with ``spec()`` (a ``plait.tools.Tool``).

    Raises:
        InvalidArgumentError: something that is none of these.
    """
    texts: list[str] = []
    for tool in tools:
        spec: object
        if isinstance(tool, Mapping):
            spec = dict(tool)
        elif callable(getattr(tool, "to_dict", None)):
            spec = tool.to_dict()  # type: ignore[attr-defined]
        elif callable(getattr(tool, "spec", None)):
            spec = tool.spec()  # type: ignore[attr-defined]
        else:
            raise InvalidArgumentError(f"not a tool or tool spec: {tool!r}")
        try:
            texts.append(json.dumps(spec, ensure_ascii=False, separators=(",", ":")))
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"tool spec is not JSON: {exc}") from exc
    return texts


def _with_tokens(record: Record, tokens: int) -> Record:
    from dataclasses import replace

    return replace(record, tokens=tokens)


def _read_view(
    store: Store,
    row: SessionRow,
    counted: Counted,
    info: ModelInfo,
    encoding: str,
    schema_tokens: int,
    schema_count: int,
) -> ContextReport:
    """The fallback when a tally cannot say which summary is visible: read the view.

    Still counted once: stored counts are added, only records counted now are filled in.
    """
    records = [
        _with_tokens(r, counted.counts[r.seq])
        if r.tokens is None and r.seq in counted.counts
        else r
        for r in store.read(row, row.layout.view_start, row.layout.end_seq)
    ]
    summary = newest_summary(records)
    hidden = hidden_summaries(records)
    system = next((r for r in reversed(records) if r.kind == "system"), None)
    if system is None and counted.head.system >= 0:  # hidden by a trim or reset (D91)
        system = _one(store, row, counted.head.system)
        if system.tokens is None:
            system = _with_tokens(system, counted.counts.get(system.seq, 0))
    start = summary.folds_to if summary is not None else 0
    view: list[Record] = [summary] if summary is not None else []
    view += [
        r
        for r in records
        if r.seq >= start and r.kind not in ("event", "system", "summary") and r.seq not in hidden
    ]
    return build_report(
        view,
        window=info.window,
        system_tokens=(system.tokens if system is not None else 0),
        tool_schema_tokens=schema_tokens,
        tool_schema_count=schema_count,
        measured_by=counter_name(encoding),
        window_source=info.source,
    )
