# harness-edge build. `make help` lists the targets. Every variable below can be overridden:
#   make build GO=go1.26 CARGO=~/.cargo/bin/cargo TAGS=foo
SHELL := /bin/bash
# A pipeline fails when any command in it fails (the Go tests pipe through a formatter).
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := help

# rustup installs cargo under ~/.cargo/bin, which a non-login shell (CI) may not have on PATH.
export PATH := $(HOME)/.cargo/bin:/usr/local/go/bin:$(PATH)

GO       ?= go
CARGO    ?= cargo
TAGS     ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BENCHTIME ?= 1s
# Where the suite puts its scratch stores: on the disk whose fsync it should measure.
BENCH_DIR ?= $(ROOT)/.bench

ROOT        := $(abspath .)
HOST_ARCH   := $(shell $(GO) env GOARCH)
RUST_TARGET_amd64 := x86_64-unknown-linux-gnu
RUST_TARGET_arm64 := aarch64-unknown-linux-gnu
ENGINE_SRC  := $(wildcard eternal/src/*.rs) eternal/Cargo.toml
ENGINE_LIB  := eternal/lib/linux_$(HOST_ARCH)
ENGINE_A    := $(ENGINE_LIB)/libeternal.a
ENGINE_SO   := $(ROOT)/$(ENGINE_LIB)/libeternal.so
ARM_LIB     := eternal/lib/linux_arm64
ARM_A       := $(ARM_LIB)/libeternal.a

# comma is defined before its first use: := expands at once, and an undefined comma would glue
# TAGS to the last tag (pebblegozstdTAG), so that `make build TAGS=TAG` lost both.
comma := ,
# A fully static binary: netgo/osusergo avoid glibc's NSS, pebblegozstd keeps Pebble on pure-Go zstd.
STATIC_TAGS := netgo,osusergo,pebblegozstd$(if $(TAGS),$(comma)$(TAGS))
# The device binaries leave the fleet's embedded nats-server out (nohub: 9.6 MB, which would
# take them past 30 MB); build-hub makes the binary with it, for the machine that runs the hub.
DEVICE_TAGS := $(STATIC_TAGS),nohub
GO_LDFLAGS  := -X github.com/harness-edge/harness-edge/cmd/harness-edge/internal/cli.version=$(VERSION)
STATIC_LDFLAGS := $(GO_LDFLAGS) -s -w -linkmode external -extldflags -static

HOST_PACKAGES  := cbindgen file git
# The browser test's: Debian's chromium, and a font so the screenshots have text.
BROWSER_PACKAGES := chromium fonts-dejavu-core
CROSS_PACKAGES := rustc-web libstd-rust-web-dev:arm64 libc6:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
DEBIAN_RUSTC   := /usr/bin/rustc

GO_PKGS := ./...
# The Go tests run with -json through internal/testfmt: package lines as they finish, each
# top-level test that took a second or more, and the whole output of any test that failed.
TESTFMT := $(GO) run ./internal/testfmt
# The purego and fallback passes: the packages that touch the engine directly run whole; the
# harness and the CLI above them run with -short (fewer generated cases, the same tests), since
# what differs between backends is below them. The cgo pass runs everything in full.
ENGINE_PKGS := ./bridge/... ./store/... ./fuzz/...
ABOVE_ENGINE_PKGS := ./runtime/... ./control/... ./cmd/... ./fleet/...

.PHONY: help
help: ## List the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install missing host packages (cbindgen, file, git) and check go, cargo, gcc
	@command -v $(GO) >/dev/null || { echo "go not found: install Go 1.26 (https://go.dev/dl)"; exit 1; }
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust with rustup (https://rustup.rs)"; exit 1; }
	@command -v gcc >/dev/null || { echo "gcc not found: apt-get install -y gcc"; exit 1; }
	@cross/ensure-packages $(HOST_PACKAGES)

.PHONY: deps-browser
deps-browser: ## Install missing browser-test packages (Debian's chromium)
	@cross/ensure-packages $(BROWSER_PACKAGES)

# The real agent CLIs the test-agents target runs: the versions pinned in test/agents/package.json
# (and its lock), installed with `npm ci` into AGENTS_DIR. nodejs and npm come from Debian when
# missing. A failed install is reported and the tests skip, saying why.
AGENTS_DIR ?= $(ROOT)/.cache/agents

.PHONY: deps-agents
deps-agents: ## Install the pinned Claude Code and Codex CLIs (npm ci of test/agents into .cache/agents; nodejs/npm from Debian if missing)
	@command -v npm >/dev/null || cross/ensure-packages nodejs npm
	@mkdir -p $(AGENTS_DIR)
	@if cmp -s test/agents/package-lock.json $(AGENTS_DIR)/package-lock.json && [ -x $(AGENTS_DIR)/node_modules/.bin/claude ] \
		&& [ -x $(AGENTS_DIR)/node_modules/.bin/codex ]; then echo "deps-agents: $(AGENTS_DIR) is up to date"; exit 0; fi; \
	cp test/agents/package.json test/agents/package-lock.json $(AGENTS_DIR)/ && cd $(AGENTS_DIR) && \
	if npm ci --no-audit --no-fund --loglevel=error; then \
		echo "deps-agents: $$(node_modules/.bin/claude --version), $$(node_modules/.bin/codex --version 2>/dev/null) in $(AGENTS_DIR)"; \
	else echo "deps-agents: npm ci failed in $(AGENTS_DIR): the agent CLI tests will skip"; fi

.PHONY: deps-cross
deps-cross: ## Install missing arm64 cross packages (Debian rustc + arm64 std, gcc, qemu)
	@cross/ensure-packages --arch arm64 $(CROSS_PACKAGES)

# ---------------------------------------------------------------------------------------------
# The engine

.PHONY: engine
engine: $(ENGINE_A) ## Build the Rust engine for this machine (libeternal.a and .so)

$(ENGINE_A): $(ENGINE_SRC)
	cd eternal && $(CARGO) build --release --quiet --target $(RUST_TARGET_$(HOST_ARCH))
	mkdir -p $(ENGINE_LIB)
	cp eternal/target/$(RUST_TARGET_$(HOST_ARCH))/release/libeternal.a eternal/target/$(RUST_TARGET_$(HOST_ARCH))/release/libeternal.so $(ENGINE_LIB)/

.PHONY: engine-arm64
engine-arm64: deps-cross $(ARM_A) ## Cross-build the engine for arm64 with Debian's rustc

# Debian's rustc-web and its arm64 std must be the same version; rustup's cargo drives it.
$(ARM_A): $(ENGINE_SRC)
	cd eternal && RUSTC=$(DEBIAN_RUSTC) CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
		$(CARGO) build --release --quiet --target $(RUST_TARGET_arm64)
	mkdir -p $(ARM_LIB)
	cp eternal/target/$(RUST_TARGET_arm64)/release/libeternal.a eternal/target/$(RUST_TARGET_arm64)/release/libeternal.so $(ARM_LIB)/

.PHONY: header
header: deps ## Regenerate eternal/include/eternal.h with cbindgen
	cd eternal && cbindgen --quiet --config cbindgen.toml --crate eternal --output include/eternal.h .

.PHONY: header-check
header-check: deps ## Fail when the committed header is stale
	@cd eternal && cbindgen --quiet --config cbindgen.toml --crate eternal --output $(ROOT)/.header-check.h . \
		&& diff -u include/eternal.h $(ROOT)/.header-check.h \
		&& rm -f $(ROOT)/.header-check.h && echo "header-check: eternal/include/eternal.h is current" \
		|| { rm -f $(ROOT)/.header-check.h; echo "header-check: eternal/include/eternal.h is stale: run 'make header'"; exit 1; }

# ---------------------------------------------------------------------------------------------
# Binaries

.PHONY: build
build: deps engine ## Build bin/harness-edge: static linux binary with the engine linked in (cgo), without the fleet's embedded hub
	CGO_ENABLED=1 $(GO) build -trimpath -tags $(DEVICE_TAGS) -ldflags '$(STATIC_LDFLAGS)' -o bin/harness-edge ./cmd/harness-edge
	@file bin/harness-edge | grep -q 'statically linked' || { file bin/harness-edge; echo "bin/harness-edge is not static"; exit 1; }
	@echo "bin/harness-edge: $$(file -b bin/harness-edge | cut -d, -f1-2), $$(du -h bin/harness-edge | cut -f1)"

.PHONY: build-hub
build-hub: deps engine ## Build bin/harness-edge-hub: bin/harness-edge with the fleet's embedded hub (nats-server), for the hub's machine
	CGO_ENABLED=1 $(GO) build -trimpath -tags $(STATIC_TAGS) -ldflags '$(STATIC_LDFLAGS)' -o bin/harness-edge-hub ./cmd/harness-edge
	@file bin/harness-edge-hub | grep -q 'statically linked' || { file bin/harness-edge-hub; echo "bin/harness-edge-hub is not static"; exit 1; }
	@echo "bin/harness-edge-hub: $$(file -b bin/harness-edge-hub | cut -d, -f1-2), $$(du -h bin/harness-edge-hub | cut -f1)"

.PHONY: build-purego
build-purego: engine ## Build bin/harness-edge-purego (CGO_ENABLED=0, loads libeternal.so; dynamically linked)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(GO_LDFLAGS)' -o bin/harness-edge-purego ./cmd/harness-edge
	cp $(ENGINE_SO) bin/libeternal.so

.PHONY: cross
cross: deps engine-arm64 ## Build bin/harness-edge-linux-arm64: static arm64 binary with the arm64 engine
	CGO_ENABLED=1 GOARCH=arm64 CC=aarch64-linux-gnu-gcc $(GO) build -trimpath -tags $(DEVICE_TAGS) \
		-ldflags '$(STATIC_LDFLAGS)' -o bin/harness-edge-linux-arm64 ./cmd/harness-edge
	@file bin/harness-edge-linux-arm64 | grep -q 'ARM aarch64.*statically linked' || { file bin/harness-edge-linux-arm64; echo "not a static arm64 binary"; exit 1; }
	@echo "bin/harness-edge-linux-arm64: $$(file -b bin/harness-edge-linux-arm64 | cut -d, -f1-2), $$(du -h bin/harness-edge-linux-arm64 | cut -f1)"

# ---------------------------------------------------------------------------------------------
# Tests

.PHONY: test
test: deps header-check test-rust test-go ## Rust tests, Go tests on every backend (fuzz seeds included), header check

# The web console in headless Chromium (chromedp) against a real daemon, under the `browser`
# build tag so that `make test` needs no browser. Here a missing chromium fails the test rather
# than skipping it; the screenshots go to docs/img.
.PHONY: test-browser
test-browser: engine deps-browser ## The web console in headless Chromium against a real daemon; screenshots in docs/img
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_EXPECT_BACKEND=cgo HARNESS_EDGE_BROWSER_REQUIRED=1 SCREENSHOTS=$(ROOT)/docs/img \
		CGO_ENABLED=1 $(GO) test -count=1 -tags invariants,eternal_purego,browser -run 'InABrowser|OnAPhone' -v ./control/

# `loop` around the real Claude Code and Codex CLIs (the npm packages deps-agents installs) against
# scripted model servers on loopback, under the `agents` build tag so that `make test` needs
# neither node nor the install. A CLI that is not installed skips its test, saying so.
.PHONY: test-agents
test-agents: engine deps-agents ## loop around the real Claude Code and Codex CLIs against scripted local model servers
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_AGENTS_DIR=$(AGENTS_DIR) \
		CGO_ENABLED=1 $(GO) test -count=1 -tags agents -v ./test/agents/

.PHONY: test-rust
test-rust: ## cargo test (release) for the engine
	cd eternal && $(CARGO) test --release --quiet --target $(RUST_TARGET_$(HOST_ARCH))

# Three runs, one per way the engine can be reached. HARNESS_EDGE_EXPECT_BACKEND makes Load's
# choice a test assertion in each run.
.PHONY: test-go
test-go: engine ## Go tests: cgo (+purego in-process), purego-only (CGO_ENABLED=0), fallback-only
	@echo "== go test: cgo build (cgo, purego and fallback backends in one process)"
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_EXPECT_BACKEND=cgo \
		CGO_ENABLED=1 $(GO) test -json -count=1 -tags invariants,eternal_purego$(if $(TAGS),$(comma)$(TAGS)) $(GO_PKGS) | $(TESTFMT)
	@echo "== go test: CGO_ENABLED=0 with libeternal.so (purego and fallback backends)"
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_EXPECT_BACKEND=purego \
		CGO_ENABLED=0 $(GO) test -json -count=1 -tags invariants$(if $(TAGS),$(comma)$(TAGS)) $(ENGINE_PKGS) | $(TESTFMT)
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_EXPECT_BACKEND=purego \
		CGO_ENABLED=0 $(GO) test -json -count=1 -short -tags invariants$(if $(TAGS),$(comma)$(TAGS)) $(ABOVE_ENGINE_PKGS) | $(TESTFMT)
	@echo "== go test: CGO_ENABLED=0 without any engine (fallback backend only)"
	HARNESS_EDGE_ENGINE_LIB=/nonexistent/libeternal.so HARNESS_EDGE_EXPECT_BACKEND=fallback \
		CGO_ENABLED=0 $(GO) test -json -count=1 -tags invariants$(if $(TAGS),$(comma)$(TAGS)) $(ENGINE_PKGS) | $(TESTFMT)
	HARNESS_EDGE_ENGINE_LIB=/nonexistent/libeternal.so HARNESS_EDGE_EXPECT_BACKEND=fallback \
		CGO_ENABLED=0 $(GO) test -json -count=1 -short -tags invariants$(if $(TAGS),$(comma)$(TAGS)) $(ABOVE_ENGINE_PKGS) | $(TESTFMT)

# Every package but the command line's: its tests run the built binary hundreds of times, which
# under emulation takes over a quarter of an hour, and what they check does not depend on the
# architecture. The arm64 binary itself runs under qemu in CI (version, the quick benchmark
# suite, which drives run/resume end to end).
ARM64_TEST_PKGS = $(shell $(GO) list ./... | grep -v '/cmd/harness-edge')

.PHONY: test-arm64
test-arm64: deps engine-arm64 ## Rust and Go tests cross-compiled for arm64 (static), run under qemu-aarch64 (all but the CLI's)
	cd eternal && RUSTC=$(DEBIAN_RUSTC) CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
		CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$(ROOT)/cross/qemu-run \
		$(CARGO) test --lib --release --quiet --target $(RUST_TARGET_arm64)
	GO=$(GO) cross/go-test-arm64 invariants,$(STATIC_TAGS) $(ARM64_TEST_PKGS)

.PHONY: test-safety
test-safety: engine ## cgocheck2 + race over the engine bridge (all backends); race over the store
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) HARNESS_EDGE_EXPECT_BACKEND=cgo GOEXPERIMENT=cgocheck2 \
		CGO_ENABLED=1 $(GO) test -count=1 -race -tags invariants,eternal_purego \
		-run 'Conformance|Differential|Purego|Load|Status' ./bridge/...
	@# The store's tests run with -race but without cgocheck2: with cgo enabled, Pebble's block cache
	@# keeps Go pointers in memory it allocates with C malloc (internal/manual), which cgocheck2
	@# rejects by design. Our own cgo calls are all covered by the run above.
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) CGO_ENABLED=1 $(GO) test -count=1 -race -tags invariants,eternal_purego \
		-run 'Store|Persist|Crash|PowerLoss|Injected' ./store/...

.PHONY: stress
stress: engine ## Crash tests at length: 500 kill -9 runs of a checkpointing child (HARNESS_EDGE_CRASH_KILLS)
	HARNESS_EDGE_CRASH_KILLS=$${HARNESS_EDGE_CRASH_KILLS:-500} CGO_ENABLED=1 $(GO) test -count=1 -tags invariants \
		-run 'TestCrashKill9|TestPowerLoss|TestInjectedIOErrors' -v ./store/ | grep -E '^(---|ok|FAIL)|kills|operations'

# package:target:executions. The state-format targets live beside statefmt; fuzz/ keeps the
# cross-backend and cross-driver ones. Each target runs for a number of executions (six to ten seconds
# each on a 2-core machine) rather than for a time: Go 1.26's fuzzing coordinator can
# fail a run with "context deadline exceeded" when its -fuzztime deadline falls while a worker is
# busy (minimizing a new input, say), with no failing input. FUZZTIME=30s (or 1000000x) sets one
# budget for every target instead. A new input is minimized for at most FUZZMINIMIZETIME (Go's
# default is a minute, and the fuzzing stops while it runs).
FUZZ_TARGETS := ./fuzz:FuzzDeltaApply:60000 ./fuzz:FuzzDeltaRoundTrip:100000 \
	./fuzz:FuzzAgentOutput:20000 ./fuzz:FuzzTaskFile:80000 ./statefmt:FuzzStateJSON:60000 ./statefmt:FuzzStateBinary:50000 \
	./statefmt:FuzzRecord:60000 ./statefmt:FuzzFrames:150000 \
	./runtime/task:FuzzJSONDocument:60000
FUZZTIME ?=
FUZZMINIMIZETIME ?= 1s

.PHONY: fuzz
fuzz: engine ## Fuzz each target (its executions, or FUZZTIME) across all backends
	@for ptn in $(FUZZ_TARGETS); do \
		p=$${ptn%%:*}; tn=$${ptn#*:}; t=$${tn%%:*}; n=$${tn#*:}; \
		budget="$(FUZZTIME)"; [ -n "$$budget" ] || budget="$${n}x"; \
		echo "== fuzz $$t ($$p) for $$budget"; \
		HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) CGO_ENABLED=1 $(GO) test -tags eternal_purego -run '^$$' \
			-fuzz "^$$t$$" -fuzztime "$$budget" -fuzzminimizetime $(FUZZMINIMIZETIME) $$p || exit 1; \
	done

# ---------------------------------------------------------------------------------------------
# Benchmarks

.PHONY: bench
bench: build ## The benchmark suite on this machine: bench/results/latest.{json,md}, every figure beside its bar
	bin/harness-edge bench --dir $(BENCH_DIR) --json --markdown bench/results/latest.md > bench/results/latest.json
	@cat bench/results/latest.md

.PHONY: bench-arm64
bench-arm64: cross ## The suite's arm64 binary under qemu-aarch64: bench/results/latest-arm64.{json,md} (emulated: pessimistic)
	cross/qemu-run bin/harness-edge-linux-arm64 bench --emulated qemu-user --dir $(BENCH_DIR) --json \
		--markdown bench/results/latest-arm64.md > bench/results/latest-arm64.json
	@cat bench/results/latest-arm64.md

.PHONY: bench-quick
bench-quick: build ## The quick suite with its enforced bars checked (what CI runs, x86-64 here)
	bin/harness-edge bench --quick --check --dir $(BENCH_DIR)

.PHONY: bench-micro
bench-micro: engine ## Go micro-benchmarks (engine, state formats, store): bench/results/micro.txt
	HARNESS_EDGE_ENGINE_LIB=$(ENGINE_SO) CGO_ENABLED=1 $(GO) test -tags eternal_purego -run '^$$' \
		-bench . -benchmem -benchtime $(BENCHTIME) -count 5 ./bench/ | tee bench/results/micro.txt

# harness-edge beside the systems its users would otherwise use, in one process and one time
# window. A module of its own (bench/peers/go.mod): its dependencies never reach the binary.
PEERS_N      ?= 300,1000
PEERS_ROUNDS ?= 5

.PHONY: bench-peers
bench-peers: engine ## harness-edge beside bare Pebble, DBOS-Go on SQLite and LangGraph.js, same real-text steps: bench/results/peers.{md,json}
	@# LangGraph.js is optional: its pinned packages are installed when npm is there, else it is left out.
	@if ! command -v npm >/dev/null; then echo "bench-peers: npm not found: LangGraph.js is left out"; \
	elif [ ! -d bench/peers/langgraph/node_modules ]; then \
		(cd bench/peers/langgraph && npm ci --no-audit --no-fund) || echo "bench-peers: npm ci failed: LangGraph.js is left out"; fi
	cd bench/peers && CGO_ENABLED=1 $(GO) run -tags pebblegozstd . -n $(PEERS_N) -rounds $(PEERS_ROUNDS) \
		-dir $(BENCH_DIR)/peers -out $(ROOT)/bench/results/peers -version $(VERSION)

# ---------------------------------------------------------------------------------------------
# The README's main job

.PHONY: demo
demo: build ## Build, then run the demo: a script task killed with SIGKILL part-way, resumed, finished
	bin/harness-edge version
	examples/demo.sh bin/harness-edge

.PHONY: demo-agents
demo-agents: build ## The agent drivers' demo: a Ralph loop around a stand-in CLI agent (killed, resumed), an openai agent against a fake server
	$(GO) build -o bin/fake-openai ./examples/fake-openai
	examples/agents.sh bin/harness-edge bin/fake-openai

.PHONY: clean
clean: ## Remove build outputs
	rm -rf bin eternal/lib eternal/target
