# Felix build targets. Every target works on a fresh clone with only Go installed.
GO        ?= go
PKGS      ?= ./...
BIN       := bin
FUZZTIME  ?= 10s
STATICCHECK_VERSION := v0.8.2

.PHONY: build run test test-syscall fuzz fuzz-ci bench lint e2e soak bench-compare clean chaos-ci

## build: compile every binary into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## run: start a single-node broker on its embedded default (./felix-data, QUIC :5000, HTTP :8080)
run:
	$(GO) run ./cmd/felix-broker

## test: the whole test suite under the race detector (what .ci/run runs)
test:
	$(GO) test -race -count=1 -timeout 45m $(PKGS)

## test-syscall: storage and engine tests again on the plain-syscall I/O backend
test-syscall:
	FELIX_IO_BACKEND=syscall $(GO) test -race -count=1 ./ring/... ./seglog/... ./core/...

## fuzz: run every fuzz target briefly (FUZZTIME each, default 10s); fails when none is found.
## The fuzzing runs on FUZZ_TOOLCHAIN (go1.27.3, fetched by the go command from the module proxy on first
## use, about 76 MB): Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded"
## at the -fuzztime boundary on a loaded machine, no input at fault (golang/go#75804, fixed in 1.27). The
## module itself stays on Go 1.26; only these runs use the newer toolchain.
FUZZ_TOOLCHAIN ?= go1.27.3
fuzz:
	@n=0; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; GOTOOLCHAIN=$(FUZZ_TOOLCHAIN) $(GO) test $$pkg -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) || exit 1; \
	    n=$$((n+1)); \
	  done; \
	done; \
	if [ $$n -eq 0 ]; then echo "fuzz: no fuzz target found" >&2; exit 1; fi; \
	echo "fuzz: $$n targets, $(FUZZTIME) each"

## fuzz-ci: every fuzz target for 3s each (what .ci/run runs)
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=3s

## bench: every in-process benchmark once, with allocations
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=1s -count=1 $(PKGS)

## conformance: the client conformance suite (conformance/, issue 25) writing its results document, then the
## verify step, which fails when a required scenario of conformance/scenarios.json has no passing result
CONFORMANCE_RESULTS ?= $(CURDIR)/$(BIN)/conformance-results.json
.PHONY: conformance
conformance:
	@mkdir -p $(dir $(CONFORMANCE_RESULTS))
	$(GO) test -race -count=1 -timeout 10m ./conformance -args -results=$(CONFORMANCE_RESULTS)
	$(GO) test -count=1 -v ./conformance -args -verify=$(CONFORMANCE_RESULTS)

## lint: gofmt, go vet and staticcheck (pinned through the module proxy)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

clean:
	rm -rf $(BIN) .bench

## e2e: the crash corpus test at CI size (4000 sampled files, >= 20 SIGKILLs per phase; docs/soak.md)
E2E_TIMEOUT ?= 10m
e2e:
	$(GO) test -count=1 -timeout $(E2E_TIMEOUT) -run 'TestCrashCorpus' -v ./e2e/

## chaos-ci: the single-node-kill scenario at CI size: 20 SIGKILLs while operations are in flight, 2000
## operations, every checker on the history (docs/cluster-testing.md, "Scenarios"); CHAOS_FLAGS="--seed N" replays
CHAOS_FLAGS ?=
chaos-ci:
	$(GO) run ./cmd/felix-chaos run --scenario single-node-kill --kills 20 --ops 2000 $(CHAOS_FLAGS)

## soak: the same for longer (full corpus, SOAK_KILLS kills per phase); writes its tables to docs/soak.md
SOAK_KILLS   ?= 300
SOAK_TIMEOUT ?= 150m
soak:
	FELIX_E2E_FILES=0 FELIX_E2E_KILLS=$(SOAK_KILLS) FELIX_E2E_TIMEOUT=$(SOAK_TIMEOUT) \
	FELIX_E2E_REPORT=$(CURDIR)/docs/soak.md FELIX_E2E_SECTION=soak \
	$(GO) test -count=1 -timeout 180m -run 'TestCrashCorpus' -v ./e2e/

## soak-controlplane: the control plane's leader-kill loop for longer (SOAK_CP_KILLS leader SIGKILLs) and the Apply
## latency test; FELIX_CP_SEED=N replays a run, FELIX_CP_KEEP=DIR keeps its history and logs (docs/bench/controlplane.md)
SOAK_CP_KILLS ?= 100
.PHONY: soak-controlplane
soak-controlplane:
	FELIX_CP_KILLS=$(SOAK_CP_KILLS) $(GO) test -count=1 -timeout 60m -v ./e2e/controlplane/

## upgrade-e2e: the upgrade test across builds (e2e/upgrade, docs/upgrades.md): the previous release built from
## a git worktree against the current build on the five compatibility surfaces (what .ci/run runs)
.PHONY: upgrade-e2e
upgrade-e2e:
	FELIX_UPGRADE_E2E=1 $(GO) test -race -count=1 -timeout 15m ./e2e/upgrade/

## soak-failover: the control plane's failover of a SIGKILLed shard leader for longer (SOAK_FAILOVER_KILLS kills,
## idempotent and plain producers; docs/bench/failover.md)
SOAK_FAILOVER_KILLS ?= 20
.PHONY: soak-failover
soak-failover:
	FELIX_FAILOVER_E2E=1 FELIX_FAILOVER_KILLS=$(SOAK_FAILOVER_KILLS) $(GO) test -count=1 -timeout 30m -v ./e2e/failover/

## soak-cluster: the cluster crash run on the whole corpus (issue 21 item 2; docs/soak.md "Cluster"): every file of
## GOROOT/src and /usr/share/doc through three brokers onto an RF3 Quorum stream and an RF3 cache, SOAK_CLUSTER_KILLS
## shard-leader SIGKILLs and SOAK_CLUSTER_CP_KILLS control-plane leader SIGKILLs per phase
SOAK_CLUSTER_KILLS    ?= 20
SOAK_CLUSTER_CP_KILLS ?= 3
.PHONY: soak-cluster
soak-cluster:
	FELIX_CLUSTER_CRASH_FILES=0 FELIX_CLUSTER_CRASH_KILLS=$(SOAK_CLUSTER_KILLS) FELIX_CLUSTER_CRASH_CP_KILLS=$(SOAK_CLUSTER_CP_KILLS) \
	  $(GO) test -count=1 -timeout 60m -v -run TestClusterCrashCorpus ./e2e/clustercrash/

## bench-compare: Felix beside NATS JetStream, Redis and the QUIC ceilings on this machine (the harness
## builds the peers from bench/peers and the ceilings from bench/ceilings, and installs redis-server
## itself when root); the ceiling-bound shapes run in 3 rounds, each followed by its ceiling; writes
## docs/bench/harness.md, its charts under docs/bench/img/ and JSON lines in docs/bench/harness.jsonl
## (docs/benchmarks-harness.md)
BENCH_COMPARE_FLAGS ?= --duration 5s --warmup 1s --rounds 3
bench-compare:
	-@sysctl -w net.core.rmem_max=8388608 net.core.wmem_max=8388608 >/dev/null 2>&1 || true
	FELIX_BENCH_COMMAND="make bench-compare" $(GO) run ./cmd/felix-bench compare $(BENCH_COMPARE_FLAGS) \
	  --out docs/bench/harness.md --img docs/bench/img --json docs/bench/harness.jsonl --note "$(BENCH_NOTE)"
