"""The web page as a person meets it, in a real browser: signing in (by the address
``plait serve`` prints, or by pasting a key), the searchable list, a session's buttons,
the context bar, the drawn lineage, folded tool output, and the API page at ``/docs``.

What is drawn is measured (boxes' sizes on screen, visible text), and each view is
saved as a screenshot under ``$PLAIT_SCREENSHOTS`` (default: the test's temporary
folder) for a person to look at.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from plait.providers import ScriptedProvider

from .conftest import AUTH, KEY, GatedProvider, LiveServer, make_served
from .test_web_browser import browser_page, pytestmark  # noqa: F401  (fixture, skip rule)

LONG_OUTPUT = "\n".join(f"line {i}: " + "x" * 60 for i in range(80))


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PLAIT_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _watch(page: Any) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("request", lambda r: requests.append(r.url))
    return problems, requests


def _size(locator: Any) -> tuple[float, float]:
    box = locator.bounding_box()
    assert box is not None, "not drawn"
    return box["width"], box["height"]


def test_a_session_seen_and_worked_on_from_the_page(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    shots = _shots(tmp_path)
    gated = GatedProvider("and that is all")
    served = make_served(tmp_path, lambda: gated)
    client = served.client
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in the log?"},
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "app.log"}}],
        },
        {"role": "tool", "content": LONG_OUTPUT, "tool_call_id": "c1", "tool_name": "read_file"},
    ]
    for i in range(14):
        messages.append({"role": "assistant" if i % 2 == 0 else "user", "content": f"turn {i}"})
    root = client.sessions.create(messages, title="Reading the log")
    branch = root.fork()
    branch.rename("A second look")
    client.sessions.create([{"role": "user", "content": "an untitled question about tests"}])
    page = browser_page
    problems, requests = _watch(page)
    with LiveServer(served.app) as live:
        # Signing in: the page says how, and a pasted key works.
        page.goto(live.url + "/", wait_until="load")
        page.wait_for_selector("#sign-in:not([hidden])")
        explained = page.inner_text("#sign-in")
        assert "plait serve" in explained and "plait token create" in explained
        page.screenshot(path=str(shots / "1-sign-in.png"), full_page=True)
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        assert "signed in as tester" in page.inner_text("#who")

        # The list: title or first prompt, source, size, age; searchable.
        rows = page.locator("#sessions tbody tr")
        assert rows.count() == 3
        texts = rows.all_inner_texts()
        assert any("an untitled question about tests" in t and "plait" in t for t in texts)
        assert all("just now" in t for t in texts)
        page.screenshot(path=str(shots / "2-list.png"), full_page=True)
        page.fill("#search", "second look")
        assert page.locator("a.session-link").all_inner_texts() == ["A second look"]
        page.fill("#search", "")

        # A session: facts, the context bar, the lineage drawn as boxes.
        page.click("a.session-link:text('Reading the log')")
        page.wait_for_selector("#transcript li[data-seq='17']")
        assert page.inner_text("#session-title") == "Reading the log"
        page.wait_for_selector("#lineage svg g")
        boxes = page.locator("#lineage svg rect")
        assert boxes.count() == 2
        for i in range(2):
            width, height = _size(boxes.nth(i))
            assert width > 100 and height > 20  # drawn boxes, not run-together text
        labels = page.locator("#lineage svg text")
        assert labels.count() >= 4
        assert all(_size(labels.nth(i))[0] > 0 for i in range(labels.count()))
        drawing = page.locator("#lineage svg")
        _, drawing_height = _size(drawing)
        assert drawing_height > 60
        assert "A second look" in drawing.text_content()
        segments = page.locator("#context-bar .share")
        assert segments.count() >= 3
        bar_width, _ = _size(page.locator("#context-bar"))
        widths = [_size(segments.nth(i))[0] for i in range(segments.count())]
        total = page.inner_text("#context-total")
        # Drawn against the window: a few hundred tokens of 128,000 fill a sliver of the bar.
        used, window = (int(n.replace(",", "")) for n in total.split(" tokens")[0].split(" / "))
        filled = used / window * bar_width
        assert all(w > 0 for w in widths)
        assert filled - 2 <= sum(widths) <= filled + 2 * len(widths)  # each share at least 2px
        assert sum(widths) < bar_width / 4
        # Its replies name no model: the window is plait's default, and said to be a guess.
        assert "/ 128,000 tokens" in total
        assert "window: a guess, plait does not know this model's window" in total

        # Long tool output is folded: one line until opened.
        output = page.locator("#transcript li.tool details.folded")
        assert output.count() == 1
        _, closed = _size(output)
        assert "80 lines" in output.locator("summary").inner_text()
        page.screenshot(path=str(shots / "3-session.png"), full_page=True)
        output.locator("summary").click()
        _, opened = _size(output)
        assert opened > 5 * closed and "line 79:" in output.inner_text()

        # Compact, after a preview of what would be folded; then undo it.
        page.click("#compact")
        page.wait_for_selector("#compact-preview:not([hidden])")
        assert "Fold" in page.inner_text("#compact-plan")
        page.screenshot(path=str(shots / "4-compact-preview.png"), full_page=True)
        page.click("#compact-confirm")
        page.locator("#notice", has_text="Folded").wait_for()
        page.wait_for_selector("#transcript li.summary")
        page.click("#uncompact")
        page.locator("#notice", has_text="undone").wait_for()

        # Export downloads the page, named by the whole id.
        with page.expect_download() as download:
            page.click("#export")
        assert download.value.suggested_filename == f"plait-{root.id}.html"

        # Fork at a message: a branch holding messages #0..#2.
        page.locator("#transcript li[data-n='2'] .fork-here").click()
        page.locator("#session-facts", has_text="3 messages").wait_for()
        forked_id = page.get_attribute("#session-view", "data-id")
        assert forked_id not in (root.id, branch.id)
        assert client.open(str(forked_id)).transcript.length == 3

        # Run, then Stop while the model is still writing.
        page.wait_for_selector(f"#live[data-connected='yes'][data-session-id='{forked_id}']")
        page.fill("#prompt", "go on")
        page.click("#send")
        page.locator("#live-text", has_text="first piece").wait_for()
        assert page.is_enabled("#stop")
        page.screenshot(path=str(shots / "5-running.png"), full_page=True)
        page.click("#stop")
        page.locator("#live-state", has_text="stopped").wait_for()
        assert not page.is_enabled("#stop")

        # New session, and signing out.
        page.click("#home")
        page.wait_for_selector("#list-view:not([hidden])")
        page.click("#new-session")
        page.locator("#session-title", has_text="(empty)").wait_for()
        page.click("#sign-out")
        page.wait_for_selector("#sign-in:not([hidden])")
        page.goto("about:blank")
    assert problems == []
    assert all(u.startswith(live.url) for u in requests), requests
    client.close()


def test_the_sign_in_address_signs_in_once_and_leaves_no_key_in_urls(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["hi"]))
    served.client.sessions.create([{"role": "user", "content": "hello"}], title="Signed")
    page = browser_page
    problems, requests = _watch(page)
    with LiveServer(served.app) as live:
        page.goto(f"{live.url}/#key={KEY}", wait_until="load")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        assert KEY not in page.url
        # Signed in for good: a fresh load of the plain address needs no key.
        page.goto(live.url + "/", wait_until="load")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        assert page.is_hidden("#sign-in")
        # The API page: Swagger UI from this server, every operation listed.
        page.goto(live.url + "/docs", wait_until="load")
        page.locator(".opblock").first.wait_for()
        assert page.locator(".opblock").count() > 20
        assert _size(page.locator(".opblock").first)[1] > 10
        page.screenshot(path=str(shots := _shots(tmp_path)) + "/6-docs.png", full_page=False)
        with httpx.Client(base_url=live.url, timeout=10) as http:
            assert http.get("/docs").status_code == 200  # needs no credential, holds no data
            assert http.get("/sessions").status_code == 401
            assert http.get("/sessions", headers=AUTH).status_code == 200
        page.goto("about:blank")
    assert shots.exists()
    assert problems == []
    assert all(KEY not in u for u in requests), requests
    served.client.close()
