"""The web page when another server takes over the run it watches: it says so, then the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from plait import Client
from plait.server import create_app
from plait.store import SQLiteStore

from .conftest import AUTH, KEY, GatedProvider, LiveServer
from .test_web_browser import browser_page, pytestmark  # noqa: F401
from .test_web_seen import _sign_in


def test_the_page_says_another_server_took_the_run_over(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    """Server A runs, the page watches B; A stops and hands over, B takes the run on."""
    ws = tmp_path / "ws"
    ws.mkdir()
    gated = GatedProvider()
    ca = Client(ws, store=SQLiteStore(tmp_path / "p.db"))
    cb = Client(ws, store=SQLiteStore(tmp_path / "p.db"))
    a = create_app(ca, api_keys={KEY: "tester"}, provider=lambda: gated, drain_grace=0,
                   replica_id="replica-a", lease=1.5)
    b = create_app(cb, api_keys={KEY: "tester"}, provider=lambda: gated,
                   replica_id="replica-b", lease=1.5)
    sid = cb.sessions.create([{"role": "user", "content": "hi"}], title="Taken over").id
    page = browser_page
    with LiveServer(b) as live_b:
        first = LiveServer(a).__enter__()
        httpx.post(f"{first.url}/sessions/{sid}/runs", json={"text": "go on"}, headers=AUTH)
        assert gated.started.wait(10)
        _sign_in(page, live_b.url)
        page.click("a.session-link:text('Taken over')")
        page.wait_for_selector("#live[data-connected='yes']")
        gated.started.clear()
        first.__exit__(None, None, None)
        page.locator("#live-state", has_text="took it over").wait_for(timeout=20000)
        assert page.is_enabled("#stop")
        # What the new server streams replaces what the old one had: the model is asked
        # again, so its words are not shown twice in a row.
        assert gated.started.wait(10)
        page.locator("#live-text", has_text="first piece").wait_for()
        page.wait_for_timeout(500)  # the delta reached this page; nothing else is coming
        assert page.inner_text("#live-text").strip() == "first piece"
        page.screenshot(path=str(tmp_path / "taken-over.png"), full_page=True)
        gated.gate.set()
        page.locator("#live-state", has_text="done").wait_for()
        assert page.is_disabled("#stop")
        assert page.locator("#transcript li", has_text="first piece gated reply").count() == 1
        page.screenshot(path=str(tmp_path / "taken-over-done.png"), full_page=True)
        page.goto("about:blank")
    ca.close()
    cb.close()
