"""What plait knows about a model: its window, its output limit, when to compact, how to count.

Pure: a table and the rules that lay what is known of one model over it, no I/O. A model
name is matched by prefix (case-insensitive, read by :func:`bare_model_name`: a provider
prefix such as ``openai/`` or ``azure:`` and an Ollama tag such as ``:20b`` ignored), most
specific first; a model plait does not know gets :data:`UNKNOWN_MODEL`'s numbers. Windows
are the providers' published input limits.

What a table cannot know (the window a local server was started with, a fine-tune's limit)
comes as :class:`ModelLimits`, first set wins: the session's ``model_info`` setting, then
the environment (:data:`LIMITS_ENV`), then what the model's server declares (the provider's
``limits()``), then the family table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final, Literal, TypeAlias

from plait._checks import check_int
from plait.context._tokens import Encoding, bare_model_name, check_encoding, encoding_for
from plait.errors import InvalidArgumentError, UnknownOptionError

__all__ = [
    "DEFAULT_COMPACT_PERCENT",
    "LIMITS_ENV",
    "MODEL_FAMILIES",
    "UNKNOWN_MODEL",
    "InfoSource",
    "ModelInfo",
    "ModelLimits",
    "limits_from_env",
    "model_info",
]

DEFAULT_COMPACT_PERCENT: Final = 80
"""Compact when the context is this full (percent of the window), unless the family says."""


InfoSource: TypeAlias = Literal["table", "server", "environment", "settings", "guess"]
"""Where a :class:`ModelInfo`'s window came from; ``guess`` when nothing knew the model."""


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
    output_limit: int | None = None
    """The most tokens one reply may have, when known (a request leaves room for it)."""
    source: InfoSource = "table"
    """Where ``window`` came from: the family ``table``, the model's ``server``, the
    session's ``settings`` or the ``environment``; a ``guess`` (:data:`UNKNOWN_MODEL`'s
    window) when none of them knew the model."""


_MAX_WINDOW: Final = 100_000_000


def _count(name: str, value: object, lo: int, hi: int) -> int | None:
    return None if value is None else check_int(value, name, lo=lo, hi=hi)


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What is known of one model beyond its family's row; ``None`` is "not known here".

    Raises:
        InvalidArgumentError: a value of the wrong type or out of range.
    """

    context_window: int | None = None
    """Tokens the model can carry, prompt and reply together."""
    output_limit: int | None = None
    """The most tokens one reply may have."""
    tokenizer: Encoding | None = None
    """The encoding plait counts this model's tokens with (``o200k_base``, ``cl100k_base``)."""
    compact_percent: int | None = None
    """Compact automatically when the context is at least this full (1 to 100)."""

    def __post_init__(self) -> None:
        _count("context_window", self.context_window, 1, _MAX_WINDOW)
        _count("output_limit", self.output_limit, 1, _MAX_WINDOW)
        _count("compact_percent", self.compact_percent, 1, 100)
        if self.tokenizer is not None:
            object.__setattr__(self, "tokenizer", check_encoding(self.tokenizer))

    @classmethod
    def from_json(cls, data: object) -> ModelLimits:
        """Read limits from a JSON object (the ``model_info`` setting's form).

        Raises:
            UnknownOptionError: a key that is not a limit.
            InvalidArgumentError: not an object, or a bad value.
        """
        if isinstance(data, ModelLimits):
            return data
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"model_info must be a dict, not {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise UnknownOptionError("model_info", unknown, names)
        values: dict[str, Any] = {k: v for k, v in data.items() if v is not None}
        return cls(**values)

    def to_json(self) -> dict[str, int | str]:
        """The limits that are known, as a JSON object (``from_json`` reads it back)."""
        out: dict[str, int | str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value
        return out

    def over(self, base: ModelLimits) -> ModelLimits:
        """These limits laid over ``base``: what is known here wins."""
        return replace(
            base, **{f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}
        )

    @property
    def empty(self) -> bool:
        """Whether nothing is known."""
        return not self.to_json()


LIMITS_ENV: Final = {
    "context_window": "PLAIT_CONTEXT_WINDOW",
    "output_limit": "PLAIT_OUTPUT_LIMIT",
    "tokenizer": "PLAIT_TOKENIZER",
    "compact_percent": "PLAIT_COMPACT_PERCENT",
}
"""The environment variable of each limit; they apply to every model of the process."""


def limits_from_env(env: Mapping[str, str]) -> ModelLimits:
    """The limits ``env`` sets (:data:`LIMITS_ENV`); an empty variable sets nothing.

    Raises:
        InvalidArgumentError: a variable whose value is not a valid limit (it is named).
    """
    values: dict[str, Any] = {}
    for key, var in LIMITS_ENV.items():
        raw = (env.get(var) or "").strip()
        if not raw:
            continue
        if key == "tokenizer":
            values[key] = raw
            continue
        try:
            values[key] = int(raw.replace("_", ""))
        except ValueError:
            raise InvalidArgumentError(f"{var} must be a whole number, got {raw!r}") from None
    try:
        return ModelLimits(**values)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"the environment: {exc}") from None


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

UNKNOWN_MODEL: Final = replace(_info("unknown", 128_000), source="guess")
"""The numbers for a model no prefix matches (and for no model at all): a guess, and said
to be one (its ``source``)."""


def _family(model: str | None) -> ModelInfo:
    name = bare_model_name(model)
    if name:
        for prefix, info in MODEL_FAMILIES:
            if name.startswith(prefix):
                return info
    return UNKNOWN_MODEL


def model_info(
    model: str | None,
    *,
    settings: ModelLimits | None = None,
    env: ModelLimits | None = None,
    declared: ModelLimits | None = None,
) -> ModelInfo:
    """Return what is known of ``model``: its family's row with the given limits laid over it.

    Args:
        model: a model name (``"gpt-4o-mini"``, ``"anthropic/claude-sonnet-4"``,
            ``"gpt-oss:20b"``), or None.
        settings: the session's ``model_info`` setting; wins over the others.
        env: what the environment sets (:func:`limits_from_env`).
        declared: what the model's server declares.

    Returns:
        The :class:`ModelInfo`; :data:`UNKNOWN_MODEL`'s numbers when no family matches
        and nothing else is known. Its ``source`` says where the window came from
        (``guess`` for those numbers).
    """
    info = _family(model)
    source: InfoSource = info.source
    merged = ModelLimits()
    layers: tuple[tuple[ModelLimits | None, InfoSource], ...] = (
        (declared, "server"),
        (env, "environment"),
        (settings, "settings"),
    )
    for layer, name in layers:
        if layer is None or layer.empty:
            continue
        merged = layer.over(merged)
        if layer.context_window is not None:
            source = name
    if merged.empty:
        return info
    return replace(
        info,
        window=merged.context_window or info.window,
        compact_percent=merged.compact_percent or info.compact_percent,
        encoding=merged.tokenizer or info.encoding,
        output_limit=merged.output_limit or info.output_limit,
        source=source,
    )
