"""Moving sessions in and out of plait: transcript importers and the plait JSONL export.

:func:`seed_from_jsonl` creates a new stored session from a transcript file
(seed 003), in one transaction. It reads:

========================  ===============================  ==============================
format                    what                             ``source_format``
========================  ===============================  ==============================
``plait``                 plait JSONL (:func:`to_jsonl`)   ``message_events``
``openai``                chat-completions messages        ``message_events``
                          request logs (full arrays)       ``request_snapshots``
                          responses only                   ``provider_responses_only``
``claude-code``           Claude Code session JSONL        ``message_events``
``codex``                 Codex CLI rollout JSONL          ``message_events``
``gemini-cli``            Gemini CLI chat recordings       ``message_events``
========================  ===============================  ==============================

``format="auto"`` tells them apart; OpenHands event streams and SWE-agent
trajectories without a ``history`` are recognised and refused with an
:class:`~plait.errors.ImportFormatError` that says so.

Every imported message of an external format carries ``meta["source"]``
(its line, and the record's id and time where the format has them).

:func:`export_bundle` / :func:`write_bundle` put a session in a portable,
versioned bundle (``plait.bundle.v1``: ``sanitized``, ``local`` or
``replay-only``) and :func:`import_bundle` makes a session from one; see
:mod:`plait.interop.bundle`.
"""

from __future__ import annotations

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
    "ProgressCallback",
    "SEED_SOURCE_SCHEMA",
    "SeedResult",
    "SourceFormat",
    "export_bundle",
    "import_bundle",
    "is_bundle_file",
    "read_bundle",
    "seed_from_jsonl",
    "to_claude_code_jsonl",
    "to_jsonl",
    "to_openai_messages",
    "write_bundle",
]
