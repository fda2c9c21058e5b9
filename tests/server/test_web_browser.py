"""The web page in a real browser: the session list, a transcript, the lineage picture, a
live run's text appearing as the model writes it, and the page as the live controller
answering a run's tool-call approvals.

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

from plait import Client
from plait.providers import ScriptedProvider
from plait.providers.base import Reply
from plait.records import ToolCall
from plait.server import create_app
from plait.store import SQLiteStore
from plait.tools import tool

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


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


def test_the_page_controls_a_run_and_answers_its_approvals(
    browser_page: Any, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    client = Client(ws, store=SQLiteStore(tmp_path / "plait.db"))
    runs: list[int] = []
    markup = "<img src=x> & <b>bold</b>"

    def calling() -> ScriptedProvider:
        """Each run's model calls echo once (call-1, call-2, ...), then says it is done."""
        runs.append(1)
        call = ToolCall(f"call-{len(runs)}", "echo", {"text": markup})
        return ScriptedProvider([Reply(tool_calls=(call,), finish_reason="tool_calls"), "all done"])

    app = create_app(
        client,
        api_keys={KEY: "tester"},
        provider=calling,
        tools=[echo],
        ping_interval=0.2,
        approval_timeout=60,
    )
    sid = client.sessions.create(title="Tools session").id
    page = browser_page
    problems: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("request", lambda r: requests.append(r.url))
    with LiveServer(app) as live, httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.click("a.session-link:text('Tools session')")
        page.wait_for_selector("#live[data-connected='yes']")
        assert page.get_attribute("#control", "data-mode") == "observer"

        # Attach as the controller: the page's own client id, now the session's controller.
        page.click("#take-control")
        page.wait_for_selector("#control[data-mode='controller']")
        me = page.get_attribute("#control", "data-client-id")
        assert me and me.startswith("web-")
        assert http.get(f"/sessions/{sid}/clients").json()["controller_id"] == me
        assert me in page.inner_text("#control-state")

        # A run started through the API (by the controller) calls a tool: the page shows
        # the request, its tool and arguments as text, and Approve runs it.
        r = http.post(f"/sessions/{sid}/runs", json={"text": "go", "client_id": me})
        assert r.status_code == 202, r.text
        request = page.locator("#approvals li[data-call-id='call-1']")
        request.locator("button.approve").wait_for()
        assert request.locator(".tool-name").inner_text() == "echo"
        assert markup in request.locator("pre.arguments").inner_text()
        assert page.locator("#approvals img, #approvals b").count() == 0
        # The transcript says it in words: the call waits for this page's approval.
        route = page.locator("#transcript li.event", has_text="tool call echo waits for")
        assert route.inner_text().endswith(f"tool call echo waits for {me}'s approval")
        answers = request.locator(".answer button")
        first, second = answers.nth(0).bounding_box(), answers.nth(1).bounding_box()
        assert first and second and second["x"] >= first["x"] + first["width"] + 4  # apart
        shots = Path(os.environ.get("PLAIT_SCREENSHOTS") or tmp_path)
        page.screenshot(path=str(shots / "7-approval.png"), full_page=True)
        [waiting] = http.get(f"/sessions/{sid}/approvals").json()["approvals"]
        assert waiting["call_id"] == "call-1"
        request.locator("button.approve").click()
        page.wait_for_selector("#approvals li[data-call-id='call-1'][data-outcome='approved']")
        assert request.locator("button").count() == 0
        result = page.locator("#transcript li.tool", has_text=f"echo: {markup}")
        result.wait_for()
        page.locator("#transcript li.assistant", has_text="all done").wait_for()
        assert page.locator("#transcript img, #transcript b").count() == 0

        # The page's own Run goes out as the controller's; Deny gives the model the denial.
        page.fill("#prompt", "again")
        page.click("#send")
        request = page.locator("#approvals li[data-call-id='call-2']")
        request.locator("button.deny").click()
        page.wait_for_selector("#approvals li[data-call-id='call-2'][data-outcome='denied']")
        page.locator("#transcript li.tool", has_text="denied").wait_for()
        assert page.locator("#transcript li.tool").count() == 2
        # The run's end says the denial, not a bare "done".
        page.locator("#live-state", has_text="done in 2 steps; 1 tool call was denied").wait_for()
        assert http.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
        payloads = [
            rec["payload"]
            for rec in http.get(f"/sessions/{sid}/records", params={"limit": 1000}).json()[
                "records"
            ]
            if rec["kind"] == "event"
        ]
        decisions = [
            (p["data"]["approve"], p["data"]["client_id"])
            for p in payloads
            if p["name"] == "live_session_permission_decision"
        ]
        assert decisions == [(True, me), (False, me)]

        # Release: the page lets go, and the session has no controller.
        page.click("#release-control")
        page.wait_for_selector("#control[data-mode='observer']")
        page.locator("#transcript li.event", has_text="detach").wait_for()
        assert http.get(f"/sessions/{sid}/clients").json()["controller_id"] is None
        page.goto("about:blank")  # closes the page's event stream before the server stops
    assert problems == []
    assert all(u.startswith(live.url) for u in requests), requests
    client.close()


def test_an_opaque_item_is_shown_as_what_it_is(browser_page: Any, tmp_path: Path) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"text": "weighing it"}]}
    s = served.client.sessions.create(
        [
            {"role": "user", "content": "why?"},
            {"role": "opaque", "format": "openai-agents", "item": item},
            {"role": "assistant", "content": "because"},
        ],
        title="With a provider item",
    )
    page = browser_page
    with LiveServer(served.app) as live:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        page.click("a.session-link:text('With a provider item')")
        page.wait_for_selector("#transcript li[data-seq='2']")
        opaque = page.locator("#transcript li[data-seq='1']")
        text = opaque.inner_text()
        assert "#1 provider item" in text.lower() and "openai-agents reasoning" in text
        assert "weighing it" in text  # the item itself, folded or not, is there to read
        box = opaque.bounding_box()
        assert box is not None and box["height"] > 20 and box["width"] > 200
        shots = Path(os.environ.get("PLAIT_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "opaque-item.png"), full_page=True)
        page.goto("about:blank")
    served.client.close()
    assert s.transcript.length == 3


def test_an_open_page_follows_a_rewind(browser_page: Any, tmp_path: Path) -> None:
    """A rewind made elsewhere takes the rewound messages off an open page; new ones show."""
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    s = served.client.sessions.create(
        [{"role": "user", "content": t} for t in ("first words", "second words", "third words")],
        title="Rewound while watched",
    )
    page = browser_page
    with LiveServer(served.app) as live:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        page.click("a.session-link:text('Rewound while watched')")
        page.wait_for_selector("#transcript li[data-seq='2']")
        page.wait_for_selector("#live[data-connected='yes']")
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            done = http.post(f"/sessions/{s.id}/rewind", json={"keep_first": 1})
            assert done.status_code == 200, done.text
            page.locator("#transcript li").nth(1).wait_for(state="detached")
            page.locator("#session-facts", has_text="1 message ·").wait_for()  # redrawn
            http.post(
                f"/sessions/{s.id}/messages",
                json={"messages": [{"role": "user", "content": "a new second"}]},
            )
        page.locator("#transcript li[data-seq='1']", has_text="a new second").wait_for()
        page.locator("#session-facts", has_text="2 messages").wait_for()  # follows records
        shown = page.locator("#transcript li").all_inner_texts()
        assert len(shown) == 2
        assert "first words" in shown[0] and "a new second" in shown[1]
        assert not any("second words" in t or "third words" in t for t in shown)
        assert "#1 user" in shown[1].lower()  # numbered after what stands, not after what was shown
        box = page.locator("#transcript li[data-seq='1']").bounding_box()
        assert box is not None and box["height"] > 20 and box["width"] > 200
        shots = Path(os.environ.get("PLAIT_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "after-rewind.png"), full_page=True)
        page.goto("about:blank")
    served.client.close()


def test_the_list_marks_cut_ids_and_shows_other_ids_whole(
    browser_page: Any, tmp_path: Path
) -> None:
    """``user/123/retry`` is never shown as ``user/123/`` beside ``user/123``."""
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    for sid in ("user/123", "user/123/retry"):
        served.client.sessions.create(
            [{"role": "user", "content": f"asked in {sid}"}], session_id=sid
        )
    own = served.client.sessions.create([{"role": "user", "content": "asked in plait"}]).id
    page = browser_page
    with LiveServer(served.app) as live:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        cells = page.locator("#list-view td.id")
        assert cells.count() == 3
        shown = cells.all_inner_texts()
        assert shown[1:] == ["user/123/retry", "user/123"]
        assert shown[0].endswith("…") and own.startswith(shown[0].removesuffix("…"))
        for i in range(3):
            box = cells.nth(i).bounding_box()
            assert box is not None and box["width"] > 40 and box["height"] > 10
        shots = Path(os.environ.get("PLAIT_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "list-ids.png"), full_page=True)
        page.goto("about:blank")
    served.client.close()


def test_the_search_box_finds_messages_in_every_session_on_the_server(
    browser_page: Any, tmp_path: Path
) -> None:
    """Words said deep in a transcript (not in any title or first prompt the list holds)
    are found by the server's search: each hit names its session, and its snippet marks
    the words; opening a hit opens its session."""
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    root = served.client.sessions.create(
        [
            {"role": "user", "content": "what lives on Rottnest island?"},
            {"role": "assistant", "content": "The quokka smiles at <i>visitors</i> there."},
        ],
        title="Island animals",
    )
    root.fork().rename("Island animals, again")
    served.client.sessions.create([{"role": "user", "content": "nothing to find"}], title="Other")
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    with LiveServer(served.app) as live:
        page.goto(live.url + "/", wait_until="load")
        page.fill("#api-key", KEY)
        page.click("#connect")
        page.wait_for_selector("#list-view:not([hidden]) a.session-link")
        page.fill("#search", "quokka visitors")
        page.wait_for_selector("#hits li")
        hits = page.locator("#hits li")
        assert hits.count() == 2  # the message, in the session and in its fork
        links = page.locator("#hits a.hit-link").all_inner_texts()
        assert sorted(links) == ["Island animals", "Island animals, again"]
        first = hits.nth(0)
        assert "assistant, message 1" in first.inner_text()
        snippet = first.locator(".snippet")
        assert "smiles at" in snippet.inner_text()
        assert snippet.locator("i").count() == 0  # the text's markup is shown as text
        assert sorted(snippet.locator("mark").all_inner_texts()) == ["quokka", "visitors"]
        box = snippet.locator("mark").first.bounding_box()
        assert box is not None and box["width"] > 10
        shots = Path(os.environ.get("PLAIT_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "search-hits.png"), full_page=True)

        # Nothing found says so; a query the engine cannot read says that.
        page.fill("#search", "platypus")
        page.locator("#hits-state", has_text="No message matches.").wait_for()
        assert page.locator("#hits li").count() == 0
        page.fill("#search", '"unclosed')
        page.locator("#hits-state", has_text="cannot read that query").wait_for()

        page.fill("#search", "quokka")
        page.wait_for_selector("#hits li")
        page.click("#hits a.hit-link:text-is('Island animals')")
        page.wait_for_selector("#transcript li[data-seq='1']")
        assert page.inner_text("#session-title") == "Island animals"
        page.goto("about:blank")
    assert [p for p in problems if "422" not in p] == []
    served.client.close()
