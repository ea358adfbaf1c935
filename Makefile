# ql3. The two set-up commands of a fresh machine are `make demo` and `make test` (README.md).
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CACHE ?= $(HOME)/.cache/ql3
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CACHE)/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# Whole-suite timeout: the ceremony suites run against a real kube-apiserver on 2 cores.
TEST_TIMEOUT ?= 30m
FUZZTIME ?= 20s
BIN := bin/ql3

# K8S_MINOR picks the Kubernetes minor of tools, test, cluster-up, demo and bench: a module under
# testdata/k8s-tools/v$(K8S_MINOR)/. The default is the newest supported minor; v1.34 is the ADR's
# gate and runs in `make matrix` with every other minor.
K8S_MINOR ?= 1.37
export K8S_MINOR

.PHONY: all build test faults lint unit tools cluster-up cluster-down demo bench bench-matrix matrix fuzz clean

all: build

# CGO_ENABLED=0: a static ql3 has no program interpreter, so no LD_PRELOAD or LD_LIBRARY_PATH from the
# operator's environment is honoured before ql3's own checks run (cmd/ql3/static_test.go).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/ql3

# tools builds the pinned kube-apiserver, kubectl and etcd of K8S_MINOR into $(CACHE)/k8s/<key>/
# (cold: 6-10 minutes and up to 2.3 GB of RAM on 2 cores; warm: well under a second) and prints
# the directory.
tools:
	@scripts/build-k8s.sh
	@scripts/build-tool.sh cosign
	@scripts/build-tool.sh registry
	@scripts/build-tool.sh oras
	@scripts/build-tool.sh litewitness

$(STATICCHECK):
	GOBIN=$(dir $(STATICCHECK)) GOFLAGS=-buildvcs=false $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd conformance && GOFLAGS=-mod=mod $(GO) vet ./... && GOFLAGS=-mod=mod $(STATICCHECK) ./...

# conformance/ is a module of its own (docs/conformance.md): suites written by others
# (go-containerregistry, the in-toto bindings, go-securesystemslib's DSSE) that ql3's build never
# links; -mod=mod lets it follow a dependency ql3 has added since its go.mod was last tidied. The
# race detector slows each audit tenfold, so under -race the auditor's tamper sweep flips
# sampled bytes only; the second run flips every byte of every object and rewrites every field
# (about 5 minutes on 2 cores).
test: lint
	QL3_K8S_TOOLS=$$(scripts/build-k8s.sh) QL3_COSIGN_TOOLS=$$(scripts/build-tool.sh cosign)/bin \
		QL3_TOOL_REGISTRY=$$(scripts/build-tool.sh registry) QL3_TOOL_ORAS=$$(scripts/build-tool.sh oras) \
		QL3_TOOL_LITEWITNESS=$$(scripts/build-tool.sh litewitness) \
		$(GO) test -race -timeout $(TEST_TIMEOUT) -skip '^TestCeremonyRealFaults$$' ./...
	cd conformance && QL3_TOOL_REGISTRY=$$(../scripts/build-tool.sh registry) GOFLAGS=-mod=mod \
		$(GO) test -race -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -timeout $(TEST_TIMEOUT) -run '^(TestTamperEveryObject|TestFieldSweep)$$' ./audit/

# faults runs the real-fault grid TestCeremonyRealFaults (docs/testbed.md): the API server stopped,
# paused and restarted and etcd stopped, before and after every kubectl step of a preflight, an
# apply and a live audit, on clusters of K8S_MINOR, in four shards side by side. `make test` skips
# it: in one process it takes about 22 minutes of mostly waiting on the cluster.
faults:
	scripts/faults.sh

cluster-up:
	@QL3_K8S_TOOLS=$$(scripts/build-k8s.sh) $(GO) run ./internal/testbed/testcluster/cmd/ql3-cluster up

cluster-down:
	@$(GO) run ./internal/testbed/testcluster/cmd/ql3-cluster down

demo: build
	@QL3_K8S_TOOLS=$$(scripts/build-k8s.sh) scripts/demo.sh

# bench runs every benchmark BENCH_COUNT times (the cluster ones on a real kube-apiserver) and ends
# with the table of ql3's speed goals (scripts/benchreport): every figure measured side by side with
# its reference in the same run, its goal, and whether it is met (docs/testbed.md, "Speed goals").
BENCH_COUNT ?= 3
BENCH_OUT ?= bin/bench.txt
bench:
	@mkdir -p $(dir $(BENCH_OUT))
	QL3_K8S_TOOLS=$$(scripts/build-k8s.sh) $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) \
		-timeout $(TEST_TIMEOUT) ./... | tee $(BENCH_OUT)
	@$(GO) run ./scripts/benchreport < $(BENCH_OUT)

# matrix runs the real-cluster suite on every supported minor (1.34 to 1.37) and with kubectl one
# minor older and newer than the API server, building the tools it lacks, and prints a table of
# cases x cells (docs/testbed.md).
matrix:
	scripts/matrix.sh

# bench-matrix runs BenchmarkApply on the newest minor and on 1.34 in one run and prints the ratio
# of a ql3 apply to the kubectl calls it makes (as its receipt stored them) on each.
bench-matrix:
	scripts/matrix.sh bench

# fuzz runs every fuzz target for FUZZTIME each; the seed corpora also run in every `make test`.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

clean:
	rm -rf bin
