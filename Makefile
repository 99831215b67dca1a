# reckon — build, test and run the embedded stack.
#
#   make dev    run the whole system on the embedded default (broker, Temporal dev server, workers)
#   make test   unit + integration tests (real kfake broker, real Temporal dev server)
#   make build  build ./bin/reckon and ./bin/reckon-sql (the SQL endpoint: DuckDB, CGO)

GO              ?= go
BIN             := $(CURDIR)/bin
# The Temporal CLI is pinned: v1.5.1 (server 1.29.1, UI 2.42.1). Newer tags
# carry replace directives and cannot be `go install`ed.
TEMPORAL_VERSION := v1.5.1
TEMPORAL        := $(BIN)/temporal
TEMPORAL_STAMP  := $(BIN)/.temporal-$(TEMPORAL_VERSION)
# A real S3 server for the lake's S3 tests and `reckon dev` with dev.s3:
# SeaweedFS' weed, pinned to the module proxy's pseudo-version (weed 4.53;
# docs/adr/0035-real-s3-server.md). Its go.mod has a replace directive, so
# `go install mod@version` refuses it: the module is downloaded and built
# as the main module from its directory in the module cache.
WEED_MODULE     := github.com/seaweedfs/seaweedfs
WEED_VERSION    := v0.0.0-20261109003541-7506e5f91cd6
WEED            := $(BIN)/weed
WEED_STAMP      := $(BIN)/.weed-$(WEED_VERSION)
TEST_TIMEOUT    ?= 30m

.PHONY: all build test test-loaded tree-check test-unit dev fuzz vet fmt clean temporal weed bench

all: build

# reckon is CGO-free; reckon-sql links DuckDB (CGO, a C toolchain) with the
# duckdb_arrow tag: docs/adr/0017-sql-endpoint.md.
build:
	$(GO) build -o $(BIN)/reckon ./workers/reckon
	CGO_ENABLED=1 $(GO) build -tags duckdb_arrow -o $(BIN)/reckon-sql ./workers/reckon-sql

# The CLI build takes minutes cold; the stamp caches it across runs and
# rebuilds only when the pinned version changes.
temporal: $(TEMPORAL_STAMP)
$(TEMPORAL_STAMP):
	@mkdir -p $(BIN)
	@echo "installing temporal CLI $(TEMPORAL_VERSION) into $(BIN) (a few minutes the first time)"
	GOBIN=$(BIN) GOFLAGS=-mod=mod $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)
	@rm -f $(BIN)/.temporal-*
	@touch $@

# weed builds in about a minute warm, several cold (~500 modules); the
# stamp caches it like the Temporal CLI's.
weed: $(WEED_STAMP)
$(WEED_STAMP):
	@mkdir -p $(BIN)
	@echo "building SeaweedFS weed $(WEED_VERSION) into $(BIN) (minutes the first time)"
	dir=$$(cd / && GOFLAGS=-mod=mod $(GO) mod download -json $(WEED_MODULE)@$(WEED_VERSION) | \
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'); \
	test -n "$$dir" || { echo "weed: module $(WEED_MODULE)@$(WEED_VERSION) not downloaded"; exit 1; }; \
	cd "$$dir" && GOFLAGS="-mod=readonly -buildvcs=false" $(GO) build -o $(WEED) ./weed
	@rm -f $(BIN)/.weed-*
	@touch $@

vet:
	$(GO) vet ./...
	CGO_ENABLED=1 $(GO) vet -tags duckdb_arrow ./sqlserve/... ./workers/reckon-sql

# Every program is built into bin/ (git ignores it); no file over 1 MB is
# ever committed (a stray binary at the root was once).
tree-check:
	@big=$$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 1048576 {print $$2}'); \
	if [ -n "$$big" ]; then echo "tree-check: files over 1 MB in git: $$big"; exit 1; fi

# make test: vet first (it compiles every package once, so the steps after
# it do not compile the same dependencies side by side), then the programs
# and the test steps below side by side (make -j; -O prints each step's
# output whole when it ends). Most of a test step's time is waiting — on
# the dev server, kfake, event-time windows of seconds — so on two cores
# the steps overlap instead of queueing: one after the other they took
# 746 s on a fresh clone. The longest packages (at load 25-30: ./workers
# ~280 s, ./streaming ~170 s, ./lake ~120 s) run apart from the others, so
# they start at once instead of after them (go test starts packages in
# import-path order, two at a time on two cores).
TEST_ENV := RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) RECKON_TEST_WEED_BIN=$(WEED) RECKON_TEST_REQUIRE_S3=1 \
	RECKON_TEST_REQUIRE_COMPOSE=1 RECKON_TEST_REQUIRE_PROMTOOL=1
TEST_APART := workers streaming lake
TEST_STEPS := build test-go $(addprefix test-apart-,$(TEST_APART)) test-e2e test-sql test-interop
.PHONY: $(TEST_STEPS)
test: temporal weed tree-check vet
	@start=$$(date +%s); $(MAKE) --no-print-directory -j -O $(TEST_STEPS); rc=$$?; \
	echo "== make test: exit $$rc, wall $$(( $$(date +%s) - start ))s after vet"; exit $$rc

test-go:
	@echo "== every package but $(TEST_APART)"
	$(TEST_ENV) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) \
		$$($(GO) list ./... | grep -vxE 'reckon/($(subst $(eval) ,|,$(TEST_APART)))')

$(addprefix test-apart-,$(TEST_APART)): test-apart-%:
	@echo "== ./$*"
	$(TEST_ENV) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./$*

test-e2e:
	@echo "== end to end: batch truth (make e2e), windows final under steady traffic, 1,000 Z-report shifts"
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(GO) test ./workers \
		-run '^(TestTruthEndToEnd|TestFinalUnderSteadyTraffic|TestZReportGeneratorShifts)$$' -count=1 -timeout 25m \
		-args -e2e -zreport-shifts 1000

test-sql:
	@echo "== SQL endpoint: Flight SQL clients, views, lock-down (sqlserve, CGO, -tags duckdb_arrow)"
	RECKON_TEST_WEED_BIN=$(WEED) RECKON_TEST_REQUIRE_S3=1 CGO_ENABLED=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) \
		-tags duckdb_arrow ./sqlserve/...

test-interop:
	@echo "== DuckDB interop (lake/interop, its own module, CGO)"
	cd lake/interop && $(GO) test -tags duckdb_arrow -count=1 -timeout $(TEST_TIMEOUT) ./...

# make test with every CPU also kept busy by tools/cpuhog: the suite must
# pass on a loaded machine (docs/adr/0032-deterministic-test-barriers.md).
# The hog is killed whatever happens; the result and wall time are printed.
test-loaded:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/cpuhog ./tools/cpuhog
	@$(BIN)/cpuhog & hog=$$!; trap 'kill $$hog 2>/dev/null' EXIT INT TERM; \
	start=$$(date +%s); $(MAKE) test; rc=$$?; \
	echo "== make test-loaded: make test exit $$rc under cpuhog, wall $$(( $$(date +%s) - start ))s"; exit $$rc

test-unit:
	$(GO) test -count=1 -short ./...

dev: build temporal
	$(BIN)/reckon dev --set dev.demo=true

# Benchmarks (docs/requirements.md R-PERF): every benchmark in one run —
# stream hot path, stream end to end and latency, archive write, lake query
# and recompute a day vs DuckDB, DuckDB and `reckon lake query` as separate
# processes, raw files per hour under paced traffic, Z-report throughput,
# time to truth. The raw
# `go test -bench` output is kept in $(BENCH_RAW); tools/benchreport renders
# BENCHMARKS.md from it,
# each figure beside its reference, each goal checked (do not edit that
# file). About 10 minutes on a quiet 2-core machine, 15+ when others load
# it (the report states the load average). Per-core figures run with
# -cpu 1; fixed -benchtime Nx counts bound the time; -count $(BENCH_COUNT)
# gives a range where a run is cheap. A failing benchmark does not stop the
# suite: it shows in the report as "did not run", and the render step fails.
# A quick trial of the pipeline:
#   make bench BENCH_N=10000 BENCH_COUNT=1 BENCH_STREAM_COUNT=1 BENCH_ROWS=100000 BENCH_DAY_ROWS=100000 BENCH_SQL_ROWS=100000 BENCH_LAKEQ_ROWS=100000 BENCH_PACE_SPEED=30 ZREPORT_KEYS=50
BENCH_RAW      ?= .reckon/bench/raw.txt
BENCH_N        ?= 1000000
BENCH_COUNT    ?= 2
# The end-to-end stream benchmarks are short (seconds) and swing ±25% with
# this machine's state: more runs give a steadier median.
BENCH_STREAM_COUNT ?= 5
BENCH_ROWS     ?= 5000000
BENCH_DAY_ROWS ?= 2000000
# The SQL endpoint's benchmark materialises SELECT * FROM events in DuckDB
# (about 1 GB per 5 M rows) and runs each query twice per run, at the
# requirement's 10 M rows (several minutes; BENCH_SQL_ROWS=2000000 for a
# quicker run).
BENCH_SQL_ROWS ?= 10000000
# DuckDB and `reckon lake query` as separate processes on a compacted day.
BENCH_LAKEQ_ROWS ?= 10000000
# Raw files per hour under paced traffic (tools/compactpace): traffic
# seconds per wall second; 10 plays 30 traffic minutes in 3 wall minutes,
# 1 is real time (30 minutes: the step's timeout is 60m).
BENCH_PACE_SPEED ?= 10
ZREPORT_KEYS   ?= 2000
BENCH_TEST     := $(GO) test -run '^$$' -v -timeout 20m
# The calibration (tools/calibrate, docs/adr/0042-benchmark-protocol.md):
# a fixed workload measured between the steps, shown beside every goal.
BENCH_CALIBRATE = $(call bench_step,$(BENCH_TEST) -bench Calibrate -benchtime $(BENCH_CALIB_N)x -cpu 1 ./tools/calibrate)
BENCH_CALIB_N  ?= 200
# bench_step runs one benchmark command, appending a marker naming it and
# its output to $(BENCH_RAW) (by absolute path: a command may cd).
define bench_step
	@mkdir -p $(dir $(abspath $(BENCH_RAW)))
	@echo "reckon-bench: run $$(date -u +%FT%TZ) $(1)" | tee -a $(abspath $(BENCH_RAW))
	@$(1) 2>&1 | tee -a $(abspath $(BENCH_RAW))
endef
bench: build temporal
	@mkdir -p $(dir $(BENCH_RAW))
	@echo "reckon-bench: start $$(date -u +%FT%TZ) load $$(cut -d' ' -f1-3 /proc/loadavg)" | tee $(BENCH_RAW)
	$(BENCH_CALIBRATE)
	$(call bench_step,$(BENCH_TEST) -bench . -benchtime $(BENCH_N)x -cpu 1 -count $(BENCH_COUNT) ./internal/event)
	$(BENCH_CALIBRATE)
	$(call bench_step,$(BENCH_TEST) -bench 'OperatorHotPath|OperatorHopping|Dedup' -benchtime $(BENCH_N)x -cpu 1 -count $(BENCH_COUNT) ./streaming/operator)
	$(call bench_step,$(BENCH_TEST) -bench 'StateBytes|Snapshot' -benchtime 1x -cpu 1 ./streaming/operator)
	$(call bench_step,$(BENCH_TEST) -bench 'LookupAt' -benchtime 200000x -cpu 1 -count $(BENCH_COUNT) ./streaming/operator)
	$(call bench_step,$(BENCH_TEST) -bench 'LookupPublish' -benchtime 1x -cpu 1 ./streaming/operator)
	$(BENCH_CALIBRATE)
	$(call bench_step,$(BENCH_TEST) -bench 'StreamEndToEnd|StreamLatency|LookupHTTP|RefreshToLookup' -benchtime 1x -count $(BENCH_STREAM_COUNT) ./streaming)
	$(BENCH_CALIBRATE)
	$(call bench_step,$(BENCH_TEST) -bench . -benchtime 1x -cpu 1 -count $(BENCH_COUNT) ./lake)
	$(call bench_step,$(BENCH_TEST) -bench . -benchtime 200000x -cpu 1 ./verify/generate)
	$(BENCH_CALIBRATE)
	$(call bench_step,cd lake/interop && RECKON_BENCH_ROWS=$(BENCH_ROWS) RECKON_BENCH_DAY_ROWS=$(BENCH_DAY_ROWS) $(BENCH_TEST) -bench 'Hourly|RecomputeDay|FeatureTruthDay' -benchtime 1x -count $(BENCH_COUNT))
	$(call bench_step,cd lake/interop && RECKON_BENCH_ROWS=$(BENCH_LAKEQ_ROWS) RECKON_BENCH_BIN=$(BIN)/reckon $(BENCH_TEST) -bench LakeQueryProcess -benchtime 1x -count $(BENCH_COUNT))
	$(BENCH_CALIBRATE)
	$(call bench_step,RECKON_BENCH_PACE_SPEED=$(BENCH_PACE_SPEED) $(GO) test -run '^$$' -v -timeout 60m -bench CompactPace -benchtime 1x ./tools/compactpace)
	$(BENCH_CALIBRATE)
	$(call bench_step,RECKON_BENCH_ROWS=$(BENCH_SQL_ROWS) $(BENCH_TEST) -tags duckdb_arrow -bench 'FlightSQL' -benchtime 1x -cpu 2 -count $(BENCH_COUNT) ./sqlserve)
	$(BENCH_CALIBRATE)
	$(call bench_step,RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(BENCH_TEST) -bench ZReportThroughput -benchtime $(ZREPORT_KEYS)x ./workers)
	$(call bench_step,RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(BENCH_TEST) -bench TimeToTruth -benchtime 1x ./workers)
	$(BENCH_CALIBRATE)
	$(call bench_step,RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(BENCH_TEST) -bench TimeToFinal -benchtime 1x ./workers)
	$(BENCH_CALIBRATE)
	$(call bench_step,$(GO) run ./tools/benchinstr)
	@echo "reckon-bench: end $$(date -u +%FT%TZ) load $$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $(BENCH_RAW)
	$(GO) run ./tools/benchreport/cmd/benchreport -raw $(BENCH_RAW) -out BENCHMARKS.md \
		-go "$$($(GO) env GOVERSION)" -command "make bench$(if $(MAKEOVERRIDES), $(MAKEOVERRIDES))"

# Instructions per event/row of the hot paths under callgrind, ΔI/ΔN at
# two iteration counts (tools/benchinstr; load-independent: a change is the
# code's). Also a step of `make bench`.
.PHONY: bench-instr
bench-instr:
	$(GO) run ./tools/benchinstr

# Every fuzz target, as package:Target, found in the *_test.go files (so a
# new target is fuzzed without editing this list; lake/interop is its own
# module). `go test` fuzzes one target per run, so `make fuzz` runs them in
# turn for FUZZTIME each (e.g. make fuzz FUZZTIME=2m, or one target with
# FUZZ_TARGETS=./internal/event:FuzzGate) and names every target that failed
# at the end. Their seed corpora (f.Add and testdata/fuzz/) run in every
# `go test`. FUZZMINTIME bounds the minimizing of each new input (go's
# default, 60s, can eat a whole short run on large seeds such as configs).
FUZZTIME     ?= 30s
FUZZMINTIME  ?= 10s
FUZZ_TARGETS ?= $(shell grep -r --include='*_test.go' -o '^func Fuzz[A-Za-z0-9_]*' --exclude-dir=interop --exclude-dir=testdata --exclude-dir=.reckon . | sed 's|/[^/]*_test\.go:func |:|' | sort)
fuzz:
	@failed=""; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) .reckon

# The batch-truth end-to-end test (docs/requirements.md R-TRUTH-11,
# docs/adr/0008-batch-truth.md):
# real Temporal dev server, kfake, in-process stream and batch workers, live
# generator traffic with events beyond allowed lateness; ends with
# `e2e: N passed, M failed` and the time-to-truth of too-late events.
# E2E_ARGS=-record-truth re-records workflows/testdata/{recompute,reconcile,replay}*.json.
E2E_ARGS ?=
.PHONY: e2e
e2e: temporal
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(GO) test ./workers -run '^TestTruthEndToEnd$$' -count=1 -v -timeout 10m -args -e2e $(E2E_ARGS)

# The operator walkthrough on real processes (workers/walkthrough_test.go):
# `reckon dev` → traffic → kill -9 stream and batch → Ctrl-C → `reckon dev`
# again → reconcile today (it must complete while the demo generators run
# and say up to where it checked) and yesterday → replay dry run → Ctrl-C →
# follow it again; asserts no event_id reused with another payload, every
# command speaks within 5 s and a waiting one says why within 5 s (of its
# horizon check's answer, for reconcile and replay), no ERROR
# on a clean stop, the batch metrics exist and move; logs the stream's
# restart wait with dynamic and static membership side by side.
.PHONY: walkthrough
walkthrough: temporal
	RECKON_TEST_TEMPORAL_BIN=$(TEMPORAL) $(GO) test ./workers -run '^TestOperatorWalkthrough$$' -count=1 -v -timeout 20m -args -walkthrough

# The chaos conservation test (tools/chaos): the dev stack on loopback with a
# temporary data dir and lake, a finite paced payments run with a manifest,
# SIGKILLs (stream 3×, batch 2×, Temporal and the broker once) at random
# points, then, with clean background traffic flowing on keys of its own,
# reconcile (it must complete under traffic and check every window of the
# run) and `reckon verify --truth` over both manifests. Prints the kills, the
# ledger and `chaos: N passed, M failed`; under 12 minutes.
# CHAOS_ARGS e.g. -seed 42 -keep -count 1800 -rate 10; -lake-faults 0.05
# also makes 5% of the stack's lake storage calls fail, stall or lose their
# answer (docs/adr/0022-lake-fault-injection.md).
CHAOS_ARGS ?=
.PHONY: chaos chaos-s3
chaos: build temporal
	$(GO) build -o $(BIN)/chaos ./tools/chaos
	$(BIN)/chaos -bin $(BIN)/reckon -temporal $(TEMPORAL) -config deploy/reckon.yaml $(CHAOS_ARGS)

# make chaos with the lake on a real S3 server (SeaweedFS under `reckon dev
# --set dev.s3=true`), which is SIGKILLed once too (ADR 0035).
chaos-s3: weed
	$(MAKE) chaos CHAOS_ARGS="-s3 -weed $(WEED) $(CHAOS_ARGS)"

# `make dev` with the lake on a real S3 server: SeaweedFS in .reckon/s3,
# S3 on 127.0.0.1:8333, the lake s3://reckon-lake/lake (ADR 0035). Other
# commands find it with --set dev.s3=true.
.PHONY: dev-s3
dev-s3: build temporal weed
	$(BIN)/reckon dev --set dev.s3=true

# The long-outage tests (tools/outages): three dev stacks on loopback, each
# with paced payments traffic throughout, hold one component down — the
# Temporal dev server 10m, the broker 2m, the stream worker 10m (SIGKILL,
# then `reckon dev`'s hold file keeps it down) — then check that the stream
# kept publishing / caught up (with the broker down the stream worker's
# process must never exit), the archive and the schedule's missed
# reconciliation caught up, nothing was lost, late or published twice
# because of the outage (reconcile, `reckon verify --truth --lake`). Prints
# each recovery time, a summary table and `outages: N passed, M failed`;
# about 20 minutes (the scenarios run at once), not part of make test.
# OUTAGES_ARGS e.g. -temporal-down 1m -broker-down 1m -stream-down 1m (a
# quick trial), -sequential, -keep; a 0 duration skips that scenario.
OUTAGES_ARGS ?=
.PHONY: outages
outages: build temporal
	$(GO) build -o $(BIN)/outages ./tools/outages
	$(BIN)/outages -bin $(BIN)/reckon -temporal $(TEMPORAL) -config deploy/reckon.yaml $(OUTAGES_ARGS)
