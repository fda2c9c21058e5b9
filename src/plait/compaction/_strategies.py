"""The strategies that write a summary's text from a plan."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from plait.compaction._options import CompactOptions
from plait.compaction._plan import CompactionPlan
from plait.errors import InvalidArgumentError
from plait.records import JSONValue, Message, Record

__all__ = [
    "LLM_INSTRUCTIONS",
    "SUMMARY_MAX_CHARS",
    "Compaction",
    "Summarize",
    "compact",
    "extractive_summary",
    "llm_summary",
    "mask_tool_output",
    "masked_messages",
    "observation_mask_summary",
    "resolve_strategy",
    "truncate_summary",
    "write_summary",
]

Summarize = Callable[[list[Message]], Awaitable[str]]
"""``await summarize(messages) -> text``: a model call the runs layer plugs in for ``llm``."""

SUMMARY_MAX_CHARS: Final = 6000
"""The longest a model-free summary gets; whole items are dropped from its middle past it."""
_ITEM_MAX_CHARS: Final = 400
"""The longest one quoted request or statement gets in the extractive digest."""
_LINE_MAX_CHARS: Final = 1500
"""The longest one message gets in the masked digest."""

LLM_INSTRUCTIONS: Final = (
    "Summarize the conversation so far so that the work can continue from the summary alone. "
    "Keep, verbatim where short: every instruction, rule and preference the user gave; the "
    "user's requests and whether each was done; decisions made and why; files, commands, names "
    "and values that matter; errors met and how they were resolved; what remains to do. Drop "
    "pleasantries and tool output that no longer matters. Write plain text, no preamble."
)
"""A system prompt for the model behind ``summarize``; the runs layer may use its own."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """The outcome of a compaction (seed 001's ``Compaction(summary, compressed, kept)``)."""

    summary: str
    """The summary's text."""
    compressed: int
    """How many messages were folded into it now."""
    kept: int
    """How many messages stay as they are after it."""
    folds_from: int
    """``seq`` of the first record the summary stands for."""
    folds_to: int
    """``seq`` of the first record kept."""
    strategy: Literal["llm", "truncate", "observation_mask", "custom", "extractive"]
    """The strategy that wrote the summary (``extractive``: the model-free default)."""

    def message(self) -> dict[str, JSONValue]:
        """Return the message a session appends: ``{"role": "summary", "content", "folds"}``."""
        return {
            "role": "summary",
            "content": self.summary,
            "folds": [self.folds_from, self.folds_to],
        }


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _range(plan: CompactionPlan) -> str:
    n = plan.compressed
    start = plan.folded[0].seq if plan.folded else plan.folds_from
    return f"{n} earlier message{'s' if n != 1 else ''} (seq {start}-{plan.folds_to - 1})"


def _fit(items: list[str], budget: int) -> list[str]:
    """Drop items from the middle, behind one "… N more omitted" line, until they fit ``budget``.

    The first and the latest items stay: where the work started and where it stands.
    """
    if sum(len(i) + 1 for i in items) <= budget:
        return items
    keep, dropped = list(items), 0
    while keep:
        mid = len(keep) // 2
        del keep[mid]
        dropped += 1
        shown = [*keep[:mid], f"  … {dropped} more omitted", *keep[mid:]]
        if sum(len(i) + 1 for i in shown) <= budget:
            return shown
    return [f"  … {dropped} more omitted"]


def mask_tool_output(message: Message, options: CompactOptions) -> str:
    """Return what a tool output becomes in a digest: a placeholder with its size, or itself.

    ``mask_callback`` decides when given; else an output up to ``tool_output_max_chars`` is kept
    and a longer one cut to that length with a note (all are masked when it is None).
    """
    if options.mask_callback is not None:
        return str(options.mask_callback(message))
    size = len(message.text)
    limit = options.tool_output_max_chars
    if limit is not None and size <= limit:
        return message.text
    status = "ok" if message.ok is not False else "failed"
    note = f"[{message.tool_name or 'tool'} output masked: {size:,} chars, {status}]"
    if limit:
        return message.text[:limit] + f"\n{note}"
    return note


def masked_messages(plan: CompactionPlan, options: CompactOptions) -> list[Message]:
    """Return the messages a summarizer reads.

    The previous summary, then the folded messages with tool outputs masked
    (:func:`mask_tool_output`), all passed through ``compress_callback`` when given.
    """
    out: list[Message] = []
    if plan.previous is not None:
        out.append(Message.from_record(plan.previous))
    for record in plan.folded:
        msg = Message.from_record(record)
        if msg.role == "tool":
            msg = Message(
                "tool", mask_tool_output(msg, options), (), msg.tool_call_id, msg.tool_name,
                msg.ok, msg.images, msg.seq,
            )  # fmt: skip
        out.append(msg)
    if options.compress_callback is not None:
        out = list(options.compress_callback(out))
    return out


def truncate_summary(plan: CompactionPlan) -> str:
    """The ``truncate`` strategy: a short note that the folded messages were dropped."""
    note = f"[{_range(plan)} were dropped to fit the context window"
    if plan.previous is not None:
        note += ", with the summary before them"
    return note + ".]"


def _call_text(msg: Message) -> str:
    parts = []
    for call in msg.tool_calls:
        args = json.dumps(dict(call.arguments), ensure_ascii=False, separators=(",", ":"))
        parts.append(f"{call.name}({_clip(args, 120)})")
    return "; ".join(parts)


def observation_mask_summary(plan: CompactionPlan, options: CompactOptions) -> str:
    """The ``observation_mask`` strategy: the folded messages, one line each, tool outputs masked.

    What the user and the assistant said stays (each line capped); each tool output becomes a
    placeholder with its size (``mask_callback`` / ``tool_output_max_chars`` decide).
    """
    head = [f"Earlier conversation, {_range(plan)}, with tool outputs masked:"]
    items: list[str] = []
    for msg in masked_messages(plan, options):
        if msg.role == "summary":
            items.append(f"summary: {_clip(msg.text, _LINE_MAX_CHARS)}")
        elif msg.role == "assistant":
            line = _clip(msg.text, _LINE_MAX_CHARS)
            if msg.tool_calls:
                line = (line + " " if line else "") + f"[calls {_call_text(msg)}]"
            items.append(f"assistant: {line}")
        elif msg.role == "tool":
            items.append(f"tool {msg.tool_name or ''}: {_clip(msg.text, _LINE_MAX_CHARS)}")
        else:
            items.append(f"{msg.role}: {_clip(msg.text, _LINE_MAX_CHARS)}")
    return "\n".join([*head, *_fit(items, SUMMARY_MAX_CHARS - len(head[0]) - 1)])


def extractive_summary(plan: CompactionPlan, options: CompactOptions) -> str:
    """The default without a capable model: observation masking plus an extractive summary.

    Deterministic and model-free: the user's requests (each quoted, capped), the assistant's
    final statement of each turn (its last text before the next request), the tools used with
    their outcomes, and how much tool output was masked. The previous summary comes first, so a
    second compaction loses nothing the first one kept. Capped at :data:`SUMMARY_MAX_CHARS`;
    items are dropped from the middle, so the first and the latest ones stay.
    """
    messages = masked_messages(plan, options)
    head = [f"Summary of {_range(plan)}, compacted without a model."]
    items: list[str] = []
    if messages and messages[0].role == "summary":
        items.append("Earlier summary:")
        earlier = messages[0].text.strip()
        if len(earlier) > SUMMARY_MAX_CHARS // 3:
            earlier = earlier[: SUMMARY_MAX_CHARS // 3 - 1].rstrip() + "…"
        items.extend("  " + line for line in earlier.splitlines())
        messages = messages[1:]
    requests = [m.text for m in messages if m.role == "user" and m.text.strip()]
    finals: list[str] = []
    last_text: str | None = None
    for m in messages:
        if m.role == "user":
            if last_text:
                finals.append(last_text)
            last_text = None
        elif m.role == "assistant" and m.text.strip():
            last_text = m.text
    if last_text:
        finals.append(last_text)
    tools: dict[str, list[int]] = {}
    masked = masked_chars = 0
    for record in plan.folded:
        msg = Message.from_record(record)
        if msg.role == "tool":
            tally = tools.setdefault(msg.tool_name or "tool", [0, 0])
            tally[0] += 1
            tally[1] += msg.ok is False
            masked += 1
            masked_chars += len(msg.text)
    tail: list[str] = []
    if tools:
        used = ", ".join(
            f"{name} x{n}" + (f" ({bad} failed)" if bad else "")
            for name, (n, bad) in sorted(tools.items(), key=lambda kv: (-kv[1][0], kv[0]))
        )
        tail.append(f"Tools used: {used}.")
        tail.append(f"Tool outputs masked: {masked} ({masked_chars:,} chars).")
    fixed = sum(len(line) + 1 for line in (*head, *items, *tail))
    budget = max(SUMMARY_MAX_CHARS - fixed - 60, 400) // 2
    if requests:
        items.append("User requests:")
        items.extend(_fit([f"  - {_clip(t, _ITEM_MAX_CHARS)}" for t in requests], budget))
    if finals:
        items.append("Assistant conclusions:")
        items.extend(_fit([f"  - {_clip(t, _ITEM_MAX_CHARS)}" for t in finals], budget))
    return "\n".join([*head, *items, *tail])


def resolve_strategy(
    plan: CompactionPlan, *, has_model: bool
) -> Literal["llm", "truncate", "observation_mask", "custom", "extractive"]:
    """Return the strategy a plan runs: its own, else ``llm`` with a model, else ``extractive``."""
    if plan.strategy is not None:
        return plan.strategy
    return "llm" if has_model else "extractive"


def _result(
    plan: CompactionPlan,
    text: str,
    strategy: Literal["llm", "truncate", "observation_mask", "custom", "extractive"],
) -> Compaction:
    if not isinstance(text, str):
        raise InvalidArgumentError(
            f"compact: the {strategy} strategy must return text, got {type(text).__name__}"
        )
    if not text.strip():
        raise InvalidArgumentError(f"compact: the {strategy} strategy returned an empty summary")
    return Compaction(
        summary=text,
        compressed=plan.compressed,
        kept=plan.kept_count,
        folds_from=plan.folds_from,
        folds_to=plan.folds_to,
        strategy=strategy,
    )


def write_summary(plan: CompactionPlan, options: CompactOptions) -> Compaction:
    """Write the summary for a plan with a model-free strategy.

    Args:
        plan: from :func:`plait.compaction.plan`.
        options: the options the plan was made with.

    Returns:
        The compaction to append.

    Raises:
        InvalidArgumentError: the plan's strategy is ``llm`` (use :func:`compact` with a
            summarizer), or a custom compactor returned no text.
    """
    strategy = resolve_strategy(plan, has_model=False)
    if strategy == "llm":
        raise InvalidArgumentError("compact: the llm strategy needs a model; use compact()")
    if strategy == "truncate":
        return _result(plan, truncate_summary(plan), strategy)
    if strategy == "observation_mask":
        return _result(plan, observation_mask_summary(plan, options), strategy)
    if strategy == "custom":
        if options.custom_compactor is None:
            raise InvalidArgumentError("compact: the custom strategy needs custom_compactor")
        records: Sequence[Record] = list(plan.folded)
        return _result(plan, options.custom_compactor(records, options), strategy)
    return _result(plan, extractive_summary(plan, options), strategy)


async def llm_summary(plan: CompactionPlan, options: CompactOptions, summarize: Summarize) -> str:
    """The ``llm`` strategy: ``await summarize(messages)`` on the masked, compressed messages."""
    return await summarize(masked_messages(plan, options))


async def compact(
    plan: CompactionPlan, options: CompactOptions, *, summarize: Summarize | None = None
) -> Compaction:
    """Write the summary for a plan with whichever strategy it resolves to.

    Args:
        plan: from :func:`plait.compaction.plan`.
        options: the options the plan was made with.
        summarize: the model call for ``llm``; with None the default is the model-free digest.

    Returns:
        The compaction to append.

    Raises:
        InvalidArgumentError: ``llm`` was asked for explicitly and there is no summarizer, or a
            strategy returned no text.
    """
    strategy = resolve_strategy(plan, has_model=summarize is not None)
    if strategy != "llm":
        return write_summary(plan, options)
    if summarize is None:
        raise InvalidArgumentError("compact: the llm strategy needs a summarizing model")
    return _result(plan, await llm_summary(plan, options, summarize), "llm")
