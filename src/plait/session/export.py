"""Exporting a session as one page: what the page shows, read from the store, then rendered.

The page itself is the pure :mod:`plait.render` (HTML or Markdown from records,
the history view and the lineage rows); this part only reads and writes the file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from plait._files import export_target, write_atomically
from plait._time import from_micros
from plait.errors import InvalidArgumentError
from plait.render import ExportPage, render_html, render_markdown
from plait.session.reading import lineage
from plait.views import history, system_prompt

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["write_export"]


def write_export(
    head: Head,
    path: str | os.PathLike[str] | None,
    kind: Literal["html", "md"],
    *,
    follow_symlinks: bool = False,
) -> str:
    """Read what the page shows, render it, and write it atomically; return the path."""
    if path is not None and not isinstance(path, str | os.PathLike):
        raise InvalidArgumentError(f"path must be a str or a path, not {type(path).__name__}")
    if head.row is None:
        raise InvalidArgumentError(f"session {head.id}: nothing stored yet, nothing to export")
    row = head.fresh()
    store = head.store
    records = store.read(row, row.layout.view_start, row.layout.end_seq)
    if not records:
        raise InvalidArgumentError(f"session {head.id}: no records in view, nothing to export")

    page = ExportPage(
        session_id=row.id,
        title=row.title,
        workspace=row.workspace,
        operator=row.lineage_operator,
        parent_ids=row.parent_ids,
        status=row.status,
        created_at=from_micros(row.created_at_us),
        updated_at=from_micros(row.updated_at_us),
        records=records,
        system_prompt=system_prompt(records),
        request=history(records),
        lineage=lineage(head, row),
    )
    text = render_html(page) if kind == "html" else render_markdown(page)
    target = export_target(path, row.workspace, row.id, kind, follow_symlinks=follow_symlinks)
    return write_atomically(target, text)
