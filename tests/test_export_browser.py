"""A real browser opens the exported page of a hostile transcript: no script runs.

Drives Debian's chromium (``/usr/bin/chromium``) with the ``playwright`` Python
package. It never downloads a browser (no ``playwright install``); without
either piece the test skips and says how to install it (or fails, when
``PLAIT_REQUIRE_BROWSER=1`` says the machine must have them, as in CI).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
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
# With PLAIT_REQUIRE_BROWSER=1 (for CI) a machine without them fails instead of skipping.
REQUIRED = os.environ.get("PLAIT_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(MISSING and not REQUIRED, reason=INSTALL)

HOSTILE = [
    "<script>window.__pwned = 1; alert('script')</script>",
    '<img src=x onerror="window.__pwned = 2; alert(2)">',
    "[click me](javascript:window.__pwned=3)",
    '<a href="javascript:window.__pwned=4">link</a>',
    "</style><script>window.__pwned = 5</script>",
    '<!-- --><svg onload="window.__pwned = 6"></svg>',
    "]]><script>window.__pwned = 7</script>",
    '<iframe srcdoc="<script>parent.__pwned = 8</script>"></iframe>',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=9">',
    '<body onload="window.__pwned = 10">',
]
EVIL = " ".join(HOSTILE)


class Tab:
    """One browser page, reused across loads (a new page costs more than the load)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.seen: dict[str, list[str]] = {}
        page.on("dialog", lambda d: (self.seen["dialogs"].append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.seen["errors"].append(str(e)))
        page.on("console", lambda m: self.seen["console"].append(f"{m.type}: {m.text}"))
        page.on("request", lambda r: self.seen["requests"].append(r.url))

    def open(self, url: str) -> dict[str, Any]:
        """Load a page; return what it did: dialogs, console lines, errors, requests, text."""
        self.seen = {"dialogs": [], "errors": [], "console": [], "requests": []}
        page = self.page
        page.goto(url, wait_until="load")
        page.wait_for_timeout(100)  # give any onload/onerror handler its turn
        out: dict[str, Any] = dict(self.seen)
        out["pwned"] = page.evaluate("typeof window.__pwned")
        out["main"] = page.inner_text("main") if page.query_selector("main") else ""
        out["aside"] = page.inner_text("aside") if page.query_selector("aside") else ""
        out["title"] = page.title()
        return out


@pytest.fixture(scope="module")
def tab() -> Iterator[Tab]:
    if MISSING:
        pytest.fail(f"PLAIT_REQUIRE_BROWSER=1, but this test {INSTALL}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, timeout=30_000)
        try:
            yield Tab(browser.new_page())
        finally:
            browser.close()


def test_the_harness_sees_a_script_that_runs(tab: Tab, tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text("<p>x</p><script>window.__pwned = 1; console.error('ran')</script>")
    seen = tab.open(control.as_uri())
    assert seen["pwned"] == "number" and any("ran" in c for c in seen["console"])


def test_no_script_runs_in_an_exported_hostile_transcript(tab: Tab, tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = client.sessions.new()
        s.transcript.inject_many(
            [
                {"role": "system", "content": f"system {EVIL}"},
                {"role": "user", "content": f"user {EVIL}", "meta": {"note": EVIL}},
                {
                    "role": "assistant",
                    "content": f"assistant {EVIL}",
                    "tool_calls": [
                        {"id": f"c1{EVIL}", "name": f"tool{EVIL}", "arguments": {EVIL: EVIL}}
                    ],
                },
                {
                    "role": "tool",
                    "content": f"result {EVIL}",
                    "tool_call_id": f"c1{EVIL}",
                    "ok": False,
                },
                {"role": "summary", "content": f"summary {EVIL}", "folds": [1, 4]},
                {"role": "user", "content": f"after {EVIL}"},
            ]
        )
        s.transcript.log_event(f"event{EVIL}", {EVIL: EVIL})
        s.rename(f"title {EVIL}"[:200])
        s.fork().rename(f"branch {EVIL}"[:200])
        path = s.export(tmp_path / "hostile.html")

    url = Path(path).as_uri()
    seen = tab.open(url)
    assert seen["dialogs"] == []
    assert seen["pwned"] == "undefined"
    assert seen["errors"] == []
    assert seen["console"] == []  # not even a CSP report: there was no script to refuse
    assert seen["requests"] == [url]  # nothing else was loaded
    # Every hostile string is on the page, as text a reader sees.
    for where in ("user ", "assistant ", "result ", "summary ", "after "):
        assert f"{where}{EVIL}" in seen["main"], where
    for bad in HOSTILE:
        assert bad in seen["aside"]  # the next request: the summary and what followed it
    assert seen["title"].startswith("title <script>")
