"""The provider errors: a model provider could not answer, or answered with something unusable.

Private: import these names from :mod:`plait.errors`, where the whole hierarchy is drawn.
"""

from __future__ import annotations

from plait.errors import PlaitError


class ProviderError(PlaitError):
    """A model provider could not answer (the SDK's own error is chained as ``__cause__``).

    Attributes:
        provider: the provider's name (``openai``, ``anthropic``, ``scripted`` ...).
        status_code: the HTTP status the API answered with, when there was one.
        url: the server's API root, when the provider talks to one (it is in the message).
    """

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status_code: int | None = None,
        url: str | None = None,
    ) -> None:
        self.provider = provider
        self.status_code = status_code
        self.url = url
        where = f"{provider} at {url}" if url else provider
        super().__init__(f"{where}: {message}")


class MissingCredentialsError(ProviderError):
    """A provider was chosen but no credential for it was found.

    Attributes:
        variable: the environment variable to set (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
    """

    def __init__(self, provider: str, variable: str) -> None:
        self.variable = variable
        super().__init__(provider, f"no API key: set {variable} (or pass api_key=)")


class ProviderResponseError(ProviderError):
    """The provider answered, but not with something plait can use (e.g. a cut-off stream)."""


class ToolArgumentsError(ProviderResponseError):
    """A tool call's streamed arguments are not a JSON object.

    Attributes:
        tool_name: the tool the model called.
        call_id: the call's id.
        raw: the argument text exactly as streamed.
    """

    def __init__(self, provider: str, tool_name: str, call_id: str, raw: str, reason: str) -> None:
        self.tool_name = tool_name
        self.call_id = call_id
        self.raw = raw
        head = raw if len(raw) <= 200 else raw[:200] + "..."
        super().__init__(
            provider, f"tool call {call_id!r} to {tool_name!r}: arguments {reason}: {head!r}"
        )


class ReplyTooLargeError(ProviderResponseError):
    """A streamed reply passed one of its caps (``ModelSettings.max_reply_chars`` ...).

    Raised as soon as the cap is passed, so a server that streams without end costs at
    most the cap; the run records what arrived, cut to the cap, as a reply cut off by an
    error, and ``resume()`` asks the model again.

    Attributes:
        what: which part passed its cap (``text``, ``reasoning``, ``tool call arguments``,
            ``tool calls``, ``items``).
        limit: the cap (characters, or a count for calls and items).
    """

    def __init__(self, provider: str, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        unit = "" if what in ("tool calls", "items") else " characters"
        super().__init__(provider, f"the reply's {what} passed the limit of {limit:,}{unit}")


class ProviderStalledError(ProviderError, TimeoutError):
    """A provider's stream sent nothing new (text, arguments, reasoning, items) for too long.

    A server that sends only keep-alives (or only usage) would otherwise hold a run for
    ever; ``ModelSettings.idle_timeout`` says how long a stream may be idle.

    Attributes:
        idle_timeout: the seconds it was idle.
    """

    def __init__(self, provider: str, idle_timeout: float, url: str | None = None) -> None:
        self.idle_timeout = idle_timeout
        super().__init__(
            provider, f"the stream sent nothing new for {idle_timeout:g} s (idle timeout)", url=url
        )


class ScriptExhaustedError(ProviderError):
    """A :class:`~plait.providers.ScriptedProvider` was asked for more replies than it holds.

    Attributes:
        served: how many replies it had already given.
    """

    def __init__(self, served: int) -> None:
        self.served = served
        super().__init__(
            "scripted",
            f"no scripted reply left (all {served} were used); give the provider more replies",
        )
