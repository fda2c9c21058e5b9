"""The plait command."""


def main() -> None:
    """Run the plait command."""
