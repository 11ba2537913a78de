# Each target creates .venv (if missing) and installs all three distributions
# editable, so a fresh clone needs nothing but Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PROJECTS := trustgraph-base/pyproject.toml trustgraph-flow/pyproject.toml trustgraph-cli/pyproject.toml

.PHONY: install run test bench clean

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

bench: $(STAMP)
	$(BIN)/python -m bench.streaming
	$(BIN)/python -m bench.providers
	$(BIN)/python -m bench.embeddings
	$(BIN)/python -m bench.stores
	$(BIN)/python -m bench.ingestion
	$(BIN)/python -m bench.rag
	$(BIN)/python -m bench.lazyrag

clean:
	rm -rf $(VENV) tg-data
