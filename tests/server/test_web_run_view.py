"""The session page while and after a run, as drawn: answered tool-call approvals fold to
one line (the one waiting stays open), the lineage box's message count follows the records
as they arrive, and the context bar fills as much of its width as the window is used.

Each view is measured (drawn sizes, visible text) and saved under ``$PLAIT_SCREENSHOTS``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait import Client
from plait.providers import ScriptedProvider
from plait.providers.base import Reply
from plait.records import ToolCall
from plait.server import create_app
from plait.store import SQLiteStore

from .conftest import AUTH, KEY, GatedProvider, LiveServer, make_served
from .test_web_browser import browser_page, echo, pytestmark  # noqa: F401  (fixture, skip rule)

STEPS = 5  # tool calls the model asks approval for, one a step


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PLAIT_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, "not drawn"
    return dict(box)


def _open(page: Any, url: str, title: str) -> None:
    page.goto(f"{url}/#key={KEY}", wait_until="load")
    page.wait_for_selector("#list-view:not([hidden]) a.session-link")
    page.click(f"a.session-link:text('{title}')")
    page.wait_for_selector("#live[data-connected='yes']")


def _problems(page: Any) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    return problems


def test_answered_approvals_fold_to_one_line_and_the_waiting_one_stays_open(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    client = Client(ws, store=SQLiteStore(tmp_path / "plait.db"))

    def calling() -> ScriptedProvider:
        """The model calls echo once a step, STEPS times, then says it is done."""
        calls = [
            ToolCall(f"call-{i}", "echo", {"text": f"step {i}\nsecond line\nthird line"})
            for i in range(1, STEPS + 1)
        ]
        steps: list[Reply | str] = [
            Reply(tool_calls=(c,), finish_reason="tool_calls") for c in calls
        ]
        return ScriptedProvider([*steps, "all done"])

    app = create_app(
        client, api_keys={KEY: "tester"}, provider=calling, tools=[echo], approval_timeout=60
    )
    client.sessions.create(title="Many approvals")
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 800})
    problems = _problems(page)
    with LiveServer(app) as live:
        _open(page, live.url, "Many approvals")
        page.click("#take-control")
        page.wait_for_selector("#control[data-mode='controller']")
        page.fill("#prompt", "echo five times")
        page.click("#send")
        for i in range(1, STEPS):
            card = page.locator(f"#approvals li[data-call-id='call-{i}']")
            card.locator("button.approve").click()
            page.wait_for_selector(f"#approvals li[data-call-id='call-{i}'][data-outcome]")
        waiting = page.locator(f"#approvals li[data-call-id='call-{STEPS}']")
        waiting.locator("button.approve").wait_for()

        # The one waiting is open: its arguments and both buttons in sight.
        assert waiting.locator("pre.arguments").is_visible()
        assert "third line" in waiting.locator("pre.arguments").inner_text()
        assert waiting.locator("button.approve").is_visible()
        assert waiting.locator("button.deny").is_visible()
        open_height = _box(waiting)["height"]
        # While it waits, the counts say what the transcript shows: ten messages so far.
        assert page.locator("#transcript li[data-n]").count() == 10
        page.locator("#lineage svg g.mark", has_text="10 msgs").wait_for(timeout=5000)
        page.locator("#session-facts", has_text="10 messages").wait_for(timeout=5000)
        # Each answered one is one line: its tool and its outcome, the arguments folded away.
        line = _box(page.locator("#approvals li[data-call-id='call-1'] .tool-name"))["height"]
        for i in range(1, STEPS):
            card = page.locator(f"#approvals li[data-call-id='call-{i}']")
            shown = card.inner_text()
            assert "echo" in shown and "approved" in shown
            assert not card.locator("pre.arguments").is_visible()
            height = _box(card)["height"]
            assert height < 2 * line + 20, (i, height, line)  # a line and the card's padding
            assert open_height > 2 * height
        page.screenshot(path=str(_shots(tmp_path) / "approvals-folded.png"), full_page=True)

        # A folded card opens again on a click, to read what was approved.
        first = page.locator("#approvals li[data-call-id='call-1']")
        first.locator("summary").click()
        assert first.locator("pre.arguments").is_visible()
        assert "step 1" in first.locator("pre.arguments").inner_text()

        waiting.locator("button.approve").click()
        page.locator("#live-state", has_text="done").wait_for()
        last = page.locator(f"#approvals li[data-call-id='call-{STEPS}']")
        assert not last.locator("pre.arguments").is_visible()
        assert _box(last)["height"] < 2 * line + 20
        page.goto("about:blank")
    assert problems == []
    client.close()


def test_the_lineage_box_counts_messages_during_a_run(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    gated = GatedProvider("and the rest")
    served = make_served(tmp_path, lambda: gated)
    sid = served.client.sessions.create(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
        title="Counted live",
    ).id
    page = browser_page
    problems = _problems(page)
    with LiveServer(served.app) as live:
        _open(page, live.url, "Counted live")
        box = page.locator("#lineage svg g.mark")
        assert "2 msgs" in box.text_content()
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            r = http.post(f"/sessions/{sid}/runs", json={"text": "tell me more"})
            assert r.status_code == 202, r.text
            page.locator("#live-text", has_text="first piece").wait_for()
            # The run's user message is stored; the reply is not: the box says 3, running.
            page.locator("#lineage svg g.mark", has_text="3 msgs").wait_for(timeout=5000)
            assert page.inner_text("#live-state") == "running"
            label = page.locator("#lineage svg g.mark text", has_text="3 msgs")
            assert _box(label)["width"] > 50
            page.screenshot(path=str(_shots(tmp_path) / "lineage-during-run.png"), full_page=True)
            gated.gate.set()
            page.locator("#live-state", has_text="done").wait_for()
            page.locator("#lineage svg g.mark", has_text="4 msgs").wait_for()
        page.goto("about:blank")
    assert problems == []
    assert served.client.open(sid).transcript.length == 4
    served.client.close()


def test_the_context_bar_is_drawn_against_the_window(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    # About a third of the default window (128,000 tokens), so the bar is part filled.
    words = " ".join(f"word{i % 997}" for i in range(24_000))
    sid = served.client.sessions.create(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": words},
            {"role": "assistant", "content": "noted"},
        ],
        title="A third full",
    ).id
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 800})
    problems = _problems(page)
    with LiveServer(served.app) as live:
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            report = http.get(f"/sessions/{sid}/context").json()["report"]
        fill = report["used"] / report["window"]
        assert 0.1 < fill < 0.9, fill  # the test means something only for a part-filled bar
        _open(page, live.url, "A third full")
        page.wait_for_selector("#context-bar .share")
        bar = _box(page.locator("#context-bar"))
        shares = page.locator("#context-bar .share")
        widths = [_box(shares.nth(i))["width"] for i in range(shares.count())]
        # The filled part is used / window of the bar; the rest is the free window.
        assert sum(widths) == pytest.approx(fill * bar["width"], abs=2 * len(widths) + 2)
        assert sum(widths) < 0.9 * bar["width"]
        # The shares split the filled part by their tokens: the user's words the most.
        whole = sum(s["tokens"] for s in report["shares"])
        for share, width in zip(report["shares"], widths, strict=True):
            expected = fill * bar["width"] * share["tokens"] / whole
            assert width == pytest.approx(expected, abs=3), share["name"]
        free = page.locator("#context-bar .free")
        left = _box(free)["width"]
        assert left == pytest.approx((1 - fill) * bar["width"], abs=2 * len(widths) + 4)
        assert left + sum(widths) == pytest.approx(bar["width"], abs=3)  # shares, then free
        assert "free" in (free.get_attribute("title") or "")
        total = page.inner_text("#context-total")
        assert f"{report['used']:,} / {report['window']:,} tokens" in total
        page.locator("#context").screenshot(path=str(_shots(tmp_path) / "context-bar.png"))
        page.goto("about:blank")
    assert problems == []
    served.client.close()
