"""Compaction planning and strategies. Pure: no database, network or file access.

A compaction never deletes or rewrites a record (design principle 1). It appends one summary
record, ``{"role": "summary", "content": ..., "folds": [folds_from, folds_to)}``, and
:func:`plait.views.history` then shows that summary followed by the records from ``folds_to``
on. This package decides the range and writes the text; the session appends it.

The steps, each a plain function:

1. :func:`parse_options` checks seed 003's options (unknown keys and a negative ``keep_last``
   are errors) into :class:`CompactOptions`.
2. :func:`plan` picks the range to fold, keeping the newest user request and never splitting a
   tool call from its result; system prompts and events are never folded. It returns None when
   nothing is worth folding and raises ``NothingToDoError`` when the view is already compacted
   to its newest message. **The plan is the preview**: a dry run returns it
   (:meth:`CompactionPlan.to_dict` lists the folded seqs and the counts) and writes nothing.
3. :func:`write_summary` (model-free strategies) or ``await`` :func:`compact` (any strategy;
   ``llm`` takes a ``summarize(messages) -> str`` coroutine the runs layer supplies) turns the
   plan into a :class:`Compaction` (seed 001's ``summary``, ``compressed``, ``kept``, plus the
   ``folds`` range); :meth:`Compaction.message` is the message to append.

Strategies: ``truncate`` (a note of what was dropped), ``observation_mask`` (the folded
messages with tool outputs masked to a placeholder with their size; ``mask_callback``),
``custom`` (``custom_compactor(records, options)``), ``llm`` (``compress_callback`` rewrites
its input), and the default when no capable model is configured, ``extractive``: masking plus
an extractive digest (requests, final statements, tool tallies), deterministic.

Self-compaction (seed 001): :data:`SELF_COMPACTION_TOOL` is the tool a run offers the model
when the session's ``self_compaction`` is in force; :func:`self_compaction_default` reads the
configuration default (``PLAIT_SELF_COMPACTION``); :func:`self_compaction_result` is the tool's
output.

Undo ("uncompact") is a view change at the session level, not implemented here: because a
compaction only appends, the session will append an event that hides the newest visible summary
(naming its ``seq``); the views then skip hidden summaries, so ``history()`` falls back to the
previous summary (or to the whole conversation) and the folded records are visible again, as
before the compaction. Redo is another event un-hiding it. Nothing is deleted either way, so a
fork taken at any point keeps whichever view it was forked with.
"""

from plait.compaction._options import (
    OPTION_KEYS,
    STRATEGIES,
    CompactOptions,
    CompressCallback,
    CustomCompactor,
    MaskCallback,
    Strategy,
    parse_options,
)
from plait.compaction._plan import CompactionPlan, history_records, plan
from plait.compaction._self import (
    SELF_COMPACTION_ENV,
    SELF_COMPACTION_TOOL,
    SELF_COMPACTION_TOOL_NAME,
    self_compaction_default,
    self_compaction_result,
)
from plait.compaction._strategies import (
    LLM_INSTRUCTIONS,
    SUMMARY_MAX_CHARS,
    Compaction,
    Summarize,
    compact,
    extractive_summary,
    llm_summary,
    mask_tool_output,
    masked_messages,
    observation_mask_summary,
    resolve_strategy,
    truncate_summary,
    write_summary,
)

__all__ = [
    "LLM_INSTRUCTIONS",
    "OPTION_KEYS",
    "SELF_COMPACTION_ENV",
    "SELF_COMPACTION_TOOL",
    "SELF_COMPACTION_TOOL_NAME",
    "STRATEGIES",
    "SUMMARY_MAX_CHARS",
    "CompactOptions",
    "Compaction",
    "CompactionPlan",
    "CompressCallback",
    "CustomCompactor",
    "MaskCallback",
    "Strategy",
    "Summarize",
    "compact",
    "extractive_summary",
    "history_records",
    "llm_summary",
    "mask_tool_output",
    "masked_messages",
    "observation_mask_summary",
    "parse_options",
    "plan",
    "resolve_strategy",
    "self_compaction_default",
    "self_compaction_result",
    "truncate_summary",
    "write_summary",
]
