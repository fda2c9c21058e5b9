"""Nothing lost: SIGKILL a writer at random moments (issue 5, crash safety)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.durability.crash import run_trial, setup

TRIALS = 200


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_committed(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    path, sid = setup(tmp_path)
    committed_total = checked = 0
    for _ in range(TRIALS):
        trial = run_trial(tmp_path, path, sid, rng, max_delay=0.03, checked=checked)
        checked = trial.stored
        committed_total += trial.committed >= 0
    # The kills landed while work was being committed, not only before it began.
    assert committed_total > TRIALS // 4
