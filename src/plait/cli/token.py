"""``plait token ...``: durable bearer tokens for ``plait serve``, made and revoked offline.

The store keeps only a one-way hash of each token (D60); ``create`` prints the raw token
once, and nothing can show it again. ``expire`` revokes one at once; ``purge`` deletes the
rows of tokens that expired.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from typing import Final

import click

from plait.auth import DurableSessions
from plait.cli._common import CONTEXT_SETTINGS, Settings, echo_json, open_client, pass_settings

__all__ = ["token_group"]

_DURATION: Final = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_TTL: Final = 100 * 366 * 86400


def _ttl(value: str) -> timedelta:
    """``90`` (seconds), ``45m``, ``12h``, ``30d``, ``2w`` -> a positive timedelta."""
    found = _DURATION.match(value)
    if found is None or int(found.group(1)) == 0:
        raise click.BadParameter(f"{value!r} is not a duration such as 3600, 45m, 12h, 30d, 2w")
    seconds = int(found.group(1)) * _UNIT[found.group(2)]
    if seconds > _MAX_TTL:
        raise click.BadParameter(f"{value!r} is longer than the longest lifetime, 100 years")
    return timedelta(seconds=seconds)


@click.group("token", context_settings=CONTEXT_SETTINGS)
def token_group() -> None:
    """Durable bearer tokens for plait serve (only their hashes are stored)."""


@token_group.command("create", context_settings=CONTEXT_SETTINGS)
@click.argument("principal")
@click.option("--ttl", default="30d", show_default=True, help="Lifetime: 3600, 45m, 12h, 30d, 2w.")
@click.option(
    "--scope", "scopes", multiple=True, metavar="SCOPE", help="A scope granted (repeat for more)."
)
@click.option("--agent", is_flag=True, help="The principal is an agent (its forks push its actor).")
@click.option("--json", "as_json", is_flag=True, help="Print the token and its record as JSON.")
@pass_settings
def create_command(
    settings: Settings,
    principal: str,
    ttl: str,
    scopes: tuple[str, ...],
    agent: bool,
    as_json: bool,
) -> None:
    """Mint a token for PRINCIPAL and print it: the only time it is shown."""
    lifetime = _ttl(ttl)
    client = open_client(settings, create=True)
    made = DurableSessions(client.store).create(
        principal, ttl=lifetime, scopes=scopes, attributes={"agent": True} if agent else None
    )
    if as_json:
        echo_json(made.to_dict(include_id=True))
        return
    click.echo(made.id)
    click.echo(
        f"principal {made.principal}, expires {made.expires_at.isoformat()}, "
        f"scopes {' '.join(made.scopes) or '(none)'}; handle {made.handle[:16]}",
        err=True,
    )


@token_group.command("expire", context_settings=CONTEXT_SETTINGS)
@click.argument("token")
@pass_settings
def expire_command(settings: Settings, token: str) -> None:
    """Revoke TOKEN now (exit 1 if it was unknown or already expired).

    TOKEN ``-`` reads it from standard input, out of the process list other users can read.
    """
    if token == "-":
        token = sys.stdin.read().strip()
    client = open_client(settings)
    if not DurableSessions(client.store).expire(token):
        raise click.ClickException("no live token like that: unknown or already expired")
    click.echo("expired")


@token_group.command("purge", context_settings=CONTEXT_SETTINGS)
@pass_settings
def purge_command(settings: Settings) -> None:
    """Delete the stored hashes of tokens that have expired."""
    client = open_client(settings)
    click.echo(f"purged {DurableSessions(client.store).purge()} expired token(s)")
