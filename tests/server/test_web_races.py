"""What the page shows is the session it opened last, whatever answers come late.

Driven in Debian's Chromium (see ``test_web_browser``): an answer about the session the
page left is held back until the page shows another one, then let through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .conftest import LiveServer, make_served
from .test_web_browser import browser_page, pytestmark  # noqa: F401  (fixture, skip rule)
from .test_web_seen import _shots, _sign_in


def test_a_late_answer_about_the_session_left_draws_nothing_on_the_next(
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    served = make_served(tmp_path)
    first = served.client.sessions.create(
        [{"role": "user", "content": "the first one's question"}], title="First"
    ).id
    served.client.sessions.create(
        [{"role": "user", "content": "the second one's question"}], title="Second"
    )
    page = browser_page
    held: list[Any] = []
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        # The page reads the session named in its address (``?prefix=true``), query and all.
        def its_own(url: str) -> bool:
            return url.split("?", 1)[0].endswith(f"/sessions/{first}")

        page.route(its_own, lambda route: held.append(route))
        page.click("a.session-link:text('First')")
        for _ in range(3000):  # the page asks, and waits for the first session's answer
            if held:
                break
            page.wait_for_timeout(10)
        assert len(held) == 1
        page.click("#home")
        page.wait_for_selector("#list-view:not([hidden])")
        page.click("a.session-link:text('Second')")
        page.locator("#session-title", has_text="Second").wait_for()
        page.locator("#transcript li", has_text="the second one's question").wait_for()
        with page.expect_response(lambda response: its_own(response.url)):
            held[0].continue_()  # the first session's answer comes, late
        page.evaluate("() => new Promise((done) => setTimeout(done, 100))")  # and is read
        assert page.inner_text("#session-title") == "Second"
        shown = page.locator("#transcript li").all_inner_texts()
        assert not any("the first one's question" in item for item in shown)
        assert any("the second one's question" in item for item in shown)
        page.screenshot(path=str(_shots(tmp_path) / "late-answer.png"), full_page=True)
        page.goto("about:blank")
    served.client.close()
