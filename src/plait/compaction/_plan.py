"""Which records a compaction folds: the plan, which is also the preview (a dry run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plait.compaction._options import CompactOptions, Strategy
from plait.errors import NothingToDoError
from plait.records import (
    AssistantRecord,
    Record,
    SummaryRecord,
    ToolRecord,
    UserRecord,
    newest_summary,
)

__all__ = ["CompactionPlan", "history_records", "plan"]

_NOT_FOLDED = frozenset({"event", "system", "summary", "opaque"})


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would fold and keep; a dry run returns it as the preview.

    The summary it leads to is appended with ``folds: [folds_from, folds_to)``; nothing is
    deleted, so ``history(full=True)`` still shows every folded record.
    """

    folds_from: int
    """``seq`` of the first record the new summary stands for (the previous summary's
    ``folds_from`` when there is one: the new summary carries its text on)."""
    folds_to: int
    """``seq`` of the first record kept as it is."""
    folded: tuple[Record, ...]
    """The messages folded now, in order (not the previous summary)."""
    kept: tuple[Record, ...]
    """The messages kept after the summary, in order."""
    previous: SummaryRecord | None
    """The summary the history started with, folded into the new one."""
    strategy: Strategy | None
    """The strategy to use (``hard_limit_strategy`` over the hard limit); None: the default."""
    history_tokens: int
    """Stored tokens of the history before compaction (records without a count add 0)."""
    folded_tokens: int
    """Stored tokens of :attr:`folded` (plus the previous summary)."""
    over_hard_limit: bool = False
    """Whether the history was over ``hard_limit_tokens``."""

    @property
    def compressed(self) -> int:
        """How many messages are folded now."""
        return len(self.folded)

    @property
    def kept_count(self) -> int:
        """How many messages stay as they are."""
        return len(self.kept)

    @property
    def folded_seqs(self) -> tuple[int, ...]:
        """The ``seq`` of each folded message."""
        return tuple(r.seq for r in self.folded)

    def to_dict(self) -> dict[str, Any]:
        """Return the preview as JSON-ready data (for ``--dry-run --json``)."""
        return {
            "folds": [self.folds_from, self.folds_to],
            "compressed": self.compressed,
            "kept": self.kept_count,
            "folded_seqs": list(self.folded_seqs),
            "previous_summary_seq": None if self.previous is None else self.previous.seq,
            "strategy": self.strategy,
            "history_tokens": self.history_tokens,
            "folded_tokens": self.folded_tokens,
            "over_hard_limit": self.over_hard_limit,
        }


def history_records(records: Sequence[Record]) -> tuple[SummaryRecord | None, list[Record]]:
    """Split a view into its newest summary and the messages that follow it in ``history()``.

    The same selection as :func:`plait.views.history`: messages (not events, system prompts or
    summaries) from the newest summary's ``folds_to`` on.
    """
    previous = newest_summary(records)
    start = previous.folds_to if previous is not None else -1
    return previous, [r for r in records if r.kind not in _NOT_FOLDED and r.seq >= start]


def _tokens(records: Sequence[Record]) -> int:
    return sum(r.tokens or 0 for r in records)


def _pairs(messages: Sequence[Record]) -> dict[int, int]:
    """Map the index of each assistant message with answered calls to its last result's index."""
    call_at: dict[str, int] = {}
    for i, record in enumerate(messages):
        if isinstance(record, AssistantRecord):
            for call in record.tool_calls:
                call_at.setdefault(call.id, i)
    # results of each assistant index: the furthest one decides
    last_result: dict[int, int] = {}
    for j, record in enumerate(messages):
        if isinstance(record, ToolRecord) and record.tool_call_id in call_at:
            i = call_at[record.tool_call_id]
            if i < j:
                last_result[i] = max(last_result.get(i, j), j)
    return last_result


def _pair_safe(last_result: dict[int, int], cut: int, *, limit: int | None = None) -> int:
    """Move ``cut`` so that no tool call and its result lie on different sides of it.

    Earlier (fold less) by default; later (fold the whole pair) when ``limit`` is given and the
    later cut stays at or before it, else earlier after all.
    """
    if limit is not None:
        later, moved = cut, True
        while moved:
            moved = False
            for i, j in last_result.items():
                if i < later <= j:
                    later, moved = j + 1, True
        if later <= limit:
            return later
    moved = True
    while moved:
        moved = False
        for i, j in last_result.items():
            if i < cut <= j:
                cut = i
                moved = True
    return cut


def plan(records: Sequence[Record], options: CompactOptions | None = None) -> CompactionPlan | None:
    """Decide what a compaction folds; the result is also its preview.

    The history view (the newest summary, then the messages after it) is split at a boundary:
    the messages before it are folded into one new summary, the rest kept as they are. The
    boundary starts ``keep_last`` messages from the end, and then

    * never passes the newest user request, which is always kept;
    * moves earlier so that no tool call is folded while its result is kept (a pair is never
      split; an assistant message with several calls keeps all its results with it);
    * over ``hard_limit_tokens``, moves later until what is kept fits, within the two rules
      above (a pair it lands in is folded whole when that does not pass the newest request),
      and the plan names ``hard_limit_strategy``.

    System prompts are never folded: they are not history messages, and a request reads the
    newest one from the whole view wherever it stands. Events are never folded either.

    Args:
        records: the session's view, in order (events, system prompts and summaries included).
        options: checked options (:func:`plait.compaction.parse_options`); None for defaults.

    Returns:
        The plan, or None when nothing is worth folding: no message before the boundary, or the
        history under ``token_threshold``.

    Raises:
        NothingToDoError: the view is already compacted to its newest message (its newest
            summary folds everything and nothing followed it).
    """
    options = options or CompactOptions()
    previous, messages = history_records(records)
    if not messages:
        if previous is not None:
            raise NothingToDoError("already compacted to the newest message")
        return None
    history_tokens = _tokens(messages) + (previous.tokens or 0 if previous is not None else 0)
    if options.token_threshold is not None and history_tokens < options.token_threshold:
        return None
    newest_user = max(
        (i for i, r in enumerate(messages) if isinstance(r, UserRecord)), default=len(messages)
    )
    cut = min(max(len(messages) - options.keep_last, 0), newest_user)
    strategy = options.compact_strategy
    over = options.hard_limit_tokens is not None and history_tokens > options.hard_limit_tokens
    if over:
        assert options.hard_limit_tokens is not None
        kept_tokens = _tokens(messages[cut:])
        while cut < newest_user and kept_tokens > options.hard_limit_tokens:
            kept_tokens -= messages[cut].tokens or 0
            cut += 1
        strategy = options.hard_limit_strategy or strategy
    cut = _pair_safe(_pairs(messages), cut, limit=newest_user if over else None)
    if cut <= 0:
        return None
    folded, kept = tuple(messages[:cut]), tuple(messages[cut:])
    folds_to = kept[0].seq if kept else folded[-1].seq + 1
    folds_from = previous.folds_from if previous is not None else folded[0].seq
    return CompactionPlan(
        folds_from=folds_from,
        folds_to=folds_to,
        folded=folded,
        kept=kept,
        previous=previous,
        strategy=strategy,
        history_tokens=history_tokens,
        folded_tokens=_tokens(folded) + (previous.tokens or 0 if previous is not None else 0),
        over_hard_limit=over,
    )
