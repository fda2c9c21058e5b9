"""What an OpenAI-compatible server says of the model it serves: its window, its output limit.

No standard field says it, so each server's own answer is read where it gives one, first
found wins:

1. the model list, ``GET {base_url}/models``: the entry whose ``id`` is the model (or the
   only entry: llama.cpp serves one model under any name) with ``max_model_len`` (vLLM),
   ``context_length`` (OpenRouter, LM Studio, others) or ``context_window``; an output
   limit from ``max_completion_tokens`` / ``max_output_tokens`` or OpenRouter's
   ``top_provider``;
2. llama.cpp's ``GET {root}/props``: ``default_generation_settings.n_ctx`` (the window of
   one slot: what one request gets), or a top-level ``n_ctx``;
3. Ollama's ``POST {root}/api/show``: ``num_ctx`` in its ``parameters`` (the window it
   runs the model with), else the model's ``<arch>.context_length``.

``root`` is ``base_url`` without a trailing ``/v1``. A server that answers none of these
(404, not JSON, refused) declares nothing; plait then uses its family table.

What a server answered is remembered for the process (by server, model and key), so a
service that makes a provider per run asks once; a server that could not be reached is
asked again next time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from plait.context import ModelLimits
from plait.errors import InvalidArgumentError

__all__ = ["from_models_list", "from_ollama_show", "from_props", "probe_limits"]

_log = logging.getLogger("plait")

_ANSWERS: dict[tuple[str, str, str], ModelLimits | None] = {}
_MAX_ANSWERS: Final = 256

_MAX_ANSWER: Final = 16 * 1024 * 1024
"""Bytes of one answer read (a model list of thousands of models is a few MiB)."""

_WINDOW_KEYS: Final = ("max_model_len", "context_length", "context_window", "max_context_length")
_OUTPUT_KEYS: Final = ("max_completion_tokens", "max_output_tokens")


def _positive(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _limits(window: int | None, output: int | None) -> ModelLimits | None:
    if window is None:
        return None
    try:
        return ModelLimits(context_window=window, output_limit=output)
    except InvalidArgumentError:  # a value no model has: not a declaration to trust
        return None


def from_models_list(payload: object, model: str) -> ModelLimits | None:
    """The limits a ``GET /models`` answer gives ``model``, or None."""
    if not isinstance(payload, Mapping):
        return None
    data = payload.get("data")
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, Mapping)]
    entry = next((e for e in entries if e.get("id") == model), None)
    if entry is None and len(entries) == 1:
        entry = entries[0]
    if entry is None:
        return None
    window = next((w for k in _WINDOW_KEYS if (w := _positive(entry.get(k)))), None)
    output = next((o for k in _OUTPUT_KEYS if (o := _positive(entry.get(k)))), None)
    top = entry.get("top_provider")
    if isinstance(top, Mapping):
        window = window or _positive(top.get("context_length"))
        output = output or _positive(top.get("max_completion_tokens"))
    return _limits(window, output)


def from_props(payload: object) -> ModelLimits | None:
    """The limits llama.cpp's ``GET /props`` answer gives, or None."""
    if not isinstance(payload, Mapping):
        return None
    settings = payload.get("default_generation_settings")
    window = _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return _limits(window or _positive(payload.get("n_ctx")), None)


_NUM_CTX: Final = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def from_ollama_show(payload: object) -> ModelLimits | None:
    """The limits Ollama's ``POST /api/show`` answer gives, or None."""
    if not isinstance(payload, Mapping):
        return None
    parameters = payload.get("parameters")
    if isinstance(parameters, str) and (found := _NUM_CTX.search(parameters)):
        return _limits(int(found.group(1)), None)
    info = payload.get("model_info")
    if isinstance(info, Mapping):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                return _limits(_positive(value), None)
    return None


def _root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def probe_limits(
    base_url: str, model: str, *, api_key: str | None, timeout: float
) -> ModelLimits | None:
    """Ask the server at ``base_url`` what it says of ``model`` (the rules above).

    Never raises for a server that does not say: every failure is "declares nothing".
    """
    import hashlib

    key = (base_url, model, hashlib.sha256((api_key or "").encode()).hexdigest())
    if key in _ANSWERS:
        return _ANSWERS[key]
    found, answered = await _ask(base_url, model, api_key=api_key, timeout=timeout)
    if answered:
        if len(_ANSWERS) >= _MAX_ANSWERS:
            _ANSWERS.pop(next(iter(_ANSWERS)))
        _ANSWERS[key] = found
    return found


async def _bounded_answer(
    client: Any, method: str, url: str, body: dict[str, Any] | None
) -> tuple[int, bytes | None]:
    """The answer's status and body, None for a body past :data:`_MAX_ANSWER` bytes."""
    async with client.stream(method, url, json=body) as answer:
        if answer.status_code != 200:
            return answer.status_code, None
        kept = bytearray()
        async for piece in answer.aiter_bytes():
            kept += piece
            if len(kept) > _MAX_ANSWER:
                return answer.status_code, None
        return answer.status_code, bytes(kept)


async def _ask(
    base_url: str, model: str, *, api_key: str | None, timeout: float
) -> tuple[ModelLimits | None, bool]:
    """The limits the server says, and whether it answered at all (a refusal is not one)."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = _root(base_url)
    asks: tuple[tuple[str, str, dict[str, Any] | None, Any], ...] = (
        ("GET", base_url.rstrip("/") + "/models", None, lambda p: from_models_list(p, model)),
        ("GET", root + "/props", None, from_props),
        ("POST", root + "/api/show", {"model": model}, from_ollama_show),
    )
    answered = False
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as client:
        for method, url, body, read in asks:
            try:
                # Read within a size and a time bound: a server that answers without end
                # (or a byte at a time) declares nothing rather than filling the run's memory.
                async with asyncio.timeout(timeout):
                    status, payload = await _bounded_answer(client, method, url, body)
                answered = True
                if status != 200 or payload is None:
                    continue
                found: ModelLimits | None = read(json.loads(payload))
            except TimeoutError as exc:
                _log.debug("no model limits from %s: %s", url, exc)
                break
            except httpx.HTTPError as exc:
                # Unreachable or too slow: the other questions would wait as long.
                _log.debug("no model limits from %s: %s", url, exc)
                break
            except ValueError:  # not JSON: this server does not say
                continue
            if found is not None:
                return found, True
    return None, answered
