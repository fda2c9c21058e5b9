"""Seed 003's ``compact`` options, checked loudly (design principle 4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.records import Message, Record

__all__ = [
    "OPTION_KEYS",
    "STRATEGIES",
    "CompactOptions",
    "CompressCallback",
    "CustomCompactor",
    "MaskCallback",
    "Strategy",
    "parse_options",
]

Strategy: TypeAlias = Literal["llm", "truncate", "observation_mask", "custom"]
STRATEGIES: Final = ("llm", "truncate", "observation_mask", "custom")

CustomCompactor: TypeAlias = Callable[[Sequence[Record], "CompactOptions"], str]
"""``custom_compactor(folded_records, options) -> summary text``: replaces the scheme entirely."""
MaskCallback: TypeAlias = Callable[[Message], str]
"""``mask_callback(tool_message) -> placeholder``: what a masked tool output becomes."""
CompressCallback: TypeAlias = Callable[[list[Message]], list[Message]]
"""``compress_callback(messages) -> messages``: rewrites the folded messages before they are
summarized (by the model, or by the built-in observation-mask digest)."""

OPTION_KEYS: Final = (
    "keep_last",
    "token_threshold",
    "tool_output_max_chars",
    "compact_strategy",
    "hard_limit_tokens",
    "hard_limit_strategy",
    "custom_compactor",
    "mask_callback",
    "compress_callback",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactOptions:
    """How a compaction chooses what to fold and how it writes the summary (seed 003)."""

    keep_last: int = 12
    """Messages kept as they are after the summary (fewer when a tool pair or a hard limit
    moves the boundary; the newest user request is always kept)."""
    token_threshold: int | None = None
    """Fold only when the history carries at least this many tokens (stored counts)."""
    tool_output_max_chars: int | None = None
    """Tool outputs up to this long stay verbatim in a masked digest or an LLM's input; longer
    ones are cut to this many characters. None masks every output in the folded range."""
    compact_strategy: Strategy | None = None
    """How the summary is written; None picks ``llm`` when a capable model is configured and
    the model-free digest (observation masking plus an extractive summary) otherwise."""
    hard_limit_tokens: int | None = None
    """When the history is over this, fold until what is kept fits (as far as the never-fold
    rules allow) and use ``hard_limit_strategy``."""
    hard_limit_strategy: Strategy | None = None
    """The strategy over the hard limit; None keeps ``compact_strategy``."""
    custom_compactor: CustomCompactor | None = None
    """Required by the ``custom`` strategy."""
    mask_callback: MaskCallback | None = None
    """Customizes the placeholder of a masked tool output."""
    compress_callback: CompressCallback | None = None
    """Customizes the messages handed to the summarizer."""


def _count(key: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"compact: {key} must be an int, got {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"compact: {key} must not be negative, got {value}")
    return value


def _strategy(key: str, value: object) -> Strategy:
    if value not in STRATEGIES:
        raise InvalidArgumentError(
            f"compact: {key} must be one of {', '.join(STRATEGIES)}, got {value!r}"
        )
    return value


def parse_options(options: Mapping[str, Any] | None = None) -> CompactOptions:
    """Check a ``compact`` options mapping and return it as :class:`CompactOptions`.

    Accepts any subset of :data:`OPTION_KEYS`; anything else is an error (seed 003). ``None``
    values mean "not given", except for ``keep_last``, which must be an int when present.

    Args:
        options: the mapping a caller passed, or None for the defaults.

    Returns:
        The checked options.

    Raises:
        UnknownOptionError: a key seed 003 does not list.
        InvalidArgumentError: a negative or non-int count, an unknown strategy, a callback that
            is not callable, or ``custom`` without ``custom_compactor``.
    """
    if options is None:
        return CompactOptions()
    if isinstance(options, CompactOptions):
        return options
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(
            f"compact: options must be a mapping, got {type(options).__name__}"
        )
    unknown = [str(k) for k in options if k not in OPTION_KEYS]
    if unknown:
        raise UnknownOptionError("compact", unknown, list(OPTION_KEYS))
    values: dict[str, Any] = {}
    if "keep_last" in options:
        values["keep_last"] = _count("keep_last", options["keep_last"])
    for key in ("token_threshold", "tool_output_max_chars", "hard_limit_tokens"):
        if options.get(key) is not None:
            values[key] = _count(key, options[key])
    for key in ("compact_strategy", "hard_limit_strategy"):
        if options.get(key) is not None:
            values[key] = _strategy(key, options[key])
    for key in ("custom_compactor", "mask_callback", "compress_callback"):
        if options.get(key) is not None:
            if not callable(options[key]):
                raise InvalidArgumentError(f"compact: {key} must be callable")
            values[key] = options[key]
    parsed = CompactOptions(**values)
    uses_custom = "custom" in (parsed.compact_strategy, parsed.hard_limit_strategy)
    if uses_custom and parsed.custom_compactor is None:
        raise InvalidArgumentError("compact: the custom strategy needs custom_compactor")
    return parsed
