# memsvc: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTOS := $(wildcard proto/memsvc/v1/*.proto)
ARGS ?=

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

install: $(STAMP) ## create .venv and install memsvc with its dev tools (the `memsvc` script)

proto: $(STAMP) ## regenerate the Python stubs from proto/ and lint the contract
	cd proto && ../$(BIN)/buf lint
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTOS)

serve: install ## start the server on its embedded defaults (ARGS="--listen unix:///tmp/memsvc.sock" to add flags)
	$(BIN)/memsvc serve $(ARGS)

test: install ## run every test against real servers
	$(BIN)/python -m pytest -q $(ARGS)

lint: install ## lint the contract and the code
	cd proto && ../$(BIN)/buf lint
	$(BIN)/ruff check memsvc tests benchmarks

bench: install ## run the benchmarks; results go to benchmarks/results/
	$(BIN)/python benchmarks/latency.py $(ARGS)

.PHONY: help install proto serve test lint bench
