"""The context report: where the model's window goes, by source (seed 001).

Counted once (design principle 2): every record's tokens were counted when it was written and
stored in ``Record.tokens``; :func:`build_report` only adds those numbers, so its cost does not
depend on how long the text is, and a record with no stored count makes the report ``partial``
instead of being re-tokenized here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from plait.context._models import InfoSource
from plait.errors import InvalidArgumentError
from plait.records import Record, is_cut_off

__all__ = ["SHARE_NAMES", "UNATTRIBUTED", "ContextReport", "Share", "build_report"]

SHARE_NAMES: Final = (
    "System prompt",
    "Environment notes",
    "Tool schemas",
    "User messages",
    "Assistant messages",
    "Tool output",
    "Provider items",
    "Compaction summary",
)
"""The sources of a report, in seed 001's order."""

UNATTRIBUTED: Final = "Unattributed"
"""The share, after :data:`SHARE_NAMES`, of what ``used`` holds that no source accounts for.

The provider counts the whole request: its chat template's wrapping of every message,
tool schemas it was sent that the report was not told about, and any difference between
its tokenizer and ours. Shown as a share of its own, the shares add up to ``used``.
"""

_SHARE_OF_KIND: Final = {
    "system": "System prompt",
    "user": "User messages",
    "assistant": "Assistant messages",
    "tool": "Tool output",
    "opaque": "Provider items",
    "summary": "Compaction summary",
}


@dataclass(frozen=True, slots=True)
class Share:
    """One source's part of the context."""

    name: str
    """One of :data:`SHARE_NAMES`, or :data:`UNATTRIBUTED`."""
    tokens: int
    """Tokens it takes (what could be measured)."""
    items: int
    """How many records, prompts or schemas it holds."""


@dataclass(frozen=True, slots=True)
class ContextReport:
    """How full the model's window is, and by what (seed 001's ``ContextReport``)."""

    window: int
    """Tokens the model can carry."""
    used: int
    """Tokens the next request carries: the provider's count when it gave one, else ours."""
    from_provider: bool
    """Whether ``used`` is the provider's count."""
    measured_by: str
    """The counter behind ``shares`` (``"toktok-rs/o200k_base"``, ...)."""
    partial: bool
    """True if a part could not be measured yet, so ``used`` reads low."""
    shares: tuple[Share, ...]
    """Non-empty sources, in :data:`SHARE_NAMES` order, then :data:`UNATTRIBUTED`.

    Made so they add up to ``used``: when ``used`` (the provider's count) is more
    than the sources measured, the rest is the :data:`UNATTRIBUTED` share (added
    here if the builder did not). When the provider counted fewer tokens than our
    counter did, no share can be negative, and the shares add up to a little more.
    """

    window_source: InfoSource = "table"
    """Where ``window`` came from (:attr:`ModelInfo.source`): the family ``table``, the
    model's ``server``, the ``environment`` or the session's ``settings``; ``guess`` when
    nothing knew the model (the window is then plait's default)."""

    def __post_init__(self) -> None:
        # Every builder of a report gets the rest as a share, so no view of it can
        # show sources that silently fall short of the total.
        attributed = sum(s.tokens for s in self.shares if s.name != UNATTRIBUTED)
        rest = self.used - attributed
        kept = tuple(s for s in self.shares if s.name != UNATTRIBUTED)
        if rest > 0:
            kept += (Share(UNATTRIBUTED, rest, 0),)
        if kept != self.shares:
            object.__setattr__(self, "shares", kept)

    @property
    def free(self) -> int:
        """Tokens left in the window (never negative)."""
        return max(self.window - self.used, 0)

    @property
    def fraction(self) -> float:
        """How full the window is: ``used / window`` (may exceed 1.0 when over)."""
        return self.used / self.window if self.window > 0 else 0.0


def build_report(
    records: Iterable[Record],
    *,
    window: int,
    system_tokens: int | None = 0,
    tool_schema_tokens: int | None = 0,
    env_tokens: int | None = 0,
    tool_schema_count: int = 0,
    provider_used: int | None = None,
    measured_by: str,
    window_source: InfoSource = "table",
) -> ContextReport:
    """Build a context report from the history view's records and their stored counts.

    Args:
        records: the records of the history view (the newest summary, then what followed it).
            Events and cut-off replies are skipped; a system record in it counts as the
            system prompt when ``system_tokens`` is 0 (pass the prompt's count there when
            it lives outside).
        window: the model's context window in tokens (positive).
        system_tokens: tokens of the system prompt sent with the request; None if unknown.
        tool_schema_tokens: tokens of the tool schemas offered; None if unknown.
        env_tokens: tokens of environment notes (workspace, date, ...); None if unknown.
        tool_schema_count: how many tool schemas (the share's ``items``).
        provider_used: the provider's own prompt-token count for this history, if a reply gave
            one; it becomes ``used`` and sets ``from_provider``.
        measured_by: the counter's name (:func:`plait.context.counter_name`).
        window_source: where ``window`` came from (:attr:`ModelInfo.source`).

    Returns:
        The report; ``partial`` when a record or a part has no count.

    Raises:
        InvalidArgumentError: a window that is not positive, or a negative count.
    """
    if window <= 0:
        raise InvalidArgumentError(f"window must be positive, got {window}")
    for label, value in (
        ("system_tokens", system_tokens),
        ("tool_schema_tokens", tool_schema_tokens),
        ("env_tokens", env_tokens),
        ("provider_used", provider_used),
    ):
        if value is not None and value < 0:
            raise InvalidArgumentError(f"{label} must not be negative, got {value}")
    tokens = dict.fromkeys(SHARE_NAMES, 0)
    items = dict.fromkeys(SHARE_NAMES, 0)
    partial = False
    for name, value in (
        ("System prompt", system_tokens),
        ("Environment notes", env_tokens),
        ("Tool schemas", tool_schema_tokens),
    ):
        if value is None:
            partial = True
        elif value:
            tokens[name] += value
            items[name] += tool_schema_count if name == "Tool schemas" else 1
    for record in records:
        kind_share = _SHARE_OF_KIND.get(record.kind)
        if kind_share is None or is_cut_off(record):
            continue  # an event, or a cut-off reply no request sends
        name = kind_share
        if name == "System prompt" and system_tokens:
            continue  # the caller measured the prompt the request carries
        items[name] += 1
        if record.tokens is None:
            partial = True
        else:
            tokens[name] += record.tokens
    shares = tuple(Share(n, tokens[n], items[n]) for n in SHARE_NAMES if tokens[n] or items[n])
    measured = sum(tokens.values())
    return ContextReport(
        window=window,
        used=provider_used if provider_used is not None else measured,
        from_provider=provider_used is not None,
        measured_by=measured_by,
        partial=partial,
        shares=shares,
        window_source=window_source,
    )
