# agentrt — the two commands a new user needs:
#
#   make run    build agentrt and the washington example (Go) and serve it on :8000
#   make serve  build every example in every language and serve them as a fleet
#   make test   install what the tests need, build every plugin, run all tests
#               and the protocol's official compliance suite
#
# Toolchains (Debian's Rust for wasm, TinyGo built from source, wabt, newman)
# are installed by scripts/toolchains.sh into $(AGENTRT_CACHE), once.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO            ?= go
ADDR          ?= 127.0.0.1:8000
DATA          ?= ./agentrt-data
SHARED        ?= ../shared
AGENTRT_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/agentrt
export AGENTRT_CACHE

TINYGO := $(AGENTRT_CACHE)/bin/tinygo
NEWMAN := $(AGENTRT_CACHE)/bin/newman
# Debian's cargo runs the first rustc on PATH; the rustup one has no wasm target.
CARGO  := RUSTC=/usr/bin/rustc /usr/bin/cargo

PLUGIN_DIR := build/plugins
EXAMPLES   := $(notdir $(wildcard examples/*))
LANGS      := go tinygo rust
# Every example that exists in a language, as build/plugins/<example>-<lang>.wasm.
PLUGINS    := $(foreach e,$(EXAMPLES),$(foreach l,$(LANGS),$(if $(wildcard examples/$(e)/$(if $(filter tinygo,$(l)),go,$(l))),$(PLUGIN_DIR)/$(e)-$(l).wasm)))

GO_KIT     := $(wildcard plugins/go/*.go plugins/abi/*.go plugins/go.mod)
RUST_KIT   := $(wildcard plugins/rust/Cargo.toml plugins/rust/src/*.rs)
HOST_SRC   := $(shell find cmd protocol storage runtime hostapi plugins/abi plugins/manifest -name '*.go' -not -name '*_test.go') \
              $(wildcard storage/migrations/*.sql plugins/manifest/schema.json) go.mod go.sum plugins/go.mod plugins/manifest/go.mod \
              $(shell find cmd/agentrt/templates -type f)

# The Go modules of the repository: the host, the plugin kit (plugins/: the
# ABI package and the Go/TinyGo kit, which plugins import) and the manifest
# parser. "go test ./..." in one does not reach into another.
GO_MODULES := . plugins plugins/manifest
# The lowest Go the kit promises plugin authors (the go line of
# plugins/go.mod): the kit is built and tested with it (test-kit-go).
KIT_GO     := $(shell sed -n 's/^go \([0-9.]*\)$$/\1/p' plugins/go.mod)

# Go fuzz targets, as module:package:Target:N. "make test" runs each for N
# executions (a few seconds each on an idle machine); "make fuzz" for
# FUZZTIME each (seed corpora in each package's testdata/fuzz/; what a run
# finds new stays in Go's cache, and a failing input is written to
# testdata/fuzz/ for a test to keep). A count, not a time, in "make test":
# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
# failure of the target ("context deadline exceeded", no failing input) on
# a busy machine, go.dev/issue/75804; a count sets no deadline.
FUZZ_TARGETS   := .:./protocol/httpapi:FuzzDecodeRequestBody:2000 .:./protocol:FuzzCheckJSON:40000 \
                  .:./protocol/wire:FuzzResultDecoding:60000 .:./protocol:FuzzStepResult:20000 \
                  .:./protocol:FuzzLogRecordSize:80000 plugins:./abi:FuzzDecodeInput:8000 \
                  plugins:./abi:FuzzParseTargetAndParseDestination:60000 \
                  .:./runtime:FuzzPrepareModule:40000 .:./runtime:FuzzDecodeSnapshot:50000 \
                  .:./runtime:FuzzLazyTable:20000 .:./runtime:FuzzInterruptible:20000 \
                  plugins/manifest:.:FuzzParse:15000
FUZZTIME       ?= 2m

.PHONY: build plugins run serve test test-go fuzz fuzz-short conformance check toolchains bench clean
.SECONDEXPANSION:

build: build/agentrt

build/agentrt: $(HOST_SRC)
	@mkdir -p $(@D)
	$(GO) build -o $@ ./cmd/agentrt

# agentrt carries the kit's source (plugins/source.go embeds it), which
# "agentrt new" writes into a project: a change to the kit rebuilds it.
KIT_SRC := plugins/source.go $(shell find plugins/go plugins/rust/src -type f) plugins/rust/Cargo.toml
build/agentrt: $(KIT_SRC)

plugins: $(PLUGINS)

$(PLUGIN_DIR)/%-go.wasm: $$(wildcard examples/$$*/go/*.go) $(GO_KIT)
	@mkdir -p $(@D)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ ./examples/$*/go

$(PLUGIN_DIR)/%-tinygo.wasm: $$(wildcard examples/$$*/go/*.go) $(GO_KIT) | toolchains
	@mkdir -p $(@D)
	cd examples/$*/go && $(TINYGO) build -target=wasip1 -buildmode=c-shared -no-debug -scheduler=none -o $(CURDIR)/$@ . 2> >(grep -v "is not a recognized feature for this target" >&2)

$(PLUGIN_DIR)/%-rust.wasm: $$(wildcard examples/$$*/rust/Cargo.toml examples/$$*/rust/src/*.rs) $(RUST_KIT) .cargo/config.toml | toolchains
	@mkdir -p $(@D)
	$(CARGO) build --quiet --offline --release --target wasm32-unknown-unknown \
		--manifest-path examples/$*/rust/Cargo.toml --target-dir build/cargo
	cp build/cargo/wasm32-unknown-unknown/release/$(subst -,_,$*)_agent.wasm $@

run: build/agentrt $(PLUGIN_DIR)/washington-go.wasm
	./build/agentrt run $(PLUGIN_DIR)/washington-go.wasm --addr $(ADDR) --data $(DATA)

# Every example in every language as a fleet of agents, each at
# http://ADDR/agents/<example>-<lang>/ap/v1, washington-go also at /ap/v1.
FLEET_DIR ?= build/fleet

serve: build/agentrt plugins
	@mkdir -p $(FLEET_DIR)
	cp $(PLUGINS) $(FLEET_DIR)/
	./build/agentrt serve --plugins $(FLEET_DIR) --default washington-go --addr $(ADDR) --data $(DATA)

# The LLM agent against an OpenAI-compatible endpoint: the key in
# OPENAI_API_KEY, held by agentrt and sent only to LLM_BASE_URL. Not run by
# "make test" (the tests use a mock on loopback).
LLM_BASE_URL ?= https://api.openai.com/v1
LLM_MODEL    ?= gpt-4o-mini

.PHONY: run-llm
run-llm: build/agentrt $(PLUGIN_DIR)/llm-agent-go.wasm
	@[ -n "$${OPENAI_API_KEY:-}" ] || { echo "run-llm: set OPENAI_API_KEY to the endpoint's key"; exit 2; }
	./build/agentrt run $(PLUGIN_DIR)/llm-agent-go.wasm --addr $(ADDR) --data $(DATA) \
		--allow-http $(LLM_BASE_URL)/ --secret-env OPENAI_API_KEY@$(LLM_BASE_URL)/ \
		--config base_url=$(LLM_BASE_URL) --config model=$(LLM_MODEL)

toolchains:
	scripts/toolchains.sh

test: toolchains plugins build/agentrt test-go test-kit-go test-rust fuzz-short conformance

# -timeout: cmd/agentrt's end-to-end tests (which build plugins) take more
# than go test's default 10 minutes on a busy 2-core machine.
test-go: plugins
	for m in $(GO_MODULES); do \
		(cd $$m && AGENTRT_PLUGINS=$(CURDIR)/$(PLUGIN_DIR) $(GO) test -race -count=1 -timeout 45m ./...) || exit 1; \
	done
	@# Resident memory after attacks is measured without the race detector,
	@# whose shadow memory would hide it.
	AGENTRT_PLUGINS=$(CURDIR)/$(PLUGIN_DIR) $(GO) test -count=1 -run 'TestHostile(Wasm|Go)Plugin' ./cmd/agentrt

# The Rust kit's tests (unit, golden and doc tests) and the Rust examples',
# on the build machine: Debian's rustc has its standard library too, and
# RUSTDOC is the rustdoc of that rustc (the rustup one on PATH cannot read
# what rustc 1.63 builds).
.PHONY: test-rust
test-rust: | toolchains
	@# The kit's doc tests show its test harness: its "testing" feature.
	RUSTDOC=/usr/bin/rustdoc $(CARGO) test --quiet --offline --features testing --manifest-path plugins/rust/Cargo.toml --target-dir build/cargo-test
	for m in $(wildcard examples/*/rust); do \
		RUSTDOC=/usr/bin/rustdoc $(CARGO) test --quiet --offline --manifest-path $$m/Cargo.toml --target-dir build/cargo-test || exit 1; \
	done

# FUZZ_LIMIT is a shell word: $$n, a target's count, or a time.
fuzz-short: FUZZ_LIMIT = $${n}x
fuzz: FUZZ_LIMIT = $(FUZZTIME)
fuzz fuzz-short:
	for t in $(FUZZ_TARGETS); do \
		IFS=: read -r m pkg target n <<< "$$t"; \
		(cd $$m && $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZ_LIMIT) "$$pkg") || exit 1; \
	done

# The kit with the lowest Go it promises (KIT_GO): its packages built for
# wasip1 and its tests run. GOTOOLCHAIN fetches that Go from the module
# proxy once (into the module cache).
.PHONY: test-kit-go
test-kit-go:
	cd plugins && GOTOOLCHAIN=go$(KIT_GO).0 GOOS=wasip1 GOARCH=wasm $(GO) build ./...
	cd plugins && GOTOOLCHAIN=go$(KIT_GO).0 $(GO) test -count=1 ./...

# "agentrt check" against the washington example in every language, each on
# a fresh server; and the protocol's official suite (newman) against the same
# servers when $(SHARED)/conformance/ is there.
OFFICIAL_SUITE := $(wildcard $(SHARED)/conformance/agent_protocol_v1.offline.json)

conformance: build/agentrt $(PLUGINS) | toolchains
	@$(if $(OFFICIAL_SUITE),:,echo "conformance: $(SHARED)/conformance/ is not there; the official suite (newman) is skipped, agentrt check runs")
	for p in $(filter $(PLUGIN_DIR)/washington-%,$(PLUGINS)); do \
		scripts/conformance.sh build/agentrt $$p $(OFFICIAL_SUITE) || exit 1; \
	done
	@# And one agent of a fleet of every example, at its base URL /agents/NAME.
	rm -rf build/conformance-fleet && mkdir -p build/conformance-fleet && cp $(PLUGINS) build/conformance-fleet/
	AGENT=washington-rust scripts/conformance.sh build/agentrt build/conformance-fleet $(OFFICIAL_SUITE)

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: needs formatting:"; echo "$$out"; exit 1; fi
	for m in $(GO_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./examples/...
	cd plugins && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	for m in $(GO_MODULES); do (cd $$m && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) || exit 1; done
	@# -e: a module proxy may refuse google/pprof, a test-only dependency of
	@# modernc.org/sqlite; tidy still settles everything our build needs.
	@mkdir -p build/tidy
	@for m in $(GO_MODULES); do \
		b=build/tidy/$$(echo $$m | tr / _); mkdir -p $$b; cp $$m/go.mod $$b/; [ ! -f $$m/go.sum ] || cp $$m/go.sum $$b/; \
		(cd $$m && $(GO) mod tidy -e 2>/dev/null); \
		if ! cmp -s $$m/go.mod $$b/go.mod || { [ -f $$m/go.sum ] && ! cmp -s $$m/go.sum $$b/go.sum; }; then \
			echo "$$m/go.mod or go.sum is not tidy (go mod tidy -e changes them):"; diff -u $$b/go.mod $$m/go.mod || true; \
			cp $$b/go.mod $$m/; [ ! -f $$b/go.sum ] || cp $$b/go.sum $$m/; exit 1; fi; \
	done

# The plugin bench/events measures the fan-out of progress with.
BENCH_PLUGINS := $(PLUGIN_DIR)/bench-progress-go.wasm

$(PLUGIN_DIR)/bench-progress-go.wasm: $(wildcard bench/events/plugin/*.go) $(GO_KIT)
	@mkdir -p $(@D)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ ./bench/events/plugin

bench: build/agentrt plugins $(BENCH_PLUGINS)
	bench/run.sh

clean:
	rm -rf build
