"""`make soak`: thousands of SIGKILL trials (the test suite runs a few hundred).

Usage: python -m tests.durability.soak [--trials N] [--max-delay SECONDS]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from tests.durability.crash import run_trial, setup


def main() -> None:
    """Run the soak and print what it saw; exit non-zero on the first lost record."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--max-delay", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        checked = hits = 0
        for i in range(args.trials):
            if i % 100 == 0:  # a fresh store now and then keeps each check short
                ws = Path(tmp) / f"s{i}"
                ws.mkdir()
                path, sid = setup(ws)
                checked = 0
            trial = run_trial(ws, path, sid, rng, args.max_delay, checked)
            checked = trial.stored
            hits += trial.committed >= 0
    elapsed = time.perf_counter() - started
    print(
        f"soak: {args.trials} SIGKILL trials (seed {args.seed}), {hits} killed mid-write, "
        f"0 committed records lost, {elapsed:.1f} s"
    )


if __name__ == "__main__":
    main()
