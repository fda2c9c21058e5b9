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
