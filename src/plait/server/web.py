"""The web page ``plait serve`` shows, and its OpenAPI page at ``/docs``.

The page lists the sessions (title or first prompt, source agent, size, age;
searchable), shows a transcript (the user's and the model's words whole; long tool
arguments and outputs, system prompts and summaries folded; what a compaction
folded dimmed),
draws the lineage as boxes, shows the context report as a bar, and follows a
running session live. Its buttons start a new session, run, stop, fork (here,
or at any message), compact (after a preview of what would be folded),
uncompact and export. In the live view it can attach as the session's
controller (a random client id kept in the tab) and answer a run's tool-call
approvals with Approve / Deny (decisions D108).

One static page and its scripts and style, served from the package (no CDN, nothing
fetched from elsewhere) under a strict Content-Security-Policy: its scripts are
the only ones the page may run, they may only talk to this server, and they put
every text from a transcript into the page as text, never as markup. The page
signs in with an API key (the one ``plait serve`` printed, or a ``plait token
create`` token), typed in or brought once by the URL ``plait serve`` prints,
whose fragment (``#key=...``) never reaches a server; it keeps the key in the
browser's ``localStorage`` until Sign out (D133). It follows a session by reading
``GET /sessions/{id}/events`` with ``fetch`` (an ``EventSource`` cannot send an
``Authorization`` header), reconnecting with ``Last-Event-ID``.

``/docs`` is Swagger UI over ``/openapi.json``; its files come from the
``fastapi-offline`` package (in the ``[server]`` extra), served under
``/static/swagger`` with the same policy (D131).
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Final

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["WEB_CSP", "mount_web"]

WEB_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: its own script and style, its own server, nothing else."""

_HEADERS: Final = {
    "Content-Security-Policy": WEB_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _Revalidated(StaticFiles):
    """Files the browser asks for again on each load (a 304 when unchanged).

    Without it a browser keeps the script for a while by its own guess, so after an
    upgrade the page (never cached) and its script could come from two versions.
    """

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        """The file's response, marked to be revalidated before each use."""
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        return response


def _static_dir() -> str:
    return str(resources.files("plait.server") / "static")


def _swagger_dir() -> str | None:
    """Swagger UI's files (``fastapi-offline``'s), or None when that package is missing."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    return str(resources.files(fastapi_offline) / "static")


def mount_web(app: FastAPI) -> None:
    """Serve the page at ``/``, the API's page at ``/docs`` and their files under ``/static``.

    None of them is in the OpenAPI document, and none needs a credential: they
    carry no data.
    """
    folder = resources.files("plait.server") / "static"
    index = (folder / "index.html").read_text("utf-8")
    docs = (folder / "docs.html").read_text("utf-8")
    swagger = _swagger_dir()

    # HEAD too, as every page answers it (a monitor's probe, a link checker).
    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> Response:
        return HTMLResponse(index, headers=_HEADERS)

    @app.api_route("/docs", methods=["GET", "HEAD"], include_in_schema=False)
    async def api_page() -> Response:
        if swagger is None:
            return HTMLResponse(
                "<!doctype html><title>plait API</title><p>The API page needs the "
                "<code>fastapi-offline</code> package: <code>pip install 'plait[server]'"
                "</code>. The document itself is at <a href='/openapi.json'>/openapi.json</a>.",
                status_code=404,
                headers=_HEADERS,
            )
        return HTMLResponse(docs, headers=_HEADERS)

    if swagger is not None:  # before /static, which would match these paths first
        app.mount("/static/swagger", StaticFiles(directory=swagger), name="swagger")
    app.mount("/static", _Revalidated(directory=_static_dir()), name="static")
