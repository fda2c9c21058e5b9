"""A session's settings and workspace: metadata, anchor, policy, roots, self-compaction.

Settings live in the row's ``metadata["settings"]`` and are inherited by
branches; other metadata keys (the actor chain, provenance, close state) are not.
Every change is one compare-and-set write of the row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from plait.compaction import self_compaction_default
from plait.context import ModelLimits
from plait.errors import InvalidArgumentError, shown
from plait.providers import ModelSettings
from plait.records import JSONLike, JSONValue, as_json
from plait.session._values import (
    MOUNT_MODES,
    SETTINGS,
    RootResult,
    json_object,
    validate_workspace_policy,
)
from plait.session.counting import MODEL_INFO
from plait.session.runs import MODEL_SETTINGS, REPEAT_LIMIT, repeat_limit
from plait.store.base import SessionRow

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = [
    "add_root",
    "list_roots",
    "remove_root",
    "roots",
    "self_compaction",
    "set_metadata",
    "set_settings",
    "set_workspace_policy",
    "workspace_anchor",
    "workspace_policy",
]


def set_settings(head: Head, **given: JSONLike) -> None:
    """Store settings that branches inherit; a value of None removes the key.

    Raises:
        InvalidArgumentError: a value that is not JSON, a ``repeat_limit`` that is not a
            positive int, ``model_info`` that is not valid model limits
            (:class:`~plait.context.ModelLimits`), or ``model_settings`` that are not valid
            model settings (:class:`~plait.providers.ModelSettings`).
        UnknownOptionError: ``model_info`` or ``model_settings`` with a key that is not
            one of them.
    """
    settings = json_object(given, "settings")
    if settings.get(REPEAT_LIMIT) is not None:
        repeat_limit(settings)  # a positive int, or every later run would fail on it
    limits = settings.get(MODEL_INFO)
    if limits is not None:
        settings = {**settings, MODEL_INFO: dict(ModelLimits.from_json(limits).to_json()) or None}
    chosen = settings.get(MODEL_SETTINGS)
    if chosen is not None:
        # Checked as set_model_settings checks them: stored unchecked, they would fail
        # every later run of the session (and of its branches) instead of this call.
        if not isinstance(chosen, Mapping):
            raise InvalidArgumentError(f"model_settings must be an object, not {shown(chosen)}")
        settings = {**settings, MODEL_SETTINGS: ModelSettings.from_json(chosen).to_json() or None}

    def change(row: SessionRow) -> SessionRow:
        meta = dict(row.metadata)
        stored = meta.get(SETTINGS)  # settings that are not an object read as none (Head.settings)
        merged = dict(stored) if isinstance(stored, dict) else {}
        for key, value in settings.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        meta[SETTINGS] = merged
        return replace(row, metadata=meta)

    head.change_row(change)


def set_metadata(head: Head, key: str, given: JSONLike) -> None:
    """Store one top-level metadata value (None removes it), in one compare-and-set write."""
    if not isinstance(key, str) or not key.strip() or key == SETTINGS:
        raise InvalidArgumentError(f"not a metadata key one may set: {shown(key)}")
    value = as_json(given, "metadata")
    head.require()

    def change(row: SessionRow) -> SessionRow:
        meta = dict(row.metadata)
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
        return replace(row, metadata=meta)

    head.change_row(change)


def self_compaction(settings: Mapping[str, JSONValue]) -> tuple[bool | None, bool]:
    """The session's own self-compaction choice, and the one in force.

    Raises:
        InvalidArgumentError: ``PLAIT_SELF_COMPACTION`` holds something unreadable.
    """
    value = settings.get("self_compaction")
    choice = value if isinstance(value, bool) else None
    return choice, choice if choice is not None else self_compaction_default(os.environ)


def workspace_anchor(settings: Mapping[str, JSONValue]) -> str | None:
    """The folder tools treat as the workspace root (seed 003), or None."""
    anchor = settings.get("workspace_anchor")
    return anchor if isinstance(anchor, str) else None


def workspace_policy(settings: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The workspace defaults, with ``default_mount_mode`` filled in (seed 003)."""
    policy = settings.get("workspace_policy")
    out: dict[str, JSONValue] = {"default_mount_mode": "read_write"}
    if isinstance(policy, Mapping):
        out.update(policy)
    return out


def set_workspace_policy(head: Head, policy: Mapping[str, JSONLike]) -> None:
    """Merge ``policy`` into the stored workspace defaults (checked first)."""
    stored = head.settings().get("workspace_policy")  # not an object reads as none
    merged = dict(stored) if isinstance(stored, dict) else {}
    merged.update(validate_workspace_policy(policy))
    set_settings(head, workspace_policy=merged)


def roots(settings: Mapping[str, JSONValue]) -> list[dict[str, str]]:
    """The mounted roots in ``settings``: ``{path, mounted_at, mount_mode}`` each."""
    raw = settings.get("roots")
    if not isinstance(raw, list):
        return []
    return [
        {k: str(v) for k, v in r.items()}
        for r in raw
        if isinstance(r, Mapping) and {"path", "mounted_at", "mount_mode"} <= set(r)
    ]


def add_root(head: Head, root: str, mount_mode: str | None, mounted_at: str | None) -> RootResult:
    """Mount another folder into the session's workspace (seed 003's ``add_root``)."""
    settings = head.settings()
    mode = mount_mode or str(workspace_policy(settings)["default_mount_mode"])
    if mode not in MOUNT_MODES:
        raise InvalidArgumentError(
            f"mount_mode must be one of {', '.join(MOUNT_MODES)}, not {shown(mode)}"
        )
    if not isinstance(root, str) or not root:
        raise InvalidArgumentError("root must be a folder path")
    folder = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(folder):
        return RootResult(False, None, f"{shown(root)} is not an existing folder")
    name = mounted_at or os.path.basename(folder.rstrip(os.sep)) or folder
    mounted = roots(settings)
    if any(r["mounted_at"] == name for r in mounted):
        return RootResult(False, None, f"something is already mounted at {name!r}")
    mounted.append({"path": folder, "mounted_at": name, "mount_mode": mode})
    set_settings(head, roots=[dict(r) for r in mounted])
    return RootResult(True, name, None)


def remove_root(head: Head, root: str) -> RootResult:
    """Unmount a root, named by its path or by where it is mounted (seed 003)."""
    mounted = roots(head.settings())
    folder = os.path.abspath(os.path.expanduser(root)) if isinstance(root, str) else None
    keep = [r for r in mounted if r["mounted_at"] != root and r["path"] != folder]
    if len(keep) == len(mounted):
        return RootResult(False, None, f"{root!r} is not mounted")
    gone = next(r for r in mounted if r not in keep)
    set_settings(head, roots=[dict(r) for r in keep] or None)
    return RootResult(True, gone["mounted_at"], None)


def list_roots(head: Head, settings: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """``{primary, additional}``: the workspace root and the mounted roots (seed 003)."""
    anchor = workspace_anchor(settings)
    if anchor is not None:
        primary = anchor
    elif (held := head.binding.handle) is not None and not held.closed:
        primary = str(held.root)
    else:
        primary = head.row.workspace if head.row is not None else head.host.workspace
    additional: list[JSONValue] = [dict(r) for r in roots(settings)]
    out: dict[str, JSONValue] = {"primary": primary, "additional": additional}
    target = settings.get("sandbox")
    policy = target.get("policy") if isinstance(target, Mapping) else None
    if isinstance(policy, Mapping):
        out["policy"] = dict(policy)  # what the sandbox lets tools do beyond these
    return out
