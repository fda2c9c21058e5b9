"""MkDocs hooks for the API reference.

The docstrings name other objects with Sphinx roles (:class:`Session`, :meth:`~plait.x.y`),
which Python's own tools read; mkdocstrings renders a role's text as-is. The reference shows
each as code, and a leading ``~`` keeps only the last part of the dotted name, as Sphinx does.
"""

from __future__ import annotations

import re
from typing import Any

_ROLES = "class|meth|func|attr|mod|exc|data|obj|const"
_ROLE = re.compile(rf":(?:py:)?(?:{_ROLES}):<code>(~?)([^<]*)</code>")


def _shown(match: re.Match[str]) -> str:
    name = match.group(2)
    if match.group(1):
        name = name.rsplit(".", 1)[-1]
    return f"<code>{name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    """Show each Sphinx role of a rendered page as code."""
    return _ROLE.sub(_shown, html)
