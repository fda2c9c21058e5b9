"""``python -m plait.cli``: the same as the ``plait`` command."""

from plait.cli import main

main()
