"""The web page in a real browser: the session list, a transcript, the lineage picture, and a
live run's text appearing as the model writes it.

Drives Debian's chromium (``/usr/bin/chromium``) with the ``playwright`` Python package
against a real uvicorn on a loopback port; never downloads a browser. Without either
piece it skips, saying how to install them, unless ``PLAIT_REQUIRE_BROWSER=1`` (CI)
says the machine must have them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import AUTH, KEY, GatedProvider, LiveServer, make_served

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INSTALL = (
    "needs Debian's chromium and the playwright Python package: "
    "`apt-get install -y chromium` and `pip install playwright` "
    "(the package only; never `playwright install`)"
)
MISSING = not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None
REQUIRED = os.environ.get("PLAIT_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(MISSING and not REQUIRED, reason=INSTALL)


@pytest.fixture
def browser_page() -> Iterator[Any]:
    if MISSING:
        pytest.fail(f"PLAIT_REQUIRE_BROWSER=1, but this test {INSTALL}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, timeout=30_000)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def test_the_page_lists_shows_draws_and_follows_a_live_run(
    browser_page: Any, tmp_path: Path
) -> None:
    gated = GatedProvider("and the rest of the answer")
    served = make_served(tmp_path, lambda: gated)
    root = served.client.sessions.create(
        [
            {"role": "system", "content": "be kind"},
            {"role": "user", "content": "<b>not bold</b> question"},
            {"role": "assistant", "content": "an answer"},
        ],
        title="Root session",
    )
    branch = root.fork()
    branch.rename("Branch one")
    page = browser_page
    problems: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("request", lambda r: requests.append(r.url))
    with LiveServer(served.app) as live:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        titles = page.locator("a.session-link").all_inner_texts()
        assert set(titles) == {"Root session", "Branch one"}

        # The transcript: every record, its text as text (no markup made of it).
        page.click("a.session-link:text('Root session')")
        page.wait_for_selector("#transcript li[data-seq='2']")
        items = page.locator("#transcript li").all_inner_texts()
        assert "<b>not bold</b> question" in items[1]
        assert page.locator("#transcript b").count() == 0
        assert page.inner_text("#session-title") == "Root session"

        # The lineage, drawn: an SVG with both sessions in it.
        page.wait_for_selector("#lineage svg")
        drawing = page.text_content("#lineage svg")
        assert "Root session" in drawing and "Branch one" in drawing
        assert page.locator("#lineage svg rect").count() >= 2

        # The live view: a run's text appears while the model is still writing.
        page.wait_for_selector("#live[data-connected='yes']")
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            r = http.post(f"/sessions/{root.id}/runs", json={"text": "tell me more"})
            assert r.status_code == 202
            # (Locators, not wait_for_function: the page's CSP forbids eval, rightly.)
            page.locator("#live-text", has_text="first piece").wait_for()
            assert page.inner_text("#live-state") == "running"
            # The user's request is already in the transcript; the reply is not yet.
            page.wait_for_selector("#transcript li[data-seq='3']")
            assert page.locator("#transcript li[data-seq='4']").count() == 0
            gated.gate.set()
            page.wait_for_selector("#transcript li[data-seq='4']")
            page.locator("#live-state", has_text="done").wait_for()
        reply = page.inner_text("#transcript li[data-seq='4']")
        assert "first piece and the rest of the answer" in reply

        # Back to the list: the page is one document, navigated by its hash.
        page.click("#home")
        page.wait_for_selector("#list-view:not([hidden])")
        page.goto("about:blank")  # closes the page's event stream before the server stops
    assert problems == []
    assert all(u.startswith(live.url) for u in requests), requests
    served.client.close()
