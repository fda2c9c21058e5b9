"""A page in control that dies without a word gives its control up; another page can run.

Driven in Debian's Chromium (see ``test_web_browser``). The controlling page's word on its
way out (the release its ``pagehide`` sends) never reaches the server, as when a tab is
killed, a laptop is closed or the network is lost: the page can send nothing more when it
is closed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from plait.providers import ScriptedProvider
from tests.conftest import eventually

from .conftest import AUTH, LiveServer, make_served
from .test_web_browser import browser_page, pytestmark  # noqa: F401  (fixture, skip rule)
from .test_web_seen import _shots, _sign_in


def test_a_controlling_page_that_dies_lets_go_and_another_page_runs(
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["still here"]), presence_grace=0.5)
    sid = served.client.sessions.create(title="Left behind").id
    first = browser_page
    with LiveServer(served.app) as live, httpx.Client(base_url=live.url, headers=AUTH) as http:
        _sign_in(first, live.url)
        first.click("a.session-link:text('Left behind')")
        first.wait_for_selector("#live[data-connected='yes']")
        first.click("#take-control")
        first.wait_for_selector("#control[data-mode='controller']")
        controller = http.get(f"/sessions/{sid}/clients").json()["controller_id"]
        assert controller is not None and controller.startswith("web-")

        browser = first.context.browser
        assert browser is not None
        first.evaluate("() => { window.fetch = () => new Promise(() => {}); }")  # last word lost
        first.close()
        assert eventually(
            lambda: http.get(f"/sessions/{sid}/clients").json()["controller_id"] is None
        )

        second = browser.new_page()
        _sign_in(second, live.url)
        second.click("a.session-link:text('Left behind')")
        second.wait_for_selector("#live[data-connected='yes']")
        # The session says in words that the page was let go of, and nobody controls it.
        gone = second.locator("#transcript li.event", has_text=f"{controller} detached")
        gone.wait_for()
        assert gone.inner_text().endswith("giving up control (gone)")
        assert second.is_hidden("#take-over")
        second.fill("#prompt", "anyone there?")
        second.click("#send")
        second.locator("#transcript li", has_text="still here").wait_for()
        assert second.is_hidden("#error")
        second.screenshot(path=str(_shots(tmp_path) / "controller-gone.png"), full_page=True)
        second.goto("about:blank")
    served.client.close()
