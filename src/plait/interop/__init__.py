"""Moving sessions in and out of plait: transcript importers and exporters.

:func:`seed_from_jsonl` creates a new stored session from a transcript file
(seed 003), in one transaction. It reads:

=================  =========================================  ==============================
format             what                                       ``source_format``
=================  =========================================  ==============================
``plait``          plait JSONL (:func:`to_jsonl`)             ``message_events``
``openai``         chat-completions messages                  ``message_events``
                   request logs (full arrays)                 ``request_snapshots``
                   responses only                             ``provider_responses_only``
``claude-code``    Claude Code session JSONL (1.x to 2.1.x)   ``message_events``
``codex``          Codex CLI rollouts (also before            ``message_events``
                   ``session_meta``)
``gemini-cli``     Gemini CLI chat recordings (JSON, JSONL)   ``message_events``
``openhands``      OpenHands event streams (V0 and V1 SDK)    ``message_events``
``swe-agent``      SWE-agent ``.traj`` trajectories           ``message_events``
``openai-agents``  openai-agents session items                ``message_events``
``pydantic-ai``    pydantic-ai message dumps                  ``message_events``
=================  =========================================  ==============================

``format="auto"`` tells them apart (an unknown file gets an
:class:`~plait.errors.ImportFormatError` naming the formats to pass). Only a
regular file of at most :data:`MAX_SOURCE_BYTES` is read: a FIFO, a device or
a bigger file is refused with that error, unread.

Every imported message of an external format carries ``meta["source"]``
(its line, and the record's id and time where the format has them). What a
reader does not map is kept verbatim on the session, in
``metadata["seeded_from_jsonl"]["unmapped"]``, and counted by record type in
``source["skipped"]``; ``docs/importers.md`` lists, per agent and record
type, what is kept, mapped or skipped and why.

:func:`to_jsonl` exports plait JSONL, which reads back exactly;
:func:`to_openai_messages` and :func:`to_claude_code_jsonl` export what the
model is sent in those formats, which read back to the same messages.
:func:`export_bundle` / :func:`write_bundle` put a session in a portable,
versioned bundle (``plait.bundle.v1``: ``sanitized``, ``local`` or
``replay-only``) and :func:`import_bundle` makes a session from one; see
:mod:`plait.interop.bundle`.

:func:`map_claude_code_entries` maps Claude Code transcript entries that
arrive already decoded (a session store's batches) as the ``claude-code``
reader maps a file, and says which message carries each entry.
"""

from __future__ import annotations

from plait.interop._claude_entries import ClaudeCodeMapping, map_claude_code_entries
from plait.interop._detect import FORMATS
from plait.interop._export import to_claude_code_jsonl, to_openai_messages
from plait.interop._plait_jsonl import JSONL_VERSION, to_jsonl
from plait.interop._read import MAX_SOURCE_BYTES
from plait.interop._seed import SEED_SOURCE_SCHEMA, SeedResult, seed_from_jsonl
from plait.interop._source import ProgressCallback, SourceFormat
from plait.interop.bundle import (
    BUNDLE_SCHEMA,
    BundleMode,
    export_bundle,
    import_bundle,
    is_bundle_file,
    read_bundle,
    write_bundle,
)

__all__ = [
    "BUNDLE_SCHEMA",
    "FORMATS",
    "JSONL_VERSION",
    "MAX_SOURCE_BYTES",
    "BundleMode",
    "ClaudeCodeMapping",
    "ProgressCallback",
    "SEED_SOURCE_SCHEMA",
    "SeedResult",
    "SourceFormat",
    "export_bundle",
    "import_bundle",
    "is_bundle_file",
    "map_claude_code_entries",
    "read_bundle",
    "seed_from_jsonl",
    "to_claude_code_jsonl",
    "to_jsonl",
    "to_openai_messages",
    "write_bundle",
]
