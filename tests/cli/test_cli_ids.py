"""Ids people can type: a unique prefix or ``latest`` works wherever an id is taken."""

from __future__ import annotations

import json

import pytest

from plait import Client
from plait._prefix import resolve_session_id, short_id_length
from plait.errors import AmbiguousSessionIdError, SessionNotFoundError

from ._helpers import Run, assert_clean_error, conversation


def _pair(api: Client) -> tuple[str, str, str]:
    """Two sessions and the longest prefix their ids share."""
    a, b = conversation(api, "first?"), conversation(api, "second?")
    n = 0
    while a.id[n] == b.id[n]:
        n += 1
    return a.id, b.id, a.id[:n]


def test_a_unique_prefix_names_its_session_everywhere(run: Run, api: Client) -> None:
    a, _, shared = _pair(api)
    prefix = a[: len(shared) + 1]
    assert json.loads(run("sessions", "show", prefix, "--json").stdout)[1]["content"] == "first?"
    assert run("sessions", "rename", prefix.upper(), "Named").stdout.strip() == "Named"
    assert run("context", prefix, "--json").exit_code == 0
    assert a in run("sessions", "tree", prefix).stdout
    branch = run("sessions", "fork", prefix, "--at", "2").stdout.strip()
    assert api.open(branch).parent_session_ids == (a,)
    stats = json.loads(run("stats", prefix, "--json").stdout)
    assert [row["id"] for row in stats] == [a]


def test_an_ambiguous_prefix_lists_the_candidates(run: Run, api: Client) -> None:
    a, b, shared = _pair(api)
    result = run("sessions", "show", shared)
    assert_clean_error(result, "ambiguous", a, b)
    with pytest.raises(AmbiguousSessionIdError) as caught:
        resolve_session_id(api, shared)
    assert set(caught.value.candidates) == {a, b}
    assert isinstance(caught.value, SessionNotFoundError)


def test_latest_is_the_most_recent_session(run: Run, api: Client) -> None:
    assert_clean_error(run("sessions", "show", "latest"), "no sessions")
    conversation(api, "old")
    newest = conversation(api, "new")
    shown = json.loads(run("sessions", "show", "latest", "--json").stdout)
    assert shown[1]["content"] == "new"
    assert resolve_session_id(api, "latest") == newest.id


@pytest.mark.parametrize("bad", ["zzzz", "../x", "", "0190-not-hex!", "user/123"])
def test_what_matches_nothing_is_not_found(run: Run, api: Client, bad: str) -> None:
    conversation(api)
    assert_clean_error(run("sessions", "show", bad), "no such session")


def test_short_ids_stay_unique_prefixes() -> None:
    ids = ["0190aaaa-0000-7000-8000-000000000001", "0190aaaa-0000-7000-8000-000000000002"]
    n = short_id_length(ids)
    assert len({i[:n] for i in ids}) == 2 and n == 36
    assert short_id_length(["0190aaaa-1", "0190bbbb-1"]) == 8
    assert short_id_length([]) == 8
