"""The pure core: copy-on-write layouts and lineage drawing, with no store at all."""

from __future__ import annotations

import pytest

from plait.layout import (
    Layout,
    branch,
    find_message,
    segments,
    segments_backward,
    shared_prefix,
)
from plait.lineage import LineageNode, draw_tree, root_of


def test_segments_cover_and_clip() -> None:
    lay = Layout(bases=((1, 3), (2, 5)), end_seq=8, end_msgs=8)
    assert segments(lay, 9, 0, 8) == [(1, 0, 3), (2, 3, 5), (9, 5, 8)]
    assert segments(lay, 9, 2, 6) == [(1, 2, 3), (2, 3, 5), (9, 5, 6)]
    assert segments(lay, 9, 6, 6) == []
    assert lay.own_lo == 5


def test_branch_is_a_few_integers_whatever_the_length() -> None:
    long = Layout(end_seq=100_000, end_msgs=100_000)
    child = branch(long, 1, 100_000, 100_000)
    assert child.bases == ((1, 100_000),)
    grandchild = branch(child.appended(5, 5), 2, 100_003, 100_003)
    assert grandchild.bases == ((1, 100_000), (2, 100_003))
    assert grandchild.end_seq == 100_003


def test_branch_before_the_view_start_clamps_the_view() -> None:
    lay = Layout(end_seq=10, end_msgs=10, view_start=6, view_msgs=6)
    child = branch(lay, 1, 4, 4)
    assert (child.view_start, child.view_msgs, child.length) == (4, 4, 0)
    with pytest.raises(ValueError):
        branch(lay, 1, 11, 11)


def test_shared_prefix_is_by_row_not_by_text() -> None:
    a = Layout(end_seq=10, end_msgs=10)
    b = branch(a, 1, 6, 6).appended(3, 3)
    c = branch(b, 2, 8, 8)
    assert shared_prefix(a, 1, b, 2) == 6
    assert shared_prefix(b, 2, c, 3) == 8
    assert shared_prefix(a, 1, c, 3) == 6
    assert shared_prefix(a, 1, Layout(end_seq=4, end_msgs=4), 7) == 0


def test_find_message_skips_events_with_few_probes() -> None:
    kinds = "mmeeemmeem"  # m = message, e = event
    mpos = [kinds[:i].count("m") for i in range(len(kinds))]
    probes: list[int] = []

    def probe(seq: int) -> tuple[int, bool]:
        probes.append(seq)
        return mpos[seq], kinds[seq] == "m"

    lay = Layout(end_seq=len(kinds), end_msgs=kinds.count("m"))
    found = [find_message(lay, k, probe) for k in range(kinds.count("m"))]
    assert found == [i for i, k in enumerate(kinds) if k == "m"]
    probes.clear()
    find_message(Layout(end_seq=10_000, end_msgs=10_000), 9_000, lambda s: (s, True))
    with pytest.raises(ValueError):
        find_message(lay, 99, probe)


def test_root_of_stops_at_missing_parents_and_cycles() -> None:
    parents = {"c": "b", "b": "a", "x": "y", "y": "x"}
    assert root_of("c", parents.get) == "a"
    assert root_of("a", parents.get) == "a"
    assert root_of("x", parents.get) in {"x", "y"}


def test_draw_tree_shows_forks_and_merges() -> None:
    parents = {"root": (), "f1": ("root",), "f2": ("root",), "m": ("f1", "f2")}
    children = {"root": ["f1", "f2"], "f1": ["m"], "f2": ["m"], "m": []}
    lines = draw_tree(
        "root", lambda s: children[s],
        lambda s: LineageNode(s, f"{s} op", parents[s]), mark="f2",
    )
    assert lines[0] == "root op"
    assert "├── f1 op" in lines
    assert "└── f2 op *" in lines
    assert sum("m op" in line for line in lines) == 1  # drawn once in full
    assert any("-> m (merged" in line for line in lines)  # and referenced under its other parent
    assert lines == ["root op", "├── f1 op", "│   └── m op", "└── f2 op *",
                     "    └── -> m (merged; drawn above)"]


def test_draw_tree_draws_a_merge_whose_first_parent_is_gone() -> None:
    children = {"f2": ["m"], "m": []}
    lines = draw_tree("f2", lambda s: children[s],
                      lambda s: LineageNode(s, s, ("gone", "f2") if s == "m" else ()))
    assert lines == ["f2", "└── m"]


def test_draw_tree_handles_deep_chains() -> None:
    depth = 5000
    lines = draw_tree("0", lambda s: [str(int(s) + 1)] if int(s) < depth else [],
                      lambda s: LineageNode(s, s, ()))
    assert len(lines) == depth + 1


def _segments_by_walk(lay: Layout, own: int, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """Every segment from the first, clipped: what segments() must equal."""
    out, start = [], 0
    for owner, end in (*lay.bases, (own, lay.end_seq)):
        a, b = max(start, lo), min(end, hi)
        if a < b:
            out.append((owner, a, b))
        start = end
    return out


def test_segments_and_branch_agree_with_a_walk_of_every_segment() -> None:
    import random

    rng = random.Random(7)
    for _ in range(3000):
        ends = sorted(rng.sample(range(1, 60), rng.randint(0, 8)))
        bases = tuple((rng.randint(1, 50), e) for e in ends)
        lay = Layout(bases, (ends[-1] if ends else 0) + rng.randint(0, 5))
        lo, hi = rng.randint(-2, 70), rng.randint(-2, 70)
        assert segments(lay, 99, lo, hi) == _segments_by_walk(lay, 99, lo, hi)
        cut = rng.randint(0, lay.end_seq)
        walked = tuple((o, b) for o, _, b in _segments_by_walk(lay, 99, 0, cut))
        assert branch(lay, 99, cut, 0).bases == walked


def test_a_branch_at_the_head_of_a_deep_chain_adds_one_segment() -> None:
    lay = Layout(tuple((i, i + 1) for i in range(1, 1001)), 1002, 1002)
    child = branch(lay, 5000, 1002, 1002)
    assert child.bases == (*lay.bases, (5000, 1002))
    assert segments(child, 6000, 1000, 1002) == [(1000, 1000, 1001), (5000, 1001, 1002)]


def test_segments_backward_are_the_segments_newest_first() -> None:
    import random

    rng = random.Random(3)
    for _ in range(2000):
        ends = sorted(rng.sample(range(1, 60), rng.randint(0, 8)))
        lay = Layout(tuple((rng.randint(1, 50), e) for e in ends))
        lay = Layout(lay.bases, (ends[-1] if ends else 0) + rng.randint(0, 5))
        assert list(segments_backward(lay, 99)) == segments(lay, 99, 0, lay.end_seq)[::-1]


def test_a_branch_names_the_tuple_whose_pairs_it_repeats() -> None:
    from dataclasses import asdict, replace

    from plait.layout import branched_from

    lay = Layout(tuple((i, 2 * i) for i in range(1, 301)), 605, 605)
    child = branch(lay, 5000, 605, 605)
    assert branched_from(child.bases) is lay.bases  # the source's own tuple, plus one pair
    assert child.bases[:-1] == lay.bases and child.bases[-1] == (5000, 605)
    # Cut at a segment's end: the source's pairs themselves, nothing added (all of
    # them, the tuple itself, for a branch of a branch that has written nothing).
    at_end = branch(lay, 5000, 300, 300)
    assert at_end.bases == lay.bases[:150] and at_end.bases[-1] is lay.bases[149]
    assert branched_from(at_end.bases) is None
    assert branch(Layout(lay.bases, 600, 600), 5000, 600, 600).bases is lay.bases
    mid = branch(lay, 5000, 151, 151)
    assert branched_from(mid.bases) == lay.bases[:75]
    assert mid.bases == (*lay.bases[:75], (76, 151))
    # Only the latest branch is known; any other layout's pairs name none.
    assert branched_from(child.bases) is None
    # A fact about the pairs, so true of any layout holding them (an append keeps them).
    assert branched_from(mid.appended(1, 1).bases) == lay.bases[:75]
    assert branched_from(replace(mid, bases=lay.bases).bases) is None
    assert branched_from((*mid.bases[:-1], mid.bases[-1])) is None  # equal, not it
    # The layout itself carries nothing more: it is a plain value.
    assert mid == Layout(mid.bases, 151, 151)
    assert set(asdict(mid)) == {"bases", "end_seq", "end_msgs", "view_start", "view_msgs"}
