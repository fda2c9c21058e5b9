"""The lineage graph: who branched from whom, and how to draw it.

Pure: no I/O. Callers pass functions that look up parents and children, so the
same code walks a store, a bundle, or a dict in a test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Ancestry", "LineageNode", "draw_tree", "root_of"]


@dataclass(frozen=True, slots=True)
class Ancestry:
    """Seed 003's ``{parent_id, child_ids, root_id}`` for one session."""

    parent_id: str | None
    """The first parent (the source of a fork), or None for a root."""
    child_ids: tuple[str, ...]
    """Sessions that name this one as a parent, oldest first."""
    root_id: str
    """The session reached by following first parents to the top."""


@dataclass(frozen=True, slots=True)
class LineageNode:
    """What :func:`draw_tree` prints for one session."""

    id: str
    label: str
    parent_ids: tuple[str, ...]


def root_of(session_id: str, parent_of: Callable[[str], str | None]) -> str:
    """Follow first parents from ``session_id`` to the root.

    A parent that no longer exists (deleted) ends the walk: the last session
    reached is the root. A cycle (which plait never writes) ends it too.
    """
    seen = {session_id}
    current = session_id
    while True:
        parent = parent_of(current)
        if parent is None or parent in seen:
            return current
        seen.add(parent)
        current = parent


def draw_tree(
    root: str,
    children_of: Callable[[str], Sequence[str]],
    node: Callable[[str], LineageNode],
    *,
    mark: str | None = None,
) -> list[str]:
    """Draw the lineage DAG under ``root`` as text lines, one per session.

    A merged session has several parents; it is drawn in full under its first
    parent and as a reference (``-> id``) under the others, so the tree stays
    a tree and every edge is shown.

    Args:
        root: where to start.
        children_of: the children of a session, oldest first.
        node: the label of a session.
        mark: a session to mark with ``*`` (the one the user asked about).

    Returns:
        Lines such as ``├── 0192f3a1 Session.fork "title"``.
    """
    lines: list[str] = []
    drawn: set[str] = set()

    def label(sid: str) -> str:
        star = " *" if sid == mark else ""
        return f"{node(sid).label}{star}"

    def walk(sid: str, prefix: str, last: bool, top: bool, via: str | None) -> None:
        info = node(sid)
        connector = "" if top else ("└── " if last else "├── ")
        is_primary = not info.parent_ids or via is None or info.parent_ids[0] == via
        if sid in drawn or not is_primary:
            lines.append(f"{prefix}{connector}-> {info.id[:8]} (merged; drawn elsewhere)")
            return
        drawn.add(sid)
        lines.append(f"{prefix}{connector}{label(sid)}")
        kids = list(children_of(sid))
        child_prefix = prefix if top else prefix + ("    " if last else "│   ")
        for i, kid in enumerate(kids):
            walk(kid, child_prefix, i == len(kids) - 1, False, sid)

    walk(root, "", True, True, None)
    return lines
