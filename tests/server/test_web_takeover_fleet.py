"""The web page on one `plait serve` replica while another, killed (SIGKILL), loses its run.

On one PostgreSQL store the page shows the run's words as the first replica streams
them. Killed mid-reply, that replica wrote nothing of it; the replica that takes the
run over asks the model again, and the page shows its words in place of the old ones,
never both run together.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_URL, needs_postgres
from tests.server.fleet import KEY, FakeModel, Fleet, Replica

from .test_web_browser import browser_page, pytestmark  # noqa: F401

pytestmark = [pytestmark, needs_postgres, pytest.mark.slow]


@pytest.fixture
def pair(pg_schema: str, tmp_path: Path, model: FakeModel) -> Iterator[Fleet]:
    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    PostgresStore(POSTGRES_URL, schema=pg_schema).close()
    store = f"{POSTGRES_URL}?schema={pg_schema}"
    fleet = Fleet([Replica(name, store, model.url, tmp_path) for name in ("a", "b")])
    try:
        for replica in fleet:
            replica.start()
        for replica in fleet:
            replica.wait_ready()
        fleet.wait_peers()
        yield fleet
    finally:
        fleet.stop()


def test_the_page_shows_the_new_replicas_words_in_place_of_the_killed_ones(
    browser_page: Any, pair: Fleet, model: FakeModel, tmp_path: Path  # noqa: F811
) -> None:
    a, b = pair.replicas
    page = browser_page
    with a.api() as api_a:
        sid = api_a.post("/sessions", json={"title": "Killed mid-reply"}).json()["id"]
        page.goto(f"{b.url}/#key={KEY}", wait_until="load")
        page.click("a.session-link:text('Killed mid-reply')")
        page.wait_for_selector("#live[data-connected='yes']")
        r = api_a.post(f"/sessions/{sid}/runs", json={"text": "job doubled hold"})
        assert r.status_code == 202, r.text
    page.locator("#live-text", has_text="working on doubled").wait_for(timeout=30000)
    model.started("doubled").clear()
    a.kill(signal.SIGKILL)
    page.locator("#live-state", has_text="b took it over from a").wait_for(timeout=30000)
    assert model.started("doubled").wait(30)  # b asks the model again and it answers
    page.locator("#live-text", has_text="doubled").wait_for()
    page.wait_for_timeout(500)  # every word of the new reply reached the page
    assert page.inner_text("#live-text").strip() == "working on doubled"
    page.screenshot(path=str(tmp_path / "killed-taken-over.png"), full_page=True)
    model.gate("doubled").set()
    page.locator("#live-state", has_text="done").wait_for(timeout=30000)
    assert page.locator("#transcript li", has_text="working on doubled").count() == 1
    page.screenshot(path=str(tmp_path / "killed-taken-over-done.png"), full_page=True)
    page.goto("about:blank")
