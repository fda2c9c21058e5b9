"""llama.cpp's own HTTP server from the ``xllamacpp`` wheel, serving the embedded model.

Run as ``python -m tests.providers.llama_server MODEL PORT``: it prints ``ready`` once the
server listens on 127.0.0.1:PORT, then serves until killed.

SmolLM2's own chat template knows no tools: llama.cpp reports ``supports_tools: false`` for
it and leaves a request's tools out of the prompt. So the server runs with ``--jinja`` and
``smollm2_tools.jinja`` beside this file, a Hermes-style template (SmolLM2's, plus a
``<tools>`` preamble, ``<tool_call>`` turns and ``<tool_response>`` results), as a user of
``llama-server --jinja --chat-template-file`` would: llama.cpp then shows the model the
tools and parses its ``<tool_call>`` output into the API's ``tool_calls``. Without tools in
a request the template renders SmolLM2's own prompt.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

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
    params.use_jinja = True
    params.chat_template = (Path(__file__).parent / "smollm2_tools.jinja").read_text()
    server = xllamacpp.Server(params)
    print("ready", flush=True)
    while server is not None:  # the reference keeps it serving: it stops when collected
        time.sleep(3600)


if __name__ == "__main__":
    main()
