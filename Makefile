# garag: `make run` (set up, build indexes, run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.garag-installed
ARGS ?=

.PHONY: setup run run-verifier test lint bench bench-scale clean-cache help

help:
	@echo "make run    - set up the virtualenv, build the indexes, run the main job on the embedded data"
	@echo "make test   - set up the virtualenv and run the tests"
	@echo "make run-verifier - train garag's NLI verifier (first use) and evaluate baseline RAG (work in progress)"
	@echo "make bench  - retrieval quality, retrieval and verifier speed (writes benchmarks/results/)"
	@echo "make bench-scale - BM25 and FAISS over 1M generated sentences"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: pip then takes the local CPU build, never a CUDA one.
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/garag index --dataset fever $(ARGS)
	$(BIN)/garag evaluate-retrieval --dataset fever $(ARGS)
	$(BIN)/garag index --dataset hover $(ARGS)
	$(BIN)/garag evaluate-retrieval --dataset hover $(ARGS)
	@echo "results: results/retrieval/fever/ and results/retrieval/hover/ (table.md, table.csv, metrics.json, hits.jsonl)"

# Baseline RAG with garag's own NLI verifier (trains it on first use: ~45 min on 2 cores).
# Work in progress: see README "Status".
run-verifier: setup
	$(BIN)/garag train-verifier $(ARGS)
	$(BIN)/garag evaluate --dataset fever $(ARGS)
	$(BIN)/garag evaluate --dataset fever --oracle $(ARGS)
	$(BIN)/garag evaluate --dataset hover $(ARGS)

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python benchmarks/retrieval_quality.py
	$(BIN)/python benchmarks/retrieval_speed.py
	$(BIN)/python benchmarks/verifier_speed.py

bench-scale: setup
	$(BIN)/python benchmarks/scale.py

clean-cache:
	rm -rf cache
