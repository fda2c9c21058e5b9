"""The lineage an export draws: which sessions, and where each box goes.

Pure: no I/O. Like :mod:`plait.lineage`, the walk takes lookup functions, so
it serves a store, a bundle or a dict in a test.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = ["LineageBox", "PlacedBox", "collect_lineage", "layout_lineage"]


@dataclass(frozen=True, slots=True)
class LineageBox:
    """One session of a lineage, as an export shows it."""

    id: str
    """The session id."""
    title: str | None = None
    """Its title, or None."""
    operator: str | None = None
    """How it was made (``Session.fork``, ``Session.merge``, ...); None for a root."""
    parent_ids: tuple[str, ...] = ()
    """Its lineage parents (several for a merge)."""
    messages: int | None = None
    """Messages in its view; None when it was deleted."""
    deleted: bool = False
    """True when a session names it as a parent but it no longer exists."""


@dataclass(frozen=True, slots=True)
class PlacedBox:
    """A box and its place in the drawing: ``layer`` down, ``column`` across."""

    box: LineageBox
    layer: int
    """0 for the sessions with no parent in the drawing; a child is below all its parents."""
    column: int
    """Position within the layer, from the left."""


def collect_lineage(
    session_id: str,
    describe: Callable[[str], LineageBox | None],
    children_of: Callable[[str], Iterable[str]],
) -> list[LineageBox]:
    """Return ``session_id`` with its ancestors and descendants (and their other parents).

    Ancestors are every parent, transitively (a merge's parents included);
    descendants every child, transitively. A descendant that is a merge also
    brings its other parents and their ancestors, so every merge is drawn
    with all the branches it joins. A parent that no longer exists is kept as
    a ``deleted`` box (its child still names it) and ends the walk up.

    Args:
        session_id: the session the drawing is about.
        describe: the box of a session, or None if there is no such session.
        children_of: the ids of a session's children, oldest first.

    Returns:
        The boxes, each session once: the session, its ancestors nearest first,
        its descendants in the order a breadth-first walk meets them, then the
        other parents of merges below it.
    """
    first = describe(session_id) or LineageBox(session_id, deleted=True)
    boxes: dict[str, LineageBox] = {session_id: first}
    down: list[LineageBox] = []
    if not first.deleted:
        queue: deque[str] = deque(children_of(session_id))
        seen = {session_id}
        while queue:
            sid = queue.popleft()
            if sid in seen:
                continue
            seen.add(sid)
            child = describe(sid)
            if child is None:  # deleted between the two lookups
                continue
            down.append(child)
            queue.extend(children_of(sid))
    up: deque[str] = deque(first.parent_ids)
    while up:
        sid = up.popleft()
        if sid in boxes:
            continue
        box = describe(sid) or LineageBox(sid, deleted=True)
        boxes[sid] = box
        up.extend(box.parent_ids)
    for child in down:
        boxes.setdefault(child.id, child)
    up.extend(p for child in down for p in child.parent_ids)
    while up:
        sid = up.popleft()
        if sid in boxes:
            continue
        box = describe(sid) or LineageBox(sid, deleted=True)
        boxes[sid] = box
        up.extend(box.parent_ids)
    return list(boxes.values())


def layout_lineage(boxes: Sequence[LineageBox]) -> list[PlacedBox]:
    """Place lineage boxes in layers: every session below all of its parents.

    A session's layer is one more than its deepest parent in the drawing, so
    a merge sits under the last of the branches it joins. Within a layer,
    boxes are ordered by the mean column of their parents (which keeps edges
    short and mostly uncrossed), then by the order given. Parents not among
    ``boxes`` are ignored. A cycle, which plait never writes, cannot hang the
    layout: its sessions go in one last layer.

    Returns:
        The placed boxes, layer by layer, left to right.
    """
    ids = [b.id for b in boxes]
    known = set(ids)
    rank = {sid: i for i, sid in enumerate(ids)}
    by_id = {b.id: b for b in boxes}
    parents = {
        b.id: [p for p in dict.fromkeys(b.parent_ids) if p in known and p != b.id] for b in boxes
    }
    children: dict[str, list[str]] = {sid: [] for sid in ids}
    for sid in ids:
        for parent in parents[sid]:
            children[parent].append(sid)
    waiting = {sid: len(parents[sid]) for sid in ids}
    order = [sid for sid in ids if waiting[sid] == 0]
    layer = dict.fromkeys(order, 0)
    i = 0
    while i < len(order):
        sid = order[i]
        i += 1
        for child in children[sid]:
            layer[child] = max(layer.get(child, 0), layer[sid] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                order.append(child)
    placed_ids = set(order)
    stuck = [sid for sid in ids if sid not in placed_ids]
    if stuck:
        last = max((layer[s] for s in order), default=-1) + 1
        for sid in stuck:
            layer[sid] = last
            order.append(sid)
    layers: dict[int, list[str]] = {}
    for sid in order:
        layers.setdefault(layer[sid], []).append(sid)
    column: dict[str, int] = {}
    out: list[PlacedBox] = []
    for depth in sorted(layers):

        def key(sid: str) -> tuple[float, int]:
            cols = [column[p] for p in parents[sid] if p in column]
            return (sum(cols) / len(cols) if cols else -1.0, rank[sid])

        for col, sid in enumerate(sorted(layers[depth], key=key)):
            column[sid] = col
            out.append(PlacedBox(by_id[sid], depth, col))
    return out
