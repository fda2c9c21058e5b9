"""llama.cpp's own HTTP server from the ``xllamacpp`` wheel, serving the embedded model.

Run as ``python -m tests.providers.llama_server MODEL PORT``: it prints ``ready`` once the
server listens on 127.0.0.1:PORT, then serves until killed.
"""

from __future__ import annotations

import sys
import time

import xllamacpp


def main() -> None:
    params = xllamacpp.CommonParams()
    params.model.path = sys.argv[1]
    params.n_ctx = 2048
    params.n_parallel = 1
    params.cpuparams.n_threads = 1  # the suite runs beside it on two cores
    params.cpuparams_batch.n_threads = 1
    params.warmup = False
    params.verbosity = -1
    params.port = int(sys.argv[2])
    params.hostnames = ["127.0.0.1"]
    server = xllamacpp.Server(params)
    print("ready", flush=True)
    while server is not None:  # the reference keeps it serving: it stops when collected
        time.sleep(3600)


if __name__ == "__main__":
    main()
