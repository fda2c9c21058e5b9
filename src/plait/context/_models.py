"""What plait knows about a model family: its window, when to compact, how to count.

Pure: a table, no I/O. A model name is matched by prefix (case-insensitive, a provider prefix
such as ``openai/`` or ``azure:`` ignored), most specific first; a model plait does not know gets
:data:`UNKNOWN_MODEL`'s numbers. Windows are the providers' published input limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from plait.context._tokens import Encoding, encoding_for

__all__ = ["DEFAULT_COMPACT_PERCENT", "MODEL_FAMILIES", "UNKNOWN_MODEL", "ModelInfo", "model_info"]

DEFAULT_COMPACT_PERCENT: Final = 80
"""Compact when the context is this full (percent of the window), unless the family says."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model family's context numbers."""

    family: str
    """The family's name (``"gpt-4o"``, ``"claude"``, ``"unknown"``, ...)."""
    window: int
    """Tokens the model can carry (its context window)."""
    compact_percent: int
    """Compact automatically when the context is at least this full (percent of ``window``)."""
    encoding: Encoding
    """The encoding plait counts its tokens with (see :func:`plait.context.encoding_for`)."""


def _info(family: str, window: int, percent: int = DEFAULT_COMPACT_PERCENT) -> ModelInfo:
    return ModelInfo(family, window, percent, encoding_for(family))


# (prefix, info), most specific first: "gpt-4o" before "gpt-4", "o1" etc. are whole families.
MODEL_FAMILIES: Final[tuple[tuple[str, ModelInfo], ...]] = (
    ("gpt-4o", _info("gpt-4o", 128_000)),
    ("chatgpt-4o", _info("gpt-4o", 128_000)),
    ("gpt-4.1", _info("gpt-4.1", 1_047_576)),
    ("gpt-4.5", _info("gpt-4.5", 128_000)),
    ("gpt-5", _info("gpt-5", 400_000)),
    ("gpt-oss", _info("gpt-oss", 131_072)),
    ("gpt-4-turbo", _info("gpt-4-turbo", 128_000)),
    ("gpt-4-32k", _info("gpt-4-32k", 32_768)),
    ("gpt-4", _info("gpt-4", 8_192)),
    ("gpt-3.5", _info("gpt-3.5", 16_385)),
    ("o1", _info("o1", 200_000)),
    ("o3", _info("o3", 200_000)),
    ("o4", _info("o4", 200_000)),
    ("claude", _info("claude", 200_000)),
    # The embedded local model (plait[local]): small window, so compact a little earlier.
    ("smollm2", _info("smollm2", 8_192, 75)),
    ("scripted", _info("scripted", 128_000)),
)
"""The families plait knows, by model-name prefix."""

UNKNOWN_MODEL: Final = _info("unknown", 128_000)
"""The numbers for a model no prefix matches (and for no model at all)."""


def model_info(model: str | None) -> ModelInfo:
    """Return the context numbers of ``model``'s family.

    Args:
        model: a model name (``"gpt-4o-mini"``, ``"anthropic/claude-sonnet-4"``), or None.

    Returns:
        The family's :class:`ModelInfo`; :data:`UNKNOWN_MODEL` when none matches.
    """
    if not model:
        return UNKNOWN_MODEL
    name = model.strip().lower()
    for sep in ("/", ":"):
        if sep in name:
            name = name.rsplit(sep, 1)[-1]
    for prefix, info in MODEL_FAMILIES:
        if name.startswith(prefix):
            return info
    return UNKNOWN_MODEL
