"""What a person sees on the web page in the cases a first look at it found wrong: the
model's own words shown whole, replies that were cut off said to be, a stop called a stop,
errors in sight wherever the button was, a page that says when it lost its server and
catches up when it is back, the live controller's refusals in the page's own terms, and a
phone-width window that keeps the list and the lineage readable.

Each view is measured (drawn sizes, visible text) and saved under ``$PLAIT_SCREENSHOTS``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from plait import Client
from plait.interop import seed_from_jsonl
from plait.providers import ScriptedProvider
from plait.providers.base import Reply
from plait.records import ToolCall
from plait.server import create_app
from plait.store import SQLiteStore

from .conftest import AUTH, KEY, GatedProvider, LiveServer, make_served
from .test_web_api import CLAUDE_CODE
from .test_web_browser import browser_page, echo, pytestmark  # noqa: F401  (fixture, skip rule)

LONG_REPLY = "\n".join(f"Verse {i}: the sea keeps its own counsel." for i in range(40))
LONG_OUTPUT = "\n".join(f"row {i}: " + "x" * 60 for i in range(60))
STOPPED = {"role": "assistant", "content": "half an an", "meta": {"finish_reason": "interrupted"}}
OUTPUT = {"role": "tool", "tool_call_id": "c1", "tool_name": "read_file", "content": LONG_OUTPUT}


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PLAIT_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, "not drawn"
    return dict(box)


def _sign_in(page: Any, url: str) -> None:
    page.goto(f"{url}/#key={KEY}", wait_until="load")
    page.wait_for_selector("#list-view:not([hidden]) a.session-link")


def _problems(page: Any) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    return problems


def test_replies_are_shown_whole_and_cut_off_ones_say_so(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    served.client.sessions.create(
        [
            {"role": "user", "content": "a poem, please"},
            {"role": "assistant", "content": LONG_REPLY},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "x"}}],
            },
            OUTPUT,
            STOPPED,
        ],
        title="Read in full",
    )
    page = browser_page
    problems = _problems(page)
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Read in full')")
        page.wait_for_selector("#transcript li[data-n='4']")
        # The model's long answer is there to read, its last line drawn, nothing to open.
        reply = page.locator("#transcript li[data-n='1']")
        assert reply.locator("details").count() == 0
        last = reply.get_by_text("Verse 39", exact=False)
        assert last.is_visible() and _box(last)["height"] > 8
        assert _box(reply)["height"] > 40 * 12  # forty lines, drawn
        # The tool's long output is folded to a line, and its name is spelled as it is.
        tool = page.locator("#transcript li[data-n='3']")
        assert tool.locator("details.folded").count() == 1
        assert _box(tool)["height"] < 120
        assert "read_file" in tool.locator(".head").inner_text()
        # A reply cut off by a stop says so: the model is not sent it again.
        cut = page.locator("#transcript li[data-n='4']")
        said = cut.locator(".finish")
        assert "cut off" in said.inner_text() and _box(said)["width"] > 50
        page.screenshot(path=str(_shots(tmp_path) / "replies-whole.png"), full_page=True)
        page.goto("about:blank")
    assert problems == []
    served.client.close()


def test_a_stop_is_a_stop_and_errors_stay_in_sight(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    gated = GatedProvider()
    served = make_served(tmp_path, lambda: gated)
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(40)
    ]
    sid = served.client.sessions.create(messages, title="Long enough to scroll").id
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 700})
    problems = _problems(page)
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Long enough to scroll')")
        page.wait_for_selector("#live[data-connected='yes']")
        page.fill("#prompt", "go on")
        page.click("#send")
        page.locator("#live-text", has_text="first piece").wait_for()
        page.click("#stop")
        page.locator("#live-state", has_text="stopped").wait_for()
        assert "failed" not in page.inner_text("#live-state")
        assert "cut off" in page.locator("#transcript li.assistant").last.inner_text()

        # A notice from one action does not linger into the next.
        page.click("#uncompact")
        page.locator("#notice", has_text="Nothing to undo").wait_for()
        page.click("#compact")
        page.wait_for_selector("#compact-preview:not([hidden])")
        assert page.is_hidden("#notice")
        page.click("#compact-cancel")

        # The session goes away elsewhere; Fork, at the top of a long page, fails in sight.
        served.client.sessions.delete(sid)
        page.locator("#fork").scroll_into_view_if_needed()
        assert _box(page.locator("#fork"))["y"] < 200  # the page is at its top
        page.click("#fork")
        error = page.locator("#error")
        error.wait_for()
        assert "no such session" in error.inner_text()
        box = _box(error)
        height = page.viewport_size["height"]
        assert box["y"] >= 0 and box["y"] + box["height"] <= height  # on screen, not below it
        assert box["height"] > 20
        page.screenshot(path=str(_shots(tmp_path) / "error-in-sight.png"))
        page.goto("about:blank")
    assert problems == []
    served.client.close()


def test_the_page_says_when_its_server_is_gone_and_catches_up_when_it_is_back(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    gated = GatedProvider()
    # Stopped, the server hands its run over at once; started again, it takes it back.
    served = make_served(tmp_path, lambda: gated, drain_grace=0)
    sid = served.client.sessions.create(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
        title="Served twice",
    ).id
    page = browser_page
    problems = _problems(page)
    first = LiveServer(served.app).__enter__()
    port = first.port
    try:
        _sign_in(page, first.url)
        page.click("a.session-link:text('Served twice')")
        page.wait_for_selector("#live[data-connected='yes']")
        page.fill("#prompt", "tell me more")
        page.click("#send")
        page.locator("#live-text", has_text="first piece").wait_for()
        assert page.inner_text("#live-state") == "running"
    finally:
        first.__exit__(None, None, None)  # the server goes; its run waits for the next one
    # The header says so, in place of "connected".
    status = page.locator("#status", has_text="reconnecting")
    status.wait_for()
    assert _box(status)["width"] > 40
    # A button pressed meanwhile says the server does not answer, in words.
    page.click("#fork")
    page.locator("#error", has_text="does not answer: is plait serve still running?").wait_for()
    page.screenshot(path=str(_shots(tmp_path) / "server-gone.png"))
    with LiveServer(served.app, port=port):
        page.wait_for_selector("#live[data-connected='yes']")
        page.locator("#status", has_text="connected").wait_for()
        page.wait_for_selector("#error", state="hidden")  # it answers again: that error goes
        # The server took its run back: the page shows it running, then how it ended.
        page.locator("#live-state", has_text="running").wait_for()
        assert page.is_enabled("#stop")
        page.screenshot(path=str(_shots(tmp_path) / "server-back.png"), full_page=True)
        gated.gate.set()
        page.locator("#live-state", has_text="done").wait_for()
        assert page.is_disabled("#stop")
        length = served.client.open(sid).transcript.length
        page.locator("#session-facts", has_text=f"{length} messages").wait_for()
        assert page.locator("#transcript li[data-n]").count() == length
        texts = [m.text for m in served.client.open(sid).history()]
        # The reply cut off by the stop stays; the one the model gave again follows it.
        assert texts[-3:] == ["tell me more", "first piece ", "first piece gated reply"], texts
        page.screenshot(path=str(_shots(tmp_path) / "server-back-done.png"), full_page=True)
        page.goto("about:blank")
    assert [p for p in problems if "Failed to fetch" not in p] == []
    served.client.close()


def test_a_second_page_is_told_in_its_own_terms_that_another_controls(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    sid = served.client.sessions.create(title="Controlled elsewhere").id
    page = browser_page
    with LiveServer(served.app) as live:
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            attached = http.post(
                f"/sessions/{sid}/clients", json={"client_id": "cli-1", "mode": "controller"}
            )
            assert attached.status_code in (200, 201), attached.text
        _sign_in(page, live.url)
        page.click("a.session-link:text('Controlled elsewhere')")
        page.wait_for_selector("#live[data-connected='yes']")
        # Who controls is said up front, with the one button that can change it.
        state = page.locator("#control-state")
        assert state.inner_text() == "controlled by cli-1: only it may start or stop runs"
        assert page.is_visible("#take-over") and page.is_hidden("#take-control")
        # Another client takes over while the page watches: the page follows.
        with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
            took = http.post(
                f"/sessions/{sid}/clients",
                json={"client_id": "cli-2", "mode": "controller", "takeover": True},
            )
            assert took.status_code in (200, 201), took.text
        page.locator("#control-state", has_text="controlled by cli-2").wait_for()
        # Running anyway is refused in the page's own terms.
        page.fill("#prompt", "may I?")
        page.click("#send")
        error = page.locator("#error", has_text="Another client (cli-2) controls this session")
        error.wait_for()
        said = error.inner_text()
        assert "takeover=True" not in said and "(none)" not in said
        assert page.is_visible("#take-over") and _box(page.locator("#take-over"))["width"] > 40
        page.screenshot(path=str(_shots(tmp_path) / "controlled-elsewhere.png"), full_page=True)
        page.click("#take-over")
        page.wait_for_selector("#control[data-mode='controller']")
        assert page.is_hidden("#take-over")
        page.locator("#transcript li.event", has_text="took control from cli-2").wait_for()
        said = page.locator("#transcript li.event").all_inner_texts()
        assert said[0].endswith("cli-1 attached as controller")
        assert said[1].endswith("cli-2 took control from cli-1") and "{" not in said[1]
        assert said[2].endswith(" took control from cli-2")
        assert page.inner_text("#control-state").startswith("controlling as web-")
        page.screenshot(path=str(_shots(tmp_path) / "taken-over.png"), full_page=True)
        page.click("#release-control")
        page.wait_for_selector("#control[data-mode='observer']")
        page.goto("about:blank")
    served.client.close()


def test_a_phone_width_window_keeps_the_list_and_the_lineage_readable(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    root = served.client.sessions.create(
        [{"role": "user", "content": "/a/very/long/path/" * 8 + " is where it is"}],
        title="Root of four",
    )
    for i in range(3):
        root.fork().rename(f"Branch number {i}")
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        rows = page.locator("#sessions tbody tr")
        assert rows.count() == 4 and page.is_hidden("#capped")  # all of them: nothing to say
        for i in range(4):
            box = _box(rows.nth(i))
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390  # nothing off the screen
            assert "4 messages" not in rows.nth(i).inner_text()
            assert "1 message" in rows.nth(i).inner_text()
        page.screenshot(path=str(_shots(tmp_path) / "phone-list.png"), full_page=True)
        page.click("a.session-link:text('Branch number 1')")
        page.wait_for_selector("#lineage svg text")
        # The lineage keeps its labels legible (it scrolls sideways), this session in sight.
        label = page.locator("#lineage svg g.mark text").first
        assert _box(label)["height"] >= 9
        mark = _box(page.locator("#lineage svg g.mark rect"))
        holder = _box(page.locator("#lineage"))
        right = holder["x"] + holder["width"]
        assert mark["x"] >= holder["x"] - 1 and mark["x"] + mark["width"] <= right + 1
        assert _box(page.locator("#session-view"))["width"] <= 390
        page.screenshot(path=str(_shots(tmp_path) / "phone-session.png"), full_page=True)
        page.goto("about:blank")
    served.client.close()


def test_what_a_compaction_folded_is_seen_to_be_out_of_the_models_view(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    messages = [{"role": "system", "content": "be brief"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "words " * 30}
        for i in range(20)
    ]
    served.client.sessions.create(messages, title="Folded and unfolded")
    page = browser_page
    problems = _problems(page)
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Folded and unfolded')")
        page.wait_for_selector("#live[data-connected='yes']")
        assert page.locator("#transcript li[data-out]").count() == 0
        page.click("#compact")
        page.click("#compact-confirm")
        page.locator("#notice", has_text="Folded").wait_for()
        summary = page.locator("#transcript li.summary")
        n = summary.get_attribute("data-n")
        folded = page.locator("#transcript li[data-out]")
        said = folded.locator(".out")
        assert folded.count() > 5
        assert set(said.all_inner_texts()) == {f"folded into summary #{n}"}
        assert _box(said.first)["width"] > 80
        first = page.locator("#transcript li[data-n='1']")
        assert first.get_attribute("data-out") == "yes"  # the oldest turn is folded ...
        assert page.locator("#transcript li[data-n='0']").get_attribute("data-out") is None
        last = page.locator("#transcript li[data-n='20']")  # ... the newest is not
        assert last.get_attribute("data-out") is None and "turn 19" in last.inner_text()
        page.screenshot(path=str(_shots(tmp_path) / "compacted.png"), full_page=True)
        page.click("#uncompact")
        page.locator("#notice", has_text="undone").wait_for()
        page.locator("#transcript li .out", has_text="undone by Uncompact").wait_for()
        assert page.locator("#transcript li[data-out]").count() == 1  # the summary alone
        event = page.locator("#transcript li.event").last  # the undo, said in words
        assert event.inner_text().endswith(
            f"Uncompact undid summary #{n}: what it folded is back in the model's view"
        )
        assert "{" not in event.inner_text()
        assert first.get_attribute("data-out") is None
        page.goto("about:blank")
    assert problems == []
    served.client.close()


def test_the_page_in_control_stops_its_own_run(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    gated = GatedProvider()
    served = make_served(tmp_path, lambda: gated)
    served.client.sessions.create(title="Mine to stop")
    page = browser_page
    problems = _problems(page)
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Mine to stop')")
        page.wait_for_selector("#live[data-connected='yes']")
        page.click("#take-control")
        page.wait_for_selector("#control[data-mode='controller']")
        page.fill("#prompt", "go")
        page.click("#send")
        page.locator("#live-text", has_text="first piece").wait_for()
        page.locator("#session-facts", has_text="1 message ·").wait_for()  # during the run
        page.click("#stop")
        page.locator("#live-state", has_text="stopped").wait_for()
        assert page.is_hidden("#error")
        page.click("#release-control")
        page.wait_for_selector("#control[data-mode='observer']")
        page.goto("about:blank")
    assert problems == []
    served.client.close()


def test_a_list_cut_at_its_limit_says_so(browser_page: Any, tmp_path: Path) -> None:  # noqa: F811
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    for i in range(1001):
        served.client.sessions.create([{"role": "user", "content": f"question {i}"}])
    page = browser_page
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        assert page.locator("#sessions tbody tr").count() == 1000
        note = page.locator("#capped")
        assert note.is_visible() and _box(note)["height"] > 10
        assert "Only the 1,000 most recently active sessions" in note.inner_text()
        assert page.locator("a.session-link", has_text="question 0").count() == 0  # the oldest
        page.goto("about:blank")
    served.client.close()


def test_a_source_has_one_colour_in_every_session(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    talk = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
    served.client.sessions.create([{"role": "system", "content": "be kind"}, *talk], title="With")
    served.client.sessions.create(talk, title="Without")
    page = browser_page
    colours: dict[str, dict[str, str]] = {}
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        for title in ("With", "Without"):
            page.goto(live.url + "/#/")
            page.click(f"a.session-link:text-is('{title}')")
            page.locator("#session-title", has_text=title).wait_for()
            page.wait_for_selector("#live[data-connected='yes']")  # context and lineage drawn
            seen = colours.setdefault(title, {})
            for item in page.locator("#context-legend li").all():
                swatch = item.locator(".swatch")
                assert _box(swatch)["width"] > 5
                paint = swatch.evaluate("e => getComputedStyle(e).backgroundColor")
                seen[item.inner_text().rsplit(" ", 1)[0]] = paint
        page.goto("about:blank")
    assert "System prompt" in colours["With"] and "System prompt" not in colours["Without"]
    for source in ("User messages", "Assistant messages"):
        assert colours["With"][source] == colours["Without"][source]
    assert len(set(colours["With"].values())) == len(colours["With"])  # told apart
    served.client.close()


def test_a_session_opened_shows_nothing_of_the_one_before(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    talk = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
    served.client.sessions.create(talk, title="The first one")
    many = [{"role": ("user", "assistant")[i % 2], "content": f"m {i}"} for i in range(3000)]
    served.client.sessions.create(many, title="A long second")
    page = browser_page
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text-is('The first one')")
        page.wait_for_selector("#live[data-connected='yes']")
        assert "The first one" in page.inner_text("#lineage")
        page.goto(live.url + "/#/")
        page.click("a.session-link:text-is('A long second')")
        page.locator("#session-title", has_text="A long second").wait_for()
        # While the long one loads, the first one's lineage and context are gone.
        assert "The first one" not in page.inner_text("#lineage")
        assert "hi there" not in page.inner_text("#transcript")
        page.wait_for_selector("#transcript li[data-n='2999']")
        page.wait_for_selector("#live[data-connected='yes']")
        assert "A long second" in page.inner_text("#lineage")
        page.goto("about:blank")
    served.client.close()


def test_a_run_that_ends_at_the_step_limit_says_so(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    client = Client(ws, store=SQLiteStore(tmp_path / "plait.db"))

    def looping() -> ScriptedProvider:
        """A model that asks for a tool at every step and never answers."""
        calls = [ToolCall(f"c{i}", "echo", {"text": f"again {i}"}) for i in range(30)]
        return ScriptedProvider([Reply(tool_calls=(c,), finish_reason="tool_calls") for c in calls])

    app = create_app(client, api_keys={KEY: "tester"}, provider=looping, tools=[echo])
    client.sessions.create(title="Never done")
    page = browser_page
    with LiveServer(app) as live:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Never done')")
        page.wait_for_selector("#live[data-connected='yes']")
        page.fill("#prompt", "go")
        page.click("#send")
        state = page.locator("#live-state", has_text="ended at the step limit (20 steps)")
        state.wait_for()
        assert "done" not in state.inner_text() and _box(state)["width"] > 100
        page.goto("about:blank")
    client.close()


def test_the_list_keeps_each_fact_on_one_line(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    served = make_served(tmp_path, lambda: ScriptedProvider(["ok"]))
    path = tmp_path / "transcript.jsonl"
    path.write_text(CLAUDE_CODE % "an imported question", "utf-8")
    seed_from_jsonl(served.client, path)
    many = [{"role": ("user", "assistant")[i % 2], "content": f"m {i}"} for i in range(1500)]
    served.client.sessions.create(many, title="Fifteen hundred")
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 700})
    with LiveServer(served.app) as live:
        _sign_in(page, live.url)
        imported = page.locator("#sessions tbody tr", has_text="an imported question")
        source = imported.locator("td.source")
        assert source.inner_text() == "claude-code"
        one_line = _box(imported.locator("td.num"))["height"]
        assert _box(source)["height"] < 1.5 * one_line  # not "claude-" over "code"
        big = page.locator("#sessions tbody tr", has_text="Fifteen hundred")
        assert big.locator("td.num").inner_text() == "1,500"
        page.click("a.session-link:text('Fifteen hundred')")
        page.locator("#session-facts", has_text="1,500 messages").wait_for()
        titled = _box(page.locator("#session-title"))["height"]
        # An untitled session's heading is its first prompt, set apart as in the list.
        page.goto(live.url + "/#/")
        page.click("a.session-link:text('an imported question')")
        heading = page.locator("#session-title", has_text="an imported question")
        heading.wait_for()
        assert heading.evaluate("e => getComputedStyle(e).fontStyle") == "italic"
        assert _box(heading)["height"] < titled
        assert "claude-code" in page.inner_text("#session-facts")
        page.goto("about:blank")
    served.client.close()


def test_every_way_a_run_ends_is_said_on_the_page(
    browser_page: Any, tmp_path: Path  # noqa: F811
) -> None:
    """The output limit, the content filter, a timeout and a failure are not called done."""
    models: list[Any] = [
        ScriptedProvider([Reply("The first half of", finish_reason="length")]),
        ScriptedProvider([Reply("Unsayable", finish_reason="content_filter")]),
        GatedProvider(),  # never let through: the run passes its timeout
        ScriptedProvider([]),  # fails: its script is empty
        ScriptedProvider(["All done."]),
    ]
    served = make_served(tmp_path, lambda: models.pop(0))
    sid = served.client.sessions.create(title="Endings").id
    page = browser_page
    problems = _problems(page)
    shots = _shots(tmp_path)
    endings = [
        ({}, "stopped after 1 step: the reply hit the output limit"),
        ({}, "stopped after 1 step: the provider's content filter cut the reply off"),
        ({"timeout": 0.5}, "stopped after 0 steps: the run passed its timeout of 0.5 s"),
        ({}, "failed after 0 steps: "),
        ({}, "done in 1 step"),
    ]
    with LiveServer(served.app) as live, httpx.Client(
        base_url=live.url, headers=AUTH, timeout=30
    ) as http:
        _sign_in(page, live.url)
        page.click("a.session-link:text('Endings')")
        page.wait_for_selector("#live[data-connected='yes']")
        for n, (options, said) in enumerate(endings, 1):
            r = http.post(f"/sessions/{sid}/runs", json={"text": f"run {n}", **options})
            assert r.status_code == 202, r.text
            state = page.locator("#live-state", has_text=said)
            state.wait_for()
            assert _box(state)["width"] > 100
            if n < len(endings):
                assert "done" not in state.inner_text()
            page.locator("#live").screenshot(path=str(shots / f"ending-{n}.png"))
        page.goto("about:blank")
    assert problems == []
    served.client.close()
