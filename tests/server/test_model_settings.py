"""Model settings through the HTTP API: per run and per session, checked by ``ModelSettings``."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from .conftest import Served, parse_sse


def _session(api: TestClient) -> str:
    r = api.post("/sessions", json={})
    assert r.status_code in (200, 201), r.text
    return str(r.json()["id"])


def _run(api: TestClient, sid: str, **body: Any) -> Any:
    r = api.post(f"/sessions/{sid}/runs", json={"text": "hi", "stream": True, **body})
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    assert events[-1]["event"] == "run_end" and events[-1]["data"]["ok"] is True
    return events


def test_a_runs_settings_reach_the_model_and_stay_with_the_session(
    api: TestClient, served: Served
) -> None:
    sid = _session(api)
    _run(api, sid, model_settings={"max_tokens": 20, "temperature": 0.2, "stop": ["\n\n"]})
    sent = served.providers[-1].requests[-1]
    assert (sent.max_tokens, sent.temperature, sent.stop) == (20, 0.2, ("\n\n",))
    kept = api.get(f"/sessions/{sid}/model-settings").json()
    assert kept == {
        "session_id": sid,
        "model_settings": {"max_tokens": 20, "temperature": 0.2, "stop": ["\n\n"]},
    }
    _run(api, sid)  # the next run without settings uses the kept ones
    assert served.providers[-1].requests[-1].max_tokens == 20


def test_session_settings_are_replaced_and_runs_lay_theirs_over(
    api: TestClient, served: Served
) -> None:
    sid = _session(api)
    r = api.put(f"/sessions/{sid}/model-settings", json={"model_settings": {"seed": 7}})
    assert r.status_code == 200 and r.json()["model_settings"] == {"seed": 7}
    _run(api, sid, model_settings={"top_p": 0.5})
    sent = served.providers[-1].requests[-1]
    assert (sent.seed, sent.top_p) == (7, 0.5)
    r = api.put(f"/sessions/{sid}/model-settings", json={"model_settings": None})
    assert r.json()["model_settings"] == {}
    _run(api, sid)
    assert served.providers[-1].requests[-1].seed is None


def test_bad_settings_are_refused_before_anything_runs(api: TestClient, served: Served) -> None:
    sid = _session(api)
    for bad in ({"max_tokns": 5}, {"temperature": 9}, {"stop": "x" * 0}, {"max_tokens": "20"}):
        r = api.post(f"/sessions/{sid}/runs", json={"text": "hi", "model_settings": bad})
        assert r.status_code == 422, (bad, r.text)
        r = api.put(f"/sessions/{sid}/model-settings", json={"model_settings": bad})
        assert r.status_code == 422, (bad, r.text)
    r = api.post(f"/sessions/{sid}/resume", json={"model_settings": {"seed": "x"}})
    assert r.status_code == 422
    assert api.get(f"/sessions/{sid}/history").json()["messages"] == []
    assert api.get(f"/sessions/{sid}/model-settings").json()["model_settings"] == {}
