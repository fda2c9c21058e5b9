"""Schemathesis against the served OpenAPI document, in process: no 5xx, no schema violations,
and without a valid credential nothing but 401.

Every operation gets generated requests (valid and invalid bodies, odd ids, odd
query values) with the test key; half the generated session ids are swapped for a
session that exists, so the routes past the 404 are exercised too. The event
stream (``GET /sessions/{id}/events``) never ends by design and is left out; the
same route is covered by ``test_events.py``. Bounded to a few examples per
operation so the run stays well under a minute on two cores.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from plait import Client  # noqa: E402
from plait.providers import ScriptedProvider  # noqa: E402
from plait.server import create_app  # noqa: E402

from .conftest import AUTH, KEY  # noqa: E402

KNOWN = "0190f4a0-0000-7000-8000-00000000c0de"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def _app() -> Any:
    """The app under test, on a store in a temporary folder of its own (module level: the
    schemathesis pytest plugin needs the schema when the tests are collected)."""
    root = Path(_TMP.name)
    client = Client(root, store=root / "fuzz.db")
    client.sessions.create(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        session_id=KNOWN,
        title="fuzzed",
    )
    return create_app(
        client,
        api_keys={KEY: "fuzzer"},
        provider=lambda: ScriptedProvider(["a scripted answer"]),
    )


_TMP = tempfile.TemporaryDirectory(prefix="plait-fuzz-")
schema = schemathesis.openapi.from_asgi("/openapi.json", _app()).exclude(
    path="/sessions/{session_id}/events"
)
# The phases that generate requests from the schema: examples and fuzzing. The coverage
# phase (every boundary of every field) alone takes minutes here; PHASES overrides.
schema.config.phases.update(
    phases=os.environ.get("PLAIT_SCHEMATHESIS_PHASES", "examples,fuzzing").split(",")
)


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_errors_and_no_schema_violations(case: Any) -> None:
    params = case.path_parameters
    if params and "session_id" in params and len(str(params["session_id"])) % 2 == 0:
        params["session_id"] = KNOWN
    case.call_and_validate(headers=AUTH, checks=CHECKS)


BAD_CREDENTIALS = (
    {},
    {"Authorization": "Bearer not-a-key-0123456789abcdef"},
    {"Authorization": f"Basic {KEY}"},
    {"Authorization": "Bearer"},
)


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_without_a_valid_credential_every_operation_is_401_whatever_the_body(case: Any) -> None:
    """Valid and invalid bodies, parameters and ids alike: a missing or wrong credential
    is answered 401 before anything about the request itself (never a 404, 413 or 422)."""
    params = case.path_parameters
    if params and "session_id" in params and len(str(params["session_id"])) % 2 == 0:
        params["session_id"] = KNOWN
    for headers in BAD_CREDENTIALS:
        response = case.call(headers=headers)
        assert response.status_code == 401, (headers, response.status_code, response.text[:200])
        assert response.json()["error"]["code"] == "unauthorized"
        challenge = {k.lower(): v for k, v in response.headers.items()}["www-authenticate"]
        assert challenge in ("Bearer", ["Bearer"])


# The newer options and routes, each with values a generator rarely reaches: caps at 0,
# negative, past 64 bits, as text, as a bool; the prefix switch spelled every way; and
# GET /replicas with a query it does not take. Each is sent as a schemathesis case, so
# the answer is held to the document too: a 4xx it names (422 for a bad value), never a 5xx.
_CAPS = ("max_reply_chars", "max_tool_arguments_chars", "max_tool_output_chars", "idle_timeout")
_BAD_NUMBERS: tuple[object, ...] = (0, -1, 2**70, -(2**70), 1e308, "5", True, [], {}, "")
HOSTILE_CASES: list[tuple[str, str, dict[str, Any]]] = [
    *(
        (path, method, {"body": {**extra, "model_settings": {cap: value}}})
        for cap in _CAPS
        for value in _BAD_NUMBERS
        for path, method, extra in (
            ("/sessions/{session_id}/model-settings", "PUT", {}),
            ("/sessions/{session_id}/runs", "POST", {"text": "hi"}),
            ("/sessions/{session_id}/resume", "POST", {}),
        )
    ),
    *(
        ("/sessions/{session_id}", "GET", {"query": {"prefix": value}})
        for value in ("maybe", "", "2", "-1", "\x00", "true" * 1000, "TRUE", "on")
    ),
    *(
        ("/sessions/{session_id}/messages", "POST", {"query": {"prefix": value}, "body": body})
        for value in ("maybe", "1", "yes")
        for body in ({"messages": [{"role": "user", "content": "x"}]},)
    ),
    ("/replicas", "GET", {"query": {"prefix": "true", "limit": "-1"}}),
    ("/replicas", "GET", {"query": {"x" * 200: "\x00"}}),
]


@pytest.mark.parametrize(
    ("path", "method", "parts"),
    HOSTILE_CASES,
    ids=[f"{m} {p} {i}" for i, (p, m, _) in enumerate(HOSTILE_CASES)],
)
def test_the_newer_options_and_routes_answer_hostile_values_with_a_4xx(
    path: str, method: str, parts: dict[str, Any]
) -> None:
    operation = schema[path][method]
    path_parameters = {"session_id": KNOWN[:8] if "prefix" in parts.get("query", {}) else KNOWN}
    if "{session_id}" not in path:
        path_parameters = {}
    payload: dict[str, Any] = (
        {"body": parts["body"], "media_type": "application/json"} if "body" in parts else {}
    )
    case = operation.Case(path_parameters=path_parameters, query=parts.get("query"), **payload)
    response = case.call(headers=AUTH)
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if "model_settings" in parts.get("body", {}):
        assert response.status_code == 422, (response.status_code, response.text[:300])
        assert response.json()["error"]["code"]
    case.validate_response(response, checks=CHECKS)
