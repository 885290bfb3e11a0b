#!/usr/bin/env bash
# Runs the unit tests: every package outside ./test/. The plugins run with the
# race detector; the rest, which is mostly Kubernetes-heavy wiring, runs without
# it because -race doubles its compile time.
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
# -vet=off: make verify runs go vet's analyzers over every package (golangci-lint). -ldflags=-w: test
# binaries without DWARF link faster, which counts on a cold 2-core machine.
gotestsum=("$GO" tool -modfile=hack/tools/go.mod gotestsum --format testname -- -vet=off -ldflags=-w)

mod="$("$GO" list -m)"
pkgs="$("$GO" list ./... | grep -v "^$mod/test/" || true)"
race="$(grep "^$mod/plugins/" <<<"$pkgs" || true)"
plain="$(grep -v "^$mod/plugins/" <<<"$pkgs" || true)"

status=0
if [ -n "$race" ]; then
	# shellcheck disable=SC2086 # one package per word
	"${gotestsum[@]}" -race -count=1 $race || status=1
fi
if [ -n "$plain" ]; then
	# shellcheck disable=SC2086
	"${gotestsum[@]}" -count=1 $plain || status=1
fi
exit "$status"
