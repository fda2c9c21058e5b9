"""The record model: one immutable row of a transcript, and the message view of it.

Pure: no database, network or file access. A transcript is a sequence of
records, each with a ``kind`` discriminator. Every kind is a frozen dataclass
(``_model``); one codec (:func:`encode_payload` / :func:`decode_record`, in
``_codec``) turns them into the JSON a store keeps and back (``_bulk``: a read's rows in
bulk; :mod:`plait.records.kit`: the codec's pieces for a store's own bulk decoder, which
keeps its column packing to itself); ``_messages`` builds records from message dicts and
gives seed 001's :class:`Message` view.

``seq`` is the record's position in its transcript, counted from the first
record the lineage ever wrote. A fork shares its base's rows, so a shared
record has the same ``seq`` in every branch that holds it.
"""

from __future__ import annotations

from plait.records._bulk import decode_records, decode_rows, decode_view_rows
from plait.records._codec import MESSAGE_KINDS, decode_record, encode_payload
from plait.records._messages import (
    Message,
    messages_of,
    record_from_message,
    records_from_messages,
)
from plait.records._model import (
    COMPACTION_UNDONE,
    CUT_OFF,
    KINDS,
    MESSAGE_ROLES,
    AssistantRecord,
    EventRecord,
    JSONLike,
    JSONValue,
    Kind,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolCallInfo,
    ToolRecord,
    UserRecord,
    as_json,
    dumps,
    hidden_summaries,
    is_cut_off,
    newest_summary,
)

__all__ = [
    "COMPACTION_UNDONE",
    "CUT_OFF",
    "KINDS",
    "MESSAGE_KINDS",
    "MESSAGE_ROLES",
    "AssistantRecord",
    "EventRecord",
    "JSONLike",
    "JSONValue",
    "Kind",
    "Message",
    "OpaqueRecord",
    "Record",
    "SummaryRecord",
    "SystemRecord",
    "ToolCall",
    "ToolCallInfo",
    "ToolRecord",
    "UserRecord",
    "decode_record",
    "decode_records",
    "decode_rows",
    "decode_view_rows",
    "as_json",
    "dumps",
    "encode_payload",
    "hidden_summaries",
    "is_cut_off",
    "messages_of",
    "newest_summary",
    "record_from_message",
    "records_from_messages",
]
