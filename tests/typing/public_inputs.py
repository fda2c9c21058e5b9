"""What a typed caller passes to plait's setters, checked by ``mypy --strict`` (``make typecheck``).

Not a pytest module: mypy reads it. A caller's ``list[str]`` or tuple is JSON to plait, so
each setter that copies what it is given takes the covariant ``JSONLike``; were one to take
the invariant ``JSONValue``, this file would stop type-checking.
"""

from __future__ import annotations

from plait import Client


def keep_a_callers_values(client: Client, tags: list[str], ids: tuple[int, ...]) -> None:
    """Every setter takes the caller's own typed values as they are."""
    counts: dict[str, int] = {"a": 1}
    session = client.sessions.create([{"role": "user", "content": "hi"}], metadata={"tags": tags})
    session.settings.set_metadata("tags", tags)
    session.settings.set(tool_names=tags, counts=counts)
    session.scratchpad.set({"ids": ids}, metadata={"tags": tags})
    session.scratchpad.clear(metadata={"counts": counts})
    session.transcript.log_event("noted", {"ids": ids, "counts": counts})
    session.workspace.set_policy({"default_mount_mode": "read_only"})
    session.close({"tags": tags})
