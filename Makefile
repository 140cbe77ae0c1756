# The two commands of the README: `make run` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch; an unpinned torch pulls several GB of CUDA packages. Override to taste.
TORCH_SPEC ?= torch==2.13.0
INSTALLED := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: run test test-fast venv index serve browser bench lint clean

run: venv index serve

test: venv browser
	$(BIN)/python -m pytest -q

test-fast: venv
	$(BIN)/python -m pytest -q -m "not spark and not browser and not slow"

venv: $(INSTALLED)

$(INSTALLED): pyproject.toml .ci/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -c .ci/constraints.txt -e ".[test]"
	touch $@

index: venv
	$(BIN)/kafka-rag ingest seeds --index index

serve: venv
	$(BIN)/kafka-rag serve --index index

# Browser tests drive Debian's Chromium (Playwright's own browser download cannot work offline).
browser:
	@test -x $(CHROMIUM) || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); } || \
		{ echo "$(CHROMIUM) is missing and could not be installed (apt-get install chromium, as root)"; [ "$$CI" != true ]; }

bench: venv index
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/scale.py --chunks 100000 --half serve
	$(BIN)/python benchmarks/ask.py
	$(BIN)/python benchmarks/embedding.py --index index
	$(BIN)/python benchmarks/peer_baseline.py
	$(BIN)/python benchmarks/ui_load.py

lint: venv
	$(BIN)/ruff check rag ui evals tests benchmarks
	$(BIN)/ruff format --check rag ui evals tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf index/CURRENT index/versions index/.lock index/holds evals/runs
