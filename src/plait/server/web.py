"""The web page ``plait serve`` shows: sessions, a transcript, the lineage, a live view.

It lists the sessions, shows a transcript, draws the lineage as a picture, and
follows a running session live. In the live view it can attach as the session's
controller (a random client id kept in the tab) and answer a run's tool-call
approvals with Approve / Deny (decisions D108).

One static page and its script and style, served from the package (no CDN, nothing
fetched from elsewhere) under a strict Content-Security-Policy: the script is
the only one the page may run, it may only talk to this server, and it puts
every text from a transcript into the page as text, never as markup. The page
asks for an API key and keeps it in the tab's ``sessionStorage``; it follows a
session by reading ``GET /sessions/{id}/events`` with ``fetch`` (an
``EventSource`` cannot send an ``Authorization`` header), reconnecting with
``Last-Event-ID``.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

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


def _static_dir() -> str:
    return str(resources.files("plait.server") / "static")


def mount_web(app: FastAPI) -> None:
    """Serve the page at ``/`` and its files under ``/static`` (outside the OpenAPI document)."""
    index = (resources.files("plait.server") / "static" / "index.html").read_text("utf-8")

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return HTMLResponse(index, headers=_HEADERS)

    app.mount("/static", StaticFiles(directory=_static_dir()), name="static")
