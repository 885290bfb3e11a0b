# budgetguard. Tools are pinned in hack/tools/go.mod (helm in go.mod, to build on
# the same Kubernetes libraries) and run with `go tool`.
# Never add -trimpath: the in-process kube-apiserver finds its test fixtures
# through runtime.Caller.

GO ?= go
TOOLS = $(GO) tool -modfile=hack/tools/go.mod
export GO

# budgetguard's version (hack/version.sh: the file VERSION on its tagged
# commit, VERSION-dev.g<commit> on any other); every artifact of a build
# carries it. hack/ldflags.sh also stamps the embedded Kubernetes version,
# which the sandbox's kube-apiserver reports.
VERSION ?= $(shell hack/version.sh)
LDFLAGS = $(shell VERSION=$(VERSION) hack/ldflags.sh)

.PHONY: all build demo images chart release test test-unit test-integration soak promise bench perf perf-report manifests verify upstream-preemption e2e-node

# `make test` runs test-unit, then test-integration, even under -j.
.NOTPARALLEL:

all: build

# bin/ holds the binaries, and kubectl_complete-budgetguard, which kubectl
# runs for completions of "kubectl budgetguard" when it is on PATH.
build:
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/scheduler ./cmd/descheduler ./cmd/sandbox ./cmd/kubectl-budgetguard
	install -m 0755 cmd/kubectl-budgetguard/kubectl_complete-budgetguard bin/

# The showcase: the same scenario with upstream DefaultPreemption, then with
# budgetguard, side by side (about 30 s once built); the runs' timeline, a
# self-contained HTML page, goes to _output/demo/report.html, whose path it
# prints last.
demo:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/sandbox ./cmd/sandbox
	bin/sandbox run --compare --html _output/demo/report.html examples/scenarios/preemption-under-pdb.yaml

# OCI image archives of the scheduler and the descheduler (linux/amd64 and
# linux/arm64, reproducible, no daemon, no base image) in _output/images.
images:
	VERSION=$(VERSION) hack/build-images.sh

# The chart packaged with this build's version, which make images tags the
# images with: _output/chart/budgetguard-<version>.tgz.
chart:
	hack/chart.sh

# Everything a release publishes, into _output/release: the image archives,
# kubectl-budgetguard for linux, darwin and windows (amd64, arm64) with its
# krew manifest, the packaged chart, the rendered manifests and checksums.txt.
# Offline and reproducible: two runs on one commit give the same bytes.
release:
	hack/release.sh

test: test-unit test-integration

# Everything outside ./test/; ./plugins/... with -race.
test-unit:
	hack/test-unit.sh

# ./test/integration/... against the in-process control plane (slow to compile).
test-integration:
	hack/test-integration.sh

# The churn of every actor against the same budgets for SOAK_DURATION
# (default 10m; SOAK_SEED to repeat a run), judged by the independent
# auditor; not part of `make test`.
soak:
	hack/soak.sh

# TestPromiseAllActors and TestPromiseAllActorsUnderFaults on a seed from
# the clock (about two minutes each): every actor at once against the same
# budgets, judged by the auditor, without and with faults injected, then
# both again with pod groups (-gangs). make test runs them on fixed seeds;
# PROMISE_SEED=n repeats a run.
PROMISE_SEED ?= $(shell date +%s%N)
promise:
	$(GO) test -count=1 -timeout 30m -run '^TestPromiseAllActors(UnderFaults)?$$' -v ./test/integration -args -promise.seed=$(PROMISE_SEED)
	$(GO) test -count=1 -timeout 30m -run '^TestPromiseAllActors(UnderFaults)?$$' -v ./test/integration -args -promise.seed=$(PROMISE_SEED) -gangs

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./plugins/...

# The scale benchmarks of test/perf (build tag perf, never part of `make
# test`): upstream's scheduler_perf preemption workloads and budgetguard's
# budgeted ones at PERF_NODES nodes (100; 500 and 1000 are documented in
# docs/performance.md), DefaultPreemption against BudgetAwarePreemption,
# PERF_COUNT repetitions (10) summarised by benchstat in _output/perf/; then
# one descheduling loop over the sandbox (100 nodes, 3,000 pods, 300 PDBs),
# DefaultEvictor against BudgetAwareEvictor (hack/perf-desched.sh).
PERF_NODES ?= 100
PERF_COUNT ?= 10
perf:
	PERF_NODES=$(PERF_NODES) PERF_COUNT=$(PERF_COUNT) hack/perf.sh
	hack/perf-desched.sh

# Regenerate every table of docs/performance.md from the raw output kept in
# docs/perf-data/ (hack/perfreport; make verify fails when the page differs).
perf-report:
	$(GO) run ./hack/perfreport -write

# budgetguard's release on a real node, offline (docs/e2e-node.md): installs
# containerd, runc and the CNI plugins from Debian's packages, builds the
# control plane and the kubelet from the pinned modules and the images
# (make images), brings a single-node cluster up on addresses of its own,
# installs the chart with the pinned helm, runs the quick start, a
# descheduling loop and a short multi-actor run judged by the auditor
# (./test/e2enode), and tears it all down, checking that the host is as it
# was. Needs root; not part of make test. hack/e2e-node.sh up|test|down
# runs one part.
e2e-node:
	hack/e2e-node.sh

# Kubernetes' own preemption integration suites, unchanged, against
# BudgetAwarePreemption under the in-tree name DefaultPreemption
# (hack/upstream-preemption.sh), in both variants: Strict + Evict, and
# BestEffort + Delete. One line per upstream test; it fails unless each
# passed or is listed in docs/upstream-preemption.md as differing by design.
# PKGS and RUN narrow it; SKIP_LISTED=1 (.ci/run) leaves the listed out.
upstream-preemption:
	VARIANT=StrictEvict hack/upstream-preemption.sh
	VARIANT=BestEffortDelete hack/upstream-preemption.sh

# Regenerate manifests/crds from kruise-api's Go types, and render the rest of
# manifests/ from charts/budgetguard, its one source.
manifests:
	hack/update-crds.sh
	hack/update-manifests.sh

verify:
	hack/verify-gofmt.sh
	hack/verify-gomod.sh
	hack/verify-crds.sh
	hack/verify-manifests.sh
	# promtool (Debian's package prometheus, installed when missing) checks
	# and unit-tests the chart's alerts.
	hack/verify-prometheusrules.sh
	# docs/performance.md's tables against docs/perf-data/ (hack/perfreport).
	hack/verify-perf-report.sh
	# golangci-lint runs go vet's analyzers (its govet linter, default set)
	# with every other linter, on every file, build tags perf and soak
	# included (.golangci.yml). A separate go vet would analyse every
	# dependency, all of Kubernetes, once more: 3.5 minutes on a cold run.
	$(TOOLS) golangci-lint run --allow-serial-runners ./...
