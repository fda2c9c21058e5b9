"""``plait serve``: the HTTP API, its event streams and the web page (the ``[server]`` extra).

Every API route needs a bearer credential: the keys in ``$PLAIT_API_KEYS`` or in
the file given with ``--api-key-file`` (``--api-key`` works too, but any user on
the machine can read a process's command line, so it warns), else one key
minted at start and shown on the terminal only (on standard error only when
that is the terminal: redirected, it ends up in a service manager's log; with
no terminal the command refuses to start rather than run without a credential),
and the durable bearer sessions kept in the store.

Tool calls with no live controller attached to approve them are denied unless
the operator passes ``--approval-default allow``; the start message says which.
With a minted key it also shows, on the terminal, an address that signs the web page
in once (D133).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Literal

import click

from plait.cli._common import CONTEXT_SETTINGS, Settings, pass_settings
from plait.server import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_LEASE,
    DEFAULT_MAX_BODY,
)

__all__ = ["serve_command"]

_KEYS_ENV = "PLAIT_API_KEYS"


def _show_on_terminal(text: str) -> bool:
    """Write ``text`` to the controlling terminal only; False when there is none."""
    if sys.stderr.isatty():
        click.echo(text, err=True)
        return True
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(text + "\n")
    except OSError:
        return False
    return True


def _read_key_file(path: Path) -> str:
    """The keys in a file (``PLAIT_API_KEYS`` text: one or more, ``principal:key`` allowed)."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="--api-key-file") from exc
    if not text.split():
        raise click.BadParameter(f"{path} holds no key", param_hint="--api-key-file")
    if path.stat().st_mode & 0o077:
        click.echo(
            f"warning: {path} can be read by other users; chmod 600 it",
            err=True,
        )
    return text


@click.command("serve", context_settings=CONTEXT_SETTINGS)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--api-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="A file holding the static API keys (whitespace-separated; 'principal:key' "
    "names a key's principal). Also: $PLAIT_API_KEYS. Neither: one key is minted "
    "and shown on the terminal.",
)
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    metavar="KEY",
    help="A static API key (repeat for more). Visible to every user in the process "
    "list: prefer --api-key-file or $PLAIT_API_KEYS.",
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
    default="deny",
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
@click.option(
    "--max-body",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BODY,
    show_default=True,
    metavar="BYTES",
    help="The largest request body accepted (larger: 413, unread).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_HEADER_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="How long a connection has to send each request's head before it is closed.",
)
@click.option(
    "--idle-timeout",
    type=click.IntRange(min=1),
    default=DEFAULT_IDLE_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="How long an idle keep-alive connection is kept after a response.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    metavar="N",
    help="Open connections past which new ones are closed at once "
    "(default: half the process's file-descriptor limit).",
)
@click.option(
    "--advertise-url",
    metavar="URL",
    help="Where the other servers on the store reach this one (http://host:port), so a "
    "session's writes sent to any of them go to the one that runs it. Default: the "
    "--host and --port, unless --host listens on every address.",
)
@click.option(
    "--replica-id",
    metavar="ID",
    help="This server's name among the servers on the store (default: a new one each start).",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.5, max=3600),
    default=DEFAULT_LEASE,
    show_default=True,
    metavar="SECONDS",
    help="How long this server may go unheard before another server on the store takes "
    "its runs over.",
)
@click.option(
    "--drain-grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM, how long runs may go on before they are handed to another server.",
)
@click.option(
    "--retain-older-than",
    metavar="AGE",
    help="Remove the sessions idle for longer than AGE (30d, 12h, 2w), as `plait db retain` "
    "does, every --retain-every. Default: never.",
)
@click.option(
    "--retain-every",
    default="1h",
    show_default=True,
    metavar="PERIOD",
    help="How often --retain-older-than looks (3600, 30m, 6h, 1d).",
)
@click.option("--log-level", default="info", show_default=True)
@pass_settings
def serve_command(
    settings: Settings,
    host: str,
    port: int,
    api_key_file: Path | None,
    api_keys: tuple[str, ...],
    model: str | None,
    builtin_tools: bool,
    approval_default: Literal["allow", "deny"],
    approval_timeout: float,
    max_body: int,
    header_timeout: float,
    idle_timeout: int,
    max_connections: int | None,
    advertise_url: str | None,
    replica_id: str | None,
    lease: float,
    drain_grace: float,
    retain_older_than: str | None,
    retain_every: str,
    log_level: str,
) -> None:
    """Serve the sessions over HTTP: the API, SSE event streams and a web page.

    Its scope is the store's every workspace, or the one named with ``plait
    --workspace PATH serve``: never the folder it happens to start in. Several
    servers on one PostgreSQL store are one fleet (docs/deploy.md).
    """
    from plait.server import require_server_extra

    require_server_extra()
    from plait.client import Client
    from plait.server import create_app
    from plait.server.retaining import Retention
    from plait.server.serving import serve_app
    from plait.session.retention import parse_age
    from plait.tools import BUILTIN_TOOLS

    # Checked before anything is opened or minted: a typo is said at once.
    retention = (
        Retention(
            parse_age(retain_older_than, "--retain-older-than"),
            _period(retain_every),
        )
        if retain_older_than is not None
        else None
    )
    if api_keys:
        click.echo(
            "warning: a key given with --api-key is visible to every user of this machine "
            "in the process list; use --api-key-file or $PLAIT_API_KEYS",
            err=True,
        )
    given = [*api_keys]
    if api_key_file is not None:
        given.extend(_read_key_file(api_key_file).split())
    given.extend(os.environ.get(_KEYS_ENV, "").replace(",", " ").split())
    minted: str | None = None
    if not given:
        minted = secrets.token_urlsafe(32)
        # The sign-in address holds the key too: it goes where the key goes, never to a log.
        shown = _show_on_terminal(
            f"API key for this server (shown once; pass it as a bearer token): {minted}\n"
            + _sign_in_line(host, port, minted)
        )
        if not shown:
            raise click.ClickException(
                "no API key: set $PLAIT_API_KEYS or pass --api-key-file "
                "(a minted key is shown only on a terminal, never in a log)"
            )
        given.append(minted)
    replica_url = advertise_url or _own_url(host, port)
    client = Client(settings.workspace, store=settings.store)
    app = create_app(
        client,
        api_keys=given,
        provider=model,
        tools=BUILTIN_TOOLS if builtin_tools else (),
        approval_default=approval_default,
        approval_timeout=approval_timeout,
        max_body=max_body,
        all_workspaces=not settings.workspace_given,
        replica_id=replica_id,
        replica_url=replica_url,
        lease=lease,
        drain_grace=drain_grace,
        retain_older_than=retention.older_than if retention else None,
        retain_every=retention.every if retention else 3600.0,
    )
    scope = f"workspace {settings.workspace}" if settings.workspace_given else "every workspace"
    click.echo(f"plait serving {settings.store} ({scope}) on http://{host}:{port}/", err=True)
    if approval_default == "deny":
        policy = "denied (--approval-default allow runs them unasked)"
    else:
        policy = "allowed unasked (--approval-default allow)"
    tools = "the built-in tools" if builtin_tools else "no tools (--builtin-tools offers them)"
    click.echo(
        f"runs get {tools}; a tool call with no live controller to approve it is {policy}",
        err=True,
    )
    if retention is not None:
        click.echo(
            f"sessions idle for longer than {retain_older_than} are removed "
            f"every {retain_every} (plait db retain --dry-run shows which)",
            err=True,
        )
        _show_retention_log()
    if replica_url is None:
        # docs/deploy.md: without it, a write sent to another server on the store for a
        # session this one runs is refused (409) instead of forwarded here.
        click.echo(
            f"other servers on this store cannot forward writes to this one: --host {host} "
            "says no address they reach it at (--advertise-url http://HOST:PORT does)",
            err=True,
        )
    if minted is None:
        click.echo(_sign_in_line(host, port, None), err=True)
    try:
        serve_app(
            app,
            host=host,
            port=port,
            log_level=log_level,
            header_timeout=header_timeout,
            idle_timeout=idle_timeout,
            max_connections=max_connections,
        )
    finally:
        client.close()


def _show_retention_log() -> None:
    """Say what each retention pass removed on stderr, in uvicorn's manner."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    log = logging.getLogger("plait.server.retention")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _period(text: str) -> float:
    """``--retain-every``: plain seconds, or text such as ``30m``.

    Raises:
        InvalidArgumentError: neither.
    """
    from plait.errors import InvalidArgumentError
    from plait.session.retention import parse_age

    try:
        seconds = float(text)
    except ValueError:
        return parse_age(text, "--retain-every").total_seconds()
    if not 1 <= seconds < float("inf"):
        raise InvalidArgumentError(f"--retain-every is at least 1 second, not {text!r}")
    return seconds


def _own_url(host: str, port: int) -> str | None:
    """Where peers on this machine or network reach this server, if its address says so."""
    if host in ("0.0.0.0", "::", ""):
        return None  # every address: which one peers can reach is --advertise-url's to say
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


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
