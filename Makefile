# reckon — build, test and run the embedded stack.
#
#   make dev    run the whole system on the embedded default (broker, Temporal dev server, workers)
#   make test   unit + integration tests (real kfake broker, real Temporal dev server)
#   make build  build ./bin/reckon

GO              ?= go
BIN             := $(CURDIR)/bin
# The Temporal CLI is pinned: v1.5.1 (server 1.29.1, UI 2.42.1). Newer tags
# carry replace directives and cannot be `go install`ed.
TEMPORAL_VERSION := v1.5.1
TEMPORAL        := $(BIN)/temporal
TEMPORAL_STAMP  := $(BIN)/.temporal-$(TEMPORAL_VERSION)
TEST_TIMEOUT    ?= 30m

.PHONY: all build test test-unit dev fuzz vet fmt clean temporal bench

all: build

build:
	$(GO) build -o $(BIN)/reckon ./workers/reckon

# The CLI build takes minutes cold; the stamp caches it across runs and
# rebuilds only when the pinned version changes.
temporal: $(TEMPORAL_STAMP)
$(TEMPORAL_STAMP):
	@mkdir -p $(BIN)
	@echo "installing temporal CLI $(TEMPORAL_VERSION) into $(BIN) (a few minutes the first time)"
	GOBIN=$(BIN) GOFLAGS=-mod=mod $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)
	@rm -f $(BIN)/.temporal-*
	@touch $@

vet:
	$(GO) vet ./...

test: build temporal vet
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) RECKON_TEST_REQUIRE_COMPOSE=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@echo "== end to end: stream + batch truth on the dev server (make e2e)"
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(GO) test ./workers -run '^TestTruthEndToEnd$$' -count=1 -timeout 10m -args -e2e
	@echo "== DuckDB interop (lake/interop, its own module, CGO)"
	cd lake/interop && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

test-unit:
	$(GO) test -count=1 -short ./...

dev: build temporal
	$(BIN)/reckon dev

# Benchmarks: see BENCHMARKS.md for the figures and how they compare.
BENCHTIME ?= 3x
bench: build
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -cpu 1 ./internal/event ./streaming/operator ./lake ./internal/generate
	$(GO) test -run '^$$' -bench StreamEndToEnd -benchtime 1x ./streaming
	cd lake/interop && RECKON_BENCH_ROWS=10000000 $(GO) test -run '^$$' -bench Hourly -benchtime 2x

# FUZZTIME per target, e.g. make fuzz FUZZTIME=2m
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./internal/event -run '^$$' -fuzz FuzzGate -fuzztime $(FUZZTIME)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) .reckon

# The batch-truth end-to-end test (issue 5, docs/adr/0008-batch-truth.md):
# real Temporal dev server, kfake, in-process stream and batch workers, live
# generator traffic with events beyond allowed lateness; ends with
# `e2e: N passed, M failed` and the time-to-truth of too-late events.
# E2E_ARGS=-record-truth re-records workflows/testdata/{recompute,reconcile,replay}*.json.
E2E_ARGS ?=
.PHONY: e2e
e2e: temporal
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(GO) test ./workers -run '^TestTruthEndToEnd$$' -count=1 -v -timeout 10m -args -e2e $(E2E_ARGS)

# The chaos conservation test (issue 8): the dev stack on loopback with a
# temporary data dir and lake, a finite paced payments run with a manifest,
# SIGKILLs (stream 3×, batch 2×, Temporal and the broker once) at random
# points, then reconcile and `reckon verify --truth`. Prints the kills, the
# ledger and `chaos: N passed, M failed`; under 10 minutes.
# CHAOS_ARGS e.g. -seed 42 -keep -count 1800 -rate 10.
CHAOS_ARGS ?=
.PHONY: chaos
chaos: build temporal
	$(GO) run ./internal/chaos -bin $(BIN)/reckon -temporal $(TEMPORAL) -config deploy/reckon.yaml $(CHAOS_ARGS)
