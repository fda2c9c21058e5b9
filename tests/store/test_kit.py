"""The conformance kit as a third-party backend meets it: imported alone, run by pytest."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plait.testing import (
    HeadConformance,
    SessionIdConformance,
    SessionVerbConformance,
    TranscriptConformance,
)

# A backend that offers only the transcript: every other protocol's tests must skip.
NARROW = textwrap.dedent(
    '''
    from plait.store import MemoryStore
    from plait.testing import StoreConformance, StoreFactory

    TRANSCRIPT = (
        "location", "get", "create", "append", "write", "read", "probe", "recent",
        "children", "delete", "stamp", "scratchpad_history", "integrity_check", "close",
        "move_head", "erase",
    )


    class NarrowStore:
        """Only the TranscriptStore protocol, kept in a MemoryStore."""

        def __init__(self, target: str) -> None:
            inner = MemoryStore()
            for name in TRANSCRIPT[1:]:
                setattr(self, name, getattr(inner, name))
            self.location = inner.location


    class NarrowFactory(StoreFactory):
        opener = "test_narrow:NarrowStore"
        shared = False

        def new_target(self, tmp_path):
            return ":memory:"


    class TestNarrow(StoreConformance):
        factory = NarrowFactory()
    '''
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_importing_plait_does_not_import_the_kit() -> None:
    out = _run("import sys, plait; print('plait.testing' in sys.modules)")
    assert out.returncode == 0 and out.stdout.strip() == "False"


def test_the_kit_without_pytest_names_its_install_command() -> None:
    out = _run("import sys; sys.modules['pytest'] = None; import plait.testing")
    assert out.returncode != 0
    assert "MissingDependencyError" in out.stderr
    assert "pip install 'plait[testing]'" in out.stderr


@pytest.mark.slow
def test_a_transcript_only_backend_passes_its_part_and_skips_the_rest(tmp_path: Path) -> None:
    (tmp_path / "test_narrow.py").write_text(NARROW)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "-p", "no:xdist", "test_narrow.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    transcript = [
        n
        for cls in (
            TranscriptConformance, HeadConformance, SessionIdConformance, SessionVerbConformance
        )
        for n, _ in inspect.getmembers(cls)
        if n.startswith("test_")
    ]
    # Every transcript test passes but the one that opens the target twice (private store)
    # and the view read's (the narrow store offers none: its reads serve); the session
    # verbs pass too, through the parts plait serves for a store without them.
    passed = len(transcript) - 2
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{passed} passed, "), summary
    for what in ("token tallies (TallyStore, the part 'tallies')",
                 "durable bearer sessions (BearerStore, the part 'bearer_sessions')",
                 "live clients (LiveClientStore, the part 'live_clients')",
                 "writer locks (WriterLocks, the part 'writer_locks')",
                 "object space (ObjectStore, the part 'objects')"):
        assert f"NarrowStore offers no {what}" in out.stdout
    assert "the store offers no view read" in out.stdout
