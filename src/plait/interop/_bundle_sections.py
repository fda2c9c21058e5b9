"""The sections of a bundle as :func:`plait.interop.export_bundle` builds them from records.

Each helper turns stored records into one part of the envelope (its lineage, transcript
entries, tool calls, events, replay responses, trace spans) or strips a replay-only
bundle's payloads; the envelope itself is put together, checked and read in
``bundle.py``. Private to :mod:`plait.interop`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from plait._time import from_micros
from plait.records import (
    AssistantRecord,
    EventRecord,
    JSONValue,
    Record,
    SummaryRecord,
    ToolRecord,
)
from plait.session import Session, host_of


def _iso(micros: int) -> str:
    return from_micros(micros).isoformat()


def _plait_version() -> str:
    # Not ``plait.__version__``: the package root imports this module.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("plait")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def _lineage(session: Session) -> list[JSONValue]:
    """Every ancestor and descendant the store knows, nearest first (a DAG walk)."""
    store = host_of(session).store
    out: list[JSONValue] = []
    seen = {session.id}

    def walk(start: list[str], step: Callable[[str], Iterable[str]], relation: str) -> None:
        queue = list(start)
        while queue:
            sid = queue.pop(0)
            if sid in seen:
                continue
            seen.add(sid)
            row = store.get(sid)
            if row is None:  # deleted: its id stays in the child's parents, nothing more
                continue
            out.append(
                {
                    "id": row.id,
                    "parent_session_ids": list(row.parent_ids),
                    "lineage_operator": row.lineage_operator,
                    "title": row.title,
                    "relation": relation,
                }
            )
            queue.extend(step(sid))

    def parents(sid: str) -> Iterable[str]:
        row = store.get(sid)
        return row.parent_ids if row is not None else ()

    walk(list(session.parent_session_ids), parents, "ancestor")
    walk(list(store.children(session.id)), store.children, "descendant")
    return out


def _entry(record: Record, seqs: list[int]) -> dict[str, JSONValue]:
    entry: dict[str, JSONValue] = {
        "seq": record.seq,
        "kind": record.kind,
        "created_at": _iso(record.created_at_us),
        "role": record.kind,
        **record.payload,
    }
    if isinstance(record, SummaryRecord):
        # Positions among the transcript's entries: what the new session's seqs will be.
        entry["folds"] = [
            sum(1 for s in seqs if s < record.folds_from),
            sum(1 for s in seqs if s < record.folds_to),
        ]
    if isinstance(record, ToolRecord) and record.tool_name is None:
        del entry["tool_name"]
    if record.meta:
        entry["meta"] = dict(record.meta)
    return entry


def _tool_calls(records: list[Record]) -> list[JSONValue]:
    results: dict[str, ToolRecord] = {}
    for r in records:
        if isinstance(r, ToolRecord):
            results.setdefault(r.tool_call_id, r)
    out: list[JSONValue] = []
    called: set[str] = set()
    for r in records:
        if not isinstance(r, AssistantRecord):
            continue
        for call in r.tool_calls:
            called.add(call.id)
            res = results.get(call.id)
            out.append(
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": dict(call.arguments),
                    "result": res.content if res is not None else None,
                    "ok": res.ok if res is not None else None,
                    "call_seq": r.seq,
                    "result_seq": res.seq if res is not None else None,
                }
            )
    for call_id, res in results.items():
        if call_id not in called:  # a result whose call is not in view (trimmed, imported)
            out.append(
                {
                    "id": call_id,
                    "name": res.tool_name,
                    "arguments": None,
                    "result": res.content,
                    "ok": res.ok,
                    "call_seq": None,
                    "result_seq": res.seq,
                }
            )
    return out


def _event(record: EventRecord) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {
        "seq": record.seq,
        "name": record.name,
        "data": dict(record.data),
        "created_at": _iso(record.created_at_us),
    }
    if record.meta:
        out["meta"] = dict(record.meta)
    return out


def _response(record: AssistantRecord) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {
        "seq": record.seq,
        "content": record.content,
        "tool_calls": [c.to_json() for c in record.tool_calls],
    }
    usage = record.meta.get("usage")
    if usage is not None:
        out["usage"] = usage
    return out


def _chars(value: JSONValue) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _drop(obj: dict[str, JSONValue], key: str) -> None:
    """Replace ``obj[key]`` with null and its length (``<key>_chars``)."""
    if key in obj:
        obj[f"{key}_chars"] = _chars(obj[key])
        obj[key] = None


def _usage_only(obj: dict[str, JSONValue]) -> None:
    meta = obj.get("meta")
    if isinstance(meta, dict):
        if "usage" in meta:
            obj["meta"] = {"usage": meta["usage"]}
        else:
            del obj["meta"]


def _strip_payloads(bundle: dict[str, Any]) -> None:
    """replay-only: remove what the user, the system or a tool supplied; keep structure."""
    bundle["session"]["title"] = None
    seeded = bundle["session"]["metadata"].get("seeded_from_jsonl")
    if isinstance(seeded, dict) and isinstance(seeded.get("unmapped"), list):
        # An import keeps the source's unmapped records verbatim: prompt and tool text too.
        _drop(seeded, "unmapped")
    for node in bundle["lineage"]:
        node["title"] = None
    for entry in bundle["transcript"]:
        _drop(entry, "content")
        _drop(entry, "item")  # an opaque item is whatever its writer put there
        for call in entry.get("tool_calls", ()):
            _drop(call, "arguments")
        _usage_only(entry)
    for event in bundle["events"]:
        _drop(event, "data")
        _usage_only(event)
    for event in bundle["approvals"]:
        _drop(event, "data")
    for pair in bundle["tool_calls"]:
        _drop(pair, "arguments")
        _drop(pair, "result")
    for response in bundle["replay"]["responses"]:
        for call in response["tool_calls"]:
            _drop(call, "arguments")


def _trace_span(record: Record) -> dict[str, JSONValue] | None:
    """The span a run's timed step left: a model call (assistant) or a tool call (tool)."""
    timing = record.meta.get("timing")
    if not isinstance(timing, dict):
        return None
    start, end = timing.get("start_us"), timing.get("end_us")
    if not isinstance(start, int) or not isinstance(end, int):
        return None
    attributes: dict[str, JSONValue]
    if isinstance(record, AssistantRecord):
        model = record.meta.get("model")
        name = f"chat {model}"
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": record.meta.get("provider"),
            "gen_ai.request.model": model,
            "gen_ai.response.finish_reasons": [record.meta.get("finish_reason")],
        }
        usage = record.meta.get("usage")
        if isinstance(usage, dict):
            attributes["gen_ai.usage.input_tokens"] = usage.get("input_tokens")
            attributes["gen_ai.usage.output_tokens"] = usage.get("output_tokens")
    elif isinstance(record, ToolRecord):
        name = f"execute_tool {record.tool_name}"
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": record.tool_name,
            "gen_ai.tool.call.id": record.tool_call_id,
            "ok": record.ok,
        }
    else:
        return None
    return {
        "name": name,
        "seq": record.seq,
        "start_us": start,
        "end_us": end,
        "duration_us": end - start,
        "attributes": attributes,
    }
