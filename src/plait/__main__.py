"""``python -m plait``: the ``plait`` command, for when it is not on the PATH."""

from plait.cli import main

if __name__ == "__main__":
    main()
