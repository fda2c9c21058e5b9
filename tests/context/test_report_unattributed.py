"""A context report's shares add up to ``used``: the rest is the Unattributed share."""

from __future__ import annotations

from plait.context import UNATTRIBUTED, ContextReport, Share


def _report(used: int, *shares: Share) -> ContextReport:
    return ContextReport(
        window=1000, used=used, from_provider=True, measured_by="x", partial=False, shares=shares
    )


def test_what_no_source_accounts_for_is_a_share() -> None:
    report = _report(772, Share("System prompt", 100, 1), Share("User messages", 200, 2))
    assert report.shares[-1] == Share(UNATTRIBUTED, 472, 0)
    assert sum(s.tokens for s in report.shares) == report.used


def test_no_share_when_the_sources_cover_it_and_none_is_negative() -> None:
    exact = _report(300, Share("User messages", 300, 2))
    assert [s.name for s in exact.shares] == ["User messages"]
    over = _report(250, Share("User messages", 300, 2))  # our counter counted more
    assert [s.name for s in over.shares] == ["User messages"]


def test_a_given_unattributed_share_is_recomputed_not_doubled() -> None:
    report = _report(500, Share("User messages", 300, 2), Share(UNATTRIBUTED, 50, 0))
    assert report.shares == (Share("User messages", 300, 2), Share(UNATTRIBUTED, 200, 0))
