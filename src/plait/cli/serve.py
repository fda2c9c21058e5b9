"""``plait serve``: the HTTP API, its event streams and the web page (the ``[server]`` extra).

Every API route needs a bearer credential: the keys given with ``--api-key`` or
in ``$PLAIT_API_KEYS``, else one key minted at start and printed (never a server
without a credential), and the durable bearer sessions kept in the store. With a
minted key it also prints an address that signs the web page in once (D133).
"""

from __future__ import annotations

import os
import secrets
from typing import Literal

import click

from plait.cli._common import CONTEXT_SETTINGS, Settings, pass_settings

__all__ = ["serve_command"]


@click.command("serve", context_settings=CONTEXT_SETTINGS)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    metavar="KEY",
    help="A static API key (repeat for more; 'principal:key' names its principal). "
    "Default: $PLAIT_API_KEYS, else one minted now and printed.",
)
@click.option(
    "--model",
    metavar="SPEC",
    help="The model runs use (e.g. openai:gpt-4o-mini, scripted). "
    "Default: each session's own, else PLAIT_MODEL, an API key, or the embedded model.",
)
@click.option(
    "--builtin-tools",
    is_flag=True,
    help="Offer runs the built-in tools (shell, files) on this machine. Off by default.",
)
@click.option(
    "--approval-default",
    type=click.Choice(["allow", "deny"]),
    default="allow",
    show_default=True,
    help="What a run's tool call gets when no live controller is attached to approve it.",
)
@click.option(
    "--approval-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a tool call waits for the controller's answer before it is denied.",
)
@click.option("--log-level", default="info", show_default=True)
@pass_settings
def serve_command(
    settings: Settings,
    host: str,
    port: int,
    api_keys: tuple[str, ...],
    model: str | None,
    builtin_tools: bool,
    approval_default: Literal["allow", "deny"],
    approval_timeout: float,
    log_level: str,
) -> None:
    """Serve the sessions over HTTP: the API, SSE event streams and a web page."""
    from plait.server import require_server_extra

    require_server_extra()
    from plait.client import Client
    from plait.server import create_app
    from plait.server.serving import serve_app
    from plait.tools import BUILTIN_TOOLS

    keys: str | tuple[str, ...] | None = api_keys or None
    minted: str | None = None
    if keys is None and not os.environ.get("PLAIT_API_KEYS", "").strip():
        minted = secrets.token_urlsafe(32)
        keys = (minted,)
        click.echo(f"API key for this server (pass it as a bearer token): {minted}", err=True)
    client = Client(settings.workspace, store=settings.store)
    app = create_app(
        client,
        api_keys=keys,
        provider=model,
        tools=BUILTIN_TOOLS if builtin_tools else (),
        approval_default=approval_default,
        approval_timeout=approval_timeout,
    )
    click.echo(f"plait serving {settings.store} on http://{host}:{port}/", err=True)
    click.echo(_sign_in_line(host, port, minted), err=True)
    try:
        serve_app(app, host=host, port=port, log_level=log_level)
    finally:
        client.close()


def _sign_in_line(host: str, port: int, key: str | None) -> str:
    """What to open in a browser: with the minted key, a URL that signs the page in once.

    The key rides in the URL's fragment, which a browser never sends to a server (so no
    log holds it); the page keeps it and takes it out of the address bar and history.
    """
    shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, host)  # where a local browser goes
    url = f"http://{shown}:{port}/"
    if key is None:
        return f"web page: {url} (sign in with an API key or a `plait token create` token)"
    return f"web page, signed in: {url}#key={key}"
