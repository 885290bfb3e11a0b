#!/usr/bin/env bash
# Runs Kubernetes' own preemption integration suites (the pinned
# k8s.io/kubernetes' test/integration/scheduler/preemption/...) unchanged
# against BudgetAwarePreemption: the in-tree registry's DefaultPreemption
# entry points at plugins/budgetpreemption/upstreamsuite, through a build
# overlay of a hard-linked copy of the module (the go command refuses to
# overlay files under GOMODCACHE). VARIANT is StrictEvict (default) or
# BestEffortDelete; PKGS the packages (default: all of them); TESTFLAGS more
# go test flags; SKIP_LISTED=1 leaves out the tests listed as differing by
# design (below); RUN a -run
# pattern. Upstream's files are never copied into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
VARIANT="${VARIANT:-StrictEvict}"
case "$VARIANT" in StrictEvict | BestEffortDelete) ;; *)
	echo "VARIANT must be StrictEvict or BestEffortDelete, not $VARIANT" >&2
	exit 2
	;;
esac
root="$(pwd)"
out="$root/_output/upstream"
k8sver="$("$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)"
src="$("$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)"
copy="$out/kubernetes-$k8sver"

if [ ! -d "$copy" ]; then
	mkdir -p "$out"
	cp -al "$src" "$copy.tmp"
	# Directories only: the files are the module cache's, never written.
	find "$copy.tmp" -type d -exec chmod u+w {} +
	mv "$copy.tmp" "$copy"
fi

registry="pkg/scheduler/framework/plugins/registry.go"
want='		defaultpreemption.Name:               runtime.FactoryAdapter(fts, defaultpreemption.New),'
if [ "$(grep -cxF "$want" "$src/$registry")" != 1 ]; then
	echo "$src/$registry does not register DefaultPreemption as expected; update hack/upstream-preemption.sh" >&2
	exit 1
fi
mkdir -p "$out/overlay"
sed "s|^$want\$|		defaultpreemption.Name:               runtime.FactoryAdapter(fts, budgetguardDefaultPreemption),|" \
	"$src/$registry" >"$out/overlay/registry.go"
changed="$(diff "$src/$registry" "$out/overlay/registry.go" | grep -c '^[<>]' || true)"
if [ "$changed" != 2 ]; then
	echo "the overlay of $registry changes $changed lines, want exactly one replaced" >&2
	exit 1
fi
cat >"$out/overlay/zz_budgetguard.go" <<GO
package plugins

import "github.com/budgetguard/budgetguard/plugins/budgetpreemption/upstreamsuite"

// budgetguardDefaultPreemption is what the in-tree name DefaultPreemption
// builds in hack/upstream-preemption.sh.
var budgetguardDefaultPreemption = upstreamsuite.$VARIANT
GO
cat >"$out/overlay.json" <<JSON
{"Replace": {
  "$copy/$registry": "$out/overlay/registry.go",
  "$copy/pkg/scheduler/framework/plugins/zz_budgetguard.go": "$out/overlay/zz_budgetguard.go"
}}
JSON
cp go.mod "$out/go.mod"
cp go.sum "$out/go.sum"
echo "replace k8s.io/kubernetes => $copy" >>"$out/go.mod"

hack/build-etcd.sh
# Each test's outcome (go test -json) is kept in _output/upstream; the
# summary prints one line per upstream test and fails unless every test
# passed or is listed in docs/upstream-preemption.md as differing by design
# in this variant (and a listed test that passes fails it too).
# SKIP_LISTED=1 (what .ci/run does) leaves those listed tests out: they
# spend minutes in upstream's timeouts to confirm a known difference.
json="$out/$VARIANT.json"
skip=""
if [ -n "${SKIP_LISTED:-}" ]; then
	skip="$("$GO" run ./hack/upstream-summary -variant "$VARIANT" -doc docs/upstream-preemption.md -skip-pattern)"
fi
status=0
# -vet=off: go test's vet would analyse upstream's test packages and, for its
# facts, every package they import, all of Kubernetes under the copy (none of
# it budgetguard's code; make verify vets ours). -ldflags=-w: eight large
# test binaries link faster without DWARF. Neither changes what runs.
PATH="$root/_output/bin:$PATH" "$GO" test -json -modfile="$out/go.mod" -overlay="$out/overlay.json" -mod=mod \
	-vet=off -ldflags=-w -count=1 -timeout 60m ${TESTFLAGS:-} ${RUN:+-run "$RUN"} ${skip:+-skip "$skip"} ${PKGS:-k8s.io/kubernetes/test/integration/scheduler/preemption/...} >"$json" || status=$?
"$GO" run ./hack/upstream-summary -variant "$VARIANT" -doc docs/upstream-preemption.md <"$json" || exit 1
# go test failed for a reason the summary did not see (it reports every
# failed test and every package that failed outside a test).
if [ "$status" -ne 0 ] && ! grep -q '"Action":"fail"' "$json"; then
	echo "go test failed (exit $status) without a test result; see $json" >&2
	exit 1
fi
