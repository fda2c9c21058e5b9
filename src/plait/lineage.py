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

    A merged session has several parents. It is drawn in full where the walk
    (depth first, children oldest first) meets it first, and as a reference
    (``-> <id> (merged; drawn above)``) wherever else it appears, so every
    session is drawn once and every edge is shown, whichever parents still
    exist. The walk uses an explicit stack: a chain of any depth draws.

    Args:
        root: where to start.
        children_of: the children of a session, oldest first.
        node: the label of a session.
        mark: a session to mark with ``*`` (the one the user asked about).

    Returns:
        Lines such as ``├── 0192f3a1-... Session.fork "title"``.
    """
    lines: list[str] = []
    drawn: set[str] = set()
    # (session, prefix for its line, prefix for its children's lines)
    stack: list[tuple[str, str, str]] = [(root, "", "")]
    while stack:
        sid, line_prefix, child_prefix = stack.pop()
        if sid in drawn:
            lines.append(f"{line_prefix}-> {sid} (merged; drawn above)")
            continue
        drawn.add(sid)
        star = " *" if sid == mark else ""
        lines.append(f"{line_prefix}{node(sid).label}{star}")
        kids = list(children_of(sid))
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append(
                (
                    kids[i],
                    child_prefix + ("└── " if last else "├── "),
                    child_prefix + ("    " if last else "│   "),
                )
            )
    return lines
