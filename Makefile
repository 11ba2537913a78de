# Each target creates .venv (if missing) and installs all three distributions
# editable, so a fresh clone needs nothing but Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PROJECTS := trustgraph-base/pyproject.toml trustgraph-flow/pyproject.toml trustgraph-cli/pyproject.toml

.PHONY: install run test fuzz bench clean

install: $(STAMP)

$(STAMP): $(PROJECTS) tests/requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python \
		-e ./trustgraph-base -e ./trustgraph-flow -e ./trustgraph-cli \
		-r tests/requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/tg-start

test: $(STAMP)
	$(BIN)/python -m pytest tests

# The gateway fuzz tests with many more cases than `make test` runs: seven fuzz
# tests x TG_FUZZ_EXAMPLES (10,500 cases; the seed is fixed, so a failure repeats).
FUZZ_EXAMPLES ?= 1500
fuzz: $(STAMP)
	TG_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/integration/test_gateway_fuzz.py \
		--timeout 7200 --hypothesis-show-statistics

bench: $(STAMP)
	$(BIN)/python -m bench.streaming
	$(BIN)/python -m bench.providers
	$(BIN)/python -m bench.embeddings
	$(BIN)/python -m bench.stores
	$(BIN)/python -m bench.ingestion
	$(BIN)/python -m bench.rag
	$(BIN)/python -m bench.agent

clean:
	rm -rf $(VENV) tg-data
