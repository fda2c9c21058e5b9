r"""Stored text made safe for a terminal: no control sequence reaches it raw.

A transcript holds what models, tools and imported files wrote, and any of it
may carry terminal control sequences: a CSI that recolours or clears the
screen, an OSC that sets the window title, writes the clipboard or hides a
link, a carriage return that overwrites the line before it, a bidirectional
override that shows text in another order than it is stored. Printed raw, such
text could make ``plait sessions show`` lie about what a session holds.

:func:`safe` shows every such character as a visible escape (``\x1b``,
``\u202e``), so the text reads as written and nothing is interpreted.
:class:`SafeConsole` applies it to every segment of text a rich console
prints (rich's own styles and cursor moves are kept: they are not text), so a
command that prints through :func:`plait.cli._common.console` is safe even
where it forgot to call :func:`safe` itself; commands that ``click.echo``
stored text call :func:`safe`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

__all__ = ["SafeConsole", "safe", "safe_text"]

# C0 controls except newline and tab, DEL and the C1 controls (U+0080..U+009F, which some
# terminals read as 8-bit CSI / OSC), and the bidirectional embeddings, overrides and isolates.
_UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    r"""``text`` with every control character shown as a visible escape.

    Newlines and tabs are kept; a ``\r\n`` line end becomes ``\n``. The result
    holds no character a terminal interprets, and ``safe(safe(t)) == safe(t)``.
    """
    if text.isprintable():  # the common case: nothing to look for
        return text
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


def safe_text(text: str, style: str = "") -> Text:
    """A rich :class:`~rich.text.Text` of ``safe(text)`` (never read as markup)."""
    return Text(safe(text), style=style)


class SafeConsole(Console):
    """A rich console that passes every printed text segment through :func:`safe`."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        """Render as rich does, with each text segment made safe (control segments kept)."""
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                yield Segment(safe(segment.text), segment.style, segment.control)
