"""Self-compaction (seed 001): the model decides when to compact its own context.

A run offers :data:`SELF_COMPACTION_TOOL` when a request starts, if the session's
``self_compaction`` is in force; when the model calls it, the run compacts the session and
returns :func:`self_compaction_result` as the tool's output. Whether it is in force: the
session's own choice (``Session.use_self_compaction``), else the configuration default read by
:func:`self_compaction_default` from ``PLAIT_SELF_COMPACTION``.

Pure: the caller passes the environment in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from plait.compaction._strategies import Compaction
from plait.errors import InvalidArgumentError
from plait.records import JSONValue

__all__ = [
    "SELF_COMPACTION_ENV",
    "SELF_COMPACTION_TOOL",
    "SELF_COMPACTION_TOOL_NAME",
    "self_compaction_default",
    "self_compaction_result",
]

SELF_COMPACTION_ENV: Final = "PLAIT_SELF_COMPACTION"
"""The environment variable holding the configuration default (seed 001's ``[compaction] self``)."""

SELF_COMPACTION_TOOL_NAME: Final = "compact_context"
"""The name the model calls the self-compaction tool by."""

SELF_COMPACTION_TOOL: Final[Mapping[str, JSONValue]] = {
    "name": SELF_COMPACTION_TOOL_NAME,
    "description": (
        "Compact your context: summarize the older part of this conversation into a short "
        "summary and continue from it. Call it when the detail of earlier steps (long tool "
        "output, finished sub-tasks) is no longer needed, before the context fills up. The "
        "newest request and recent messages are kept verbatim; nothing is deleted."
    ),
    "parameters": {"type": "object", "properties": {}},
}
"""The tool spec offered to the model (``{"name", "description", "parameters"}``)."""

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})


def self_compaction_default(environ: Mapping[str, str]) -> bool:
    """Return the configuration default for self-compaction.

    Args:
        environ: the environment (``os.environ``); ``PLAIT_SELF_COMPACTION`` is read:
            ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off`` (any case);
            unset or empty means False.

    Raises:
        InvalidArgumentError: any other value (fail loud, never a silent default).
    """
    raw = environ.get(SELF_COMPACTION_ENV, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise InvalidArgumentError(
        f"{SELF_COMPACTION_ENV}={raw!r}: expected one of 1, 0, true, false, yes, no, on, off"
    )


def self_compaction_result(done: Compaction | None) -> str:
    """Return the tool output the model reads after it asked to compact.

    Args:
        done: what ``Session.compact`` returned (None: nothing was worth folding).
    """
    if done is None:
        return "Nothing to compact yet: the conversation is short enough as it is."
    return (
        f"Compacted: {done.compressed} earlier messages are now a summary; "
        f"{done.kept} recent messages are kept as they were."
    )
