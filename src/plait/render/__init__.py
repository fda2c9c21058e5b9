"""Rendering a session for people: one HTML page or one Markdown document.

Pure: no I/O. :class:`ExportPage` holds what a page shows (the records in
view, the next request, the lineage); :func:`render_html` and
:func:`render_markdown` turn it into text; :meth:`plait.Session.export` (either
format) reads the store and writes the file.
"""

from __future__ import annotations

from plait.render.graph import LineageBox, PlacedBox, collect_lineage, layout_lineage
from plait.render.html import CONTENT_SECURITY_POLICY, lineage_svg, render_html
from plait.render.markdown import code_block, code_span, render_markdown
from plait.render.page import ExportPage

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "ExportPage",
    "LineageBox",
    "PlacedBox",
    "code_block",
    "code_span",
    "collect_lineage",
    "layout_lineage",
    "lineage_svg",
    "render_html",
    "render_markdown",
]
