"""Context and compaction: the context report, the next request, compacting and undoing it.

Counted once: each record's tokens are counted once and stored with running
tallies (:mod:`plait.session.counting`), so a report and a request read a few
rows whatever the transcript's length. Compaction only appends a summary record
(or a ``compaction_undone`` event), so it stays a view that can be undone.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from plait._checks import check_list, check_name
from plait.compaction import (
    LLM_INSTRUCTIONS,
    Compaction,
    CompactionPlan,
    Summarize,
    parse_options,
)
from plait.compaction import compact as write_compaction
from plait.compaction import plan as plan_compaction
from plait.context import SUMMARY_UNKNOWN, ContextReport, ModelInfo, ModelLimits, Tally
from plait.errors import InvalidArgumentError, NothingToDoError, StoreError
from plait.providers import Provider, Request
from plait.records import COMPACTION_UNDONE, Message, Record, SummaryRecord, newest_summary
from plait.session.counting import context_report, count_pending, info_for, tool_spec_texts
from plait.session.reading import view_items
from plait.store.base import SessionRow
from plait.views import ViewItem, history, model_messages, system_prompt

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = [
    "compact",
    "compaction_due",
    "history_messages",
    "history_start",
    "known_model",
    "measure",
    "merged_options",
    "preview",
    "request_messages",
    "summarizer",
    "summary_budget",
    "uncompact",
]

_COUNT_ON_READ: Final = 256
"""At most this many uncounted records are counted to find where a request starts (D92)."""


def view(head: Head, row: SessionRow) -> list[Record]:
    """Every record in the row's view."""
    return head.store.read(row, row.layout.view_start, row.layout.end_seq)


def merged_options(options: object, more: Mapping[str, Any]) -> dict[str, Any]:
    """Compaction options given as a mapping and as keywords, in one dict (keywords win).

    Raises:
        InvalidArgumentError: ``options`` is neither None nor a mapping.
    """
    if options is None:
        return dict(more)
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(
            f"compaction options must be a mapping, not {type(options).__name__}"
        )
    return {**options, **more}


def measure(
    head: Head,
    model: str | None,
    tools: Iterable[object] | None,
    declared: object = None,
) -> tuple[ContextReport, ModelInfo] | None:
    """The context report for the next request, and what was known of the model it is for.

    Raises:
        InvalidArgumentError: ``model`` is not a model name, or ``tools`` not a list of tools.
    """
    if model is not None:
        model = check_name(model, "model")
    specs = tool_spec_texts(check_list(tools, "tools")) if tools is not None else []
    declared = _limits(declared)
    if head.row is None:
        return None
    row = head.fresh()
    store = head.store
    persist = head.lock.held
    if not persist:
        # A reader stores the counts too when no other process is writing the session
        # (counting is a compare-and-set on the counted prefix: D51), so a session only
        # ever read is counted once as well; a store that refuses is no error.
        try:
            persist = not store.locked_elsewhere(head.id)
        except StoreError:
            persist = False
    return context_report(
        store,
        row,
        model=model,
        tool_specs=specs,
        persist=persist,
        best_effort=not head.lock.held,
        memo=head.memo(row),
        declared=declared,
    )


def known_model(head: Head, model: str | None, declared: object) -> ModelInfo:
    """What is known of ``model`` for this session (settings > environment > server > table)."""
    return info_for(head.settings(), model, _limits(declared))


def _limits(declared: object) -> ModelLimits | None:
    """``declared`` as limits: a ModelLimits, its JSON form, or None (typed errors else)."""
    return None if declared is None else ModelLimits.from_json(declared)


def compaction_due(
    head: Head,
    model: str | None,
    tools: Iterable[object] | None,
    declared: object = None,
    reserve: int | None = None,
) -> bool:
    """Whether the next request, with room for its reply, is at the ``compact_percent`` mark.

    The room kept for the reply is ``reserve`` (the run's ``max_tokens``), else the model's
    output limit when known, at most half the window: a server refuses a request whose
    prompt and reply limit together pass its window, so the mark is reached that much sooner.
    """
    if reserve is not None and (
        isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0
    ):
        raise InvalidArgumentError(f"reserve must be a non-negative int, got {reserve!r}")
    found = measure(head, model, tools, declared)
    if found is None:
        return False
    report, info = found
    room = min(reserve or info.output_limit or 0, info.window // 2)
    return (report.used + room) * 100 >= info.compact_percent * info.window


def preview(head: Head, options: Mapping[str, Any]) -> CompactionPlan | None:
    """What :func:`compact` would fold now, writing nothing (a dry run)."""
    parsed = parse_options(dict(options))
    return plan_compaction(view(head, head.fresh()), parsed)


async def compact(
    head: Head,
    options: Mapping[str, Any],
    *,
    summarize: Summarize | None,
    provider: Provider | None,
    summary_provider: Provider | None,
    strategy: str | None,
) -> Compaction | None:
    """Fold the older part of the conversation into one appended summary record."""
    more = dict(options)
    if strategy is not None:
        if "compact_strategy" in more:
            raise InvalidArgumentError("give strategy or compact_strategy, not both")
        more["compact_strategy"] = strategy
    parsed = parse_options(more)
    calls = head.host.store_calls  # the store is called off the event loop (D202)
    await calls.run(head.require)
    taken = await head.lock.take_turn(calls)  # one turn, from its plan to its summary
    try:

        def planned() -> CompactionPlan | None:
            row = head.fresh()
            # The plan's token figures are the stored counts.
            count_pending(head.store, row, persist=True, memo=head.memo(row))
            return plan_compaction(view(head, head.fresh()), parsed)

        found = await calls.run(planned)
        if found is None:
            return None
        model = summary_provider or provider
        if summarize is None and model is not None:
            from plait.providers import declared_limits

            limits = await declared_limits(model)
            window = (await calls.run(lambda: known_model(head, model.model, limits))).window
            summarize = summarizer(model, summary_budget(window))
        done = await write_compaction(found, parsed, summarize=summarize)
        await calls.run(lambda: head.mutate(head.messages([done.message()])))
        return done
    finally:
        if taken:
            await calls.run(lambda: head.lock.end_turn(taken))


def uncompact(head: Head) -> SummaryRecord:
    """Hide the newest summary with a ``compaction_undone`` event; returns that summary."""
    summary = newest_summary(view(head, head.fresh()))
    if summary is None:
        raise NothingToDoError("there is no compaction to undo")
    head.event(COMPACTION_UNDONE, {"summary_seq": summary.seq})
    # Counted at once: lists read how many summaries are hidden from the newest tally.
    row = head.fresh()
    count_pending(head.store, row, persist=True, best_effort=True, memo=head.memo(row))
    return summary


def summary_budget(window: int) -> int:
    """The most tokens a summary may take: an eighth of the window, 64 to 4,096.

    A summary written without a limit can run to the end of the window (a small model
    does), and the request after the compaction then fails as the one before it would.
    """
    return max(64, min(4096, window // 8))


def summarizer(model: Provider, max_tokens: int | None = None) -> Summarize:
    """The ``llm`` strategy's model call: the messages, then a request for the summary."""

    async def summarize(messages: list[Message]) -> str:
        from plait.providers import complete

        request = Request(
            messages=[
                Message("system", LLM_INSTRUCTIONS),
                *messages,
                Message("user", "Write the summary of the conversation above now."),
            ],
            max_tokens=max_tokens,
        )
        reply = await complete(model, request)
        return reply.text

    return summarize


def _window_start(head: Head, row: SessionRow) -> tuple[int, Tally | None, SummaryRecord | None]:
    """Where the next request starts, the head's tally, and the summary it starts with.

    The tally says where the newest visible summary is; the window starts at what it
    kept (or at the view's start when there is none, or no tally to be had cheaply).
    """
    lay = row.layout
    tally = _head_tally(head, row)
    lo, summary = lay.view_start, None
    if tally is not None and tally.summary >= lay.view_start:
        found = _at(head, row, tally.summary)
        if isinstance(found, SummaryRecord):
            lo, summary = max(lo, min(found.folds_to, found.seq)), found
    return lo, tally, summary


def history_start(head: Head, row: SessionRow) -> tuple[int, SummaryRecord | None] | None:
    """Where ``history()`` starts reading, and the summary it starts with; None if unknown.

    From the stored tallies (a few rows): ``(view start, None)`` when no summary is
    shown; None when the tallies cannot say (a long uncounted tail), and only the
    records can.
    """
    lo, tally, summary = _window_start(head, row)
    if tally is None or (summary is None and tally.summary >= row.layout.view_start):
        return None
    return lo, summary


def _window(head: Head, row: SessionRow) -> tuple[list[Record], Tally | None]:
    """The records from where the next request starts to the head, and the head's tally."""
    memo = head.memo(row)
    lo, tally, _ = _window_start(head, row)
    end = row.layout.end_seq
    held = memo.records(lo, end) if memo is not None else None
    if held is not None:
        if memo is not None and lo > memo.window_lo:
            memo.seed(lo, held)  # what a compaction folded is no longer sent: let it go
        return held, tally
    if memo is not None and memo.seeded and memo.window_lo <= lo <= memo.window_end < end:
        # Written since by another handle or process: only what the window lacks is read.
        memo.extend(head.store.read(row, memo.window_end, end))
        held = memo.records(lo, end)
        if held is not None:
            return held, tally
    records = head.store.read(row, lo, end)
    if memo is not None:
        memo.seed(lo, records)
    return records, tally


def request_messages(head: Head, reads: Collection[str] = ()) -> list[Message]:
    """The messages the next model call sends: the system prompt, then the history.

    The stored tallies say where the newest summary and system prompt are, so a
    compacted session reads the summary and what it kept (D92); a system prompt a
    trim or reset hid is kept (D91); a cut-off reply is left out (D73); an opaque
    item goes only to a provider that reads its format (``reads``).
    """
    if head.row is None:
        return []
    row = head.fresh()
    lay = row.layout
    records, tally = _window(head, row)
    hidden: str | None = None
    if not any(r.kind == "system" for r in records):
        if tally is not None:
            if tally.system >= 0:
                found = _at(head, row, tally.system)
                hidden = system_prompt([found] if found is not None else [])
        elif lay.view_start > 0:
            # Read once per view: the prefix before a view's start never changes.
            hidden = head.host.caches.hidden_system(
                row, lambda: system_prompt(head.store.read(row, 0, lay.view_start))
            )
    return model_messages(records, hidden, reads)


def history_messages(head: Head) -> list[Message]:
    """``history()``: the newest summary, then what it kept, read from the summary on.

    Like a request, it reads what it returns, not the transcript before the summary;
    what a writer's memo holds is not read again, and what is read is read as
    messages (:func:`~plait.session.reading.view_items`).
    """
    row = head.fresh()
    lo, tally, _ = _window_start(head, row)
    end = row.layout.end_seq
    memo = head.memo(row)
    held = memo.records(lo, end) if memo is not None else None
    items: Sequence[ViewItem] = held if held is not None else view_items(head, row, lo, end)
    summary_in_view = tally is not None and tally.summary >= row.layout.view_start
    if summary_in_view and newest_summary(items) is None:
        # The window missed the summary: read the whole view.
        items = view_items(head, row, row.layout.view_start, end)
    return history(items)


def _head_tally(head: Head, row: SessionRow) -> Tally | None:
    """The running tally at the head, when it can be had for a few rows, else None."""
    store = head.store
    memo = head.memo(row)
    try:
        counted_end = memo.counted_end if memo is not None and memo.tally is not None else None
        if counted_end is None:
            counted_end = store.counted_end(row)
        if row.layout.end_seq - counted_end > _COUNT_ON_READ:
            return None  # a long uncounted tail (an import): reading the view is cheaper
        counted = count_pending(store, row, persist=head.lock.held, best_effort=True, memo=memo)
    except StoreError:
        return None
    tally = counted.head
    return None if tally.summary == SUMMARY_UNKNOWN else tally


def _at(head: Head, row: SessionRow, seq: int) -> Record | None:
    """The record at ``seq`` (from the writer's memo when it holds it), or None."""
    memo = head.memo(row)
    held = memo.record(seq) if memo is not None else None
    if held is not None:
        return held
    found = head.store.read(row, seq, seq + 1)
    if not found:
        return None
    if memo is not None:
        memo.extra[seq] = found[0]
    return found[0]
