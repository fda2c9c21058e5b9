"""Which sessions an export draws, and where: lineage walks over plain dicts."""

from __future__ import annotations

from collections.abc import Mapping

from plait.render import LineageBox, collect_lineage, layout_lineage


def _lookups(parents: Mapping[str, tuple[str, ...]]):  # type: ignore[no-untyped-def]
    """describe / children_of over a {id: parent ids} dict (children in dict order)."""

    def describe(sid: str) -> LineageBox | None:
        return LineageBox(sid, parent_ids=parents[sid]) if sid in parents else None

    def children_of(sid: str) -> list[str]:
        return [c for c, ps in parents.items() if sid in ps]

    return describe, children_of


# root ─┬─ a ── a1
#       ├─ b
#       └─ (m: merge of a and b) ── m1;  other ── o1 is another tree; x is a merge of o1 and b
DAG = {
    "root": (),
    "a": ("root",),
    "a1": ("a",),
    "b": ("root",),
    "m": ("a", "b"),
    "m1": ("m",),
    "other": (),
    "o1": ("other",),
    "x": ("o1", "b"),
}


def _ids(session: str, dag: Mapping[str, tuple[str, ...]] = DAG) -> set[str]:
    return {box.id for box in collect_lineage(session, *_lookups(dag))}


def test_ancestors_and_descendants() -> None:
    assert _ids("a1") == {"a1", "a", "root"}
    assert _ids("m") == {"m", "a", "b", "root", "m1"}
    assert _ids("m1") == {"m1", "m", "a", "b", "root"}


def test_a_merge_below_brings_all_the_branches_it_joins() -> None:
    # a's descendant m also has b as a parent; b's descendant x brings o1 and other.
    assert _ids("a") == {"a", "root", "a1", "m", "m1", "b"}
    assert _ids("b") == {"b", "root", "m", "m1", "a", "x", "o1", "other"}
    assert _ids("other") == {"other", "o1", "x", "b", "root"}


def test_a_deleted_parent_is_a_dashed_box_and_ends_the_walk() -> None:
    dag = {"child": ("gone",), "grandchild": ("child",)}
    boxes = {b.id: b for b in collect_lineage("grandchild", *_lookups(dag))}
    assert set(boxes) == {"grandchild", "child", "gone"}
    assert boxes["gone"].deleted and not boxes["child"].deleted


def test_each_session_once_and_the_session_first() -> None:
    boxes = collect_lineage("m", *_lookups(DAG))
    assert boxes[0].id == "m"
    assert len(boxes) == len({b.id for b in boxes})


def test_layers_put_every_session_below_all_its_parents() -> None:
    placed = {p.box.id: p for p in layout_lineage(collect_lineage("b", *_lookups(DAG)))}
    for sid, p in placed.items():
        for parent in DAG[sid]:
            if parent in placed:
                assert placed[parent].layer < p.layer, (parent, sid)
    assert placed["root"].layer == 0 and placed["other"].layer == 0
    assert placed["m"].layer == 2  # below a and b (layer 1)
    # Columns are unique within a layer.
    seen = {(p.layer, p.column) for p in placed.values()}
    assert len(seen) == len(placed)


def test_a_cycle_cannot_hang_the_walk_or_the_layout() -> None:
    dag = {"p": ("q",), "q": ("p",), "r": ("q",)}
    boxes = collect_lineage("r", *_lookups(dag))
    assert {b.id for b in boxes} == {"p", "q", "r"}
    placed = layout_lineage(boxes)
    assert {p.box.id for p in placed} == {"p", "q", "r"}


def test_parents_outside_the_drawing_are_ignored() -> None:
    placed = layout_lineage([LineageBox("c", parent_ids=("not-drawn",))])
    assert [(p.box.id, p.layer, p.column) for p in placed] == [("c", 0, 0)]
