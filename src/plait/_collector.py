"""The cyclic garbage collector paused for a bulk read: a private helper of the readers.

A full load makes tens of thousands of objects that all live on (rows, then records,
then messages): collections during it traverse them and free nothing (D168). The record
decoders, the stores' reads and the history views pause it around their loops.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, and leave it as it was found (nesting is free)."""
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
