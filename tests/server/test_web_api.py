"""What the web page needs from the API: typed ids, the drawn lineage, compaction with a
preview, the context report, export, and lists that tell sessions apart."""

from __future__ import annotations

import xml.dom.minidom
from pathlib import Path

from starlette.testclient import TestClient

from plait.interop import seed_from_jsonl

from .conftest import Served


def _conversation(served: Served, question: str, title: str | None = None) -> str:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": question}]
    for i in range(16):
        messages.append({"role": "assistant" if i % 2 == 0 else "user", "content": f"turn {i}"})
    return served.client.sessions.create(messages, title=title).id


def _shared(a: str, b: str) -> str:
    n = 0
    while a[n] == b[n]:
        n += 1
    return a[:n]


def test_a_prefix_names_a_session_only_when_asked_latest_always(
    api: TestClient, served: Served
) -> None:
    a = _conversation(served, "first?")
    b = _conversation(served, "second?")
    shared = _shared(a, b)
    prefix = a[: len(shared) + 1]
    assert api.get(f"/sessions/{prefix}?prefix=true").json()["id"] == a
    assert api.get(f"/sessions/{prefix}/records?prefix=true").json()["session_id"] == a
    assert api.get("/sessions/latest").json()["id"] == b
    fork = api.post(f"/sessions/{prefix}/fork?prefix=true", json={})
    assert fork.status_code == 201 and fork.json()["parent_session_ids"] == [a]
    ambiguous = api.get(f"/sessions/{shared}?prefix=true")
    assert ambiguous.status_code == 404
    error = ambiguous.json()["error"]
    assert error["code"] == "ambiguous_session_id"
    assert set(error["details"]["candidates"]) >= {a, b}
    assert api.get("/sessions/ffff?prefix=true").json()["error"]["code"] == "session_not_found"
    # Unasked, a prefix is an id like any other: one no session has.
    for path in (f"/sessions/{prefix}", f"/sessions/{prefix}/records"):
        assert api.get(path).json()["error"]["code"] == "session_not_found", path
    # Nobody learns which ids exist without a credential.
    bad = {"Authorization": "Bearer no"}
    assert api.get(f"/sessions/{shared}?prefix=true", headers=bad).status_code == 401


def test_a_write_to_an_id_that_does_not_exist_never_lands_in_another_session(
    api: TestClient, served: Served
) -> None:
    """Programs name their own sessions; ``1`` is not ``17``, a date is not its evening."""
    for sid in ("17", "2026-12-05-evening"):
        made = api.post("/sessions", json={"id": sid})
        assert made.status_code in (200, 201), made.text
    for missing in ("1", "2026-12-05"):
        posted = api.post(
            f"/sessions/{missing}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
        )
        assert posted.status_code == 404, posted.text
        assert posted.json()["error"]["code"] == "session_not_found"
        renamed = api.patch(f"/sessions/{missing}", json={"title": "taken"})
        assert renamed.status_code == 404
        assert api.get(f"/sessions/{missing}/records").status_code == 404
    for sid in ("17", "2026-12-05-evening"):
        detail = api.get(f"/sessions/{sid}").json()
        assert detail["length"] == 0 and detail["title"] is None, detail


def test_lists_tell_untitled_sessions_apart(api: TestClient, served: Served) -> None:
    a = _conversation(served, "what is in notes.txt?")
    _conversation(served, "titled", title="A title")
    rows = api.get("/sessions").json()["sessions"]
    row = next(r for r in rows if r["id"] == a)
    assert row["first_prompt"] == "what is in notes.txt?" and row["source"] == "plait"
    assert a.startswith(row["short_id"]) and len(row["short_id"]) < 36


CLAUDE_CODE = (
    '{"type":"user","sessionId":"s-1","uuid":"u1","parentUuid":null,'
    '"timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"%s"}}\n'
    '{"type":"assistant","sessionId":"s-1","uuid":"u2","parentUuid":"u1",'
    '"timestamp":"2026-01-01T00:00:01Z","message":{"role":"assistant","model":"claude-x",'
    '"content":[{"type":"text","text":"hi"}]}}\n'
)


def test_an_imported_session_is_listed_by_its_agent_and_a_cut_prompt_says_so(
    api: TestClient, served: Served, tmp_path: Path
) -> None:
    long_prompt = "please look at " + "this part and " * 20 + "the end"
    path = tmp_path / "transcript.jsonl"
    path.write_text(CLAUDE_CODE % long_prompt, "utf-8")
    sid = seed_from_jsonl(served.client, path).session_id
    row = next(r for r in api.get("/sessions").json()["sessions"] if r["id"] == sid)
    assert row["source"] == "claude-code"  # the agent that wrote it, not just "import"
    shown = row["first_prompt"]
    assert len(shown) <= 120 and shown.endswith("…")  # cut, and seen to be cut
    assert long_prompt.startswith(shown[:-1])
    assert api.get(f"/sessions/{sid}").json()["source"] == "claude-code"


def test_the_lineage_svg_is_a_drawing_with_its_namespace(api: TestClient, served: Served) -> None:
    a = _conversation(served, "root")
    api.post(f"/sessions/{a}/fork", json={})
    svg = api.get(f"/sessions/{a}/lineage").json()["svg"]
    root = xml.dom.minidom.parseString(svg).documentElement
    assert root.tagName == "svg" and root.namespaceURI == "http://www.w3.org/2000/svg"
    assert len(root.getElementsByTagName("rect")) == 2


def test_compact_with_a_preview_then_uncompact(api: TestClient, served: Served) -> None:
    sid = _conversation(served, "long one")
    preview = api.post(f"/sessions/{sid}/compact", json={"dry_run": True, "keep_last": 4})
    assert preview.status_code == 200, preview.text
    plan = preview.json()
    assert plan["dry_run"] and plan["compressed"] > 0 and plan["summary"] is None
    assert len(api.get(f"/sessions/{sid}/history").json()["messages"]) == 17  # nothing written
    done = api.post(f"/sessions/{sid}/compact", json={"keep_last": 4}).json()
    assert done["compressed"] == plan["compressed"] and done["summary"]
    assert api.get(f"/sessions/{sid}/history").json()["messages"][0]["role"] == "summary"
    assert api.post(f"/sessions/{sid}/uncompact").json() == {"ok": True}
    # The summary the undo hid is no message a person sees: the counts say what history does.
    said = len(api.get(f"/sessions/{sid}/history").json()["messages"])
    assert api.get(f"/sessions/{sid}").json()["length"] == said + 1  # and the system prompt
    listed = {x["id"]: x["length"] for x in api.get("/sessions").json()["sessions"]}
    assert listed[sid] == said + 1
    again = api.post(f"/sessions/{sid}/uncompact")
    assert again.status_code == 409 and again.json()["error"]["code"] == "nothing_to_do"


def test_context_report_shares_add_up(api: TestClient, served: Served) -> None:
    sid = _conversation(served, "how full?")
    report = api.get(f"/sessions/{sid}/context").json()["report"]
    assert report["window"] > 0 and report["used"] > 0
    assert sum(share["tokens"] for share in report["shares"]) == report["used"]
    assert report["window_source"] == "guess"  # its replies name no model
    served.client.open(sid).settings.set(model_info={"context_window": 9000})
    report = api.get(f"/sessions/{sid}/context").json()["report"]
    assert (report["window"], report["window_source"]) == (9000, "settings")
    empty = served.client.sessions.create([{"role": "user", "content": "no reply"}]).id
    assert api.get(f"/sessions/{empty}/context").json() == {"session_id": empty, "report": None}


def test_export_is_a_download_named_by_the_whole_id(api: TestClient, served: Served) -> None:
    sid = _conversation(served, "export me <b>")
    page = api.get(f"/sessions/{sid}/export")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f'filename="plait-{sid}.html"' in page.headers["content-disposition"]
    assert "export me &lt;b&gt;" in page.text
    md = api.get(f"/sessions/{sid}/export", params={"format": "md"})
    assert md.headers["content-type"].startswith("text/markdown") and "export me" in md.text


def test_rewind_and_undo_over_http(api: TestClient, served: Served) -> None:
    sid = _conversation(served, "rewind me")
    done = api.post(f"/sessions/{sid}/rewind", json={"keep_first": 3})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["session_id"] == sid and body["length"] == 3
    assert len(api.get(f"/sessions/{sid}/history").json()["messages"]) == 2  # system kept apart
    assert [r["id"] for r in api.get("/sessions").json()["sessions"]] == [sid]
    assert api.get(f"/sessions/{body['hidden_head']}").json()["lineage_operator"] == (
        "Session.rewind"
    )
    back = api.post(f"/sessions/{sid}/rewind", json={"undo": True}).json()
    assert back["length"] == 18 and back["version"] > body["version"]
    assert api.post(f"/sessions/{sid}/rewind", json={}).status_code == 422
    both = api.post(f"/sessions/{sid}/rewind", json={"keep_first": 1, "undo": True})
    assert both.status_code == 422
    nothing = api.post(f"/sessions/{sid}/rewind", json={"keep_first": 18})
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "nothing_to_do"
    assert api.post(f"/sessions/{sid}/rewind", json={"keep_first": 99}).status_code == 422


def test_the_page_and_its_files_are_asked_for_again_after_an_upgrade(served: Served) -> None:
    with TestClient(served.app) as anonymous:  # the page needs no credential, HEAD included
        for path in ("/", "/docs"):
            assert anonymous.head(path).status_code == 200
            assert anonymous.get(path).headers["cache-control"] == "no-cache"
        for name in ("app.js", "transcript.js", "live.js", "app.css"):
            got = anonymous.get(f"/static/{name}")
            # Never the old script under a new page: each load revalidates (a 304 if unchanged).
            assert got.status_code == 200 and got.headers["cache-control"] == "no-cache"
            again = anonymous.get(f"/static/{name}", headers={"If-None-Match": got.headers["etag"]})
            assert again.status_code == 304
